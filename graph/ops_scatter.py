"""SLICE_SCATTER: the transpose of SLICE (basic indexing), as reverse mode needs it.

``slice_scatter(x, spec, shape)`` is an array of ``shape``, zero everywhere except at the basic
index ``spec`` (one normalized ``(start, stop, step)`` per axis, see ``ops_movement``), where
it holds ``x``: ``out = zeros(shape); out[spec] = x``. Steps may be negative and the selection
empty. The cotangent of ``x[spec]`` is ``slice_scatter(g, spec, x.shape)``: memory of the
input's size, where a selection matrix per axis would cost n x m.
"""

from __future__ import annotations

import numpy as np
from tenloom.graph.errors import ShapeError, fmt_shape
from tenloom.graph.ops import Op, OpKind, register_op
from tenloom.graph.ops_movement import as_slice, slice_len


def _infer(inputs, attrs):
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


def _ref(xs, attrs):
    spec, shape = attrs
    x = xs[0]
    # zeros_like dispatches on the array type (NumPy's or a device library's, e.g. CuPy)
    out = np.zeros_like(x, shape=shape)
    out[tuple(as_slice(*s) for s in spec)] = x
    return out


register_op(Op.SLICE_SCATTER, OpKind.MOVEMENT, _infer, _ref, 1)
