"""The numexpr dialect: a fused region as one numexpr expression (the CPU's small regions).

    ((in0 * in1) + exp(in2)) > in3

Its exactness rules decide what every backend fuses (runtime/codegen/__init__.py): regions hold
only ops and dtypes that numexpr computes exactly as NumPy does, one arithmetic dtype per
region (int32, int64, float32, float64 or complex128; int8, int16 and the unsigned integers,
which numexpr lacks, stay op by op) plus booleans from comparisons. Integer arithmetic wraps as
NumPy's; float + - * / and comparisons are single IEEE operations, bit for bit NumPy's;
maximum/minimum are spelt out with NumPy's NaN and signed-zero rules; exp, log, sin, cos,
tanh, sqrt and ** come from the C library, within an ulp or two of NumPy's loops (x ** -1 and
x ** 0.5 may become 1/x and sqrt(x), correctly rounded) with the same overflow, underflow and
special values.
"""

from __future__ import annotations

import functools
import string

import numpy as np
from tenloom.graph.ops import Op

# op -> numexpr template; {0}, {1}, {2} are the operands' expressions
TEMPLATES: dict[Op, str] = {
    Op.ADD: "({0} + {1})",
    Op.SUB: "({0} - {1})",
    Op.MUL: "({0} * {1})",
    Op.DIV: "({0} / {1})",
    Op.POW: "({0} ** {1})",
    Op.NEG: "(-{0})",
    Op.ABS: "abs({0})",
    Op.EXP: "exp({0})",
    Op.LOG: "log({0})",
    Op.SQRT: "sqrt({0})",
    Op.SIN: "sin({0})",
    Op.COS: "cos({0})",
    Op.TANH: "tanh({0})",
    Op.CONJ: "conj({0})",
    Op.EQ: "({0} == {1})",
    Op.NE: "({0} != {1})",
    Op.LT: "({0} < {1})",
    Op.LE: "({0} <= {1})",
    Op.GT: "({0} > {1})",
    Op.GE: "({0} >= {1})",
    Op.AND: "({0} & {1})",
    Op.OR: "({0} | {1})",
    Op.INVERT: "(~{0})",
    Op.WHERE: "where({0}, {1}, {2})",
    # NumPy's maximum/minimum propagate NaN from either side and, between equal operands
    # (0.0 and -0.0), give the second one (its float32/float64 loops)
    Op.MAXIMUM: "where(({0} > {1}) | ({0} != {0}), {0}, {1})",
    Op.MINIMUM: "where(({0} < {1}) | ({0} != {0}), {0}, {1})",
}
ARITH = frozenset(np.dtype(n) for n in ("int32", "int64", "float32", "float64", "complex128"))
BOOL = np.dtype(bool)
# numexpr computes these in floating point only (abs of an integer comes back as float64)
FLOAT_ONLY = frozenset({Op.DIV, Op.POW, Op.EXP, Op.LOG, Op.SQRT, Op.SIN, Op.COS, Op.TANH, Op.ABS})
NOT_COMPLEX = frozenset({Op.ABS, Op.LT, Op.LE, Op.GT, Op.GE, Op.MAXIMUM, Op.MINIMUM})
COMPLEX_ONLY = frozenset({Op.CONJ})
BOOL_ONLY = frozenset({Op.AND, Op.OR, Op.INVERT})

# caps of a region: ops, inputs, and characters of its expression (numexpr compiles an
# expression tree; a 100,000-node chain becomes a chain of fused nodes)
MAX_OPS = 48
MAX_INPUTS = 24
MAX_CHARS = 4000

# numexpr's names for our dtypes in a compiled signature (its "float" is float32)
NUMEXPR_TYPES = {"|b1": bool, "<i4": np.int32, "<i8": np.int64, "<f4": float, "<f8": np.float64}
NUMEXPR_TYPES["<c16"] = complex
# Complex dtypes: only the ops below, which act on real and imaginary parts separately (or
# compare them). numexpr's complex * / exp log sqrt sin cos tanh ** use textbook formulas:
# division through (a*conj(b)) / (c*c + d*d) and sqrt through |z| overflow for finite inputs
# ((1e300+1e300j) / (3e10+4e10j) gave nan+nanj, sqrt(1.8e308+0j) inf), non-finite inputs give
# NaN where NumPy's C99 functions give inf or an exact 0, and NumPy's complex * fuses its
# multiply-adds where the CPU has FMA; complex regions holding them run through NumPy's ufuncs.
NUMEXPR_COMPLEX_EXACT = frozenset(
    {Op.ADD, Op.SUB, Op.NEG, Op.CONJ, Op.EQ, Op.NE, Op.WHERE, Op.AND, Op.OR, Op.INVERT}
)


def expression(program: tuple) -> str:
    """The numexpr expression of a FUSED program; inputs are named in0, in1, ..."""
    exprs: list[str] = []
    for op, _attrs, args in program:
        parts = [f"in{i}" if kind == "in" else exprs[i] for kind, i in args]
        # a square is spelt x * x, its operand twice: "x ** 2" is libm's pow in numexpr's
        # unoptimized mode (not correctly rounded: 891 of 10^6 float64 squares differed from
        # NumPy's x * x), and its aggressive mode rewrites it as a product on one shared node,
        # whose duplicate search then took time exponential in the chain of squares (16 s for
        # 18 of them)
        exprs.append(TEMPLATES[op].format(*parts))
    return exprs[-1]


@functools.cache
def _template_size(op: Op) -> tuple[int, tuple[int, ...]]:
    """A template's own characters, and how many times it spells each operand."""
    own, uses = 0, [0, 0, 0]
    for literal, field, _spec, _conv in string.Formatter().parse(TEMPLATES[op]):
        own += len(literal)
        if field is not None:
            uses[int(field)] += 1
    return own, tuple(uses)


def expression_size(program: tuple) -> int:
    """Characters of the program's expression (the ``source_size`` of the fusion limits),
    counted without writing it: an expression is a tree, so a value read twice is spelt twice,
    and a chain of n ``maximum`` steps (each spells its first operand 4 times) is 4^n
    characters long. Writing it out to measure it ran out of memory at 16 steps."""
    sizes: list[int] = []
    for op, _attrs, args in program:
        parts = [len(f"in{i}") if kind == "in" else sizes[i] for kind, i in args]
        own, uses = _template_size(op)
        sizes.append(own + sum(n * p for n, p in zip(uses, parts)))
    return sizes[-1]
