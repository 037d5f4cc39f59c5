"""Running SLICED networks: slices spread over CPU threads, several devices, or a Dask cluster.

Each backend compiles the per-slice network (graph/ops/sliced.inner_network, optimized by the
permutation and fusion passes) once; a slice is a straight run of that program on views of the
operands, and its part is added into an accumulator. Workers keep their own accumulator and
the accumulators are added once at the end:

- threads (``threads=`` of evaluate): workers on one backend pull slices from a shared counter,
  as many as the memory limit allows at once;
- devices (``device=["cuda:0", "cuda:1"]`` or ``"cuda:*"``): one worker thread per device, each
  with its own copy of the operands; a device pulls its next slice when it has finished the
  last one, so faster devices take more slices (balanced by measured throughput);
- Dask (``scheduler=client``): slices go out in chunks as tasks, each worker runs the compiled
  sub-plan on its own device, and the partial sums are added as a tree. Dask retries the tasks
  of a worker that is lost.

Under ``deterministic=True`` slices are dealt to workers round-robin and the accumulators are
added in worker order, so results are bitwise the same on every run (for the same workers).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node, rebuild
from tenloom.graph.ops import Op
from tenloom.graph.ops.semiring import semiring_add, semiring_zeros
from tenloom.graph.ops.sliced import (
    forward_positions,
    inner_network,
    n_slices,
    output_views,
    slice_feed,
    slice_index,
    slice_itemsize,
    slice_peak_bytes,
    slice_values,
)
from tenloom.runtime.capture import BUDGET as CAPTURE_BUDGET
from tenloom.runtime.capture import CUDA_GRAPHS, capture_budget, release_captures
from tenloom.runtime.determinism import DETERMINISTIC, THREADS
from tenloom.runtime.program import program_for
from tenloom.runtime.program import run as run_program
from tenloom.runtime.progress import BAR


@dataclass
class SliceContext:
    """How the current evaluation runs its sliced networks."""

    devices: tuple = ()  # backends of a multi-device evaluation (empty: the node's own backend)
    client: Any = None  # a dask.distributed.Client
    memory_limit: int | None = None
    device_name: str = "cpu"  # what Dask workers run on


CONTEXT: contextvars.ContextVar[SliceContext | None] = contextvars.ContextVar(
    "tenloom_slicing", default=None
)


@dataclass
class RunStats:
    """What the last sliced run did (benchmarks and tests read it): slices and busy seconds per
    worker, and the sliced indices ((label, size), ...) of the network it ran."""

    workers: list[str] = field(default_factory=list)
    slices: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    indices: tuple = ()


LAST_RUN = RunStats()


@functools.lru_cache(maxsize=128)
def optimized_inner(attrs: tuple, shapes: tuple, dtypes: tuple) -> tuple[Graph, tuple]:
    """The per-slice network after the layout and fusion passes; (graph, leaves)."""
    from tenloom.passes import SLICE_PIPELINE, run_pipeline

    net = inner_network(attrs, shapes, dtypes)
    graph, _ = run_pipeline(net.graph, SLICE_PIPELINE)
    return graph, net.leaves


def _inner_of(node: Node) -> tuple[Graph, tuple]:
    return optimized_inner(
        node.attrs, tuple(x.shape for x in node.inputs), tuple(x.dtype.str for x in node.inputs)
    )


@dataclass(frozen=True)
class Hoisted:
    """A per-slice network split in two: ``pre`` computes once, before the slices, what no
    slice changes (the subtrees whose operands have no sliced index: on the PEPS 6x6 norm a
    third of each slice's contractions); ``body`` is the slice's network with those values as
    placeholders (``slots``, in the order of ``pre``'s outputs); ``leaves`` are the original
    per-slice leaves (``body`` reads those it still needs)."""

    pre: Graph
    body: Graph
    leaves: tuple
    slots: tuple
    nbytes: int  # what the hoisted values hold while the slices run


def _leaf_terms(attrs: tuple, n_leaves: int) -> list:
    """The labels of each per-slice leaf: the operands', then the cotangent's (the output's) for
    a reverse sweep or each tangent's (its operand's) in forward mode."""
    terms, out, sliced, path, wrt = attrs[:5]
    extra = []
    fwd = forward_positions(wrt) if wrt is not None else None
    if fwd is not None:
        extra = [terms[k] for k in fwd]
    elif wrt is not None:
        extra = [out]
    return [*terms, *extra][:n_leaves]


@functools.lru_cache(maxsize=128)
def hoisted_inner(attrs: tuple, shapes: tuple, dtypes: tuple) -> Hoisted | None:
    """The per-slice network with its slice-invariant part split off (``Hoisted``), or None
    when every contraction depends on a sliced index."""
    from tenloom.graph.build import placeholder

    graph, leaves = optimized_inner(attrs, shapes, dtypes)
    cut = {lab for lab, _ in attrs[2]}
    variant = {id(p) for p, t in zip(leaves, _leaf_terms(attrs, len(leaves))) if cut & set(t)}
    outputs = {id(o) for o in graph.outputs}
    invariant_work: list[Node] = []
    for x in graph.order:
        if x.op in (Op.PLACEHOLDER, Op.CONST):
            continue
        if any(id(i) in variant for i in x.inputs):
            variant.add(id(x))
        else:
            invariant_work.append(x)
    if not invariant_work:
        return None
    # the invariant values a variant node (or the slice's output) reads: computed once
    read = {id(i) for x in graph.order if id(x) in variant for i in x.inputs} | outputs
    frontier = [x for x in invariant_work if id(x) in read]
    new: dict[int, Node] = {}
    for j, x in enumerate(frontier):
        new[id(x)] = placeholder(x.shape, x.dtype, name=f"slice_hoisted{j}")
    for x in graph.order:
        if id(x) in variant:
            new[id(x)] = rebuild(x, tuple(new.get(id(i), i) for i in x.inputs))
    body = Graph(tuple(new.get(id(o), o) for o in graph.outputs))
    slots = tuple(new[id(x)] for x in frontier)
    return Hoisted(Graph(tuple(frontier)), body, leaves, slots, sum(x.nbytes for x in frontier))


def _hoisted_of(node: Node) -> Hoisted | None:
    return hoisted_inner(
        node.attrs, tuple(x.shape for x in node.inputs), tuple(x.dtype.str for x in node.inputs)
    )


def _computed_operand_bytes(node: Node) -> int:
    """Bytes of ``node``'s operands computed in the graph (not leaves): they live beside its
    slices, within the limit."""
    return sum(x.nbytes for x in node.inputs if x.op not in (Op.CONST, Op.PLACEHOLDER))


def _hoist(node: Node, backend: Any, xs, limit: int | None) -> tuple[Hoisted | None, dict]:
    """Run the slice-invariant part of ``node``'s per-slice network once: (the split network,
    the values to feed its body by placeholder id); (None, {}) when nothing is hoisted: nothing
    is invariant, or the hoisted values would not fit beside one slice within ``limit``."""
    h = _hoisted_of(node)
    if h is None:
        return None, {}
    if limit is not None:
        per = slice_peak_bytes(node.attrs, [x.shape for x in node.inputs], slice_itemsize(node))
        beside = _computed_operand_bytes(node)
        if h.nbytes + per + node.nbytes + beside > limit:
            return None, {}
    # the invariant leaves have no sliced index: slice 0's views are the whole operands
    operands = slice_feed(node.attrs, list(xs), slice_values(node.attrs, 0))
    feed = {id(p): a for p, a in zip(h.leaves, operands)}
    values = run_program(program_for(h.pre, backend), feed, backend, None, upload=False, pool=False)
    return h, {id(p): v for p, v in zip(h.slots, values)}


class _Worker:
    """Runs slices of one node on one backend into its own accumulator."""

    def __init__(
        self,
        node: Node,
        backend: Any,
        arrays: list,
        graph: Graph,
        leaves: tuple,
        stream=False,
        hoisted: dict | None = None,
    ):
        from tenloom.passes.cost import node_flops

        self.attrs = node.attrs
        self.backend = backend
        self.arrays = arrays
        self.prog = program_for(graph, backend)
        self.leaves = leaves
        self.hoisted = hoisted or {}  # values computed once for every slice (by id)
        self.semiring = node.attrs.semiring
        if self.semiring is None:
            self.acc = backend.zeros(node.shape, node.dtype)
        else:  # a semiring network's parts combine with its addition, from its zero
            zeros = semiring_zeros(np, node.shape, node.dtype, self.semiring)
            self.acc = backend.from_host(zeros)
        self.views = output_views(self.attrs, self.acc, [x.shape for x in node.inputs])
        self.count = 0
        self.busy = 0.0
        self.bar = BAR.get()  # progress=True: count flops slice by slice
        self.slice_flops = node_flops(node) // max(n_slices(node.attrs), 1) if self.bar else 0
        # a GPU backend's device must be current for the accumulation too (not only kernels)
        self.device = backend.activate()
        # several workers on one GPU: each enqueues on its own stream, so slices overlap
        self.stream = (
            backend.worker_stream() if stream and backend.streams else contextlib.nullcontext()
        )
        self._pending = None

    def pace(self) -> None:
        """Wait until the slice before the last one has finished: one slice stays queued on
        the device while the next is enqueued, and a worker pulls slices only as fast as its
        device really runs them."""
        if not self.backend.streams:
            return
        with self.device, self.stream:
            mark = self.backend.marker()
        if mark is None:  # work is done when its call returns
            return
        if self._pending is not None:
            self._pending.synchronize()
        self._pending = mark

    def run(self, k: int) -> None:
        with self.device, self.stream:
            self._run(k)

    def _run(self, k: int) -> None:
        t0 = time.perf_counter()
        values = slice_values(self.attrs, k)
        operands = slice_feed(self.attrs, self.arrays, values)
        feed = {id(p): a for p, a in zip(self.leaves, operands)}
        if self.hoisted:
            feed.update(self.hoisted)
        # the step loop on views of the operands, in fresh memory (no arena): a slice's memory
        # is what the limit sized
        parts = run_program(self.prog, feed, self.backend, None, upload=False, pool=False)
        for (view, term), part in zip(self.views, parts):
            idx = slice_index(term, values)
            if self.semiring is not None:
                view[idx or ...] = semiring_add(view[idx or ...], part, self.semiring)
            elif idx:
                view[idx] += part
            else:
                view += part
        self.count += 1
        self.busy += time.perf_counter() - t0
        if self.bar is not None:
            self.bar.update(self.slice_flops)


def _deal(n: int, workers: list, sync) -> None:
    """Run slices 0..n-1 on the workers concurrently (one thread each). Dynamic: a worker takes
    the next slice when it is free. Deterministic mode: slice k goes to worker k % W."""
    if len(workers) == 1:
        for k in range(n):
            workers[0].run(k)
        sync(workers[0])
        return
    deterministic = DETERMINISTIC.get()
    counter = itertools.count()
    lock = threading.Lock()
    errors: list[BaseException] = []

    def loop(w: int) -> None:
        worker = workers[w]
        # the threads run slices side by side: each slice's kernels run on its own thread
        # (kernels that split over THREADS would start threads of their own on busy cores)
        THREADS.set(1)
        try:
            if deterministic:
                for k in range(w, n, len(workers)):
                    if errors:
                        return
                    worker.run(k)
            else:
                while not errors:
                    with lock:
                        k = next(counter)
                    if k >= n:
                        break
                    worker.run(k)
                    worker.pace()  # pull the next slice only as fast as the device runs them
            sync(worker)
        except BaseException as e:  # noqa: BLE001 - re-raised below, in the caller's thread
            errors.append(e)

    threads = [
        threading.Thread(target=contextvars.copy_context().run, args=(loop, w), daemon=True)
        for w in range(len(workers))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def _record(workers: list, names: list[str]) -> None:
    LAST_RUN.indices = tuple(workers[0].attrs.sliced)
    LAST_RUN.workers[:] = names
    LAST_RUN.slices[:] = [w.count for w in workers]
    LAST_RUN.seconds[:] = [w.busy for w in workers]


def concurrency(node: Node, limit: int | None, wanted: int, hoisted: int = 0) -> int:
    """How many slices may run at once: ``wanted``, fewer where the memory limit says so (each
    extra worker holds one slice's peak and an accumulator; ``hoisted``: bytes of values that
    every slice reads, held meanwhile)."""
    n = n_slices(node.attrs)
    wanted = max(1, min(wanted, n))
    if limit is None:
        return wanted
    per = slice_peak_bytes(node.attrs, [x.shape for x in node.inputs], slice_itemsize(node))
    room = limit - node.nbytes - per - hoisted
    return max(1, min(wanted, 1 + room // max(per + node.nbytes, 1)))


def slice_budget(node: Node, limit: int | None, workers: int = 1, hoisted: int = 0):
    """The bytes each of ``workers`` slice programs running at once on one device may hold
    captured (runtime/capture.py ``BUDGET``; None: no limit): the limit less what slicing
    cannot shrink (each worker's accumulator, operands computed in the graph, ``hoisted``
    values), shared out. The slicing plan keeps one slice's predicted peak within it; a
    capture adds its copied inputs and packed outputs, and is made only where they fit too."""
    if limit is None:
        return None
    beside = _computed_operand_bytes(node)
    return max(0, (limit - beside - hoisted - workers * node.nbytes) // max(workers, 1))


@contextlib.contextmanager
def _limited_captures(budget: int | None):
    """The slices' runs with ``budget`` (``slice_budget``); under a limit the slice programs'
    captures are let go when the slices have run, so no pool outlives its network (a later
    step, or another sliced network, has the limit to itself)."""
    with capture_budget(budget):
        try:
            yield
        finally:
            if budget is not None:
                release_captures()


def sliced_kernel(node: Node, backend: Any):
    """The kernel of a SLICED node on ``backend``."""

    def run(*xs):
        ctx = CONTEXT.get() or SliceContext()
        if ctx.client is not None:
            return backend.from_host(_run_dask(node, ctx, [backend.to_host(x) for x in xs]))
        graph, leaves = _inner_of(node)
        if len(ctx.devices) > 1:
            return _run_devices(node, ctx, backend, xs, graph, leaves)
        split, hoisted = _hoist(node, backend, xs, ctx.memory_limit)
        extra = sum(v.nbytes for v in hoisted.values() if hasattr(v, "nbytes"))
        w = concurrency(node, ctx.memory_limit, THREADS.get(), extra)
        if w > 1:  # inputs were made on the evaluation's stream: finish them first
            backend.synchronize()
        if split is not None:  # its own leaves: the split was made from them
            graph, leaves = split.body, split.leaves
        workers = [
            _Worker(node, backend, list(xs), graph, leaves, w > 1, hoisted) for _ in range(w)
        ]
        with _limited_captures(slice_budget(node, ctx.memory_limit, w, extra)):
            _deal(n_slices(node.attrs), workers, lambda worker: worker.backend.synchronize())
        _record(workers, [backend.kind] * w)
        return _combine(node, [w.acc for w in workers])

    return run


def _run_devices(node: Node, ctx: SliceContext, backend: Any, xs, graph, leaves):
    """One worker per device, each with its own copy of the operands; partial sums meet on the
    node's own device."""
    host = [np.asarray(backend.to_host(x)) for x in xs]
    workers = []
    for be in ctx.devices:
        arrays = [be.from_host(h) for h in host]
        workers.append(_Worker(node, be, arrays, graph, leaves))
    # each device holds its own accumulator and runs one slice at a time
    with _limited_captures(slice_budget(node, ctx.memory_limit)):
        _deal(n_slices(node.attrs), workers, lambda worker: worker.backend.synchronize())
    _record(workers, [w.backend.kind for w in workers])
    total = _combine(node, [np.array(w.backend.to_host(w.acc)) for w in workers])
    return backend.from_host(total)


# ---- Dask -----------------------------------------------------------------------------------


def run_chunk(
    attrs,
    shapes,
    dtypes,
    device: str,
    start: int,
    stop: int,
    delay: float,
    det: bool,
    graphs: bool,
    budget: int | None,
    *arrays,
):
    """A Dask task: slices ``start..stop-1`` on this worker's device; returns the partial sum
    as a host array. ``det``: the caller's ``deterministic=`` (kernels read it); ``graphs``:
    whether the caller's run may capture CUDA graphs, ``budget`` the bytes a captured slice
    program may hold (runtime/capture.py). (Module-level so that workers import it by
    name.)"""
    from tenloom.runtime.capture import graphs_mode

    with graphs_mode(graphs), capture_budget(budget):
        return _run_chunk(attrs, shapes, dtypes, device, start, stop, delay, det, *arrays)


def _run_chunk(
    attrs, shapes, dtypes, device: str, start: int, stop: int, delay: float, det: bool, *arrays
):
    from tenloom.graph.node import make_node
    from tenloom.runtime.backends import get_backend
    from tenloom.runtime.session import parse_device

    kind, index = parse_device(device)
    backend = get_backend(kind, index)
    from tenloom.graph.build import placeholder

    inputs = tuple(placeholder(s, d) for s, d in zip(shapes, dtypes))
    node = make_node(Op.SLICED, inputs, attrs)
    graph, leaves = optimized_inner(attrs, tuple(shapes), tuple(dtypes))
    worker = _Worker(node, backend, [backend.from_host(a) for a in arrays], graph, leaves)
    token = DETERMINISTIC.set(det)
    try:
        with _limited_captures(CAPTURE_BUDGET.get()):
            for k in range(start, stop):
                if delay:
                    time.sleep(delay)  # test hook: keeps tasks in flight to kill a worker
                worker.run(k)
    finally:
        DETERMINISTIC.reset(token)
    return np.asarray(backend.to_host(worker.acc))


def _combine(node: Node, parts: list):
    """The workers' partial results added up (with the semiring's addition for a semiring
    network)."""
    acc = parts[0]
    for other in parts[1:]:
        if node.attrs.semiring is None:
            acc += other
        else:
            acc = semiring_add(acc, other, node.attrs.semiring)
    return acc


def _add(a, b, semiring=None):
    return a + b if semiring is None else semiring_add(a, b, semiring)


def _run_dask(node: Node, ctx: SliceContext, host: list):
    from tenloom.runtime import testing

    client = ctx.client
    n = n_slices(node.attrs)
    n_workers = max(1, len(client.scheduler_info().get("workers", {})))
    chunks = min(n, 4 * n_workers)
    bounds = [(n * c) // chunks for c in range(chunks + 1)]
    data = client.scatter(host, broadcast=True, hash=False)  # fresh keys per call
    shapes = tuple(x.shape for x in node.inputs)
    dtypes = tuple(x.dtype.str for x in node.inputs)
    futures = [
        client.submit(
            run_chunk,
            node.attrs,
            shapes,
            dtypes,
            ctx.device_name,
            bounds[c],
            bounds[c + 1],
            testing.slice_delay,
            DETERMINISTIC.get(),
            CUDA_GRAPHS.get(),
            slice_budget(node, ctx.memory_limit),
            *data,
            pure=False,
            retries=2,
        )
        for c in range(chunks)
        if bounds[c] < bounds[c + 1]
    ]
    while len(futures) > 1:  # tree reduction, pairs in order (deterministic for fixed chunks)
        nxt = [
            client.submit(_add, a, b, node.attrs.semiring, pure=False)
            for a, b in zip(futures[::2], futures[1::2])
        ]
        if len(futures) % 2:
            nxt.append(futures[-1])
        futures = nxt
    return futures[0].result()
