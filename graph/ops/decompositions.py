"""The decompositions of ``tl.linalg`` (graph/ops/linalg.py has the rest of the family):
eigh, qr and svd, batched over leading axes with ``numpy.linalg``'s semantics.

Each is one node whose value packs all its results into one flat array; the builders return
views of it (slices, reshapes, real parts), so the VJP rules get one flat cotangent to unpack.

``eigh`` (A = V diag(w) V^H, the ``UPLO`` triangle read as for cholesky): with
P = V^H dA V, dw = Re diag(P) and dV = V (F * P), F_ij = 1 / (w_j - w_i) off the diagonal and
0 on it, which fixes the gauge (the phase of each eigenvector) by Re(V^H dV)_ii = 0 and
Im(V^H dV)_ii = 0. Eigenvectors are defined up to a phase (a sign for real matrices) and, in a
degenerate eigenspace, up to a unitary mixing, so only gauge-invariant functions of V (such
as V f(w) V^H, |V_ij|^2 in a non-degenerate spectrum, or anything of w) have derivatives that
agree with finite differences (for real matrices the sign is locally constant, so V itself
differentiates). Degenerate spectra: F is broadened as a Lorentzian,
F_ij = (w_j - w_i) / ((w_j - w_i)^2 + eps), with ``eps`` (default 1e-12, absolute, in units
of the eigenvalues squared) an argument of ``eigh``, as in the differentiable tensor-network
literature: a pair closer than about sqrt(eps) contributes nothing through F instead of
1 / (w_j - w_i), so gradients stay finite. That is exact when the loss does not depend on the
mixing of that pair ((V^H gV)_ij = 0 for it: functions of the eigenvalues, eigenvectors of
simple eigenvalues, projectors onto whole eigenspaces); otherwise the pair's term, a divided
difference such as (f(w_j) - f(w_i)) / (w_j - w_i) for V f(w) V^H, is dropped. ``eps=0``
gives the unbroadened rule (inf or nan at an exact degeneracy).

``qr`` (reduced, A = QR, R upper triangular with a real diagonal, as LAPACK makes it): for
M >= N, with C = Q^H dA R^-1 and U = triu(C, 1) + tril(C, -1)^H + Re diag(C), dR = U R and
dQ = dA R^-1 - Q U; for M < N, A = [X | Y] with X = Q R1 square and R2 = Q^H Y, so
dR2 = dQ^H Y + Q^H dY. The VJP rules are the adjoints of these maps. ``mode="complete"`` with
M > N: Q = [Q_k | Q_perp] and R = [R_k; 0]; Q_perp (a basis of the complement of A's columns)
is not unique, and its derivative is taken in the gauge that moves it least,
Q_perp^H dQ_perp = 0, which with (Q^H dQ) skew-Hermitian leaves dQ_perp = -Q_k (dQ_k^H Q_perp);
only functions invariant under rotations of Q_perp (Q_perp Q_perp^H, anything of Q_k and R)
match finite differences. ``mode="raw"`` (LAPACK's Householder reflectors) has no derivative:
the rules raise a DTypeError naming the mode, as autodiff does for an op without a rule.

``svd`` (reduced, A = U diag(s) V^H, s descending): with dP = U^H dA V, ds = Re diag(dP),
U^H dU = F * (dP S + S dP^H) and V^H dV = F * (S dP + dP^H S), F_ij = 1 / (s_j^2 - s_i^2)
broadened as for eigh (``eps``, in units of the singular values squared), plus, for complex
matrices, the gauge: the phase of each singular pair split evenly,
i Im(dP_ii) / (2 s_i) on the diagonal of U^H dU and its opposite on V^H dV; and for
rectangular matrices the parts outside the spans, (I - UU^H) dA V S^-1 and
(I - VV^H) dA^H U S^-1 (an exactly zero singular value makes these inf or nan: the true
derivative is then a limit that only the whole loss knows). As for eigh, only
gauge-invariant functions (U f(s) V^H, |U_ij|^2, anything of s) match finite differences for
complex matrices; for real ones the signs are locally constant and U, V differentiate.
``full_matrices=True`` for M != N adds the columns U_perp (M > N) or V_perp (M < N, the rows
of Vh past K), treated as Q_perp of a complete QR: dU_perp = -U_k (dU_k^H U_perp) (likewise
for V), the gauge U_perp^H dU_perp = 0. The CPU kernel is LAPACK's gesdd (numpy.linalg.svd);
on a stack where it fails to converge, it is redone matrix by matrix, with gesvd
(``scipy.linalg.svd(lapack_driver="gesvd")``) for the matrices where gesdd fails again.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from tenloom.graph.errors import DTypeError, OptionError, OptionTypeError, ShapeError, fmt_shape
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.checks import BadFormat, check_arity, short
from tenloom.graph.ops.elementwise import real
from tenloom.graph.ops.leaf import lift
from tenloom.graph.ops.linalg import _batch, _hermitian_part, _result_dtype, check_square, mH
from tenloom.graph.ops.movement import getitem, reshape
from tenloom.graph.ops.registry import Op, OpKind, builder, register_op
from tenloom.graph.value import V as T
from tenloom.graph.value import Value

# the ops of this family, defined before anything refers to them


# ---- decompositions: one node whose value packs every result ---------------------------------
# EIGH and QR compute several arrays at once. Their node's value is ONE flat array holding all
# of them raveled and concatenated in the decomposition's dtype (eigenvalues, real, stored as
# that dtype); the builders return views of it made by ordinary ops (slice, reshape, real), so
# reverse mode hands the node one flat cotangent, which its VJP rule unpacks, and its JVP rule
# returns the packed tangent.


class EighAttrs(NamedTuple):
    uplo: str  # "L" or "U": the triangle LAPACK reads
    eps: float  # the Lorentzian broadening of 1 / (w_j - w_i) in the derivatives (>= 0)


class QrAttrs(NamedTuple):
    # "reduced": Q (..., M, K), R (..., K, N), K = min(M, N); "complete": Q (..., M, M),
    # R (..., M, N); "raw": numpy's (h (..., N, M), tau (..., K)), with no derivative
    mode: str


_QR_NODE_MODES = ("reduced", "complete", "raw")


def _batch_of(shape) -> tuple[int, ...]:
    return tuple(shape[:-2])


def _eigh_infer(inputs, attrs):
    (x,) = inputs
    check_square("eigh", x)
    n = x.shape[-1]
    return (math.prod(x.shape[:-2]) * (n + n * n),), _result_dtype(Op.EIGH, x.dtype)


def _eigh_ref(xs, at):
    w, v = np.linalg.eigh(xs[0], UPLO=at.uplo)
    return np.concatenate([w.reshape(-1).astype(v.dtype), v.reshape(-1)])


def _qr_sizes(shape) -> tuple[int, int, int]:
    m, n = shape[-2:]
    return m, n, min(m, n)


def _qr_parts(shape, mode: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The matrix shapes of the two results of QR in ``mode`` (Q and R, or raw's h and tau)."""
    m, n, k = _qr_sizes(shape)
    if mode == "complete":
        return (m, m), (m, n)
    if mode == "raw":
        return (n, m), (k,)
    return (m, k), (k, n)


def _qr_infer(inputs, attrs):
    (x,) = inputs
    if x.ndim < 2:
        raise ShapeError(
            f"qr: operand 0 of shape {fmt_shape(x.shape)} has {x.ndim} axes; it must be a "
            "(stack of) matrices, with at least 2 axes"
        )
    first, second = _qr_parts(x.shape, attrs[0])
    size = math.prod(x.shape[:-2]) * (math.prod(first) + math.prod(second))
    return (size,), _result_dtype(Op.QR, x.dtype)


def _qr_ref(xs, at):
    q, r = np.linalg.qr(xs[0], mode=at.mode)
    return np.concatenate([q.reshape(-1), r.reshape(-1)])


def _eigh_cost(node) -> int:
    x = node.inputs[0]
    return _batch(x.shape) * 9 * x.shape[-1] ** 3


def _qr_cost(node) -> int:
    m, n, k = _qr_sizes(node.inputs[0].shape)
    return _batch(node.inputs[0].shape) * 4 * m * n * k


def _check_eigh(ins, at, op):
    at = check_arity(at, EighAttrs, op)
    if at.uplo not in ("L", "U"):
        raise BadFormat(f"eigh: UPLO must be 'L' or 'U', got {short(at.uplo)}")
    if type(at.eps) is not float or not at.eps >= 0 or at.eps == math.inf:
        raise BadFormat(f"eigh: eps must be a finite float >= 0, got {short(at.eps)}")


def _check_qr(ins, at, op):
    at = check_arity(at, QrAttrs, op)
    if at.mode not in _QR_NODE_MODES:
        raise BadFormat(f"qr: mode must be one of {_QR_NODE_MODES}, got {short(at.mode)}")


def _eigh_views(p, shape):
    """(w, V) of the packed EIGH value ``p`` of an operand of ``shape``, as lazy views; works on
    nodes (getitem, reshape, real) and on Values alike."""
    batch, n = _batch_of(shape), shape[-1]
    cut = math.prod(batch) * n
    return real(reshape(getitem(p, slice(0, cut)), batch + (n,))), reshape(
        getitem(p, slice(cut, None)), batch + (n, n)
    )


def _qr_views(p, shape, mode: str = "reduced"):
    batch = _batch_of(shape)
    first, second = _qr_parts(shape, mode)
    cut = math.prod(batch) * math.prod(first)
    return reshape(getitem(p, slice(0, cut)), batch + first), reshape(
        getitem(p, slice(cut, None)), batch + second
    )


def _no_raw_derivative(node, mode: str) -> None:
    """QR's raw mode (Householder reflectors, LAPACK's storage) has no derivative rule: the
    error autodiff raises for an op without one, naming the mode."""
    if node.attrs.mode == "raw":
        kind = "reverse" if mode == "vjp" else "forward"
        raise DTypeError(
            f"{mode}: op qr with mode 'raw' has no {kind}-mode rule (its Householder "
            "reflectors (h, tau) are LAPACK's storage, not differentiable results); "
            "differentiate mode='reduced' or 'complete' instead"
        )


def _perp_tangent(qk: Value, tqk: Value, qp: Value) -> Value:
    """The tangent of the extra columns Q_perp of a complete unitary [Q_k | Q_perp] in the
    gauge that moves them least, Q_perp^H dQ_perp = 0: dQ_perp = -Q_k (dQ_k^H Q_perp)."""
    return -(qk @ (mH(tqk) @ qp))


def _perp_cotangent(qk: Value, gqk: Value, qp: Value, gqp: Value) -> Value:
    """The cotangent of Q_k once that of Q_perp is moved onto it (the adjoint of
    :func:`_perp_tangent`): gQ_k - Q_perp (gQ_perp^H Q_k)."""
    return gqk - qp @ (mH(gqp) @ qk)


def _pack(*parts: Value, dtype) -> Value:
    return T.concatenate([T.reshape(T.astype(x, dtype), (-1,)) for x in parts])


def _uplo_mask(n: int, dtype, uplo: str) -> Value:
    rd = np.empty(0, dtype).real.dtype
    lower = np.tril(np.ones((n, n), rd), -1)
    return T.asarray(lower if uplo == "L" else lower.T.copy())


def _broadened(w: Value, eps: float) -> Value:
    """F_ij = (w_j - w_i) / ((w_j - w_i)^2 + eps), 0 on the diagonal: 1 / (w_j - w_i)
    broadened by a Lorentzian of width sqrt(eps). The diagonal is masked to 0 rather than left
    as 0 / (0 + 1): that quotient's derivative in d_ii is 1, and a second derivative (reverse
    over reverse) then sent a large cotangent through it that had to cancel between the two
    paths to w_i, which rounding did not (an SVD's Hessian-vector product was off by 0.8 at
    s_max = 2.6e4)."""
    n = w.shape[-1]
    d = T.expand_dims(w, -2) - T.expand_dims(w, -1)
    eye = T.eye(n, dtype=w.dtype)
    return d / (d * d + (eye + eps)) * (1 - eye)


def _eigh_jvp(node, y, xs, ts):
    (x,), (t,) = xs, ts
    w, v = (Value(n) for n in _eigh_views(y.node, x.shape))
    n = x.shape[-1]
    mask = _uplo_mask(n, v.dtype, node.attrs.uplo)
    eye = T.asarray(np.eye(n, dtype=np.empty(0, v.dtype).real.dtype))
    p = mH(v) @ _hermitian_part(t, mask, eye) @ v
    tw = T.real(T.diagonal(p, 0, p.ndim - 2, p.ndim - 1))
    tv = v @ (_broadened(w, node.attrs.eps) * p)
    return _pack(tw, tv, dtype=y.dtype)


def _eigh_vjp(node, y, xs, g):
    (x,) = xs
    w, v = (Value(n) for n in _eigh_views(y.node, x.shape))
    gw, gv = (Value(n) for n in _eigh_views(g.node, x.shape))
    n = x.shape[-1]
    mask = _uplo_mask(n, v.dtype, node.attrs.uplo)
    eye = T.asarray(np.eye(n, dtype=np.empty(0, v.dtype).real.dtype))
    gp = T.expand_dims(gw, -1) * eye + _broadened(w, node.attrs.eps) * (mH(v) @ gv)
    gh = v @ gp @ mH(v)
    return ((gh + mH(gh)) * mask + T.real(gh) * eye,)


def _qr_pi(c: Value) -> Value:
    """U = C - Omega: the upper triangle of C, its strictly lower part mirrored (conjugated)
    onto the upper, and the real part of its diagonal."""
    n = c.shape[-1]
    rd = np.empty(0, c.dtype).real.dtype
    lower = T.asarray(np.tril(np.ones((n, n), rd), -1))
    upper = T.asarray(np.triu(np.ones((n, n), rd), 1))
    eye = T.asarray(np.eye(n, dtype=rd))
    return c * upper + mH(c * lower) + T.real(c) * eye


def _qr_pi_adjoint(g: Value) -> Value:
    n = g.shape[-1]
    rd = np.empty(0, g.dtype).real.dtype
    lower = T.asarray(np.tril(np.ones((n, n), rd), -1))
    upper = T.asarray(np.triu(np.ones((n, n), rd), 1))
    eye = T.asarray(np.eye(n, dtype=rd))
    return g * upper + mH(g) * lower + T.real(g) * eye


def _right_solve(x: Value, r: Value) -> Value:
    """x R^-1."""
    return mH(T.solve(mH(r), mH(x)))


def _qr_square_jvp(q, r, t):
    """(tQ, tR) of A = QR with M >= N (R square): C = Q^H t R^-1, U = Pi(C)."""
    x = _right_solve(t, r)
    u = _qr_pi(mH(q) @ x)
    return x - q @ u, u @ r


def _qr_square_vjp(q, r, gq, gr):
    gu = gr @ mH(r) - mH(q) @ gq
    gx = gq + q @ _qr_pi_adjoint(gu)
    return mH(T.solve(r, mH(gx)))  # gX R^-H


def _qr_jvp(node, y, xs, ts):
    _no_raw_derivative(node, "jvp")
    (x,), (t,) = xs, ts
    q, r = (Value(n) for n in _qr_views(y.node, x.shape, node.attrs.mode))
    m, n, k = _qr_sizes(x.shape)
    if m > n and node.attrs.mode == "complete":  # Q = [Q_k | Q_perp], R = [R_k; 0]
        qk, qp = q[..., :n], q[..., n:]
        tqk, trk = _qr_square_jvp(qk, r[..., :n, :], t)
        tq = T.concatenate([tqk, _perp_tangent(qk, tqk, qp)], axis=-1)
        tr = T.concatenate([trk, T.zeros(trk.shape[:-2] + (m - n, n), trk.dtype)], axis=-2)
    elif m >= n:
        tq, tr = _qr_square_jvp(q, r, t)
    else:  # A = [X | Y], X = Q R1 square, R2 = Q^H Y
        tq, tr1 = _qr_square_jvp(q, r[..., :m], t[..., :m])
        tr2 = mH(tq) @ x[..., m:] + mH(q) @ t[..., m:]
        tr = T.concatenate([tr1, tr2], axis=-1)
    return _pack(tq, tr, dtype=y.dtype)


def _qr_vjp(node, y, xs, g):
    _no_raw_derivative(node, "vjp")
    (x,) = xs
    q, r = (Value(n) for n in _qr_views(y.node, x.shape, node.attrs.mode))
    gq, gr = (Value(n) for n in _qr_views(g.node, x.shape, node.attrs.mode))
    m, n, k = _qr_sizes(x.shape)
    if m > n and node.attrs.mode == "complete":  # R's zero rows have no derivative
        qk, qp = q[..., :n], q[..., n:]
        gqk = _perp_cotangent(qk, gq[..., :n], qp, gq[..., n:])
        return (_qr_square_vjp(qk, r[..., :n, :], gqk, gr[..., :n, :]),)
    if m >= n:
        return (_qr_square_vjp(q, r, gq, gr),)
    gr1, gr2 = gr[..., :m], gr[..., m:]
    gx = _qr_square_vjp(q, r[..., :m], gq + x[..., m:] @ mH(gr2), gr1)
    return (T.concatenate([gx, q @ gr2], axis=-1),)


class SvdAttrs(NamedTuple):
    eps: float  # the Lorentzian broadening of 1 / (s_j^2 - s_i^2) in the derivatives (>= 0)
    full: bool  # full_matrices: U (..., M, M) and Vh (..., N, N); only for M != N


def _svd_dims(shape, full: bool) -> tuple[int, int, int]:
    """(columns of U, K, rows of Vh) of the SVD of matrices of ``shape``."""
    m, n, k = _qr_sizes(shape)
    return (m, k, n) if full else (k, k, k)


def _svd_infer(inputs, attrs):
    (x,) = inputs
    if x.ndim < 2:
        raise ShapeError(
            f"svd: operand 0 of shape {fmt_shape(x.shape)} has {x.ndim} axes; it must be a "
            "(stack of) matrices, with at least 2 axes"
        )
    m, n, k = _qr_sizes(x.shape)
    cu, k, rv = _svd_dims(x.shape, attrs[1])
    size = math.prod(x.shape[:-2]) * (m * cu + k + rv * n)
    return (size,), _result_dtype(Op.SVD, x.dtype)


def _svd_fallback(x: np.ndarray, full: bool):
    """The SVD of a stack of matrices for which LAPACK's gesdd (divide and conquer, NumPy's)
    failed to converge: matrix by matrix, gesdd again and, where it fails, SciPy's gesvd
    (QR iteration: slower, but it converges where gesdd does not)."""
    import scipy.linalg

    m, n = x.shape[-2:]
    mats = x.reshape((-1, m, n))
    parts = []
    for a in mats:
        try:
            parts.append(np.linalg.svd(a, full_matrices=full))
        except np.linalg.LinAlgError:
            if not np.all(np.isfinite(a)):
                raise  # NaN or inf: no driver converges; gesdd's error says so
            parts.append(scipy.linalg.svd(a, full_matrices=full, lapack_driver="gesvd"))
    batch = x.shape[:-2]
    return tuple(
        np.stack([p[i] for p in parts]).reshape(batch + parts[0][i].shape) if parts else None
        for i in range(3)
    )


def svd_arrays(x, full: bool):
    """``(u, s, vh)`` of an array (the kernel of SVD, and of the ops built on it):
    numpy.linalg.svd (LAPACK's gesdd on the CPU, CuPy's SVD on CUDA through
    ``__array_function__``); on the CPU, a stack on which gesdd fails to converge falls back
    to gesvd (:func:`_svd_fallback`)."""
    try:
        return np.linalg.svd(x, full_matrices=full)
    except np.linalg.LinAlgError:
        # SciPy takes host arrays only: a device array's error stands (tested by type, so
        # graph/ imports no device library)
        if not isinstance(x, np.ndarray) or x.size == 0:
            raise
        return _svd_fallback(x, full)


def _svd_ref(xs, at):
    u, s, vh = svd_arrays(xs[0], at.full)
    return np.concatenate([u.reshape(-1), s.reshape(-1).astype(u.dtype), vh.reshape(-1)])


def _svd_cost(node) -> int:
    m, n, k = _qr_sizes(node.inputs[0].shape)
    return _batch(node.inputs[0].shape) * 12 * m * n * k


def _check_svd(ins, at, op):
    at = check_arity(at, SvdAttrs, op)
    if type(at.eps) is not float or not at.eps >= 0 or at.eps == math.inf:
        raise BadFormat(f"svd: eps must be a finite float >= 0, got {short(at.eps)}")
    if type(at.full) is not bool:
        raise BadFormat(f"svd: full_matrices must be a bool, got {short(at.full)}")


def _svd_views(p, shape, full: bool = False):
    batch = _batch_of(shape)
    m, n, _ = _qr_sizes(shape)
    cu, k, rv = _svd_dims(shape, full)
    b = math.prod(batch)
    c1, c2 = b * m * cu, b * (m * cu + k)
    return (
        reshape(getitem(p, slice(0, c1)), batch + (m, cu)),
        real(reshape(getitem(p, slice(c1, c2)), batch + (k,))),
        reshape(getitem(p, slice(c2, None)), batch + (rv, n)),
    )


def _svd_parts(node, y, x):
    """(U_k, s, V_k, F, U_perp, V_perp): the reduced SVD (the first K columns of U and V)
    and, for ``full_matrices``, the extra columns of U (M > N) or of V (M < N), else None."""
    u, s, vh = (Value(n) for n in _svd_views(y.node, x.shape, node.attrs.full))
    f = _broadened(s * s, node.attrs.eps)  # F_ij ~ 1 / (s_j^2 - s_i^2)
    k = s.shape[-1]
    up = u[..., k:] if u.shape[-1] > k else None
    vp = mH(vh[..., k:, :]) if vh.shape[-2] > k else None
    if up is not None:
        u = u[..., :k]
    if vp is not None:
        vh = vh[..., :k, :]
    return u, s, mH(vh), f, up, vp


def _inv_s(s: Value) -> Value:
    """1 / s for the terms of a rectangular or complex SVD that divide by a singular value. An
    exactly zero one gives inf or nan, on purpose: the true derivative there is a limit of the
    composed function (the cotangent often carries a factor s_i that cancels it, as for
    U S Vh), which no rule for the node alone can take, so 0 would be silently wrong."""
    return 1 / s


def _svd_jvp(node, y, xs, ts):
    (x,), (t,) = xs, ts
    u, s, v, f, up, vp = _svd_parts(node, y, x)
    m, n, k = _qr_sizes(x.shape)
    isr = T.expand_dims(_inv_s(s), -2)  # divides columns by S
    sr = T.expand_dims(s, -2)  # scales columns: X * sr = X S
    sc = T.expand_dims(s, -1)  # scales rows: sc * X = S X
    dp = mH(u) @ t @ v
    eye = T.asarray(np.eye(k, dtype=s.dtype))
    ds = T.real(T.diagonal(dp, 0, dp.ndim - 2, dp.ndim - 1))
    wu = f * (dp * sr + sc * mH(dp))
    wv = f * (sc * dp + mH(dp) * sr)
    if y.dtype.kind == "c":  # the gauge: the phase of each pair split evenly
        half = T.expand_dims(1j * T.imag(T.diagonal(dp, 0, dp.ndim - 2, dp.ndim - 1)), -1)
        wu = wu + half * eye * (0.5 * isr)
        wv = wv - half * eye * (0.5 * isr)
    du = u @ wu
    dv = v @ wv
    if m > k:
        du = du + (t @ v - u @ dp) * isr
    if n > k:
        dv = dv + (mH(t) @ u - v @ mH(dp)) * isr
    if up is not None:  # full_matrices: the extra columns in the gauge that moves them least
        du = T.concatenate([du, _perp_tangent(u, du, up)], axis=-1)
    if vp is not None:
        dv = T.concatenate([dv, _perp_tangent(v, dv, vp)], axis=-1)
    return _pack(du, ds, mH(dv), dtype=y.dtype)


def _svd_vjp(node, y, xs, g):
    (x,) = xs
    u, s, v, f, up, vp = _svd_parts(node, y, x)
    gu, gs, gvh = (Value(n) for n in _svd_views(g.node, x.shape, node.attrs.full))
    gv = mH(gvh)
    m, n, k = _qr_sizes(x.shape)
    if up is not None:
        gu = _perp_cotangent(u, gu[..., :k], up, gu[..., k:])
    if vp is not None:
        gv = _perp_cotangent(v, gv[..., :k], vp, gv[..., k:])
    sr = T.expand_dims(s, -2)
    sc = T.expand_dims(s, -1)
    inv = _inv_s(s)
    isr = T.expand_dims(inv, -2)
    eye = T.asarray(np.eye(k, dtype=s.dtype))
    xu, xv = f * (mH(u) @ gu), f * (mH(v) @ gv)
    gp = (xu + mH(xu)) * sr + sc * (xv + mH(xv)) + T.expand_dims(gs, -1) * eye
    if y.dtype.kind == "c":
        xu0, xv0 = mH(u) @ gu, mH(v) @ gv
        im = T.imag(T.diagonal(xu0, 0, xu0.ndim - 2, xu0.ndim - 1)) - T.imag(
            T.diagonal(xv0, 0, xv0.ndim - 2, xv0.ndim - 1)
        )
        gp = gp + T.expand_dims(1j * im * (0.5 * inv), -1) * eye
    ga = u @ gp @ mH(v)
    if m > k:
        ga = ga + ((gu - u @ (mH(u) @ gu)) * isr) @ mH(v)
    if n > k:
        ga = ga + u @ mH((gv - v @ (mH(v) @ gv)) * isr)
    return (ga,)


register_op(
    Op.SVD,
    OpKind.LINALG,
    _svd_infer,
    _svd_ref,
    1,
    attrs=SvdAttrs,
    vjp=_svd_vjp,
    jvp=_svd_jvp,
    cost=_svd_cost,
    check_attrs=_check_svd,
    fmt=lambda at: f"[eps={at.eps!r}{', full_matrices' if at.full else ''}]",
)
register_op(
    Op.EIGH,
    OpKind.LINALG,
    _eigh_infer,
    _eigh_ref,
    1,
    attrs=EighAttrs,
    vjp=_eigh_vjp,
    jvp=_eigh_jvp,
    cost=_eigh_cost,
    check_attrs=_check_eigh,
    fmt=lambda at: f"[UPLO={at.uplo}, eps={at.eps!r}]",
)
register_op(
    Op.QR,
    OpKind.LINALG,
    _qr_infer,
    _qr_ref,
    1,
    attrs=QrAttrs,
    vjp=_qr_vjp,
    jvp=_qr_jvp,
    cost=_qr_cost,
    check_attrs=_check_qr,
    fmt=lambda at: f"[mode={at.mode}]",
)


# ---- builders (tenloom/linalg.py exposes them as tl.linalg.*) --------------------------------


DEFAULT_EPS = 1e-12  # eigh's and svd's Lorentzian broadening (see the module docstring)


def check_eps(eps: Any, op: str) -> float:
    """A derivative broadening ``eps`` checked (a finite number >= 0, not a bool), as a float."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)):
        raise OptionTypeError(f"{op}: eps {eps!r} is not a number")
    if not 0 <= float(eps) < math.inf:  # (NaN is not)
        raise OptionError(f"{op}: eps must be finite and >= 0, got {eps!r}")
    return float(eps)


@builder(public=False)
def eigh(a: Any, UPLO: str = "L", *, eps: float = DEFAULT_EPS) -> tuple[Node, Node]:  # noqa: N803
    """``(eigenvalues, eigenvectors)`` of each Hermitian matrix of ``a`` (..., M, M), as
    ``numpy.linalg.eigh``: eigenvalues ascending, real (..., M); eigenvectors the columns of
    (..., M, M), with LAPACK's phases. Only the ``UPLO`` triangle is read. ``eps`` (>= 0)
    broadens 1 / (w_j - w_i) in the derivatives to (w_j - w_i) / ((w_j - w_i)^2 + eps)."""
    n = lift(a, "eigh")
    UPLO = UPLO.upper() if isinstance(UPLO, str) else UPLO  # noqa: N806  (NumPy takes "l", "u")
    if UPLO not in ("L", "U"):
        raise OptionError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    eps = check_eps(eps, "eigh")
    p = make_node(Op.EIGH, (n,), (UPLO, eps))
    return _eigh_views(p, n.shape)


@builder(public=False)
def eigvalsh(a: Any, UPLO: str = "L", *, eps: float = DEFAULT_EPS) -> Node:  # noqa: N803
    """The eigenvalues, ascending, of each Hermitian matrix of ``a``, as
    ``numpy.linalg.eigvalsh``: one EIGVALSH node (graph/ops/spectra.py: LAPACK without the
    vectors; its derivative computes them), which the cse pass makes a view of the graph's
    EIGH of the same operand where there is one. ``eps`` is checked as for :func:`eigh` (the
    eigenvalues' derivatives need no broadening)."""
    n = lift(a, "eigvalsh")
    UPLO = UPLO.upper() if isinstance(UPLO, str) else UPLO  # noqa: N806  (NumPy takes "l", "u")
    if UPLO not in ("L", "U"):
        raise OptionError(f"eigvalsh: UPLO must be 'L' or 'U', got {UPLO!r}")
    eps = check_eps(eps, "eigvalsh")
    return make_node(Op.EIGVALSH, (n,), (UPLO,))


@builder(public=False)
def qr(a: Any, mode: str = "reduced") -> Any:
    """``(Q, R)`` of each matrix of ``a`` (..., M, N), as ``numpy.linalg.qr``, with LAPACK's
    signs (R's diagonal real, of either sign; :func:`qr_positive` makes it >= 0). Modes:
    "reduced": Q (..., M, K) with orthonormal columns, R (..., K, N) upper triangular,
    K = min(M, N); "r": that R alone; "complete": Q (..., M, M) unitary, R (..., M, N) (for
    M > N, Q's extra columns Q_perp span the complement of A's columns and R's extra rows are
    zero; Q_perp is not unique, and its derivative is taken in the gauge
    Q_perp^H dQ_perp = 0, so only functions invariant under rotations of Q_perp, such as
    Q_perp Q_perp^H, differentiate as they should); "raw": NumPy's ``(h, tau)``, h
    (..., N, M) and tau (..., K), LAPACK's Householder reflectors, which have no derivative
    (differentiating them raises a DTypeError)."""
    n = lift(a, "qr")
    if not isinstance(mode, str):
        raise OptionTypeError(f"qr: mode {mode!r} is not a string; use one of {_QR_MODES}")
    if mode not in _QR_MODES:
        raise OptionError(f"qr: mode {mode!r} is not one of {_QR_MODES}")
    kind = "reduced" if mode == "r" else mode
    if kind == "complete" and n.ndim >= 2 and n.shape[-2] <= n.shape[-1]:
        kind = "reduced"  # the same factors: one node, one derivative rule
    q, r = _qr_views(make_node(Op.QR, (n,), (kind,)), n.shape, kind)
    return r if mode == "r" else (q, r)


_QR_MODES = ("reduced", "complete", "r", "raw")


@builder(public=False)
def svd(
    a: Any, full_matrices: bool = True, compute_uv: bool = True, *, eps: float = DEFAULT_EPS
) -> Any:
    """``(U, S, Vh)`` of each matrix of ``a`` (..., M, N), as ``numpy.linalg.svd``, with
    LAPACK's phases: S (..., K) descending and real, K = min(M, N); U (..., M, M) and Vh
    (..., N, N) with ``full_matrices=True`` (NumPy's default), U (..., M, K) and Vh
    (..., K, N) with False; ``compute_uv=False`` returns S alone. The extra columns of a full
    U (M > N) or rows of a full Vh (M < N) span the complement and are not unique; their
    derivative is taken in the gauge that moves them least (U_perp^H dU_perp = 0, so
    dU_perp = -U_k (dU_k^H U_perp), and likewise for V), so only functions invariant under
    rotations of them (U_perp U_perp^H, anything of the first K) differentiate as they should.
    On the CPU, a stack on which LAPACK's gesdd fails to converge is redone matrix by matrix,
    with gesvd (SciPy) where gesdd fails again. ``eps`` broadens 1 / (s_j^2 - s_i^2) in the
    derivatives, as in :func:`eigh`."""
    n = lift(a, "svd")
    for name, flag in (("full_matrices", full_matrices), ("compute_uv", compute_uv)):
        if not isinstance(flag, (bool, np.bool_)):
            raise OptionTypeError(f"svd: {name} {flag!r} is not a bool")
    eps = check_eps(eps, "svd")
    if not compute_uv:  # the values alone: SVDVALS (graph/ops/spectra.py)
        return make_node(Op.SVDVALS, (n,))
    # a square matrix's full SVD is its reduced one: one node, as before full_matrices existed
    full = bool(full_matrices and compute_uv and n.ndim >= 2 and n.shape[-1] != n.shape[-2])
    u, s, vh = _svd_views(make_node(Op.SVD, (n,), (eps, full)), n.shape, full)
    return (u, s, vh) if compute_uv else s


@builder(public=False)
def svdvals(a: Any) -> Node:
    """The singular values, descending, of each matrix of ``a``, as ``numpy.linalg.svdvals``:
    one SVDVALS node (LAPACK without the vectors; see graph/ops/spectra.py)."""
    return svd(a, False, False)
