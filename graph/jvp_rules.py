"""JVP (forward-mode) rules of every differentiable op, registered onto the op registry.

Each rule is ``rule(node, y, xs, ts) -> Value | None``: ``y`` is the node's output, ``xs`` its
inputs and ``ts`` their tangents (a Value, or None for a symbolic zero), all lazy Values; the
result is the output tangent J t (None: zero). ``graph.autodiff.tangent_of`` only calls a rule
when at least one input has a tangent and the output is floating, and brings the result to the
node's dtype and shape (a tangent of one broadcast operand is broadcast there).

Holomorphic ops take the plain complex derivative (f'(x) t). The others are chosen so that
Re<J t, c> = Re<t, J^H c> holds against the VJP rules of ``autodiff_rules`` (PyTorch's
convention): ``conj`` -> conj(t), ``real``/``imag`` -> real(t)/imag(t), complex ``abs`` ->
Re(conj(x) t) / |x|. Subgradients match the VJP rules: ``abs`` and ``sign`` use sign(0) = 0 (so
``sign``, ``floordiv`` and comparisons have zero tangent); ``maximum``/``minimum`` follow the
first operand on ties; reductions ``max``/``min`` average the tangent over tied elements;
``where`` ignores its condition; ``prod`` takes the product of the other elements (exact at
zeros).

Multilinear ops (einsum, matmul, tensordot, CONTRACT) get one term per operand that has a
tangent: the same op with that operand replaced by its tangent. For a pairwise contraction tree
(after the order pass) that is two pairwise contractions per tree node. A SLICED network gives
one SLICED node in forward mode, the same slicing carrying the tangents through the tree slice
by slice. FUSED regions chain their steps' rules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tenloom.graph import ops  # noqa: F401  (the ops must be defined before rules attach)
from tenloom.graph.autodiff import tangent_of
from tenloom.graph.autodiff_rules import expand_reduced, prod_others
from tenloom.graph.errors import DTypeError
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops import Op, register_jvp
from tenloom.graph.value import V as T
from tenloom.graph.value import Value

Tangent = Value | None


def add_all(terms: Sequence[Tangent]) -> Tangent:
    """Sum of the non-zero terms (None when all are symbolic zeros)."""
    out = None
    for term in terms:
        if term is not None:
            out = term if out is None else out + term
    return out


def or_zeros(t: Tangent, like: Value) -> Value:
    return t if t is not None else T.zeros(like.shape, like.dtype)


# ---- elementwise -----------------------------------------------------------------------------


def _linear(node, y, xs, ts):
    """Linear in its single input: the op itself applied to the tangent."""
    (t,) = ts
    return Value(make_node(node.op, (t.node,), node.attrs))


def _abs(node, y, xs, ts):
    (x,), (t,) = xs, ts
    if x.dtype.kind == "c":
        safe = T.where(y == 0, 1.0, y)
        return T.where(y == 0, 0.0, T.real(T.conj(x) * t) / safe)
    return t * T.sign(x)


def _imag(node, y, xs, ts):
    return T.imag(ts[0]) if xs[0].dtype.kind == "c" else None


def _zero(node, y, xs, ts):
    return None


UNARY_RULES: dict[Op, Callable] = {
    Op.NEG: _linear,
    Op.ABS: _abs,
    Op.EXP: lambda n, y, xs, ts: ts[0] * y,
    Op.LOG: lambda n, y, xs, ts: ts[0] / xs[0],
    Op.SQRT: lambda n, y, xs, ts: ts[0] / (2.0 * y),
    Op.SIN: lambda n, y, xs, ts: ts[0] * T.cos(xs[0]),
    Op.COS: lambda n, y, xs, ts: -ts[0] * T.sin(xs[0]),
    Op.TANH: lambda n, y, xs, ts: ts[0] * (1.0 - y * y),
    Op.SIGN: _zero,
    Op.CONJ: _linear,
    Op.REAL: _linear,
    Op.IMAG: _imag,
    Op.CAST: _linear,  # complex -> real keeps the real part of the tangent too
}


def _times(t: Tangent, factor) -> Tangent:
    return None if t is None else t * factor


def _pow(node, y, xs, ts):
    (a, b), (ta, tb) = xs, ts
    da = _times(ta, b * a ** (b - 1.0))
    db = _times(tb, T.where(a == 0, 0.0, T.log(T.where(a == 0, 1.0, a)) * y))
    return add_all([da, db])


def _sub(node, y, xs, ts):
    ta, tb = ts
    if tb is None:
        return ta
    return -tb if ta is None else ta - tb


def _div(node, y, xs, ts):
    (_, b), (ta, tb) = xs, ts
    return add_all([None if ta is None else ta / b, _times(tb, -y / b)])


def _select(mask_first):
    """maximum / minimum: the tangent of the operand that wins (the first on ties)."""

    def rule(node, y, xs, ts):
        (a, b), (ta, tb) = xs, ts
        first = mask_first(a, b)
        return T.where(first, 0.0 if ta is None else ta, 0.0 if tb is None else tb)

    return rule


def _mod(node, y, xs, ts):
    (a, b), (ta, tb) = xs, ts
    return add_all([ta, _times(tb, -T.floor_divide(a, b))])


BINARY_RULES: dict[Op, Callable] = {
    Op.ADD: lambda n, y, xs, ts: add_all(ts),
    Op.SUB: _sub,
    Op.MUL: lambda n, y, xs, ts: add_all([_times(ts[0], xs[1]), _times(ts[1], xs[0])]),
    Op.DIV: _div,
    Op.POW: _pow,
    Op.MAXIMUM: _select(lambda a, b: a >= b),
    Op.MINIMUM: _select(lambda a, b: a <= b),
    Op.MOD: _mod,
    Op.FLOORDIV: _zero,
}


def _where(node, y, xs, ts):
    c, (_, ta, tb) = xs[0], ts
    return T.where(c, 0.0 if ta is None else ta, 0.0 if tb is None else tb)


# ---- reductions ------------------------------------------------------------------------------


def _prod(node, y, xs, ts):
    axes, keepdims = node.attrs
    return T.sum(ts[0] * prod_others(node, xs[0]), axes, keepdims=keepdims)


def _extreme(node, y, xs, ts):
    (x,), (t,) = xs, ts
    axes, keepdims = node.attrs
    mask = T.astype(x == expand_reduced(y, node), t.dtype)
    count = T.sum(mask, axes, keepdims=keepdims)
    return T.sum(mask * t, axes, keepdims=keepdims) / count


# ---- movement --------------------------------------------------------------------------------


def _concat(node, y, xs, ts):
    parts = [or_zeros(t, x).node for x, t in zip(xs, ts)]
    return Value(make_node(Op.CONCAT, tuple(parts), node.attrs))


# ---- multilinear -----------------------------------------------------------------------------


def _multilinear(node, y, xs, ts):
    """One term per operand with a tangent: the op with that operand replaced by it. Holds for
    einsum (repeated labels, hyper-indices and an operand used twice included), matmul,
    tensordot and CONTRACT. A SLICED network instead gets one SLICED node in forward mode
    (graph/ops_sliced.py): per slice, the tree with the tangents carried alongside."""
    if node.op is Op.SLICED:
        return _sliced(node, xs, ts)
    ins = [x.node for x in xs]
    terms = []
    for k, t in enumerate(ts):
        if t is None:
            continue
        replaced = ins[:k] + [t.node] + ins[k + 1 :]
        terms.append(Value(make_node(node.op, tuple(replaced), node.attrs)))
    return add_all(terms)


def _sliced(node, xs, ts):
    terms, out, sliced, path, wrt = node.attrs
    if wrt is not None:
        raise DTypeError("jvp: a sliced network's derivative sweep cannot be differentiated")
    pos = tuple(k for k, t in enumerate(ts) if t is not None)
    if not pos:
        return None
    ins = tuple(x.node for x in xs) + tuple(ts[k].node for k in pos)
    attrs = (terms, out, sliced, path, tuple(-1 - k for k in pos))
    return Value(make_node(Op.SLICED, ins, attrs))


# ---- fused regions ---------------------------------------------------------------------------


def _fused(node, y, xs, ts):
    """Chain the steps' rules: each step is rebuilt as its own node (the primal values that
    the rules need; the passes fuse them again) and its tangent follows from its arguments'."""
    program = node.attrs[0]
    vals: list[Node] = []
    tans: list[Tangent] = []
    for s, (op, attrs, args) in enumerate(program):
        ins = tuple(xs[i].node if kind == "in" else vals[i] for kind, i in args)
        arg_ts = tuple(ts[i] if kind == "in" else tans[i] for kind, i in args)
        step = make_node(op, ins, attrs)
        vals.append(step)
        # the last step's value is the region's: rules that read it (exp, tanh...) reuse it
        last = s == len(program) - 1
        tans.append(tangent_of(step, arg_ts, y if last else None))
    return tans[-1]


for _op, _rule in {**UNARY_RULES, **BINARY_RULES}.items():
    register_jvp(_op, _rule)
for _op in (Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.AND, Op.OR, Op.XOR, Op.INVERT):
    register_jvp(_op, _zero)
register_jvp(Op.WHERE, _where)
for _op in (
    Op.SUM,
    Op.RESHAPE,
    Op.TRANSPOSE,
    Op.LAYOUT,
    Op.BROADCAST,
    Op.SLICE,
    Op.SLICE_SCATTER,
    Op.DIAGONAL,
    Op.TRACE,
):
    register_jvp(_op, _linear)
register_jvp(Op.PROD, _prod)
register_jvp(Op.MAX, _extreme)
register_jvp(Op.MIN, _extreme)
register_jvp(Op.CONCAT, _concat)
for _op in (Op.EINSUM, Op.MATMUL, Op.TENSORDOT, Op.CONTRACT, Op.SLICED):
    register_jvp(_op, _multilinear)
register_jvp(Op.FUSED, _fused)
