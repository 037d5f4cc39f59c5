"""Node builders: every op of tenloom with NumPy's semantics, returning graph nodes.

Each function lifts its operands (Nodes, Values such as the front end's Tensors, arrays, Python
scalars), normalizes arguments (axes, shapes, permutations) so equal computations hash-cons to
the same node, and lets the op's rule check shapes and dtypes now, at trace time. The front end
(tenloom/api.py) wraps each result as a Tensor; differentiation rules use them through
``graph.value.Value``'s operators and ``graph.value.V``.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
from tenloom.graph import einsum as _einsum
from tenloom.graph.dtypes import _SUPPORTED_SET, normalize_dtype
from tenloom.graph.errors import (
    ConcretizationError,
    DTypeError,
    IndexingError,
    IndexOutOfBoundsError,
    OptionTypeError,
    ShapeError,
    fmt_shape,
)
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops import Op
from tenloom.graph.ops.leaf import Constant, next_placeholder_id, placeholder_number
from tenloom.graph.ops.movement import normalize_slice, slice_len
from tenloom.graph.value import Value

_SCALARS = (bool, int, float, complex)

# ---------------------------------------------------------------------------------------------
# lifting
# ---------------------------------------------------------------------------------------------


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
    if t is float:
        return (dt, x.hex())  # exact bits: 0.0 and -0.0 differ, nan matches nan
    if t is complex:
        return (dt, x.real.hex(), x.imag.hex())
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


# ---------------------------------------------------------------------------------------------
# leaves
# ---------------------------------------------------------------------------------------------


def asarray(x: Any, dtype: Any = None) -> Node:
    """A lazy constant wrapping ``x`` (no copy, as ``numpy.asarray``)."""
    if isinstance(x, (Node, Value)):
        return lift(x) if dtype is None else astype(x, dtype)
    if dtype is not None:
        x = np.asarray(x, dtype=normalize_dtype(dtype, "asarray"))
    return _const_node(x, "asarray")


def placeholder(shape: Sequence[int], dtype: Any = "float64", name: str | None = None) -> Node:
    """A symbolic input, bound at evaluation with ``feed={placeholder: array}``."""
    shape = _shape_arg(shape, "placeholder")
    dt = normalize_dtype(dtype, "placeholder")
    uid = next_placeholder_id()
    if name is None:
        name = f"input{placeholder_number(uid)}"
    return make_node(Op.PLACEHOLDER, (), (str(name), uid, shape, dt.str))


def _shape_arg(shape: Any, op: str) -> tuple[int, ...]:
    out = tuple(int_arg(s, op, "dimension") for s in _axis_items(shape))
    if any(s < 0 for s in out):
        raise ShapeError(f"{op}: negative dimension in shape {fmt_shape(out)}")
    return out


def full(shape: Any, fill_value: Any, dtype: Any = None) -> Node:
    shape = _shape_arg(shape, "full")
    dt = np.asarray(fill_value).dtype if dtype is None else np.dtype(dtype)
    dt = normalize_dtype(dt, "full")
    return full_node(shape, fill_value, dt)


def zeros(shape: Any, dtype: Any = "float64") -> Node:
    return full(shape, 0, dtype)


def ones(shape: Any, dtype: Any = "float64") -> Node:
    return full(shape, 1, dtype)


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = "float64") -> Node:
    dt = normalize_dtype(dtype, "eye")
    n = operator.index(N)
    m = n if M is None else operator.index(M)
    if n < 0 or m < 0:
        raise ShapeError(f"eye: negative dimension in shape {fmt_shape((n, m))}")
    return make_node(Op.EYE, (), (n, m, operator.index(k), dt.str))


def arange(start, stop=None, step=None, dtype: Any = None) -> Node:
    arr = np.arange(start, stop, step, dtype=None if dtype is None else np.dtype(dtype))
    return asarray(arr)


# ---------------------------------------------------------------------------------------------
# elementwise
# ---------------------------------------------------------------------------------------------


def _unary(op: Op, x: Any) -> Node:
    return make_node(op, (lift(x, op.value),))


def _binary(op: Op, a: Any, b: Any) -> Node:
    if isinstance(a, Value):
        if isinstance(b, Value):
            return make_node(op, (a.node, b.node))
        tb = type(b)
        if tb is float or tb is int:  # the hot path of traced loops: x * 0.5
            return make_node(op, (a.node, scalar_node(b, a.node.dtype, op)))
    return make_node(op, _lift_pair(a, b, op.value))


def negative(x):
    return _unary(Op.NEG, x)


def abs(x):  # noqa: A001 - NumPy's name
    return _unary(Op.ABS, x)


absolute = abs


def exp(x):
    return _unary(Op.EXP, x)


def log(x):
    return _unary(Op.LOG, x)


def sqrt(x):
    return _unary(Op.SQRT, x)


def sin(x):
    return _unary(Op.SIN, x)


def cos(x):
    return _unary(Op.COS, x)


def tanh(x):
    return _unary(Op.TANH, x)


def sign(x):
    return _unary(Op.SIGN, x)


def conj(x):
    n = lift(x, "conj")
    if n.dtype.kind == "b":
        return astype(n, "int8")  # NumPy's conjugate of booleans is int8
    return n if n.dtype.kind != "c" else make_node(Op.CONJ, (n,))


conjugate = conj


def real(x):
    n = lift(x, "real")
    return n if n.dtype.kind != "c" else make_node(Op.REAL, (n,))


def imag(x):
    return _unary(Op.IMAG, x)


def invert(x):
    return _unary(Op.INVERT, x)


def add(a, b):
    return _binary(Op.ADD, a, b)


def subtract(a, b):
    return _binary(Op.SUB, a, b)


def multiply(a, b):
    return _binary(Op.MUL, a, b)


def divide(a, b):
    return _binary(Op.DIV, a, b)


true_divide = divide


def floor_divide(a, b):
    return _binary(Op.FLOORDIV, a, b)


def remainder(a, b):
    return _binary(Op.MOD, a, b)


def power(a, b):
    return _binary(Op.POW, a, b)


def operator_power(x: Any, e: Any) -> Node:
    """``x ** e`` as NumPy's ``**`` operator computes it: for a Python scalar exponent it takes
    fast paths that are not ``np.power`` on special values (``(1+infj) ** 0.5`` is sqrt's
    inf+infj, power's inf+nanj) or in dtype (``bool_array ** 2`` is square's int8, power's
    int64): an inexact array to 0.5 is ``sqrt``, any array to the int 2 is ``x * x`` (bool
    squared as int8). Everything else is ``power`` (for complex ``x ** -1`` NumPy's operator
    takes ``np.reciprocal``, which tenloom has no op for: docs/reliability.md)."""
    if type(e) in (int, float) and e in (0.5, 2):
        kind = x.dtype.kind
        if e == 0.5 and kind in "fc":
            return sqrt(x)
        if type(e) is int and e == 2:  # complex ** 2.0 is NumPy's power again
            base = astype(x, "int8") if kind == "b" else x
            return multiply(base, base)
    return power(x, e)


def maximum(a, b):
    return _binary(Op.MAXIMUM, a, b)


def minimum(a, b):
    return _binary(Op.MINIMUM, a, b)


# op -> (result when a Python int lies above every value of the array's integer dtype, below)
_BEYOND = {
    Op.EQ: (False, False),
    Op.NE: (True, True),
    Op.LT: (True, False),
    Op.LE: (True, False),
    Op.GT: (False, True),
    Op.GE: (False, True),
}
_MIRROR = {Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE, Op.EQ: Op.EQ, Op.NE: Op.NE}
_WIDE_INTS = tuple((np.iinfo(d).min, np.iinfo(d).max, np.dtype(d)) for d in ("int64", "uint64"))
_INT_RANGES: dict[np.dtype, tuple[int, int]] = {}


def _int_range(dt: np.dtype) -> tuple[int, int]:
    r = _INT_RANGES.get(dt)
    if r is None:
        info = np.iinfo(dt)
        r = _INT_RANGES[dt] = (int(info.min), int(info.max))
    return r


def _compare_beyond(op: Op, n: Node, value: int) -> Node | None:
    """``n <op> value`` for a Python int outside the range of n's integer dtype, which NumPy 2
    compares by its true value (``int32_array < 2**40`` is all True) where arithmetic would
    raise: the int takes int64 or uint64 when it fits one of them (NumPy compares mixed
    integer dtypes exactly), else the result follows from its sign alone. None when ``value``
    fits n's dtype (the ordinary NEP 50 path)."""
    if n.dtype.kind not in "iu":
        return None
    lo, hi = _int_range(n.dtype)
    if lo <= value <= hi:
        return None
    for lo, hi, wide in _WIDE_INTS:
        if lo <= value <= hi:
            return make_node(op, (n, full_node((), value, wide, op.value)))
    return broadcast_to(full((), _BEYOND[op][0 if value > 0 else 1], "bool"), n.shape)


def _compare(op: Op, a: Any, b: Any) -> Node:
    """A comparison (NEP 50, with NumPy 2's exact comparison of out-of-range Python ints)."""
    if type(b) is int and not isinstance(a, _SCALARS):
        an = lift(a, op.value)
        out = _compare_beyond(op, an, b)
        return out if out is not None else _binary(op, an, b)
    if type(a) is int and not isinstance(b, _SCALARS):
        bn = lift(b, op.value)
        out = _compare_beyond(_MIRROR[op], bn, a)
        return out if out is not None else _binary(op, a, bn)
    return _binary(op, a, b)


def equal(a, b):
    return _compare(Op.EQ, a, b)


def not_equal(a, b):
    return _compare(Op.NE, a, b)


def less(a, b):
    return _compare(Op.LT, a, b)


def less_equal(a, b):
    return _compare(Op.LE, a, b)


def greater(a, b):
    return _compare(Op.GT, a, b)


def greater_equal(a, b):
    return _compare(Op.GE, a, b)


def bitwise_and(a, b):
    return _binary(Op.AND, a, b)


def bitwise_or(a, b):
    return _binary(Op.OR, a, b)


def bitwise_xor(a, b):
    return _binary(Op.XOR, a, b)


def where(condition, x=None, y=None) -> Node:
    """Elementwise ``x`` where ``condition`` else ``y`` (NumPy's three-argument form)."""
    if x is None or y is None:
        # NumPy's one-argument form is nonzero(condition): its shape depends on the values
        raise ConcretizationError(
            "where: give condition, x and y; where(condition) alone is nonzero(condition), "
            "whose shape depends on the values (evaluate the condition first)"
        )
    c = lift(condition, "where")
    xn, yn = _lift_pair(x, y, "where")
    return make_node(Op.WHERE, (c, xn, yn))


def clip(a, a_min=None, a_max=None) -> Node:
    """``minimum(maximum(a, a_min), a_max)``; either bound may be None (both: ``a``, as NumPy 2)."""
    out = asarray(a)
    if a_min is None and a_max is None:
        if out.dtype.kind == "b":  # NumPy runs np.positive then, which has no bool loop
            raise DTypeError("clip: a bool array with both bounds None (NumPy has no loop)")
        return out
    if out.dtype.kind in "iu":
        # as NumPy 2 (numpy/_core/_methods.py _clip): a Python int bound at or beyond the int
        # dtype's range is no bound, decided before any promotion
        lo, hi = _int_range(out.dtype)
        if type(a_min) is int and a_min <= lo:
            a_min = None
        if type(a_max) is int and a_max >= hi:
            a_max = None
        if a_min is None and a_max is None:
            return out
    # then NumPy's clip runs in the dtype of all three together (a float bound makes an int
    # array float64 first, a complex one a float16 array complex64: -2**31 is then a bound,
    # not float16's -inf)
    scalars = [b for b in (a_min, a_max) if b is not None and isinstance(b, _SCALARS)]
    if scalars:
        common = np.result_type(out.dtype, *scalars)
        if common != out.dtype and common in _SUPPORTED_SET:
            out = astype(out, common)
    if a_min is not None:
        out = maximum(out, a_min)
    if a_max is not None:
        out = minimum(out, a_max)
    return out


def astype(x, dtype) -> Node:
    n = lift(x, "astype")
    dt = normalize_dtype(dtype, "astype")
    if dt == n.dtype:
        return n
    return make_node(Op.CAST, (n,), (dt.str,))


# ---------------------------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------------------------


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


def _reduce(op: Op, x, axis, keepdims: bool) -> Node:
    n = lift(x, op.value)
    axes = normalize_axes(axis, n.ndim, op.value, n.shape)
    keepdims = bool_arg(keepdims, op.value, "keepdims")
    if not axes and op in (Op.MAX, Op.MIN):
        return n
    return make_node(op, (n,), (axes, keepdims))


def sum(x, axis=None, keepdims: bool = False) -> Node:  # noqa: A001
    return _reduce(Op.SUM, x, axis, keepdims)


def prod(x, axis=None, keepdims: bool = False) -> Node:
    return _reduce(Op.PROD, x, axis, keepdims)


def max(x, axis=None, keepdims: bool = False) -> Node:  # noqa: A001
    return _reduce(Op.MAX, x, axis, keepdims)


def min(x, axis=None, keepdims: bool = False) -> Node:  # noqa: A001
    return _reduce(Op.MIN, x, axis, keepdims)


amax, amin = max, min


def mean(x, axis=None, keepdims: bool = False) -> Node:
    """Arithmetic mean with NumPy's dtypes: float64 for integers, float16 kept (float32 inside)."""
    t = asarray(x)
    axes = normalize_axes(axis, t.ndim, "mean", t.shape)
    keepdims = bool_arg(keepdims, "mean", "keepdims")
    count = math.prod(t.shape[a] for a in axes)
    kind = t.dtype
    if kind.kind in "biu":
        t = astype(t, "float64")
    elif kind == np.float16:
        t = astype(t, "float32")
    s = sum(t, axes, keepdims=keepdims)
    out = divide(s, count) if count else divide(s, full((), 0, s.dtype))
    return astype(out, kind) if kind == np.float16 else out


# ---------------------------------------------------------------------------------------------
# movement
# ---------------------------------------------------------------------------------------------


def reshape(x, shape) -> Node:
    n = lift(x, "reshape")
    shape = [int_arg(s, "reshape", "dimension") for s in _axis_items(shape)]
    if shape.count(-1) > 1:
        raise ShapeError(f"reshape: more than one -1 in shape {tuple(shape)}")
    if -1 in shape:
        rest = math.prod(s for s in shape if s != -1)
        if rest == 0 or n.size % rest:
            raise ShapeError(
                f"reshape: cannot reshape operand 0 of shape {fmt_shape(n.shape)} "
                f"({n.size} elements) into shape {tuple(shape)}"
            )
        shape[shape.index(-1)] = n.size // rest
    if any(s < 0 for s in shape):
        raise ShapeError(f"reshape: negative dimension in shape {tuple(shape)}")
    shape = tuple(shape)
    if shape == n.shape:
        return n
    if n.op is Op.RESHAPE:  # reshape(reshape(x, s), t) -> reshape(x, t)
        n = n.inputs[0]
        if shape == n.shape:
            return n
    return make_node(Op.RESHAPE, (n,), (shape,))


def transpose(x, axes=None) -> Node:
    n = lift(x, "transpose")
    if axes is None:
        perm = tuple(range(n.ndim))[::-1]
    else:
        perm = tuple(int_arg(a, "transpose", "axis") for a in _axis_items(axes))
        if (
            len(perm) != n.ndim
            or sorted(p % builtins.max(n.ndim, 1) for p in perm) != list(range(n.ndim))
            or any(not -n.ndim <= p < n.ndim for p in perm)
        ):
            raise ShapeError(
                f"transpose: axes {tuple(axes)} are not a permutation of the {n.ndim} axes of "
                f"operand 0 of shape {fmt_shape(n.shape)}"
            )
        perm = tuple(p % n.ndim for p in perm)
    if perm == tuple(range(n.ndim)):
        return n
    return make_node(Op.TRANSPOSE, (n,), (perm,))


def permute_dims(x, axes) -> Node:
    return transpose(x, axes)


def moveaxis(x, source, destination) -> Node:
    n = lift(x, "moveaxis")
    src = normalize_axes(source, n.ndim, "moveaxis", n.shape)
    src_list = list(_axis_items(source))
    dst_list = list(_axis_items(destination))
    if len(src_list) != len(dst_list):
        raise ShapeError(
            f"moveaxis: source {source!r} and destination {destination!r} differ in length"
        )
    src = [operator.index(s) % n.ndim for s in src_list]
    normalize_axes(dst_list, n.ndim, "moveaxis", n.shape)
    dst = [operator.index(d) % n.ndim for d in dst_list]
    order = [i for i in range(n.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(n, order)


def squeeze(x, axis=None) -> Node:
    n = lift(x, "squeeze")
    if axis is None:
        axes = tuple(i for i, s in enumerate(n.shape) if s == 1)
    else:
        axes = normalize_axes(axis, n.ndim, "squeeze", n.shape)
        for a in axes:
            if n.shape[a] != 1:
                raise ShapeError(
                    f"squeeze: axis {a} of operand 0 of shape {fmt_shape(n.shape)} has size "
                    f"{n.shape[a]}, not 1"
                )
    return reshape(n, tuple(s for i, s in enumerate(n.shape) if i not in axes))


def expand_dims(x, axis) -> Node:
    n = lift(x, "expand_dims")
    items = _axis_items(axis)
    out_ndim = n.ndim + len(items)
    axes = normalize_axes(items, out_ndim, "expand_dims", n.shape)
    it = iter(n.shape)
    shape = tuple(1 if i in axes else next(it) for i in range(out_ndim))
    return reshape(n, shape)


def broadcast_to(x, shape) -> Node:
    n = lift(x, "broadcast_to")
    shape = _shape_arg(shape, "broadcast_to")
    if shape == n.shape:
        return n
    return make_node(Op.BROADCAST, (n,), (shape,))


def concatenate(arrays: Sequence[Any], axis: int | None = 0) -> Node:
    nodes = [lift(a, "concatenate") for a in arrays]
    if not nodes:
        raise ShapeError("concatenate: needs at least one operand")
    if axis is None:
        nodes = [reshape(n, (-1,)) for n in nodes]
        axis = 0
    for k, n in enumerate(nodes):
        if n.ndim == 0:
            raise ShapeError(
                f"concatenate: operand {k} is 0-d; zero-dimensional arrays cannot be concatenated"
            )
        if n.ndim != nodes[0].ndim:
            raise ShapeError(
                f"concatenate: operand {k} of shape {fmt_shape(n.shape)} has {n.ndim} axes but "
                f"operand 0 of shape {fmt_shape(nodes[0].shape)} has {nodes[0].ndim}"
            )
    (ax,) = normalize_axes(axis, nodes[0].ndim, "concatenate", nodes[0].shape)
    if len(nodes) == 1:
        return nodes[0]
    return make_node(Op.CONCAT, tuple(nodes), (ax,))


def stack(arrays: Sequence[Any], axis: int = 0) -> Node:
    nodes = [lift(a, "stack") for a in arrays]
    if not nodes:
        raise ShapeError("stack: needs at least one operand")
    for k, n in enumerate(nodes):
        if n.shape != nodes[0].shape:
            raise ShapeError(
                f"stack: operand {k} of shape {fmt_shape(n.shape)} does not match operand 0 of "
                f"shape {fmt_shape(nodes[0].shape)}"
            )
    (ax,) = normalize_axes(axis, nodes[0].ndim + 1, "stack", nodes[0].shape)
    return concatenate([expand_dims(n, ax) for n in nodes], ax)


def getitem(x, key) -> Node:
    """Basic indexing: ints, slices (any step), None and Ellipsis."""
    n = lift(x, "getitem")
    if not isinstance(key, tuple):
        key = (key,)
    for k in key:
        if isinstance(k, (bool, np.bool_)) or not (
            k is None or k is Ellipsis or isinstance(k, (slice, int, np.integer))
        ):
            raise IndexingError(
                f"getitem: index {k!r} of type {type(k).__name__} is not supported on a tensor "
                f"of shape {fmt_shape(n.shape)}; only ints, slices, None and ... (basic indexing)"
            )
    if builtins.sum(1 for k in key if k is Ellipsis) > 1:
        raise IndexingError("getitem: an index can only have a single ellipsis ('...')")
    used = builtins.sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > n.ndim:
        raise IndexOutOfBoundsError(
            f"getitem: too many indices ({used}) for a tensor of shape {fmt_shape(n.shape)}"
        )
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (n.ndim - used) + key[i + 1 :]
    else:
        key = key + (slice(None),) * (n.ndim - used)
    spec, out_shape = [], []
    ax = 0
    for k in key:
        if k is None:
            out_shape.append(1)
            continue
        size = n.shape[ax]
        if isinstance(k, slice):
            for part in (k.start, k.stop, k.step):
                if part is not None and not hasattr(part, "__index__"):
                    raise IndexingError(
                        f"getitem: slice {k!r}: slice indices must be ints or None, not "
                        f"{type(part).__name__}"
                    )
            if k.step is not None and operator.index(k.step) == 0:
                raise ShapeError(f"getitem: slice {k!r}: slice step cannot be zero")
            s = normalize_slice(k, size)
            spec.append(s)
            out_shape.append(slice_len(*s))
        else:
            i = operator.index(k)
            if not -size <= i < size:
                raise IndexOutOfBoundsError(
                    f"getitem: index {i} is out of bounds for axis {ax} with size {size} "
                    f"(shape {fmt_shape(n.shape)})"
                )
            i %= size
            spec.append((i, i + 1, 1))
        ax += 1
    trivial = all(s == (0, size, 1) for s, size in zip(spec, n.shape))
    out = n if trivial else make_node(Op.SLICE, (n,), (tuple(spec),))
    return reshape(out, tuple(out_shape))


# ---------------------------------------------------------------------------------------------
# multilinear
# ---------------------------------------------------------------------------------------------


def lift_operands(operands) -> tuple[list[Node], list[tuple[int, ...]]]:
    """einsum's operands as nodes, and their shapes (what ``parse`` needs)."""
    # Python scalars are operands like any other, as numpy.einsum makes them arrays first
    # (np.asarray(3) is int64): not weak scalars, so einsum("i,->i", int8, 3) is int64 there
    nodes = [lift(o, "einsum") for o in operands]
    return nodes, [nd.shape for nd in nodes]


def einsum_spec(nodes: Sequence[Node], spec: _einsum.EinsumSpec) -> Node:
    """The EINSUM node of lifted operands and a parsed specification (tenloom/einsum.py parses
    the string and sublist forms): labels renumbered, size-1 broadcast axes squeezed away."""
    nodes = list(nodes)
    in_labels, out, squeeze_axes, _ = _einsum.normalize(spec, [n.shape for n in nodes])
    for k, drop in enumerate(squeeze_axes):
        if drop:
            nodes[k] = squeeze(nodes[k], drop)
    return make_node(Op.EINSUM, tuple(nodes), (in_labels, out))


def einsum(operands: Sequence[Any], terms: Sequence[Sequence], output: Sequence) -> Node:
    """Einstein summation of ``operands`` over hashable labels: ``terms[k]`` labels operand k's
    axes (a label repeated within one term takes a diagonal), ``output`` the result's."""
    nodes, _ = lift_operands(operands)
    spec = _einsum.EinsumSpec(tuple(tuple(t) for t in terms), tuple(output), "<einsum>")
    return einsum_spec(nodes, spec)


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


def diagonal(x, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Node:
    n = lift(x, "diagonal")
    a1, a2 = _axis_pair(n, axis1, axis2, "diagonal")
    return make_node(Op.DIAGONAL, (n,), (_offset(offset, n, a1, a2, "diagonal"), a1, a2))


def trace(x, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Node:
    n = lift(x, "trace")
    a1, a2 = _axis_pair(n, axis1, axis2, "trace")
    return make_node(Op.TRACE, (n,), (_offset(offset, n, a1, a2, "trace"), a1, a2))


def matmul(a, b) -> Node:
    an, bn = lift(a, "matmul"), lift(b, "matmul")
    return make_node(Op.MATMUL, (an, bn))


def tensordot(a, b, axes: Any = 2) -> Node:
    an, bn = lift(a, "tensordot"), lift(b, "tensordot")
    if isinstance(axes, (float, np.floating)):  # NumPy: TypeError
        raise OptionTypeError(f"tensordot: axes {axes!r} is not an int or a pair")
    if isinstance(axes, (int, np.integer)):
        k = operator.index(axes)
        if k < 0 or k > an.ndim or k > bn.ndim:
            raise ShapeError(
                f"tensordot: cannot contract {k} axes of shapes {fmt_shape(an.shape)} and "
                f"{fmt_shape(bn.shape)}"
            )
        axa, axb = tuple(range(an.ndim - k, an.ndim)), tuple(range(k))
    else:
        try:
            xa, xb = axes
        except (TypeError, ValueError):
            raise ShapeError(f"tensordot: axes {axes!r} must be an int or a pair") from None
        xa = [xa] if not isinstance(xa, (list, tuple, range, np.ndarray)) else list(xa)
        xb = [xb] if not isinstance(xb, (list, tuple, range, np.ndarray)) else list(xb)
        xa = [int_arg(x, "tensordot", "axis") for x in xa]
        xb = [int_arg(x, "tensordot", "axis") for x in xb]
        if len(xa) != len(xb):
            raise ShapeError(f"tensordot: axes {axes!r} pair lists of different lengths")
        axa = tuple(normalize_axes([a], an.ndim, "tensordot", an.shape)[0] for a in xa)
        axb = tuple(normalize_axes([b], bn.ndim, "tensordot", bn.shape)[0] for b in xb)
        if len(set(axa)) != len(axa) or len(set(axb)) != len(axb):
            raise ShapeError(f"tensordot: repeated axis in {axes!r}")
    return make_node(Op.TENSORDOT, (an, bn), (axa, axb))


def dot(a, b) -> Node:
    """``numpy.dot``: a product for scalars, matmul up to 2-D, tensordot over (-1, -2) beyond."""
    an, bn = lift(a, "dot"), lift(b, "dot")
    if an.ndim == 0 or bn.ndim == 0:
        return multiply(an, bn)
    if an.ndim <= 2 and bn.ndim <= 2:
        return matmul(an, bn)
    return tensordot(an, bn, ([an.ndim - 1], [builtins.max(bn.ndim - 2, 0)]))


def outer(a, b) -> Node:
    return einsum([reshape(a, (-1,)), reshape(b, (-1,))], [[0], [1]], [0, 1])


def inner(a, b) -> Node:
    an, bn = lift(a, "inner"), lift(b, "inner")
    if an.ndim == 0 or bn.ndim == 0:
        return multiply(an, bn)
    return tensordot(an, bn, ([an.ndim - 1], [bn.ndim - 1]))


# the builders that return a node, by their public name (wrapped as Tensors in tenloom/api.py
# and as Values in graph/value.py ``V``)
BUILDERS = (
    "abs",
    "absolute",
    "add",
    "amax",
    "amin",
    "arange",
    "asarray",
    "astype",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "broadcast_to",
    "clip",
    "concatenate",
    "conj",
    "conjugate",
    "cos",
    "diagonal",
    "divide",
    "dot",
    "equal",
    "exp",
    "expand_dims",
    "eye",
    "floor_divide",
    "full",
    "greater",
    "greater_equal",
    "imag",
    "inner",
    "invert",
    "less",
    "less_equal",
    "log",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "moveaxis",
    "multiply",
    "negative",
    "not_equal",
    "ones",
    "outer",
    "permute_dims",
    "placeholder",
    "power",
    "prod",
    "real",
    "remainder",
    "reshape",
    "sign",
    "sin",
    "sqrt",
    "squeeze",
    "stack",
    "subtract",
    "sum",
    "tanh",
    "tensordot",
    "trace",
    "transpose",
    "true_divide",
    "where",
    "zeros",
    "operator_power",
    "getitem",
    "einsum",
)
