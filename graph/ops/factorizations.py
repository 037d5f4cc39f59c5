"""The factorizations of tensor-network code, batched over leading axes and differentiable:
``qr_positive``, ``ql``, ``lq``, ``rq`` (composites of the QR node of
graph/ops/decompositions.py, whose rules they inherit), ``polar`` (one op, POLAR) and
``expm`` (one op, EXPM).

``qr_positive`` is the reduced QR with R's diagonal real and >= 0: LAPACK's factors with the
phase of each diagonal entry moved from R to Q (Q diag(p), diag(p)^* R, p = d / |d| and 1 where
d = 0). With A of full column rank that factorization is unique, so Q itself (not only
gauge-invariant functions of it) differentiates, for complex inputs too. The phase is constant
where it is defined (LAPACK makes R's diagonal real, and QR's rules keep it real), so its
derivative is zero and qr_positive's rules are QR's.

``ql`` (A = Q L), ``lq`` (A = L Q) and ``rq`` (A = R Q) come from QR on flipped or
conjugate-transposed axes: with J the reversal of an axis, A J = Q R gives A = (Q J)(J R J),
and J R J is lower triangular; A^H = Q R gives A = R^H Q^H; and rq is ql of A^H, transposed.
For K = min(M, N): ql gives Q (..., M, K) with orthonormal columns and L (..., K, N); lq
gives L (..., M, K) and Q (..., K, N) with orthonormal rows; rq gives R (..., M, K) and
Q (..., K, N). Their triangles are LAPACK's (geqlf, gelqf, gerqf): for a non-square L of ql
or R of rq, the triangle ends in the last corner (L_ij = 0 for j > i + N - M; R_ij = 0 for
j < i - (M - N)). Signs: those of the underlying QR (the "diagonal" of either sign), or, with
``positive=True``, real and >= 0 (qr_positive underneath), which makes the factors unique.

``polar`` (A = U P, or P U with ``side="left"``, as ``scipy.linalg.polar``) is one op,
POLAR (the right polar; the left one is the right polar of A^H, conjugate-transposed): from
the reduced SVD A = W S Vh, U = W Vh (orthonormal columns, or rows when M < N) and
P = V S Vh (..., N, N), Hermitian positive semidefinite. Its rules are its own, not the SVD's
(whose 1 / (s_j^2 - s_i^2) would drop terms where singular values are close, and every one
of them is equal at an isometry, where a polar factor is most often taken): with
X = W^H dA V and D_ij = s_i + s_j, dU = W [(X - X^H) / D] Vh and dP = V [(X^H S + S X) / D] Vh,
plus, for M > N, (I - W W^H) dA V S^-1 Vh in dU and, for M < N, with
dA_perp = dA (I - V Vh), W S^-1 W^H dA_perp in dU and dA_perp^H W Vh + V W^H dA_perp in dP.
They are finite for any spectrum of full rank (a zero singular value makes U's derivative
infinite: U is not unique there); the SVD they are written with differentiates again
(``eps`` is its broadening, for second derivatives).

``expm`` is the matrix exponential, one EXPM node (``scipy.linalg.expm`` on the CPU; on CUDA
a batched [13/13] Pade scaling and squaring, runtime/backends/cuda.py). Its derivative is the
Fréchet derivative L(A, E) = d/dt e^(A + tE) at 0, read off the block identity
expm([[A, E], [0, A]]) = [[e^A, L(A, E)], [0, e^A]] (Higham, "Functions of Matrices", 3.2);
the JVP is L(A, T), the VJP L(A^H, G) (the adjoint of E -> L(A, E) for the real inner
product Re tr(X^H Y)). Both are EXPM nodes of twice the size, so second derivatives work.
Integers are promoted to float64; float16 is rejected, as numpy.linalg does.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from tenloom.graph.dtypes import _SUPPORTED_SET
from tenloom.graph.errors import DTypeError, OptionError, OptionTypeError, ShapeError, fmt_shape
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.checks import BadFormat, check_arity, check_no_attrs, short
from tenloom.graph.ops.decompositions import DEFAULT_EPS, qr, svd, svd_arrays
from tenloom.graph.ops.leaf import lift
from tenloom.graph.ops.linalg import _batch, _result_dtype, check_square, mH
from tenloom.graph.ops.movement import getitem, reshape
from tenloom.graph.ops.registry import Op, OpKind, builder, register_op
from tenloom.graph.value import V as T
from tenloom.graph.value import Value

# the ops of this family, defined before anything refers to them
Op.define_all("expm polar")


# ---- expm: one op ------------------------------------------------------------------------


def _expm_dtype(dt: np.dtype) -> np.dtype:
    """numpy.linalg's promotion: integers and booleans to float64, float16 rejected."""
    if dt.kind in "biu":
        return np.dtype("float64")
    if dt.kind in "fc" and dt.itemsize >= 4 and dt in _SUPPORTED_SET:
        return dt
    raise DTypeError(
        f"expm: not defined for dtype {dt}; use float32, float64, complex64 or complex128 "
        "(integers are promoted to float64)"
    )


def _expm_infer(inputs, attrs):
    (x,) = inputs
    check_square("expm", x)
    return x.shape, _expm_dtype(x.dtype)


def _expm_ref(xs, at):
    """scipy.linalg.expm (Al-Mohy and Higham's scaling and squaring), batched over leading
    axes (SciPy >= 1.9 takes stacks)."""
    import scipy.linalg

    x = xs[0]
    dt = _expm_dtype(x.dtype)
    if x.size == 0:
        return np.zeros(x.shape, dt)
    return np.asarray(scipy.linalg.expm(x.astype(dt, copy=False)), dtype=dt)


def _expm_cost(node) -> int:
    # a [13/13] Pade approximant (6 products and a solve) plus a few squarings
    n = node.shape[-1]
    return _batch(node.shape) * 12 * n**3


def frechet_expm(a: Value, e: Value) -> Value:
    """L(A, E), the derivative of expm at A along E: the top right block of
    expm([[A, E], [0, A]]), an EXPM node of twice the size (so it differentiates again)."""
    n = a.shape[-1]
    top = T.concatenate([a, e], axis=-1)
    bottom = T.concatenate([T.zeros(a.shape, a.dtype), a], axis=-1)
    big = T.expm(T.concatenate([top, bottom], axis=-2))
    return big[..., :n, n:]


def _expm_jvp(node, y, xs, ts):
    (x,), (t,) = xs, ts
    a = T.astype(x, node.dtype) if x.dtype != node.dtype else x
    return frechet_expm(a, T.astype(t, node.dtype) if t.dtype != node.dtype else t)


def _expm_vjp(node, y, xs, g):
    (x,) = xs
    a = T.astype(x, node.dtype) if x.dtype != node.dtype else x
    return (frechet_expm(mH(a), g),)


register_op(
    Op.EXPM,
    OpKind.LINALG,
    _expm_infer,
    _expm_ref,
    1,
    vjp=_expm_vjp,
    jvp=_expm_jvp,
    cost=_expm_cost,
    check_attrs=check_no_attrs,
)


# ---- polar: one op, so that its derivative needs no 1 / (s_i - s_j) --------------------------


class PolarAttrs(NamedTuple):
    eps: float  # the broadening of the SVD its rules are written with (their own derivatives)


def _polar_infer(inputs, attrs):
    (x,) = inputs
    if x.ndim < 2:
        raise ShapeError(
            f"polar: operand 0 of shape {fmt_shape(x.shape)} has {x.ndim} axes; it must be a "
            "(stack of) matrices, with at least 2 axes"
        )
    size = math.prod(x.shape[:-2]) * x.shape[-1] * (x.shape[-2] + x.shape[-1])
    return (size,), _result_dtype(Op.SVD, x.dtype)


def _polar_ref(xs, at):
    """U = W Vh and P = V S Vh from the reduced SVD (with SVD's gesvd fallback), packed."""
    w, s, vh = svd_arrays(xs[0], False)
    u = w @ vh
    p = np.conj(np.swapaxes(vh, -1, -2)) @ (s[..., :, None].astype(vh.dtype) * vh)
    return np.concatenate([u.reshape(-1), p.reshape(-1)])


def _polar_cost(node) -> int:
    m, n = node.inputs[0].shape[-2:]
    return _batch(node.inputs[0].shape) * (12 * m * n * min(m, n) + 2 * (m + n) * n * n)


def _check_polar(ins, at, op):
    at = check_arity(at, PolarAttrs, op)
    if type(at.eps) is not float or not at.eps >= 0 or at.eps == math.inf:
        raise BadFormat(f"polar: eps must be a finite float >= 0, got {short(at.eps)}")


def _polar_views(p, shape):
    """(U, P) of the packed POLAR value of an operand of ``shape`` (..., M, N)."""
    batch, (m, n) = tuple(shape[:-2]), shape[-2:]
    cut = math.prod(batch) * m * n
    return reshape(getitem(p, slice(0, cut)), batch + (m, n)), reshape(
        getitem(p, slice(cut, None)), batch + (n, n)
    )


def _polar_parts(node, x: Value):
    """W, s, V, Vh of the reduced SVD of ``x`` and D_ij = s_i + s_j (K x K)."""
    w, s, vh = (Value(n) for n in svd(x.node, False, True, eps=node.attrs.eps))
    d = T.expand_dims(s, -1) + T.expand_dims(s, -2)
    return w, s, mH(vh), vh, d


def _polar_jvp(node, y, xs, ts):
    """With X = W^H T V (K x K): dU = W [(X - X^H) / D] Vh, dP = V [(X^H S + S X) / D] Vh, plus,
    for M > N, (I - W W^H) T V S^-1 Vh in dU; for M < N, with T_perp = T (I - V Vh),
    W S^-1 W^H T_perp in dU and T_perp^H W Vh + V W^H T_perp in dP."""
    (x,), (t,) = xs, ts
    w, s, v, vh, d = _polar_parts(node, x)
    m, n = x.shape[-2:]
    sr, sc = T.expand_dims(s, -2), T.expand_dims(s, -1)
    tv = t @ v
    xm = mH(w) @ tv
    du = w @ ((xm - mH(xm)) / d) @ vh
    dp = v @ ((mH(xm) * sr + sc * xm) / d) @ vh
    if m > n:
        du = du + ((tv - w @ xm) / sr) @ vh
    elif m < n:
        tp = t - tv @ vh
        wt = mH(w) @ tp
        du = du + (w / sr) @ wt
        dp = dp + mH(wt) @ vh + v @ wt
    return _pack_polar(du, dp, y.dtype)


def _polar_vjp(node, y, xs, g):
    """The adjoint of :func:`_polar_jvp`: with B = W^H gU V and C = Vh gP V,
    gA = W [(B - B^H) / D + S (C + C^H) / D] Vh, plus (I - W W^H) gU V S^-1 Vh for M > N,
    and (W S^-1 W^H gU + W Vh (gP + gP^H)) (I - V Vh) for M < N."""
    (x,) = xs
    w, s, v, vh, d = _polar_parts(node, x)
    gu, gp = (Value(n) for n in _polar_views(g.node, x.shape))
    m, n = x.shape[-2:]
    sr, sc = T.expand_dims(s, -2), T.expand_dims(s, -1)
    guv = gu @ v
    b = mH(w) @ guv
    c = vh @ gp @ v
    ga = w @ ((b - mH(b)) / d + sc * (c + mH(c)) / d) @ vh
    if m > n:
        ga = ga + ((guv - w @ b) / sr) @ vh
    elif m < n:
        h = (w / sr) @ (mH(w) @ gu) + w @ (vh @ (gp + mH(gp)))
        ga = ga + h - (h @ v) @ vh
    return (ga,)


def _pack_polar(u: Value, p: Value, dtype) -> Value:
    return T.concatenate([T.reshape(T.astype(z, dtype), (-1,)) for z in (u, p)])


register_op(
    Op.POLAR,
    OpKind.LINALG,
    _polar_infer,
    _polar_ref,
    1,
    attrs=PolarAttrs,
    vjp=_polar_vjp,
    jvp=_polar_jvp,
    cost=_polar_cost,
    check_attrs=_check_polar,
    fmt=lambda at: f"[eps={at.eps!r}]",
)


# ---- builders (tenloom/linalg.py exposes them as tl.linalg.*) --------------------------------


def _matrices(a: Any, op: str) -> Node:
    """``a`` lifted, checked to be a stack of matrices of a dtype the decompositions take."""
    n = lift(a, op)
    if n.ndim < 2:
        raise ShapeError(
            f"{op}: operand 0 of shape {fmt_shape(n.shape)} has {n.ndim} axes; it must be a "
            "(stack of) matrices, with at least 2 axes"
        )
    if not (n.dtype.kind in "biu" or (n.dtype.kind in "fc" and n.dtype.itemsize >= 4)):
        raise DTypeError(
            f"{op}: not defined for dtype {n.dtype} (operand 0 of shape {fmt_shape(n.shape)}); "
            "use float32, float64, complex64 or complex128 (integers are promoted to float64)"
        )
    return n


def _flag(value: Any, op: str, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise OptionTypeError(f"{op}: {name} {value!r} is not a bool")
    return bool(value)


def _flip(x: Any, axis: int) -> Node:
    """``x`` reversed along ``axis`` (-1 or -2)."""
    index = (Ellipsis, slice(None, None, -1)) + ((slice(None),) if axis == -2 else ())
    return getitem(x, index)


def _qr(x: Node, positive: bool) -> tuple[Node, Node]:
    return qr_positive(x) if positive else qr(x)


@builder(public=False)
def qr_positive(a: Any) -> tuple[Node, Node]:
    """``(Q, R)``, the reduced QR of each matrix of ``a`` (..., M, N) with R's diagonal real
    and >= 0: Q (..., M, K) with orthonormal columns, R (..., K, N) upper triangular,
    K = min(M, N). Unique for a matrix of full rank, so Q itself differentiates, complex
    inputs included."""
    n = _matrices(a, "qr_positive")
    q, r = (Value(x) for x in qr(n))
    d = T.diagonal(r, 0, r.ndim - 2, r.ndim - 1)
    size = T.abs(d)
    nonzero = size > 0
    phase = T.where(nonzero, d / T.where(nonzero, size, 1), 1)  # 1 where the diagonal is 0
    return (q * T.expand_dims(phase, -2)).node, (T.expand_dims(T.conj(phase), -1) * r).node


@builder(public=False)
def ql(a: Any, *, positive: bool = False) -> tuple[Node, Node]:
    """``(Q, L)`` with ``a = Q @ L`` for each matrix of ``a`` (..., M, N): Q (..., M, K) with
    orthonormal columns, L (..., K, N) lower triangular (ending in the last corner when
    M < N: L_ij = 0 for j > i + N - M), K = min(M, N), as LAPACK's geqlf. ``positive=True``
    makes L's diagonal real and >= 0 (unique factors)."""
    n = _matrices(a, "ql")
    q, r = _qr(_flip(n, -1), _flag(positive, "ql", "positive"))
    return _flip(q, -1), _flip(_flip(r, -1), -2)


@builder(public=False)
def lq(a: Any, *, positive: bool = False) -> tuple[Node, Node]:
    """``(L, Q)`` with ``a = L @ Q`` for each matrix of ``a`` (..., M, N): L (..., M, K)
    lower triangular, Q (..., K, N) with orthonormal rows, K = min(M, N), as LAPACK's gelqf
    (the left-canonical step of an MPS). ``positive=True`` makes L's diagonal real and >= 0
    (unique factors)."""
    n = _matrices(a, "lq")
    q, r = _qr(mH(Value(n)).node, _flag(positive, "lq", "positive"))
    return mH(Value(r)).node, mH(Value(q)).node


@builder(public=False)
def rq(a: Any, *, positive: bool = False) -> tuple[Node, Node]:
    """``(R, Q)`` with ``a = R @ Q`` for each matrix of ``a`` (..., M, N): R (..., M, K)
    upper triangular (starting in the first corner's offset when M > N: R_ij = 0 for
    j < i - (M - N)), Q (..., K, N) with orthonormal rows, K = min(M, N), as
    ``scipy.linalg.rq(a, mode="economic")`` (LAPACK's gerqf) up to the signs of R's diagonal;
    ``positive=True`` makes them real and >= 0 (unique factors)."""
    n = _matrices(a, "rq")
    q, low = ql(mH(Value(n)).node, positive=_flag(positive, "rq", "positive"))
    return mH(Value(low)).node, mH(Value(q)).node


@builder(public=False)
def polar(a: Any, side: str = "right", *, eps: float = DEFAULT_EPS) -> tuple[Node, Node]:
    """``(U, P)``, the polar decomposition of each matrix of ``a`` (..., M, N), as
    ``scipy.linalg.polar``: ``a = U @ P`` (``side="right"``, P (..., N, N)) or ``a = P @ U``
    (``side="left"``, P (..., M, M)); U (..., M, N) has orthonormal columns (rows if M < N),
    P is Hermitian positive semidefinite. From the reduced SVD W S Vh: U = W Vh,
    P = V S Vh or W S W^H. One POLAR node, whose derivatives are finite at degenerate
    singular values (an isometry's, say); ``eps`` is the broadening of the SVD its rules use
    (which matters for second derivatives only)."""
    n = _matrices(a, "polar")
    if not isinstance(side, str):
        raise OptionTypeError(f"polar: side {side!r} is not a string; use 'right' or 'left'")
    if side not in ("right", "left"):
        raise OptionError(f"polar: side must be 'right' or 'left', got {side!r}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)):
        raise OptionTypeError(f"polar: eps {eps!r} is not a number")
    if not 0 <= float(eps) < math.inf:
        raise OptionError(f"polar: eps must be finite and >= 0, got {eps!r}")
    if side == "left":  # A = P U is A^H = U^H P: the right polar of A^H
        u, p = polar(mH(Value(n)).node, "right", eps=eps)
        return mH(Value(u)).node, p
    return _polar_views(make_node(Op.POLAR, (n,), (float(eps),)), n.shape)


@builder(public=False)
def expm(a: Any) -> Node:
    """The matrix exponential e^A of each square matrix of ``a`` (..., M, M), as
    ``scipy.linalg.expm`` (one EXPM node; integers promoted to float64). Differentiable to any
    order through the block identity of the module docstring."""
    return make_node(Op.EXPM, (lift(a, "expm"),))
