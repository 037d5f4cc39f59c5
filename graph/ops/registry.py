"""Op kinds and the op registry.

Everything that defines an op is registered next to it (in the ``ops_*`` modules): the rule
that infers shape and dtype at trace time, and the NumPy reference the CPU backend runs.
Autodiff rules join them through :func:`register_vjp` / :func:`register_jvp`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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


# infer(inputs, attrs) -> (shape, dtype); inputs are Nodes (anything with .shape/.dtype)
InferRule = Callable[[Sequence[Any], tuple], "tuple[tuple[int, ...], np.dtype]"]
# ref(arrays, attrs) -> ndarray
RefImpl = Callable[[Sequence[np.ndarray], tuple], np.ndarray]


@dataclass
class OpDef:
    op: Op
    kind: OpKind
    infer: InferRule
    ref: RefImpl
    arity: int | None  # None: variadic
    vjp: Callable | None = None
    jvp: Callable | None = None
    extra: dict = field(default_factory=dict)


OPS: dict[Op, OpDef] = {}


def as_array(x):
    """NumPy scalars (what reductions of whole arrays return) as 0-d arrays; any array type,
    NumPy's or a device library's, passes through untouched."""
    return np.asarray(x) if isinstance(x, (np.generic, bool, int, float, complex)) else x


def register_op(
    op: Op, kind: OpKind, infer: InferRule, ref: RefImpl, arity: int | None = None
) -> OpDef:
    """Register the definition of ``op``; an op is defined exactly once."""
    if op in OPS:
        raise ValueError(f"op {op.value!r} is already registered")
    d = OpDef(op, kind, infer, ref, arity)
    OPS[op] = d
    return d


def op_def(op: Op) -> OpDef:
    try:
        return OPS[op]
    except KeyError:
        valid = ", ".join(sorted(o.value for o in OPS))
        raise KeyError(f"op {op!r} has no definition; defined ops: {valid}") from None


def register_vjp(op: Op, rule: Callable) -> None:
    op_def(op).vjp = rule


def register_jvp(op: Op, rule: Callable) -> None:
    op_def(op).jvp = rule
