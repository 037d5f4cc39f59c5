"""tl.random: a seeded Generator whose draws are NumPy's (PCG64) wrapped as lazy constants;
reproducibility, dtypes, lazy (differentiable) parameters, permutation of Tensors, errors."""

from __future__ import annotations

import numpy as np
import pytest
from tenloom.graph.ops import Op

import tenloom as tl


def _np(seed):
    return np.random.default_rng(seed)


def test_draws_are_numpys_for_the_same_seed():
    rng, ref = tl.random.default_rng(7), _np(7)
    got = rng.normal(1.5, 2.0, (3, 4)).evaluate()
    np.testing.assert_array_equal(got, ref.normal(1.5, 2.0, (3, 4)))
    np.testing.assert_array_equal(rng.uniform(-1, 3, 5).evaluate(), ref.uniform(-1, 3, 5))
    np.testing.assert_array_equal(
        rng.integers(0, 10, (2, 3)).evaluate(), ref.integers(0, 10, (2, 3))
    )
    np.testing.assert_array_equal(rng.permutation(6).evaluate(), ref.permutation(6))
    np.testing.assert_array_equal(rng.standard_normal(4).evaluate(), ref.standard_normal(4))
    np.testing.assert_array_equal(rng.random((2, 2)).evaluate(), ref.random((2, 2)))


def test_float32_draws_are_numpys_float32_generators():
    rng, ref = tl.random.default_rng(3), _np(3)
    got = rng.normal(0.5, 3.0, (4, 5), dtype="float32").evaluate()
    assert got.dtype == np.float32
    want = ref.standard_normal((4, 5), dtype=np.float32) * np.float32(3.0) + np.float32(0.5)
    np.testing.assert_array_equal(got, want)
    got = rng.uniform(2.0, 4.0, 6, dtype=np.float32).evaluate()
    assert got.dtype == np.float32 and ((got >= 2) & (got < 4)).all()
    u = ref.random(6, dtype=np.float32)
    np.testing.assert_array_equal(got, np.float32(2) + np.float32(2) * u)
    s = rng.standard_normal((2,), dtype="float32")
    assert s.dtype == np.float32
    np.testing.assert_array_equal(s.evaluate(), ref.standard_normal((2,), dtype=np.float32))


def test_reproducible_per_seed_and_fixed_once_drawn():
    a = tl.random.default_rng(11).normal(size=(3,)).evaluate()
    b = tl.random.default_rng(11).normal(size=(3,)).evaluate()
    c = tl.random.default_rng(12).normal(size=(3,)).evaluate()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    rng = tl.random.default_rng(0)
    t = rng.uniform(size=4)
    assert t.node.op is Op.CONST  # drawn at the call: a constant of the graph
    np.testing.assert_array_equal(t.evaluate(), t.evaluate())
    assert not np.array_equal(t.evaluate(), rng.uniform(size=4).evaluate())  # a new call draws anew
    seq = np.random.SeedSequence(5)
    np.testing.assert_array_equal(
        tl.random.default_rng(seq).integers(0, 100, 3).evaluate(),
        np.random.default_rng(np.random.SeedSequence(5)).integers(0, 100, 3),
    )


def test_shapes_dtypes_and_bounds():
    rng = tl.random.default_rng(1)
    assert rng.normal().shape == () and rng.normal().dtype == np.float64
    assert rng.normal(np.zeros(3), 1.0).shape == (3,)  # the parameters' broadcast shape
    assert rng.normal(0, np.ones((2, 1)), dtype="float32").shape == (2, 1)
    ints = rng.integers(5, size=1000, dtype="int16").evaluate()
    assert ints.dtype == np.int16 and ints.min() >= 0 and ints.max() < 5
    ends = rng.integers(1, 3, size=2000, endpoint=True).evaluate()
    assert set(np.unique(ends)) == {1, 2, 3}
    assert rng.integers(0, 4, dtype="uint8").dtype == np.uint8
    u = rng.uniform(size=(100,)).evaluate()
    assert ((u >= 0) & (u < 1)).all()
    assert rng.permutation(0).shape == (0,)


def test_permutation_of_arrays_and_of_lazy_tensors():
    rng, ref = tl.random.default_rng(4), _np(4)
    arr = np.arange(12).reshape(6, 2)
    np.testing.assert_array_equal(rng.permutation(arr).evaluate(), ref.permutation(arr))
    np.testing.assert_array_equal(rng.permutation([3, 1, 2]).evaluate(), ref.permutation([3, 1, 2]))
    x = tl.placeholder((6, 2), name="x")
    p = rng.permutation(x)  # lazy: the rows of whatever x is fed, in the drawn order
    order = ref.permutation(6)
    vals = np.arange(12.0).reshape(6, 2)
    np.testing.assert_array_equal(p.evaluate(feed={x: vals}), vals[order])
    g = tl.grad(tl.sum(p * np.arange(12.0).reshape(6, 2)), x).evaluate(feed={x: vals})
    np.testing.assert_array_equal(g[order], np.arange(12.0).reshape(6, 2))


def test_lazy_parameters_are_differentiable():
    rng, ref = tl.random.default_rng(9), _np(9)
    loc = tl.placeholder((3,), name="loc")
    scale = tl.placeholder((), name="scale")
    draw = rng.normal(loc, scale)
    assert draw.shape == (3,)
    z = ref.standard_normal(3)
    feed = {loc: np.array([1.0, 2.0, 3.0]), scale: np.array(2.0)}
    np.testing.assert_allclose(draw.evaluate(feed=feed), feed[loc] + 2.0 * z, rtol=1e-15)
    gl, gs = tl.grad(tl.sum(draw), [loc, scale])
    np.testing.assert_allclose(gl.evaluate(feed=feed), np.ones(3))
    np.testing.assert_allclose(gs.evaluate(feed=feed), z.sum(), rtol=1e-14)
    lo = tl.placeholder((), name="lo")
    u = rng.uniform(lo, 5.0, size=(4,))
    assert u.shape == (4,)
    w = ref.random(4)
    np.testing.assert_allclose(u.evaluate(feed={lo: np.array(1.0)}), 1.0 + 4.0 * w, rtol=1e-15)
    np.testing.assert_allclose(
        tl.grad(tl.sum(u), lo).evaluate(feed={lo: np.array(1.0)}), (1 - w).sum(), rtol=1e-14
    )


def test_errors_are_typed():
    rng = tl.random.default_rng(0)
    with pytest.raises(tl.DTypeError, match="random.normal: dtype int32"):
        rng.normal(size=2, dtype="int32")
    with pytest.raises(tl.DTypeError, match="random.uniform: dtype complex128"):
        rng.uniform(size=2, dtype="complex128")
    with pytest.raises(tl.DTypeError, match="random.integers: dtype float64"):
        rng.integers(0, 3, dtype="float64")
    with pytest.raises(tl.OptionTypeError, match="random.standard_normal: dtype"):
        rng.standard_normal(2, dtype="nonsense")
    with pytest.raises(tl.OptionError, match="random.normal: size .* negative"):
        rng.normal(size=(2, -1))
    with pytest.raises(tl.OptionTypeError, match="random.random: size 2.5"):
        rng.random(2.5)
    with pytest.raises(tl.OptionError, match="random.normal: scale -1"):
        rng.normal(0.0, -1.0)
    with pytest.raises(tl.OptionError, match="random.integers"):
        rng.integers(5, 2)  # low >= high: NumPy's ValueError
    with pytest.raises(tl.OptionTypeError, match="random.integers: low and high"):
        rng.integers(tl.asarray(3))
    with pytest.raises(tl.OptionError, match="random.permutation: -2 is negative"):
        rng.permutation(-2)
    with pytest.raises(tl.OptionTypeError, match="random.permutation: give an int"):
        rng.permutation(np.float64(2.5))
    with pytest.raises(tl.OptionError, match="random.permutation: a 0-d Tensor"):
        rng.permutation(tl.asarray(3.0))
    with pytest.raises(tl.OptionError, match="random.default_rng"):
        tl.random.default_rng(-1)  # NumPy: seeds must be non-negative
    with pytest.raises(tl.OptionTypeError, match="random.default_rng: the seed"):
        tl.random.default_rng(tl.asarray(1))
    with pytest.raises(tl.OptionTypeError, match="random.Generator"):
        tl.random.Generator(3)
