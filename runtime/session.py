"""The orchestrator: the setup that ``evaluate``, ``compile``, ``dump``, ``explain``,
``visualize``, ``to_networkx`` and the gradient pre-pass share, written once.

    parse_options(caller, opts)              -> Options   (runtime/options.py: checked once)
    open_devices(names)                      -> backends  (an absent device raises first)
    check_limit_feasible(graph, limit)                    (before any pass or search)
    optimize(graph, options, pipeline=None)  -> Optimized (cached: bounded LRU)
    check_memory_limit(optimized, limit)
    run_context(options, devices, threads)                (around a run that needs it)

``optimize`` is the one way the runtime and the front end run the passes: the pipeline is
``pipeline`` (``passes.PRE_GRAD`` for the gradient pre-pass), else ``options.passes``, else
``passes.DEFAULT_PIPELINE``, all declared in passes/__init__.py. Its result is cached by the
outputs' identities, the pipeline, the target device and what in the options shapes the
passes (``Options.pass_key``), so a graph evaluated, compiled, dumped and drawn is optimized
once. ``verify=True`` and optimizer objects are never served from the cache.

This module also registers, by reference, the caches of the layers below that cannot do it
themselves (graph/ keeps no locks and imports nothing above it), and the runtime's own, in the
one registry of passes/caches.py (``tl.cache_info()``, ``tl.clear_caches()``).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import tenloom.passes as _passes
from tenloom.graph.build import lift
from tenloom.graph.errors import MemoryLimitError, OptionTypeError, fmt_shape
from tenloom.graph.graph import Graph
from tenloom.passes import run_pipeline
from tenloom.passes.caches import LRUCache, counter
from tenloom.passes.contraction_order import COMPILE_EFFORT
from tenloom.passes.options import NO_OPTIONS, Options
from tenloom.passes.prereduce import still_frozen
from tenloom.runtime.backends import get_backend
from tenloom.runtime.capture import capture_budget, graphs_mode, run_off_reason  # issue 23
from tenloom.runtime.options import parse_device_name, parse_options
from tenloom.runtime.precision import check_devices, precision_mode  # precision=

# The device used when none is given (tests point it at a GPU to run the corpus there:
# TENLOOM_TEST_DEVICE=cuda:0), and threads= when not given (tests run the corpus with 2 too).
DEFAULT_DEVICE = "cpu"
DEFAULT_THREADS = 1

# Independent decompositions run at the same time where that pays: on a device with streams
# each worker drives its own stream, and cuSOLVER's SVD and QR leave the GPU idle between their
# many small kernels and host synchronizations, so two or four of them overlap well
# (benchmarks/linalg_overlap.py on an H200: two SVDs of 1024 x1.7, four x2.8; eigh x0.8-1.06).
# On the CPU, LAPACK already uses every core and threads lose (x0.57-1.03 on 16 cores), so
# threads= stays the user's choice there.
MAX_OVERLAP = 4
_OVERLAP_MIN_FLOPS = 10**6  # smaller decompositions are not worth a worker


def default_threads(graph: Graph, backend: Any) -> int:
    """``threads=`` when not given: ``DEFAULT_THREADS``, or, on a device with streams, as many
    workers (up to ``MAX_OVERLAP``) as the graph has decompositions that may run at once."""
    if not getattr(backend, "streams", False):
        return DEFAULT_THREADS
    n = graph.meta.get("overlap")
    if n is None:
        n = graph.meta["overlap"] = _independent_decompositions(graph)
    return max(DEFAULT_THREADS, min(MAX_OVERLAP, n))


def _independent_decompositions(graph: Graph) -> int:
    """How many of the graph's LINALG nodes (of at least ``_OVERLAP_MIN_FLOPS``) have another
    one that is neither their ancestor nor their descendant (0 or >= 2)."""
    from tenloom.graph.ops import OPS, OpKind

    heavy: list[int] = []  # bit i: the i-th heavy decomposition
    below: dict[int, int] = {}  # id(node) -> bits of the heavy nodes at or above it
    for n in graph.order:
        m = 0
        for i in n.inputs:
            m |= below[id(i)]
        d = OPS[n.op]
        if d.kind is OpKind.LINALG and d.cost is not None and d.cost(n) >= _OVERLAP_MIN_FLOPS:
            m |= 1 << len(heavy)
            heavy.append(m)
        below[id(n)] = m
    # heavy[j] holds j's own bit and its heavy ancestors' bits
    free = 0
    for j, mj in enumerate(heavy):
        if any(not (mj >> k) & 1 and not (mk >> j) & 1 for k, mk in enumerate(heavy) if k != j):
            free += 1
    return free


# ---- devices -----------------------------------------------------------------------------


def device_names(device: Any, caller: str = "evaluate") -> list[str]:
    """The devices of a run: one name, a list of names, or "kind:*" (every device of that kind
    present). The first is where the graph runs; sliced networks use them all."""
    if device is None:
        return [DEFAULT_DEVICE]
    from tenloom.runtime.options import device_names as checked_names

    return checked_names(caller, device)


def run_devices(o: Options) -> tuple[str, ...]:
    """The resolved devices of ``o`` (the default device when none was given)."""
    return (DEFAULT_DEVICE,) if o.devices is None else o.devices


def target_of(o: Options) -> str:
    """The device the graph will run on: the first of ``device=``, else the default."""
    return DEFAULT_DEVICE if o.devices is None else o.devices[0]


def parse_device(device: Any) -> tuple[str, int]:
    return parse_device_name("evaluate", DEFAULT_DEVICE if device is None else device)


def open_devices(names: Sequence[str]) -> list[Any]:
    """The backend of each device, in order: an absent device or a missing backend raises
    DeviceError here, before any pass runs."""
    return [get_backend(*parse_device(n)) for n in names]


# ---- memory limits -------------------------------------------------------------------------


def check_limit_feasible(graph: Graph, limit: int, caller: str = "evaluate") -> None:
    """Refuse at once, before any pass or search, a ``memory_limit`` that no slicing can meet:
    one input alone, or the outputs together, exceed it. Every caller with a limit checks it
    (evaluate, compile, explain, dump, visualize), cached optimization or not, so that they all
    agree."""
    from tenloom.passes.cost import PREEXISTING

    outs = {id(o): o for o in graph.outputs}
    out_bytes = sum(o.nbytes for o in outs.values())
    if out_bytes > limit:
        raise MemoryLimitError(
            f"{caller}: the outputs alone need {out_bytes} bytes, more than "
            f"memory_limit={limit} bytes; no slicing can fit"
        )
    for node in graph.order:
        if node.op in PREEXISTING and node.nbytes > limit:
            raise MemoryLimitError(
                f"{caller}: input {node.op.value} {node.dtype}{fmt_shape(node.shape)} alone "
                f"needs {node.nbytes} bytes, more than memory_limit={limit} bytes; no slicing "
                f"can fit (at {node.where})"
            )


def check_memory_limit(graph: Graph, limit: int, caller: str = "evaluate") -> None:
    """Raise MemoryLimitError when the predicted peak of intermediates and outputs still exceeds
    ``limit`` after slicing (the part that slicing cannot shrink: elementwise work, outputs),
    naming the peak and the biggest node."""
    from tenloom.passes.cost import peak_bytes

    peak = peak_bytes(graph)
    if peak > limit:
        raise MemoryLimitError(
            f"{caller}: predicted peak memory {peak} bytes exceeds memory_limit={limit} bytes; "
            + _peak_site(graph)  # slicing-agreement: where the peak is, not the largest array
        )
    from tenloom.graph.ops import Op  # slicing-agreement
    from tenloom.passes.slicing import check_overhead  # slicing-agreement

    for node in graph.order:  # slicing-agreement: a limit met only in name is refused
        if node.op is Op.SLICED:
            check_overhead(node.attrs, [x.shape for x in node.inputs], limit, caller)


def _peak_site(graph: Graph) -> str:
    """Where ``peak_bytes`` finds the peak (slicing-agreement): the node running then, its own
    bytes and a slice's, and the other arrays live beside it (the same walk)."""
    from tenloom.passes.cost import PREEXISTING, transient_bytes

    order = graph.schedule
    remaining: dict[int, int] = {}
    for node in order:
        for i in node.inputs:
            remaining[id(i)] = remaining.get(id(i), 0) + 1
    outputs = {id(o) for o in graph.outputs}
    live = best = beside = 0
    site = order[-1]
    for node in order:
        if node.op not in PREEXISTING:
            live += node.nbytes
            if live + transient_bytes(node) > best:
                best, site, beside = live + transient_bytes(node), node, live - node.nbytes
        for i in node.inputs:
            remaining[id(i)] -= 1
            if remaining[id(i)] == 0 and id(i) not in outputs and i.op not in PREEXISTING:
                live -= i.nbytes
    where = f"{site.op.value} {site.dtype}{fmt_shape(site.shape)} at {site.where}"
    sliced = transient_bytes(site)
    own = f"{site.nbytes} bytes" + (f" plus one slice of {sliced} bytes" if sliced else "")
    return f"the peak is at {where} ({own}, beside {beside} bytes of other live arrays)"


# ---- optimization --------------------------------------------------------------------------


# A derivative's node -> {an output it differentiates: the pre-pass's form of that output}
# (tenloom/autodiff.py fills it). The pre-pass's form is the same value contracted along the
# tree the derivative's forward sweep uses; asked for together with the derivative, it is what
# the output becomes (shared_forwards), so one forward serves both.
SHARED_FORWARDS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def shared_forwards(nodes: tuple) -> tuple:
    """``nodes`` with each one whose derivative is among them replaced by the pre-pass's form
    of it (``SHARED_FORWARDS``): ``evaluate(value, *grad(value, xs))`` runs the forward once,
    along the gradient's tree, where the value alone would be contracted along its own."""
    subs: dict = {}
    for n in nodes:
        forms = SHARED_FORWARDS.get(n)
        if forms:
            subs.update(forms)
    if not subs:
        return nodes
    return tuple(subs.get(n, n) for n in nodes)


def build_graph(tensors: Sequence[Any], caller: str = "evaluate", share: bool = True) -> Graph:
    """The graph of ``tensors`` (Tensors, nodes, arrays or scalars) as traced, with values asked
    for together with their derivatives in the derivatives' form (``shared_forwards``) unless
    ``share`` is False (the views that show the graph as the user traced it)."""
    nodes = tuple(lift(t, caller) for t in tensors)
    return Graph(shared_forwards(nodes) if share else nodes)


@dataclass(frozen=True)
class Optimized:
    """A graph after a pipeline: ``graph``, each pass's ``stats`` (what it changed), and with
    ``optimize(..., stages=True)`` the graph after each pass (``stages``: (pass, graph))."""

    graph: Graph
    stats: dict[str, dict[str, Any]]
    stages: tuple[tuple[str, Graph], ...] | None = None
    effort: float = 1.0  # the path search's effort it was made with (Options.search_effort)


# Optimized graphs of recent calls: (outputs' ids, pipeline, target, Options.pass_key) ->
# (outputs, Optimized). Entries hold their outputs, so an id cannot be reused while its entry
# lives; an entry whose reductions were folded from an array made writeable since is stale.
_OPTIMIZED: LRUCache[tuple, tuple[tuple, Optimized]] = LRUCache("runtime.optimized_graphs", 32)
PASS_RUNS = counter("runtime.pass_runs")  # how often a pipeline ran (tests check the cache)
_UNSET: Any = object()


def pipeline_of(o: Options, pipeline: Sequence[str] | None = None) -> tuple[str, ...]:
    """The passes that run: ``pipeline`` if given, else ``passes=``, else the default."""
    if pipeline is not None:
        return tuple(pipeline)
    return _passes.DEFAULT_PIPELINE if o.passes is None else o.passes


def optimize_key(graph: Graph, o: Options, pipeline: Sequence[str] | None = None) -> tuple | None:
    """The cache key of ``optimize(graph, o, pipeline)``; None: not cacheable."""
    shaping = o.pass_key
    if shaping is None:
        return None
    if pipeline is None:  # pipeline_of and target_of, inlined: evaluate's every call asks
        pipeline = _passes.DEFAULT_PIPELINE if o.passes is None else o.passes
    target = DEFAULT_DEVICE if o.devices is None else o.devices[0]
    return (tuple(map(id, graph.outputs)), tuple(pipeline), target, shaping)


def cached(key: tuple | None) -> Optimized | None:
    """The cached optimization under ``key``, unless stale (a folded array made writeable)."""
    if key is None:
        return None
    hit = _OPTIMIZED.get(key)
    if hit is None or not still_frozen(hit[1].graph):
        return None
    return hit[1]


def optimize(
    graph: Graph,
    options: Options = NO_OPTIONS,
    pipeline: Sequence[str] | None = None,
    *,
    stages: bool = False,
    key: Any = _UNSET,
) -> Optimized:
    """``graph`` after the passes (see the module docstring), from the cache when these outputs
    were optimized with these options before. ``stages=True`` also keeps each pass's result
    (explain, the gradient pre-pass). ``key``: ``optimize_key``'s, from a caller that has just
    looked it up with ``cached`` and missed (evaluate): not looked up again."""
    if key is _UNSET:
        key = optimize_key(graph, options, pipeline)
        hit = cached(key)
        if hit is None and options.search_effort != 1.0:
            # a longer search (compile) changes nothing where no "auto" search ran: the
            # graph evaluate optimized is the same
            hit = cached(
                optimize_key(graph, replace(options, search_effort=1.0, sweep_madds=0.0), pipeline)
            )
            if hit is not None and hit.stats.get("contraction_order", {}).get("auto_searches"):
                hit = None
        if hit is not None and (hit.stages is not None or not stages):
            return hit
        if hit is not None and hit.effort != options.search_effort:
            # each pass's graph wanted (explain) of a graph a repeated evaluate promoted: made
            # again with the same effort, so explain shows the tree evaluate runs and the entry
            # stays the promoted one
            options = replace(options, search_effort=hit.effort)
    PASS_RUNS["n"] += 1
    target = target_of(options)
    for_passes = options if options.target == target else replace(options, target=target)
    seen: list[tuple[str, Graph]] = []
    on_pass: Callable[[str, Graph], None] | None = None
    if stages:

        def on_pass(name: str, g: Graph) -> None:
            seen.append((name, g))

    optimized, ctx = run_pipeline(
        graph, pipeline_of(options, pipeline), for_passes, verify=options.verify, on_pass=on_pass
    )
    result = Optimized(optimized, ctx.stats, tuple(seen) if stages else None, options.search_effort)
    if key is not None:
        _OPTIMIZED.put(key, (graph.outputs, result))
    return result


# evaluate on the same outputs again and again (a loop, a benchmark): at the PROMOTE_AT-th run
# the graph is optimized again with a compiled plan's search effort, and that result replaces
# the first. The first run's "auto" search spends about the run's own predicted time; a graph
# run again and again earns the longer search (the same steps in every process, so the plans
# stay reproducible). Only graphs whose passes ran an "auto" path search are promoted, and none
# under deterministic=True (whose every call gives the same bits).
PROMOTE_AT = 3
# key -> (a weak reference to the cached Optimized counted, runs): a count belongs to that
# entry only (an id in a key can be reused once its entry has been dropped)
_REPEATS: LRUCache[tuple, tuple] = LRUCache("runtime.repeated_graphs", 64)
PROMOTIONS = counter("runtime.search_promotions")


def promoted(graph: Graph, o: Options, key: Any, hit: Optimized) -> Optimized:
    """``hit`` (evaluate's cached optimization under ``key``), or at the PROMOTE_AT-th run of
    the same outputs its re-optimization with the compile effort, which replaces it."""
    if key is None or o.deterministic or max(o.search_effort, hit.effort) >= COMPILE_EFFORT:
        return hit  # deterministic=True: the same bits every call, so the same tree
    if not hit.stats.get("contraction_order", {}).get("auto_searches"):
        return hit
    seen = _REPEATS.get(key)
    runs = (seen[1] if seen is not None and seen[0]() is hit else 1) + 1  # run 1 missed
    _REPEATS.put(key, (weakref.ref(hit), runs))
    if runs != PROMOTE_AT:
        return hit
    better = optimize(graph, replace(o, search_effort=COMPILE_EFFORT))
    _OPTIMIZED.put(key, (graph.outputs, better))
    _REPEATS.put(key, (weakref.ref(better), runs))  # counted on: never promoted again
    PROMOTIONS["n"] += 1
    return better


def optimize_within_limit(
    graph: Graph, options: Options, hit: Optimized | None = None, key: Any = _UNSET
) -> Optimized:
    """``optimize`` for a run (evaluate, compile): with a ``memory_limit``, a graph that cannot
    fit even sliced is refused before any search, and the optimized graph's predicted peak is
    checked after it. ``hit``/``key``: the caller's own cache lookup (evaluate binds its feed
    to the cached graph before optimizing)."""
    limit = options.memory_limit
    if limit is not None:  # also on a cache hit: explain may have optimized it unchecked
        check_limit_feasible(graph, limit)
    optimized = hit if hit is not None else optimize(graph, options, key=key)
    if limit is not None:
        check_memory_limit(optimized.graph, limit)
    return optimized


def optimize_tensors(tensors: Sequence[Any], opts: Any, caller: str) -> tuple[Graph, Optimized]:
    """(traced graph, its optimization) of ``tensors`` with ``opts`` (keywords, checked as
    ``caller``'s): what dump, to_networkx, visualize and the CLI show."""
    o = parse_options(caller, opts)
    graph = build_graph(tensors)
    if o.memory_limit is not None:
        check_limit_feasible(graph, o.memory_limit, caller)
    # a predicted peak over the limit is not refused here: dump and visualize show such a
    # plan (what evaluate and explain refuse), to see why
    return graph, optimize(graph, o)


# ---- around a run --------------------------------------------------------------------------


@contextlib.contextmanager
def no_pooling(on: bool) -> Iterator[None]:
    """Under a memory limit, runs keep no freed buffers for reuse, and what earlier runs kept is
    let go first, so that it does not count against the limit (runtime/buffers.py; the pools
    of captured programs, runtime/capture.py)."""
    if not on:
        yield
        return
    from tenloom.runtime.buffers import POOLING, clear_pools
    from tenloom.runtime.capture import release_captures

    clear_pools()
    release_captures()  # issue 23: captured programs' pools too
    token = POOLING.set(False)
    try:
        yield
    finally:
        POOLING.reset(token)


@contextlib.contextmanager
def slicing_context(names: Sequence[str], client: Any, limit: int | None) -> Iterator[None]:
    """Tell sliced networks where their slices may run (runtime/sliced.py)."""
    from tenloom.runtime.sliced import CONTEXT, SliceContext

    if client is not None and not hasattr(client, "submit"):
        raise OptionTypeError(f"evaluate: scheduler={client!r} is not a dask.distributed.Client")
    backends = tuple(get_backend(*parse_device(n)) for n in names) if len(names) > 1 else ()
    token = CONTEXT.set(SliceContext(backends, client, limit, names[0]))
    try:
        yield
    finally:
        CONTEXT.reset(token)


@contextlib.contextmanager
def run_context(o: Options, names: Sequence[str], threads: int) -> Iterator[None]:
    """What a run sets up around itself: deterministic kernels and the thread count, where the
    slices of sliced networks may run, and no buffer pooling under a memory limit."""
    from tenloom.runtime.determinism import deterministic_mode
    from tenloom.runtime.kernels.copy_plan import tuning_cache  # issue 22

    check_devices("evaluate", o.precision, names)  # precision=: refused before the run starts
    limit = o.memory_limit
    with (
        precision_mode(o.precision),  # precision=: read by the CUDA contraction kernels
        deterministic_mode(o.deterministic, threads),
        slicing_context(names, o.scheduler, limit),
        no_pooling(limit is not None),
        tuning_cache(o.cache_dir),  # issue 22: where kernels keep timed copy plans
        graphs_mode(run_off_reason(o, threads) is None),  # issue 23: capture unless ruled out
        capture_budget(None if limit is None else 0),  # under a limit: slice programs only
    ):
        yield


# ---- the caches kept below the runtime, and the runtime's, in the one registry ------------


def _register_caches() -> None:
    import tenloom.graph.ops.leaf as leaf
    import tenloom.runtime.buffers as buffers
    import tenloom.runtime.program as program
    import tenloom.runtime.sliced as sliced
    from tenloom.graph.ops.sliced import inner_network
    from tenloom.passes import caches
    from tenloom.runtime import backends

    caches.register("graph.scalar_nodes", caches.Table(leaf._SCALAR_NODES, 4096))
    caches.register("graph.slice_networks", caches.FunctionCache(inner_network))
    caches.register("runtime.slice_programs", caches.FunctionCache(sliced.optimized_inner))
    caches.register("runtime.slice_hoisted", caches.FunctionCache(sliced.hoisted_inner))
    # compiled programs per optimized graph: weak, they go with their graph (a plan's, or one
    # in runtime.optimized_graphs)
    caches.register("runtime.programs", caches.Table(program._PROGRAMS, None))
    caches.register(
        "runtime.buffer_pools",
        caches.Computed(
            lambda: caches.CacheInfo(buffers.held_bytes(), buffers.POOL_BYTES, unit="bytes"),
            buffers.clear_pools,
        ),
    )

    # each loaded backend's own tables, as it lists them (Backend.caches): copies of frozen
    # constants on the device (weak: each goes with its array) and compiled kernels
    def backend_tables(kind: str, weak: bool) -> caches.Computed:
        def tables() -> list[dict]:
            return [t for be in backends.loaded() for t in be.caches().get(kind, ())]

        def info() -> caches.CacheInfo:
            return caches.CacheInfo(sum(len(t) for t in tables()), None, weak=weak)

        def clear() -> None:
            for t in tables():
                t.clear()

        return caches.Computed(info, clear)

    caches.register("runtime.device_constants", backend_tables("constants", True))
    caches.register("runtime.device_kernels", backend_tables("kernels", False))


_register_caches()
