"""Gather ops: GATHER (take rows of an operand at an integer index array) and its transpose
SCATTER_ADD (add rows into zeros at an index array, duplicates accumulating), and NumPy's
advanced indexing (integer arrays, lists and boolean masks), which ``getitem`` routes here.

Shapes stay static. Concrete index arrays (NumPy arrays, lists, constant tensors) are checked
and normalized when the graph is built: negative indices wrapped, out-of-bounds indices raising
``IndexOutOfBoundsError`` naming the operand's shape and the bad index, boolean masks turned
into integer arrays (``np.nonzero``). The operand is sliced (basic entries), transposed so that
the indexed axes come first, and reshaped to ``(prod(indexed sizes),) + rest``; the broadcast
index arrays become ONE flat integer array (``np.ravel_multi_index``), a constant second input
of GATHER; a reshape/transpose places the result axes by NumPy's rule (where the advanced
indices stood when they are adjacent, else first).

A lazy integer index tensor (not a constant) has a static shape: its flat index is computed in
the graph (wrapped where negative, not bounds-checked when built; NumPy's kernel raises at run
time). A lazy boolean mask has a data-dependent count: it is evaluated now on concrete inputs by
the evaluator the front end registers (``set_evaluator``, tenloom/updates.py registers
``tenloom.concrete.concrete``) and raises ``DataDependentShapeError`` in traced functions.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from tenloom.graph.errors import (
    DataDependentShapeError,
    IndexingError,
    IndexOutOfBoundsError,
    ShapeError,
    fmt_shape,
)
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.checks import BadFormat, check_arity, check_int, check_no_attrs
from tenloom.graph.ops.leaf import lift
from tenloom.graph.ops.registry import Op, OpKind, builder, register_op
from tenloom.graph.value import V as T
from tenloom.graph.value import Value

Op.define_all("gather scatter_add")

_INDEX = np.dtype(np.int64)


class ScatterAttrs(NamedTuple):
    """SCATTER_ADD: the length of the result's first axis."""

    size: int


# ---- GATHER: out = x[idx], idx an integer array of any shape, rows of x along axis 0 ---------


def _is_int(dt: np.dtype) -> bool:
    return dt.kind in "iu"


def _gather_infer(inputs, attrs):
    x, idx = inputs
    if x.ndim < 1:
        raise ShapeError(f"gather: operand 0 of shape {fmt_shape(x.shape)} needs an axis to index")
    if not _is_int(idx.dtype):
        raise ShapeError(
            f"gather: operand 1 (the index) of shape {fmt_shape(idx.shape)} has dtype "
            f"{idx.dtype}, not an integer dtype"
        )
    return tuple(idx.shape) + tuple(x.shape[1:]), x.dtype


def _gather_ref(xs, attrs):
    x, idx = xs
    return x[idx]  # array indexing: the same call on NumPy and CuPy arrays


def _scatter_infer(inputs, attrs):
    g, idx = inputs
    (size,) = attrs
    if not _is_int(idx.dtype):
        raise ShapeError(
            f"scatter_add: operand 1 (the index) of shape {fmt_shape(idx.shape)} has dtype "
            f"{idx.dtype}, not an integer dtype"
        )
    if tuple(g.shape[: idx.ndim]) != tuple(idx.shape) or size < 0:
        raise ShapeError(
            f"scatter_add: operand 0 of shape {fmt_shape(g.shape)} does not start with the "
            f"shape {fmt_shape(idx.shape)} of operand 1 (the index), or size {size} < 0"
        )
    return (size,) + tuple(g.shape[idx.ndim :]), g.dtype


def _scatter_ref(xs, attrs):
    g, idx = xs
    # zeros_like dispatches on the array type (NumPy's or CuPy's); so does add.at (CuPy's
    # ufunc.at, atomic adds), and duplicates accumulate on both
    out = np.zeros_like(g, shape=(attrs.size,) + tuple(g.shape[idx.ndim :]))
    if not idx.size:
        return out
    if isinstance(out, np.ndarray) or out.dtype in _ADD_AT_DTYPES:
        np.add.at(out, idx, g)
    elif out.dtype.kind == "c":  # CuPy: part by part (each part a float view of ``out``)
        np.add.at(out.real, idx, g.real)
        np.add.at(out.imag, idx, g.imag)
    else:  # CuPy, bool and 8/16-bit ints: in 64 bits, then back (wrapping as NumPy's adds do)
        wide = np.uint64 if out.dtype.kind == "u" else np.int64
        acc = np.zeros_like(out, dtype=wide)
        np.add.at(acc, idx, g.astype(wide))
        out[...] = (acc != 0) if out.dtype.kind == "b" else acc.astype(out.dtype)
    return out


# the dtypes CuPy's add.at takes (its atomic adds); others go through a wider or real view
_ADD_AT_DTYPES = frozenset(
    np.dtype(t) for t in ("int32", "int64", "uint32", "uint64", "float16", "float32", "float64")
)


def _check_scatter(ins, at, op):
    at = check_arity(at, ScatterAttrs, op)
    check_int(at.size, "scatter_add size")
    if at.size < 0:
        raise BadFormat(f"scatter_add size {at.size} is negative")


def _gather_cost(node) -> int:
    return math.prod(node.shape)


def _scatter_cost(node) -> int:
    return math.prod(node.inputs[0].shape)


def _gather(x: Value, idx: Value) -> Value:
    return Value(make_node(Op.GATHER, (x.node, idx.node)))


def _scatter(g: Value, idx: Value, size: int) -> Value:
    return Value(make_node(Op.SCATTER_ADD, (g.node, idx.node), (size,)))


def _gather_vjp(node, y, xs, g):
    x, idx = xs
    return (_scatter(g, idx, x.shape[0]), None)


def _gather_jvp(node, y, xs, ts):
    return _gather(ts[0], xs[1])


def _scatter_vjp(node, y, xs, g):
    return (_gather(g, xs[1]), None)


def _scatter_jvp(node, y, xs, ts):
    return _scatter(ts[0], xs[1], node.attrs.size)


register_op(
    Op.GATHER,
    OpKind.MOVEMENT,
    _gather_infer,
    _gather_ref,
    2,
    vjp=_gather_vjp,
    jvp=_gather_jvp,
    check_attrs=check_no_attrs,
    cost=_gather_cost,
)
register_op(
    Op.SCATTER_ADD,
    OpKind.MOVEMENT,
    _scatter_infer,
    _scatter_ref,
    2,
    attrs=ScatterAttrs,
    vjp=_scatter_vjp,
    jvp=_scatter_jvp,
    check_attrs=_check_scatter,
    fmt=lambda at: f"[size={at.size}]",
    cost=_scatter_cost,
)


# ---- the evaluator of lazy boolean masks (registered by the front end) ----------------------

_EVALUATOR: list[Callable[[Node, str, str], np.ndarray]] = []


def set_evaluator(fn: Callable[[Node, str, str], np.ndarray]) -> None:
    """Register ``fn(node, op, remedy) -> ndarray``: evaluates a lazy mask now (or raises
    DataDependentShapeError in a traced function)."""
    _EVALUATOR[:] = [fn]


_MASK_REMEDY = (
    "index with a concrete mask (a NumPy array), or call on concrete operands, or use "
    "where(mask, x, 0) to keep the shape"
)


def _concrete_mask(node: Node) -> np.ndarray:
    if not _EVALUATOR:
        raise DataDependentShapeError(
            "getitem: a lazy boolean mask's count of True entries fixes the result's shape and "
            f"cannot be evaluated here; {_MASK_REMEDY}"
        )
    return np.asarray(_EVALUATOR[0](node, "getitem", _MASK_REMEDY))


# ---- advanced indexing --------------------------------------------------------------------


def is_advanced(k: Any) -> bool:
    """Whether ``k`` (one entry of an index) is an advanced index: an array, list, tuple, bool
    or tensor (everything but ints, slices, None and Ellipsis)."""
    if k is None or k is Ellipsis or isinstance(k, slice):
        return False
    if isinstance(k, (bool, np.bool_)):
        return True
    return not isinstance(k, (int, np.integer))


def _as_index(k: Any, shape: tuple) -> np.ndarray | Value:
    """An advanced entry as a NumPy array (concrete) or a Value (a lazy integer tensor)."""
    if isinstance(k, (Value, Node)):
        node = lift(k, "getitem")
        if node.op is Op.CONST:
            k = np.asarray(node.attrs.constant.value)
        elif not (_is_int(node.dtype) or node.dtype == np.bool_):
            raise IndexingError(
                f"getitem: an index tensor of dtype {node.dtype} and shape "
                f"{fmt_shape(node.shape)} on a tensor of shape {fmt_shape(shape)}: arrays used "
                "as indices must be of integer or boolean type"
            )
        elif node.dtype == np.bool_:
            return _concrete_mask(node)
        else:
            return Value(node)
    try:
        arr = np.asarray(k)
    except (ValueError, TypeError) as e:
        raise IndexingError(
            f"getitem: index {k!r} on a tensor of shape {fmt_shape(shape)} is not an array ({e})"
        ) from None
    if arr.dtype == object or not (_is_int(arr.dtype) or arr.dtype == np.bool_):
        if arr.size == 0 and arr.dtype.kind == "f":  # NumPy takes [] as an empty int index
            return arr.astype(_INDEX)
        raise IndexingError(
            f"getitem: index {k!r} of dtype {arr.dtype} on a tensor of shape {fmt_shape(shape)}: "
            "arrays used as indices must be of integer or boolean type"
        )
    return arr


def advanced_getitem(n: Node, key: tuple) -> Node:
    """``n[key]`` with at least one advanced entry in ``key`` (NumPy's rules)."""
    from tenloom.graph.ops.movement import getitem, reshape, transpose

    shape = n.shape
    entries = [k if not is_advanced(k) else _as_index(k, shape) for k in key]
    if sum(1 for k in entries if k is Ellipsis) > 1:
        raise IndexingError("getitem: an index can only have a single ellipsis ('...')")

    def consumed(k) -> int:
        if k is None or k is Ellipsis:
            return 0
        if isinstance(k, np.ndarray) and k.dtype == np.bool_:
            return k.ndim
        return 1

    used = sum(consumed(k) for k in entries)
    if used > n.ndim:
        raise IndexOutOfBoundsError(
            f"getitem: too many indices ({used}) for a tensor of shape {fmt_shape(shape)}"
        )
    # each entry's position in the key as written: the Ellipsis's axes all stand at its own
    # position, so that it separates the advanced entries around it even where it covers no
    # axis (NumPy's rule for where the advanced axes go)
    if Ellipsis in [k if k is Ellipsis else None for k in entries]:
        i = next(j for j, k in enumerate(entries) if k is Ellipsis)
        fill = n.ndim - used
        entries = entries[:i] + [slice(None)] * fill + entries[i + 1 :]
        positions = (
            list(range(i)) + [i] * fill + list(range(i + 1, i + 1 + len(entries) - i - fill))
        )
    else:
        positions = list(range(len(entries)))
        entries = entries + [slice(None)] * (n.ndim - used)
        positions += [len(positions)] * (n.ndim - used)

    # one entry per axis of ``x``: the operand with a unit axis for each None and 0-d mask;
    # a 0-d mask is an index array of length 1 (True) or 0 (False) on its unit axis, boolean
    # masks expand to one integer array per axis they cover, ints join the arrays (NumPy's rule)
    per_axis: list[Any] = []  # slice, or ("arr", array-or-Value, group) per axis of x
    x_shape: list[int] = []
    ax = 0
    for pos, k in zip(positions, entries):
        if k is None:
            per_axis.append(slice(None))
            x_shape.append(1)
        elif isinstance(k, slice):
            per_axis.append(k)
            x_shape.append(shape[ax])
            ax += 1
        elif isinstance(k, np.ndarray) and k.dtype == np.bool_:
            if k.ndim == 0:
                per_axis.append(("arr", np.zeros(int(k), _INDEX), pos))
                x_shape.append(1)
                continue
            cover = shape[ax : ax + k.ndim]
            if tuple(k.shape) != tuple(cover):
                raise IndexOutOfBoundsError(
                    f"getitem: boolean index of shape {fmt_shape(k.shape)} does not match the "
                    f"axes {ax}..{ax + k.ndim - 1} of shape {fmt_shape(cover)} of the tensor "
                    f"of shape {fmt_shape(shape)}"
                )
            for arr in np.nonzero(k):
                per_axis.append(("arr", arr.astype(_INDEX), pos))
                x_shape.append(shape[ax])
                ax += 1
        else:
            if isinstance(k, (int, np.integer)):
                k = np.asarray(operator.index(k), _INDEX)
            per_axis.append(("arr", k, pos))
            x_shape.append(shape[ax])
            ax += 1

    x = reshape(n, tuple(x_shape)) if tuple(x_shape) != tuple(shape) else n
    basic = tuple(e if isinstance(e, slice) else slice(None) for e in per_axis)
    if any(e != slice(None) for e in basic):
        x = getitem(x, basic)
    arr_axes = [i for i, e in enumerate(per_axis) if not isinstance(e, slice)]
    rest = [i for i, e in enumerate(per_axis) if isinstance(e, slice)]
    sizes = tuple(x.shape[i] for i in arr_axes)
    arrays = [per_axis[i][1] for i in arr_axes]
    try:
        bshape = np.broadcast_shapes(*(tuple(a.shape) for a in arrays))
    except ValueError:
        raise IndexingError(
            "getitem: shape mismatch: the index arrays of shapes "
            f"{', '.join(fmt_shape(tuple(a.shape)) for a in arrays)} on a tensor of shape "
            f"{fmt_shape(shape)} cannot be broadcast together"
        ) from None
    if all(isinstance(a, np.ndarray) for a in arrays):
        flat = _flat_concrete(arrays, sizes, arr_axes, bshape, shape)
        idx = lift(flat, "getitem")
    else:
        idx = _flat_lazy(arrays, sizes, bshape).node

    if arr_axes != list(range(len(arr_axes))):
        x = transpose(x, tuple(arr_axes + rest))
    rest_shape = tuple(x.shape[len(arr_axes) :])
    x = reshape(x, (math.prod(sizes),) + rest_shape)
    out = make_node(Op.GATHER, (x, idx))  # shape bshape + rest_shape
    # NumPy's placement: the advanced axes where the advanced entries stood when these are
    # adjacent in the index (no slice, None or Ellipsis between them), else first
    groups = [per_axis[i][2] for i in arr_axes]
    adjacent = _consecutive(groups)
    first = arr_axes[0]
    if adjacent and first > 0 and len(bshape) and rest:
        nb = len(bshape)
        r = list(range(nb, nb + len(rest)))
        lead = [j for j, i in zip(r, rest) if i < first]
        tail = [j for j, i in zip(r, rest) if i > first]
        out = transpose(out, tuple(lead + list(range(nb)) + tail))
    return out


def _consecutive(groups: list[int]) -> bool:
    """The entries' positions in the index, per array axis (a mask repeats its position): do
    they form one run without gaps?"""
    uniq = sorted(set(groups))
    return uniq == list(range(uniq[0], uniq[-1] + 1))


def _flat_concrete(arrays, sizes, arr_axes, bshape, shape) -> np.ndarray:
    out = []
    for a, size, ax in zip(arrays, sizes, arr_axes):
        a = np.asarray(a).astype(_INDEX, copy=False)
        bad = (a < -size) | (a >= size)
        if bad.any():
            i = int(a[bad].flat[0])
            raise IndexOutOfBoundsError(
                f"getitem: index {i} is out of bounds for axis {ax} with size {size} of the "
                f"operand of shape {fmt_shape(shape)}"
            )
        out.append(np.broadcast_to(np.where(a < 0, a + size, a), bshape))
    if math.prod(bshape) == 0:
        return np.zeros(bshape, _INDEX)
    return np.ravel_multi_index(tuple(out), sizes).astype(_INDEX)


def _flat_lazy(arrays, sizes, bshape) -> Value:
    """The flat index as graph values (some index arrays are lazy tensors): wrapped where
    negative, then combined with the row-major strides of ``sizes``. An index out of range on
    any axis makes its flat index out of range too (-1 - the total size, which GATHER refuses
    with IndexError), where combining it would land on an element of another row."""
    flat = None
    bad = None
    stride = 1
    for a, size in reversed(list(zip(arrays, sizes))):
        v = Value(lift(np.asarray(a, _INDEX) if isinstance(a, np.ndarray) else a, "getitem"))
        v = T.astype(v, _INDEX)
        out = (v < -size) | (v >= size)
        bad = out if bad is None else bad | out
        v = T.where(v < 0, v + size, v)
        term = v * stride if stride != 1 else v
        flat = term if flat is None else flat + term
        stride *= size
    flat = T.where(bad, -1 - stride, flat)
    return T.broadcast_to(flat, tuple(bshape))


@builder(public=False)
def take_flat(x, idx) -> Node:
    """``x[idx]`` along axis 0 with an integer index array (GATHER)."""
    return make_node(Op.GATHER, (lift(x, "take_flat"), lift(idx, "take_flat")))


@builder(public=False)
def scatter_add_flat(g, idx, size: int) -> Node:
    """Zeros of ``(size,) + g.shape[idx.ndim:]`` with the rows of ``g`` added at ``idx``
    (SCATTER_ADD; duplicates accumulate)."""
    return make_node(
        Op.SCATTER_ADD, (lift(g, "scatter_add_flat"), lift(idx, "scatter_add_flat")), (size,)
    )
