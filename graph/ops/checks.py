"""Checks of attributes read from a file, the helpers of each op's ``check_attrs`` rule.

Each op's shape/dtype rule checks shapes; its ``check_attrs`` checks what the rule takes on
trust: the Python types of attributes (an axis that is a float would pass ``0.0 == 0`` and fail
at run time), the normal forms the front end produces (non-negative sorted axes, canonical
slices, consistent GEMM groups) and, for FUSED nodes, whose rule trusts its attrs entirely, the
whole program. A failure raises :class:`BadFormat`, which the loader (runtime/serialize.py)
turns into a GraphFormatError naming the file and the node.
"""

from __future__ import annotations

import reprlib
from typing import Any

import numpy as np
from tenloom.graph.dtypes import SUPPORTED

MAX_ELEMENTS = 2**48  # per array
MAX_NDIM = 64

# dtypes of nodes and arrays: tenloom's own
NODE_DTYPES: dict[str, np.dtype] = {d.name: d for d in SUPPORTED}
DTYPE_STRS: dict[str, np.dtype] = {d.str: d for d in SUPPORTED}  # attrs hold dtype.str


class BadFormat(Exception):
    """A validation failure inside the loader; it becomes GraphFormatError naming the file and
    the node."""


_SHORT = reprlib.Repr()  # bounded work and memory for any value a file holds
_SHORT.maxlevel = 4
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 8
_SHORT.maxstring = _SHORT.maxlong = _SHORT.maxother = 60


def short(x: Any) -> str:
    """A repr of at most 60 characters, in time and memory bounded whatever ``x`` is."""
    r = _SHORT.repr(x)
    return r if len(r) <= 60 else r[:57] + "..."


def check_shape(x: Any, what: str = "shape") -> tuple[int, ...]:
    if type(x) not in (list, tuple) or len(x) > MAX_NDIM:
        raise BadFormat(f"{what} must be an array of at most {MAX_NDIM} ints, got {short(x)}")
    n = 1
    for d in x:
        if type(d) is not int or d < 0:
            raise BadFormat(f"{what} {short(x)} has a dimension that is not a non-negative int")
        n *= d
        if n > MAX_ELEMENTS:
            raise BadFormat(f"{what} {short(x)} has more than {MAX_ELEMENTS} elements")
    return tuple(x)


def check_ints(x: Any, what: str, lo: int | None = None, hi: int | None = None) -> tuple[int, ...]:
    if type(x) is not tuple or any(type(v) is not int for v in x):
        raise BadFormat(f"{what} must be a tuple of ints, got {short(x)}")
    if any((lo is not None and v < lo) or (hi is not None and v >= hi) for v in x):
        raise BadFormat(f"{what} {x} out of range [{lo}, {hi})")
    return x


def check_int(x: Any, what: str) -> int:
    if type(x) is not int:
        raise BadFormat(f"{what} must be an int, got {short(x)}")
    return x


def check_dtype(x: Any, what: str = "dtype") -> np.dtype:
    """The dtype an attrs' dtype string (``dtype.str``) names."""
    dt = DTYPE_STRS.get(x) if isinstance(x, str) else None
    if dt is None:
        raise BadFormat(f"{what} {short(x)} is not one of {', '.join(DTYPE_STRS)}")
    return dt


def check_arity(attrs: tuple, record: type | int, op: Any) -> tuple:
    """``attrs`` as the attrs record ``record`` (an int: the number of attributes, returned as
    they are), after checking their number."""
    n = record if type(record) is int else len(record._fields)
    if len(attrs) != n:
        raise BadFormat(f"{op.value} takes {n} attributes, got {len(attrs)}")
    return attrs if type(record) is int else record._make(attrs)


def check_no_attrs(ins, at: tuple, op: Any) -> None:
    """The check of an op that takes no attributes."""
    check_arity(at, 0, op)


def check_inferred(shape: Any, dtype: Any, what: str) -> None:
    """What an op's rule gave (on attrs from a file) is a shape and a supported dtype."""
    if type(shape) is not tuple or any(type(d) is not int or d < 0 for d in shape):
        raise BadFormat(
            f"{what}: the op's rule gives the shape {short(shape)}, not a tuple of ints"
        )
    if (
        not isinstance(dtype, np.dtype)
        or dtype.name not in NODE_DTYPES
        or dtype != NODE_DTYPES[dtype.name]
    ):
        raise BadFormat(f"{what}: the op's rule gives the unsupported dtype {dtype}")
