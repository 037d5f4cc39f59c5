"""tl.linalg (graph/ops/linalg.py): values against numpy.linalg for every dtype, batched and
not; gradients against finite differences and forward against reverse mode (real and complex
inputs); typed errors; the passes leaving the nodes alone; save and load."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, assert_same_vectors
from rule_checks import check_hvp, rule_tests
from tenloom.graph.ops import OPS, Op, OpKind
from test_autodiff import _rand

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


def _flat(*xs):
    return tl.concatenate([tl.reshape(x, (-1,)) for x in xs])


def _matrix_function(a, uplo="L"):
    """V exp(w / 4) V^H: a gauge-invariant function of the eigenvectors."""
    w, v = tl.linalg.eigh(a, uplo)
    return (v * tl.expand_dims(tl.exp(0.25 * w), -2)) @ mH(v)


def _svd_invariant(a):
    """U f(S) Vh and |U|^2, |Vh|^2: gauge-invariant functions of the singular vectors."""
    u, s, vh = tl.linalg.svd(a, full_matrices=False)
    usv = (u * tl.expand_dims(tl.sin(s), -2)) @ vh
    return _flat(usv, tl.abs(u) ** 2, tl.abs(vh) ** 2)


GRADS.update(
    {
        "eigh_values": (lambda a: tl.linalg.eigh(a)[0], [(4, 4)]),
        "eigh_values_upper_batched": (lambda a: tl.linalg.eigh(a, "U")[0], [(2, 3, 3)]),
        "eigh_gauge_invariant": (_matrix_function, [(4, 4)]),
        "eigh_gauge_invariant_upper_batched": (lambda a: _matrix_function(a, "U"), [(2, 3, 3)]),
        "eigvalsh": (lambda a: tl.linalg.eigvalsh(a, "U"), [(2, 3, 3)]),
        "svdvals_tall": (tl.linalg.svdvals, [(4, 3)]),
        "matrix_power_neg": (lambda a: tl.linalg.matrix_power(_shift(a), -3), [(2, 3, 3)]),
        "matrix_power_5": (lambda a: tl.linalg.matrix_power(a, 5), [(3, 3)]),
        "trace": (lambda a: tl.linalg.trace(a, 1), [(2, 3, 4)]),
        "svdvals_wide_batched": (tl.linalg.svdvals, [(2, 2, 4)]),
        "svd_gauge_invariant_tall": (lambda a: _svd_invariant(a), [(4, 3)]),
        "svd_gauge_invariant_wide": (lambda a: _svd_invariant(a), [(3, 5)]),
        "svd_gauge_invariant_square_batched": (lambda a: _svd_invariant(a), [(2, 3, 3)]),
        "eigh_abs2_vectors": (lambda a: tl.abs(tl.linalg.eigh(a)[1]) ** 2, [(2, 3, 3)]),
        "qr_tall": (lambda a: _flat(*tl.linalg.qr(a)), [(5, 3)]),
        "qr_square_batched": (lambda a: _flat(*tl.linalg.qr(a)), [(2, 3, 3)]),
        "qr_wide": (lambda a: _flat(*tl.linalg.qr(a)), [(3, 5)]),
        "qr_wide_batched": (lambda a: _flat(*tl.linalg.qr(a)), [(2, 2, 4)]),
        "qr_r": (lambda a: tl.linalg.qr(a, "r"), [(4, 3)]),
    }
)
# real symmetric eigenvectors have a sign for gauge, locally constant: V itself differentiates
REAL_ONLY = {
    "eigh_vectors": (lambda a: _flat(*tl.linalg.eigh(a)), [(2, 4, 4)]),
    "svd_vectors_tall": (lambda a: _flat(*tl.linalg.svd(a, False)), [(4, 3)]),
    "svd_vectors_wide_batched": (lambda a: _flat(*tl.linalg.svd(a, False)), [(2, 3, 4)]),
}
test_gradients_match_finite_differences, test_jvp_matches_finite_differences_and_the_vjp = (
    rule_tests(GRADS, REAL_ONLY)
)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_eigh_gradient_next_to_a_degenerate_pair_is_finite_and_right(dtype):
    """A with a doubly degenerate eigenvalue: the projector onto the third (simple) eigenvector
    is smooth, and its gradient, whose degenerate pair's term is 0 * 1 / (w_2 - w_1), stays
    finite with the broadening and matches finite differences."""
    rng = np.random.default_rng(3)
    q, _ = np.linalg.qr(_rand(rng, (3, 3), dtype))
    a = (q * np.array([1.0, 1.0, 2.0])) @ q.conj().T
    c, d = _rand(rng, (3, 3), dtype), _rand(rng, (3, 3), dtype)

    def loss_np(m):
        v = np.linalg.eigh(m)[1][:, 2:]
        return float(np.sum(np.real((v @ v.conj().T) * np.conj(c))))

    x = tl.placeholder((3, 3), dtype)
    v = tl.linalg.eigh(x)[1][:, 2:]
    (g,) = tl.grad(tl.sum(tl.real((v @ mH(v)) * tl.conj(tl.asarray(c)))), [x])
    got = g.evaluate(feed={x: a})
    assert np.all(np.isfinite(got))
    numeric = (loss_np(a + 1e-6 * d) - loss_np(a - 1e-6 * d)) / 2e-6
    assert abs(float(np.real(np.vdot(got, d))) - numeric) <= 1e-6 * max(1.0, abs(numeric))


@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 3), (3, 5)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_decompositions_match_numpy_and_reconstruct(dtype, shape):
    rng = np.random.default_rng(0)
    a = _rand(rng, shape, dtype)
    q, r = tl.linalg.qr(a)
    got_q, got_r, got_r_only = tl.evaluate(q, r, tl.linalg.qr(a, mode="r"))
    want_q, want_r = np.linalg.qr(a)
    assert (q.dtype, r.dtype) == (want_q.dtype, want_r.dtype)
    assert_same_vectors(got_q, want_q, dtype)
    assert_same_vectors(got_r, want_r, dtype, rows=True)
    assert_same_vectors(got_r_only, want_r, dtype, rows=True)
    assert_close(got_q @ got_r, a, dtype)
    u, s, vh = tl.linalg.svd(a, full_matrices=False)
    got_u, got_s, got_vh, got_vals = tl.evaluate(u, s, vh, tl.linalg.svdvals(a))
    want_u, want_s, want_vh = np.linalg.svd(a, full_matrices=False)
    assert (u.dtype, s.dtype, vh.dtype) == (want_u.dtype, want_s.dtype, want_vh.dtype)
    assert_close(got_s, want_s, dtype)
    assert_close(got_vals, want_s, dtype)
    assert_close(np.abs(got_u), np.abs(want_u), dtype)
    assert_close(np.abs(got_vh), np.abs(want_vh), dtype)
    assert_close((got_u * got_s[..., None, :]) @ got_vh, a, dtype)
    if shape[-1] != shape[-2]:
        return
    for uplo in "LU":
        w, v = tl.linalg.eigh(a, UPLO=uplo)
        got_w, got_v = tl.evaluate(w, v)
        want_w, want_v = np.linalg.eigh(a, UPLO=uplo)
        assert_close(tl.linalg.eigvalsh(a, uplo).evaluate(), np.linalg.eigvalsh(a, uplo), dtype)
        assert (w.dtype, v.dtype) == (want_w.dtype, want_v.dtype)
        assert_close(got_w, want_w, dtype)
        assert_same_vectors(got_v, want_v, dtype)


def test_decomposition_errors_are_typed():
    with pytest.raises(tl.ShapeError, match=r"eigh: operand 0 of shape \(3, 4\)"):
        tl.linalg.eigh(np.ones((3, 4)))
    with pytest.raises(tl.ShapeError, match=r"qr: operand 0 of shape \(4,\) has 1 axes"):
        tl.linalg.qr(np.ones(4))
    with pytest.raises(tl.DTypeError, match="qr: not defined for dtype float16"):
        tl.linalg.qr(np.ones((2, 2), "float16"))
    with pytest.raises(tl.OptionError, match="UPLO must be 'L' or 'U'"):
        tl.linalg.eigh(np.eye(2), "X")
    with pytest.raises(tl.OptionError, match="eps must be finite"):
        tl.linalg.eigh(np.eye(2), eps=-1.0)
    with pytest.raises(tl.OptionTypeError, match="eps"):
        tl.linalg.eigh(np.eye(2), eps="big")
    # full_matrices=True (NumPy's default) is supported; tests/test_linalg_factorizations.py
    assert [t.shape for t in tl.linalg.svd(np.ones((3, 2)))] == [(3, 3), (2,), (2, 2)]
    assert len(tl.linalg.svd(np.eye(2))) == 3
    with pytest.raises(tl.ShapeError, match="svdvals: operand 0"):
        tl.linalg.svdvals(np.ones(3))
    with pytest.raises(tl.OptionError, match="qr: mode 'full' is not one of"):
        tl.linalg.qr(np.eye(2), mode="full")
    assert [t.dtype for t in tl.linalg.eigh(np.eye(2, dtype=int))] == [np.float64] * 2


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
    # three-operand networks on both sides: each merges into one network of two contractions
    ta3, tb3, tc3, td3, te3 = (tl.placeholder((4, 4), name=n) for n in "abcde")
    chain = tl.linalg.inv(ta3 @ tb3 @ tc3) @ td3 @ te3
    ops = [n.op.value for n in tl.explain(chain).graph.order if n.op.value != "placeholder"]
    assert ops == ["contract", "contract", "inv", "contract", "contract"], ops
    assert tl.dump(chain).count("network ab,bc,cd->ad") == 2
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
    w, v = tl.linalg.eigh(x, eps=1e-8)
    q, r = tl.linalg.qr(x[:, :, :2])
    outs = (w, v, q, r)
    tl.save(outs, tmp_path / "decompositions.json")
    loaded = tl.load(tmp_path / "decompositions.json")
    assert "eigh[UPLO=L, eps=1e-08]" in tl.dump(loaded[1]) and "qr[mode=reduced]" in tl.dump(r)
    for got, ref in zip(tl.evaluate(*loaded, feed={x: a}), tl.evaluate(*outs, feed={x: a})):
        assert_close(got, ref)
    tl.save(tl.compile(out, [x]), tmp_path / "plan.json")
    plan = tl.load(tmp_path / "plan.json")
    (got,) = plan(a)
    assert_close(got, want)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_second_derivatives_differentiate_the_rules_again(dtype):
    """The rules are graphs of linalg ops themselves: Hessian-vector products of a loss
    through inv, slogdet, eigh and qr match central differences of the gradient."""
    rng = np.random.default_rng(7)
    x = tl.placeholder((3, 3), dtype)
    m = _shift(x)
    q, r = tl.linalg.qr(m)
    w = tl.linalg.eigvalsh(m @ mH(m))
    loss = (
        tl.sum(tl.abs(tl.linalg.inv(m)) ** 2)
        + tl.linalg.slogdet(m)[1]
        + tl.sum(w * w) * 0.01
        + tl.sum(tl.abs(q * r) ** 2)
    )
    a, v = _rand(rng, (3, 3), dtype), _rand(rng, (3, 3), dtype)
    check_hvp(loss, x, a, v)


def test_matrix_power_and_trace_match_numpy():
    a = _matrices((2, 3, 3), "float64")
    for k in (-2, -1, 0, 1, 2, 3, 7):
        got = tl.linalg.matrix_power(a, k)
        assert got.shape == a.shape
        assert_close(got.evaluate(), np.linalg.matrix_power(a, k))
    ints = np.arange(4).reshape(2, 2)
    assert tl.linalg.matrix_power(ints, 3).dtype == np.linalg.matrix_power(ints, 3).dtype
    assert tl.linalg.matrix_power(ints, 0).dtype == ints.dtype
    assert tl.linalg.matrix_power(ints, -1).dtype == np.float64
    b = np.arange(24.0).reshape(2, 3, 4)
    for off in (-1, 0, 2):
        assert_close(tl.linalg.trace(b, off).evaluate(), np.linalg.trace(b, offset=off))
    with pytest.raises(tl.ShapeError, match="matrix_power"):
        tl.linalg.matrix_power(np.ones((2, 3)), 2)
    with pytest.raises(tl.ShapeError, match="trace: operand 0 of shape"):
        tl.linalg.trace(np.ones(3))
    with pytest.raises(tl.OptionTypeError, match="matrix_power"):
        tl.linalg.matrix_power(a, 1.5)
