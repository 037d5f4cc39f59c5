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
from tenloom.graph.ops.semiring import semiring_node
from tenloom.passes.registry import PassContext, register_pass
from tenloom.passes.rewrite import use_counts

_NETWORKS = (Op.EINSUM, Op.SEMIRING_EINSUM)


def _same_algebra(user: Node, x: Node) -> bool:
    """Whether ``x`` is a network of the same op and semiring as ``user``."""
    return x.op is user.op and (x.op is Op.EINSUM or x.attrs.semiring == user.attrs.semiring)


@register_pass("merge_contractions")
def merge_contractions(graph: Graph, ctx: PassContext) -> Graph:
    """Inline single-use EINSUM operands of EINSUM nodes, and SEMIRING_EINSUM operands of
    SEMIRING_EINSUM nodes of the same semiring (see the module docstring).

    Linear in the graph: an EINSUM whose only use is an EINSUM operand is not built on its own
    (a chain of n products would otherwise build networks of 1, 2, ..., n operands); the
    outermost network of each nest is flattened once, depth first (``_flatten``)."""
    counts = use_counts(graph)
    # single-use EINSUMs feeding an EINSUM: inlined into their user, never built alone
    deferred: set[int] = set()
    for node in graph.order:
        if node.op in _NETWORKS:
            for i, t in zip(node.inputs, node.attrs.terms):
                # only a call in the same dtype: NumPy computes a narrower call in its own dtype
                # (a bool matmul is an OR of ANDs, int32 partial sums wrap) before its user
                # widens the result, and one merged network would compute it in the wider one;
                # and of the same semiring (never an ordinary network into a semiring one)
                # (a count result's term names its pair axis when read as raw weights: no)
                if (
                    _same_algebra(node, i)
                    and len(t) == len(i.attrs.out)
                    and counts.get(id(i), 0) == 1
                    and i.dtype == node.dtype
                ):
                    deferred.add(id(i))
    pending: dict[int, tuple] = {}  # id(deferred node) -> (node, its rewritten inputs)
    nesting: dict[int, tuple] = {}  # id(merged node) -> (node, nested operand positions)
    new: dict[int, Node] = {}
    merged = 0
    for node in graph.order:
        if id(node) in deferred:
            pending[id(node)] = (node, tuple(new.get(id(i), i) for i in node.inputs))
            new[id(node)] = node  # a placeholder: only its user (which flattens it) reads it
            continue
        ins = tuple(new[id(i)] for i in node.inputs)
        if node.op in _NETWORKS and any(id(i) in pending for i in ins):
            nodes, terms, nest, count = _flatten(node, ins, pending)
            merged += count
            if node.op is Op.EINSUM:
                res = einsum_node(nodes, terms, node.attrs.out)
            else:
                res = semiring_node(nodes, terms, node.attrs.out, node.attrs.semiring)
            if res.op is node.op and len(res.inputs) == len(nodes):
                nesting[id(res)] = (res, nest)
        else:
            res = rebuild(node, ins)
        new[id(node)] = res
    ctx.record("merge_contractions", merged=merged)
    if not merged:
        return graph
    res_graph = graph.with_outputs(tuple(new[id(o)] for o in graph.outputs))
    res_graph.meta["nesting"] = nesting
    return res_graph


def _flatten(node: Node, ins: tuple, pending: dict):
    """The operands and terms of ``node`` with its pending (deferred) EINSUM operands inlined,
    depth first and iteratively: returns (nodes, terms, nested positions, inlined count).

    An inlined network's output labels take the labels of the term it replaces (a repeated
    outer label identifies them, which is how ``trace(A @ B)`` becomes ``ij,ji->``); its summed
    labels get fresh ones. The nested positions mirror the user's calls: a leaf is an int, an
    inlined call a tuple of its own (possibly nested) operands."""
    nodes: list[Node] = []
    terms: list[tuple] = []
    fresh = 0
    count = 0
    root: list = []
    # frames: (iterator over (operand, term), positions being filled, parent list, slot)
    stack: list = [(iter(zip(ins, node.attrs.terms)), root, None, 0)]
    while stack:
        it, nest, parent, slot = stack[-1]
        for x, t in it:
            entry = pending.get(id(x))
            if entry is None:
                nest.append(len(nodes))
                nodes.append(x)
                terms.append(tuple(t))
                continue
            inner, inner_ins = entry
            in_terms, in_out = inner.attrs[:2]
            mapping = dict(zip(in_out, t))
            mapped = []
            for term in in_terms:
                labels = []
                for lab in term:
                    if lab not in mapping:
                        mapping[lab] = ("fresh", fresh)
                        fresh += 1
                    labels.append(mapping[lab])
                mapped.append(tuple(labels))
            count += 1
            nest.append(None)
            stack.append((iter(zip(inner_ins, mapped)), [], nest, len(nest) - 1))
            break
        else:
            stack.pop()
            if parent is not None:
                parent[slot] = tuple(nest)
    return nodes, terms, tuple(root), count
