"""simplify: constant folding of uniform (FULL) leaves and algebraic identities.

Rules (each applies to a node whose inputs are already simplified):
    elementwise(full(s1, v1), full(s2, v2), ...) -> full(broadcast(s1, s2, ...), f(v1, v2, ...))
    reshape/transpose/broadcast_to/slice(full(s, v))  -> full(s', v)
    x * 1, x / 1, x ** 1, x - 0 (same shape and dtype as x)  -> x  (complex x: not x * 1
        and x / 1, since NumPy's complex product and quotient turn (inf+0j)*1 into inf+nanj)
    neg(neg(x)) -> x;  conj(conj(x)) -> x
    transpose(transpose(x, p), q) -> transpose(x, p[q])  (-> x when the result is the identity)

Dead code needs no pass: a Graph is what its outputs reach, so nodes that no output uses are
never visited, scheduled or kept.
"""

from __future__ import annotations

import warnings

import numpy as np
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops import OPS, Op, OpKind
from tenloom.graph.ops.leaf import full_value
from tenloom.passes.registry import PassContext, register_pass
from tenloom.passes.rewrite import apply_rules, map_graph


def _full(shape, value, dtype: np.dtype) -> Node:
    return make_node(Op.FULL, (), (tuple(shape), dtype.str, np.asarray(value, dtype).tobytes()))


def _is_full(node: Node, value=None) -> bool:
    if node.op is not Op.FULL:
        return False
    if value is None:
        return True
    v = full_value(node.attrs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bool(v == value) and not (value == 0 and np.signbit(v.real))


def fold_elementwise(node: Node) -> Node | None:
    if not node.inputs or not all(i.op is Op.FULL for i in node.inputs):
        return None
    vals = [np.asarray(full_value(i.attrs)) for i in node.inputs]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            v = OPS[node.op].ref(vals, node.attrs)
        except Exception:  # leave it to run time, where errors are reported properly
            return None
    return _full(node.shape, v, node.dtype)


def fold_movement(node: Node) -> Node | None:
    (x,) = node.inputs
    if x.op is not Op.FULL:
        return None
    return _full(node.shape, full_value(x.attrs), node.dtype)


def _same(x: Node, node: Node) -> bool:
    return x.shape == node.shape and x.dtype == node.dtype


def drop_identity_factor(node: Node) -> Node | None:
    a, b = node.inputs
    if node.dtype.kind == "c" and node.op in (Op.MUL, Op.DIV):
        # complex arithmetic is not exact with one: NumPy multiplies (inf+0j)*(1+0j) into
        # inf+nanj and divides the same way (its power returns x for an exponent of 1)
        return None
    if node.op is Op.MUL:
        if _is_full(b, 1) and _same(a, node):
            return a
        if _is_full(a, 1) and _same(b, node):
            return b
    elif (
        node.op in (Op.DIV, Op.POW)
        and _is_full(b, 1)
        and _same(a, node)
        or node.op is Op.SUB
        and _is_full(b, 0)
        and _same(a, node)
    ):
        return a
    return None


def cancel_involution(node: Node) -> Node | None:
    (x,) = node.inputs
    return x.inputs[0] if x.op is node.op else None


def compose_transposes(node: Node) -> Node | None:
    (x,) = node.inputs
    if x.op is not Op.TRANSPOSE:
        return None
    p, q = x.attrs.perm, node.attrs.perm
    perm = tuple(p[i] for i in q)
    inner = x.inputs[0]
    if perm == tuple(range(len(perm))):
        return inner
    return make_node(Op.TRANSPOSE, (inner,), (perm,))


RULES: dict = {}
for _op, _d in OPS.items():
    if _d.kind is OpKind.ELEMENTWISE:
        RULES.setdefault(_op, []).append(fold_elementwise)
for _op in (Op.RESHAPE, Op.TRANSPOSE, Op.BROADCAST, Op.SLICE):
    RULES.setdefault(_op, []).append(fold_movement)
for _op in (Op.MUL, Op.DIV, Op.POW, Op.SUB):
    RULES[_op].append(drop_identity_factor)
RULES[Op.NEG].append(cancel_involution)
RULES[Op.CONJ].append(cancel_involution)
RULES[Op.TRANSPOSE].append(compose_transposes)


@register_pass("simplify")
def simplify(graph: Graph, ctx: PassContext) -> Graph:
    """Fold uniform constants and drop algebraic identities (rules in the module docstring)."""
    fired: dict[str, int] = {}
    out = map_graph(graph, apply_rules(RULES, fired))
    ctx.record("simplify", rewrites=sum(fired.values()), **fired)
    return out
