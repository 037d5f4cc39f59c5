"""A sequential executor: runs a graph's nodes in topological order on one backend.

It takes a graph and bindings and returns arrays; it frees each intermediate after its last use
and turns any failure into an ``EvaluationError`` that names the node.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tenloom.graph.errors import DTypeError, EvaluationError, ShapeError, fmt_shape
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node
from tenloom.graph.ops import Op
from tenloom.runtime import testing


def bind_feed(graph: Graph, feed: dict[Any, Any] | None) -> dict[int, np.ndarray]:
    """Check ``feed`` against the graph's placeholders: id(placeholder node) -> array."""
    feed = feed or {}
    by_node: dict[int, Any] = {}
    for key, value in feed.items():
        node = getattr(key, "node", key)
        if not isinstance(node, Node) or node.op is not Op.PLACEHOLDER:
            raise TypeError(f"feed: key {key!r} is not a placeholder")
        by_node[id(node)] = value
    bound: dict[int, np.ndarray] = {}
    for ph in graph.placeholders:
        name = ph.attrs[0]
        if id(ph) not in by_node:
            raise EvaluationError(
                f"placeholder {name!r} {ph.dtype}{fmt_shape(ph.shape)} is not bound; "
                f"pass feed={{{name}: array}}"
            )
        arr = np.asarray(by_node[id(ph)])
        if arr.shape != ph.shape:
            raise ShapeError(
                f"feed: placeholder {name!r} has shape {fmt_shape(ph.shape)} but the array bound "
                f"to it has shape {fmt_shape(arr.shape)}"
            )
        if arr.dtype != ph.dtype:
            if not np.can_cast(arr.dtype, ph.dtype, "same_kind"):
                raise DTypeError(
                    f"feed: placeholder {name!r} has dtype {ph.dtype} but the array bound to it "
                    f"has dtype {arr.dtype}"
                )
            arr = arr.astype(ph.dtype)
        bound[id(ph)] = arr
    return bound


def describe(node: Node, device: str) -> str:
    return f"{node.op.value} {node.dtype}{fmt_shape(node.shape)} on {device} at {node.where}"


def _root(arr: np.ndarray) -> np.ndarray:
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def execute(
    graph: Graph, bound: dict[int, np.ndarray], backend: Any, device: str = "cpu"
) -> list[np.ndarray]:
    """Run ``graph`` and return one array per output (fresh, writable, never a leaf's memory)."""
    order = graph.order
    remaining: dict[int, int] = {}
    for node in order:
        for i in node.inputs:
            remaining[id(i)] = remaining.get(id(i), 0) + 1
    for out in graph.outputs:
        remaining[id(out)] = remaining.get(id(out), 0) + 1
    values: dict[int, Any] = {}
    leaf_roots: set[int] = set()
    for node in order:
        try:
            testing.check(node)
            if node.op is Op.PLACEHOLDER:
                value = backend.from_host(bound[id(node)])
                leaf_roots.add(id(_root(bound[id(node)])))
            elif node.op is Op.CONST:
                value = backend.from_host(node.attrs[0].value)
                leaf_roots.add(id(_root(node.attrs[0].value)))
            else:
                value = backend.run(node, [values[id(i)] for i in node.inputs])
        except Exception as e:
            values.clear()
            raise EvaluationError(f"node failed: {describe(node, device)}: {e}") from e
        values[id(node)] = value
        for i in node.inputs:
            left = remaining[id(i)] - 1
            remaining[id(i)] = left
            if left == 0:
                del values[id(i)]
    results = []
    for out in graph.outputs:
        arr = np.asarray(backend.to_host(values[id(out)]))
        if arr.dtype != out.dtype:
            arr = arr.astype(out.dtype)
        if not arr.flags.writeable or id(_root(arr)) in leaf_roots:
            arr = arr.copy()
        results.append(arr)
    values.clear()
    return results
