"""Helpers shared by the passes: bottom-up graph mapping and small rule tables."""

from __future__ import annotations

from collections.abc import Callable

from tenloom.graph.graph import Graph
from tenloom.graph.node import Node, rebuild
from tenloom.graph.traverse import consumers

# A rule takes a node (whose inputs are already rewritten) and returns a replacement or None.
Rule = Callable[[Node], "Node | None"]


def map_graph(graph: Graph, fn: Callable[[Node], Node]) -> Graph:
    """Rebuild ``graph`` bottom-up: each node gets its rewritten inputs, then ``fn`` maps it.

    Iterative over the topological order; returns ``graph`` itself when nothing changed.
    """
    new: dict[int, Node] = {}
    for node in graph.order:
        ins = node.inputs
        if ins:
            ins = tuple(new[id(i)] for i in ins)
        node2 = rebuild(node, ins) if ins is not node.inputs else node
        new[id(node)] = fn(node2)
    out = graph.with_outputs(tuple(new[id(o)] for o in graph.outputs))
    if out is not graph and graph.meta.get("nesting"):
        out.meta["nesting"] = carry_nesting(graph.meta["nesting"], new)
    return out


def carry_nesting(nesting: dict, new: dict[int, Node]) -> dict:
    """Move the user-call nesting of EINSUM networks (see merge_contractions) to the nodes that
    replaced them, when they are still networks of the same operands."""
    carried = {}
    for old_id, (old, nest) in nesting.items():
        node = new.get(old_id)
        if node is not None and node.op is old.op and len(node.inputs) == len(old.inputs):
            carried[id(node)] = (node, nest)
    return carried


def apply_rules(rules: dict, counter: dict[str, int]) -> Callable[[Node], Node]:
    """A ``fn`` for map_graph from a table {op: [rule, ...]}; rules fire until none applies."""

    def fn(node: Node) -> Node:
        while True:
            for rule in rules.get(node.op, ()):
                out = rule(node)
                if out is not None and out is not node:
                    counter[rule.__name__] = counter.get(rule.__name__, 0) + 1
                    node = out
                    break
            else:
                return node

    return fn


def use_counts(graph: Graph) -> dict[int, int]:
    """id(node) -> number of uses (input slots plus graph outputs)."""
    counts = consumers(graph.order)
    for o in graph.outputs:
        counts[id(o)] = counts.get(id(o), 0) + 1
    return counts
