"""merge_contractions: an EINSUM feeding another EINSUM, used nowhere else, is inlined.

    einsum(outer)(..., einsum(inner)(xs...), ...) -> einsum(...xs...)

The inner output labels take the outer term's labels for that operand (a repeated outer label
identifies them, which is how `trace(A @ B)` becomes `ij,ji->`); the inner summed labels get
fresh ones. Applied bottom-up, the whole multilinear part of a program becomes one n-ary
network that the order search sees at once. An inner einsum used twice is kept, so its value is
computed once.
"""

from __future__ import annotations

from tenloom.graph.einsum import einsum_node
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node, rebuild
from tenloom.graph.ops import Op
from tenloom.passes.registry import PassContext, register_pass
from tenloom.passes.rewrite import use_counts


def inline(outer_nodes, outer_terms, k: int, inner: Node, fresh: int):
    """Inline ``inner`` as operand k; returns (nodes, terms, next fresh label)."""
    in_terms, in_out = inner.attrs
    target = outer_terms[k]
    mapping = dict(zip(in_out, target))
    terms = []
    for t in in_terms:
        new = []
        for lab in t:
            if lab not in mapping:
                mapping[lab] = ("fresh", fresh)
                fresh += 1
            new.append(mapping[lab])
        terms.append(tuple(new))
    nodes = outer_nodes[:k] + list(inner.inputs) + outer_nodes[k + 1 :]
    terms = outer_terms[:k] + terms + outer_terms[k + 1 :]
    return nodes, terms, fresh


@register_pass("merge_contractions")
def merge_contractions(graph: Graph, ctx: PassContext) -> Graph:
    """Inline single-use EINSUM operands of EINSUM nodes (see the module docstring)."""
    counts = use_counts(graph)
    nesting: dict[int, tuple] = {}  # id(merged node) -> (node, nested operand positions)
    new: dict[int, Node] = {}
    uses: dict[int, int] = {}  # use counts carried over to rewritten nodes
    merged = 0
    for node in graph.order:
        ins = tuple(new[id(i)] for i in node.inputs)
        if node.op is Op.EINSUM and any(i.op is Op.EINSUM and uses.get(id(i), 2) == 1 for i in ins):
            nodes, terms = list(ins), list(node.attrs[0])
            out = node.attrs[1]
            fresh = 0
            groups: list = []  # per outer operand: a leaf position marker or a nested group
            for x in ins:
                if x.op is Op.EINSUM and uses.get(id(x), 2) == 1:
                    groups.append(nesting.get(id(x), (x, tuple(range(len(x.inputs)))))[1])
                else:
                    groups.append(None)
            k = 0
            for x in ins:
                if x.op is Op.EINSUM and uses.get(id(x), 2) == 1:
                    nodes, terms, fresh = inline(nodes, terms, k, x, fresh)
                    merged += 1
                    k += len(x.inputs)
                else:
                    k += 1
            res = einsum_node(nodes, terms, out)
            if res.op is Op.EINSUM and len(res.inputs) == len(nodes):
                nesting[id(res)] = (res, _renumber(groups))
        else:
            res = rebuild(node, ins)
        new[id(node)] = res
        uses[id(res)] = uses.get(id(res), 0) + counts.get(id(node), 0)
    ctx.record("merge_contractions", merged=merged)
    if not merged:
        return graph
    res_graph = graph.with_outputs(tuple(new[id(o)] for o in graph.outputs))
    res_graph.meta["nesting"] = nesting
    return res_graph


def _renumber(groups: list) -> tuple:
    """Operand positions of the merged network, nested as the user's calls were: a leaf is an
    int, an inlined call a tuple of its own (possibly nested) operands. Iterative."""
    counter = 0
    out: list = []
    # stack of (list being filled, remaining items to visit)
    stack: list = [(out, list(groups)[::-1])]
    while stack:
        target, todo = stack[-1]
        if not todo:
            stack.pop()
            if stack:
                stack[-1][0].append(tuple(target))
            continue
        item = todo.pop()
        if item is None or isinstance(item, int):
            target.append(counter)
            counter += 1
        else:
            stack.append(([], list(item)[::-1]))
    return tuple(out)
