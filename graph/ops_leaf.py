"""Leaf ops: constants, placeholders and lazy creation (full, eye)."""

from __future__ import annotations

import itertools

import numpy as np
from tenloom.graph.ops import Op, OpKind, register_op


def is_frozen(array) -> bool:
    """Whether nothing can change ``array``'s values any more: it and every array it is a view
    of are read-only, down to memory that is itself immutable (``bytes``) or owned by the
    array. A read-only view of a writeable array is not frozen: its base can still be written.

    What depends on a constant's values beyond one evaluation (folded reductions, device
    copies kept between runs) may only be derived from frozen arrays."""
    a = array
    while isinstance(a, np.ndarray):
        if a.flags.writeable:
            return False
        a = a.base
    return a is None or isinstance(a, bytes)


def frozen(array: np.ndarray) -> np.ndarray:
    """``array`` itself when frozen, else a read-only copy of it (what a compiled plan keeps)."""
    if is_frozen(array):
        return array
    out = np.array(array, copy=True)
    out.flags.writeable = False
    return out


class Constant:
    """Holds a constant array inside a node's attrs; compares and hashes by array identity.

    Like ``numpy.asarray`` the array is not copied. ``evaluate`` reads its values when it runs,
    so an expression built after an in-place change sees the new values; nothing derived from
    the values is kept between runs unless the array is frozen (:func:`is_frozen`).
    """

    __slots__ = ("value",)

    def __init__(self, value: np.ndarray):
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Constant) and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)

    def __repr__(self) -> str:
        return f"<array {self.value.dtype}{list(self.value.shape)}>"


_PLACEHOLDER_IDS = itertools.count()


def next_placeholder_id() -> int:
    return next(_PLACEHOLDER_IDS)


def scalar_attrs(value, dtype: np.dtype) -> tuple:
    """Attrs of FULL for a scalar: exact bits, so 0.0 and -0.0 (or 1 and True) stay distinct."""
    return (np.asarray(value, dtype=dtype).tobytes(),)


def full_value(attrs: tuple) -> np.generic:
    shape, dtype_str, raw = attrs
    return np.frombuffer(raw, dtype=np.dtype(dtype_str))[0]


# CONST: attrs = (Constant,)
register_op(
    Op.CONST,
    OpKind.LEAF,
    lambda inputs, attrs: (attrs[0].value.shape, attrs[0].value.dtype),
    lambda arrays, attrs: attrs[0].value,
    arity=0,
)

# PLACEHOLDER: attrs = (name, uid, shape, dtype_str); bound at evaluate time through feed=
register_op(
    Op.PLACEHOLDER,
    OpKind.LEAF,
    lambda inputs, attrs: (attrs[2], np.dtype(attrs[3])),
    lambda arrays, attrs: (_ for _ in ()).throw(
        RuntimeError(f"placeholder {attrs[0]!r} is not bound")
    ),
    arity=0,
)

# FULL: attrs = (shape, dtype_str, raw value bytes)
register_op(
    Op.FULL,
    OpKind.LEAF,
    lambda inputs, attrs: (attrs[0], np.dtype(attrs[1])),
    lambda arrays, attrs: np.full(attrs[0], full_value(attrs), dtype=np.dtype(attrs[1])),
    arity=0,
)

# EYE: attrs = (n, m, k, dtype_str)
register_op(
    Op.EYE,
    OpKind.LEAF,
    lambda inputs, attrs: ((attrs[0], attrs[1]), np.dtype(attrs[3])),
    lambda arrays, attrs: np.eye(attrs[0], attrs[1], attrs[2], dtype=np.dtype(attrs[3])),
    arity=0,
)
