"""Op kinds and the op registry: one :class:`OpDef` per op, holding everything that defines it.

Each op family module of this package (``leaf``, ``elementwise``, ``reduce``, ``movement``,
``contract``, ``linalg``, ``sliced``, ``fused``) registers its ops once with
:func:`register_op`: the typed attrs record, the shape/dtype rule run at trace time, the NumPy
reference, the VJP and JVP rules, the cost, the check of attributes read from a file and the
dump text, beside the op (as JAX keeps a primitive's rules beside the primitive).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


class OpKind(enum.Enum):
    LEAF = "leaf"
    ELEMENTWISE = "elementwise"
    REDUCE = "reduce"
    MOVEMENT = "movement"
    CONTRACTION = "contraction"
    LINALG = "linalg"
    FUSED = "fused"


class _OpCodes(type):
    """``for op in Op`` lists every op defined so far, in order of definition."""

    def __iter__(cls):
        return iter(cls._defined)

    def __len__(cls) -> int:
        return len(cls._defined)


class Op(metaclass=_OpCodes):
    """An op's identity: ``Op.EXP`` is a singleton with a ``name`` (``"EXP"``), a ``value``
    (``"exp"``, what files and messages use) and a ``code`` (its number, in order of
    definition; the intern table's key and CSE's fingerprint use it).

    Each family module defines its own ops with :meth:`define` before it registers their
    :class:`OpDef`, so adding an op touches its family module only. Families are imported in a
    fixed order (graph/ops/__init__.py), so the codes are the same in every process."""

    __slots__ = ("name", "value", "code")
    _defined: list["Op"] = []
    _by_value: dict[str, "Op"] = {}

    name: str
    value: str
    code: int

    def __init__(self, *args, **kwargs) -> None:
        raise TypeError("ops are made with Op.define(name, value)")

    @classmethod
    def define(cls, name: str, value: str) -> "Op":
        """Define the op ``Op.<name>`` with ``value`` as its external name; once per op."""
        if not name.isidentifier() or not name.isupper():
            raise ValueError(f"op name {name!r} is not an upper-case identifier")
        if name in vars(cls) or value in cls._by_value:
            raise ValueError(f"op {name} ({value!r}) is already defined")
        op = object.__new__(cls)
        for field, v in (("name", name), ("value", value), ("code", len(cls._defined))):
            object.__setattr__(op, field, v)
        setattr(cls, name, op)
        cls._defined.append(op)
        cls._by_value[value] = op
        return op

    @classmethod
    def define_all(cls, ops: str) -> None:
        """Define several ops at once: ``ops`` lists their values, separated by spaces, each
        named by its upper-cased value (``"exp"`` is ``Op.EXP``) or as ``NAME=value``."""
        for item in ops.split():
            name, _, value = item.rpartition("=")
            cls.define(name or value.upper(), value)

    @classmethod
    def from_value(cls, value: str) -> "Op":
        """The op whose ``value`` is ``value`` (KeyError if none is)."""
        return cls._by_value[value]

    def __setattr__(self, name: str, value) -> None:
        raise AttributeError("Op is immutable")

    def __repr__(self) -> str:
        return f"<Op.{self.name}: {self.value!r}>"

    def __reduce__(self):
        return (getattr, (Op, self.name))


# infer(inputs, attrs) -> (shape, dtype): inputs are Nodes (anything with .shape/.dtype)
InferRule = Callable[[Sequence[Any], tuple], "tuple[tuple[int, ...], np.dtype]"]
# ref(arrays, attrs) -> ndarray
RefImpl = Callable[[Sequence[np.ndarray], tuple], np.ndarray]
# vjp(node, y, xs, g) -> one cotangent per input (a Value or None); see graph/autodiff.py
VjpRule = Callable[..., tuple]
# jvp(node, y, xs, ts) -> the output's tangent (a Value or None); see graph/autodiff.py
JvpRule = Callable[..., Any]
# cost(node) -> multiply-adds (contractions) or element operations (everything else)
CostRule = Callable[[Any], int]
# check_attrs(inputs, attrs, op): raises BadFormat (graph/ops/checks.py) on attrs read from a file
CheckRule = Callable[[Sequence[Any], tuple, "Op"], None]
# fmt(attrs) -> the bracketed attribute text of a dump line, e.g. "[axes=[0], keepdims]"
FmtRule = Callable[[tuple], str]


@dataclass(eq=False)
class OpDef:
    """Everything that defines one op.

    ``attrs`` is the op's typed attrs record, a NamedTuple class (None: the op takes no attrs);
    ``make_node`` turns the plain tuple it is given into it, so a node's attrs read by name
    (``node.attrs.axes``) and still hash and compare as the tuple. ``infer`` and ``ref`` of
    elementwise ops are also called on the steps of fused programs, whose attrs may be plain
    tuples: they unpack them rather than read fields.
    """

    op: Op
    kind: OpKind
    infer: InferRule
    ref: RefImpl
    arity: int | None  # None: variadic
    attrs: type | None = None
    vjp: VjpRule | None = None
    jvp: JvpRule | None = None
    cost: CostRule | None = None
    check_attrs: CheckRule | None = None
    fmt: FmtRule | None = None


OPS: dict[Op, OpDef] = {}


def as_array(x):
    """NumPy scalars (what reductions of whole arrays return) as 0-d arrays; any array type,
    NumPy's or a device library's, passes through untouched."""
    return np.asarray(x) if isinstance(x, (np.generic, bool, int, float, complex)) else x


def register_op(
    op: Op,
    kind: OpKind,
    infer: InferRule,
    ref: RefImpl,
    arity: int | None = None,
    *,
    attrs: type | None = None,
    vjp: VjpRule | None = None,
    jvp: JvpRule | None = None,
    cost: CostRule | None = None,
    check_attrs: CheckRule | None = None,
    fmt: FmtRule | None = None,
) -> OpDef:
    """Register the definition of ``op``; an op is defined exactly once."""
    if op in OPS:
        raise ValueError(f"op {op.value!r} is already registered")
    d = OpDef(op, kind, infer, ref, arity, attrs, vjp, jvp, cost, check_attrs, fmt)
    OPS[op] = d
    return d


def op_def(op: Op) -> OpDef:
    try:
        return OPS[op]
    except KeyError:
        valid = ", ".join(sorted(o.value for o in OPS))
        raise KeyError(f"op {op!r} has no definition; defined ops: {valid}") from None


def typed_attrs(op: Op, attrs: tuple) -> tuple:
    """``attrs`` as ``op``'s attrs record (a plain tuple converted; the same length assumed)."""
    record = OPS[op].attrs
    if record is None or type(attrs) is record:
        return attrs
    return tuple.__new__(record, attrs)


def register_vjp(op: Op, rule: VjpRule) -> None:
    op_def(op).vjp = rule


def register_jvp(op: Op, rule: JvpRule) -> None:
    op_def(op).jvp = rule


# Builders: the functions that make an op's nodes from user arguments (checking and
# normalizing them, lifting arrays and scalars), by public name. Each family module registers
# its own with ``@builder``; graph/build.py collects them, tenloom/api.py wraps each public one
# as a Tensor-returning function and graph/value.py's ``V`` as a Value-returning one.
BUILDERS: dict[str, Callable[..., Any]] = {}
PUBLIC_BUILDERS: list[str] = []  # the ones tenloom exports, in order of registration


def builder(fn: Callable | None = None, name: str | None = None, *, public: bool = True):
    """Register ``fn`` as the builder ``name`` (default: its own name without a trailing
    underscore, so ``sum_`` is ``sum``); as ``@builder`` or ``@builder(public=False)``, or
    ``builder(fn, "alias")`` for a second name."""

    def register(f: Callable) -> Callable:
        key = name or f.__name__.rstrip("_")
        if key in BUILDERS:
            raise ValueError(f"builder {key!r} is already registered")
        BUILDERS[key] = f
        if public:
            PUBLIC_BUILDERS.append(key)
        return f

    return register if fn is None else register(fn)
