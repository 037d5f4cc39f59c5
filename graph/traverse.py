"""Iterative graph traversals (no recursion: a 100,000-node chain must work)."""

from __future__ import annotations

from collections.abc import Iterable

from tenloom.graph.node import Node


def toposort(outputs: Iterable[Node]) -> list[Node]:
    """All nodes reachable from ``outputs``, each after its inputs, in depth-first post-order.

    Depth-first post-order keeps a branch's nodes together, which keeps few intermediates alive
    when the list is executed in order.
    """
    order: list[Node] = []
    done: set[int] = set()
    for out in outputs:
        if id(out) in done:
            continue
        stack: list[tuple[Node, int]] = [(out, 0)]
        entered = {id(out)}
        while stack:
            node, i = stack[-1]
            ins = node.inputs
            while i < len(ins) and (id(ins[i]) in done or id(ins[i]) in entered):
                i += 1
            if i < len(ins):
                stack[-1] = (node, i + 1)
                child = ins[i]
                entered.add(id(child))
                stack.append((child, 0))
            else:
                stack.pop()
                done.add(id(node))
                order.append(node)
    return order


def consumers(order: list[Node]) -> dict[int, int]:
    """id(node) -> how many input slots of nodes in ``order`` read it."""
    counts: dict[int, int] = {}
    for node in order:
        for i in node.inputs:
            counts[id(i)] = counts.get(id(i), 0) + 1
    return counts
