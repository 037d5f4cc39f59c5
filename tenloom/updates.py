"""Functional updates, JAX's spelling: ``t.at[idx].set(v)``, ``.add(v)``, ``.multiply(v)``,
``.get()``, each a new lazy Tensor (``t`` is not changed).

``idx`` is any index ``t[idx]`` takes (basic or advanced: ints, slices, None, ..., integer
arrays, lists, boolean masks); ``v`` is broadcast to the shape of ``t[idx]`` and cast to
``t``'s dtype, as NumPy's ``a[idx] = v`` does. The selected elements are found once, when the
graph is built, as flat positions in ``t`` (``arange(t.size).reshape(t.shape)[idx]``), then:

- ``add``: ``t + scatter_add(v, positions)``; duplicate positions accumulate (as
  ``np.add.at``, unlike ``a[idx] += v``).
- ``set``: ``where(mask, scatter_add(v at the last occurrence of each position), t)``: with
  duplicate positions the LAST write wins, as NumPy's ``a[idx] = v`` does.
- ``multiply``: with duplicates every factor applies (one round per repeat), as
  ``np.multiply.at``.

All are differentiable in ``t`` and ``v`` (GATHER/SCATTER_ADD, graph/ops/gather.py). Index
tensors must be concrete: constants pass; a lazy index (mask or integer tensor) follows the
data-dependent rule of tenloom/concrete.py (evaluated now, ``DataDependentShapeError`` in a
traced function).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tenloom.graph import build as _b
from tenloom.graph.errors import DTypeError, fmt_shape
from tenloom.graph.node import Node
from tenloom.graph.ops import Op
from tenloom.graph.ops.gather import set_evaluator
from tenloom.graph.value import Value
from tenloom.tensor import Tensor

_REMEDY = "index with concrete arrays (NumPy arrays, lists) or call on concrete operands"


def _evaluate_mask(node: Node, op: str, remedy: str) -> np.ndarray:
    from tenloom.concrete import concrete  # imports tenloom.tensor, which imports this module

    return concrete(Tensor(node), op, remedy)


set_evaluator(_evaluate_mask)


def _concrete_entry(k: Any) -> Any:
    if isinstance(k, (Value, Node)):
        node = k.node if isinstance(k, Value) else k
        if node.op is Op.CONST:
            return np.asarray(node.attrs.constant.value)
        return _evaluate_mask(node, "at", _REMEDY)
    return k


class _Ref:
    """``t.at[idx]``: the selection whose update methods return new Tensors."""

    __slots__ = ("_t", "_idx")

    def __init__(self, t: Tensor, idx: Any):
        self._t, self._idx = t, idx

    def _positions(self) -> np.ndarray:
        t, idx = self._t, self._idx
        key = idx if isinstance(idx, tuple) else (idx,)
        key = tuple(_concrete_entry(k) for k in key)
        _b.getitem(t, key)  # typed errors (bounds, index kinds) as indexing raises them
        size = int(np.prod(t.shape, dtype=np.int64))
        return np.arange(size, dtype=np.int64).reshape(t.shape)[key]

    def _values(self, v: Any, shape: tuple) -> Value:
        t = self._t
        if type(v) is int and t.dtype.kind in "iub":
            # as NumPy's a[idx] = v: a Python int that the dtype cannot hold is an error, not
            # a wrapped value
            try:
                np.asarray(v, dtype=t.dtype)
            except OverflowError:
                raise DTypeError(
                    f"at[...]: value {v} does not fit the tensor's dtype {t.dtype} "
                    f"(shape {fmt_shape(t.shape)})"
                ) from None
        vn = _b.asarray(v) if not isinstance(v, Value) else v.node
        if vn.dtype != t.dtype:
            vn = _b.astype(vn, t.dtype)
        return Tensor(_b.reshape(_b.broadcast_to(vn, shape), (-1,)))

    def get(self) -> Tensor:
        """``t[idx]``."""
        return self._t[self._idx]

    def add(self, v: Any) -> Tensor:
        """``t`` with ``v`` added at ``idx``; duplicate indices accumulate."""
        t = self._t
        pos = self._positions()
        vals = self._values(v, pos.shape)
        added = _b.scatter_add_flat(vals, pos.reshape(-1), t.size)
        # only where something is added (-0.0 + 0.0 would be +0.0 elsewhere)
        touched = np.zeros(t.size, bool)
        touched[pos.reshape(-1)] = True
        total = t + Tensor(_b.reshape(added, t.shape))
        return Tensor(_b.where(touched.reshape(t.shape), total, t))

    def set(self, v: Any) -> Tensor:
        """``t`` with ``v`` written at ``idx``; with duplicate indices the last write wins."""
        pos = self._positions()
        vals = self._values(v, pos.shape)
        flat = pos.reshape(-1)
        uniq, first_rev = np.unique(flat[::-1], return_index=True)
        last = (flat.size - 1 - first_rev).astype(np.int64)
        return self._write(vals, flat, uniq, last, lambda old, new: new)

    def multiply(self, v: Any) -> Tensor:
        """``t`` with its elements at ``idx`` multiplied by ``v``; every duplicate multiplies."""
        t = self._t
        pos = self._positions()
        vals = self._values(v, pos.shape)
        flat = pos.reshape(-1)
        order = np.argsort(flat, kind="stable")
        rank = np.empty(flat.size, np.int64)
        if flat.size:
            s = flat[order]
            starts = np.r_[0, np.flatnonzero(s[1:] != s[:-1]) + 1]
            run = np.repeat(starts, np.diff(np.r_[starts, s.size]))
            rank[order] = np.arange(s.size) - run
        out = t
        for r in range(int(rank.max()) + 1 if flat.size else 0):
            take = np.flatnonzero(rank == r).astype(np.int64)
            out = _Ref(out, self._idx)._write(
                vals, flat, flat[take], take, lambda old, new: old * new
            )
        return out

    def _write(self, vals: Tensor, flat, where_pos, which, combine) -> Tensor:
        """``combine(t, new)`` at the distinct positions ``where_pos``, ``new`` being
        ``vals[which]`` there; ``t`` elsewhere."""
        t = self._t
        if not len(where_pos):
            return t
        # each position reads its value by a gather (a scatter-add into zeros would make a
        # written -0.0 +0.0)
        source = np.zeros(t.size, np.int64)
        source[where_pos] = np.asarray(which, np.int64)
        new = Tensor(_b.reshape(_b.take_flat(vals, source), t.shape))
        mask = np.zeros(t.size, bool)
        mask[where_pos] = True
        mask = mask.reshape(t.shape)
        return Tensor(_b.where(mask, combine(t, new), t))


class IndexUpdater:
    """``t.at``: index it (``t.at[idx]``) for ``set``, ``add``, ``multiply`` and ``get``."""

    __slots__ = ("_t",)

    def __init__(self, t: Tensor):
        self._t = t

    def __getitem__(self, idx: Any) -> _Ref:
        return _Ref(self._t, idx)
