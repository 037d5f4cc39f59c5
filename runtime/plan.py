"""Compiled plans: optimize once, run many times.

``Plan(outputs, inputs=[placeholders])`` (``tl.compile``: tenloom/function.py) runs the pass
pipeline (order search included) and builds the backend program once; calling the plan binds
arrays to the inputs in order and runs the program: no tracing, no pass, no path search per
call. ``@function`` (tenloom/function.py)
traces a Python function into such plans.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from tenloom.graph.errors import ShapeError, TenloomError
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node
from tenloom.graph.ops import Op
from tenloom.graph.value import Value
from tenloom.passes.caches import counter
from tenloom.passes.contraction_order import COMPILE_EFFORT

# plans traced (by @function) and compiled: tests check that calls do neither
COUNTERS = counter("runtime.plans", traces=0, compiles=0)


@dataclass
class Cost:
    """flops: real floating-point operations (2 per multiply-add, complex x4);
    madds: multiply-adds of the contractions (cotengra's cost); peak_bytes: predicted peak
    of intermediates and outputs; passes: per-pass stats."""

    flops: int
    madds: int
    peak_bytes: int
    passes: dict


def frozen_constants(graph: Graph) -> Graph:
    """``graph`` with each constant that could still change in place replaced by a read-only
    copy of its current values (graph/ops/leaf.py ``frozen``); frozen arrays are kept without a
    copy.

    A plan captures its constants when it is compiled, as ``jax.jit`` captures the arrays a
    function closes over: changing a ``tl.asarray`` source afterwards does not change what the
    plan computes (its inputs are the placeholders). This also lets the passes fold reductions
    of constants and device backends keep one copy of each constant for every call."""
    from tenloom.graph.node import make_node
    from tenloom.graph.ops.leaf import Constant, frozen
    from tenloom.passes.rewrite import map_graph

    def snapshot(node: Node) -> Node:
        if node.op is Op.CONST:
            value = node.attrs.constant.value
            copy = frozen(value)
            if copy is not value:
                return make_node(Op.CONST, (), (Constant(copy),))
        return node

    return map_graph(graph, snapshot)


class Plan:
    """A compiled computation: ``plan(*arrays) -> list of ndarrays``. Constants are captured
    at compile time (:func:`frozen_constants`); inputs are read at every call. The front end's
    ``tl.compile`` returns a subclass that can also dump and draw itself (tenloom/function.py)."""

    def __init__(self, outputs, inputs, **opts: Any):
        from tenloom.graph.build import lift
        from tenloom.runtime import session
        from tenloom.runtime.options import COMPILE_OPTIONS, parse_options

        o = parse_options("compile", opts, COMPILE_OPTIONS)  # all checked before any work
        self.inputs = [lift(x, "compile") for x in inputs]
        for k, x in enumerate(self.inputs):
            if x.op is not Op.PLACEHOLDER:
                raise TenloomError(f"compile: input {k} is not a placeholder (tl.placeholder)")
        # a plan keeps the values its constants have now (see frozen_constants)
        # a value compiled with its derivative takes the derivative's forward (shared_forwards)
        traced = session.shared_forwards(tuple(lift(t, "compile") for t in outputs))
        self.graph = frozen_constants(Graph(traced))
        missing = {id(p) for p in self.graph.placeholders} - {id(x) for x in self.inputs}
        if missing:
            names = [p.attrs.name for p in self.graph.placeholders if id(p) in missing]
            raise TenloomError(f"compile: the outputs read placeholders not in inputs: {names}")
        if o.devices is not None:  # every device exists and has its backend, before the passes
            session.open_devices(o.devices)
        # a plan runs many times: its path search may take longer than evaluate's
        o = replace(o, search_effort=COMPILE_EFFORT)
        optimized = session.optimize_within_limit(self.graph, o)  # cached by options
        self.optimized = optimized.graph
        self._prepare(o, dict(optimized.stats))
        COUNTERS["compiles"] += 1

    def _prepare(self, o: Any, stats: dict) -> None:
        """Backend, program and cost of ``self.optimized`` (no pass, no search) for the options
        record ``o``."""
        from tenloom.passes.cost import graph_flops, node_madds, peak_bytes
        from tenloom.runtime import session
        from tenloom.runtime.executor import program_for

        self.options = o
        self.opts = dict(o.given)  # the options as given (normalized): what save() records
        self.devices = list(session.run_devices(o))
        self.device = self.devices[0]
        self.backend = session.open_devices(self.devices[:1])[0]
        self.program = program_for(self.optimized, self.backend)
        self._threads = o.threads or session.default_threads(self.optimized, self.backend)
        # nothing to set up around a call: no devices to spread over, no cluster, no limit
        self._plain = (
            len(self.devices) == 1
            and not (o.scheduler or o.memory_limit or o.deterministic)
            and o.to_host
            and o.cache_dir is None  # issue 22: run_context tells kernels the cache_dir
            and o.precision == "highest"  # precision=: run_context sets it
            and o.cuda_graphs  # issue 23: run_context sets it
        )
        self.cost = Cost(
            flops=graph_flops(self.optimized),
            madds=sum(node_madds(n) for n in self.optimized.order if n.op is Op.CONTRACT),
            peak_bytes=peak_bytes(self.optimized),
            passes=stats,
        )

    @classmethod
    def from_optimized(
        cls, optimized: Graph, inputs: Any, stats: dict | None = None, **opts: Any
    ) -> "Plan":
        """A plan around a graph that has already been through the passes (what ``tl.load``
        uses for a saved plan): no tracing, no pass and no path search. ``plan.graph`` is the
        optimized graph too, as the traced one is not kept."""
        from tenloom.runtime.options import COMPILE_OPTIONS, parse_options

        o = parse_options("plan", opts, COMPILE_OPTIONS)
        self = cls.__new__(cls)
        self.inputs = [getattr(x, "node", x) for x in inputs]  # Tensors or their nodes
        for k, x in enumerate(self.inputs):
            if not isinstance(x, Node) or x.op is not Op.PLACEHOLDER:
                raise TenloomError(f"plan: input {k} is not a placeholder node")
        missing = {id(p) for p in optimized.placeholders} - {id(x) for x in self.inputs}
        if missing:
            names = [p.attrs.name for p in optimized.placeholders if id(p) in missing]
            raise TenloomError(f"plan: the outputs read placeholders not in inputs: {names}")
        self.graph = self.optimized = optimized
        self._prepare(o, dict(stats or {}))
        return self

    def __call__(self, *arrays: Any) -> list[np.ndarray]:
        from tenloom.runtime.executor import bind_feed, execute

        if len(arrays) != len(self.inputs):
            raise ShapeError(f"plan: {len(arrays)} arrays for {len(self.inputs)} inputs")
        bound = bind_feed(self.optimized, dict(zip(self.inputs, arrays)), self.devices)
        if self._plain:
            return execute(self.optimized, bound, self.backend, self.device, True, self._threads)
        from tenloom.runtime.session import run_context

        o = self.options
        with run_context(o, self.devices, self._threads):
            return execute(
                self.optimized, bound, self.backend, self.device, o.to_host, self._threads
            )

    @property
    def cuda_graphs(self) -> list[str] | None:
        """issue 23: the CUDA-graph segments of this plan's program, one line each: as the
        runs captured them (steps whose capture failed included) once it has run captured,
        else as planned from its ops; one line naming the reason where the run goes step by step
        (cuda_graphs=False, threads > 1, ...; runtime/capture.py ``run_off_reason``); None off
        CUDA."""
        from tenloom.runtime.capture import describe, explain_segments

        if self.options.cuda_graphs and self.backend.kind.startswith("cuda"):
            from tenloom.runtime.backends.cuda_graphs import segments_of

            live = segments_of(self.program)
            if live is not None:
                return describe(live, [s.node for s in self.program.run_steps])
        return explain_segments(self.optimized, self.options)

    def save(self, path: str | os.PathLike) -> None:
        """Write the plan to ``path`` (JSON) and its constants to the sibling ``.npz``: the
        optimized graph with its contraction trees and fused regions, the inputs in order, the
        options and the per-pass stats. ``tl.load(path)`` gives it back with no pass or search.
        Options that only steer optimization and are not plain data (an optimizer object,
        ``cache_dir``, ``progress``, ``verify``) are left out, as is a Dask ``scheduler``
        (a connection, not data)."""
        from tenloom.runtime.serialize import save_document

        _check_path("save", path)
        opts = {}
        for k, v in self.opts.items():
            if k in _RUN_OPTIONS:
                _encodable(v, k)
                opts[k] = v
            elif k in _SAVED_OPTIONS and _encodable(v):
                opts[k] = v
        stats = {
            name: {k: v for k, v in values.items() if _encodable(v)}
            for name, values in self.cost.passes.items()
        }
        save_document(path, self.optimized.outputs, "plan", self.inputs, opts, stats)

    def __repr__(self) -> str:
        return (
            f"Plan({len(self.inputs)} inputs, {len(self.graph.outputs)} outputs, "
            f"{len(self.optimized)} nodes, {self.cost.flops:.3g} flops)"
        )


# options a saved plan keeps: those that shape how it runs (checked on save and load) and
# those that only recorded how it was optimized (kept when they are plain data)
_RUN_OPTIONS = (
    "device",
    "to_host",
    "threads",
    "deterministic",
    "memory_limit",
    "precision",
    "cuda_graphs",  # issue 23
)
_SAVED_OPTIONS = ("passes", "optimize")


def _encodable(value: Any, option: str | None = None) -> bool:
    from tenloom.runtime.serialize_values import SaveTypeError, encode_value

    try:
        encode_value(value)
        return True
    except SaveTypeError:
        if option is None:
            return False
        raise SaveTypeError(
            f"save: plan option {option}={value!r} cannot be written to a file"
        ) from None


def save(obj: Any, path: str | os.PathLike) -> None:
    """Save a Tensor, a list or tuple of Tensors, or a Plan to ``path`` (JSON) plus a sibling
    ``.npz`` holding the constants; ``load(path)`` reads it back. The schema is in
    docs/format.md."""
    from tenloom.runtime.serialize import save_document
    from tenloom.runtime.serialize_values import SaveTypeError

    _check_path("save", path)
    if isinstance(obj, Plan):
        obj.save(path)
        return
    items = [obj] if isinstance(obj, Value) else obj
    if not isinstance(items, (list, tuple)) or not items:
        raise SaveTypeError(
            f"save: expected a Tensor, a non-empty list or tuple of Tensors, or a Plan; "
            f"got {type(obj).__name__}"
        )
    for k, t in enumerate(items):
        if not isinstance(t, Value):
            raise SaveTypeError(f"save: item {k} is a {type(t).__name__}, not a Tensor")
    save_document(path, [t.node for t in items])


def load(path: str | os.PathLike, plan_class: type[Plan] = Plan) -> Any:
    """Read what ``save`` wrote: the output nodes of a graph (a tuple), or a Plan ready to
    call (no tracing, pass or path search), of ``plan_class``. Anything malformed raises
    GraphFormatError; loading never runs code from the files and reads nothing outside the
    JSON file's folder."""
    from tenloom.graph.errors import GraphFormatError
    from tenloom.runtime.serialize import load_document

    _check_path("load", path)
    loaded = load_document(path, fused_check=_fusable)
    if loaded.kind == "graph":
        return tuple(loaded.outputs)
    opts = loaded.options
    problem = _check_loaded_options(opts)
    if problem:
        raise GraphFormatError(f"{os.fspath(path)}: {problem}")
    graph = Graph(loaded.outputs)
    return plan_class.from_optimized(graph, loaded.inputs, loaded.stats, **opts)


def _check_path(caller: str, path: Any) -> None:
    """OptionTypeError, before any file is touched, for a path that is not a file name."""
    from tenloom.graph.errors import OptionTypeError

    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise OptionTypeError(
            f"{caller}: path={path!r} is not valid; accepted: a file name (a str or os.PathLike)"
        )


def _fusable(step: Any) -> bool:
    """What the fusion pass itself would put in a fused region (the kernel generators know
    exactly these ops and dtypes)."""
    from tenloom.runtime.codegen import fusable

    return fusable(step)


def _check_loaded_options(opts: dict) -> str | None:
    for k in opts:
        if k not in _RUN_OPTIONS + _SAVED_OPTIONS:
            return f"unknown plan option {k!r}"
    checks = {
        "device": lambda v: (
            v is None
            or type(v) is str
            or (type(v) in (list, tuple) and all(type(d) is str for d in v))
        ),
        "to_host": lambda v: type(v) is bool,
        "threads": lambda v: v is None or (type(v) is int and v >= 1),
        "deterministic": lambda v: type(v) is bool,
        "cuda_graphs": lambda v: type(v) is bool,  # issue 23
        "memory_limit": lambda v: v is None or type(v) in (int, str),
        "precision": lambda v: type(v) is str and v in PRECISIONS,  # precision=
        "optimize": lambda v: v is None or type(v) in (str, bool, dict),
        "passes": lambda v: (
            v is None or (isinstance(v, (list, tuple)) and all(type(p) is str for p in v))
        ),
    }
    from tenloom.runtime.precision import PRECISIONS  # precision=

    for k, ok in checks.items():
        if k in opts and not ok(opts[k]):
            return f"plan option {k}={opts[k]!r} has the wrong type"
    from tenloom.graph.errors import DeviceError, OptionError
    from tenloom.runtime.options import COMPILE_OPTIONS, parse_options

    # precision= on a device that cannot run it is refused when the plan is built, not a
    # malformed file: checked here without it
    opts = {k: v for k, v in opts.items() if k != "precision"}
    try:  # the values compile checks (pass and preset names, sizes, device kinds)
        parse_options("load", opts, COMPILE_OPTIONS)
    except (OptionError, DeviceError) as e:
        return str(e)
    return None


__all__ = ["Plan", "load", "save", "Node"]
