"""Composite builders of ``tl.linalg``, made of existing ops: the norms ``vector_norm``,
``matrix_norm`` (the array API's) and ``norm`` (``numpy.linalg.norm``'s), and the
pseudo-inverse ``pinv``, from the SVD (or eigh for ``hermitian=True``), whose derivative is its
own op's (PINV, below).

Norms: the result dtype is NumPy's: the real dtype of the operand (float32 for complex64),
integers and booleans promoted to float64. The 2-norm is sqrt(sum |x|^2) with |x|^2 computed as
x conj(x) (no abs), and every p-th root is taken where its argument is positive and 0 elsewhere,
so the gradient at a zero vector is 0 (a subgradient) instead of nan. Elsewhere the gradients
are those of the composite: ties of a max (inf and 1-norms, the induced matrix norms) share the
cotangent evenly, as ``tl.max`` does; the spectral and nuclear norms differentiate through the
SVD's rules (exact for simple singular values; a singular value that is exactly 0, in a
rectangular or a complex matrix, gives nan there, as the SVD's rules divide by it).

pinv: with A = U diag(s) V^H, pinv(A) = V diag(s+) U^H where s+_i = 1 / s_i for s_i above
rtol * max(s) and 0 for the others: a mask of the same static shape, so the graph does not
depend on the values. The default rtol is max(M, N) * eps of the real dtype, as the array API
says (NumPy's own default, rcond=1e-15, is given as ``rcond=``).

Its derivative is not the SVD's rules': those broaden 1 / (s_j^2 - s_i^2), which drops the
pairs of equal singular values whose terms cancel to a finite limit in pinv (pinv of an
orthogonal Q had a gradient of 0 where -Q^T G Q^T is right), and they divide by a singular
value that is exactly 0. The value goes through a PINV node, which passes it on and carries the
Moore-Penrose derivative of P = pinv(A) (Golub and Pereyra; JAX's pinv has the same rule):

    dP = -P dA P + P P^H dA^H (I - A P) + (I - P A) dA^H P^H P

exact wherever the rank is locally constant and the cut singular values are 0; a cut of
nonzero values (a large rtol) differentiates as if they were 0. ``hermitian=True`` applies it
to the Hermitian matrix read from the lower triangle.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from tenloom.graph.errors import OptionError, OptionTypeError, ShapeError, fmt_shape
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.args import bool_arg, int_arg, normalize_axes
from tenloom.graph.ops.checks import check_no_attrs
from tenloom.graph.ops.leaf import lift
from tenloom.graph.ops.linalg import _hermitian_part, check_square, mH
from tenloom.graph.ops.registry import Op, OpKind, builder, register_op
from tenloom.graph.value import V as T
from tenloom.graph.value import Value

_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def _as_inexact(x: Node) -> Value:
    """``x`` as a Value, integers and booleans cast to float64 (as numpy.linalg.norm does)."""
    v = Value(x)
    return T.astype(v, "float64") if x.dtype.kind in "biu" else v


def _abs2(v: Value) -> Value:
    """|v|^2, real, without abs (whose derivative is undefined at 0)."""
    return T.real(v * T.conj(v)) if v.dtype.kind == "c" else v * v


def _root(s: Value, p: float) -> Value:
    """s ** (1 / p) for s >= 0, p > 0; 0 where s is 0 with a zero derivative there. The test is
    ``s == 0``, not ``s > 0``, so that NaN (a NaN entry) stays NaN, as NumPy's norm gives."""
    zero = s == 0
    base = T.where(zero, 1.0, s)
    r = T.sqrt(base) if p == 2 else base ** (1.0 / p)
    return T.where(zero, 0.0, r)


def _vector_ord(ord: Any, op: str) -> float:  # noqa: A002
    if isinstance(ord, str):
        raise OptionError(f"{op}: ord {ord!r} is not valid for vectors; give a number or ±inf")
    if isinstance(ord, (bool, np.bool_)) or not isinstance(ord, numbers.Real):
        raise OptionTypeError(f"{op}: ord {ord!r} is not a number")
    p = float(ord)
    if math.isnan(p):
        raise OptionError(f"{op}: ord must not be nan")
    return p


def _vector(v: Value, axes: tuple[int, ...], keepdims: bool, p: float) -> Value:
    """The p-norm of ``v`` (float or complex) over ``axes``."""
    if p == math.inf:
        if any(v.shape[a] == 0 for a in axes):  # NumPy: 0 (max has no identity; |v| >= 0)
            return T.sum(T.abs(v), axes, keepdims=keepdims)
        return T.max(T.abs(v), axes, keepdims=keepdims)
    if p == -math.inf:
        return T.min(T.abs(v), axes, keepdims=keepdims)
    if p == 0:  # the number of nonzero entries, in the real dtype
        rd = np.empty(0, v.dtype).real.dtype
        return T.sum(T.astype(v != 0, rd), axes, keepdims=keepdims)
    if p == 1:
        return T.sum(T.abs(v), axes, keepdims=keepdims)
    if p == 2:
        return _root(T.sum(_abs2(v), axes, keepdims=keepdims), 2)
    s = T.sum(T.abs(v) ** p, axes, keepdims=keepdims)
    return _root(s, p) if p > 0 else s ** (1.0 / p)


@builder(public=False)
def vector_norm(x: Any, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Node:  # noqa: A002
    """The ``ord``-norm of ``x`` over ``axis`` (None: all axes, as one vector), as the array
    API's ``linalg.vector_norm``: sum(|x|^ord)^(1/ord), max|x| for inf, min|x| for -inf, the
    number of nonzero entries for 0; real (float32 for complex64, float64 for integers)."""
    n = lift(x, "vector_norm")
    keep = bool_arg(keepdims, "vector_norm", "keepdims")
    p = _vector_ord(ord, "vector_norm")
    axes = normalize_axes(axis, n.ndim, "vector_norm", n.shape)
    return _vector(_as_inexact(n), axes, keep, p).node


def _matrix_ord(ord: Any, op: str) -> Any:  # noqa: A002
    if isinstance(ord, str):
        if ord in ("fro", "f", "nuc"):
            return "fro" if ord == "f" else ord
    elif not isinstance(ord, (bool, np.bool_)) and isinstance(ord, numbers.Real):
        if float(ord) in (1.0, -1.0, 2.0, -2.0, math.inf, -math.inf):
            return float(ord)
    else:
        raise OptionTypeError(f"{op}: ord {ord!r} is not a number or a string")
    valid = ", ".join(repr(o) for o in _MATRIX_ORDS)
    raise OptionError(f"{op}: ord {ord!r} is not valid for matrices; give one of {valid}")


def _matrix(x: Node, keepdims: bool, ord: Any) -> Value:  # noqa: A002
    """The ``ord`` norm (checked) of each matrix of ``x`` over its last two axes."""
    d = x.ndim
    rows, cols = d - 2, d - 1
    if ord == "fro":
        out = _root(T.sum(_abs2(_as_inexact(x)), (rows, cols)), 2)
    elif ord in ("nuc", 2.0, -2.0):
        s = T.svdvals(x)
        # an empty matrix's 2-norm is 0, as NumPy's (its -2 norm has no value: s[-1] raises)
        empty = ord == 2.0 and s.shape[-1] == 0
        out = T.sum(s, -1) if ord == "nuc" or empty else s[..., 0 if ord == 2.0 else -1]
    else:  # induced by the 1-norm (max column sum) or the inf-norm (max row sum)
        sums = T.sum(T.abs(_as_inexact(x)), rows if abs(ord) == 1 else cols)
        if ord > 0 and sums.shape[-1] == 0:  # no sums: 0, as NumPy's
            out = T.sum(sums, -1)
        else:
            out = T.max(sums, -1) if ord > 0 else T.min(sums, -1)
    return T.reshape(out, x.shape[:-2] + (1, 1)) if keepdims else out


@builder(public=False)
def matrix_norm(x: Any, keepdims: bool = False, ord: Any = "fro") -> Node:  # noqa: A002
    """The ``ord`` norm of each matrix of ``x`` (..., M, N), as the array API's
    ``linalg.matrix_norm``: "fro" (Frobenius), "nuc" (the sum of the singular values), 2 and -2
    (the largest and smallest singular value), 1 and -1 (max and min column sum of |x|), inf and
    -inf (max and min row sum); real. ``keepdims`` keeps the two axes as size 1."""
    n = lift(x, "matrix_norm")
    keep = bool_arg(keepdims, "matrix_norm", "keepdims")
    o = _matrix_ord(ord, "matrix_norm")
    if n.ndim < 2:
        raise ShapeError(
            f"matrix_norm: operand 0 of shape {fmt_shape(n.shape)} has {n.ndim} axes; it must "
            "be a (stack of) matrices, with at least 2 axes"
        )
    return _matrix(n, keep, o).node


def _axis_pair(axis: Any, n: Node) -> tuple[int, int]:
    out = []
    for a in axis:
        k = int_arg(a, "norm", "axis")
        if not -n.ndim <= k < n.ndim:
            raise ShapeError(
                f"norm: axis {k} is out of bounds for operand 0 of shape {fmt_shape(n.shape)} "
                f"({n.ndim} axes)"
            )
        out.append(k % n.ndim)
    if out[0] == out[1]:
        raise ShapeError(f"norm: axis {tuple(axis)!r} names the same axis twice")
    return out[0], out[1]


@builder(public=False)
def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Node:  # noqa: A002
    """A vector or matrix norm, as ``numpy.linalg.norm``: with ``axis=None`` and ``ord=None``
    the 2-norm of ``x`` flattened; ``axis=None`` with an ``ord`` needs 1 axis (a vector norm) or
    2 (a matrix norm); an int ``axis`` takes vector norms along it, a pair of axes matrix norms
    over them (rows, columns). ``ord`` as in :func:`vector_norm` and :func:`matrix_norm`
    (None: 2 for vectors, "fro" for matrices)."""
    n = lift(x, "norm")
    keep = bool_arg(keepdims, "norm", "keepdims")
    if axis is None:
        if ord is None:
            return _vector(_as_inexact(n), tuple(range(n.ndim)), keep, 2.0).node
        if n.ndim not in (1, 2):
            raise ShapeError(
                f"norm: ord={ord!r} with axis=None needs an operand of 1 or 2 axes (a vector or "
                f"a matrix), got shape {fmt_shape(n.shape)}; give axis="
            )
        axis = tuple(range(n.ndim))
    elif not isinstance(axis, (tuple, list)):
        axis = (axis,)
    if len(axis) == 1:
        axes = normalize_axes(axis, n.ndim, "norm", n.shape)
        p = 2.0 if ord is None else _vector_ord(ord, "norm")
        return _vector(_as_inexact(n), axes, keep, p).node
    if len(axis) != 2:
        raise ShapeError(
            f"norm: axis {tuple(axis)!r} names {len(axis)} axes; give one (vector norms) or "
            "two (matrix norms)"
        )
    o = _matrix_ord("fro" if ord is None else ord, "norm")
    r, c = _axis_pair(axis, n)
    moved = T.moveaxis(Value(n), (r, c), (-2, -1))
    out = _matrix(moved.node, False, o)
    return (T.expand_dims(out, tuple(sorted((r, c)))) if keep else out).node


# ---- pinv -------------------------------------------------------------------------------------


def _tolerance(rtol: Any, rcond: Any, batch: tuple[int, ...], default: float) -> Any:
    """The relative cut-off: a float, or a Value broadcast against the batch axes."""
    if rtol is not None and rcond is not None:
        raise OptionError("pinv: give rtol= or rcond= (NumPy's name for it), not both")
    tol = rtol if rtol is not None else rcond
    if tol is None:
        return default
    if isinstance(tol, (bool, np.bool_)):
        raise OptionTypeError(f"pinv: rtol {tol!r} is a bool; give a number or an array")
    if isinstance(tol, numbers.Real):
        if not 0 <= float(tol) < math.inf:
            raise OptionError(f"pinv: rtol must be finite and >= 0, got {tol!r}")
        return float(tol)
    t = lift(tol, "pinv")
    if t.dtype.kind not in "biuf":
        raise OptionTypeError(f"pinv: rtol must be real, got dtype {t.dtype}")
    try:
        np.broadcast_shapes(t.shape, batch)
    except ValueError:
        raise ShapeError(
            f"pinv: rtol of shape {fmt_shape(t.shape)} does not broadcast against the batch "
            f"axes {fmt_shape(batch)} of the operand"
        ) from None
    return T.expand_dims(Value(t), -1)


Op.define_all("pinv")


def _pinv_infer(inputs, attrs):
    y, a = inputs
    if y.ndim < 2 or y.shape[:-2] != a.shape[:-2] or y.shape[-2:] != a.shape[-2:][::-1]:
        raise ShapeError(
            f"pinv: operand 0 of shape {fmt_shape(y.shape)} is not the pseudo-inverse's shape "
            f"of operand 1, {fmt_shape(a.shape)}"
        )
    return y.shape, y.dtype


def _pinv_vjp(node, y, xs, g):
    # dL = Re tr(G^H dP) for the rule in the module docstring: nothing goes to the value's
    # own graph (the SVD's)
    p, a = y, xs[1]
    gh = mH(g)
    ph = mH(p)
    first = -(ph @ g) @ ph
    second = (gh - a @ (p @ gh)) @ (p @ ph)
    third = (ph @ p) @ (gh - (gh @ p) @ a)
    return (None, first + second + third)


def _pinv_jvp(node, y, xs, ts):
    p, a, da = y, xs[1], ts[1]
    if da is None:
        return None
    dah = mH(da)
    return -(p @ da) @ p + (p @ mH(p)) @ (dah - (dah @ a) @ p) + (dah - p @ (a @ dah)) @ (mH(p) @ p)


register_op(
    Op.PINV,
    OpKind.LINALG,
    _pinv_infer,
    lambda xs, at: xs[0].copy(),  # the value, computed by its operand's graph
    2,
    vjp=_pinv_vjp,
    jvp=_pinv_jvp,
    cost=lambda node: math.prod(node.shape),
    check_attrs=check_no_attrs,
)


def _inverted(s: Value, keep: Value) -> Value:
    """1 / s where ``keep``, 0 elsewhere, with finite derivatives at the cut ones."""
    return T.where(keep, 1.0 / T.where(keep, s, 1.0), 0.0)


@builder(public=False)
def pinv(a: Any, rtol: Any = None, *, hermitian: bool = False, rcond: Any = None) -> Node:
    """The Moore-Penrose pseudo-inverse of each matrix of ``a`` (..., M, N), (..., N, M), as
    the array API's ``linalg.pinv`` (and ``numpy.linalg.pinv``): singular values at or below
    ``rtol`` times the largest count as zero. ``rtol`` (a number, or an array broadcasting
    against the batch axes) defaults to max(M, N) * eps of the dtype; NumPy's ``rcond=`` is
    the same thing. ``hermitian=True`` uses eigh (reading the lower triangle)."""
    n = lift(a, "pinv")
    herm = bool_arg(hermitian, "pinv", "hermitian")
    if n.ndim < 2:
        raise ShapeError(
            f"pinv: operand 0 of shape {fmt_shape(n.shape)} has {n.ndim} axes; it must be a "
            "(stack of) matrices, with at least 2 axes"
        )
    if herm:
        check_square("pinv", n)
        w, v = T.eigh(n)
        rd = w.dtype
    else:
        u, s, vh = T.svd(n, False)
        rd = s.dtype
    default = max(n.shape[-2:]) * float(np.finfo(rd).eps)
    tol = _tolerance(rtol, rcond, n.shape[:-2], default)
    if herm:
        aw = T.abs(w)
        # (an empty matrix has no largest eigenvalue: its pseudo-inverse is empty)
        top = T.max(aw, -1, keepdims=True) if n.shape[-1] else 0.0
        keep = aw > tol * top
        value = (v * T.expand_dims(_inverted(w, keep), -2)) @ mH(v)
        k = n.shape[-1]
        lower = T.asarray(np.tril(np.ones((k, k), np.dtype(rd)), -1))
        read = _hermitian_part(Value(n), lower, T.asarray(np.eye(k, dtype=np.dtype(rd))))
    else:
        keep = s > tol * s[..., :1]  # s descending: its first is the largest
        value = (mH(vh) * T.expand_dims(_inverted(s, keep), -2)) @ mH(u)
        read = Value(n)
    # the value, with the Moore-Penrose derivative (the module docstring)
    return make_node(Op.PINV, (value.node, read.node))
