"""Movement ops: reshape, transpose, broadcast_to, slice (basic indexing) and its transpose
slice_scatter, concatenate, diagonal, and layout (emitted by eliminate_permutations).

Attributes are normalized by the front end (non-negative axes, full permutations, explicit
shapes), so identical movements hash-cons to one node. Movements are linear: each JVP rule is
the op applied to the tangent, and they cost no arithmetic.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from tenloom.graph.autodiff import linear_jvp, unbroadcast
from tenloom.graph.errors import (
    IndexingError,
    IndexOutOfBoundsError,
    ShapeError,
    fmt_shape,
)
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.args import (
    _axis_items,
    _axis_pair,
    _offset,
    _shape_arg,
    int_arg,
    normalize_axes,
)
from tenloom.graph.ops.checks import BadFormat, check_arity, check_int, check_ints, check_shape
from tenloom.graph.ops.leaf import lift
from tenloom.graph.ops.registry import Op, OpKind, builder, register_op
from tenloom.graph.value import V as T
from tenloom.graph.value import Value

# the ops of this family (Op.NEG, ...), defined before anything refers to them
Op.define_all(
    "reshape transpose BROADCAST=broadcast_to slice slice_scatter CONCAT=concatenate "
    "diagonal layout"
)


class ShapeAttrs(NamedTuple):
    """RESHAPE and BROADCAST: the result's shape."""

    shape: tuple[int, ...]


class PermAttrs(NamedTuple):
    """TRANSPOSE: the result's axes as axes of the operand. LAYOUT: the order, outermost first,
    in which the operand's axes lie in memory in the result (its shape is the operand's)."""

    perm: tuple[int, ...]


class SliceAttrs(NamedTuple):
    spec: tuple[tuple[int, int, int], ...]  # one normalized (start, stop, step) per axis


class SliceScatterAttrs(NamedTuple):
    spec: tuple[tuple[int, int, int], ...]  # where the operand goes, per axis of ``shape``
    shape: tuple[int, ...]  # the result's shape


class ConcatAttrs(NamedTuple):
    axis: int


class DiagonalAttrs(NamedTuple):
    """DIAGONAL, and TRACE (graph/ops/contract.py)."""

    offset: int
    axis1: int
    axis2: int


def _reshape_infer(inputs, attrs):
    (x,), (shape,) = inputs, attrs
    if math.prod(shape) != math.prod(x.shape):
        raise ShapeError(
            f"reshape: cannot reshape operand 0 of shape {fmt_shape(x.shape)} "
            f"({math.prod(x.shape)} elements) into shape {fmt_shape(shape)}"
        )
    return shape, x.dtype


def _transpose_infer(inputs, attrs):
    (x,), (perm,) = inputs, attrs
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(
            f"transpose: axes {perm} are not a permutation of the {x.ndim} axes of operand 0 "
            f"of shape {fmt_shape(x.shape)}"
        )
    return tuple(x.shape[p] for p in perm), x.dtype


def _broadcast_infer(inputs, attrs):
    (x,), (shape,) = inputs, attrs
    ok = len(shape) >= x.ndim and all(s == t or s == 1 for s, t in zip(x.shape[::-1], shape[::-1]))
    if not ok:
        raise ShapeError(
            f"broadcast_to: cannot broadcast operand 0 of shape {fmt_shape(x.shape)} "
            f"to shape {fmt_shape(shape)}"
        )
    return shape, x.dtype


def slice_len(start: int, stop: int, step: int) -> int:
    return len(range(start, stop, step))


EMPTY_SLICE = (0, 0, 1)


def normalize_slice(k: slice, n: int) -> tuple[int, int, int]:
    """The canonical ``(start, stop, step)`` of ``k`` on an axis of size ``n``: the indices it
    selects are exactly ``range(start, stop, step)``, as NumPy's ``x[k]``. An empty selection is
    always ``EMPTY_SLICE`` and a single index ``(i, i + 1, 1)``; otherwise ``start`` is the first
    index and ``stop`` lies one step short of the last (``-1`` when a negative step runs down
    to index 0), so that slices selecting the same indices hash-cons to one node."""
    start, stop, step = k.indices(n)
    length = len(range(start, stop, step))
    if length == 0:
        return EMPTY_SLICE
    if length == 1:
        return (start, start + 1, 1)
    last = start + (length - 1) * step
    return (start, last + (1 if step > 0 else -1), step)


def as_slice(start: int, stop: int, step: int) -> slice:
    """A Python slice selecting exactly ``range(start, stop, step)`` (any output of
    ``slice.indices``): a negative stop means 'run past index 0', and an empty range stays empty
    (``slice(-1, None, -1)`` would select the whole axis)."""
    if not len(range(start, stop, step)):
        return slice(0, 0, 1)
    return slice(start, None if stop < 0 else stop, step)


def _slice_infer(inputs, attrs):
    (x,), (spec,) = inputs, attrs
    if len(spec) != x.ndim:
        raise ShapeError(f"slice: {len(spec)} slices for operand 0 of shape {fmt_shape(x.shape)}")
    for ax, ((start, stop, step), n) in enumerate(zip(spec, x.shape)):
        if step == 0 or (slice_len(start, stop, step) and not (0 <= start < n and -1 <= stop <= n)):
            raise ShapeError(
                f"slice: ({start}, {stop}, {step}) is not a normalized slice of axis {ax} "
                f"of operand 0 of shape {fmt_shape(x.shape)}"
            )
    return tuple(slice_len(*s) for s in spec), x.dtype


def _slice_ref(xs, attrs):
    return xs[0][tuple(as_slice(*s) for s in attrs.spec)]


def _concat_infer(inputs, attrs):
    (axis,) = attrs
    first = inputs[0]
    for k, t in enumerate(inputs):
        if t.ndim != first.ndim or any(
            a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis
        ):
            raise ShapeError(
                f"concatenate: operand {k} of shape {fmt_shape(t.shape)} does not match operand 0 "
                f"of shape {fmt_shape(first.shape)} outside axis {axis}"
            )
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in inputs)
    return tuple(shape), np.result_type(*[t.dtype for t in inputs])


def diagonal_len(n1: int, n2: int, offset: int) -> int:
    if offset >= 0:
        return max(0, min(n1, n2 - offset))
    return max(0, min(n1 + offset, n2))


def diagonal_shape(shape, offset, axis1, axis2):
    rest = tuple(s for i, s in enumerate(shape) if i not in (axis1, axis2))
    return rest + (diagonal_len(shape[axis1], shape[axis2], offset),)


def _diagonal_infer(inputs, attrs):
    (x,), (offset, axis1, axis2) = inputs, attrs
    return diagonal_shape(x.shape, offset, axis1, axis2), x.dtype


# LAYOUT (emitted by eliminate_permutations): the operand's values unchanged, copied so that
# its axes lie in memory in the order ``perm`` (outermost first). Written once where several
# contractions would otherwise each copy the operand into that order.
def _layout_infer(inputs, attrs):
    (x,), (perm,) = inputs, attrs
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(
            f"layout: axes {perm} are not a permutation of the {x.ndim} axes of operand 0 "
            f"of shape {fmt_shape(x.shape)}"
        )
    return x.shape, x.dtype


def _layout_ref(xs, attrs):
    perm = attrs.perm
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    # array methods only, so that device arrays (CuPy) take the same path
    return xs[0].transpose(perm).copy().transpose(inv)


# ---- SLICE_SCATTER: the transpose of SLICE (basic indexing), as reverse mode needs it ---------
# ``slice_scatter(x, spec, shape)`` is an array of ``shape``, zero everywhere except at the basic
# index ``spec`` (one normalized ``(start, stop, step)`` per axis, see ``normalize_slice``), where
# it holds ``x``: ``out = zeros(shape); out[spec] = x``. Steps may be negative and the selection
# empty. The cotangent of ``x[spec]`` is ``slice_scatter(g, spec, x.shape)``: memory of the
# input's size, where a selection matrix per axis would cost n x m.


def _slice_scatter_infer(inputs, attrs):
    (x,), (spec, shape) = inputs, attrs
    if len(spec) != len(shape) or len(shape) != x.ndim:
        raise ShapeError(
            f"slice_scatter: {len(spec)} slices into shape {fmt_shape(shape)} for operand 0 "
            f"of shape {fmt_shape(x.shape)}: one slice per axis of both"
        )
    for ax, ((start, stop, step), n, m) in enumerate(zip(spec, shape, x.shape)):
        length = slice_len(start, stop, step)
        if step == 0 or (length and not (0 <= start < n and -1 <= stop <= n)) or length != m:
            raise ShapeError(
                f"slice_scatter: ({start}, {stop}, {step}) on axis {ax} of size {n} does not "
                f"select the {m} entries of operand 0 of shape {fmt_shape(x.shape)}"
            )
    return tuple(shape), x.dtype


def _slice_scatter_ref(xs, attrs):
    spec, shape = attrs
    x = xs[0]
    # zeros_like dispatches on the array type (NumPy's or a device library's, e.g. CuPy)
    out = np.zeros_like(x, shape=shape)
    out[tuple(as_slice(*s) for s in spec)] = x
    return out


# ---- attribute checks and dump text ----------------------------------------------------------


def _check_shape_attr(ins, at, op):
    at = check_arity(at, ShapeAttrs, op)
    check_shape(at.shape, f"{op.value} shape")


def _check_perm(ins, at, op):
    at = check_arity(at, PermAttrs, op)
    check_ints(at.perm, "permutation")


def _check_spec(spec, shape) -> None:
    for s, n in zip(spec, shape):
        check_ints(s, "slice")
        if len(s) != 3 or s[2] == 0 or as_slice(*s).indices(n) != s:
            raise BadFormat(
                f"slice {s} is not a normalized (start, stop, step) for an axis of size {n}"
            )


def _check_slice(ins, at, op):
    at = check_arity(at, SliceAttrs, op)
    if type(at.spec) is not tuple or len(at.spec) != ins[0].ndim:
        raise BadFormat(
            f"slice needs one (start, stop, step) per axis of its input ({ins[0].ndim})"
        )
    _check_spec(at.spec, ins[0].shape)


def _check_slice_scatter(ins, at, op):
    at = check_arity(at, SliceScatterAttrs, op)
    spec, shape = at
    check_shape(shape, "slice_scatter shape")
    if type(spec) is not tuple or len(spec) != len(shape):
        raise BadFormat(f"slice_scatter needs one (start, stop, step) per axis of {shape}")
    _check_spec(spec, shape)


def _check_concat(ins, at, op):
    at = check_arity(at, ConcatAttrs, op)
    if not ins or not 0 <= check_int(at.axis, "axis") < ins[0].ndim:
        raise BadFormat(
            f"concatenate axis {at.axis!r} out of range for {ins[0].ndim if ins else 0} axes"
        )


def check_diagonal(ins, at, op):
    """The check of DIAGONAL and TRACE attrs."""
    at = check_arity(at, DiagonalAttrs, op)
    check_int(at.offset, "offset")
    a1, a2 = check_ints(at[1:], "axes", 0, ins[0].ndim)
    if a1 == a2:
        raise BadFormat("the two axes must differ")


def spec_text(spec) -> str:
    return ", ".join(f"{a}:{b if b >= 0 else ''}:{c}" for a, b, c in spec)


def diagonal_text(at: DiagonalAttrs) -> str:
    return f"[offset={at.offset}, axes={at.axis1},{at.axis2}]"


def _no_cost(node) -> int:
    return 0


# ---- differentiation -------------------------------------------------------------------------


def _reshape_vjp(node, y, xs, g):
    return (T.reshape(g, xs[0].shape),)


def _transpose_vjp(node, y, xs, g):
    perm = node.attrs.perm
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return (T.transpose(g, inv),)


def _broadcast_vjp(node, y, xs, g):
    return (unbroadcast(g, xs[0].shape),)


def scatter(g: Value, spec: tuple, shape: tuple) -> Value:
    """``g`` written into zeros of ``shape`` at the basic index ``spec`` (SLICE_SCATTER)."""
    if all(s == (0, n, 1) for s, n in zip(spec, shape)):  # every axis whole, in order
        return g
    return Value(make_node(Op.SLICE_SCATTER, (g.node,), (spec, tuple(shape))))


def _slice_vjp(node, y, xs, g):
    """Scatter the cotangent back into zeros of the input's shape (memory of the input's
    size, whatever the steps)."""
    return (scatter(g, node.attrs.spec, xs[0].shape),)


def _slice_scatter_vjp(node, y, xs, g):
    return (Value(make_node(Op.SLICE, (g.node,), (node.attrs.spec,))),)


def _concat_vjp(node, y, xs, g):
    ax = node.attrs.axis
    out, start = [], 0
    for x in xs:
        key = [slice(None)] * g.ndim
        key[ax] = slice(start, start + x.shape[ax])
        out.append(g[tuple(key)])
        start += x.shape[ax]
    return tuple(out)


def _concat_jvp(node, y, xs, ts):
    parts = [(t if t is not None else T.zeros(x.shape, x.dtype)).node for x, t in zip(xs, ts)]
    return Value(make_node(Op.CONCAT, tuple(parts), node.attrs))


def _diagonal_vjp(node, y, xs, g):
    """The diagonal's entry d sits at row d (offset >= 0) or column d (offset < 0): g padded
    with zeros to that axis's length, times the offset identity (memory of the input's size;
    a dense (n1, n2, length) selection tensor was cubic)."""
    (x,) = xs
    offset, a1, a2 = node.attrs
    n1, n2 = x.shape[a1], x.shape[a2]
    along, n = (a1, n1) if offset >= 0 else (a2, n2)
    length = y.shape[-1]
    whole = tuple((0, s, 1) for s in g.shape[:-1])
    spec = whole + (((0, length, 1),) if length else ((0, 0, 1),))
    padded = scatter(g, spec, g.shape[:-1] + (n,))
    nd = x.ndim
    rest = [i for i in range(nd) if i not in (a1, a2)]
    eye = T.eye(n1, n2, offset, dtype=g.dtype)
    return (T.einsum([padded, eye], [rest + [along], [a1, a2]], list(range(nd))),)


# ---- registration ----------------------------------------------------------------------------

register_op(
    Op.RESHAPE,
    OpKind.MOVEMENT,
    _reshape_infer,
    lambda xs, at: xs[0].reshape(at.shape),
    1,
    attrs=ShapeAttrs,
    vjp=_reshape_vjp,
    jvp=linear_jvp,
    check_attrs=_check_shape_attr,
    fmt=lambda at: f"[{at.shape}]",
    cost=_no_cost,
)
register_op(
    Op.TRANSPOSE,
    OpKind.MOVEMENT,
    _transpose_infer,
    lambda xs, at: xs[0].transpose(at.perm),
    1,
    attrs=PermAttrs,
    vjp=_transpose_vjp,
    jvp=linear_jvp,
    check_attrs=_check_perm,
    fmt=lambda at: f"[{list(at.perm)}]",
    cost=_no_cost,
)
register_op(
    Op.BROADCAST,
    OpKind.MOVEMENT,
    _broadcast_infer,
    lambda xs, at: np.broadcast_to(xs[0], at.shape),
    1,
    attrs=ShapeAttrs,
    vjp=_broadcast_vjp,
    jvp=linear_jvp,
    check_attrs=_check_shape_attr,
    fmt=lambda at: f"[{at.shape}]",
    cost=_no_cost,
)
register_op(
    Op.SLICE,
    OpKind.MOVEMENT,
    _slice_infer,
    _slice_ref,
    1,
    attrs=SliceAttrs,
    vjp=_slice_vjp,
    jvp=linear_jvp,
    check_attrs=_check_slice,
    fmt=lambda at: f"[{spec_text(at.spec)}]",
    cost=_no_cost,
)
register_op(
    Op.SLICE_SCATTER,
    OpKind.MOVEMENT,
    _slice_scatter_infer,
    _slice_scatter_ref,
    1,
    attrs=SliceScatterAttrs,
    vjp=_slice_scatter_vjp,
    jvp=linear_jvp,
    check_attrs=_check_slice_scatter,
    fmt=lambda at: f"[into {at.shape} at {spec_text(at.spec)}]",
    cost=_no_cost,
)
register_op(
    Op.CONCAT,
    OpKind.MOVEMENT,
    _concat_infer,
    lambda xs, at: np.concatenate(xs, axis=at.axis),
    None,
    attrs=ConcatAttrs,
    vjp=_concat_vjp,
    jvp=_concat_jvp,
    check_attrs=_check_concat,
    fmt=lambda at: f"[axis={at.axis}]",
    cost=_no_cost,
)
register_op(
    Op.DIAGONAL,
    OpKind.MOVEMENT,
    _diagonal_infer,
    lambda xs, at: np.diagonal(xs[0], at.offset, at.axis1, at.axis2),
    1,
    attrs=DiagonalAttrs,
    vjp=_diagonal_vjp,
    jvp=linear_jvp,
    check_attrs=check_diagonal,
    fmt=diagonal_text,
    cost=_no_cost,
)
register_op(
    Op.LAYOUT,
    OpKind.MOVEMENT,
    _layout_infer,
    _layout_ref,
    1,
    attrs=PermAttrs,
    vjp=lambda node, y, xs, g: (g,),  # values unchanged: so is the cotangent
    jvp=linear_jvp,
    check_attrs=_check_perm,
    cost=_no_cost,
)


# ---- builders ---------------------------------------------------------------------------


@builder
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


@builder
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


@builder
def permute_dims(x, axes) -> Node:
    return transpose(x, axes)


@builder
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


@builder
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


@builder
def expand_dims(x, axis) -> Node:
    n = lift(x, "expand_dims")
    items = _axis_items(axis)
    out_ndim = n.ndim + len(items)
    axes = normalize_axes(items, out_ndim, "expand_dims", n.shape)
    it = iter(n.shape)
    shape = tuple(1 if i in axes else next(it) for i in range(out_ndim))
    return reshape(n, shape)


@builder
def broadcast_to(x, shape) -> Node:
    n = lift(x, "broadcast_to")
    shape = _shape_arg(shape, "broadcast_to")
    if shape == n.shape:
        return n
    return make_node(Op.BROADCAST, (n,), (shape,))


@builder
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


@builder
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


@builder(public=False)
def getitem(x, key) -> Node:
    """Basic indexing: ints, slices (any step), None and Ellipsis."""
    n = lift(x, "getitem")
    if not isinstance(key, tuple):
        key = (key,)
    from tenloom.graph.ops.gather import advanced_getitem, is_advanced  # advanced indexing

    if any(is_advanced(k) for k in key):
        return advanced_getitem(n, key)
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


@builder
def diagonal(x, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Node:
    n = lift(x, "diagonal")
    a1, a2 = _axis_pair(n, axis1, axis2, "diagonal")
    return make_node(Op.DIAGONAL, (n,), (_offset(offset, n, a1, a2, "diagonal"), a1, a2))
