"""Reductions over axes: sum, prod, max, min. attrs = (axes: sorted tuple, keepdims: bool)."""

from __future__ import annotations

import numpy as np
from tenloom.graph.dtypes import _SUPPORTED_SET
from tenloom.graph.errors import DTypeError, ShapeError, fmt_shape
from tenloom.graph.ops.registry import Op, OpKind, as_array, register_op

REDUCERS = {Op.SUM: np.sum, Op.PROD: np.prod, Op.MAX: np.max, Op.MIN: np.min}
_DTYPE_CACHE: dict[tuple, np.dtype] = {}


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keepdims: bool):
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _infer(op: Op):
    fn = REDUCERS[op]

    def infer(inputs, attrs):
        (x,) = inputs
        axes, keepdims = attrs
        if op in (Op.MAX, Op.MIN) and any(x.shape[a] == 0 for a in axes):
            raise ShapeError(
                f"{op.value}: operand 0 of shape {fmt_shape(x.shape)} has a zero-size axis among "
                f"the reduced axes {axes}, and {op.value} has no identity"
            )
        key = (op, x.dtype)
        dt = _DTYPE_CACHE.get(key)
        if dt is None:
            try:
                dt = fn(np.ones(1, x.dtype)).dtype
            except TypeError as e:
                raise DTypeError(f"{op.value}: not defined for dtype {x.dtype} ({e})") from None
            if dt not in _SUPPORTED_SET:
                raise DTypeError(f"{op.value}: result dtype {dt} is not supported")
            _DTYPE_CACHE[key] = dt
        return reduced_shape(x.shape, axes, keepdims), dt

    return infer


for _op, _fn in REDUCERS.items():
    register_op(
        _op,
        OpKind.REDUCE,
        _infer(_op),
        (lambda f: lambda xs, at: as_array(f(xs[0], axis=at[0], keepdims=at[1])))(_fn),
        1,
    )
