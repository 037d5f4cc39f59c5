"""tl.linalg (graph/ops/linalg.py): values against numpy.linalg for every dtype, batched and
not; gradients against finite differences and forward against reverse mode (real and complex
inputs); typed errors; the passes leaving the nodes alone; save and load."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close
from tenloom.graph.ops import OPS, Op, OpKind
from test_autodiff import _rand, check_grads
from test_jvp import MODES, check_jvp

import tenloom as tl

DTYPES = ["float32", "float64", "complex64", "complex128"]
SHAPES = [(3, 3), (2, 4, 4), (2, 1, 3, 3)]


def _matrices(shape, dtype, seed=0):
    """Well-conditioned random matrices: normal entries plus n on the diagonal."""
    rng = np.random.default_rng(seed)
    a = _rand(rng, shape, "complex128" if np.dtype(dtype).kind == "c" else "float64")
    return (a + shape[-1] * np.eye(shape[-1])).astype(dtype)


def _hpd(shape, dtype, seed=0):
    """Hermitian positive-definite matrices."""
    a = _matrices(shape, dtype, seed).astype("complex128" if np.dtype(dtype).kind == "c" else "f8")
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + np.eye(shape[-1])).astype(dtype)


def mH(x):
    return tl.conj(tl.moveaxis(x, -1, -2))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_values_match_numpy(dtype, shape):
    a = _matrices(shape, dtype)
    h = _hpd(shape, dtype)
    b = _rand(np.random.default_rng(1), shape[:-1] + (2,), dtype)
    cases = [
        (tl.linalg.inv(a), np.linalg.inv(a)),
        (tl.linalg.solve(a, b), np.linalg.solve(a, b)),
        (tl.linalg.det(a), np.linalg.det(a)),
        (tl.linalg.cholesky(h), np.linalg.cholesky(h)),
        *zip(tl.linalg.slogdet(a), np.linalg.slogdet(a)),
    ]
    got = tl.evaluate(*(t for t, _ in cases))
    for g, (t, want) in zip(got, cases):
        assert t.shape == want.shape and t.dtype == want.dtype, (t, want.shape, want.dtype)
        assert_close(g, np.asarray(want), dtype)


def test_solve_follows_numpy_2_for_vectors_and_broadcasts_batches():
    a = _matrices((2, 3, 3), "float64")
    v = np.arange(3.0)
    assert_close(tl.linalg.solve(a[0], v).evaluate(), np.linalg.solve(a[0], v))
    # a 1-D b is one vector, solved against every matrix of the stack
    assert_close(tl.linalg.solve(a, v).evaluate(), np.linalg.solve(a, v))
    b = np.arange(6.0).reshape(3, 2)
    assert tl.linalg.solve(a, b).shape == (2, 3, 2)
    assert_close(tl.linalg.solve(a, b).evaluate(), np.linalg.solve(a, b))
    assert_close(
        tl.linalg.solve(a[:1], np.stack([b, b])).evaluate(),
        np.linalg.solve(a[:1], np.stack([b, b])),
    )


def test_integers_are_promoted_and_float16_is_rejected():
    a = np.array([[2, 1], [1, 3]])
    for fn in (tl.linalg.inv, tl.linalg.det, tl.linalg.cholesky):
        np_fn = getattr(np.linalg, fn.__name__)
        out = fn(a)
        assert out.dtype == np.float64
        assert_close(out.evaluate(), np_fn(a))
    assert tl.linalg.solve(a, np.array([1, 2])).dtype == np.float64
    assert [t.dtype for t in tl.linalg.slogdet(a)] == [np.float64, np.float64]
    assert [t.dtype for t in tl.linalg.slogdet(a.astype("complex64"))] == ["complex64", "float32"]
    with pytest.raises(tl.DTypeError, match="inv: not defined for dtype float16"):
        tl.linalg.inv(a.astype("float16"))


def test_bad_shapes_are_typed_errors_naming_op_and_shapes():
    with pytest.raises(tl.ShapeError, match=r"inv: operand 0 of shape \(2, 3\) is not a"):
        tl.linalg.inv(np.ones((2, 3)))
    with pytest.raises(tl.ShapeError, match=r"det: operand 0 of shape \(3,\) has 1 axes"):
        tl.linalg.det(np.ones(3))
    with pytest.raises(tl.ShapeError, match="cholesky"):
        tl.linalg.cholesky(np.ones((4, 3)))
    with pytest.raises(tl.ShapeError, match="slogdet_sign"):
        tl.linalg.slogdet(np.ones((1, 4, 3)))
    with pytest.raises(tl.ShapeError, match=r"solve: operand 1 of shape \(4,\)"):
        tl.linalg.solve(np.eye(3), np.ones(4))
    with pytest.raises(tl.ShapeError, match=r"solve: operand 1 of shape \(4, 2\) has 4 rows"):
        tl.linalg.solve(np.eye(3), np.ones((4, 2)))
    with pytest.raises(tl.ShapeError, match="solve: batch axes"):
        tl.linalg.solve(np.ones((2, 3, 3)), np.ones((3, 3, 1)))


def test_singular_matrix_fails_at_run_time_as_numpy():
    with pytest.raises(tl.EvaluationError):
        tl.linalg.inv(np.zeros((2, 2))).evaluate()
    sign, logabs = tl.evaluate(*tl.linalg.slogdet(np.zeros((2, 2))))
    assert sign == 0 and logabs == -np.inf


# ---- derivatives ---------------------------------------------------------------------------


def _shift(a):
    """a + 3 I: well conditioned for the random inputs of the gradient checks."""
    return a + 3.0 * tl.eye(a.shape[-1], dtype=a.dtype)


def _chol(a):
    return tl.linalg.cholesky(a @ mH(a) + tl.eye(a.shape[-1], dtype=a.dtype))


GRADS = {
    "inv": (lambda a: tl.linalg.inv(_shift(a)), [(3, 3)]),
    "inv_batched": (lambda a: tl.linalg.inv(_shift(a)), [(2, 3, 3)]),
    "solve": (lambda a, b: tl.linalg.solve(_shift(a), b), [(3, 3), (3, 2)]),
    "solve_vector": (lambda a, b: tl.linalg.solve(_shift(a), b), [(3, 3), (3,)]),
    "solve_broadcast": (lambda a, b: tl.linalg.solve(_shift(a), b), [(3, 3), (2, 3, 2)]),
    "solve_broadcast_a": (lambda a, b: tl.linalg.solve(_shift(a), b), [(2, 1, 3, 3), (3, 3, 1)]),
    "det": (lambda a: tl.linalg.det(_shift(a)), [(3, 3)]),
    "det_batched": (lambda a: tl.linalg.det(_shift(a)), [(2, 3, 3)]),
    "slogdet_logabs": (lambda a: tl.linalg.slogdet(_shift(a))[1], [(2, 3, 3)]),
    "slogdet_sign": (lambda a: tl.linalg.slogdet(_shift(a))[0] * 2.0, [(3, 3)]),
    "cholesky": (_chol, [(3, 3)]),
    "cholesky_batched": (_chol, [(2, 3, 3)]),
    # cholesky reads the lower triangle and the real part of the diagonal: exact for any input
    "cholesky_lower_triangle": (
        lambda a: tl.linalg.cholesky(a * 0.1 + 3.0 * tl.eye(3, dtype=a.dtype)),
        [(3, 3)],
    ),
    "inv_of_product": (lambda a, b: tl.linalg.inv(_shift(a @ b)) @ b, [(3, 3), (3, 3)]),
}


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("name", list(GRADS))
def test_gradients_match_finite_differences(name, dtype):
    f, shapes = GRADS[name]
    check_grads(f, shapes, dtype)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("name", list(GRADS))
def test_jvp_matches_finite_differences_and_the_vjp(name, dtype, mode):
    f, shapes = GRADS[name]
    check_jvp(f, shapes, dtype, mode=mode)


def test_gradient_of_logdet_is_the_inverse_transpose():
    a = _matrices((3, 3), "float64")
    x = tl.placeholder((3, 3))
    (g,) = tl.grad(tl.linalg.slogdet(x)[1], [x])
    assert_close(g.evaluate(feed={x: a}), np.linalg.inv(a).T)


# ---- the passes, save/load, devices ----------------------------------------------------------


def test_linalg_nodes_are_barriers_the_networks_form_around():
    rng = np.random.default_rng(0)
    a, b, c, d = (rng.standard_normal((4, 4)) for _ in range(4))
    ta, tb, tc, td = (tl.placeholder((4, 4), name=n) for n in "abcd")
    out = tl.linalg.inv(ta @ tb + 4.0 * tl.eye(4)) @ tc @ td
    feed = {ta: a, tb: b, tc: c, td: d}
    want = np.linalg.inv(a @ b + 4 * np.eye(4)) @ c @ d
    assert_close(out.evaluate(feed=feed), want)
    assert_close(
        (tl.linalg.inv(tl.asarray(a) @ b) @ c @ d).evaluate(), np.linalg.inv(a @ b) @ c @ d
    )
    text = tl.dump(out)
    assert text.count("inv(") == 1 and "contract[" in text
    assert all(OPS[op].kind is OpKind.LINALG for op in (Op.INV, Op.SOLVE, Op.CHOLESKY))


def test_constant_operands_fold_and_cost_counts():
    a = _matrices((3, 3), "float64")
    t = tl.linalg.det(tl.asarray(a) * 2.0)
    assert_close(t.evaluate(), np.linalg.det(2 * a))
    assert "flop" in str(tl.explain(tl.linalg.inv(tl.placeholder((8, 8))) * 2.0)).lower()


def test_save_and_load_round_trip(tmp_path):
    x = tl.placeholder((2, 3, 3), name="x")
    sign, logabs = tl.linalg.slogdet(x)
    scale = tl.reshape(sign * logabs + tl.linalg.det(x), (2, 1, 1))
    out = tl.linalg.solve(x, tl.linalg.cholesky(x @ mH(x) + tl.eye(3))) * scale
    a = _matrices((2, 3, 3), "float64")
    want = out.evaluate(feed={x: a})
    tl.save(out, tmp_path / "graph.json")
    back = tl.load(tmp_path / "graph.json")
    assert "cholesky(" in tl.dump(back) and "slogdet_sign(" in tl.dump(back)
    tl.save(tl.compile(out, [x]), tmp_path / "plan.json")
    plan = tl.load(tmp_path / "plan.json")
    (got,) = plan(a)
    assert_close(got, want)
