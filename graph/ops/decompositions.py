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
dR2 = dQ^H Y + Q^H dY. The VJP rules are the adjoints of these maps.

``svd`` (reduced, A = U diag(s) V^H, s descending): with dP = U^H dA V, ds = Re diag(dP),
U^H dU = F * (dP S + S dP^H) and V^H dV = F * (S dP + dP^H S), F_ij = 1 / (s_j^2 - s_i^2)
broadened as for eigh (``eps``, in units of the singular values squared), plus, for complex
matrices, the gauge: the phase of each singular pair split evenly,
i Im(dP_ii) / (2 s_i) on the diagonal of U^H dU and its opposite on V^H dV; and for
rectangular matrices the parts outside the spans, (I - UU^H) dA V S^-1 and
(I - VV^H) dA^H U S^-1 (zero singular values make these infinite). As for eigh, only
gauge-invariant functions (U f(s) V^H, |U_ij|^2, anything of s) match finite differences for
complex matrices; for real ones the signs are locally constant and U, V differentiate.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from tenloom.graph.errors import OptionError, OptionTypeError, ShapeError, fmt_shape
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
    mode: str  # "reduced" (Q (..., M, K), R (..., K, N), K = min(M, N))


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


def _qr_infer(inputs, attrs):
    (x,) = inputs
    if x.ndim < 2:
        raise ShapeError(
            f"qr: operand 0 of shape {fmt_shape(x.shape)} has {x.ndim} axes; it must be a "
            "(stack of) matrices, with at least 2 axes"
        )
    m, n, k = _qr_sizes(x.shape)
    return (math.prod(x.shape[:-2]) * (m * k + k * n),), _result_dtype(Op.QR, x.dtype)


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
    if at.mode != "reduced":
        raise BadFormat(f"qr: mode must be 'reduced', got {short(at.mode)}")


def _eigh_views(p, shape):
    """(w, V) of the packed EIGH value ``p`` of an operand of ``shape``, as lazy views; works on
    nodes (getitem, reshape, real) and on Values alike."""
    batch, n = _batch_of(shape), shape[-1]
    cut = math.prod(batch) * n
    return real(reshape(getitem(p, slice(0, cut)), batch + (n,))), reshape(
        getitem(p, slice(cut, None)), batch + (n, n)
    )


def _qr_views(p, shape):
    batch = _batch_of(shape)
    m, n, k = _qr_sizes(shape)
    cut = math.prod(batch) * m * k
    return reshape(getitem(p, slice(0, cut)), batch + (m, k)), reshape(
        getitem(p, slice(cut, None)), batch + (k, n)
    )


def _pack(*parts: Value, dtype) -> Value:
    return T.concatenate([T.reshape(T.astype(x, dtype), (-1,)) for x in parts])


def _uplo_mask(n: int, dtype, uplo: str) -> Value:
    rd = np.empty(0, dtype).real.dtype
    lower = np.tril(np.ones((n, n), rd), -1)
    return T.asarray(lower if uplo == "L" else lower.T.copy())


def _broadened(w: Value, eps: float) -> Value:
    """F_ij = (w_j - w_i) / ((w_j - w_i)^2 + eps), 0 on the diagonal: 1 / (w_j - w_i)
    broadened by a Lorentzian of width sqrt(eps)."""
    n = w.shape[-1]
    d = T.expand_dims(w, -2) - T.expand_dims(w, -1)
    return d / (d * d + (T.eye(n, dtype=w.dtype) + eps))


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
    (x,), (t,) = xs, ts
    q, r = (Value(n) for n in _qr_views(y.node, x.shape))
    m, n, k = _qr_sizes(x.shape)
    if m >= n:
        tq, tr = _qr_square_jvp(q, r, t)
    else:  # A = [X | Y], X = Q R1 square, R2 = Q^H Y
        tq, tr1 = _qr_square_jvp(q, r[..., :m], t[..., :m])
        tr2 = mH(tq) @ x[..., m:] + mH(q) @ t[..., m:]
        tr = T.concatenate([tr1, tr2], axis=-1)
    return _pack(tq, tr, dtype=y.dtype)


def _qr_vjp(node, y, xs, g):
    (x,) = xs
    q, r = (Value(n) for n in _qr_views(y.node, x.shape))
    gq, gr = (Value(n) for n in _qr_views(g.node, x.shape))
    m, n, k = _qr_sizes(x.shape)
    if m >= n:
        return (_qr_square_vjp(q, r, gq, gr),)
    gr1, gr2 = gr[..., :m], gr[..., m:]
    gx = _qr_square_vjp(q, r[..., :m], gq + x[..., m:] @ mH(gr2), gr1)
    return (T.concatenate([gx, q @ gr2], axis=-1),)


class SvdAttrs(NamedTuple):
    eps: float  # the Lorentzian broadening of 1 / (s_j^2 - s_i^2) in the derivatives (>= 0)


def _svd_infer(inputs, attrs):
    (x,) = inputs
    if x.ndim < 2:
        raise ShapeError(
            f"svd: operand 0 of shape {fmt_shape(x.shape)} has {x.ndim} axes; it must be a "
            "(stack of) matrices, with at least 2 axes"
        )
    m, n, k = _qr_sizes(x.shape)
    size = math.prod(x.shape[:-2]) * (m * k + k + k * n)
    return (size,), _result_dtype(Op.SVD, x.dtype)


def _svd_ref(xs, at):
    u, s, vh = np.linalg.svd(xs[0], full_matrices=False)
    return np.concatenate([u.reshape(-1), s.reshape(-1).astype(u.dtype), vh.reshape(-1)])


def _svd_cost(node) -> int:
    m, n, k = _qr_sizes(node.inputs[0].shape)
    return _batch(node.inputs[0].shape) * 12 * m * n * k


def _check_svd(ins, at, op):
    at = check_arity(at, SvdAttrs, op)
    if type(at.eps) is not float or not at.eps >= 0 or at.eps == math.inf:
        raise BadFormat(f"svd: eps must be a finite float >= 0, got {short(at.eps)}")


def _svd_views(p, shape):
    batch = _batch_of(shape)
    m, n, k = _qr_sizes(shape)
    b = math.prod(batch)
    c1, c2 = b * m * k, b * (m * k + k)
    return (
        reshape(getitem(p, slice(0, c1)), batch + (m, k)),
        real(reshape(getitem(p, slice(c1, c2)), batch + (k,))),
        reshape(getitem(p, slice(c2, None)), batch + (k, n)),
    )


def _svd_parts(node, y, x):
    u, s, vh = (Value(n) for n in _svd_views(y.node, x.shape))
    f = _broadened(s * s, node.attrs.eps)  # F_ij ~ 1 / (s_j^2 - s_i^2)
    return u, s, mH(vh), f


def _svd_jvp(node, y, xs, ts):
    (x,), (t,) = xs, ts
    u, s, v, f = _svd_parts(node, y, x)
    m, n, k = _qr_sizes(x.shape)
    sr = T.expand_dims(s, -2)  # scales columns: X * sr = X S
    sc = T.expand_dims(s, -1)  # scales rows: sc * X = S X
    dp = mH(u) @ t @ v
    eye = T.asarray(np.eye(k, dtype=s.dtype))
    ds = T.real(T.diagonal(dp, 0, dp.ndim - 2, dp.ndim - 1))
    wu = f * (dp * sr + sc * mH(dp))
    wv = f * (sc * dp + mH(dp) * sr)
    if y.dtype.kind == "c":  # the gauge: the phase of each pair split evenly
        half = T.expand_dims(1j * T.imag(T.diagonal(dp, 0, dp.ndim - 2, dp.ndim - 1)), -1)
        wu = wu + half * eye / (2 * sr)
        wv = wv - half * eye / (2 * sr)
    du = u @ wu
    dv = v @ wv
    if m > k:
        du = du + (t @ v - u @ dp) / sr
    if n > k:
        dv = dv + (mH(t) @ u - v @ mH(dp)) / sr
    return _pack(du, ds, mH(dv), dtype=y.dtype)


def _svd_vjp(node, y, xs, g):
    (x,) = xs
    u, s, v, f = _svd_parts(node, y, x)
    gu, gs, gvh = (Value(n) for n in _svd_views(g.node, x.shape))
    gv = mH(gvh)
    m, n, k = _qr_sizes(x.shape)
    sr = T.expand_dims(s, -2)
    sc = T.expand_dims(s, -1)
    eye = T.asarray(np.eye(k, dtype=s.dtype))
    xu, xv = f * (mH(u) @ gu), f * (mH(v) @ gv)
    gp = (xu + mH(xu)) * sr + sc * (xv + mH(xv)) + T.expand_dims(gs, -1) * eye
    if y.dtype.kind == "c":
        xu0, xv0 = mH(u) @ gu, mH(v) @ gv
        im = T.imag(T.diagonal(xu0, 0, xu0.ndim - 2, xu0.ndim - 1)) - T.imag(
            T.diagonal(xv0, 0, xv0.ndim - 2, xv0.ndim - 1)
        )
        gp = gp + T.expand_dims(1j * im / (2 * s), -1) * eye
    ga = u @ gp @ mH(v)
    if m > k:
        ga = ga + ((gu - u @ (mH(u) @ gu)) / sr) @ mH(v)
    if n > k:
        ga = ga + u @ mH((gv - v @ (mH(v) @ gv)) / sr)
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
    fmt=lambda at: f"[eps={at.eps!r}]",
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


@builder(public=False)
def eigh(a: Any, UPLO: str = "L", *, eps: float = DEFAULT_EPS) -> tuple[Node, Node]:  # noqa: N803
    """``(eigenvalues, eigenvectors)`` of each Hermitian matrix of ``a`` (..., M, M), as
    ``numpy.linalg.eigh``: eigenvalues ascending, real (..., M); eigenvectors the columns of
    (..., M, M), with LAPACK's phases. Only the ``UPLO`` triangle is read. ``eps`` (>= 0)
    broadens 1 / (w_j - w_i) in the derivatives to (w_j - w_i) / ((w_j - w_i)^2 + eps)."""
    n = lift(a, "eigh")
    if UPLO not in ("L", "U"):
        raise OptionError(f"eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)):
        raise OptionTypeError(f"eigh: eps {eps!r} is not a number")
    if not 0 <= float(eps) < math.inf:
        raise OptionError(f"eigh: eps must be finite and >= 0, got {eps!r}")
    p = make_node(Op.EIGH, (n,), (UPLO, float(eps)))
    return _eigh_views(p, n.shape)


@builder(public=False)
def eigvalsh(a: Any, UPLO: str = "L", *, eps: float = DEFAULT_EPS) -> Node:  # noqa: N803
    """The eigenvalues, ascending, of each Hermitian matrix of ``a``, as
    ``numpy.linalg.eigvalsh``: the first result of :func:`eigh` (one EIGH node serves both)."""
    return eigh(a, UPLO, eps=eps)[0]


@builder(public=False)
def qr(a: Any, mode: str = "reduced") -> Any:
    """``(Q, R)`` of each matrix of ``a`` (..., M, N), as ``numpy.linalg.qr``: Q (..., M, K)
    with orthonormal columns, R (..., K, N) upper triangular (K = min(M, N)), with LAPACK's
    signs (R's diagonal real, of either sign). ``mode="r"`` returns R alone; "complete" and
    "raw" are not supported yet."""
    n = lift(a, "qr")
    if mode not in ("reduced", "r"):
        raise OptionError(f"qr: mode {mode!r} is not supported; use 'reduced' or 'r'")
    q, r = _qr_views(make_node(Op.QR, (n,), ("reduced",)), n.shape)
    return r if mode == "r" else (q, r)


@builder(public=False)
def svd(
    a: Any, full_matrices: bool = True, compute_uv: bool = True, *, eps: float = DEFAULT_EPS
) -> Any:
    """``(U, S, Vh)`` of each matrix of ``a`` (..., M, N), as ``numpy.linalg.svd``: U
    (..., M, K), S (..., K) descending and real, Vh (..., K, N), K = min(M, N), with LAPACK's
    phases; ``compute_uv=False`` returns S alone. ``full_matrices=True`` (NumPy's default)
    is accepted for square matrices only (the extra columns of a rectangular one have no
    derivative): pass False. ``eps`` broadens 1 / (s_j^2 - s_i^2) in the derivatives, as in
    :func:`eigh`."""
    n = lift(a, "svd")
    if n.ndim >= 2 and full_matrices and compute_uv and n.shape[-1] != n.shape[-2]:
        raise OptionError(
            f"svd: full_matrices=True is not supported for the non-square shape "
            f"{fmt_shape(n.shape)}; pass full_matrices=False (the reduced SVD)"
        )
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)):
        raise OptionTypeError(f"svd: eps {eps!r} is not a number")
    if not 0 <= float(eps) < math.inf:
        raise OptionError(f"svd: eps must be finite and >= 0, got {eps!r}")
    u, s, vh = _svd_views(make_node(Op.SVD, (n,), (float(eps),)), n.shape)
    return (u, s, vh) if compute_uv else s


@builder(public=False)
def svdvals(a: Any) -> Node:
    """The singular values, descending, of each matrix of ``a``, as ``numpy.linalg.svdvals``."""
    return svd(a, False, False)
