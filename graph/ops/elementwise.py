"""Elementwise ops: NumPy ufunc semantics, broadcasting included.

Result dtypes are whatever NumPy's own type resolution gives for the operand dtypes (asked once
per dtype combination on empty arrays and cached), so promotion follows ``numpy.result_type`` and
each ufunc's loops exactly. Python scalars are turned into typed 0-d leaves by the front end
following NEP 50 before they get here.

Only ``cast`` has attributes. The ops here are the ones a FUSED region (graph/ops/fused.py)
strings together; its steps may hold plain tuples as attrs, so these rules unpack them.

Differentiation (conventions in graph/autodiff.py): VJP rules compute J^H g, unbroadcast to
each operand's shape; ``abs`` and ``sign`` use sign(0) = 0; ``maximum``/``minimum`` send the
whole cotangent (follow the tangent of) the first operand on ties; ``where`` sends nothing to
its condition; comparisons, bitwise ops, a real ``sign`` and ``floordiv`` carry no derivative
(a complex ``sign``, z / |z|, does).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from tenloom.graph.autodiff import Tangent, add_all, linear_jvp, unbroadcast
from tenloom.graph.dtypes import _SUPPORTED_SET, normalize_dtype
from tenloom.graph.errors import (
    ConcretizationError,
    DTypeError,
    ShapeError,
    fmt_shape,
)
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.checks import check_arity, check_dtype, check_no_attrs
from tenloom.graph.ops.leaf import (
    _SCALARS,
    _lift_pair,
    asarray,
    full,
    full_node,
    lift,
    scalar_node,
)
from tenloom.graph.ops.registry import BUILDERS, Op, OpKind, builder, register_op
from tenloom.graph.value import V as T
from tenloom.graph.value import Value

# the ops of this family (Op.NEG, ...), defined before anything refers to them
Op.define_all(
    "neg abs exp log sqrt sin cos tanh sign conj real imag invert cast add sub mul "
    "div floordiv mod pow maximum minimum eq ne lt le gt ge and or xor where"
)

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


def _where_infer(inputs, attrs):
    shape = broadcast_shapes("where", [i.shape for i in inputs])
    return shape, resolve_dtype(Op.WHERE, np.where, inputs)


class CastAttrs(NamedTuple):
    dtype: str  # dtype.str of the result


def _cast_infer(inputs, attrs):
    (dtype,) = attrs
    return inputs[0].shape, np.dtype(dtype)


def _cast_ref(xs, attrs):
    (dtype,) = attrs
    with warnings.catch_warnings():
        # complex -> real drops the imaginary part, as numpy's astype does
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        return xs[0].astype(np.dtype(dtype))


def _check_cast(ins, at, op):
    at = check_arity(at, CastAttrs, op)
    check_dtype(at.dtype, "cast dtype")


def _elements(node) -> int:
    """Cost: one operation per output element."""
    return node.size


# ---- VJP rules -------------------------------------------------------------------------------


def cj(x):
    return T.conj(x)


def _binary_vjp(rule):
    """A binary op's rule, its cotangents summed back to each operand's (broadcast) shape."""

    def wrapped(node, y, xs, g):
        ga, gb = rule(node, y, xs, g)
        a, b = xs
        return (
            None if ga is None else unbroadcast(ga, a.shape),
            None if gb is None else unbroadcast(gb, b.shape),
        )

    return wrapped


def _abs_vjp(node, y, xs, g):
    (x,) = xs
    if x.dtype.kind == "c":
        safe = T.where(y == 0, 1.0, y)
        return (T.where(y == 0, 0.0, g * (x / safe)),)
    return (g * T.sign(x),)


def _sign_vjp(node, y, xs, g):
    """A real sign is piecewise constant: no derivative. A complex one is z / |z|, whose
    cotangent is (g - Re(conj(g) y) y) / |z| (PyTorch's sgn; 0 at z = 0, as there)."""
    (x,) = xs
    if x.dtype.kind != "c":
        return (None,)
    r = T.abs(x)
    safe = T.where(r == 0, 1.0, r)
    return (T.where(r == 0, 0.0, (g - T.real(T.conj(g) * y) * y) / safe),)


def _sign_jvp(node, y, xs, ts):
    (x,), (t,) = xs, ts
    if x.dtype.kind != "c":
        return None
    r = T.abs(x)
    safe = T.where(r == 0, 1.0, r)
    return T.where(r == 0, 0.0, (t - y * T.real(T.conj(y) * t)) / safe)


def _pow_da(a, b):
    """d(a**b)/da = b a^(b-1), and 0 where b == 0 (a**0 is 1 everywhere; b a^(b-1) there is
    0 * inf = NaN at a == 0, and so was the second derivative of a**1, as PyTorch and JAX's
    integer_pow give 0)."""
    zero = b == 0
    # (the masked branch on a base of 1: no 0 ** -1 to warn about)
    return T.where(zero, 0.0, b * T.where(zero, 1.0, a) ** (b - 1.0))


def _pow_vjp(node, y, xs, g):
    a, b = xs
    ga = g * cj(_pow_da(a, b))
    gb = g * cj(T.where(a == 0, 0.0, T.log(T.where(a == 0, 1.0, a)) * y))
    return ga, gb


def _where_vjp(node, y, xs, g):
    c, a, b = xs
    return (
        None,
        unbroadcast(T.where(c, g, 0.0), a.shape),
        unbroadcast(T.where(c, 0.0, g), b.shape),
    )


def _no_vjp(node, y, xs, g):
    return tuple(None for _ in xs)


VJP_RULES = {
    Op.NEG: lambda n, y, xs, g: (-g,),
    Op.ABS: _abs_vjp,
    Op.EXP: lambda n, y, xs, g: (g * cj(y),),
    Op.LOG: lambda n, y, xs, g: (g / cj(xs[0]),),
    Op.SQRT: lambda n, y, xs, g: (g / (2.0 * cj(y)),),
    Op.SIN: lambda n, y, xs, g: (g * cj(T.cos(xs[0])),),
    Op.COS: lambda n, y, xs, g: (-g * cj(T.sin(xs[0])),),
    Op.TANH: lambda n, y, xs, g: (g * cj(1.0 - y * y),),
    Op.SIGN: _sign_vjp,
    Op.CONJ: lambda n, y, xs, g: (cj(g),),
    Op.REAL: lambda n, y, xs, g: (T.astype(g, xs[0].dtype),),
    Op.IMAG: lambda n, y, xs, g: (
        (T.astype(g, xs[0].dtype) * 1j,) if xs[0].dtype.kind == "c" else (None,)
    ),
    Op.INVERT: _no_vjp,
    Op.CAST: lambda n, y, xs, g: (g,),
    Op.ADD: _binary_vjp(lambda n, y, xs, g: (g, g)),
    Op.SUB: _binary_vjp(lambda n, y, xs, g: (g, -g)),
    Op.MUL: _binary_vjp(lambda n, y, xs, g: (g * cj(xs[1]), g * cj(xs[0]))),
    Op.DIV: _binary_vjp(lambda n, y, xs, g: (g / cj(xs[1]), -g * cj(y / xs[1]))),
    Op.FLOORDIV: _binary_vjp(lambda n, y, xs, g: (None, None)),
    Op.MOD: _binary_vjp(lambda n, y, xs, g: (g, -g * T.floor_divide(xs[0], xs[1]))),
    Op.POW: _binary_vjp(_pow_vjp),
    Op.MAXIMUM: _binary_vjp(
        lambda n, y, xs, g: (T.where(xs[0] >= xs[1], g, 0.0), T.where(xs[0] >= xs[1], 0.0, g))
    ),
    Op.MINIMUM: _binary_vjp(
        lambda n, y, xs, g: (T.where(xs[0] <= xs[1], g, 0.0), T.where(xs[0] <= xs[1], 0.0, g))
    ),
    Op.EQ: _no_vjp,
    Op.NE: _no_vjp,
    Op.LT: _no_vjp,
    Op.LE: _no_vjp,
    Op.GT: _no_vjp,
    Op.GE: _no_vjp,
    Op.AND: _no_vjp,
    Op.OR: _no_vjp,
    Op.XOR: _no_vjp,
    Op.WHERE: _where_vjp,
}


# ---- JVP rules -------------------------------------------------------------------------------


def _abs_jvp(node, y, xs, ts):
    (x,), (t,) = xs, ts
    if x.dtype.kind == "c":
        safe = T.where(y == 0, 1.0, y)
        return T.where(y == 0, 0.0, T.real(T.conj(x) * t) / safe)
    return t * T.sign(x)


def _imag_jvp(node, y, xs, ts):
    return T.imag(ts[0]) if xs[0].dtype.kind == "c" else None


def _zero_jvp(node, y, xs, ts):
    return None


def _times(t: Tangent, factor) -> Tangent:
    return None if t is None else t * factor


def _pow_jvp(node, y, xs, ts):
    (a, b), (ta, tb) = xs, ts
    da = _times(ta, _pow_da(a, b))
    db = _times(tb, T.where(a == 0, 0.0, T.log(T.where(a == 0, 1.0, a)) * y))
    return add_all([da, db])


def _sub_jvp(node, y, xs, ts):
    ta, tb = ts
    if tb is None:
        return ta
    return -tb if ta is None else ta - tb


def _div_jvp(node, y, xs, ts):
    (_, b), (ta, tb) = xs, ts
    return add_all([None if ta is None else ta / b, _times(tb, -y / b)])


def _select_jvp(mask_first):
    """maximum / minimum: the tangent of the operand that wins (the first on ties)."""

    def rule(node, y, xs, ts):
        (a, b), (ta, tb) = xs, ts
        first = mask_first(a, b)
        return T.where(first, 0.0 if ta is None else ta, 0.0 if tb is None else tb)

    return rule


def _mod_jvp(node, y, xs, ts):
    (a, b), (ta, tb) = xs, ts
    return add_all([ta, _times(tb, -T.floor_divide(a, b))])


def _where_jvp(node, y, xs, ts):
    c, (_, ta, tb) = xs[0], ts
    return T.where(c, 0.0 if ta is None else ta, 0.0 if tb is None else tb)


JVP_RULES = {
    Op.NEG: linear_jvp,
    Op.ABS: _abs_jvp,
    Op.EXP: lambda n, y, xs, ts: ts[0] * y,
    Op.LOG: lambda n, y, xs, ts: ts[0] / xs[0],
    Op.SQRT: lambda n, y, xs, ts: ts[0] / (2.0 * y),
    Op.SIN: lambda n, y, xs, ts: ts[0] * T.cos(xs[0]),
    Op.COS: lambda n, y, xs, ts: -ts[0] * T.sin(xs[0]),
    Op.TANH: lambda n, y, xs, ts: ts[0] * (1.0 - y * y),
    Op.SIGN: _sign_jvp,
    Op.CONJ: linear_jvp,
    Op.REAL: linear_jvp,
    Op.IMAG: _imag_jvp,
    Op.INVERT: _zero_jvp,
    Op.CAST: linear_jvp,  # complex -> real keeps the real part of the tangent too
    Op.ADD: lambda n, y, xs, ts: add_all(ts),
    Op.SUB: _sub_jvp,
    Op.MUL: lambda n, y, xs, ts: add_all([_times(ts[0], xs[1]), _times(ts[1], xs[0])]),
    Op.DIV: _div_jvp,
    Op.FLOORDIV: _zero_jvp,
    Op.MOD: _mod_jvp,
    Op.POW: _pow_jvp,
    Op.MAXIMUM: _select_jvp(lambda a, b: a >= b),
    Op.MINIMUM: _select_jvp(lambda a, b: a <= b),
    Op.EQ: _zero_jvp,
    Op.NE: _zero_jvp,
    Op.LT: _zero_jvp,
    Op.LE: _zero_jvp,
    Op.GT: _zero_jvp,
    Op.GE: _zero_jvp,
    Op.AND: _zero_jvp,
    Op.OR: _zero_jvp,
    Op.XOR: _zero_jvp,
    Op.WHERE: _where_jvp,
}


# ---- registration ----------------------------------------------------------------------------

for _op, _fn in UNARY.items():
    register_op(
        _op,
        OpKind.ELEMENTWISE,
        _unary_infer(_op, _fn),
        (lambda f: lambda xs, at: f(xs[0]))(_fn),
        1,
        vjp=VJP_RULES[_op],
        jvp=JVP_RULES[_op],
        cost=_elements,
        check_attrs=check_no_attrs,
    )
for _op, _fn in BINARY.items():
    register_op(
        _op,
        OpKind.ELEMENTWISE,
        _binary_infer(_op, _fn),
        (lambda f: lambda xs, at: f(xs[0], xs[1]))(_fn),
        2,
        vjp=VJP_RULES[_op],
        jvp=JVP_RULES[_op],
        cost=_elements,
        check_attrs=check_no_attrs,
    )
register_op(
    Op.CAST,
    OpKind.ELEMENTWISE,
    _cast_infer,
    _cast_ref,
    1,
    attrs=CastAttrs,
    vjp=VJP_RULES[Op.CAST],
    jvp=JVP_RULES[Op.CAST],
    cost=_elements,
    check_attrs=_check_cast,
    fmt=lambda at: f"[{np.dtype(at.dtype).name}]",
)
register_op(
    Op.WHERE,
    OpKind.ELEMENTWISE,
    _where_infer,
    lambda xs, at: np.where(*xs),
    3,
    vjp=VJP_RULES[Op.WHERE],
    jvp=JVP_RULES[Op.WHERE],
    cost=_elements,
    check_attrs=check_no_attrs,
)


# ---- builders ---------------------------------------------------------------------------


def _unary(op: Op, x: Any) -> Node:
    return make_node(op, (lift(x, op.value),))


def _binary(op: Op, a: Any, b: Any) -> Node:
    if isinstance(a, Value):
        if isinstance(b, Value):
            return make_node(op, (a.node, b.node))
        tb = type(b)
        if tb is float or tb is int:  # the hot path of traced loops: x * 0.5
            return make_node(op, (a.node, scalar_node(b, a.node.dtype, op)))
    return make_node(op, _lift_pair(a, b, op.value))


@builder
def conj(x):
    n = lift(x, "conj")
    if n.dtype.kind == "b":
        return astype(n, "int8")  # NumPy's conjugate of booleans is int8
    return n if n.dtype.kind != "c" else make_node(Op.CONJ, (n,))


builder(conj, "conjugate")


@builder
def real(x):
    n = lift(x, "real")
    return n if n.dtype.kind != "c" else make_node(Op.REAL, (n,))


@builder(public=False)
def operator_power(x: Any, e: Any) -> Node:
    """``x ** e`` as NumPy's ``**`` operator computes it: for a Python scalar exponent it takes
    fast paths that are not ``np.power`` on special values (``(1+infj) ** 0.5`` is sqrt's
    inf+infj, power's inf+nanj) or in dtype (``bool_array ** 2`` is square's int8, power's
    int64): an inexact array to 0.5 is ``sqrt``, any array to the int 2 is ``x * x`` (bool
    squared as int8). Everything else is ``power`` (for complex ``x ** -1`` NumPy's operator
    takes ``np.reciprocal``, which tenloom has no op for: docs/reliability.md)."""
    if type(e) in (int, float) and e in (0.5, 2):
        kind = x.dtype.kind
        if e == 0.5 and kind in "fc":
            return sqrt(x)
        if type(e) is int and e == 2:  # complex ** 2.0 is NumPy's power again
            base = astype(x, "int8") if kind == "b" else x
            return multiply(base, base)
    return power(x, e)


# op -> (result when a Python int lies above every value of the array's integer dtype, below)
_BEYOND = {
    Op.EQ: (False, False),
    Op.NE: (True, True),
    Op.LT: (True, False),
    Op.LE: (True, False),
    Op.GT: (False, True),
    Op.GE: (False, True),
}


_MIRROR = {Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE, Op.EQ: Op.EQ, Op.NE: Op.NE}


_WIDE_INTS = tuple((np.iinfo(d).min, np.iinfo(d).max, np.dtype(d)) for d in ("int64", "uint64"))


_INT_RANGES: dict[np.dtype, tuple[int, int]] = {}


def _int_range(dt: np.dtype) -> tuple[int, int]:
    r = _INT_RANGES.get(dt)
    if r is None:
        info = np.iinfo(dt)
        r = _INT_RANGES[dt] = (int(info.min), int(info.max))
    return r


def _compare_beyond(op: Op, n: Node, value: int) -> Node | None:
    """``n <op> value`` for a Python int outside the range of n's integer dtype, which NumPy 2
    compares by its true value (``int32_array < 2**40`` is all True) where arithmetic would
    raise: the int takes int64 or uint64 when it fits one of them (NumPy compares mixed
    integer dtypes exactly), else the result follows from its sign alone. None when ``value``
    fits n's dtype (the ordinary NEP 50 path)."""
    if n.dtype.kind not in "iu":
        return None
    lo, hi = _int_range(n.dtype)
    if lo <= value <= hi:
        return None
    for lo, hi, wide in _WIDE_INTS:
        if lo <= value <= hi:
            return make_node(op, (n, full_node((), value, wide, op.value)))
    from tenloom.graph.ops.movement import broadcast_to  # a later family

    return broadcast_to(full((), _BEYOND[op][0 if value > 0 else 1], "bool"), n.shape)


def _compare(op: Op, a: Any, b: Any) -> Node:
    """A comparison (NEP 50, with NumPy 2's exact comparison of out-of-range Python ints)."""
    if type(b) is int and not isinstance(a, _SCALARS):
        an = lift(a, op.value)
        out = _compare_beyond(op, an, b)
        return out if out is not None else _binary(op, an, b)
    if type(a) is int and not isinstance(b, _SCALARS):
        bn = lift(b, op.value)
        out = _compare_beyond(_MIRROR[op], bn, a)
        return out if out is not None else _binary(op, a, bn)
    return _binary(op, a, b)


@builder
def where(condition, x=None, y=None) -> Node:
    """Elementwise ``x`` where ``condition`` else ``y`` (NumPy's three-argument form)."""
    if x is None or y is None:
        # NumPy's one-argument form is nonzero(condition): its shape depends on the values
        raise ConcretizationError(
            "where: give condition, x and y; where(condition) alone is nonzero(condition), "
            "whose shape depends on the values (evaluate the condition first)"
        )
    c = lift(condition, "where")
    xn, yn = _lift_pair(x, y, "where")
    return make_node(Op.WHERE, (c, xn, yn))


@builder
def clip(a, a_min=None, a_max=None) -> Node:
    """``a`` limited to ``[a_min, a_max]`` as ``numpy.clip``; either bound may be None (both:
    ``a``, as NumPy 2)."""
    out = asarray(a)
    if a_min is None and a_max is None:
        if out.dtype.kind == "b":  # NumPy runs np.positive then, which has no bool loop
            raise DTypeError("clip: a bool array with both bounds None (NumPy has no loop)")
        return out
    if out.dtype.kind in "iu":
        # as NumPy 2 (numpy/_core/_methods.py _clip): a Python int bound at or beyond the int
        # dtype's range is no bound, decided before any promotion
        lo, hi = _int_range(out.dtype)
        if type(a_min) is int and a_min <= lo:
            a_min = None
        if type(a_max) is int and a_max >= hi:
            a_max = None
        if a_min is None and a_max is None:
            return out
    # then NumPy's clip runs in the dtype of all three together (a float bound makes an int
    # array float64 first, a complex one a float16 array complex64: -2**31 is then a bound,
    # not float16's -inf)
    scalars = [b for b in (a_min, a_max) if b is not None and isinstance(b, _SCALARS)]
    if scalars:
        common = np.result_type(out.dtype, *scalars)
        if common != out.dtype and common in _SUPPORTED_SET:
            out = astype(out, common)
    # as NumPy 2 (numpy/_core/_methods.py _clip): one bound is maximum or minimum, which take
    # the bound where it ties with ``a``; two are the clip ufunc, which keeps ``a`` there
    # (clip(-0.0, 0.0, 1.0) is -0.0) and takes a NaN bound: a bound replaces ``a`` only where
    # ``a`` is beyond it or the bound is NaN
    if a_max is None:
        return maximum(out, a_min)
    if a_min is None:
        return minimum(out, a_max)
    return _clip_bound(_clip_bound(out, a_min, Op.LT), a_max, Op.GT)


def _clip_bound(out: Node, b: Any, beyond: Op) -> Node:
    """``b`` where ``out`` is ``beyond`` it or ``b`` is NaN, else ``out`` (a Python scalar
    bound stays weak, as in NumPy: it does not widen ``out``'s dtype)."""
    test = _binary(beyond, out, b)
    if isinstance(b, _SCALARS):
        if b != b:  # a NaN bound: NaN everywhere
            test = _binary(Op.OR, test, True)
    else:
        bn = lift(b, "clip")
        test = _binary(Op.OR, test, _binary(Op.NE, bn, bn))
    return where(test, b, out)


@builder
def astype(x, dtype) -> Node:
    n = lift(x, "astype")
    dt = normalize_dtype(dtype, "astype")
    if dt == n.dtype:
        return n
    return make_node(Op.CAST, (n,), (dt.str,))


# The builders that only lift their operands and make the node, by public name (NumPy's):
# the same function for every op, made once per op.
_UNARY_BUILDERS = {
    "negative": Op.NEG,
    "abs": Op.ABS,
    "exp": Op.EXP,
    "log": Op.LOG,
    "sqrt": Op.SQRT,
    "sin": Op.SIN,
    "cos": Op.COS,
    "tanh": Op.TANH,
    "sign": Op.SIGN,
    "imag": Op.IMAG,
    "invert": Op.INVERT,
}
_BINARY_BUILDERS = {
    "add": Op.ADD,
    "subtract": Op.SUB,
    "multiply": Op.MUL,
    "divide": Op.DIV,
    "floor_divide": Op.FLOORDIV,
    "remainder": Op.MOD,
    "power": Op.POW,
    "maximum": Op.MAXIMUM,
    "minimum": Op.MINIMUM,
    "bitwise_and": Op.AND,
    "bitwise_or": Op.OR,
    "bitwise_xor": Op.XOR,
}
# comparisons: NEP 50 and NumPy 2's exact comparison of Python ints beyond the dtype's range
_COMPARE_BUILDERS = {
    "equal": Op.EQ,
    "not_equal": Op.NE,
    "less": Op.LT,
    "less_equal": Op.LE,
    "greater": Op.GT,
    "greater_equal": Op.GE,
}


def _op_builder(name: str, op: Op, make: Any, arity: int):
    if arity == 1:

        def build(x):
            return make(op, x)

    else:

        def build(a, b):
            return make(op, a, b)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"``{name}`` elementwise, with NumPy's broadcasting and dtypes ({op.value})."
    return builder(build, name)


for _table, _make, _arity in (
    (_UNARY_BUILDERS, _unary, 1),
    (_BINARY_BUILDERS, _binary, 2),
    (_COMPARE_BUILDERS, _compare, 2),
):
    for _name, _op in _table.items():
        _op_builder(_name, _op, _make, _arity)
builder(BUILDERS["abs"], "absolute")
builder(BUILDERS["divide"], "true_divide")
negative, multiply, divide, power = (
    BUILDERS[n] for n in ("negative", "multiply", "divide", "power")
)
sqrt, maximum, minimum = (BUILDERS[n] for n in ("sqrt", "maximum", "minimum"))
