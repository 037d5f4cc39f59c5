"""Neural-network building blocks: ``relu``, ``sigmoid``, ``softmax``, ``log_softmax``,
``logsumexp`` and ``one_hot``, as JAX (``jax.nn``) and ``scipy.special`` define them.

Every one is a composite of the ops of the other families, so it fuses, differentiates (both
modes, to any order) and runs on every backend with no rule of its own; this module defines
no op. The composites are chosen for their derivative graphs:

- the max shift of ``softmax``, ``log_softmax`` and ``logsumexp`` (which keeps ``exp`` from
  overflowing) carries no derivative, as JAX's ``stop_gradient(max)``: it goes through
  ``floor_divide`` (whose derivative is zero), so the shift is the floor of the max (any
  shift near the max is as stable) and neither sweep differentiates the max (no tie masks or
  counts in a backward graph, where the mathematical contributions cancel anyway);
- ``relu`` of a floating ``x`` is ``x * (x > 0)`` (-inf sent to 0 first, ``+ 0.0`` for the
  sign of zero): the value is ``maximum(x, 0)``'s with NaN propagating, the derivative
  ``g * (x > 0)`` is a multiply by the mask (0 at 0, JAX's and PyTorch's choice), which on the
  CPU costs a tenth of the select (``np.where``) that ``maximum``'s derivative is when the
  mask is unpredictable; integer inputs are ``maximum(0, x)``;
- ``sigmoid`` of a real ``x`` is ``1 / (1 + e)`` for ``x >= 0`` and ``e / (1 + e)`` below,
  with ``e = exp(-|x|)`` (``scipy.special.expit``'s accuracy, no overflow, and no inf in
  either branch of the ``where``, so no NaN in its derivative); ``-|x|`` is written
  ``minimum(-x, x)``, whose tie rule gives the derivative at 0 the right sign.

Dtypes: floating inputs keep their dtype; integers and booleans are computed in float64 (as
``mean``). ``softmax``, ``log_softmax`` and ``logsumexp`` take real inputs only (a complex
input is a DTypeError): their complex versions disagree between libraries on the branch of
the logarithm. ``sigmoid`` of a complex input is ``1 / (1 + exp(-x))`` (JAX's); ``relu`` of a
complex input is a DTypeError (no order).

Special values follow ``scipy.special`` (1.17): ``logsumexp`` of a row of -inf is -inf, of a
row holding +inf is inf, of a row holding NaN is NaN, of an empty reduction -inf;
``log_softmax`` is ``x - logsumexp(x)`` there (``[inf, 1] -> [nan, -inf]``, a row of -inf is
NaN); ``softmax`` of a row whose max is not finite (a row of -inf, a row holding +inf or NaN)
is NaN throughout, as scipy's and JAX's ``exp(x - max) / sum``.

``one_hot(indices, num_classes)`` is ``indices[..., None] == arange(num_classes)`` cast to
``dtype``, JAX's definition: the indices are lazy, so an index out of ``[0, num_classes)``
(negative ones included) cannot be checked when the graph is built and gives a row of zeros,
as in JAX (NumPy's ``eye(n)[indices]`` would raise, or wrap negative indices).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tenloom.graph.dtypes import normalize_dtype
from tenloom.graph.errors import DTypeError, OptionError, OptionTypeError, fmt_shape
from tenloom.graph.node import Node
from tenloom.graph.ops.args import bool_arg, int_arg, normalize_axes
from tenloom.graph.ops.leaf import full, lift
from tenloom.graph.ops.registry import builder
from tenloom.graph.value import V as T
from tenloom.graph.value import Value


def _floating(n: Node, op: str, complex_ok: bool) -> Value:
    """``n`` as a floating Value: integers and booleans as float64; a complex operand is a
    DTypeError unless ``complex_ok``."""
    kind = n.dtype.kind
    if kind == "c" and not complex_ok:
        raise DTypeError(
            f"{op}: operand 0 of shape {fmt_shape(n.shape)} is {n.dtype}; {op} takes real "
            "inputs (integer, boolean or floating point)"
        )
    if kind in "biu":
        return T.astype(Value(n), "float64")
    if kind not in "fc":
        raise DTypeError(f"{op}: operand 0 of dtype {n.dtype} is not numeric")
    return Value(n)


def _shift(x: Value, axes: tuple[int, ...], finite_only: bool) -> Value:
    """The max of ``x`` over ``axes`` (kept as size-1 axes), floored and without derivative:
    ``floor_divide`` stops both sweeps, as JAX's ``stop_gradient``. A max that is not finite
    becomes 0 (``finite_only``: scipy's logsumexp and log_softmax) or NaN (softmax)."""
    m = T.max(x, axes, keepdims=True)
    finite = T.abs(m) < np.inf
    other = 0.0 if finite_only else np.nan
    return T.floor_divide(T.where(finite, m, other), 1.0)


def _empty_axis(x: Value, axes: tuple[int, ...]) -> bool:
    return any(x.shape[a] == 0 for a in axes)


@builder
def relu(x) -> Node:
    """``maximum(x, 0)`` elementwise (derivative 0 at 0, as JAX and PyTorch); NaN passes
    through. Integer inputs keep their dtype; complex inputs are a DTypeError."""
    n = lift(x, "relu")
    if n.dtype.kind == "c":
        raise DTypeError(
            f"relu: operand 0 of shape {fmt_shape(n.shape)} is {n.dtype}; relu needs an "
            "ordered (real) dtype"
        )
    v = Value(n)
    if n.dtype.kind not in "fc":  # integers and booleans: no infinities, no signed zeros
        return T.maximum(0, v).node
    # x * (x > 0): the derivative is g times the mask, a branch-free multiply, where
    # maximum's derivative is a select (np.where), which costs 10-20x more on unpredictable
    # masks; -inf (whose product with 0 is NaN) is first sent to 0 by a select that is
    # almost always false (predictable, cheap), and + 0.0 turns the -0.0 of negative x * 0
    # into +0.0
    # (the mask stays boolean: a float mask would be given a cotangent, a wasted product)
    return (T.where(v == -np.inf, 0.0, v) * (v > 0) + 0.0).node


@builder
def sigmoid(x) -> Node:
    """The logistic function ``1 / (1 + exp(-x))`` (``scipy.special.expit``), computed without
    overflow for real inputs; integers and booleans in float64."""
    n = lift(x, "sigmoid")
    v = _floating(n, "sigmoid", complex_ok=True)
    if v.dtype.kind == "c":
        return (1.0 / (1.0 + T.exp(-v))).node
    e = T.exp(T.minimum(-v, v))  # exp(-|x|) in (0, 1]; minimum's tie rule: d/dx = -1 at 0
    return T.where(v >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).node


@builder
def logsumexp(x, axis=None, keepdims: bool = False) -> Node:
    """``log(sum(exp(x), axis))`` computed stably, as ``scipy.special.logsumexp`` (without
    ``b`` and ``return_sign``): shifted by the max, -inf for all--inf or empty reductions."""
    n = lift(x, "logsumexp")
    axes = normalize_axes(axis, n.ndim, "logsumexp", n.shape)
    keepdims = bool_arg(keepdims, "logsumexp", "keepdims")
    v = _floating(n, "logsumexp", complex_ok=False)
    shape = tuple((1 if keepdims else None) if i in axes else s for i, s in enumerate(v.shape))
    shape = tuple(s for s in shape if s is not None)
    if _empty_axis(v, axes):
        return full(shape, -np.inf, v.dtype)
    if not axes:  # a sum over nothing: log(exp(x)) is x (inf and NaN included)
        return v.node
    s = _shift(v, axes, finite_only=True)
    out = T.log(T.sum(T.exp(v - s), axes, keepdims=True)) + s
    return out.node if keepdims else T.reshape(out, shape).node


@builder
def softmax(x, axis=-1) -> Node:
    """``exp(x) / sum(exp(x), axis)`` with the max shifted out (``jax.nn.softmax``; ``axis``
    an int, a tuple or None for all axes; scipy's default is None, JAX's and this one's -1)."""
    n = lift(x, "softmax")
    axes = normalize_axes(axis, n.ndim, "softmax", n.shape)
    v = _floating(n, "softmax", complex_ok=False)
    if _empty_axis(v, axes):
        return T.zeros(v.shape, v.dtype).node
    if not axes:
        return (T.exp(v - v)).node  # one element per group: 1, NaN where x is not finite
    e = T.exp(v - _shift(v, axes, finite_only=False))
    return (e / T.sum(e, axes, keepdims=True)).node


@builder
def log_softmax(x, axis=-1) -> Node:
    """``x - logsumexp(x, axis, keepdims=True)``, computed as ``scipy.special.log_softmax``
    (``(x - shift) - log(sum(exp(x - shift)))``); its derivative is ``g - softmax * sum(g)``."""
    n = lift(x, "log_softmax")
    axes = normalize_axes(axis, n.ndim, "log_softmax", n.shape)
    v = _floating(n, "log_softmax", complex_ok=False)
    if _empty_axis(v, axes):
        return T.zeros(v.shape, v.dtype).node
    if not axes:
        return (v - v).node
    tmp = v - _shift(v, axes, finite_only=True)
    return (tmp - T.log(T.sum(T.exp(tmp), axes, keepdims=True))).node


@builder
def one_hot(indices, num_classes, dtype: Any = "float32") -> Node:
    """``indices[..., None] == arange(num_classes)`` as ``dtype`` (``jax.nn.one_hot``): one new
    last axis; an index outside ``[0, num_classes)`` gives a row of zeros (it cannot be checked
    on a lazy tensor). ``indices`` must be integers; ``num_classes`` a non-negative int."""
    n = lift(indices, "one_hot")
    if n.dtype.kind not in "iu":
        raise DTypeError(
            f"one_hot: indices of shape {fmt_shape(n.shape)} have dtype {n.dtype}; give "
            "integers (x.astype('int64'))"
        )
    if isinstance(num_classes, (Value, Node, np.ndarray)):
        raise OptionTypeError(
            "one_hot: num_classes must be a Python int (the result's shape depends on it), "
            f"not a {type(num_classes).__name__}"
        )
    k = int_arg(num_classes, "one_hot", "num_classes")
    if k < 0:
        raise OptionError(f"one_hot: num_classes={k} is negative")
    dt = normalize_dtype(dtype, "one_hot")
    fits = k <= int(np.iinfo(n.dtype).max) + 1  # else the classes in int64 (NumPy compares)
    classes = T.asarray(np.arange(k, dtype=n.dtype if fits else np.int64))
    hit = T.reshape(Value(n), n.shape + (1,)) == classes
    return T.astype(hit, dt).node
