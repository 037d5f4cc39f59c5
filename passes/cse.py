"""cse: common subexpressions beyond hash-consing.

Hash-consing already makes structurally identical nodes one object. This pass also puts the
operands of commutative elementwise ops in one order, so that ``a + b`` and ``b + a`` (and
``a * b`` / ``b * a``, ``==``, ...) become one node:

    op(b, a) -> op(a, b)   for op in {add, mul, eq, ne, and, or, xor}
                           when a's structural fingerprint is smaller than b's

The fingerprint hashes a node's op, attributes and its inputs' fingerprints (sorted for the
commutative ops), so it does not depend on operand order and the pass is idempotent.

IEEE addition and multiplication are commutative, so results are bitwise unchanged.
"""

from __future__ import annotations

from tenloom.graph.graph import Graph
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops import Op
from tenloom.passes.registry import PassContext, register_pass
from tenloom.passes.rewrite import map_graph

# maximum and minimum are left out: maximum(-0.0, 0.0) and maximum(0.0, -0.0) differ in sign
COMMUTATIVE = frozenset({Op.ADD, Op.MUL, Op.EQ, Op.NE, Op.AND, Op.OR, Op.XOR})


@register_pass("cse")
def cse(graph: Graph, ctx: PassContext) -> Graph:
    """Order commutative operands canonically so mirrored expressions share one node."""
    fp: dict[int, int] = {}
    swapped = 0
    before = len(graph.order)

    def fn(node: Node) -> Node:
        nonlocal swapped
        kids = [fp[id(i)] for i in node.inputs]
        if node.op in COMMUTATIVE:
            a, b = node.inputs
            if fp[id(b)] < fp[id(a)]:
                node = make_node(node.op, (b, a), node.attrs)
                swapped += 1
            kids.sort()
        fp[id(node)] = hash((node.op.value, node.attrs, node.shape, node.dtype.str, *kids))
        return node

    res = map_graph(graph, fn)
    ctx.record("cse", reordered=swapped, nodes_merged=before - len(res.order))
    return res
