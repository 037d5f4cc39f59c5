"""tl.linalg's factorizations (graph/ops/factorizations.py) and the modes added to qr and svd
(graph/ops/decompositions.py): values against NumPy and SciPy for every dtype, batched and
not; reconstruction, orthogonality, triangles and sign conventions; gradients against finite
differences and forward against reverse mode (real and complex), with losses invariant under
the gauge of the extra columns; the gesdd -> gesvd fallback; typed errors; OpenCL."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from helpers import assert_close, assert_same_vectors, on_cpu, opencl_device
from rule_checks import check_hvp, rule_tests
from tenloom.graph.ops import decompositions
from test_autodiff import _rand, check_grads

import tenloom as tl

DTYPES = ["float32", "float64", "complex64", "complex128"]
RECT = [(5, 3), (3, 5), (2, 4, 2), (2, 2, 4)]


def mH(x):
    return tl.conj(tl.moveaxis(x, -1, -2))


def _np_h(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _eye_like(x, n):
    return np.broadcast_to(np.eye(n, dtype=x.dtype), x.shape[:-2] + (n, n))


def _flat(*xs):
    return tl.concatenate([tl.reshape(x, (-1,)) for x in xs])


def _each(fn, a):
    """``fn`` on each matrix of a stack, the results stacked (for SciPy's 2-D functions)."""
    mats = a.reshape((-1,) + a.shape[-2:])
    outs = [fn(m) for m in mats]
    return tuple(
        np.stack([o[i] for o in outs]).reshape(a.shape[:-2] + outs[0][i].shape) for i in (0, 1)
    )


# ---- qr's modes and svd's full_matrices --------------------------------------------------


@pytest.mark.parametrize("shape", RECT)
@pytest.mark.parametrize("dtype", DTYPES)
def test_qr_complete_and_raw_match_numpy(dtype, shape):
    a = _rand(np.random.default_rng(0), shape, dtype)
    q, r = tl.linalg.qr(a, mode="complete")
    h, tau = tl.linalg.qr(a, mode="raw")
    got = tl.evaluate(q, r, h, tau)
    want = (*np.linalg.qr(a, mode="complete"), *np.linalg.qr(a, mode="raw"))
    for t, g, w in zip((q, r, h, tau), got, want):
        assert (t.shape, t.dtype) == (w.shape, w.dtype)
        assert_close(g, w, dtype)
    m = shape[-2]
    assert_close(_np_h(got[0]) @ got[0], _eye_like(got[0], m), dtype)
    assert_close(got[0] @ got[1], a, dtype)
    assert_close(np.triu(got[1]), got[1], dtype)


@pytest.mark.parametrize("shape", RECT)
@pytest.mark.parametrize("dtype", DTYPES)
def test_svd_full_matrices_match_numpy(dtype, shape):
    a = _rand(np.random.default_rng(1), shape, dtype)
    u, s, vh = tl.linalg.svd(a)  # full_matrices=True, NumPy's default
    got_u, got_s, got_vh = tl.evaluate(u, s, vh)
    want_u, want_s, want_vh = np.linalg.svd(a)
    assert (u.shape, s.shape, vh.shape) == (want_u.shape, want_s.shape, want_vh.shape)
    assert (u.dtype, s.dtype, vh.dtype) == (want_u.dtype, want_s.dtype, want_vh.dtype)
    m, n = shape[-2:]
    k = min(m, n)
    assert_close(got_s, want_s, dtype)
    if on_cpu():  # the same LAPACK call: the same phases and bases
        assert_close(got_u, want_u, dtype)
        assert_close(got_vh, want_vh, dtype)
    else:  # cuSOLVER: the first K up to phases; the extra columns span the same complement
        assert_same_vectors(got_u[..., :k], want_u[..., :k], dtype)
        assert_same_vectors(got_vh[..., :k, :], want_vh[..., :k, :], dtype, rows=True)
    assert_close(_np_h(got_u) @ got_u, _eye_like(got_u, m), dtype)
    assert_close(got_vh @ _np_h(got_vh), _eye_like(got_vh, n), dtype)
    assert_close((got_u[..., :k] * got_s[..., None, :]) @ got_vh[..., :k, :], a, dtype)
    # compute_uv=False and a square matrix keep the reduced node
    assert tl.linalg.svd(a, compute_uv=False).shape == want_s.shape
    assert "full_matrices" not in tl.dump(tl.linalg.svd(np.eye(3))[0])
    assert "svd[eps=1e-12, full_matrices]" in tl.dump(u)


def test_qr_r_and_complete_of_a_wide_matrix_share_the_reduced_node():
    a = tl.placeholder((3, 5))
    q, r = tl.linalg.qr(a, mode="complete")
    assert r.node.inputs[0].inputs[0] is tl.linalg.qr(a)[1].node.inputs[0].inputs[0]
    assert "qr[mode=reduced]" in tl.dump(q)
    assert "qr[mode=complete]" in tl.dump(tl.linalg.qr(tl.placeholder((5, 3)), "complete")[0])


# ---- the gesdd -> gesvd fallback ---------------------------------------------------------


@pytest.mark.skipif(not on_cpu(), reason="LAPACK's gesdd runs on the CPU only")
def test_svd_falls_back_to_gesvd_for_the_matrices_where_gesdd_fails(monkeypatch):
    """gesdd (numpy.linalg.svd) made to fail on the whole stack and on one matrix of it: the
    stack is redone matrix by matrix, with SciPy's gesvd for that one only."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 5, 4))
    a[1, 0, 0] = 7.25  # the matrix gesdd "cannot" do
    real_svd, real_scipy = np.linalg.svd, scipy.linalg.svd
    gesvd_calls = []

    def gesdd(x, *args, **kwargs):
        if x.ndim > 2 or x[0, 0] == 7.25:
            raise np.linalg.LinAlgError("SVD did not converge")
        return real_svd(x, *args, **kwargs)

    def spy(x, *args, **kwargs):
        gesvd_calls.append((x[0, 0], kwargs.get("lapack_driver")))
        return real_scipy(x, *args, **kwargs)

    monkeypatch.setattr(np.linalg, "svd", gesdd)
    monkeypatch.setattr(scipy.linalg, "svd", spy)
    for full in (False, True):
        gesvd_calls.clear()
        u, s, vh = tl.evaluate(*tl.linalg.svd(tl.asarray(a) * 1.0, full_matrices=full))
        assert gesvd_calls == [(7.25, "gesvd")]
        want_u, want_s, want_vh = real_svd(a, full_matrices=full)
        assert_close(s, want_s)
        assert_close(np.abs(u[..., :4]), np.abs(want_u[..., :4]))
        assert_close(np.abs(vh), np.abs(want_vh))
        assert_close((u[..., :4] * s[..., None, :]) @ vh[..., :4, :], a)
        assert_close(np.swapaxes(u, -1, -2) @ u, _eye_like(u, u.shape[-1]))
    # NaN: no driver converges, and gesdd's error is the one reported
    bad = a.copy()
    bad[0, 1, 1] = np.nan
    with pytest.raises(tl.EvaluationError) as info:
        tl.linalg.svdvals(tl.asarray(bad) * 1.0).evaluate()
    assert isinstance(info.value.__cause__, np.linalg.LinAlgError)


def test_svd_fallback_leaves_device_arrays_alone(monkeypatch):
    """A device array (CuPy's on CUDA, reaching numpy.linalg.svd through
    __array_function__) whose SVD fails keeps its error: SciPy takes host arrays only."""

    class DeviceArray:
        shape, ndim, size, dtype = (2, 2), 2, 4, np.dtype("float64")

        def __array_function__(self, func, types, args, kwargs):
            raise np.linalg.LinAlgError(f"device {func.__name__} did not converge")

    def no_scipy(*args, **kwargs):
        raise AssertionError("scipy called on a device array")

    monkeypatch.setattr(scipy.linalg, "svd", no_scipy)
    attrs = decompositions.SvdAttrs(1e-12, False)
    with pytest.raises(np.linalg.LinAlgError, match="device svd did not converge"):
        decompositions._svd_ref((DeviceArray(),), attrs)


# ---- the factorizations: values ----------------------------------------------------------


SHAPES = [(4, 4), (5, 3), (3, 5), (2, 4, 3), (2, 1, 3, 4)]


def _positive_diagonal(x, k):
    return np.diagonal(x[..., :k, :k], 0, -2, -1)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_qr_positive_matches_numpy_with_the_phases_moved(dtype, shape):
    a = _rand(np.random.default_rng(3), shape, dtype)
    q, r = tl.linalg.qr_positive(a)
    got_q, got_r = tl.evaluate(q, r)
    want_q, want_r = np.linalg.qr(a)
    assert (q.shape, q.dtype, r.shape, r.dtype) == (
        want_q.shape,
        want_q.dtype,
        want_r.shape,
        want_r.dtype,
    )
    d = np.diagonal(want_r, 0, -2, -1)
    phase = d / np.abs(d)
    assert_close(got_q, want_q * phase[..., None, :], dtype)
    assert_close(got_r, np.conj(phase)[..., :, None] * want_r, dtype)
    diag = np.diagonal(got_r, 0, -2, -1)
    assert np.all(diag.real > 0) and np.all(diag.imag == 0)
    assert_close(got_q @ got_r, a, dtype)
    assert_close(np.triu(got_r), got_r, dtype)


def test_qr_positive_of_a_rank_deficient_matrix_keeps_the_zero_pivot():
    a = np.array([[1.0, 2.0, 0.5], [2.0, 4.0, 1.0], [0.0, 0.0, 3.0]])  # column 2 = 2 column 1
    q, r = tl.evaluate(*tl.linalg.qr_positive(a))
    assert np.all(np.isfinite(q)) and np.all(np.isfinite(r))
    assert np.all(np.diagonal(r) >= -1e-12)
    assert_close(q @ r, a)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_ql_lq_rq_reconstruct_with_their_triangles(dtype, shape):
    a = _rand(np.random.default_rng(4), shape, dtype)
    m, n = shape[-2:]
    k = min(m, n)
    outs = {}
    for positive in (False, True):
        q1, low = tl.linalg.ql(a, positive=positive)
        l2, q2 = tl.linalg.lq(a, positive=positive)
        r3, q3 = tl.linalg.rq(a, positive=positive)
        outs[positive] = tl.evaluate(q1, low, l2, q2, r3, q3)
        assert (q1.shape, low.shape) == (shape[:-2] + (m, k), shape[:-2] + (k, n))
        assert (l2.shape, q2.shape) == (shape[:-2] + (m, k), shape[:-2] + (k, n))
        assert (r3.shape, q3.shape) == (shape[:-2] + (m, k), shape[:-2] + (k, n))
        assert {t.dtype for t in (q1, low, l2, q2, r3, q3)} == {np.dtype(dtype)}
        g_q1, g_l, g_l2, g_q2, g_r3, g_q3 = outs[positive]
        assert_close(g_q1 @ g_l, a, dtype)
        assert_close(g_l2 @ g_q2, a, dtype)
        assert_close(g_r3 @ g_q3, a, dtype)
        assert_close(_np_h(g_q1) @ g_q1, _eye_like(g_q1, k), dtype)
        for q in (g_q2, g_q3):
            assert_close(q @ _np_h(q), _eye_like(q, k), dtype)
        # LAPACK's triangles: ql's and rq's end in the last corner
        assert_close(np.tril(g_l, n - k), g_l, dtype)
        assert_close(np.tril(g_l2), g_l2, dtype)
        assert_close(np.triu(g_r3, -(m - k)), g_r3, dtype)
        if positive:  # the diagonals of the triangles: real and > 0
            for x, off in ((g_l, n - k), (g_l2, 0), (g_r3, -(m - k))):
                diag = np.diagonal(x, off, -2, -1)
                assert np.all(diag.real > 0) and np.all(diag.imag == 0)
    # lq is the conjugate transpose of qr of a^H, and positive=True that of qr_positive
    want_q, want_r = np.linalg.qr(_np_h(a))
    assert_close(outs[False][2], _np_h(want_r), dtype)
    assert_close(outs[False][3], _np_h(want_q), dtype)
    # the positive factors are unique: the others differ from them by signs only
    for got, ref in zip(outs[False], outs[True]):
        assert_close(np.abs(got), np.abs(ref), dtype)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_rq_matches_scipy_up_to_the_signs_of_the_diagonal(dtype, shape):
    a = _rand(np.random.default_rng(5), shape, dtype)
    r, q = tl.evaluate(*tl.linalg.rq(a, positive=True))
    want_r, want_q = scipy.linalg.rq(a, mode="economic")
    m, n = shape
    d = np.diagonal(want_r, -(m - min(m, n)))
    phase = d / np.abs(d)  # scipy's diagonal has LAPACK's signs: move them to Q
    assert_close(r, want_r * np.conj(phase)[None, :], dtype)
    assert_close(q, phase[:, None] * want_q, dtype)


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_polar_matches_scipy(dtype, shape, side):
    a = _rand(np.random.default_rng(6), shape, dtype)
    u, p = tl.linalg.polar(a, side)
    got_u, got_p = tl.evaluate(u, p)
    want_u, want_p = _each(lambda x: scipy.linalg.polar(x, side), a)
    assert (u.shape, p.shape) == (want_u.shape, want_p.shape)
    assert u.dtype == p.dtype == np.dtype(dtype)
    assert_close(got_u, want_u, dtype)
    assert_close(got_p, want_p, dtype)
    assert_close(got_u @ got_p if side == "right" else got_p @ got_u, a, dtype)
    assert_close(got_p, _np_h(got_p), dtype)
    assert np.all(np.linalg.eigvalsh(got_p.astype(np.complex128)) > -1e-4)


@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (2, 1, 3, 3), (1, 1)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_expm_matches_scipy(dtype, shape):
    a = _rand(np.random.default_rng(7), shape, dtype)
    e = tl.linalg.expm(a)
    assert (e.shape, e.dtype) == (shape, np.dtype(dtype))
    assert_close(e.evaluate(), scipy.linalg.expm(a), dtype)


def test_expm_identities_promotion_and_empty_stacks():
    theta = 0.7
    rot = np.array([[0.0, -theta], [theta, 0.0]])
    want = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    assert_close(tl.linalg.expm(rot).evaluate(), want)
    ints = np.array([[1, 2], [0, 1]])
    e = tl.linalg.expm(ints)
    assert e.dtype == np.float64
    assert_close(e.evaluate(), np.e * np.array([[1.0, 2.0], [0.0, 1.0]]))
    for shape in ((0, 3, 3), (2, 0, 0)):
        got = tl.linalg.expm(np.zeros(shape)).evaluate()
        assert got.shape == shape and got.dtype == np.float64
    # e^(A) e^(-A) = I, batched, and the inverse of expm is expm of -A
    a = _rand(np.random.default_rng(8), (3, 4, 4), "complex128")
    prod = (tl.linalg.expm(a) @ tl.linalg.expm(-tl.asarray(a))).evaluate()
    assert_close(prod, _eye_like(prod, 4))


# ---- derivatives -------------------------------------------------------------------------


def _qr_complete_invariant(a):
    """Q_k, R and the projector Q_perp Q_perp^H of a complete QR: invariant under rotations of
    Q_perp."""
    q, r = tl.linalg.qr(a, mode="complete")
    k = min(a.shape[-2:])
    qp = q[..., k:]
    return _flat(q[..., :k], r, qp @ mH(qp), tl.abs(r) ** 2)


def _svd_full_invariant(a):
    """U_k f(S) Vh_k, |U_k|^2, and the projectors onto the extra columns of U and of V."""
    u, s, vh = tl.linalg.svd(a, full_matrices=True)
    k = s.shape[-1]
    uk, vk = u[..., :k], vh[..., :k, :]
    up, vp = u[..., k:], mH(vh[..., k:, :])
    usv = (uk * tl.expand_dims(tl.sin(s), -2)) @ vk
    parts = [usv, tl.abs(uk) ** 2, tl.abs(vk) ** 2, up @ mH(up), vp @ mH(vp)]
    return _flat(*parts)


def _perp_environment(a):
    """A loss of the kind tensor-network code builds: Q_perp^H B Q_perp's trace (a rotation
    of Q_perp leaves it unchanged) and the norm of A's part outside span(U_k)."""
    b = tl.asarray(np.arange(25.0).reshape(5, 5) / 25.0)
    q, _ = tl.linalg.qr(a, mode="complete")
    qp = q[..., 2:]
    u, _, _ = tl.linalg.svd(a)
    up = u[..., 2:]
    return tl.trace(mH(qp) @ b @ qp) + tl.sum(tl.abs(mH(up) @ b) ** 2)


def _polar(side):
    return lambda a: _flat(*tl.linalg.polar(a, side))


GRADS = {
    "qr_complete_tall": (_qr_complete_invariant, [(5, 3)]),
    "qr_complete_tall_batched": (_qr_complete_invariant, [(2, 4, 2)]),
    "qr_complete_wide": (lambda a: _flat(*tl.linalg.qr(a, "complete")), [(2, 4)]),
    "qr_perp_environment": (_perp_environment, [(5, 2)]),
    "svd_full_tall": (_svd_full_invariant, [(4, 2)]),
    "svd_full_wide_batched": (_svd_full_invariant, [(2, 2, 4)]),
    "qr_positive_tall": (lambda a: _flat(*tl.linalg.qr_positive(a)), [(4, 3)]),
    "qr_positive_wide_batched": (lambda a: _flat(*tl.linalg.qr_positive(a)), [(2, 2, 3)]),
    "ql_tall": (lambda a: _flat(*tl.linalg.ql(a)), [(4, 3)]),
    "ql_wide_positive": (lambda a: _flat(*tl.linalg.ql(a, positive=True)), [(2, 4)]),
    "lq_wide_batched": (lambda a: _flat(*tl.linalg.lq(a, positive=True)), [(2, 2, 4)]),
    "lq_tall": (lambda a: _flat(*tl.linalg.lq(a)), [(4, 3)]),
    "rq_tall_positive": (lambda a: _flat(*tl.linalg.rq(a, positive=True)), [(4, 3)]),
    "rq_wide": (lambda a: _flat(*tl.linalg.rq(a)), [(3, 4)]),
    "polar_right_square": (_polar("right"), [(3, 3)]),
    "polar_left_tall_batched": (_polar("left"), [(2, 4, 3)]),
    "polar_right_wide": (_polar("right"), [(2, 4)]),
    "expm": (tl.linalg.expm, [(3, 3)]),
    "expm_batched": (lambda a: tl.linalg.expm(0.5 * a), [(2, 3, 3)]),
    "expm_of_product": (lambda a, b: b @ tl.linalg.expm(a @ b), [(3, 2), (2, 3)]),
}
test_gradients_match_finite_differences, test_jvp_matches_finite_differences_and_the_vjp = (
    rule_tests(GRADS)
)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_second_derivatives_of_expm_and_the_full_factors(dtype):
    """Hessian-vector products through EXPM (its rules are EXPM nodes of twice the size) and
    the complete QR and full SVD match central differences of the gradient."""
    rng = np.random.default_rng(9)
    x = tl.placeholder((4, 3), dtype)
    q, r = tl.linalg.qr(x, mode="complete")
    u, s, _ = tl.linalg.svd(x)
    qp, up = q[..., 3:], u[..., 3:]
    e = tl.linalg.expm(0.3 * (mH(x) @ x))
    loss = (
        tl.sum(tl.abs(e) ** 2)
        + tl.sum(tl.abs(qp @ mH(qp) @ x[:, :1]) ** 2)
        + tl.sum(tl.abs(up @ mH(up)) * 0.1)
        + tl.sum(s * s)
        + tl.sum(tl.abs(r) ** 2)
    )
    a, v = _rand(rng, (4, 3), dtype), _rand(rng, (4, 3), dtype)
    check_hvp(loss, x, a, v)


def test_qr_positive_differentiates_q_itself_where_lapack_signs_would_flip():
    """Near a matrix whose LAPACK R has a negative diagonal entry, qr_positive's Q is smooth;
    its gradient matches finite differences for a complex input (Q itself, no gauge)."""
    check_grads(lambda a: tl.linalg.qr_positive(a)[0], [(3, 3)], "complex128", seed=4)
    check_grads(lambda a: tl.linalg.qr_positive(a)[0] * 2.0, [(4, 2)], "complex128", seed=5)


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (3, 4), (2, 3, 3)])
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_polar_derivatives_at_degenerate_singular_values(dtype, shape, side):
    """At an isometry every singular value is 1, and at c * I they are all equal: POLAR's rules
    divide by s_i + s_j, not s_i - s_j, so the derivatives of U and P themselves match finite
    differences there (an SVD composite's broadened rule would drop the mixing terms)."""
    rng = np.random.default_rng(10)
    m, n = shape[-2:]
    iso = np.linalg.qr(_rand(rng, shape[:-2] + (max(m, n), min(m, n)), dtype))[0]
    iso = _np_h(iso) if m < n else iso
    points = [iso, 2.0 * iso]
    p_shape = shape[:-2] + ((n, n) if side == "right" else (m, m))
    c_u, c_p, direction = (
        _rand(rng, shape, dtype),
        _rand(rng, p_shape, dtype),
        _rand(rng, shape, dtype),
    )
    x = tl.placeholder(shape, dtype)
    u, p = tl.linalg.polar(x, side)
    loss = tl.sum(tl.real(u * tl.conj(tl.asarray(c_u)))) + tl.sum(
        tl.real(p * tl.conj(tl.asarray(c_p)))
    )
    (g,) = tl.grad(loss, [x])
    jt = tl.jvp(loss, [x], [tl.asarray(direction)])
    for a in points:
        got, tangent = tl.evaluate(g, jt, feed={x: a})
        eps = 1e-6
        up = float(loss.evaluate(feed={x: a + eps * direction}))
        down = float(loss.evaluate(feed={x: a - eps * direction}))
        numeric = (up - down) / (2 * eps)
        assert abs(float(np.real(np.vdot(got, direction))) - numeric) <= 1e-6 * max(1, abs(numeric))
        assert abs(float(tangent) - numeric) <= 1e-6 * max(1, abs(numeric))


def test_polar_is_one_node_and_its_hessian_matches_differences():
    x = tl.placeholder((4, 3), "complex128")
    u, p = tl.linalg.polar(x)
    assert "polar[eps=1e-12]" in tl.dump(u) and "svd" not in tl.dump(p)
    loss = tl.sum(tl.abs(u - 1.0) ** 2) + tl.sum(tl.abs(p) ** 2) * 0.5
    rng = np.random.default_rng(12)
    a, v = _rand(rng, (4, 3), "complex128"), _rand(rng, (4, 3), "complex128")
    check_hvp(loss, x, a, v)


def test_raw_qr_has_no_derivative_a_typed_error_naming_the_mode():
    x = tl.placeholder((4, 3))
    h, tau = tl.linalg.qr(x, mode="raw")
    for loss in (tl.sum(h), tl.sum(tau * tau)):
        with pytest.raises(tl.DTypeError, match="vjp: op qr with mode 'raw' has no reverse"):
            tl.grad(loss, [x])
    with pytest.raises(tl.DTypeError, match="jvp: op qr with mode 'raw' has no forward"):
        tl.jvp(h, [x], [tl.ones((4, 3))])
    # the other modes of the same matrix still differentiate
    (g,) = tl.grad(tl.sum(tl.linalg.qr(x, mode="r")), [x])
    assert g.shape == (4, 3)


# ---- errors, devices, files --------------------------------------------------------------


def test_bad_arguments_are_typed_errors_naming_the_function():
    with pytest.raises(tl.OptionError, match=r"qr: mode 'economic' is not one of"):
        tl.linalg.qr(np.eye(2), mode="economic")
    with pytest.raises(tl.OptionTypeError, match="qr: mode 3"):
        tl.linalg.qr(np.eye(2), mode=3)
    with pytest.raises(tl.OptionTypeError, match="svd: full_matrices 'yes' is not a bool"):
        tl.linalg.svd(np.eye(2), full_matrices="yes")
    with pytest.raises(tl.OptionError, match="polar: side must be 'right' or 'left'"):
        tl.linalg.polar(np.eye(2), "up")
    with pytest.raises(tl.OptionTypeError, match="polar: side"):
        tl.linalg.polar(np.eye(2), 1)
    with pytest.raises(tl.OptionTypeError, match="ql: positive 1 is not a bool"):
        tl.linalg.ql(np.eye(2), positive=1)
    with pytest.raises(tl.OptionError, match="polar.*eps must be finite|svd: eps must be"):
        tl.linalg.polar(np.eye(2), eps=-1.0)
    for fn in (tl.linalg.qr_positive, tl.linalg.ql, tl.linalg.lq, tl.linalg.rq, tl.linalg.polar):
        name = fn.__name__
        with pytest.raises(tl.ShapeError, match=rf"{name}: operand 0 of shape \(3,\) has 1"):
            fn(np.ones(3))
        with pytest.raises(tl.DTypeError, match=f"{name}: not defined for dtype float16"):
            fn(np.ones((2, 2), "float16"))
        assert all(t.dtype == np.float64 for t in fn(np.eye(2, dtype=int)))
    with pytest.raises(tl.ShapeError, match=r"expm: operand 0 of shape \(2, 3\) is not a"):
        tl.linalg.expm(np.ones((2, 3)))
    with pytest.raises(tl.ShapeError, match=r"expm: operand 0 of shape \(3,\) has 1 axes"):
        tl.linalg.expm(np.ones(3))
    with pytest.raises(tl.DTypeError, match="expm: not defined for dtype float16"):
        tl.linalg.expm(np.ones((2, 2), "float16"))


def test_save_and_load_keep_the_modes(tmp_path):
    x = tl.placeholder((2, 4, 3), name="x")
    outs = (
        *tl.linalg.qr(x, mode="complete"),
        *tl.linalg.qr(x, mode="raw"),
        *tl.linalg.svd(x),
        tl.linalg.expm(x[:, :3, :]),
        *tl.linalg.polar(x, "left"),
    )
    tl.save(outs, tmp_path / "f.json")
    back = tl.load(tmp_path / "f.json")
    text = "".join(tl.dump(t) for t in back)
    parts = (
        "qr[mode=complete]",
        "qr[mode=raw]",
        "svd[eps=1e-12, full_matrices]",
        "expm(",
        "polar[",
    )
    for part in parts:
        assert part in text
    a = _rand(np.random.default_rng(11), (2, 4, 3), "float64")
    for got, ref in zip(tl.evaluate(*back, feed={x: a}), tl.evaluate(*outs, feed={x: a})):
        assert_close(got, ref)
    # a file whose svd attribute is not a bool, or whose qr mode is unknown, is rejected
    path = tmp_path / "f.json"
    path.write_text(path.read_text().replace('"complete"', '"economic"'))
    with pytest.raises(tl.GraphFormatError, match="qr: mode must be one of"):
        tl.load(path)


@pytest.mark.opencl
def test_opencl_has_no_kernel_for_expm_or_the_decompositions_a_device_error_naming_them():
    device = opencl_device()
    if device is None:
        pytest.skip("no OpenCL device (see test_opencl.py)")
    x = tl.placeholder((4, 3))
    cases = {
        "expm": tl.linalg.expm(x[:3]) * 2.0,
        "qr": tl.linalg.qr_positive(x)[0],
        "svd": tl.linalg.svd(x)[0] * 2.0,
        "polar": tl.linalg.polar(x)[1],
    }
    for op, t in cases.items():
        with pytest.raises(tl.DeviceError, match=f"{device}: no kernel for op '{op}'"):
            t.evaluate(device=device, feed={x: np.ones((4, 3))})
