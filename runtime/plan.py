"""Compiled plans: optimize once, run many times.

``compile(outputs, inputs=[placeholders])`` runs the pass pipeline (order search included) and
builds the backend program once; calling the plan binds arrays to the inputs in order and runs
the program: no tracing, no pass, no path search per call. ``@function`` traces a Python
function on placeholders once per (shape, dtype) signature of its arguments and keeps the plan.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from tenloom.graph.errors import ShapeError, TenloomError
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node
from tenloom.graph.ops import Op
from tenloom.graph.tensor import Tensor

COUNTERS = {"traces": 0, "compiles": 0}  # instrumentation for tests


@dataclass
class Cost:
    """flops: real floating-point operations (2 per multiply-add, complex x4);
    madds: multiply-adds of the contractions (cotengra's cost); peak_bytes: predicted peak
    of intermediates and outputs; passes: per-pass stats."""

    flops: int
    madds: int
    peak_bytes: int
    passes: dict


class Plan:
    """A compiled computation: ``plan(*arrays) -> list of ndarrays``."""

    def __init__(self, outputs, inputs, **opts: Any):
        from tenloom.graph.api import lift
        from tenloom.passes import run_pipeline
        from tenloom.passes.cost import graph_flops, node_madds, peak_bytes
        from tenloom.runtime.backends import get_backend
        from tenloom.runtime.evaluate import check_options, parse_device
        from tenloom.runtime.executor import program_for

        check_options(opts)
        self.inputs = [lift(x, "compile") for x in inputs]
        for k, x in enumerate(self.inputs):
            if x.op is not Op.PLACEHOLDER:
                raise TenloomError(f"compile: input {k} is not a placeholder (tl.placeholder)")
        self.graph = Graph(tuple(lift(t, "compile") for t in outputs))
        missing = {id(p) for p in self.graph.placeholders} - {id(x) for x in self.inputs}
        if missing:
            names = [p.attrs[0] for p in self.graph.placeholders if id(p) in missing]
            raise TenloomError(f"compile: the outputs read placeholders not in inputs: {names}")
        self.opts = opts
        self.optimized, ctx = run_pipeline(self.graph, opts.get("passes"), opts)
        kind, index = parse_device(opts.get("device"))
        self.device = opts.get("device") or "cpu"
        self.backend = get_backend(kind, index)
        self.program = program_for(self.optimized, self.backend)
        self.cost = Cost(
            flops=graph_flops(self.optimized),
            madds=sum(node_madds(n) for n in self.optimized.order if n.op is Op.CONTRACT),
            peak_bytes=peak_bytes(self.optimized),
            passes=ctx.stats,
        )
        COUNTERS["compiles"] += 1

    def __call__(self, *arrays: Any) -> list[np.ndarray]:
        from tenloom.runtime.executor import bind_feed, execute

        if len(arrays) != len(self.inputs):
            raise ShapeError(f"plan: {len(arrays)} arrays for {len(self.inputs)} inputs")
        bound = bind_feed(self.optimized, dict(zip(self.inputs, arrays)))
        return execute(
            self.optimized,
            bound,
            self.backend,
            self.device,
            self.opts.get("to_host", True),
            self.opts.get("threads", 1) or 1,
        )

    def dump(self) -> str:
        from tenloom.graph.dump import dump_nodes

        return dump_nodes(self.optimized.outputs)

    def __repr__(self) -> str:
        return (
            f"Plan({len(self.inputs)} inputs, {len(self.graph.outputs)} outputs, "
            f"{len(self.optimized)} nodes, {self.cost.flops:.3g} flops)"
        )

    def _repr_svg_(self) -> str | None:
        """Jupyter: the compiled (optimized) graph as SVG; None, so that Jupyter shows the text
        repr, when graphviz or its ``dot`` program is missing or the graph is too big to draw."""
        from tenloom.visualize import repr_svg

        return repr_svg(self)


def compile(outputs: Any, inputs: Any = (), **opts: Any) -> Plan:  # noqa: A001
    """Optimize ``outputs`` once; the plan binds arrays to ``inputs`` (placeholders) in order."""
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    return Plan(outs, list(inputs), **opts)


def function(fn: Callable | None = None, **opts: Any):
    """Decorator: trace ``fn`` on placeholders per (shape, dtype) signature, cache the plan,
    and return ``fn``'s own structure (a Tensor, tuple, list or dict of them) as ndarrays."""

    def wrap(f: Callable):
        plans: dict[tuple, tuple[Plan, Any]] = {}

        @functools.wraps(f)
        def call(*args: Any):
            arrays = [np.asarray(a) for a in args]
            sig = tuple((a.shape, a.dtype.str) for a in arrays)
            hit = plans.get(sig)
            if hit is None:
                from tenloom.graph.api import placeholder

                COUNTERS["traces"] += 1
                phs = [placeholder(a.shape, a.dtype, name=f"arg{i}") for i, a in enumerate(arrays)]
                out = f(*phs)
                leaves, rebuild = _flatten(out)
                hit = plans[sig] = (compile(leaves, phs, **opts), rebuild)
            plan, rebuild = hit
            return rebuild(plan(*arrays))

        call.plans = plans  # type: ignore[attr-defined]
        return call

    return wrap(fn) if fn is not None else wrap


def _flatten(out: Any) -> tuple[list, Callable[[list], Any]]:
    """Leaves (Tensors) of a nest of tuples, lists and dicts, and a function rebuilding the
    nest from their values."""
    if isinstance(out, Tensor):
        return [out], lambda vals: vals[0]
    if isinstance(out, (tuple, list, dict)):
        keys = list(out) if isinstance(out, dict) else None
        items = [out[k] for k in keys] if keys is not None else list(out)
        parts = [_flatten(item) for item in items]
        sizes = [len(leaves) for leaves, _ in parts]
        leaves = [leaf for ls, _ in parts for leaf in ls]

        def rebuild(vals: list) -> Any:
            out_items, start = [], 0
            for (_, sub), n in zip(parts, sizes):
                out_items.append(sub(vals[start : start + n]))
                start += n
            if keys is not None:
                return dict(zip(keys, out_items))
            return type(out)(out_items)

        return leaves, rebuild
    raise TypeError(f"function: return Tensors in tuples, lists or dicts, not {type(out).__name__}")


__all__ = ["Plan", "compile", "function", "Node"]
