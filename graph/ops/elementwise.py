"""Elementwise ops: NumPy ufunc semantics, broadcasting included.

Result dtypes are whatever NumPy's own type resolution gives for the operand dtypes (asked once
per dtype combination on empty arrays and cached), so promotion follows ``numpy.result_type`` and
each ufunc's loops exactly. Python scalars are turned into typed 0-d leaves by the front end
following NEP 50 before they get here.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
from tenloom.graph.dtypes import _SUPPORTED_SET
from tenloom.graph.errors import DTypeError, ShapeError, fmt_shape
from tenloom.graph.ops.registry import Op, OpKind, register_op

UNARY: dict[Op, Callable] = {
    Op.NEG: np.negative,
    Op.ABS: np.absolute,
    Op.EXP: np.exp,
    Op.LOG: np.log,
    Op.SQRT: np.sqrt,
    Op.SIN: np.sin,
    Op.COS: np.cos,
    Op.TANH: np.tanh,
    Op.SIGN: np.sign,
    Op.CONJ: np.conjugate,
    Op.REAL: np.real,
    Op.IMAG: np.imag,
    Op.INVERT: np.invert,
}

BINARY: dict[Op, Callable] = {
    Op.ADD: np.add,
    Op.SUB: np.subtract,
    Op.MUL: np.multiply,
    Op.DIV: np.true_divide,
    Op.FLOORDIV: np.floor_divide,
    Op.MOD: np.remainder,
    Op.POW: np.power,
    Op.MAXIMUM: np.maximum,
    Op.MINIMUM: np.minimum,
    Op.EQ: np.equal,
    Op.NE: np.not_equal,
    Op.LT: np.less,
    Op.LE: np.less_equal,
    Op.GT: np.greater,
    Op.GE: np.greater_equal,
    Op.AND: np.bitwise_and,
    Op.OR: np.bitwise_or,
    Op.XOR: np.bitwise_xor,
}

# The symbol used for each op in messages and dumps.
SYMBOL: dict[Op, str] = {
    Op.ADD: "+",
    Op.SUB: "-",
    Op.MUL: "*",
    Op.DIV: "/",
    Op.FLOORDIV: "//",
    Op.MOD: "%",
    Op.POW: "**",
    Op.EQ: "==",
    Op.NE: "!=",
    Op.LT: "<",
    Op.LE: "<=",
    Op.GT: ">",
    Op.GE: ">=",
    Op.AND: "&",
    Op.OR: "|",
    Op.XOR: "^",
}

_DTYPE_CACHE: dict[tuple, np.dtype] = {}


def resolve_dtype(op: Op, fn: Callable, inputs: Sequence) -> np.dtype:
    """Result dtype of ``fn`` on the inputs' dtypes, as NumPy resolves it."""
    key = (op, *[i.dtype for i in inputs])
    dt = _DTYPE_CACHE.get(key)
    if dt is not None:
        return dt
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dt = fn(*[np.empty(0, i.dtype) for i in inputs]).dtype
    except TypeError as e:
        operands = ", ".join(
            f"operand {k} {i.dtype}{fmt_shape(i.shape)}" for k, i in enumerate(inputs)
        )
        raise DTypeError(f"{op.value}: not defined for {operands} ({e})") from None
    if dt not in _SUPPORTED_SET:
        raise DTypeError(f"{op.value}: result dtype {dt} is not supported")
    _DTYPE_CACHE[key] = dt
    return dt


def broadcast_shapes(op: str, shapes: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """NumPy broadcasting of ``shapes``; a ShapeError names the op, operands, axis and shapes."""
    first = shapes[0]
    if len(shapes) == 2:
        second = shapes[1]
        if first == second or not second:
            return first
        if not first:
            return second
    elif all(s == first for s in shapes):
        return first
    ndim = max(len(s) for s in shapes)
    out = []
    for ax in range(-ndim, 0):
        size = 1
        for s in shapes:
            if len(s) >= -ax:
                n = s[ax]
                if n != 1:
                    if size != 1 and n != size:
                        desc = " and ".join(
                            f"operand {k} {fmt_shape(s)}" for k, s in enumerate(shapes)
                        )
                        raise ShapeError(
                            f"{op}: cannot broadcast {desc}: axis {ax} has sizes {size} and {n}"
                        )
                    size = n
        out.append(size)
    return tuple(out)


def _unary_infer(op: Op, fn: Callable):
    def infer(inputs, attrs):
        return inputs[0].shape, resolve_dtype(op, fn, inputs)

    return infer


def _binary_infer(op: Op, fn: Callable):
    name = f"{op.value} ({SYMBOL[op]})" if op in SYMBOL else op.value

    def infer(inputs, attrs):
        a, b = inputs
        shape = a.shape if a.shape == b.shape else broadcast_shapes(name, (a.shape, b.shape))
        return shape, resolve_dtype(op, fn, inputs)

    return infer


for _op, _fn in UNARY.items():
    register_op(
        _op, OpKind.ELEMENTWISE, _unary_infer(_op, _fn), (lambda f: lambda xs, at: f(xs[0]))(_fn), 1
    )

for _op, _fn in BINARY.items():
    register_op(
        _op,
        OpKind.ELEMENTWISE,
        _binary_infer(_op, _fn),
        (lambda f: lambda xs, at: f(xs[0], xs[1]))(_fn),
        2,
    )


def _cast_ref(xs, attrs):
    with warnings.catch_warnings():
        # complex -> real drops the imaginary part, as numpy's astype does
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        return xs[0].astype(np.dtype(attrs[0]))


register_op(
    Op.CAST,
    OpKind.ELEMENTWISE,
    lambda inputs, attrs: (inputs[0].shape, np.dtype(attrs[0])),
    _cast_ref,
    1,
)


def _where_infer(inputs, attrs):
    shape = broadcast_shapes("where", [i.shape for i in inputs])
    return shape, resolve_dtype(Op.WHERE, np.where, inputs)


register_op(Op.WHERE, OpKind.ELEMENTWISE, _where_infer, lambda xs, at: np.where(*xs), 3)
