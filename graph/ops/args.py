"""Checking and normalizing the arguments builders take (ints, flags, axes, shapes): each bad
value raises a typed error naming the op, the argument and the operand's shape."""

from __future__ import annotations

import builtins
import operator
from typing import Any

import numpy as np
from tenloom.graph.errors import OptionTypeError, ShapeError, fmt_shape
from tenloom.graph.node import Node


def int_arg(value: Any, op: str, what: str) -> int:
    """An int argument (an axis, a dimension, an offset) as an int. A bool or anything that is
    not an integer raises OptionTypeError naming it, where NumPy raises TypeError."""
    if isinstance(value, (bool, np.bool_)):
        raise OptionTypeError(f"{op}: {what} {value!r} is a bool; give an int")
    try:
        return operator.index(value)
    except TypeError:
        raise OptionTypeError(f"{op}: {what} {value!r} is not an int") from None


def _axis_items(axis: Any) -> tuple:
    """``axis`` (an int or a sequence of ints) as a tuple of its items, to check one by one."""
    if isinstance(axis, (tuple, list, range)) or (isinstance(axis, np.ndarray) and axis.ndim):
        return tuple(axis)
    return (axis,)


def bool_arg(value: Any, op: str, what: str) -> bool:
    """A flag such as ``keepdims``: True, False (or 0 and 1), else OptionTypeError."""
    if isinstance(value, (bool, np.bool_)) or (
        isinstance(value, (int, np.integer)) and value in (0, 1)
    ):
        return bool(value)
    raise OptionTypeError(f"{op}: {what}={value!r} is not valid; give True or False")


def normalize_axes(axis: Any, ndim: int, op: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Sorted non-negative axes; ShapeError names the bad axis and the shape, OptionTypeError
    an axis that is not an int (a float, a bool: NumPy's TypeError)."""
    if axis is None:
        return tuple(range(ndim))
    out = []
    for a in _axis_items(axis):
        a = int_arg(a, op, "axis")
        if not -ndim <= a < ndim:
            raise ShapeError(
                f"{op}: axis {a} is out of bounds for operand 0 of shape {fmt_shape(shape)} "
                f"({ndim} axes)"
            )
        a %= ndim
        if a in out:
            raise ShapeError(f"{op}: axis {a} repeated in {axis!r}")
        out.append(a)
    return tuple(sorted(out))


def _shape_arg(shape: Any, op: str) -> tuple[int, ...]:
    out = tuple(int_arg(s, op, "dimension") for s in _axis_items(shape))
    if any(s < 0 for s in out):
        raise ShapeError(f"{op}: negative dimension in shape {fmt_shape(out)}")
    return out


def _check_2d(n: Node, op: str):
    if n.ndim < 2:
        raise ShapeError(f"{op}: operand 0 of shape {fmt_shape(n.shape)} needs at least 2 axes")


def _axis_pair(n: Node, axis1: int, axis2: int, op: str) -> tuple[int, int]:
    _check_2d(n, op)
    a1, a2 = (normalize_axes(a, n.ndim, op, n.shape)[0] for a in (axis1, axis2))
    if a1 == a2:
        raise ShapeError(f"{op}: axis1 and axis2 are the same axis ({a1})")
    return a1, a2


def _offset(value: Any, n: Node, a1: int, a2: int, op: str) -> int:
    """A diagonal's offset; one past either axis gives the same empty diagonal, so larger
    ones are clipped there (an offset beyond int64 then runs instead of overflowing later)."""
    k = int_arg(value, op, "offset")
    bound = builtins.max(n.shape[a1], n.shape[a2])
    return builtins.max(-bound, builtins.min(bound, k))
