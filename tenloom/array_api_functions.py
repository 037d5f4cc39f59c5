"""The array API standard's manipulation, indexing, searching, sorting, set, statistical and
utility functions (2024.12) for ``tenloom.array_api``, on tenloom's public ops.

Lazy composites where tenloom has no builder: ``argmax``/``argmin`` (the first index where
the maximum is), ``sort``/``argsort`` (a stable rank from pairwise comparisons, NaN last),
``take``/``take_along_axis`` (a sum over the indexed axis masked by index equality),
``searchsorted`` (a count of the sorted values below each), ``cumulative_sum``/``_prod`` (a
triangular mask), ``roll``/``flip``/``tile``/``repeat`` (slices, concatenation and
broadcasting). The mask composites cost the square of the axis length in memory.

Data-dependent shapes (``nonzero``, ``unique_*``, ``repeat`` by a Tensor of repeats) evaluate
their operand through tenloom/concrete.py: on concrete inputs the shape is read from the
values, in a traced function ``DataDependentShapeError`` is raised.
"""

from __future__ import annotations

import builtins
from collections import namedtuple
from typing import Any

import numpy as np

from tenloom import api as tl
from tenloom.array_api_elementwise import isnan
from tenloom.concrete import concrete
from tenloom.graph.errors import DTypeError, IndexOutOfBoundsError, ShapeError, fmt_shape
from tenloom.tensor import Tensor

UniqueAllResult = namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])
UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])

_NO_BOUND = (
    "the result's shape is read from the values, which a traced function's inputs do not have: "
    "call it on concrete Tensors, outside the traced function"
)


def _t(x: Any) -> Tensor:
    return x if isinstance(x, Tensor) else tl.asarray(x)


def _axis(axis: int, ndim: int, op: str) -> int:
    if not -ndim <= axis < builtins.max(ndim, 1):
        raise IndexOutOfBoundsError(f"{op}: axis {axis} is out of range for {ndim} dimensions")
    return axis % ndim if ndim else 0


def _axes(axis: Any, ndim: int, op: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(_axis(int(a), ndim, op) for a in axes)


def _truth(x: Tensor) -> Tensor:
    return x if x.dtype.kind == "b" else tl.not_equal(x, 0)


def _index(n: int) -> Tensor:
    return tl.asarray(np.arange(n, dtype=np.int64))


def _onto_last(x: Tensor, axis: int) -> Tensor:
    return tl.moveaxis(x, axis, -1) if x.ndim else x


def _masked_sum(mask: Tensor, values: Tensor, dtype: np.dtype) -> Tensor:
    """``sum(where(mask, values, 0), -1)`` in ``dtype`` (bool values stay bool). Floating
    values are filled with -0.0, the identity of addition to the bit: a +0.0 fill turned the
    one -0.0 a mask picks into +0.0."""
    kind = values.dtype.kind
    fill = complex(-0.0, -0.0) if kind == "c" else -0.0 if kind == "f" else 0
    zero = tl.asarray(np.array(fill, values.dtype))
    out = tl.sum(tl.where(mask, values, zero), -1)
    return tl.astype(out, dtype) if out.dtype != dtype else out


# ---- manipulation -----------------------------------------------------------------------------
def broadcast_arrays(*arrays: Any) -> list[Tensor]:
    arrays = [_t(a) for a in arrays]
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError as err:
        shapes = ", ".join(fmt_shape(a.shape) for a in arrays)
        raise ShapeError(f"broadcast_arrays: shapes {shapes} do not broadcast") from err
    return [a if a.shape == shape else tl.broadcast_to(a, shape) for a in arrays]


def broadcast_to(x: Any, /, shape: Any) -> Tensor:
    return tl.broadcast_to(_t(x), tuple(shape))


def concat(arrays: Any, /, *, axis: int | None = 0) -> Tensor:
    return tl.concatenate([_t(a) for a in arrays], axis)


def expand_dims(x: Any, /, axis: int = 0) -> Tensor:
    x = _t(x)
    if not -x.ndim - 1 <= axis <= x.ndim:
        raise IndexOutOfBoundsError(
            f"expand_dims: axis {axis} is out of range for an operand of shape "
            f"{fmt_shape(x.shape)} (from {-x.ndim - 1} to {x.ndim})"
        )
    return tl.expand_dims(x, axis)


def flip(x: Any, /, *, axis: Any = None) -> Tensor:
    x = _t(x)
    axes = _axes(axis, x.ndim, "flip")
    return x[tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(x.ndim))]


def moveaxis(x: Any, source: Any, destination: Any, /) -> Tensor:
    return tl.moveaxis(_t(x), source, destination)


def permute_dims(x: Any, /, axes: Any) -> Tensor:
    return tl.permute_dims(_t(x), tuple(axes))


def reshape(x: Any, /, shape: Any, *, copy: builtins.bool | None = None) -> Tensor:
    return tl.reshape(_t(x), tuple(shape))


def squeeze(x: Any, /, axis: Any) -> Tensor:
    return tl.squeeze(_t(x), axis)


def stack(arrays: Any, /, *, axis: int = 0) -> Tensor:
    return tl.stack([_t(a) for a in arrays], axis)


def unstack(x: Any, /, *, axis: int = 0) -> tuple[Tensor, ...]:
    x = _t(x)
    if x.ndim == 0:
        raise ShapeError("unstack: a 0-d operand has no axis to unstack")
    ax = _axis(axis, x.ndim, "unstack")
    return tuple(x[(slice(None),) * ax + (i,)] for i in range(x.shape[ax]))


def roll(x: Any, /, shift: Any, *, axis: Any = None) -> Tensor:
    x = _t(x)
    if axis is None:
        return tl.reshape(roll(tl.reshape(x, (-1,)), shift, axis=0), x.shape)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    shifts = (shift,) * len(axes) if isinstance(shift, (int, np.integer)) else tuple(shift)
    if len(shifts) != len(axes):
        raise ShapeError(f"roll: {len(shifts)} shifts for {len(axes)} axes")
    for a, s in zip(axes, shifts):
        a = _axis(int(a), x.ndim, "roll")
        n = x.shape[a]
        k = int(s) % n if n else 0
        if k:
            pre = (slice(None),) * a
            x = tl.concatenate([x[pre + (slice(n - k, None),)], x[pre + (slice(0, n - k),)]], a)
    return x


def tile(x: Any, repetitions: Any, /) -> Tensor:
    x = _t(x)
    reps = tuple(int(r) for r in repetitions)
    nd = builtins.max(len(reps), x.ndim)
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - x.ndim) + x.shape
    inter = tuple(v for d in shape for v in (1, d))
    target = tuple(v for r, d in zip(reps, shape) for v in (r, d))
    out = tl.broadcast_to(tl.reshape(x, inter), target)
    return tl.reshape(out, tuple(r * d for r, d in zip(reps, shape)))


def repeat(x: Any, repeats: Any, /, *, axis: int | None = None) -> Tensor:
    """Each element ``repeats`` times along ``axis`` (the flattened array for None). An int
    repeats by broadcasting; a Tensor of repeats fixes the length from its values
    (tenloom/concrete.py)."""
    x = _t(x)
    if axis is None:
        x, axis = tl.reshape(x, (-1,)), 0
    ax = _axis(axis, x.ndim, "repeat")
    if isinstance(repeats, (int, np.integer)):
        r = int(repeats)
        shape = x.shape[: ax + 1] + (1,) + x.shape[ax + 1 :]
        wide = x.shape[: ax + 1] + (r,) + x.shape[ax + 1 :]
        out = tl.broadcast_to(tl.reshape(x, shape), wide)
        return tl.reshape(out, x.shape[:ax] + (x.shape[ax] * r,) + x.shape[ax + 1 :])
    if isinstance(repeats, Tensor):
        reps = concrete(repeats, "repeat", _NO_BOUND + " (or pass an int)")
    else:
        reps = np.asarray(repeats)
    idx = np.repeat(np.arange(x.shape[ax]), np.broadcast_to(reps, (x.shape[ax],)))
    return take(x, tl.asarray(idx.astype(np.int64)), axis=ax)


# ---- indexing ---------------------------------------------------------------------------------
def _check_indices(indices: Tensor, op: str) -> None:
    if indices.dtype.kind not in "iu":
        raise DTypeError(f"{op}: indices of dtype {indices.dtype}; an integer dtype is needed")


def take(x: Any, indices: Any, /, *, axis: int | None = None) -> Tensor:
    x, indices = _t(x), _t(indices)
    if axis is None:
        if x.ndim != 1:
            raise ShapeError(f"take: axis=None needs a 1-d operand, not {fmt_shape(x.shape)}")
        axis = 0
    ax = _axis(axis, x.ndim, "take")
    _check_indices(indices, "take")
    # a gather (graph/ops/gather.py): an index out of range raises IndexError as NumPy's take
    # does, and values come out as they are (a one-hot masked sum gave 0 for the first and
    # +0.0 for -0.0)
    return x[(slice(None),) * ax + (indices,)]


def take_along_axis(x: Any, indices: Any, /, *, axis: int = -1) -> Tensor:
    x, indices = _t(x), _t(indices)
    if x.ndim != indices.ndim or x.ndim == 0:
        raise ShapeError(
            f"take_along_axis: operand {fmt_shape(x.shape)} and indices "
            f"{fmt_shape(indices.shape)} need the same number (>= 1) of dimensions"
        )
    ax = _axis(axis, x.ndim, "take_along_axis")
    _check_indices(indices, "take_along_axis")
    # every other axis indexed by its own positions, broadcast against the indices
    key = []
    for d in range(x.ndim):
        if d == ax:
            key.append(indices)
        else:
            shape = [1] * x.ndim
            shape[d] = x.shape[d]
            key.append(np.arange(x.shape[d], dtype=np.int64).reshape(shape))
    return x[tuple(key)]


# ---- searching --------------------------------------------------------------------------------
def _arg_extreme(x: Any, axis: Any, keepdims: builtins.bool, op: str) -> Tensor:
    x = _t(x)
    if x.dtype.kind in "bc":
        raise DTypeError(f"{op}: the operand's dtype {x.dtype} is not a real numeric dtype")
    if axis is None:
        flat = tl.reshape(x, (-1,))
        out = _arg_extreme(flat, 0, False, op)
        return tl.reshape(out, (1,) * x.ndim) if keepdims else out
    ax = _axis(axis, x.ndim, op)
    if x.shape[ax] == 0:
        raise ShapeError(f"{op}: axis {axis} of {fmt_shape(x.shape)} is empty")
    xm = _onto_last(x, ax)
    n = xm.shape[-1]
    m = (tl.max if op == "argmax" else tl.min)(xm, -1, keepdims=True)
    hit = tl.where(isnan(m), isnan(xm), tl.equal(xm, m)) if x.dtype.kind == "f" else tl.equal(xm, m)
    out = tl.min(tl.where(hit, _index(n), n), -1)
    return tl.expand_dims(out, ax) if keepdims else out


def argmax(x: Any, /, *, axis: int | None = None, keepdims: builtins.bool = False) -> Tensor:
    return _arg_extreme(x, axis, keepdims, "argmax")


def argmin(x: Any, /, *, axis: int | None = None, keepdims: builtins.bool = False) -> Tensor:
    return _arg_extreme(x, axis, keepdims, "argmin")


def count_nonzero(x: Any, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Tensor:
    x = _t(x)
    return tl.sum(
        tl.astype(_truth(x), np.int64), _axes(axis, x.ndim, "count_nonzero"), keepdims=keepdims
    )


def where(condition: Any, x1: Any, x2: Any, /) -> Tensor:
    return tl.where(condition, x1, x2)


def nonzero(x: Any, /) -> tuple[Tensor, ...]:
    """The indices of the nonzero elements: data-dependent, evaluated (tenloom/concrete.py)."""
    x = _t(x)
    if x.ndim == 0:
        raise ShapeError("nonzero: a 0-d operand has no indices")
    v = concrete(x, "nonzero", _NO_BOUND)
    return tuple(tl.asarray(i.astype(np.int64)) for i in np.nonzero(v))


def _before(a: Tensor, b: Tensor) -> Tensor:
    """``a`` sorts strictly before ``b`` in ascending order, NaN last."""
    lt = tl.less(a, b)
    if a.dtype.kind == "f":
        lt = tl.bitwise_or(lt, tl.bitwise_and(tl.invert(isnan(a)), isnan(b)))
    return lt


def _same(a: Tensor, b: Tensor) -> Tensor:
    eq = tl.equal(a, b)
    if a.dtype.kind == "f":
        eq = tl.bitwise_or(eq, tl.bitwise_and(isnan(a), isnan(b)))
    return eq


def searchsorted(x1: Any, x2: Any, /, *, side: str = "left", sorter: Any = None) -> Tensor:
    x1, x2 = _t(x1), _t(x2)
    if x1.ndim != 1:
        raise ShapeError(f"searchsorted: x1 of shape {fmt_shape(x1.shape)} must be 1-d")
    if side not in ("left", "right"):
        from tenloom.graph.errors import OptionError

        raise OptionError(f"searchsorted: side={side!r}; 'left' or 'right'")
    if sorter is not None:
        x1 = take(x1, sorter)
    dt = np.result_type(x1.dtype, x2.dtype)
    a, v = tl.astype(x1, dt), tl.expand_dims(tl.astype(x2, dt), -1)
    below = _before(a, v) if side == "left" else tl.invert(_before(v, a))
    return tl.sum(tl.astype(below, np.int64), -1)


# ---- sorting ----------------------------------------------------------------------------------
def _rank(x: Tensor, descending: builtins.bool) -> Tensor:
    """The stable position of each element along the last axis (int64)."""
    n = x.shape[-1]
    a, b = tl.expand_dims(x, -2), tl.expand_dims(x, -1)  # a[..., i, j] = x_j, b = x_i
    first = _before(b, a) if descending else _before(a, b)  # x_j goes before x_i
    earlier = tl.asarray(np.tri(n, n, -1, dtype=np.bool_))  # [i, j]: j < i
    ties = tl.bitwise_and(_same(a, b), earlier)
    return tl.sum(tl.astype(tl.bitwise_or(first, ties), np.int64), -1)


def _sorted_by_rank(x: Tensor, axis: int, descending: builtins.bool, values: Tensor | None):
    ax = _axis(axis, x.ndim, "sort")
    xm = _onto_last(x, ax)
    n = xm.shape[-1]
    rank = _rank(xm, descending)
    hit = tl.equal(tl.expand_dims(rank, -2), tl.reshape(_index(n), (n, 1)))  # [k, i]
    src = tl.expand_dims(xm if values is None else _onto_last(values, ax), -2)
    dt = x.dtype if values is None else values.dtype
    return tl.moveaxis(_masked_sum(hit, src, dt), -1, ax)


def sort(
    x: Any, /, *, axis: int = -1, descending: builtins.bool = False, stable: builtins.bool = True
) -> Tensor:
    x = _t(x)
    if x.ndim == 0:
        raise ShapeError("sort: a 0-d operand has no axis to sort")
    if x.dtype.kind == "c":
        raise DTypeError(f"sort: complex dtype {x.dtype} has no order")
    # the values gathered at their sorted positions, as they are (a masked sum turned -0.0
    # into +0.0)
    order = argsort(x, axis=axis, descending=descending, stable=stable)
    return take_along_axis(x, order, axis=axis)


def argsort(
    x: Any, /, *, axis: int = -1, descending: builtins.bool = False, stable: builtins.bool = True
) -> Tensor:
    x = _t(x)
    if x.ndim == 0:
        raise ShapeError("argsort: a 0-d operand has no axis to sort")
    if x.dtype.kind == "c":
        raise DTypeError(f"argsort: complex dtype {x.dtype} has no order")
    ax = _axis(axis, x.ndim, "argsort")
    shape = [1] * x.ndim
    shape[ax] = x.shape[ax]
    idx = tl.broadcast_to(tl.reshape(_index(x.shape[ax]), tuple(shape)), x.shape)
    return _sorted_by_rank(x, ax, descending, idx)


# ---- sets (data-dependent shapes) -------------------------------------------------------------
def _unique_input(x: Any, op: str) -> np.ndarray:
    return np.asarray(concrete(_t(x), op, _NO_BOUND))


def _wrap(*arrays: np.ndarray) -> list[Tensor]:
    return [
        tl.asarray(a.astype(np.int64) if a.dtype.kind in "iu" and a is not arrays[0] else a)
        for a in arrays
    ]


def unique_values(x: Any, /) -> Tensor:
    return tl.asarray(np.unique_values(_unique_input(x, "unique_values")))


def unique_counts(x: Any, /) -> UniqueCountsResult:
    r = np.unique_counts(_unique_input(x, "unique_counts"))
    return UniqueCountsResult(*_wrap(r.values, r.counts))


def unique_inverse(x: Any, /) -> UniqueInverseResult:
    r = np.unique_inverse(_unique_input(x, "unique_inverse"))
    return UniqueInverseResult(*_wrap(r.values, r.inverse_indices))


def unique_all(x: Any, /) -> UniqueAllResult:
    r = np.unique_all(_unique_input(x, "unique_all"))
    return UniqueAllResult(*_wrap(r.values, r.indices, r.inverse_indices, r.counts))


# ---- statistics -------------------------------------------------------------------------------
def _reduce(name: str, x: Any, axis: Any, keepdims: builtins.bool, dtype: Any = None) -> Tensor:
    x = _t(x)
    if dtype is not None:
        x = tl.astype(x, dtype)
    out = getattr(tl, name)(x, _axes(axis, x.ndim, name), keepdims=keepdims)
    return tl.astype(out, dtype) if dtype is not None and out.dtype != np.dtype(dtype) else out


def max(x: Any, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Tensor:  # noqa: A001
    return _reduce("max", x, axis, keepdims)


def min(x: Any, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Tensor:  # noqa: A001
    return _reduce("min", x, axis, keepdims)


def sum(
    x: Any, /, *, axis: Any = None, dtype: Any = None, keepdims: builtins.bool = False
) -> Tensor:  # noqa: A001
    return _reduce("sum", x, axis, keepdims, dtype)


def prod(
    x: Any, /, *, axis: Any = None, dtype: Any = None, keepdims: builtins.bool = False
) -> Tensor:
    return _reduce("prod", x, axis, keepdims, dtype)


def mean(x: Any, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Tensor:
    return _reduce("mean", x, axis, keepdims)


def var(
    x: Any, /, *, axis: Any = None, correction: float = 0.0, keepdims: builtins.bool = False
) -> Tensor:
    x = _t(x)
    axes = _axes(axis, x.ndim, "var")
    n = int(np.prod([x.shape[a] for a in axes]))
    d = tl.subtract(x, tl.mean(x, axes, keepdims=True))
    sq = tl.real(tl.multiply(tl.conj(d), d)) if x.dtype.kind == "c" else tl.multiply(d, d)
    return tl.divide(tl.sum(sq, axes, keepdims=keepdims), builtins.max(n - correction, 0))


def std(
    x: Any, /, *, axis: Any = None, correction: float = 0.0, keepdims: builtins.bool = False
) -> Tensor:
    return tl.sqrt(var(x, axis=axis, correction=correction, keepdims=keepdims))


def _cumulative(name: str, x: Any, axis: Any, dtype: Any, include_initial: builtins.bool) -> Tensor:
    op = f"cumulative_{name}"
    x = _t(x)
    if axis is None:
        if x.ndim > 1:
            raise ShapeError(
                f"{op}: axis=None needs a 0-d or 1-d operand, not {fmt_shape(x.shape)}"
            )
        axis = 0
    if x.ndim == 0:
        x = tl.reshape(x, (1,))
    ax = _axis(axis, x.ndim, op)
    out_dt = (
        np.dtype(dtype) if dtype is not None else getattr(tl, name)(tl.zeros((1,), x.dtype)).dtype
    )
    out = tl.astype(_onto_last(x, ax), out_dt)
    # a scan in log2(n) steps (Hillis and Steele): out[i] op= out[i - k] for i >= k, k = 1, 2,
    # 4, ... The elements before k are kept by a where, never combined with an identity: a sum
    # filled with 0 turned a leading -0.0 into +0.0, and a product filled with 1 + 0j turned a
    # complex infinity into NaN (inf * 0 in its imaginary part). It also holds n elements per
    # step where the masked reduction it replaces held n^2.
    combine = tl.add if name == "sum" else tl.multiply
    n = out.shape[-1]
    k = 1
    while k < n:
        later = tl.asarray(np.arange(n) >= k)
        shifted = tl.concatenate([out[..., :k], out[..., : n - k]], -1)  # the first k: masked
        out = tl.where(later, combine(shifted, out), out)
        k *= 2
    if include_initial:
        out = tl.concatenate(
            [
                tl.full(out.shape[:-1] + (1,), fill_value=0 if name == "sum" else 1, dtype=out_dt),
                out,
            ],
            -1,
        )
    return tl.moveaxis(out, -1, ax)


def cumulative_sum(
    x: Any, /, *, axis: int | None = None, dtype: Any = None, include_initial: builtins.bool = False
) -> Tensor:
    return _cumulative("sum", x, axis, dtype, include_initial)


def cumulative_prod(
    x: Any, /, *, axis: int | None = None, dtype: Any = None, include_initial: builtins.bool = False
) -> Tensor:
    return _cumulative("prod", x, axis, dtype, include_initial)


def clip(x: Any, /, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    x = _t(x)
    out = x
    for bound, beyond in ((min, tl.less), (max, tl.greater)):
        if bound is None:
            continue
        if x.dtype.kind in "iu" and isinstance(bound, int) and not isinstance(bound, bool):
            # a Python int past the dtype's range clips to the range's end (NumPy's result:
            # clip(uint8, -1, 1) is [0, 1, 1]) rather than failing to convert
            info = np.iinfo(x.dtype)
            bound = builtins.min(builtins.max(bound, int(info.min)), int(info.max))
        hit = beyond(out, bound)
        if x.dtype.kind == "f":  # a NaN bound gives NaN, as the standard says
            hit = tl.bitwise_or(
                hit,
                isnan(
                    _t(bound) if not isinstance(bound, float) else tl.asarray(bound, dtype=x.dtype)
                ),
            )
        out = tl.where(hit, bound, out)
    return tl.astype(out, x.dtype) if out.dtype != x.dtype else out


# ---- utility ----------------------------------------------------------------------------------
def all(x: Any, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Tensor:  # noqa: A001
    x = _t(x)
    false = tl.astype(tl.invert(_truth(x)), np.int64)
    return tl.equal(tl.sum(false, _axes(axis, x.ndim, "all"), keepdims=keepdims), 0)


def any(x: Any, /, *, axis: Any = None, keepdims: builtins.bool = False) -> Tensor:  # noqa: A001
    x = _t(x)
    true = tl.astype(_truth(x), np.int64)
    return tl.greater(tl.sum(true, _axes(axis, x.ndim, "any"), keepdims=keepdims), 0)


def diff(
    x: Any, /, *, axis: int = -1, n: int = 1, prepend: Any = None, append: Any = None
) -> Tensor:
    x = _t(x)
    ax = _axis(axis, x.ndim, "diff")
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = tl.concatenate([_t(p) for p in parts], ax)
    pre = (slice(None),) * ax
    for _ in range(n):
        hi, lo = x[pre + (slice(1, None),)], x[pre + (slice(None, -1),)]
        x = tl.not_equal(hi, lo) if x.dtype.kind == "b" else tl.subtract(hi, lo)
    return x


NAMES = [
    "broadcast_arrays", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis",
    "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile", "unstack", "take",
    "take_along_axis", "argmax", "argmin", "count_nonzero", "nonzero", "searchsorted", "where",
    "argsort", "sort", "unique_all", "unique_counts", "unique_inverse", "unique_values",
    "cumulative_prod", "cumulative_sum", "max", "mean", "min", "prod", "std", "sum", "var",
    "clip", "all", "any", "diff",
]  # fmt: skip
