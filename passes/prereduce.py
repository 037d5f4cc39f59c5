"""prereduce (trace pre-reduction): inside an n-ary EINSUM, work on one operand alone first.

    einsum(..., x[i i j k], ...)  with k in no other term nor the output
        -> einsum(..., einsum('iijk->ij', x), ...)

Repeated labels (diagonals) are taken and lone labels summed before any pairwise contraction,
so the order search and the GEMMs only see labels shared between operands.
"""

from __future__ import annotations

from collections import Counter

from tenloom.graph.einsum import einsum_node
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node
from tenloom.graph.ops import Op
from tenloom.passes.registry import PassContext, register_pass
from tenloom.passes.rewrite import map_graph


def reduced_term(term, others: Counter, output) -> tuple:
    """The labels of ``term`` that must survive: each once, if used elsewhere or in the output."""
    keep = []
    for lab in term:
        if lab in keep:
            continue
        if others[lab] or lab in output:
            keep.append(lab)
    return tuple(keep)


@register_pass("prereduce")
def prereduce(graph: Graph, ctx: PassContext) -> Graph:
    """Take diagonals and sum lone labels of each operand first (see the module docstring)."""
    reduced = 0

    def fn(node: Node) -> Node:
        nonlocal reduced
        if node.op is not Op.EINSUM or len(node.inputs) < 2:
            return node
        terms, out = node.attrs
        total = Counter(lab for t in terms for lab in t)
        nodes, new_terms, changed = [], [], False
        for x, t in zip(node.inputs, terms):
            others = total - Counter(t)
            keep = reduced_term(t, others, out)
            if keep != tuple(t):
                x = einsum_node([x], [t], keep)
                reduced += 1
                changed = True
            nodes.append(x)
            new_terms.append(keep)
        return einsum_node(nodes, new_terms, out) if changed else node

    res = map_graph(graph, fn)
    ctx.record("prereduce", operands_reduced=reduced)
    return res
