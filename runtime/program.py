"""A compiled program: an optimized graph turned once into a flat list of steps, and the one
loop that runs them.

Each step holds a ready kernel (a callable made by the backend for that node, with its shapes,
permutations or generated code worked out), the slots it reads and writes, and the slots to
free after it: running a program is a tight loop, with no graph walking, dict lookups or
attribute decoding per call.

    compile_program(graph, backend)   the steps, once (program_for caches them per graph)
    run(prog, feed, backend, ...)     the step loop: evaluate and plans (runtime/executor.py),
                                      each slice of a sliced network (runtime/sliced.py),
                                      the OpenCL backend's sub-programs
    leaf_value / failure              one step's pieces that the concurrent scheduler's workers
                                      share with the loop (runtime/scheduler.py orders steps
                                      over threads and streams around them)
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tenloom.graph.errors import EvaluationError, fmt_shape
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node
from tenloom.graph.ops import Op
from tenloom.graph.ops.leaf import is_frozen
from tenloom.passes import gc_paused
from tenloom.runtime import testing
from tenloom.runtime.buffers import CURRENT, POOL_MIN_BYTES, POOLING, Arena, root
from tenloom.runtime.kernels import copy_plan  # issue 22


@dataclass
class Step:
    node: Node
    kernel: Callable[..., Any] | None  # None for leaves
    inputs: tuple[int, ...]
    out: int
    free: tuple[int, ...]  # slots whose last use is this step
    # whether this step's value may live in an arena buffer: False where the kernel says its
    # result is always fresh memory (``kernel.fresh``), never an arena buffer or a view of
    # one, and for leaves
    tracked: bool = True
    drop: tuple[int, ...] = ()  # the slots of ``free`` holding tracked values (buffers.drop)


@dataclass
class Program:
    # no reference to the graph: programs live in a side table weakly keyed by the graph
    steps: list[Step]
    outputs: tuple[int, ...]
    n_slots: int
    pooled: bool = False  # has intermediates big enough to reuse buffers for (buffers.py)
    arenas: list = field(default_factory=list)  # idle arenas, one per concurrent run at most
    lock: threading.Lock = field(default_factory=threading.Lock)
    # constants bound once: each run's slots start as a copy of ``slots`` (constants' backend
    # values in place), and ``const_roots`` are their memory's identities
    slots: list = field(default_factory=list)
    const_roots: frozenset = frozenset()
    frozen_bound: tuple = ()  # host arrays of the constants bound because frozen (still_bound)
    # the kernels' copy-plan timing budget (copy_plan.bind_budget), told when a run ends
    budget: Any = None

    @functools.cached_property
    def run_steps(self) -> list[Step]:
        """The steps a run goes through: all but the constants bound in ``slots`` already."""
        return [s for s in self.steps if s.node.op is not Op.CONST or self.slots[s.out] is None]

    def arena(self):
        """An arena for one run (the last run's, when no other run holds it), or None."""
        if not self.pooled or not POOLING.get():
            return None
        with self.lock:
            if self.arenas:
                return self.arenas.pop()
        return Arena()

    def release(self, arena) -> None:
        arena.finish()
        with self.lock:
            if not self.arenas:
                self.arenas.append(arena)


def compile_program(graph: Graph, backend: Any) -> Program:
    with gc_paused():  # thousands of short-lived objects, no cycles: 1.3 of a TEBD energy's 5 ms
        return _compile(graph, backend)


def _compile(graph: Graph, backend: Any) -> Program:
    order = graph.schedule
    slot = {id(n): k for k, n in enumerate(order)}
    last_use: dict[int, int] = {}
    for k, node in enumerate(order):
        for i in node.inputs:
            last_use[slot[id(i)]] = k
    keep = {slot[id(o)] for o in graph.outputs}
    frees: dict[int, list[int]] = {}
    for s, k in last_use.items():
        if s not in keep:
            frees.setdefault(k, []).append(s)
    steps: list[Step] = []
    shared: dict[tuple, Any] = {}  # one CPU GEMM kernel per signature (_shared_key)
    for k, node in enumerate(order):
        leaf = node.op in (Op.CONST, Op.PLACEHOLDER)
        if leaf:
            kernel = None
        elif (key := _shared_key(node, backend)) is not None:
            kernel = shared.get(key)
            if kernel is None:
                kernel = shared[key] = backend.kernel(node)
        else:
            kernel = backend.kernel(node)
        free = tuple(dict.fromkeys(frees.get(k, ())))
        steps.append(
            Step(
                node,
                kernel,
                tuple(slot[id(i)] for i in node.inputs),
                k,
                free,
                not leaf and not getattr(kernel, "fresh", False),
                tuple(f for f in free if steps[f].tracked),
            )
        )
    pooled = any(
        s.kernel is not None and s.node.nbytes >= POOL_MIN_BYTES and s.out not in keep
        for s in steps
    ) or any(getattr(s.kernel, "pools", False) for s in steps)  # issue 22: kernels' own copies
    budget = copy_plan.bind_budget(steps)  # issue 22: the kernels' copy-plan timing, bounded
    prog = Program(steps, tuple(slot[id(o)] for o in graph.outputs), len(order), pooled)
    prog.budget = budget
    prog.slots = [None] * len(order)
    roots = set()
    # A constant is bound once where its backend value cannot go stale: the host array itself
    # (the CPU reads it in place, so each run sees its current values) or a copy of a frozen
    # array. A device copy of a writeable array is made anew by every run.
    live = backend.shares_host_memory
    frozen_bound = []
    for s in steps:
        if s.node.op is Op.CONST and (live or is_frozen(s.node.attrs.constant.value)):
            value = prog.slots[s.out] = backend.from_host(s.node.attrs.constant.value, True)
            roots.add(id(root(value)) if isinstance(value, np.ndarray) else id(value))
            if not live:
                frozen_bound.append(s.node.attrs.constant.value)
    prog.const_roots = frozenset(roots)
    prog.frozen_bound = tuple(frozen_bound)
    return prog


def _shared_key(node: Node, backend: Any) -> tuple | None:
    """What a CPU CONTRACT kernel is made from (runtime/backends/cpu.py, kernels/contract.py):
    its attrs and its operands' and result's shapes and dtypes. Steps that agree on all of it
    share one kernel in a program, with its plans per operand layout and their timings (a TEBD
    energy's 180 contractions have 90 signatures). None: the node gets a kernel of its own."""
    if node.op is not Op.CONTRACT or backend.kind != "cpu":
        return None
    a, b = node.inputs
    return (node.attrs, node.shape, node.dtype.str, a.shape, a.dtype.str, b.shape, b.dtype.str)


def still_bound(prog: Program) -> bool:
    """Whether the frozen constants whose device copies ``prog`` holds are all still frozen:
    one made writeable again may have changed (the program is then compiled anew)."""
    return all(is_frozen(a) for a in prog.frozen_bound)


_PROGRAMS: "weakref.WeakKeyDictionary[Graph, dict]" = weakref.WeakKeyDictionary()


def program_for(graph: Graph, backend: Any) -> Program:
    """The compiled program of ``graph`` on ``backend`` (compiled once per graph and backend)."""
    per_graph = _PROGRAMS.setdefault(graph, {})
    prog = per_graph.get(backend.kind)
    if prog is None or (prog.frozen_bound and not still_bound(prog)):
        prog = per_graph[backend.kind] = compile_program(graph, backend)
    return prog


# ---- running -----------------------------------------------------------------------------------


def describe(node: Node, device: str) -> str:
    return f"{node.op.value} {node.dtype}{fmt_shape(node.shape)} on {device} at {node.where}"


def failure(node: Node, device: str, exc: BaseException) -> EvaluationError:
    """The error a run raises for ``exc`` raised by ``node``'s step (``from exc``)."""
    return EvaluationError(f"node failed: {describe(node, device)}: {exc}")


def leaf_value(node: Node, feed: dict[int, Any], from_host: Any, upload: bool = True) -> Any:
    """A leaf's value: a constant's array, or a placeholder's from ``feed`` (id -> array), on
    the backend (``from_host``; ``upload=False``: feed values are the backend's already)."""
    if node.op is Op.CONST:
        return from_host(node.attrs.constant.value, True)
    value = feed[id(node)]
    return from_host(value, False) if upload else value


def run(
    prog: Program,
    feed: dict[int, Any],
    backend: Any,
    device: str | None = "cpu",
    leaf_roots: set[int] | None = None,
    upload: bool = True,
    pool: bool = True,
) -> list[Any]:
    """Run ``prog`` step by step; returns the values of its outputs (the backend's arrays).

    ``feed``: the placeholders' arrays by node id (host arrays, copied to the backend as their
    step comes; ``upload=False``: the backend's own). ``device``: a failing step raises
    EvaluationError naming its node on this device (None: its own exception, for runs inside
    another node's kernel). ``leaf_roots``: gets the memory identities of the leaves' values
    (outputs must not alias them). ``pool``: intermediates may reuse buffers of earlier runs
    (runtime/buffers.py); a run without it allocates fresh memory, as a slice's memory limit
    wants.
    """
    replay = getattr(backend, "replay", None)  # issue 23: CUDA graphs (runtime/capture.py)
    if replay is not None and not testing.injecting():
        outs = replay(prog, feed, upload, device)
        if outs is not None:
            return outs
    arena = prog.arena() if pool else None
    token = CURRENT.set(arena)  # None too: a run nested in another never takes the outer's
    check = testing.check
    from_host = backend.from_host
    if testing.injecting():  # every node checked, constants too
        vals: list[Any] = [None] * prog.n_slots
        steps = prog.steps
    else:  # constants are in their slots already
        vals = list(prog.slots)
        steps = prog.run_steps
        if leaf_roots is not None:
            leaf_roots |= prog.const_roots
    # one pass per node: this loop's own cost is the dispatch overhead of every small node
    try:
        for step in steps:
            node = step.node
            kernel = step.kernel
            try:
                check(node)
                if kernel is None:
                    value = leaf_value(node, feed, from_host, upload)
                    if leaf_roots is not None:
                        leaf_roots.add(
                            id(root(value)) if isinstance(value, np.ndarray) else id(value)
                        )
                else:
                    ins = step.inputs
                    if len(ins) == 2:
                        value = kernel(vals[ins[0]], vals[ins[1]])
                    elif len(ins) == 1:
                        value = kernel(vals[ins[0]])
                    else:
                        value = kernel(*[vals[i] for i in ins])
            except Exception as e:
                if device is None:
                    raise
                raise failure(node, device, e) from e
            vals[step.out] = value
            if arena is not None:
                for f in step.drop:
                    arena.drop(vals, f)
            for f in step.free:
                vals[f] = None
        return [vals[k] for k in prog.outputs]
    finally:
        vals.clear()
        CURRENT.reset(token)
        if arena is not None:
            prog.release(arena)
        finished(prog)


def finished(prog: Program) -> None:
    """After a run of ``prog``: its kernels' timing budget opens to later runs, and the plans
    they timed are written to the cache folder (copy_plan.flush), once per run."""
    if prog.budget is not None:
        prog.budget.ran()
    copy_plan.flush()
