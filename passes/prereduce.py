"""prereduce (trace pre-reduction): inside an n-ary EINSUM, work on one operand alone first.

    einsum(..., x[i i j k], ...)  with k in no other term nor the output
        -> einsum(..., einsum('iijk->ij', x), ...)

Repeated labels (diagonals) are taken and lone labels summed before any pairwise contraction,
so the order search and the GEMMs only see labels shared between operands.

A reduction of a constant (such a one-operand einsum, or a sum) is computed here, once, into a
new constant, never bigger than the one it reads, rather than on every run:

    einsum('iijk->ij', const) -> const(value of einsum('iijk->ij', const))
    sum(const, axes)          -> const(value of the sum)

except in the pre-pass of grad, vjp and jvp (option ``fold_constants=False``): the tensors
differentiated with respect to may be constants or reductions of constants, and their uses must
stay visible for the derivative to flow back to them. The derivative graphs built from that
pre-pass have their reductions of constants folded when they are evaluated.

Only frozen constants fold (``graph/ops/leaf.is_frozen``: read-only down to their memory, as a
compiled plan's copies are): a writeable user array may change in place before the next run
of a cached graph, and a folded value would then be stale.
"""

from __future__ import annotations

import contextvars
from collections import Counter

import numpy as np
from tenloom.graph.build import _const_node
from tenloom.graph.einsum import einsum_node, in_network_dtype
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops import Op, op_def
from tenloom.graph.ops.leaf import is_frozen
from tenloom.passes.contraction_order import empty_network
from tenloom.passes.registry import PassContext, register_pass
from tenloom.passes.rewrite import map_graph


def reduced_term(term, total: Counter, output) -> tuple:
    """The labels of ``term`` that must survive: each once, if used elsewhere (``total``: the
    count of each label over the whole network, ``term`` included) or in the output."""
    own = Counter(term) if len(set(term)) != len(term) else None
    keep = []
    for lab in term:
        if lab in keep:
            continue
        if total[lab] > (1 if own is None else own[lab]) or lab in output:
            keep.append(lab)
    return tuple(keep)


# the frozen arrays the running prereduce folded reductions of (see still_frozen)
_FOLDED_FROM: contextvars.ContextVar[list | None] = contextvars.ContextVar(
    "folded_from", default=None
)


def _folded(node: Node) -> Node | None:
    """``node`` computed into a constant, when it reduces a constant (strictly smaller)."""
    if node.op not in (Op.EINSUM, Op.SUM) or len(node.inputs) != 1:
        return None
    (x,) = node.inputs
    if x.op is not Op.CONST or node.size >= x.size:
        return None
    source = x.attrs.constant.value
    if not is_frozen(source):
        # a user array that may change in place: the optimized graph outlives this call
        # (evaluate's cache), so its reduction runs with the values each run reads
        return None
    sources = _FOLDED_FROM.get()
    if sources is not None:
        sources.append(source)
    value = np.asarray(op_def(node.op).ref([source], node.attrs))
    if value.shape != node.shape:
        return None
    # its own memory (einsum returns a diagonal as a view of the input), in the node's dtype
    # as its kernel would give it (NumPy's sum widens small integers); frozen like its source
    value = np.array(value, dtype=node.dtype, order="C")
    value.flags.writeable = False
    return _const_node(value)


def _relabelled(nodes, terms, out) -> Node:
    """``einsum_node(nodes, terms, out)`` for operands whose shapes are their labels' sizes
    (an EINSUM node's operands, each perhaps reduced to the labels it keeps: nothing to
    squeeze): the labels renumbered in order of first appearance, as einsum_node does, without
    its checks (15 networks of 33 operands each: a millisecond)."""
    ids: dict = {}
    new_terms = tuple(tuple(ids.setdefault(lab, len(ids)) for lab in t) for t in terms)
    new_out = tuple(ids.setdefault(lab, len(ids)) for lab in out)
    return make_node(Op.EINSUM, tuple(nodes), (new_terms, new_out))


@register_pass("prereduce")
def prereduce(graph: Graph, ctx: PassContext) -> Graph:
    """Take diagonals and sum lone labels of each operand first, reductions of constants
    computed once (see the module docstring)."""
    reduced = folded = 0
    fold = ctx.options.fold_constants
    reductions: dict[tuple, Node] = {}  # (operand, its labels, labels kept) -> its reduction

    def fn(node: Node) -> Node:
        nonlocal reduced, folded
        const = _folded(node) if fold else None
        if const is not None:
            folded += 1
            return const
        if node.op is not Op.EINSUM or len(node.inputs) < 2:
            return node
        if any(0 in x.shape for x in node.inputs):  # a zero-size label
            # zeros whatever the operands hold: summing a zero-size lone label first would
            # give 0 * NaN = NaN where NumPy's empty sum gives 0
            return empty_network(node)
        terms, out = node.attrs
        if any(x.dtype != node.dtype for x in node.inputs):
            node = einsum_node(in_network_dtype(node.inputs, node.dtype), terms, out)
        total = Counter(lab for t in terms for lab in t)
        nodes, new_terms, changed = [], [], False
        for x, t in zip(node.inputs, terms):
            keep = reduced_term(t, total, out)
            if keep != tuple(t):
                key = (x, tuple(t), keep)  # one operand reduced alike in many networks
                done = reductions.get(key)
                if done is None:
                    done = einsum_node([x], [t], keep)
                    if fold and (const := _folded(done)) is not None:
                        done = const
                    reductions[key] = done
                folded += done.op is Op.CONST
                x = done
                reduced += 1
                changed = True
            nodes.append(x)
            new_terms.append(keep)
        return _relabelled(nodes, new_terms, out) if changed else node

    sources: list = []
    token = _FOLDED_FROM.set(sources)
    try:
        res = map_graph(graph, fn)
    finally:
        _FOLDED_FROM.reset(token)
    if sources:  # what a cached copy of this graph stays valid for (still_frozen)
        res.meta["folded_from"] = (*graph.meta.get("folded_from", ()), *sources)
    ctx.record("prereduce", operands_reduced=reduced, constants_folded=folded)
    return res


def still_frozen(graph: Graph) -> bool:
    """Whether every array a reduction of ``graph`` was folded from is still frozen. An array
    made writeable again (``a.flags.writeable = True``, allowed on an array that owns its data)
    may have changed: a cached graph with its folded values must then be optimized anew. (One
    frozen again after a change cannot be told from one never changed: see README.)"""
    return all(is_frozen(a) for a in graph.meta.get("folded_from", ()))
