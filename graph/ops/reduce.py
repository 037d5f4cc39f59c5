"""Reductions over axes: sum, prod, max, min.

Differentiation (conventions in graph/autodiff.py): ``sum`` is linear; ``max``/``min`` share
the derivative evenly among tied elements; ``prod`` takes, for each element, the product of the
other elements of its group, exact at zeros.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from tenloom.graph.autodiff import linear_jvp
from tenloom.graph.dtypes import _SUPPORTED_SET
from tenloom.graph.errors import (
    DTypeError,
    ShapeError,
    fmt_shape,
)
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.args import bool_arg, normalize_axes
from tenloom.graph.ops.checks import BadFormat, check_arity, check_ints
from tenloom.graph.ops.elementwise import astype, divide
from tenloom.graph.ops.leaf import asarray, full, lift
from tenloom.graph.ops.registry import Op, OpKind, as_array, builder, register_op
from tenloom.graph.value import V as T
from tenloom.graph.value import Value

# the ops of this family (Op.NEG, ...), defined before anything refers to them
Op.define_all("sum prod max min")

REDUCERS = {Op.SUM: np.sum, Op.PROD: np.prod, Op.MAX: np.max, Op.MIN: np.min}
_DTYPE_CACHE: dict[tuple, np.dtype] = {}


class ReduceAttrs(NamedTuple):
    axes: tuple[int, ...]  # sorted, distinct, non-negative
    keepdims: bool


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


def _check(ins, at, op):
    at = check_arity(at, ReduceAttrs, op)
    axes = check_ints(at.axes, "axes", 0, ins[0].ndim)
    if list(axes) != sorted(set(axes)):
        raise BadFormat(f"axes {axes} must be sorted and distinct")
    if type(at.keepdims) is not bool:
        raise BadFormat("keepdims must be a bool")


def _fmt(at: ReduceAttrs) -> str:
    return f"[axes={list(at.axes)}{', keepdims' if at.keepdims else ''}]"


def _cost(node) -> int:
    """One operation per input element."""
    return node.inputs[0].size


# ---- differentiation -------------------------------------------------------------------------


def cj(x):
    return T.conj(x)


def expand_reduced(g: Value, node) -> Value:
    """``g`` with the reduced axes put back (size 1), ready to broadcast to the input."""
    axes, keepdims = node.attrs
    if keepdims:
        return g
    shape = list(node.inputs[0].shape)
    for a in axes:
        shape[a] = 1
    return T.reshape(g, tuple(shape))


def prod_others(node, x: Value) -> Value:
    """d prod / d x: for each element the product of the other elements of its reduced group
    (the input's shape), exact at zeros as JAX and PyTorch. A pairwise product tree over the
    group (padded with ones to even lengths) and its reverse sweep, which multiplies only: no
    division by x, memory O(x.size) over log2(group size) levels, and a graph that can be
    differentiated again to any order (a ``where`` on the zeros would lose the second
    derivatives through the zeros)."""
    axes = node.attrs.axes
    keep = [a for a in range(x.ndim) if a not in axes]
    lead = tuple(x.shape[a] for a in keep)
    group = tuple(x.shape[a] for a in axes)
    m = math.prod(group)
    if m == 0:
        return T.zeros(x.shape, x.dtype)
    perm = keep + list(axes)
    p = T.reshape(T.transpose(x, perm), lead + (m,))
    levels = []
    while p.shape[-1] > 1:
        n = p.shape[-1]
        if n % 2:
            p = T.concatenate([p, T.ones(lead + (1,), x.dtype)], axis=-1)
        pairs = T.reshape(p, lead + ((n + 1) // 2, 2))
        a, b = pairs[..., 0], pairs[..., 1]
        levels.append((a, b, n))
        p = a * b
    others = T.ones(lead + (1,), x.dtype)  # of the group's product: the empty product
    for a, b, n in reversed(levels):
        both = T.stack([others * b, others * a], axis=-1)
        others = T.reshape(both, lead + (2 * b.shape[-1],))[..., :n]
    inv = [0] * x.ndim
    for i, ax in enumerate(perm):
        inv[ax] = i
    return T.transpose(T.reshape(others, lead + group), inv)


def _sum_vjp(node, y, xs, g):
    return (T.broadcast_to(expand_reduced(g, node), xs[0].shape),)


def _prod_vjp(node, y, xs, g):
    (x,) = xs
    return (expand_reduced(g, node) * cj(prod_others(node, x)),)


def _extreme_vjp(node, y, xs, g):
    (x,) = xs
    yb = expand_reduced(y, node)
    mask = T.astype(x == yb, g.dtype)
    count = T.sum(mask, node.attrs.axes, keepdims=True)
    return (mask * expand_reduced(g, node) / count,)


def _prod_jvp(node, y, xs, ts):
    axes, keepdims = node.attrs
    return T.sum(ts[0] * prod_others(node, xs[0]), axes, keepdims=keepdims)


def _extreme_jvp(node, y, xs, ts):
    (x,), (t,) = xs, ts
    axes, keepdims = node.attrs
    mask = T.astype(x == expand_reduced(y, node), t.dtype)
    count = T.sum(mask, axes, keepdims=keepdims)
    return T.sum(mask * t, axes, keepdims=keepdims) / count


_RULES = {
    Op.SUM: (_sum_vjp, linear_jvp),
    Op.PROD: (_prod_vjp, _prod_jvp),
    Op.MAX: (_extreme_vjp, _extreme_jvp),
    Op.MIN: (_extreme_vjp, _extreme_jvp),
}

for _op, _fn in REDUCERS.items():
    register_op(
        _op,
        OpKind.REDUCE,
        _infer(_op),
        (lambda f: lambda xs, at: as_array(f(xs[0], axis=at.axes, keepdims=at.keepdims)))(_fn),
        1,
        attrs=ReduceAttrs,
        vjp=_RULES[_op][0],
        jvp=_RULES[_op][1],
        cost=_cost,
        check_attrs=_check,
        fmt=_fmt,
    )


# ---- builders ---------------------------------------------------------------------------


def _reduce(op: Op, x, axis, keepdims: bool) -> Node:
    n = lift(x, op.value)
    axes = normalize_axes(axis, n.ndim, op.value, n.shape)
    keepdims = bool_arg(keepdims, op.value, "keepdims")
    if not axes and op in (Op.MAX, Op.MIN):
        return n
    return make_node(op, (n,), (axes, keepdims))


@builder
def sum_(x, axis=None, keepdims: bool = False) -> Node:  # noqa: A001
    return _reduce(Op.SUM, x, axis, keepdims)


@builder
def prod(x, axis=None, keepdims: bool = False) -> Node:
    return _reduce(Op.PROD, x, axis, keepdims)


@builder
def max_(x, axis=None, keepdims: bool = False) -> Node:  # noqa: A001
    return _reduce(Op.MAX, x, axis, keepdims)


@builder
def min_(x, axis=None, keepdims: bool = False) -> Node:  # noqa: A001
    return _reduce(Op.MIN, x, axis, keepdims)


builder(max_, "amax")
builder(min_, "amin")


@builder
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
    s = sum_(t, axes, keepdims=keepdims)
    out = divide(s, count) if count else divide(s, full((), 0, s.dtype))
    return astype(out, kind) if kind == np.float16 else out
