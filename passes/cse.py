"""cse: common subexpressions beyond hash-consing.

Hash-consing already makes structurally identical nodes one object. This pass also puts the
operands of commutative elementwise ops in one order, so that ``a + b`` and ``b + a`` (and
``a * b`` / ``b * a``, ``maximum``, ``==``, ...) become one node:

    op(b, a) -> op(a, b)   for op in {add, mul, maximum, minimum, eq, ne, and, or, xor}
                           when a precedes b in the graph's topological order

IEEE addition and multiplication are commutative, so results are bitwise unchanged.
"""

from __future__ import annotations

from tenloom.graph.graph import Graph
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops import Op
from tenloom.passes.registry import PassContext, register_pass
from tenloom.passes.rewrite import map_graph

COMMUTATIVE = frozenset(
    {Op.ADD, Op.MUL, Op.MAXIMUM, Op.MINIMUM, Op.EQ, Op.NE, Op.AND, Op.OR, Op.XOR}
)


@register_pass("cse")
def cse(graph: Graph, ctx: PassContext) -> Graph:
    """Order commutative operands canonically so mirrored expressions share one node."""
    # position in the original order is a deterministic rank; rewritten nodes inherit it
    rank: dict[int, int] = {}
    swapped = 0
    before = len(graph.order)

    def fn(node: Node) -> Node:
        nonlocal swapped
        if node.op in COMMUTATIVE:
            a, b = node.inputs
            if rank.get(id(b), -1) < rank.get(id(a), -1):
                node = make_node(node.op, (b, a), node.attrs)
                swapped += 1
        rank.setdefault(id(node), len(rank))
        return node

    res = map_graph(graph, fn)
    ctx.record("cse", reordered=swapped, nodes_merged=before - len(res.order))
    return res
