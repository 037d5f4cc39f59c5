"""The lazy ``Tensor``: a thin, identity-hashed handle on a graph node.

Operators build nodes; nothing runs until ``evaluate``. ``==`` and ``<`` are elementwise and lazy,
so ``bool(t)`` raises instead of guessing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tenloom.graph.errors import ConcretizationError
from tenloom.graph.node import Node


class Tensor:
    """A lazy array. Build with the ``tenloom`` functions and operators; run with ``evaluate``."""

    __slots__ = ("node", "__weakref__")
    __array_ufunc__ = None  # make NumPy hand `ndarray <op> Tensor` to our reflected operators
    __array_priority__ = 1000

    def __init__(self, node: Node):
        self.node = node

    # ---- static facts -------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.node.shape

    @property
    def dtype(self) -> np.dtype:
        return self.node.dtype

    @property
    def ndim(self) -> int:
        return len(self.node.shape)

    @property
    def size(self) -> int:
        return self.node.size

    @property
    def T(self) -> "Tensor":
        return _api.transpose(self)

    @property
    def real(self) -> "Tensor":
        return _api.real(self)

    @property
    def imag(self) -> "Tensor":
        return _api.imag(self)

    def __len__(self) -> int:
        if not self.node.shape:
            raise ConcretizationError("len() of a 0-d Tensor")
        return self.node.shape[0]

    def __bool__(self) -> bool:
        raise ConcretizationError(
            "the truth value of a lazy Tensor is unknown until it is evaluated; "
            "use t.evaluate() (and .any()/.all() on the result)"
        )

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"Tensor(shape={self.node.shape}, dtype={self.node.dtype}, op={self.node.op.value})"

    # ---- execution (reaches runtime through a late import, the one sanctioned exception) ---
    def evaluate(self, **opts: Any) -> np.ndarray:
        """Run the graph and return this tensor's value (a 0-d ndarray for scalars)."""
        from tenloom.runtime.evaluate import evaluate

        return evaluate(self, **opts)[0]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self.evaluate()
        return out if dtype is None else out.astype(dtype)

    def _repr_svg_(self) -> str | None:
        """Jupyter: the graph as traced, as SVG (no pass runs). None, so that Jupyter shows the
        text repr, when graphviz or its ``dot`` program is missing or the graph is too big to
        draw; ``tl.visualize`` draws the optimized graph."""
        from tenloom.visualize import repr_svg

        return repr_svg(self)

    # ---- methods ------------------------------------------------------------------------
    def astype(self, dtype) -> "Tensor":
        return _api.astype(self, dtype)

    def reshape(self, *shape) -> "Tensor":
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = shape[0]
        return _api.reshape(self, shape)

    def transpose(self, *axes) -> "Tensor":
        if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], (int, np.integer))):
            axes = axes[0]
        return _api.transpose(self, axes if axes != () else None)

    def ravel(self) -> "Tensor":
        return _api.reshape(self, (-1,))

    flatten = ravel

    def squeeze(self, axis=None) -> "Tensor":
        return _api.squeeze(self, axis)

    def sum(self, axis=None, keepdims: bool = False) -> "Tensor":
        return _api.sum(self, axis, keepdims=keepdims)

    def prod(self, axis=None, keepdims: bool = False) -> "Tensor":
        return _api.prod(self, axis, keepdims=keepdims)

    def max(self, axis=None, keepdims: bool = False) -> "Tensor":
        return _api.max(self, axis, keepdims=keepdims)

    def min(self, axis=None, keepdims: bool = False) -> "Tensor":
        return _api.min(self, axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims: bool = False) -> "Tensor":
        return _api.mean(self, axis, keepdims=keepdims)

    def conj(self) -> "Tensor":
        return _api.conj(self)

    conjugate = conj

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> "Tensor":
        return _api.diagonal(self, offset, axis1, axis2)

    def trace(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> "Tensor":
        return _api.trace(self, offset, axis1, axis2)

    def dot(self, other) -> "Tensor":
        return _api.dot(self, other)

    def clip(self, a_min=None, a_max=None) -> "Tensor":
        return _api.clip(self, a_min, a_max)

    def __getitem__(self, key) -> "Tensor":
        return _api.getitem(self, key)

    # ---- operators ----------------------------------------------------------------------
    def __add__(self, o):
        return _api.add(self, o)

    def __radd__(self, o):
        return _api.add(o, self)

    def __sub__(self, o):
        return _api.subtract(self, o)

    def __rsub__(self, o):
        return _api.subtract(o, self)

    def __mul__(self, o):
        return _api.multiply(self, o)

    def __rmul__(self, o):
        return _api.multiply(o, self)

    def __truediv__(self, o):
        return _api.divide(self, o)

    def __rtruediv__(self, o):
        return _api.divide(o, self)

    def __floordiv__(self, o):
        return _api.floor_divide(self, o)

    def __rfloordiv__(self, o):
        return _api.floor_divide(o, self)

    def __mod__(self, o):
        return _api.remainder(self, o)

    def __rmod__(self, o):
        return _api.remainder(o, self)

    def __pow__(self, o):
        return _api.operator_power(self, o)

    def __rpow__(self, o):
        return _api.power(o, self)

    def __matmul__(self, o):
        return _api.matmul(self, o)

    def __rmatmul__(self, o):
        return _api.matmul(o, self)

    def __and__(self, o):
        return _api.bitwise_and(self, o)

    def __rand__(self, o):
        return _api.bitwise_and(o, self)

    def __or__(self, o):
        return _api.bitwise_or(self, o)

    def __ror__(self, o):
        return _api.bitwise_or(o, self)

    def __xor__(self, o):
        return _api.bitwise_xor(self, o)

    def __rxor__(self, o):
        return _api.bitwise_xor(o, self)

    def __neg__(self):
        return _api.negative(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _api.abs(self)

    def __invert__(self):
        return _api.invert(self)

    def __eq__(self, o):  # type: ignore[override]
        return _api.equal(self, o)

    def __ne__(self, o):  # type: ignore[override]
        return _api.not_equal(self, o)

    def __lt__(self, o):
        return _api.less(self, o)

    def __le__(self, o):
        return _api.less_equal(self, o)

    def __gt__(self, o):
        return _api.greater(self, o)

    def __ge__(self, o):
        return _api.greater_equal(self, o)


from tenloom.graph import api as _api  # noqa: E402  (api builds Tensors; import after the class)
