"""Leaf ops: constants, placeholders and lazy creation (full, eye).

Leaves have no inputs, hence no differentiation rules, and cost nothing to compute (``full``
and ``eye`` are allocated when they run).
"""

from __future__ import annotations

import os
import secrets
import threading
from typing import NamedTuple

import numpy as np
from tenloom.graph.ops.checks import BadFormat, check_arity, check_dtype, check_int, check_shape
from tenloom.graph.ops.registry import Op, OpKind, register_op


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

    __slots__ = ("value", "layout")

    def __init__(self, value: np.ndarray):
        self.value = value
        # what the node's shape and dtype were inferred from: an array whose ``shape`` or
        # ``dtype`` attribute was set in place since is another constant (a new node), not the
        # node made before with the old shape and dtype
        self.layout = (value.shape, value.dtype)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Constant)
            and other.value is self.value
            and other.layout == self.layout
        )

    def __hash__(self) -> int:
        return id(self.value)

    def __repr__(self) -> str:
        return f"<array {self.value.dtype}{list(self.value.shape)}>"


# Placeholder uids: a random 64-bit session number of this process in the high bits and a
# counter in the low ``_COUNTER_BITS``. A uid is never issued twice, and a placeholder made by
# another process (read from its file by tl.load) cannot carry a uid issued here, so load can
# tell the placeholders this process made from foreign ones (runtime/serialize.py gives foreign
# ones new uids). A forked child draws a new session whose counter goes on from its parent's
# (default names stay distinct), keeping what the parent had issued before the fork.
_COUNTER_BITS = 40
_ids_lock = threading.Lock()
_issued: dict[int, list[int]] = {}  # session -> [first, next) counter values issued here
_session = 0


def _new_session(start: int = 0) -> None:
    global _session
    while True:
        s = secrets.randbits(64)
        if s and s not in _issued:
            break
    _issued[s] = [start, start]
    _session = s


def _after_fork_in_child() -> None:
    global _ids_lock
    _ids_lock = threading.Lock()
    _new_session(_issued[_session][1])


_new_session()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def next_placeholder_id() -> int:
    """A placeholder uid never issued before, in this process or any other."""
    with _ids_lock:
        span = _issued[_session]
        if span[1] >> _COUNTER_BITS:
            _new_session()
            span = _issued[_session]
        k = span[1]
        span[1] = k + 1
        return (_session << _COUNTER_BITS) | k


def placeholder_number(uid: int) -> int:
    """The counter part of a uid (0, 1, ... in the order placeholders are made): default names
    and anything that must not vary between runs use it, not the random session part."""
    return uid & ((1 << _COUNTER_BITS) - 1)


def issued_here(uid: int) -> bool:
    """Whether this process (or, before a fork, its parent) issued ``uid``."""
    if type(uid) is not int or uid < 0:
        return False
    span = _issued.get(uid >> _COUNTER_BITS)
    return span is not None and span[0] <= placeholder_number(uid) < span[1]


def scalar_attrs(value, dtype: np.dtype) -> tuple:
    """Attrs of FULL for a scalar: exact bits, so 0.0 and -0.0 (or 1 and True) stay distinct."""
    return (np.asarray(value, dtype=dtype).tobytes(),)


class ConstAttrs(NamedTuple):
    constant: Constant  # the array, compared by identity


class PlaceholderAttrs(NamedTuple):
    """A placeholder, bound at evaluate time through ``feed=``."""

    name: str
    uid: int  # next_placeholder_id()
    shape: tuple[int, ...]
    dtype: str  # dtype.str


class FullAttrs(NamedTuple):
    shape: tuple[int, ...]
    dtype: str  # dtype.str
    raw: bytes  # the fill value's bytes in that dtype: 0.0 and -0.0 (or 1 and True) differ


class EyeAttrs(NamedTuple):
    n: int
    m: int
    k: int  # the diagonal's offset
    dtype: str  # dtype.str


def full_value(attrs: tuple) -> np.generic:
    """The fill value of FULL attrs (a FullAttrs or a plain tuple)."""
    shape, dtype_str, raw = attrs
    return np.frombuffer(raw, dtype=np.dtype(dtype_str))[0]


def _no_cost(node) -> int:
    return 0


def _placeholder_ref(arrays, attrs: PlaceholderAttrs):
    raise RuntimeError(f"placeholder {attrs.name!r} is not bound")


def _check_placeholder(ins, at, op):
    at = check_arity(at, PlaceholderAttrs, op)
    if type(at.name) is not str:
        raise BadFormat("placeholder name must be a string")
    if check_int(at.uid, "placeholder uid") < 0:
        raise BadFormat("placeholder uid must be non-negative")
    check_shape(at.shape, "placeholder shape")
    check_dtype(at.dtype)


def _check_full(ins, at, op):
    at = check_arity(at, FullAttrs, op)
    check_shape(at.shape, "full shape")
    dt = check_dtype(at.dtype)
    if type(at.raw) is not bytes or len(at.raw) != dt.itemsize:
        raise BadFormat(f"full value must be {dt.itemsize} bytes of {dt}")


def _check_eye(ins, at, op):
    at = check_arity(at, EyeAttrs, op)
    for v, name in zip(at[:3], ("n", "m", "k")):
        check_int(v, f"eye {name}")
    check_dtype(at.dtype)


def _const_text(at: ConstAttrs) -> str:
    v = at.constant.value
    return f"[{v.item()!r}]" if v.size == 1 and v.ndim == 0 else ""


# CONST: its array is read from the file's .npz by the loader, which checks it
register_op(
    Op.CONST,
    OpKind.LEAF,
    lambda inputs, attrs: (attrs.constant.value.shape, attrs.constant.value.dtype),
    lambda arrays, attrs: attrs.constant.value,
    arity=0,
    attrs=ConstAttrs,
    cost=_no_cost,
    fmt=_const_text,
)
register_op(
    Op.PLACEHOLDER,
    OpKind.LEAF,
    lambda inputs, attrs: (attrs.shape, np.dtype(attrs.dtype)),
    _placeholder_ref,
    arity=0,
    attrs=PlaceholderAttrs,
    cost=_no_cost,
    check_attrs=_check_placeholder,
    fmt=lambda at: f"[{at.name!r}]",
)
register_op(
    Op.FULL,
    OpKind.LEAF,
    lambda inputs, attrs: (attrs.shape, np.dtype(attrs.dtype)),
    lambda arrays, attrs: np.full(attrs.shape, full_value(attrs), dtype=np.dtype(attrs.dtype)),
    arity=0,
    attrs=FullAttrs,
    cost=_no_cost,
    check_attrs=_check_full,
    fmt=lambda at: f"[{full_value(at).item()!r}]",
)
register_op(
    Op.EYE,
    OpKind.LEAF,
    lambda inputs, attrs: ((attrs.n, attrs.m), np.dtype(attrs.dtype)),
    lambda arrays, attrs: np.eye(attrs.n, attrs.m, attrs.k, dtype=np.dtype(attrs.dtype)),
    arity=0,
    attrs=EyeAttrs,
    cost=_no_cost,
    check_attrs=_check_eye,
    fmt=lambda at: f"[k={at.k}]" if at.k else "",
)
