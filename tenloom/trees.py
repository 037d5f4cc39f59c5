"""Contraction trees: the pairwise contractions of a graph grouped into the trees they form.

Shared by ``tl.dump`` (tenloom/dump.py) and ``tl.visualize`` (tenloom/visualize.py). A pairwise
contraction (a CONTRACT, or a two-operand EINSUM before lowering) joins its consumer's tree
when that consumer is pairwise, reads it once and with distinct labels (so the child's output
indices map one to one onto what the consumer reads), and it is not a graph output.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from tenloom.graph.node import Node
from tenloom.graph.ops import Op
from tenloom.graph.traverse import consumers


def is_pairwise(node: Node) -> bool:
    return node.op is Op.CONTRACT or (node.op is Op.EINSUM and len(node.inputs) == 2)


def slot_labels(node: Node, slot: int) -> tuple:
    """The labels of the operand in ``slot`` of a pairwise contraction, in its axis order."""
    at = node.attrs
    if node.op is Op.CONTRACT:
        return at.b_labels if slot else at.a_labels
    return at.terms[slot]


def out_labels(node: Node) -> tuple:
    return node.attrs.out  # ContractAttrs and EinsumAttrs both name it out


def contraction_trees(order: Sequence[Node], outputs: Sequence[Node]) -> list[list[Node]]:
    """The trees of the graph (``order`` topological), in order of their roots, each listed
    root first with parents before their children."""
    uses = consumers(order)
    outs = {id(o) for o in outputs}
    inner: set[int] = set()
    for node in order:
        if is_pairwise(node):
            for slot, x in enumerate(node.inputs):
                labels = slot_labels(node, slot)
                if (
                    is_pairwise(x)
                    and uses[id(x)] == 1
                    and id(x) not in outs
                    and len(set(labels)) == len(labels)
                ):
                    inner.add(id(x))
    trees = []
    for root in order:
        if not is_pairwise(root) or id(root) in inner:
            continue
        members, stack = [], [root]
        while stack:
            node = stack.pop()
            members.append(node)
            stack.extend(x for x in node.inputs if id(x) in inner)
        trees.append(members)
    return trees


def tree_labels(tree: list[Node]) -> dict[int, dict[int, int]]:
    """id(node) -> {the node's own label: the tree's label} for every node of a tree.

    Each pairwise contraction numbers its labels on its own (einsum normalizes them to 0..k-1),
    so the same index has different numbers in different nodes. Walking from the root, a
    child's output axes are the axes its parent reads in that slot; labels met for the first
    time (the ones a contraction sums over) get new numbers. The root's output is 0, 1, ...
    """
    maps: dict[int, dict[int, int]] = {}
    members = {id(n) for n in tree}
    fresh = itertools.count()
    root = tree[0]
    maps[id(root)] = {lab: next(fresh) for lab in dict.fromkeys(out_labels(root))}
    for node in tree:  # parents come before their children
        m = maps[id(node)]
        for slot, x in enumerate(node.inputs):
            for lab in slot_labels(node, slot):
                if lab not in m:
                    m[lab] = next(fresh)
            if id(x) in members:
                maps[id(x)] = dict(zip(out_labels(x), [m[lab] for lab in slot_labels(node, slot)]))
    return maps
