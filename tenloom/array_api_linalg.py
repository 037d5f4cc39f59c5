"""``tenloom.array_api.linalg``: the array API standard's linear algebra extension (2024.12)
on ``tl.linalg``, with the standard's signatures and named-tuple results.

Lazy and differentiable as ``tl.linalg`` is. ``matrix_rank`` counts singular values above a
tolerance (an integer result, no data-dependent shape); ``cross`` is built from index
slices. Results of several arrays are the standard's named tuples (``SVDResult``,
``EighResult``, ``QRResult``, ``SlogdetResult``).
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np

from tenloom import api as tl
from tenloom import linalg as _la
from tenloom.graph.errors import DTypeError, OptionError, ShapeError, fmt_shape
from tenloom.tensor import Tensor

EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = namedtuple("QRResult", ["Q", "R"])
SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])

det = _la.det
eigvalsh = _la.eigvalsh
inv = _la.inv
matrix_power = _la.matrix_power
solve = _la.solve
svdvals = _la.svdvals


def _t(x: Any) -> Tensor:
    return x if isinstance(x, Tensor) else tl.asarray(x)


def matrix_transpose(x: Any) -> Tensor:
    x = _t(x)
    if x.ndim < 2:
        raise ShapeError(
            f"matrix_transpose: the operand of shape {fmt_shape(x.shape)} has < 2 axes"
        )
    return tl.moveaxis(x, -1, -2)


def cholesky(x: Any, /, *, upper: bool = False) -> Tensor:
    lo = _la.cholesky(x)
    return tl.conj(matrix_transpose(lo)) if upper else lo


def eigh(x: Any, /) -> EighResult:
    return EighResult(*_la.eigh(x))


def qr(x: Any, /, *, mode: str = "reduced") -> QRResult:
    if mode not in ("reduced", "complete"):
        raise OptionError(f"qr: mode={mode!r}; the array API has 'reduced' and 'complete'")
    return QRResult(*_la.qr(x, mode=mode))


def slogdet(x: Any, /) -> SlogdetResult:
    return SlogdetResult(*_la.slogdet(x))


def svd(x: Any, /, *, full_matrices: bool = True) -> SVDResult:
    return SVDResult(*_la.svd(x, full_matrices=full_matrices))


def pinv(x: Any, /, *, rtol: Any = None) -> Tensor:
    return _la.pinv(x, rtol=rtol)


def trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Tensor:
    x = _t(x)
    out = _la.trace(x, offset=offset)
    if dtype is not None:
        return tl.astype(out, dtype)
    if x.dtype.kind in "iu" and x.dtype.itemsize < 8:  # the default integer, as sum
        return tl.astype(out, np.int64 if x.dtype.kind == "i" else np.uint64)
    return out


def diagonal(x: Any, /, *, offset: int = 0) -> Tensor:
    return tl.diagonal(_t(x), offset, -2, -1)


def matmul(a: Any, b: Any, /) -> Tensor:
    return tl.matmul(a, b)


def outer(a: Any, b: Any, /) -> Tensor:
    a, b = _t(a), _t(b)
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(
            f"outer: operands of shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)}; both "
            "must be 1-d"
        )
    return tl.outer(a, b)


def tensordot(a: Any, b: Any, /, *, axes: Any = 2) -> Tensor:
    return tl.tensordot(a, b, axes)


def vecdot(a: Any, b: Any, /, *, axis: int = -1) -> Tensor:
    """``sum(conj(a) * b, axis)`` after broadcasting."""
    a, b = _t(a), _t(b)
    na = a.shape[axis] if a.ndim else None
    nb = b.shape[axis] if b.ndim else None
    if a.ndim == 0 or b.ndim == 0 or na != nb:
        raise ShapeError(
            f"vecdot: operands of shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)} differ "
            f"along axis {axis}"
        )
    out = tl.sum(tl.multiply(tl.conj(a), b), axis)
    dt = np.result_type(a.dtype, b.dtype)  # the operands' dtype (sum widens small integers)
    return out if out.dtype == dt else tl.astype(out, dt)


def vector_norm(x: Any, /, *, axis: Any = None, keepdims: bool = False, ord: Any = 2) -> Tensor:
    return _la.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord)


def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Tensor:
    return _la.matrix_norm(x, keepdims=keepdims, ord=ord)


def matrix_rank(x: Any, /, *, rtol: Any = None) -> Tensor:
    """The number of singular values above ``rtol * largest`` (``rtol`` default
    ``max(M, N) * eps``), an int64 Tensor per matrix."""
    x = _t(x)
    if x.ndim < 2:
        raise ShapeError(f"matrix_rank: the operand of shape {fmt_shape(x.shape)} has < 2 axes")
    s = _la.svdvals(x)
    if rtol is None:
        rtol = max(x.shape[-2:]) * np.finfo(s.dtype).eps
    smax = tl.max(s, -1, keepdims=True) if s.shape[-1] else tl.zeros(s.shape[:-1] + (1,), s.dtype)
    tol = tl.multiply(smax, tl.expand_dims(_t(rtol), -1) if isinstance(rtol, Tensor) else rtol)
    return tl.sum(tl.astype(tl.greater(s, tol), np.int64), -1)


def cross(a: Any, b: Any, /, *, axis: int = -1) -> Tensor:
    """The cross product of 3-vectors along ``axis`` (broadcast over the others)."""
    a, b = _t(a), _t(b)
    if a.ndim == 0 or b.ndim == 0 or a.shape[axis] != 3 or b.shape[axis] != 3:
        raise ShapeError(
            f"cross: operands of shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)} need 3 "
            f"elements along axis {axis}"
        )
    if a.dtype.kind == "b" or b.dtype.kind == "b":
        raise DTypeError("cross: boolean operands have no cross product")
    a, b = tl.moveaxis(a, axis, -1), tl.moveaxis(b, axis, -1)
    c = [a[..., i] for i in range(3)]
    d = [b[..., i] for i in range(3)]
    out = tl.stack(
        [c[1] * d[2] - c[2] * d[1], c[2] * d[0] - c[0] * d[2], c[0] * d[1] - c[1] * d[0]], -1
    )
    return tl.moveaxis(out, -1, axis)


__all__ = [
    "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul", "matrix_norm",
    "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet", "solve",
    "svd", "svdvals", "tensordot", "trace", "vecdot", "vector_norm",
]  # fmt: skip
