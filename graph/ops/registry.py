"""Op kinds and the op registry: one :class:`OpDef` per op, holding everything that defines it.

Each op family module of this package (``leaf``, ``elementwise``, ``reduce``, ``movement``,
``contract``, ``sliced``, ``fused``) registers its ops once with :func:`register_op`: the typed
attrs record, the shape/dtype rule run at trace time, the NumPy reference, the VJP and JVP
rules, the cost, the check of attributes read from a file and the dump text, beside the op (as
JAX keeps a primitive's rules beside the primitive).
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
    FUSED = "fused"


class Op(enum.Enum):
    """Every op. Its definition (rules, attrs record) is registered by its family module.

    A new op is appended at the end: a member's position is part of the structural
    fingerprint by which CSE orders commutative operands, stable across processes."""

    # Members are singletons: identity hashing is valid and much faster than Enum's default
    # (which hashes the name in Python code, on every intern-table lookup).
    __hash__ = object.__hash__

    # leaves
    CONST = "const"
    PLACEHOLDER = "placeholder"
    FULL = "full"
    EYE = "eye"
    # elementwise, unary
    NEG = "neg"
    ABS = "abs"
    EXP = "exp"
    LOG = "log"
    SQRT = "sqrt"
    SIN = "sin"
    COS = "cos"
    TANH = "tanh"
    SIGN = "sign"
    CONJ = "conj"
    REAL = "real"
    IMAG = "imag"
    INVERT = "invert"
    CAST = "cast"
    # elementwise, binary
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    FLOORDIV = "floordiv"
    MOD = "mod"
    POW = "pow"
    MAXIMUM = "maximum"
    MINIMUM = "minimum"
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    AND = "and"
    OR = "or"
    XOR = "xor"
    # elementwise, ternary
    WHERE = "where"
    # reductions
    SUM = "sum"
    PROD = "prod"
    MAX = "max"
    MIN = "min"
    # movement
    RESHAPE = "reshape"
    TRANSPOSE = "transpose"
    BROADCAST = "broadcast_to"
    SLICE = "slice"
    SLICE_SCATTER = "slice_scatter"  # zeros with the operand written at a basic index
    CONCAT = "concatenate"
    DIAGONAL = "diagonal"
    # contractions
    EINSUM = "einsum"
    MATMUL = "matmul"
    TENSORDOT = "tensordot"
    TRACE = "trace"
    # emitted by passes
    CONTRACT = "contract"  # one pairwise contraction as (batched) GEMM
    FUSED = "fused"  # a fused elementwise region
    SLICED = "sliced"  # a contraction network run slice by slice (memory_limit)
    LAYOUT = "layout"  # the same values copied into a chosen memory order


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
