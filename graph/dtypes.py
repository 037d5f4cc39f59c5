"""The dtypes tenloom supports and NumPy-compatible promotion (NEP 50: Python scalars are weak).

Supported: bool, the signed and unsigned integers of 8 to 64 bits, float16/32/64 and
complex64/128, in native byte order (arrays and dtypes of the other byte order are taken as the
native dtype, value for value). Object, string, datetime, structured and long double arrays are
rejected with DTypeError naming the op and these dtypes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tenloom.graph.errors import DTypeError

SUPPORTED: tuple[np.dtype, ...] = tuple(
    np.dtype(n)
    for n in (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    )
)
_SUPPORTED_SET = frozenset(SUPPORTED)
_NORMALIZE_CACHE: dict[Any, np.dtype] = {}


def normalize_dtype(dtype: Any, op: str = "astype") -> np.dtype:
    """Turn a dtype-like into one of the supported ``numpy.dtype`` objects or raise DTypeError."""
    try:
        return _NORMALIZE_CACHE[dtype]
    except (KeyError, TypeError):
        pass
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise DTypeError(f"{op}: {dtype!r} is not a dtype") from e
    if not dt.isnative and dt.newbyteorder("=") in _SUPPORTED_SET:
        dt = dt.newbyteorder("=")  # a byte order is storage, not a type: the native dtype
    if dt not in _SUPPORTED_SET:
        names = ", ".join(d.name for d in SUPPORTED)
        raise DTypeError(f"{op}: dtype {dt} is not supported; supported dtypes are {names}")
    try:
        _NORMALIZE_CACHE[dtype] = dt
    except TypeError:
        pass
    return dt


def is_complex(dt: np.dtype) -> bool:
    return dt.kind == "c"


def is_float(dt: np.dtype) -> bool:
    return dt.kind == "f"


def is_inexact(dt: np.dtype) -> bool:
    return dt.kind in "fc"


def real_dtype(dt: np.dtype) -> np.dtype:
    """float32 for complex64, float64 for complex128, the dtype itself otherwise."""
    return np.empty(0, dt).real.dtype


def weak_scalar_dtype(value: complex | float | int | bool, other: np.dtype) -> np.dtype:
    """The dtype a Python scalar takes next to an array of dtype ``other`` (NEP 50)."""
    return np.result_type(other, value)
