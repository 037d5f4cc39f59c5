"""Graph rewrites. Each pass is a pure ``Graph -> Graph`` in its own module; the default pipeline
is the tuple below, read top to bottom.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tenloom.graph.graph import Graph
from tenloom.passes.registry import PASSES, PassContext, get_pass, register_pass

DEFAULT_PIPELINE: tuple[str, ...] = ()


def run_pipeline(
    graph: Graph,
    names: Sequence[str] | None = None,
    options: dict[str, Any] | None = None,
    verify: bool = False,
) -> tuple[Graph, PassContext]:
    """Run the named passes (default: the full pipeline) in order; returns (graph, context)."""
    names = DEFAULT_PIPELINE if names is None else tuple(names)
    passes = [(n, get_pass(n)) for n in names]
    ctx = PassContext(dict(options or {}), {})
    for name, fn in passes:
        graph = fn(graph, ctx)
        if verify:
            from tenloom.passes.verify import verify_graph

            verify_graph(graph, after=name)
    return graph, ctx


__all__ = ["DEFAULT_PIPELINE", "PASSES", "PassContext", "register_pass", "run_pipeline"]
