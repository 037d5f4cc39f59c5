"""``Value``: a thin, identity-hashed handle on a graph node with NumPy's operators.

Operators build nodes (through ``graph.build``); nothing runs. ``==`` and ``<`` are elementwise
and lazy, so ``bool(v)`` raises instead of guessing. The front end's ``Tensor`` subclasses it and
adds evaluation; the differentiation rules compute with plain Values.
"""

from __future__ import annotations

import functools
import types

import numpy as np
from tenloom.graph.errors import ConcretizationError
from tenloom.graph.node import Node


class Value:
    """A node with NumPy's operators and methods, each building a new node through
    ``graph.build``: the algebra the differentiation rules are written in. The front end's
    ``tenloom.Tensor`` is a Value that can also be evaluated; every operator returns a value of
    the operand's own class."""

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
    def T(self) -> "Value":
        return type(self)(_b.transpose(self))

    @property
    def real(self) -> "Value":
        return type(self)(_b.real(self))

    @property
    def imag(self) -> "Value":
        return type(self)(_b.imag(self))

    def __len__(self) -> int:
        if not self.node.shape:
            raise ConcretizationError(f"len() of a 0-d {type(self).__name__}")
        return self.node.shape[0]

    def __bool__(self) -> bool:
        raise ConcretizationError(
            f"the truth value of a lazy {type(self).__name__} is unknown until it is evaluated; "
            "use t.evaluate() (and .any()/.all() on the result)"
        )

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        n = self.node
        return f"{type(self).__name__}(shape={n.shape}, dtype={n.dtype}, op={n.op.value})"

    # ---- methods ------------------------------------------------------------------------
    def astype(self, dtype) -> "Value":
        return type(self)(_b.astype(self, dtype))

    def reshape(self, *shape) -> "Value":
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = shape[0]
        return type(self)(_b.reshape(self, shape))

    def transpose(self, *axes) -> "Value":
        if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], (int, np.integer))):
            axes = axes[0]
        return type(self)(_b.transpose(self, axes if axes != () else None))

    def ravel(self) -> "Value":
        return type(self)(_b.reshape(self, (-1,)))

    flatten = ravel

    def squeeze(self, axis=None) -> "Value":
        return type(self)(_b.squeeze(self, axis))

    def sum(self, axis=None, keepdims: bool = False) -> "Value":
        return type(self)(_b.sum(self, axis, keepdims=keepdims))

    def prod(self, axis=None, keepdims: bool = False) -> "Value":
        return type(self)(_b.prod(self, axis, keepdims=keepdims))

    def max(self, axis=None, keepdims: bool = False) -> "Value":
        return type(self)(_b.max(self, axis, keepdims=keepdims))

    def min(self, axis=None, keepdims: bool = False) -> "Value":
        return type(self)(_b.min(self, axis, keepdims=keepdims))

    def mean(self, axis=None, keepdims: bool = False) -> "Value":
        return type(self)(_b.mean(self, axis, keepdims=keepdims))

    def conj(self) -> "Value":
        return type(self)(_b.conj(self))

    conjugate = conj

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> "Value":
        return type(self)(_b.diagonal(self, offset, axis1, axis2))

    def trace(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> "Value":
        return type(self)(_b.trace(self, offset, axis1, axis2))

    def dot(self, other) -> "Value":
        return type(self)(_b.dot(self, other))

    def clip(self, a_min=None, a_max=None) -> "Value":
        return type(self)(_b.clip(self, a_min, a_max))

    def __getitem__(self, key) -> "Value":
        return type(self)(_b.getitem(self, key))

    # ---- operators ----------------------------------------------------------------------
    def __add__(self, o):
        return type(self)(_b.add(self, o))

    def __radd__(self, o):
        return type(self)(_b.add(o, self))

    def __sub__(self, o):
        return type(self)(_b.subtract(self, o))

    def __rsub__(self, o):
        return type(self)(_b.subtract(o, self))

    def __mul__(self, o):
        return type(self)(_b.multiply(self, o))

    def __rmul__(self, o):
        return type(self)(_b.multiply(o, self))

    def __truediv__(self, o):
        return type(self)(_b.divide(self, o))

    def __rtruediv__(self, o):
        return type(self)(_b.divide(o, self))

    def __floordiv__(self, o):
        return type(self)(_b.floor_divide(self, o))

    def __rfloordiv__(self, o):
        return type(self)(_b.floor_divide(o, self))

    def __mod__(self, o):
        return type(self)(_b.remainder(self, o))

    def __rmod__(self, o):
        return type(self)(_b.remainder(o, self))

    def __pow__(self, o):
        return type(self)(_b.operator_power(self, o))

    def __rpow__(self, o):
        return type(self)(_b.power(o, self))

    def __matmul__(self, o):
        return type(self)(_b.matmul(self, o))

    def __rmatmul__(self, o):
        return type(self)(_b.matmul(o, self))

    def __and__(self, o):
        return type(self)(_b.bitwise_and(self, o))

    def __rand__(self, o):
        return type(self)(_b.bitwise_and(o, self))

    def __or__(self, o):
        return type(self)(_b.bitwise_or(self, o))

    def __ror__(self, o):
        return type(self)(_b.bitwise_or(o, self))

    def __xor__(self, o):
        return type(self)(_b.bitwise_xor(self, o))

    def __rxor__(self, o):
        return type(self)(_b.bitwise_xor(o, self))

    def __neg__(self):
        return type(self)(_b.negative(self))

    def __pos__(self):
        return self

    def __abs__(self):
        return type(self)(_b.abs(self))

    def __invert__(self):
        return type(self)(_b.invert(self))

    def __eq__(self, o):  # type: ignore[override]
        return type(self)(_b.equal(self, o))

    def __ne__(self, o):  # type: ignore[override]
        return type(self)(_b.not_equal(self, o))

    def __lt__(self, o):
        return type(self)(_b.less(self, o))

    def __le__(self, o):
        return type(self)(_b.less_equal(self, o))

    def __gt__(self, o):
        return type(self)(_b.greater(self, o))

    def __ge__(self, o):
        return type(self)(_b.greater_equal(self, o))


# graph.build, bound (with ``V``) by graph/ops/__init__.py once every op and builder is
# registered: no Value exists before that, so the methods above never see it unbound
_b = None

# every builder returning a Value: the namespace differentiation rules compute with
V = types.SimpleNamespace()


def lifted(cls: type, fn, name: str | None = None, module: str | None = None):
    """``fn`` (a builder returning a node) returning a ``cls`` wrapping that node, named
    ``module.name`` (so that it pickles by reference where ``module`` holds it)."""

    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        if type(out) is tuple:  # a builder of several results (slogdet): a tuple of them
            return tuple(cls(n) for n in out)
        return cls(out)

    functools.update_wrapper(wrapper, fn)
    if name is not None:
        wrapper.__name__ = wrapper.__qualname__ = name
    if module is not None:
        wrapper.__module__ = module
    wrapper.__annotations__ = {**getattr(fn, "__annotations__", {}), "return": cls.__name__}
    return wrapper


def bind(build) -> None:
    """Give Value its builders (graph.build) and fill ``V`` from the registry."""
    global _b
    _b = build
    vars(V).update({name: lifted(Value, fn, name) for name, fn in build.BUILDERS.items()})
