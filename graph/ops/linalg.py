"""Linear algebra on stacks of matrices: inv, solve, det, slogdet (two ops: its sign and the log
of its absolute value) and cholesky, with NumPy's semantics
(``numpy.linalg``) and batched over leading axes; ``tl.linalg`` (tenloom/linalg.py) exposes
them.

Dtypes follow NumPy: integers and booleans are promoted to float64, float16 is rejected with a
DTypeError (as numpy.linalg rejects it), float32/64 and complex64/128 are kept. The NumPy
references call ``np.linalg.*`` on the input arrays, so on CUDA they dispatch to
``cupy.linalg`` through ``__array_function__``; OpenCL has no kernel for these ops.

The passes treat these nodes as barriers: they are neither elementwise nor contractions, so
fusion, canonicalization and merging leave them alone and the contraction networks on either
side are optimized separately.

Differentiation (conventions in graph/autodiff.py: VJP rules compute J^H g, PyTorch's
convention for complex inputs; JVP rules compute J t). With Y = inv(A) and X = solve(A, B):
d inv = -Y dA Y, d solve = A^-1 (dB - dA X), d det = det(A) tr(A^-1 dA), and for slogdet,
with z = tr(A^-1 dA), d logabs = Re z and d sign = sign * i Im z (zero for real inputs).
``cholesky`` reads only the lower triangle of its operand and the real part of its diagonal,
as LAPACK does; its rules are exact for that function of all entries (the tangent is made
Hermitian from the lower triangle first), so they hold for any direction, and for Hermitian
inputs built as ``x @ x^H`` they give the usual rule: dL = L Phi(L^-1 dA L^-H), Phi taking the
lower triangle with the diagonal halved. Singular operands make the rules' solves fail at run
time, as numpy.linalg does (det and slogdet of a singular matrix have no derivative here).

The decompositions (eigh, qr, svd) and their rules are in graph/ops/decompositions.py.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from tenloom.graph.dtypes import _SUPPORTED_SET
from tenloom.graph.errors import DTypeError, ShapeError, fmt_shape
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.args import int_arg
from tenloom.graph.ops.checks import check_no_attrs
from tenloom.graph.ops.contract import matmul
from tenloom.graph.ops.contract import trace as _trace
from tenloom.graph.ops.elementwise import broadcast_shapes
from tenloom.graph.ops.leaf import eye as _eye
from tenloom.graph.ops.leaf import lift
from tenloom.graph.ops.movement import broadcast_to, reshape
from tenloom.graph.ops.registry import Op, OpKind, as_array, builder, register_op
from tenloom.graph.value import V as T
from tenloom.graph.value import Value

# the ops of this family, defined before anything refers to them
Op.define_all(
    "inv solve det slogdet_sign slogdet_logabs cholesky eigh qr svd"
)  # decompositions.py: the last 3

# what each op computes on one small matrix of a dtype: its result dtype (NumPy's promotion)
_PROBES = {
    Op.INV: lambda dt: np.linalg.inv(np.eye(1, dtype=dt)).dtype,
    Op.DET: lambda dt: np.linalg.det(np.eye(1, dtype=dt)).dtype,
    Op.SLOGDET_SIGN: lambda dt: np.linalg.slogdet(np.eye(1, dtype=dt))[0].dtype,
    Op.SLOGDET_LOGABS: lambda dt: np.linalg.slogdet(np.eye(1, dtype=dt))[1].dtype,
    Op.CHOLESKY: lambda dt: np.linalg.cholesky(np.eye(1, dtype=dt)).dtype,
    Op.EIGH: lambda dt: np.linalg.eigh(np.eye(1, dtype=dt))[1].dtype,
    Op.QR: lambda dt: np.linalg.qr(np.eye(1, dtype=dt))[0].dtype,
    Op.SVD: lambda dt: np.linalg.svd(np.eye(1, dtype=dt))[0].dtype,
}
_DTYPE_CACHE: dict[tuple, np.dtype] = {}


def _result_dtype(op: Op, *dts: np.dtype) -> np.dtype:
    key = (op, *dts)
    dt = _DTYPE_CACHE.get(key)
    if dt is None:
        try:
            if op is Op.SOLVE:
                dt = np.linalg.solve(np.eye(1, dtype=dts[0]), np.ones((1, 1), dts[1])).dtype
            else:
                dt = _PROBES[op](dts[0])
        except TypeError as e:
            names = " and ".join(str(d) for d in dts)
            raise DTypeError(
                f"{op.value}: not defined for dtype {names} ({e}); use float32, float64, "
                "complex64 or complex128 (integers are promoted to float64)"
            ) from None
        if dt not in _SUPPORTED_SET:  # pragma: no cover - numpy.linalg gives float/complex
            raise DTypeError(f"{op.value}: result dtype {dt} is not supported")
        _DTYPE_CACHE[key] = dt
    return dt


def check_square(op: str, x, k: int = 0) -> None:
    """ShapeError unless ``x`` is a stack of square matrices (at least 2 axes, the last two
    equal)."""
    if x.ndim < 2:
        raise ShapeError(
            f"{op}: operand {k} of shape {fmt_shape(x.shape)} has {x.ndim} axes; it must be a "
            "(stack of) square matrices, with at least 2 axes"
        )
    if x.shape[-1] != x.shape[-2]:
        raise ShapeError(
            f"{op}: operand {k} of shape {fmt_shape(x.shape)} is not a (stack of) square "
            f"matrices: its last two axes are {x.shape[-2]} and {x.shape[-1]}"
        )


def _square_infer(op: Op, drop: bool):
    def infer(inputs, attrs):
        (x,) = inputs
        check_square(op.value, x)
        return (x.shape[:-2] if drop else x.shape), _result_dtype(op, x.dtype)

    return infer


def _solve_infer(inputs, attrs):
    a, b = inputs
    check_square("solve", a)
    if b.ndim < 2:
        raise ShapeError(
            f"solve: operand 1 of shape {fmt_shape(b.shape)} must have at least 2 axes "
            "(the builder makes a vector a column)"
        )
    if b.shape[-2] != a.shape[-1]:
        raise ShapeError(
            f"solve: operand 1 of shape {fmt_shape(b.shape)} has {b.shape[-2]} rows for "
            f"operand 0 of shape {fmt_shape(a.shape)} ({a.shape[-1]} columns); b must be "
            "(..., M, K) for a of shape (..., M, M), or (M,)"
        )
    try:
        batch = broadcast_shapes("solve", (a.shape[:-2], b.shape[:-2]))
    except ShapeError:
        raise ShapeError(
            f"solve: batch axes of operand 0 {fmt_shape(a.shape[:-2])} and operand 1 "
            f"{fmt_shape(b.shape[:-2])} do not broadcast; shapes {fmt_shape(a.shape)} and "
            f"{fmt_shape(b.shape)}"
        ) from None
    return batch + b.shape[-2:], _result_dtype(Op.SOLVE, a.dtype, b.dtype)


# ---- cost: element operations, LAPACK's leading terms ----------------------------------------


def _batch(shape) -> int:
    return math.prod(shape[:-2])


def _inv_cost(node) -> int:
    x = node.inputs[0]
    return _batch(x.shape) * x.shape[-1] ** 3


def _solve_cost(node) -> int:
    n, k = node.inputs[0].shape[-1], node.shape[-1]
    return _batch(node.shape) * (2 * n**3 // 3 + 2 * n * n * k)


def _det_cost(node) -> int:
    x = node.inputs[0]
    return _batch(x.shape) * (2 * x.shape[-1] ** 3 // 3 + x.shape[-1])


def _cholesky_cost(node) -> int:
    x = node.inputs[0]
    return _batch(x.shape) * (x.shape[-1] ** 3 // 3 + x.shape[-1])


# ---- differentiation helpers -------------------------------------------------------------


def mT(x: Value) -> Value:
    """The last two axes swapped."""
    perm = list(range(x.ndim))
    perm[-2:] = perm[-1], perm[-2]
    return T.transpose(x, perm)


def mH(x: Value) -> Value:
    """The conjugate transpose of the last two axes."""
    return T.conj(mT(x))


def unbroadcast_batch(g: Value, shape: tuple[int, ...]) -> Value:
    """Sum ``g`` (batch + matrix axes) over the batch axes broadcasting added to ``shape``."""
    from tenloom.graph.autodiff import unbroadcast

    return unbroadcast(g, shape)


def tr_solve(a: Value, t: Value) -> Value:
    """tr(A^-1 T) over the last two axes."""
    s = T.solve(a, t)
    return T.trace(s, 0, s.ndim - 2, s.ndim - 1)


def as_matrix(g: Value) -> Value:
    """A stack of scalars (...) as (..., 1, 1), to scale a stack of matrices."""
    return T.reshape(g, g.shape + (1, 1))


def _inv_vjp(node, y, xs, g):
    yh = mH(y)
    return (-(yh @ g @ yh),)


def _inv_jvp(node, y, xs, ts):
    return -(y @ ts[0] @ y)


def _solve_vjp(node, y, xs, g):
    a, b = xs
    gb = T.solve(mH(a), g)
    ga = -(gb @ mH(y))
    return unbroadcast_batch(ga, a.shape), unbroadcast_batch(gb, b.shape)


def _solve_jvp(node, y, xs, ts):
    a, _ = xs
    ta, tb = ts
    rhs = tb if ta is None else (-(ta @ y) if tb is None else tb - ta @ y)
    return T.solve(a, rhs)


def _inv_h(a: Value) -> Value:
    return mH(T.inv(a))


def _det_vjp(node, y, xs, g):
    (a,) = xs
    return (as_matrix(g * T.conj(y)) * _inv_h(a),)


def _det_jvp(node, y, xs, ts):
    return y * tr_solve(xs[0], ts[0])


def _logabs_vjp(node, y, xs, g):
    (a,) = xs
    return (as_matrix(g) * _inv_h(a),)


def _logabs_jvp(node, y, xs, ts):
    return T.real(tr_solve(xs[0], ts[0]))


def _sign_vjp(node, y, xs, g):
    (a,) = xs
    if y.dtype.kind != "c":
        return (None,)
    c = -T.imag(T.conj(g) * y)  # dL = c Im(z) = Re(-i c z), z = tr(A^-1 dA)
    return (as_matrix(c * 1j) * _inv_h(a),)


def _sign_jvp(node, y, xs, ts):
    if y.dtype.kind != "c":
        return None
    return y * (1j * T.imag(tr_solve(xs[0], ts[0])))


def _masks(n: int, dtype) -> tuple[Value, Value, Value]:
    """The strictly lower triangle, the identity and Phi's mask (lower, diagonal halved) of
    n x n matrices, as constants of the real dtype of ``dtype``."""
    rd = np.empty(0, dtype).real.dtype
    lower = np.tril(np.ones((n, n), rd), -1)
    eye = np.eye(n, dtype=rd)
    return T.asarray(lower), T.asarray(eye), T.asarray(lower + 0.5 * eye)


def _hermitian_part(t: Value, lower: Value, eye: Value) -> Value:
    """The Hermitian matrix LAPACK reads from ``t``: its strictly lower triangle mirrored, and
    the real part of its diagonal."""
    s = t * lower
    return s + mH(s) + T.real(t) * eye


def _cholesky_jvp(node, y, xs, ts):
    lower, eye, phi = _masks(y.shape[-1], y.dtype)
    ah = _hermitian_part(ts[0], lower, eye)
    p = mH(T.solve(y, mH(T.solve(y, ah))))  # L^-1 Ah L^-H (Hermitian)
    return y @ (p * phi)


def _cholesky_vjp(node, y, xs, g):
    lower, eye, phi = _masks(y.shape[-1], y.dtype)
    g2 = (mH(y) @ g) * phi
    g3 = mH(T.solve(mH(y), mH(T.solve(mH(y), g2))))  # L^-H G2 L^-1
    return ((g3 + mH(g3)) * lower + T.real(g3) * eye,)


# ---- registration ----------------------------------------------------------------------------

for _op, _ref, _drop, _vjp, _jvp, _cost in (
    (Op.INV, lambda xs, at: np.linalg.inv(xs[0]), False, _inv_vjp, _inv_jvp, _inv_cost),
    (Op.DET, lambda xs, at: as_array(np.linalg.det(xs[0])), True, _det_vjp, _det_jvp, _det_cost),
    (
        Op.SLOGDET_SIGN,
        lambda xs, at: as_array(np.linalg.slogdet(xs[0])[0]),
        True,
        _sign_vjp,
        _sign_jvp,
        _det_cost,
    ),
    (
        Op.SLOGDET_LOGABS,
        lambda xs, at: as_array(np.linalg.slogdet(xs[0])[1]),
        True,
        _logabs_vjp,
        _logabs_jvp,
        _det_cost,
    ),
    (
        Op.CHOLESKY,
        lambda xs, at: np.linalg.cholesky(xs[0]),
        False,
        _cholesky_vjp,
        _cholesky_jvp,
        _cholesky_cost,
    ),
):
    register_op(
        _op,
        OpKind.LINALG,
        _square_infer(_op, _drop),
        _ref,
        1,
        vjp=_vjp,
        jvp=_jvp,
        cost=_cost,
        check_attrs=check_no_attrs,
    )


def _solve_ref(xs, at):
    """numpy.linalg.solve with both batches broadcast first, so that NumPy 1's rule (which
    CuPy follows: b of one axis fewer than a is a stack of vectors) reads b as matrices too."""
    a, b = xs
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if a.shape[:-2] != batch or b.shape[:-2] != batch:
        a = np.broadcast_to(a, batch + a.shape[-2:])
        b = np.broadcast_to(b, batch + b.shape[-2:])
    return np.linalg.solve(a, b)


register_op(
    Op.SOLVE,
    OpKind.LINALG,
    _solve_infer,
    _solve_ref,
    2,
    vjp=_solve_vjp,
    jvp=_solve_jvp,
    cost=_solve_cost,
    check_attrs=check_no_attrs,
)


# ---- builders (tenloom/linalg.py exposes them as tl.linalg.*) --------------------------------


@builder(public=False)
def inv(a: Any) -> Node:
    """The inverse of each square matrix of ``a`` (..., M, M), as ``numpy.linalg.inv``."""
    return make_node(Op.INV, (lift(a, "inv"),))


@builder(public=False)
def solve(a: Any, b: Any) -> Node:
    """The solution x of ``a @ x = b``, as ``numpy.linalg.solve`` (NumPy 2): ``a`` is
    (..., M, M); ``b`` is a vector (M,) only when it has one axis, else (..., M, K), its batch
    axes broadcast against ``a``'s."""
    an, bn = lift(a, "solve"), lift(b, "solve")
    if bn.ndim == 1:
        check_square("solve", an)
        if bn.shape[0] != an.shape[-1]:
            raise ShapeError(
                f"solve: operand 1 of shape {fmt_shape(bn.shape)} does not match operand 0 of "
                f"shape {fmt_shape(an.shape)} ({an.shape[-1]} columns)"
            )
        x = make_node(Op.SOLVE, (an, reshape(bn, (bn.shape[0], 1))))
        return reshape(x, x.shape[:-1])
    return make_node(Op.SOLVE, (an, bn))


@builder(public=False)
def det(a: Any) -> Node:
    """The determinant of each square matrix of ``a`` (..., M, M), as ``numpy.linalg.det``."""
    return make_node(Op.DET, (lift(a, "det"),))


@builder(public=False)
def slogdet(a: Any) -> tuple[Node, Node]:
    """``(sign, logabsdet)`` of each square matrix of ``a``, as ``numpy.linalg.slogdet``: two
    nodes (sign has ``a``'s promoted dtype, logabsdet its real dtype)."""
    n = lift(a, "slogdet")
    return make_node(Op.SLOGDET_SIGN, (n,)), make_node(Op.SLOGDET_LOGABS, (n,))


@builder(public=False)
def cholesky(a: Any) -> Node:
    """The lower Cholesky factor L (``a = L @ L^H``) of each Hermitian positive-definite
    matrix of ``a``, as ``numpy.linalg.cholesky`` (only the lower triangle is read)."""
    return make_node(Op.CHOLESKY, (lift(a, "cholesky"),))


@builder(public=False)
def matrix_power(a: Any, n: int) -> Node:
    """``a`` to the integer power ``n``, as ``numpy.linalg.matrix_power``: repeated squaring
    with matmul (the identity, in ``a``'s dtype, for 0; the inverse's power for n < 0, which
    promotes integers to float64 as inv does)."""
    x = lift(a, "matrix_power")
    k = int_arg(n, "matrix_power", "n")
    check_square("matrix_power", x)
    if k < 0:
        x, k = inv(x), -k
    if k == 0:
        return broadcast_to(_eye(x.shape[-1], dtype=x.dtype), x.shape)
    result = None
    while True:
        if k & 1:
            result = x if result is None else matmul(result, x)
        k >>= 1
        if not k:
            return result
        x = matmul(x, x)


@builder(public=False)
def linalg_trace(x: Any, offset: int = 0) -> Node:
    """The trace of each matrix of ``x`` (..., M, N), over its last two axes, as the array
    API's ``linalg.trace`` (``tl.linalg.trace``; ``tl.trace`` is NumPy's, over the first two)."""
    n = lift(x, "trace")
    if n.ndim < 2:
        raise ShapeError(
            f"trace: operand 0 of shape {fmt_shape(n.shape)} has {n.ndim} axes; it must be a "
            "(stack of) matrices, with at least 2 axes"
        )
    return _trace(n, offset, n.ndim - 2, n.ndim - 1)
