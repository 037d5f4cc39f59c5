"""The NN building blocks (graph/ops/nn.py): relu, sigmoid, softmax, log_softmax, logsumexp and
one_hot against scipy.special / NumPy (dtypes, axes, keepdims, special values, large values),
their derivatives (finite differences and forward vs reverse), their errors, and the backward
graph of a softmax-cross-entropy MLP step: no contraction with a ones vector, no derivative of
the max shift."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.special as sp
from helpers import device_params
from tenloom.graph.ops import Op
from tenloom.graph.ops.leaf import full_value
from tenloom.graph.traverse import toposort
from test_autodiff import check_grads
from test_jvp import MODES, check_jvp

import tenloom as tl

FLOATS = ["float32", "float64"]
TOL = {"float32": 2e-6, "float64": 1e-13}


def _x(shape, dtype, scale=3.0, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def _close(got, want, dtype):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=TOL[str(dtype)], atol=TOL[str(dtype)])


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


# ---- values ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
def test_relu_and_sigmoid_match_numpy_and_expit(dtype):
    x = _x((3, 4, 5), dtype, scale=20.0)
    x[0, 0, :3] = [0.0, -0.0, 1e-30]
    _close(tl.relu(x).evaluate(), np.maximum(x, 0), dtype)
    _close(tl.sigmoid(x).evaluate(), sp.expit(x), dtype)
    # far tails keep relative accuracy (1 / (1 + exp(-x)) would lose it below -40)
    tails = np.array([-700.0, -100.0, -40.0, 40.0, 700.0], dtype)
    got = tl.sigmoid(tails).evaluate()
    tiny = np.finfo(dtype).tiny  # below it scipy's float32 loop flushes to 0, this is subnormal
    np.testing.assert_allclose(got, sp.expit(tails), rtol=TOL[dtype] * 4, atol=tiny)


def test_relu_and_sigmoid_special_values_and_dtypes():
    sv = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, -5.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no inf * 0 on the way (NumPy's maximum warns not)
        got = tl.relu(sv).evaluate()
    np.testing.assert_array_equal(got, np.maximum(sv, 0))
    assert not np.signbit(got[3:]).any()  # +0.0 for every non-positive x
    assert tl.relu(sv.astype("float32")).dtype == np.float32
    np.testing.assert_allclose(tl.sigmoid(sv).evaluate(), sp.expit(sv), rtol=1e-15)
    ints = np.array([-3, 0, 4], "int32")
    r = tl.relu(ints).evaluate()
    assert r.dtype == np.int32 and r.tolist() == [0, 0, 4]
    s = tl.sigmoid(ints).evaluate()
    assert s.dtype == np.float64
    np.testing.assert_allclose(s, sp.expit(ints.astype(float)), rtol=1e-15)
    assert tl.sigmoid(np.array([True])).dtype == np.float64
    z = np.array([0.3 + 0.2j, -1.5 + 2.0j], "complex128")
    np.testing.assert_allclose(tl.sigmoid(z).evaluate(), 1 / (1 + np.exp(-z)), rtol=1e-14)
    assert tl.sigmoid(z.astype("complex64")).dtype == np.complex64


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (0, 1, 2), ()], ids=lambda a: f"axis={a}")
@pytest.mark.parametrize("keepdims", [False, True])
def test_logsumexp_matches_scipy(dtype, axis, keepdims):
    x = _x((3, 4, 5), dtype, scale=30.0)
    got = tl.logsumexp(x, axis=axis, keepdims=keepdims).evaluate()
    want = sp.logsumexp(x, axis=axis, keepdims=keepdims)
    assert got.shape == np.shape(want)
    _close(got, np.asarray(want, dtype), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis", [0, 1, -1, (0, 1), None], ids=lambda a: f"axis={a}")
def test_softmax_and_log_softmax_match_scipy(dtype, axis):
    x = _x((4, 6), dtype, scale=30.0)
    _close(tl.softmax(x, axis=axis).evaluate(), sp.softmax(x, axis=axis), dtype)
    _close(tl.log_softmax(x, axis=axis).evaluate(), sp.log_softmax(x, axis=axis), dtype)


def test_the_default_axis_is_the_last_as_jax():
    x = _x((3, 5), "float64")
    np.testing.assert_allclose(tl.softmax(x).evaluate(), sp.softmax(x, axis=-1), rtol=1e-14)
    np.testing.assert_allclose(tl.log_softmax(x).evaluate(), sp.log_softmax(x, axis=-1), rtol=1e-14)
    np.testing.assert_allclose(tl.logsumexp(x).evaluate(), sp.logsumexp(x), rtol=1e-14)


@pytest.mark.parametrize("dtype", FLOATS)
def test_large_values_do_not_overflow(dtype):
    big = np.finfo(dtype).max / 4
    x = np.array([[big, big * 0.5, -big], [1e4, 1e4 + 1, 1e4 - 3], [-1e4, -1e4 - 2, -1e4]], dtype)
    for f, g in [(tl.logsumexp, sp.logsumexp), (tl.log_softmax, sp.log_softmax)]:
        got = f(x, axis=1).evaluate()
        assert np.isfinite(got[1:]).all()
        np.testing.assert_allclose(got, g(x, axis=1), rtol=TOL[dtype] * 4)
    got = tl.softmax(x, axis=1).evaluate()
    np.testing.assert_allclose(got, sp.softmax(x, axis=1), rtol=TOL[dtype] * 4, atol=1e-30)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS)
def test_rows_of_inf_and_nan_follow_scipy(dtype):
    inf, nan = np.inf, np.nan
    x = np.array(
        [[-inf, -inf, -inf], [inf, 1.0, 2.0], [nan, 1.0, 2.0], [-inf, 0.0, 1.0], [inf, inf, 0.0]],
        dtype,
    )
    for f, g in [
        (tl.logsumexp, sp.logsumexp),
        (tl.log_softmax, sp.log_softmax),
        (tl.softmax, sp.softmax),
    ]:
        got = _quiet(f(x, axis=1).evaluate)  # log(0), inf - inf: NumPy's warnings, as NumPy
        want = _quiet(g, x, axis=1)
        np.testing.assert_allclose(got, want, rtol=TOL[dtype], err_msg=f.__name__)
    assert _quiet(tl.logsumexp(x, axis=1).evaluate)[0] == -np.inf


def test_empty_reductions_and_integer_inputs():
    e = np.zeros((0, 3))
    got = tl.logsumexp(e, axis=0).evaluate()
    np.testing.assert_array_equal(got, _quiet(sp.logsumexp, e, axis=0))  # -inf
    assert tl.logsumexp(e, axis=1).shape == (0,)
    assert tl.softmax(e, axis=0).shape == tl.log_softmax(e, axis=0).shape == (0, 3)
    ints = np.array([[1, 2, 3], [0, -5, 7]], "int16")
    for f, g in [(tl.softmax, sp.softmax), (tl.log_softmax, sp.log_softmax)]:
        got = f(ints, axis=1).evaluate()
        assert got.dtype == np.float64  # integers compute in float64, as mean
        np.testing.assert_allclose(got, g(ints.astype(float), axis=1), rtol=1e-14)
    got = tl.logsumexp(ints, axis=0).evaluate()
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, sp.logsumexp(ints, axis=0), rtol=1e-14)
    h = np.array([1.0, 2.0, 3.0], "float16")
    assert tl.softmax(h).dtype == tl.logsumexp(h).dtype == np.float16
    np.testing.assert_allclose(tl.softmax(h).evaluate(), sp.softmax(h), rtol=2e-3)


def test_batched_inputs_and_lazy_operands():
    x = tl.placeholder((2, 3, 4), "float32", name="x")
    val = _x((2, 3, 4), "float32")
    got = tl.evaluate(
        tl.log_softmax(x, axis=1), tl.logsumexp(x, axis=(1, 2), keepdims=True), feed={x: val}
    )
    _close(got[0], sp.log_softmax(val, axis=1), "float32")
    _close(got[1], sp.logsumexp(val, axis=(1, 2), keepdims=True), "float32")


def test_one_hot_matches_jax_definition():
    idx = np.array([[0, 3], [2, 1]])
    got = tl.one_hot(idx, 4).evaluate()
    assert got.shape == (2, 2, 4) and got.dtype == np.float32
    np.testing.assert_array_equal(got, np.eye(4, dtype=np.float32)[idx])
    # out of range (negative included) gives a row of zeros: lazy indices cannot be checked
    got = tl.one_hot(np.array([-1, 4, 1], "int8"), 4, dtype="int32").evaluate()
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, [[0, 0, 0, 0], [0, 0, 0, 0], [0, 1, 0, 0]])
    p = tl.placeholder((3,), "uint8", name="i")
    got = tl.one_hot(p, 300, "bool").evaluate(feed={p: np.array([255, 0, 7], "uint8")})
    assert got.dtype == bool and got.sum() == 3 and got[0, 255] and not got[0, 254]
    assert tl.one_hot(np.array(2), 3).shape == (3,)
    assert tl.one_hot(np.zeros((2,), "int64"), 0).shape == (2, 0)


# ---- errors ----------------------------------------------------------------------------------


def test_errors_are_typed_and_name_the_op():
    z = np.ones((2, 3), "complex128")
    for f in (tl.softmax, tl.log_softmax, tl.logsumexp):
        with pytest.raises(tl.DTypeError, match=f"{f.__name__}: operand 0 of shape \\(2, 3\\)"):
            f(z)
    with pytest.raises(tl.DTypeError, match="relu: .*complex128"):
        tl.relu(z)
    with pytest.raises(tl.ShapeError, match="softmax: axis 2 is out of bounds .*\\(2, 3\\)"):
        tl.softmax(np.ones((2, 3)), axis=2)
    with pytest.raises(tl.OptionTypeError, match="logsumexp: axis 1.5"):
        tl.logsumexp(np.ones((2, 3)), axis=1.5)
    with pytest.raises(tl.OptionTypeError, match="logsumexp: keepdims"):
        tl.logsumexp(np.ones((2, 3)), keepdims="yes")
    with pytest.raises(
        tl.DTypeError, match="one_hot: indices of shape \\(2,\\) have dtype float64"
    ):
        tl.one_hot(np.array([0.0, 1.0]), 3)
    with pytest.raises(tl.DTypeError, match="one_hot: .*bool"):
        tl.one_hot(np.array([True]), 3)
    with pytest.raises(tl.OptionError, match="one_hot: num_classes=-1 is negative"):
        tl.one_hot(np.array([0]), -1)
    with pytest.raises(tl.OptionTypeError, match="one_hot: num_classes"):
        tl.one_hot(np.array([0]), 2.0)
    with pytest.raises(tl.OptionTypeError, match="one_hot: num_classes must be a Python int"):
        tl.one_hot(np.array([0]), tl.asarray(3))
    with pytest.raises(tl.DTypeError):
        tl.one_hot(np.array([0]), 3, dtype="not a dtype")


# ---- derivatives -----------------------------------------------------------------------------

FUNCS = {
    "relu": lambda x: tl.relu(x),
    "sigmoid": lambda x: tl.sigmoid(3.0 * x),
    "softmax_1": lambda x: tl.softmax(x, axis=1),
    "softmax_0": lambda x: tl.softmax(x, axis=0),
    "log_softmax": lambda x: tl.log_softmax(x, axis=-1),
    "log_softmax_all": lambda x: tl.log_softmax(x, axis=None),
    "logsumexp": lambda x: tl.logsumexp(x, axis=1),
    "logsumexp_keep": lambda x: tl.logsumexp(x, axis=(0, 1), keepdims=True),
    "logsumexp_large": lambda x: tl.logsumexp(x * 300.0 + 1e4, axis=0),
}


@pytest.mark.parametrize("name", list(FUNCS))
def test_gradients_match_finite_differences(name):
    check_grads(FUNCS[name], [(3, 4)])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["sigmoid", "softmax_1", "log_softmax", "logsumexp"])
def test_forward_mode_matches_finite_differences_and_reverse(name, mode):
    check_jvp(FUNCS[name], [(3, 4)], mode=mode)


def test_complex_sigmoid_gradient_and_derivatives_at_kinks():
    check_grads(lambda x: tl.sigmoid(x), [(2, 3)], dtype="complex128")
    check_jvp(lambda x: tl.sigmoid(x), [(2, 3)], dtype="complex128")
    x = tl.placeholder((3,), name="x")
    at = {x: np.array([0.0, -1.0, 2.0])}
    g_relu = tl.grad(tl.sum(tl.relu(x)), x).evaluate(feed=at)
    np.testing.assert_array_equal(g_relu, [0.0, 0.0, 1.0])  # 0 at 0, as JAX and PyTorch
    g_sig = tl.grad(tl.sum(tl.sigmoid(x)), x).evaluate(feed=at)
    s = sp.expit(at[x])
    np.testing.assert_allclose(g_sig, s * (1 - s), rtol=1e-14)  # 0.25 at 0


def test_derivatives_stay_finite_where_exp_would_overflow():
    x = tl.placeholder((2, 3), name="x")
    val = np.array([[800.0, -800.0, 0.0], [1e5, 1e5 - 1, 1e5 - 2]])
    for f in (tl.sigmoid, tl.softmax, tl.log_softmax, lambda v: tl.logsumexp(v, axis=1)):
        g = tl.grad(
            tl.sum(
                f(x) * np.arange(1.0, 7.0).reshape(2, 3)[:2, : f(x).shape[-1]]
                if f(x).ndim == 2
                else f(x)
            ),
            x,
        ).evaluate(feed={x: val})
        assert np.isfinite(g).all()
    g = tl.grad(tl.sum(tl.logsumexp(x, axis=1)), x).evaluate(feed={x: val})
    np.testing.assert_allclose(g, sp.softmax(val, axis=1), rtol=1e-14)


def test_second_derivative_of_logsumexp():
    x = tl.placeholder((4,), name="x")
    val = np.array([0.3, -1.0, 2.0, 0.5])
    v = np.array([1.0, 0.0, -2.0, 0.5])
    (hv,) = tl.hvp(tl.logsumexp(x), [x], [v])
    p = sp.softmax(val)
    want = (np.diag(p) - np.outer(p, p)) @ v
    np.testing.assert_allclose(hv.evaluate(feed={x: val}), want, rtol=1e-12, atol=1e-15)


# ---- the MLP step's backward graph -----------------------------------------------------------


def _mlp(by_hand: bool, b=6, d=12, h=8, c=5):
    f32 = np.float32
    x = tl.placeholder((b, d), f32, name="x")
    y = tl.placeholder((b, c), f32, name="y")
    ps = [
        tl.placeholder(s, f32, name=n)
        for s, n in [((d, h), "w1"), ((h,), "b1"), ((h, c), "w2"), ((c,), "b2")]
    ]
    w1, b1, w2, b2 = ps
    z = tl.relu(x @ w1 + b1) @ w2 + b2
    if by_hand:
        m = tl.max(z, axis=1, keepdims=True)
        logp = z - m - tl.log(tl.sum(tl.exp(z - m), axis=1, keepdims=True))
    else:
        logp = tl.log_softmax(z, axis=1)
    loss = -tl.sum(y * logp) / b
    return loss, tl.grad(loss, ps), [x, y, *ps]


def _is_ones(n) -> bool:
    if n.op is Op.FULL:
        return n.ndim > 0 and full_value(n.attrs) == 1
    if n.op is Op.CONST:
        return n.ndim > 0 and bool(np.all(n.attrs.constant.value == 1))
    return False


def _ones_contractions(nodes) -> list:
    return [
        n
        for n in toposort(nodes)
        if n.op in (Op.EINSUM, Op.CONTRACT) and any(_is_ones(i) for i in n.inputs)
    ]


@pytest.mark.parametrize("by_hand", [False, True], ids=["log_softmax", "max_by_hand"])
def test_mlp_backward_graph_has_no_contraction_with_ones(by_hand):
    loss, grads, inputs = _mlp(by_hand)
    traced = [g.node for g in grads]
    assert not _ones_contractions(traced)
    plan = tl.compile([loss, *grads], inputs)
    optimized = list(plan.optimized.outputs)
    assert not _ones_contractions(optimized), tl.dump(*grads)
    tie_masks = [
        n for n in toposort(optimized) if n.op is Op.EQ and any(i.op is Op.MAX for i in n.inputs)
    ]
    assert bool(tie_masks) == by_hand  # log_softmax's max shift is not differentiated
    # the same gradients as the hand-derived ones
    rng = np.random.default_rng(1)
    vals = [rng.standard_normal(i.shape).astype(np.float32) for i in inputs]
    vals[1] = np.eye(5, dtype=np.float32)[rng.integers(0, 5, 6)]
    x, y, w1, b1, w2, b2 = vals
    a = x @ w1 + b1
    hid = np.maximum(a, 0)
    dz = (sp.softmax(hid @ w2 + b2, axis=1) - y) / 6
    dh = (dz @ w2.T) * (a > 0)
    want = [x.T @ dh, dh.sum(0), hid.T @ dz, dz.sum(0)]
    for g, w in zip(plan(*vals)[1:], want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)


def test_a_sum_differentiates_to_a_broadcast_not_an_outer_product_with_ones():
    """The rule behind the MLP test (graph/ops/contract.py _einsum_vjp): a label of one operand
    found nowhere else is spread by broadcast_to."""
    x = tl.placeholder((3, 4), name="x")
    w = tl.placeholder((3,), name="w")
    g = tl.grad(tl.sum(tl.sum(x, axis=1) * w), x)
    nodes = toposort([g.node])
    assert not _ones_contractions([g.node])
    assert any(n.op is Op.BROADCAST for n in nodes)
    val = np.arange(3.0)
    np.testing.assert_array_equal(
        g.evaluate(feed={x: np.zeros((3, 4)), w: val}), np.repeat(val[:, None], 4, 1)
    )
    # a repeated lone label (a trace) still couples through the identity
    m = tl.placeholder((3, 3), name="m")
    gt = tl.grad(tl.einsum("ii->", m), m).evaluate(feed={m: np.zeros((3, 3))})
    np.testing.assert_array_equal(gt, np.eye(3))


@pytest.mark.parametrize("device", device_params(include_cpu=False))
def test_blocks_and_their_gradients_run_on_devices(device):
    """No rule of their own: the composites and their derivatives run wherever the ops do."""
    x = tl.placeholder((4, 5), "float32", name="x")
    val = _x((4, 5), "float32")
    y = tl.one_hot(np.array([0, 1, 4, 2]), 5)
    loss = (
        -tl.sum(y * tl.log_softmax(tl.relu(x) * 2.0 + tl.sigmoid(x), axis=1))
        + tl.sum(tl.logsumexp(x, axis=0))
        + tl.sum(tl.softmax(x) * y)
    )
    g = tl.grad(loss, x)
    on_cpu = tl.evaluate(loss, g, feed={x: val})
    there = tl.evaluate(loss, g, feed={x: val}, device=device)
    for a, b in zip(there, on_cpu):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
