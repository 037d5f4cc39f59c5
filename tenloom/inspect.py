"""Inspection entry points (dump; explain and visualize join with the passes and plans)."""

from __future__ import annotations

from typing import Any

from tenloom.dump import dump_nodes
from tenloom.passes import run_pipeline
from tenloom.runtime.evaluate import build_graph, pipeline_options


def dump(*tensors: Any, optimized: bool = True, **opts: Any) -> str:
    """Readable text of the graph of ``tensors``, one line per node.

    By default the graph is shown after the pass pipeline, as ``evaluate`` runs it (``passes=``/
    ``optimize=``/``memory_limit=`` options as for ``evaluate``); ``optimized=False`` shows it as
    traced.
    """
    graph = build_graph(tensors)
    if optimized:
        graph, _ = run_pipeline(graph, opts.get("passes"), pipeline_options(opts, "dump"))
    return dump_nodes(graph.outputs)


def graph_sizes(*tensors: Any, **opts: Any) -> tuple[int, int]:
    """(nodes as traced, nodes after the pass pipeline)."""
    graph = build_graph(tensors)
    optimized, _ = run_pipeline(graph, opts.get("passes"), pipeline_options(opts, "graph_sizes"))
    return len(graph), len(optimized)


def to_networkx(*tensors: Any, optimized: bool = False, **opts: Any):
    """The graph as a ``networkx.MultiDiGraph``: one node per graph node (attributes op,
    shape, dtype, source), one edge per input slot (attribute ``slot``); outputs are marked."""
    import networkx as nx

    graph = build_graph(tensors)
    if optimized:
        graph, _ = run_pipeline(graph, opts.get("passes"), pipeline_options(opts, "to_networkx"))
    g = nx.MultiDiGraph()
    index = {id(n): k for k, n in enumerate(graph.order)}
    outputs = {id(o) for o in graph.outputs}
    for node in graph.order:
        g.add_node(
            index[id(node)],
            op=node.op.value,
            shape=node.shape,
            dtype=node.dtype.name,
            source=node.where,
            output=id(node) in outputs,
        )
        for slot, x in enumerate(node.inputs):
            g.add_edge(index[id(x)], index[id(node)], slot=slot, nbytes=x.nbytes)
    return g
