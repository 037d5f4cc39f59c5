"""``progress=True``: tqdm bars for the path search (cotengra's own bar, passes/contraction_order)
and for long evaluations, counting the flops done, with rate and ETA.

The evaluation bar wraps each step's kernel of the compiled program so that it adds the node's
flops when it finishes; a sliced network adds its flops slice by slice (runtime/sliced.py). The
bar appears only once an evaluation has run for ``DELAY`` seconds, so short ones stay quiet.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from typing import Any

from tenloom.graph.graph import Graph
from tenloom.graph.ops import Op
from tenloom.runtime.program import Program

DELAY = 0.5  # seconds before a bar shows
BAR: contextvars.ContextVar[Any] = contextvars.ContextVar("tenloom_progress", default=None)


@contextlib.contextmanager
def flops_bar(graph: Graph, enabled: bool, desc: str = "evaluate") -> Iterator[Any]:
    """A tqdm bar over the graph's flops while the block runs (None when not ``enabled``)."""
    if not enabled:
        yield None
        return
    from tenloom.passes.cost import graph_flops
    from tqdm.auto import tqdm

    bar = tqdm(
        total=graph_flops(graph), unit="flop", unit_scale=True, desc=desc, delay=DELAY, leave=False
    )
    token = BAR.set(bar)
    try:
        yield bar
    finally:
        BAR.reset(token)
        bar.close()


def counted(prog: Program, bar: Any) -> Program:
    """``prog`` with each kernel adding its node's flops to ``bar`` when it returns."""
    from tenloom.passes.cost import node_flops

    steps = []
    for step in prog.steps:
        kernel = step.kernel
        if kernel is not None and step.node.op is not Op.SLICED:  # slices count themselves
            kernel = _counting(kernel, bar, node_flops(step.node))
        steps.append(dataclasses.replace(step, kernel=kernel))
    out = Program(steps, prog.outputs, prog.n_slots)
    out.slots, out.const_roots = prog.slots, prog.const_roots
    return out


def _counting(kernel, bar, flops: int):
    def run(*xs):
        out = kernel(*xs)
        bar.update(flops)
        return out

    return run
