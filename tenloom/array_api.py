"""``tenloom.array_api``: the array API standard (2024.12) namespace of tenloom's Tensors.

``t.__array_namespace__()`` returns this module. Its functions take and return lazy Tensors
and are built on tenloom's public ops (tenloom/api.py, ``tl.linalg``): the elementwise
functions in tenloom/array_api_elementwise.py, the ``linalg`` extension in
tenloom/array_api_linalg.py; the ``fft`` extension is ``tl.fft`` itself (tenloom/fft.py).
Dtypes are NumPy's ``dtype`` objects (``Tensor.dtype`` is one), and type promotion is
NumPy's, which agrees with the standard wherever the standard defines it (Python scalars are
weak).

**Lazy.** Every function builds graph nodes and runs nothing, so it works inside traced
functions and is differentiable where the standard's function is. Several have no tenloom
builder and are composites whose cost grows as the square of one axis: ``sort``,
``argsort`` (a rank from pairwise comparisons), ``take`` and ``take_along_axis`` (a masked
sum over the indexed axis), ``searchsorted``, ``cumulative_sum`` and ``cumulative_prod`` (a
triangular mask).

**Shapes that depend on data** follow tenloom's one rule (tenloom/concrete.py,
docs/linalg.md): ``nonzero``, the ``unique_*`` functions and ``repeat`` with an array of
repeats evaluate their operand now, on concrete inputs, and fix the shape they read in the
graph built next (the values are constants of the graph: the index results have no
derivative anyway, ``unique_values`` and ``unique_*``'s values are not differentiated); in
a traced function they raise ``DataDependentShapeError``. ``__array_namespace_info__`` says
``"data-dependent shapes": False`` and ``"boolean indexing": False`` (``Tensor.__getitem__`` is
basic indexing).

**Truth values.** ``bool(t)`` raises ``ConcretizationError`` (the standard lets a lazy library
raise); ``int``, ``float``, ``complex`` and ``operator.index`` evaluate.

**Devices.** A Tensor is placed when it is evaluated (``evaluate(device=...)``); the namespace
knows one device, ``"cpu"`` (``t.device``; a tensor built from a CUDA DLPack array reports
``"cuda:N"``). ``device=`` accepts ``None`` and ``"cpu"``, anything else raises DeviceError.

Missing (docs/array_api.md lists the conformance suite's failures):
``__setitem__`` (Tensors are immutable), integer-array and boolean-mask indices in
``Tensor.__getitem__`` (``take``/``take_along_axis`` gather), and the special values of complex
composites with infinite or NaN parts (no op assembles a complex from its parts).
"""

from __future__ import annotations

import builtins
import math
from collections import namedtuple
from typing import Any

import numpy as np

from tenloom import api as tl
from tenloom import array_api_linalg as linalg
from tenloom import fft  # the fft extension: tl.fft itself (tenloom/fft.py)
from tenloom.array_api_elementwise import *  # noqa: F403 (the NAMES below)
from tenloom.array_api_elementwise import NAMES as _ELEMENTWISE
from tenloom.array_api_functions import *  # noqa: F403 (manipulation, statistics, ...)
from tenloom.array_api_functions import NAMES as _FUNCTIONS
from tenloom.array_api_linalg import matmul, matrix_transpose, tensordot, vecdot
from tenloom.graph.errors import (
    DeviceError,
    DTypeError,
    OptionError,
    OptionTypeError,
)
from tenloom.interop import from_dlpack as _from_dlpack
from tenloom.tensor import Tensor

__array_api_version__ = "2024.12"

# ---- dtypes and constants ---------------------------------------------------------------------
bool = np.dtype("bool")  # noqa: A001
int8, int16, int32, int64 = (np.dtype(f"int{b}") for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (np.dtype(f"uint{b}") for b in (8, 16, 32, 64))
float32, float64 = np.dtype("float32"), np.dtype("float64")
complex64, complex128 = np.dtype("complex64"), np.dtype("complex128")
_DTYPES = (bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64)
_DTYPES += (float32, float64, complex64, complex128)
_KIND_DTYPES = {
    "bool": (bool,),
    "signed integer": (int8, int16, int32, int64),
    "unsigned integer": (uint8, uint16, uint32, uint64),
    "real floating": (float32, float64),
    "complex floating": (complex64, complex128),
}
_KIND_DTYPES["integral"] = _KIND_DTYPES["signed integer"] + _KIND_DTYPES["unsigned integer"]
_KIND_DTYPES["numeric"] = (
    _KIND_DTYPES["integral"] + _KIND_DTYPES["real floating"] + _KIND_DTYPES["complex floating"]
)

e, pi, inf, nan, newaxis = math.e, math.pi, math.inf, math.nan, None

CPU = "cpu"


def _check_device(device: Any, op: str) -> None:
    if device is None or device == CPU:
        return
    if getattr(device, "kind", None) == "cpu":  # tl.devices()[0]
        return
    raise DeviceError(f"{op}: device {device!r}; the array API namespace places arrays on 'cpu'")


def _t(x: Any) -> Tensor:
    return x if isinstance(x, Tensor) else tl.asarray(x)


def _dtype(dtype: Any, op: str) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in _DTYPES:
        raise DTypeError(f"{op}: dtype {dt} is not one of the array API's dtypes")
    return dt


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(int(a) % ndim if ndim else int(a) for a in axes)


# ---- data type functions ----------------------------------------------------------------------
def astype(x: Any, dtype: Any, /, *, copy: builtins.bool = True, device: Any = None) -> Tensor:
    _check_device(device, "astype")
    x, dt = _t(x), _dtype(dtype, "astype")
    if x.dtype.kind == "c" and dt.kind != "c":
        raise DTypeError(f"astype: casting complex {x.dtype} to {dt} drops the imaginary part")
    return x if dt == x.dtype and not copy else tl.astype(x, dt)


def _as_dtype(x: Any) -> np.dtype:
    return x.dtype if isinstance(x, Tensor) else np.dtype(x)


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    """The dtype the ops promote to: NumPy's rule, which is the standard's wherever the standard
    defines one (Python scalars are weak)."""
    if not arrays_and_dtypes:
        raise OptionError("result_type: at least one array or dtype is needed")
    scalars = (builtins.bool, int, float, complex)
    strong = [_as_dtype(a) for a in arrays_and_dtypes if not isinstance(a, scalars)]
    if not strong:
        raise OptionTypeError("result_type: at least one array or dtype is needed besides scalars")
    return np.result_type(*strong, *(a for a in arrays_and_dtypes if isinstance(a, scalars)))


def can_cast(from_: Any, to: Any, /) -> builtins.bool:
    """Whether ``astype`` from ``from_`` to ``to`` keeps every value (NumPy's "safe" casting:
    bool to any, integers to wider integers and floats, floats to wider floats and complex)."""
    return builtins.bool(np.can_cast(_as_dtype(from_), np.dtype(to), "safe"))


finfo_object = namedtuple("finfo_object", ["bits", "eps", "max", "min", "smallest_normal", "dtype"])
iinfo_object = namedtuple("iinfo_object", ["bits", "max", "min", "dtype"])


def finfo(type: Any, /) -> finfo_object:  # noqa: A002
    f = np.finfo(_as_dtype(type))
    return finfo_object(
        f.bits, float(f.eps), float(f.max), float(f.min), float(f.smallest_normal), f.dtype
    )


def iinfo(type: Any, /) -> iinfo_object:  # noqa: A002
    i = np.iinfo(_as_dtype(type))
    return iinfo_object(i.bits, int(i.max), int(i.min), i.dtype)


def isdtype(dtype: Any, kind: Any) -> builtins.bool:
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KIND_DTYPES:
            raise OptionError(f"isdtype: unknown kind {kind!r}; one of {sorted(_KIND_DTYPES)}")
        return np.dtype(dtype) in _KIND_DTYPES[kind]
    return np.dtype(dtype) == np.dtype(kind)


# ---- inspection -------------------------------------------------------------------------------
class _Info:
    """What ``__array_namespace_info__()`` returns."""

    __module__ = __name__

    def capabilities(self) -> dict[str, Any]:
        return {"boolean indexing": False, "data-dependent shapes": False, "max dimensions": 64}

    def default_device(self) -> str:
        return CPU

    def devices(self) -> list[str]:
        return [CPU]

    def default_dtypes(self, *, device: Any = None) -> dict[str, np.dtype]:
        _check_device(device, "default_dtypes")
        return {
            "real floating": float64,
            "complex floating": complex128,
            "integral": int64,
            "indexing": int64,
        }

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, np.dtype]:
        _check_device(device, "dtypes")
        return {d.name: d for d in _DTYPES if kind is None or isdtype(d, kind)}


def __array_namespace_info__() -> _Info:
    return _Info()


# ---- creation ---------------------------------------------------------------------------------
def asarray(
    obj: Any, /, *, dtype: Any = None, device: Any = None, copy: builtins.bool | None = None
) -> Tensor:
    """A Tensor of ``obj`` (a Tensor, a NumPy array or buffer, nested sequences, a scalar).
    ``copy=False`` needs no copy: a Tensor of another dtype, or a Python sequence, raises."""
    _check_device(device, "asarray")
    dt = None if dtype is None else _dtype(dtype, "asarray")
    if isinstance(obj, Tensor):
        if dt is None or dt == obj.dtype:
            return obj  # Tensors are immutable: a copy and the original are the same
        if copy is False:
            raise ValueError(f"asarray: copy=False but casting {obj.dtype} to {dt} copies")
        return tl.astype(obj, dt)
    if isinstance(obj, (list, tuple)) and _holds_tensor(obj):
        out = tl.stack([asarray(o) for o in obj])
        return out if dt is None else tl.astype(out, dt)
    if copy is False and not isinstance(obj, np.ndarray) and not hasattr(obj, "__array__"):
        raise ValueError(f"asarray: copy=False but a {type(obj).__name__} must be copied")
    if dt is None and isinstance(obj, builtins.bool):
        dt = bool
    arr = np.array(obj, dtype=dt, copy=copy is not False)
    if copy is False and dt is not None and arr.dtype != dt:
        raise ValueError(f"asarray: copy=False but casting to {dt} copies")
    return tl.asarray(arr)


def _holds_tensor(obj: Any) -> builtins.bool:
    return builtins.any(
        isinstance(o, Tensor) or isinstance(o, (list, tuple)) and _holds_tensor(o) for o in obj
    )


def _shape(shape: Any) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None) -> Tensor:
    _check_device(device, "arange")
    dt = None if dtype is None else _dtype(dtype, "arange")
    if stop is None:
        start, stop = 0, start
    return tl.asarray(np.arange(start, stop, step, dtype=dt))


def zeros(shape, *, dtype=None, device=None) -> Tensor:
    _check_device(device, "zeros")
    return tl.zeros(_shape(shape), float64 if dtype is None else _dtype(dtype, "zeros"))


def ones(shape, *, dtype=None, device=None) -> Tensor:
    _check_device(device, "ones")
    return tl.ones(_shape(shape), float64 if dtype is None else _dtype(dtype, "ones"))


empty = zeros


def full(shape, fill_value, *, dtype=None, device=None) -> Tensor:
    _check_device(device, "full")
    if dtype is None:
        v = fill_value
        dtype = (
            bool
            if isinstance(v, builtins.bool)
            else int64
            if isinstance(v, int)
            else float64
            if isinstance(v, float)
            else complex128
            if isinstance(v, complex)
            else np.asarray(v).dtype
        )
    return tl.full(_shape(shape), fill_value, _dtype(dtype, "full"))


def _like(x: Any, dtype: Any, device: Any, op: str) -> tuple[tuple[int, ...], np.dtype]:
    _check_device(device, op)
    x = _t(x)
    return x.shape, x.dtype if dtype is None else _dtype(dtype, op)


def zeros_like(x, /, *, dtype=None, device=None) -> Tensor:
    return tl.zeros(*_like(x, dtype, device, "zeros_like"))


def ones_like(x, /, *, dtype=None, device=None) -> Tensor:
    return tl.ones(*_like(x, dtype, device, "ones_like"))


empty_like = zeros_like


def full_like(x, /, fill_value, *, dtype=None, device=None) -> Tensor:
    shape, dt = _like(x, dtype, device, "full_like")
    return tl.full(shape, fill_value, dt)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None) -> Tensor:
    _check_device(device, "eye")
    return tl.eye(n_rows, n_cols, k, float64 if dtype is None else _dtype(dtype, "eye"))


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True) -> Tensor:
    _check_device(device, "linspace")
    if dtype is None:
        complex_ = isinstance(start, complex) or isinstance(stop, complex)
        dtype = complex128 if complex_ else float64
    return tl.asarray(
        np.linspace(start, stop, num, endpoint=endpoint, dtype=_dtype(dtype, "linspace"))
    )


def from_dlpack(x, /, *, device=None, copy=None) -> Tensor:
    return _from_dlpack(x, device=device, copy=copy)


def meshgrid(*arrays, indexing: str = "xy") -> list[Tensor]:
    if indexing not in ("xy", "ij"):
        raise OptionError(f"meshgrid: indexing={indexing!r}; 'xy' or 'ij'")
    arrays = [_t(a) for a in arrays]
    shape = [a.shape[0] for a in arrays]
    if indexing == "xy" and len(arrays) > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        ax = i
        if indexing == "xy" and len(arrays) > 1 and i < 2:
            ax = 1 - i
        view = [1] * len(arrays)
        view[ax] = a.shape[0]
        out.append(tl.broadcast_to(tl.reshape(a, tuple(view)), tuple(shape)))
    return out


def _tri_mask(x: Tensor, k: int, lower: builtins.bool) -> Tensor:
    n, m = x.shape[-2:]
    return tl.asarray(
        np.tri(n, m, k, dtype=np.bool_) if lower else ~np.tri(n, m, k - 1, dtype=np.bool_)
    )


def tril(x, /, *, k: int = 0) -> Tensor:
    x = _t(x)
    return tl.where(_tri_mask(x, k, True), x, tl.zeros((), x.dtype))


def triu(x, /, *, k: int = 0) -> Tensor:
    x = _t(x)
    return tl.where(_tri_mask(x, k, False), x, tl.zeros((), x.dtype))


__all__ = [
    "__array_api_version__", "__array_namespace_info__", "bool", "int8", "int16", "int32",
    "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "complex64",
    "complex128", "e", "pi", "inf", "nan", "newaxis", "astype", "can_cast", "finfo", "iinfo",
    "isdtype", "result_type", "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack",
    "full", "full_like", "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros",
    "zeros_like", "linalg", "fft", "matmul", "matrix_transpose", "tensordot", "vecdot",
    *_ELEMENTWISE, *_FUNCTIONS,
]  # fmt: skip
