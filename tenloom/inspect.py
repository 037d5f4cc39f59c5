"""Inspection entry points: ``dump``, ``graph_sizes`` and ``to_networkx`` show the graph as
traced or as ``evaluate`` runs it (``session.optimize``: the same cached optimization)."""

from __future__ import annotations

from typing import Any

from tenloom.dump import dump_nodes
from tenloom.graph.graph import Graph
from tenloom.runtime.session import build_graph, optimize_tensors


def _graph(tensors: tuple, opts: dict[str, Any], caller: str, optimized: bool) -> Graph:
    """The graph of ``tensors`` as traced, or as ``evaluate`` runs it (``opts`` checked)."""
    if not optimized:
        return build_graph(tensors, share=False)
    return optimize_tensors(tensors, opts, caller)[1].graph


def dump(*tensors: Any, optimized: bool = True, **opts: Any) -> str:
    """Readable text of the graph of ``tensors``, one line per node.

    By default the graph is shown after the pass pipeline, as ``evaluate`` runs it (``passes=``/
    ``optimize=``/``memory_limit=`` options as for ``evaluate``); ``optimized=False`` shows it as
    traced.
    """
    return dump_nodes(_graph(tensors, opts, "dump", optimized).outputs)


def graph_sizes(*tensors: Any, **opts: Any) -> tuple[int, int]:
    """(nodes as traced, nodes after the pass pipeline)."""
    graph, optimized = optimize_tensors(tensors, opts, "graph_sizes")
    return len(graph), len(optimized.graph)


def to_networkx(*tensors: Any, optimized: bool = False, **opts: Any):
    """The graph as a ``networkx.MultiDiGraph``: one node per graph node (attributes op,
    shape, dtype, source), one edge per input slot (attribute ``slot``); outputs are marked."""
    import networkx as nx

    graph = _graph(tensors, opts, "to_networkx", optimized)
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
