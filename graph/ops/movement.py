"""Movement ops: reshape, transpose, broadcast_to, slice (basic indexing), concatenate, diagonal.

Attributes are normalized by the front end (non-negative axes, full permutations, explicit
shapes), so identical movements hash-cons to one node.
"""

from __future__ import annotations

import math

import numpy as np
from tenloom.graph.errors import ShapeError, fmt_shape
from tenloom.graph.ops.registry import Op, OpKind, register_op


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
    return xs[0][tuple(as_slice(*s) for s in attrs[0])]


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


register_op(Op.RESHAPE, OpKind.MOVEMENT, _reshape_infer, lambda xs, at: xs[0].reshape(at[0]), 1)
register_op(
    Op.TRANSPOSE, OpKind.MOVEMENT, _transpose_infer, lambda xs, at: xs[0].transpose(at[0]), 1
)
register_op(
    Op.BROADCAST, OpKind.MOVEMENT, _broadcast_infer, lambda xs, at: np.broadcast_to(xs[0], at[0]), 1
)
register_op(Op.SLICE, OpKind.MOVEMENT, _slice_infer, _slice_ref, 1)


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
    perm = attrs[0]
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    # array methods only, so that device arrays (CuPy) take the same path
    return xs[0].transpose(perm).copy().transpose(inv)


register_op(Op.LAYOUT, OpKind.MOVEMENT, _layout_infer, _layout_ref, 1)
register_op(
    Op.CONCAT,
    OpKind.MOVEMENT,
    _concat_infer,
    lambda xs, at: np.concatenate(xs, axis=at[0]),
    None,
)
register_op(
    Op.DIAGONAL,
    OpKind.MOVEMENT,
    _diagonal_infer,
    lambda xs, at: np.diagonal(xs[0], at[0], at[1], at[2]),
    1,
)


# ---- SLICE_SCATTER: the transpose of SLICE --------------------------------------------------
# SLICE_SCATTER: the transpose of SLICE (basic indexing), as reverse mode needs it.
#
# ``slice_scatter(x, spec, shape)`` is an array of ``shape``, zero everywhere except at the basic
# index ``spec`` (one normalized ``(start, stop, step)`` per axis, see ``ops_movement``), where
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


register_op(Op.SLICE_SCATTER, OpKind.MOVEMENT, _slice_scatter_infer, _slice_scatter_ref, 1)
