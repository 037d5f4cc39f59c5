"""``verify_graph``: structural invariants every pass must keep (run after each pass in tests)."""

from __future__ import annotations

from tenloom.graph.graph import Graph
from tenloom.graph.ops import OPS


def verify_graph(graph: Graph, after: str = "?") -> None:
    """Re-run each node's shape/dtype rule and check it agrees, and that its attrs are the op's
    record; AssertionError if not."""
    for node in graph.order:
        assert node.op in OPS, f"after {after}: unknown op {node.op}"
        d = OPS[node.op]
        if d.arity is not None:
            assert len(node.inputs) == d.arity, f"after {after}: {node.op.value} arity"
        record = tuple if d.attrs is None else d.attrs
        assert type(node.attrs) is record, f"after {after}: {node.op.value} attrs {node.attrs!r}"
        shape, dtype = d.infer(node.inputs, node.attrs)
        assert shape == node.shape, f"after {after}: {node.op.value} shape {node.shape} != {shape}"
        assert dtype == node.dtype, f"after {after}: {node.op.value} dtype {node.dtype} != {dtype}"
