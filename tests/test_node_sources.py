"""Where a node was made (``Node.source``, printed by dump and in error messages): the user's
line for traced nodes and for the nodes tenloom's passes make from them (issue 22: the passes
find it once, ``pin_source``, rather than by a walk of the stack per node), and a custom pass's
own line for the nodes it makes."""

from __future__ import annotations

import inspect

import numpy as np
from tenloom.graph.graph import Graph
from tenloom.graph.node import make_node
from tenloom.graph.ops import Op
from tenloom.passes import run_pipeline
from tenloom.passes.registry import PASSES, register_pass

import tenloom as tl


def _network():
    rng = np.random.default_rng(0)
    a, b, c, d = (tl.asarray(rng.standard_normal(s)) for s in [(3, 4), (4, 5), (5, 6), (6, 3)])
    return tl.einsum("ij,jk,kl,li->", a, b, c, d)


def test_nodes_made_by_the_passes_carry_the_callers_line():
    x = _network()
    line = inspect.currentframe().f_lineno + 1
    graph, _ = run_pipeline(Graph((x.node,)))
    made = [n for n in graph.order if n.op is Op.CONTRACT]
    assert len(made) == 3
    assert all(n.source == (__file__, line) for n in made), [n.source for n in made]
    # and a node made by the front end afterwards walks the stack again
    y = tl.asarray(np.ones(3)) * 2.0
    assert y.node.source == (__file__, inspect.currentframe().f_lineno - 1)


def test_a_custom_pass_makes_nodes_with_its_own_line():
    lines = []

    def double(graph, ctx):
        (out,) = graph.outputs
        lines.append(inspect.currentframe().f_lineno + 1)
        two = make_node(Op.ADD, (out, out))
        return Graph((two,))

    register_pass("test_node_sources_double")(double)
    try:
        x = _network()
        graph, _ = run_pipeline(Graph((x.node,)), ["test_node_sources_double"])
    finally:
        del PASSES["test_node_sources_double"]
    (two,) = graph.outputs
    assert two.op is Op.ADD and two.source == (__file__, lines[0])
