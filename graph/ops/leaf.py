"""Leaf ops: constants, placeholders and lazy creation (full, eye).

Leaves have no inputs, hence no differentiation rules, and cost nothing to compute (``full``
and ``eye`` are allocated when they run).
"""

from __future__ import annotations

import itertools
import operator
import os
import secrets
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from tenloom.graph.dtypes import _SUPPORTED_SET, normalize_dtype
from tenloom.graph.errors import (
    DTypeError,
    ShapeError,
    fmt_shape,
)
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.args import _shape_arg
from tenloom.graph.ops.checks import BadFormat, check_arity, check_dtype, check_int, check_shape
from tenloom.graph.ops.registry import Op, OpKind, builder, register_op
from tenloom.graph.value import Value

# the ops of this family (Op.NEG, ...), defined before anything refers to them
Op.define_all("const placeholder full eye")


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
# The counter is an itertools.count: its next() is one C call, atomic under the GIL, so two
# threads never draw the same number and the IR needs no lock.
_counter = itertools.count()
_issued: dict[int, list] = {}  # session -> [first, end) counter values (end None: still issuing)
_session = 0


def _new_session(start: int = 0) -> None:
    """Draw a new session number and start counting its uids from ``start``."""
    global _session, _counter
    while True:
        s = secrets.randbits(64)
        if s and s not in _issued:
            break
    _issued[s] = [start, None]
    _session, _counter = s, itertools.count(start)


def _close_session(end: int) -> None:
    """The current session issued [first, end): nothing more of it after this."""
    _issued[_session][1] = end


def _after_fork_in_child() -> None:
    end = next(_counter)
    _close_session(end)
    _new_session(end)


_new_session()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def next_placeholder_id() -> int:
    """A placeholder uid never issued before, in this process or any other."""
    k = next(_counter)
    if k >> _COUNTER_BITS:  # 2**40 placeholders: go on in a new session
        _close_session(1 << _COUNTER_BITS)
        _new_session()
        return next_placeholder_id()
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
    if span is None:
        return False
    # a closed session issued [first, end); the current one [first, the counter's next value)
    end = span[1] if span[1] is not None else _peek()
    return span[0] <= placeholder_number(uid) < end


def _peek() -> int:
    """The counter's next value, without drawing it. itertools.count has no accessor for it,
    but its repr is ``count(n)`` (a number drawn meanwhile by another thread is below n)."""
    return int(repr(_counter)[len("count(") : -1])


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


# ---- builders: values and scalars as leaf nodes (lifting), and the leaf ops' builders ----


_SCALARS = (bool, int, float, complex)


def _const_node(x: Any, what: str = "asarray") -> Node:
    arr = np.asarray(x)
    if arr.dtype not in _SUPPORTED_SET:
        native = arr.dtype.newbyteorder("=")
        if not arr.dtype.isnative and native in _SUPPORTED_SET:
            # a non-native byte order (big-endian) is converted, value for value; this one
            # case copies, so later in-place changes of ``x`` are not seen
            arr = arr.astype(native)
        else:
            normalize_dtype(arr.dtype, what)
    return make_node(Op.CONST, (), (Constant(arr),))


def full_node(shape: tuple[int, ...], value: Any, dtype: np.dtype, op: str = "full") -> Node:
    try:
        raw = np.asarray(value, dtype=dtype).tobytes()
    except (OverflowError, ValueError, TypeError) as e:
        raise DTypeError(f"{op}: value {value!r} does not fit dtype {dtype} ({e})") from None
    return make_node(Op.FULL, (), (shape, dtype.str, raw))


def lift(x: Any, what: str = "operand") -> Node:
    """A node for ``x``: Nodes and Values pass through, arrays and scalars become constants."""
    if type(x) is Node:
        return x
    if isinstance(x, Value):
        return x.node
    if isinstance(x, _SCALARS):
        return full_node((), x, np.asarray(x).dtype)
    if isinstance(x, (np.ndarray, np.generic, list, tuple)):
        return _const_node(x, what)
    raise DTypeError(f"{what}: cannot use an object of type {type(x).__name__} as a tensor")


_FLOAT64 = np.dtype(np.float64)


# (dtype of the other operand, type of the Python scalar) -> the scalar's weak dtype
_WEAK_DTYPES: dict[tuple, np.dtype] = {}


# exact scalar key -> its 0-d FULL node; scalars recur constantly (x * 0.5 in a loop), and
# building the node once keeps tracing cheap. Bounded: cleared when it grows past 4096.
_SCALAR_NODES: dict[tuple, Node] = {}


def _scalar_key(x: Any, dt: np.dtype) -> tuple:
    t = type(x)
    # exact bits: 0.0 and -0.0 differ, nan matches nan; NumPy's float64 and complex128 are
    # subclasses of float and complex (keyed by value, np.float64(-0.0) found 0.0's node)
    if isinstance(x, float):
        return (dt, t, float(x).hex())
    if isinstance(x, complex):
        return (dt, t, x.real.hex(), x.imag.hex())
    return (dt, t, x)


def scalar_node(x: Any, other_dtype: np.dtype, op: Any) -> Node:
    """A 0-d leaf for Python scalar ``x`` next to an operand of ``other_dtype`` (NEP 50: weak)."""
    wk = (other_dtype, type(x))
    dt = _WEAK_DTYPES.get(wk)
    if (op is Op.DIV or op == "div") and other_dtype.kind in "biu" and type(x) in (int, bool):
        # true division of integers runs NumPy's float64 loop, and the scalar is converted to
        # that: uint16_array / 2**40 is fine, though 2**40 does not fit uint16
        dt = _FLOAT64
    elif dt is None:
        dt = np.result_type(other_dtype, x)
        if dt not in _SUPPORTED_SET:
            dt = np.asarray(x).dtype
        _WEAK_DTYPES[wk] = dt
    key = _scalar_key(x, dt)
    node = _SCALAR_NODES.get(key)
    if node is None:
        node = full_node((), x, dt, getattr(op, "value", op))
        if len(_SCALAR_NODES) > 4096:
            _SCALAR_NODES.clear()
        _SCALAR_NODES[key] = node
    return node


def lift_with(x: Any, other: Node, op: str) -> Node:
    """Lift ``x`` next to ``other``: a Python scalar takes a weak dtype (NEP 50)."""
    if type(x) is Node:
        return x
    if isinstance(x, Value):
        return x.node
    if isinstance(x, _SCALARS):
        return scalar_node(x, other.dtype, op)
    return lift(x, op)


def _lift_pair(a: Any, b: Any, op: str) -> tuple[Node, Node]:
    a_scalar, b_scalar = isinstance(a, _SCALARS), isinstance(b, _SCALARS)
    if a_scalar and not b_scalar:
        bn = lift(b, op)
        return lift_with(a, bn, op), bn
    if b_scalar and not a_scalar:
        an = lift(a, op)
        return an, lift_with(b, an, op)
    return lift(a, op), lift(b, op)


@builder
def asarray(x: Any, dtype: Any = None) -> Node:
    """A lazy constant wrapping ``x`` (no copy, as ``numpy.asarray``)."""
    if isinstance(x, (Node, Value)):
        if dtype is None:
            return lift(x)
        from tenloom.graph.ops.elementwise import astype  # a later family

        return astype(x, dtype)
    if dtype is not None:
        x = np.asarray(x, dtype=normalize_dtype(dtype, "asarray"))
    return _const_node(x, "asarray")


@builder
def placeholder(shape: Sequence[int], dtype: Any = "float64", name: str | None = None) -> Node:
    """A symbolic input, bound at evaluation with ``feed={placeholder: array}``."""
    shape = _shape_arg(shape, "placeholder")
    dt = normalize_dtype(dtype, "placeholder")
    uid = next_placeholder_id()
    if name is None:
        name = f"input{placeholder_number(uid)}"
    return make_node(Op.PLACEHOLDER, (), (str(name), uid, shape, dt.str))


@builder
def full(shape: Any, fill_value: Any, dtype: Any = None) -> Node:
    shape = _shape_arg(shape, "full")
    dt = np.asarray(fill_value).dtype if dtype is None else np.dtype(dtype)
    dt = normalize_dtype(dt, "full")
    return full_node(shape, fill_value, dt)


@builder
def zeros(shape: Any, dtype: Any = "float64") -> Node:
    return full(shape, 0, dtype)


@builder
def ones(shape: Any, dtype: Any = "float64") -> Node:
    return full(shape, 1, dtype)


@builder
def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = "float64") -> Node:
    dt = normalize_dtype(dtype, "eye")
    n = operator.index(N)
    m = n if M is None else operator.index(M)
    if n < 0 or m < 0:
        raise ShapeError(f"eye: negative dimension in shape {fmt_shape((n, m))}")
    return make_node(Op.EYE, (), (n, m, operator.index(k), dt.str))


@builder
def arange(start, stop=None, step=None, dtype: Any = None) -> Node:
    arr = np.arange(start, stop, step, dtype=None if dtype is None else np.dtype(dtype))
    return asarray(arr)
