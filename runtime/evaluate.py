"""``evaluate``: the public path from lazy tensors to arrays.

tensors -> Graph -> passes (run_pipeline) -> executor on the chosen backend -> ndarrays
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import tenloom.passes as _passes
from tenloom.graph.build import lift
from tenloom.graph.errors import MemoryLimitError, OptionTypeError, fmt_shape
from tenloom.graph.graph import Graph
from tenloom.graph.value import Value
from tenloom.passes import run_pipeline
from tenloom.passes.prereduce import still_frozen
from tenloom.passes.slicing import parse_bytes  # noqa: F401  (re-exported)
from tenloom.runtime.backends import get_backend
from tenloom.runtime.determinism import deterministic_mode
from tenloom.runtime.executor import bind_feed, execute, program_for
from tenloom.runtime.options import OPTION_NAMES, Options, parse_device_name, parse_options
from tenloom.runtime.progress import counted, flops_bar

OPTIONS = OPTION_NAMES  # every option of evaluate (runtime/options.py checks them)


def check_options(opts: dict[str, Any] | Options, caller: str = "evaluate") -> Options:
    """``opts`` checked (runtime/options.py): the record, or OptionError / DeviceError."""
    return parse_options(caller, opts)


# The device used when evaluate is not given one (tests point it at a GPU to run the corpus
# there: TENLOOM_TEST_DEVICE=cuda:0).
DEFAULT_DEVICE = "cpu"
DEFAULT_THREADS = 1  # threads= when not given (tests run the corpus with 2 too)


def device_names(device: Any, caller: str = "evaluate") -> list[str]:
    """The devices of an evaluation: one name, a list of names, or "kind:*" (every device of
    that kind present). The first is where the graph runs; sliced networks use them all."""
    if device is None:
        return [DEFAULT_DEVICE]
    from tenloom.runtime.options import device_names as checked_names

    return checked_names(caller, device)


def parse_device(device: Any) -> tuple[str, int]:
    return parse_device_name("evaluate", DEFAULT_DEVICE if device is None else device)


def open_devices(names: list[str] | tuple[str, ...]) -> list[Any]:
    """The backend of each device, in order: an absent device or a missing backend raises
    DeviceError here, before any pass runs."""
    return [get_backend(*parse_device(n)) for n in names]


def check_limit_feasible(graph: Graph, limit: int) -> None:
    """Refuse at once, before any pass or search, a ``memory_limit`` that no slicing can meet:
    one input alone, or the outputs together, exceed it."""
    from tenloom.passes.cost import PREEXISTING

    outs = {id(o): o for o in graph.outputs}
    out_bytes = sum(o.nbytes for o in outs.values())
    if out_bytes > limit:
        raise MemoryLimitError(
            f"evaluate: the outputs alone need {out_bytes} bytes, more than "
            f"memory_limit={limit} bytes; no slicing can fit"
        )
    for node in graph.order:
        if node.op in PREEXISTING and node.nbytes > limit:
            raise MemoryLimitError(
                f"evaluate: input {node.op.value} {node.dtype}{fmt_shape(node.shape)} alone "
                f"needs {node.nbytes} bytes, more than memory_limit={limit} bytes; no slicing "
                f"can fit (at {node.where})"
            )


def check_memory_limit(graph: Graph, limit: int) -> None:
    """Raise MemoryLimitError when the predicted peak of intermediates and outputs still exceeds
    ``limit`` after slicing (the part that slicing cannot shrink: elementwise work, outputs),
    naming the peak and the biggest node."""
    from tenloom.passes.cost import peak_bytes

    peak = peak_bytes(graph)
    if peak > limit:
        biggest = max(graph.order, key=lambda n: n.nbytes)
        raise MemoryLimitError(
            f"evaluate: predicted peak memory {peak} bytes exceeds memory_limit={limit} bytes; "
            f"the largest array is {biggest.op.value} {biggest.dtype}{biggest.shape} "
            f"({biggest.nbytes} bytes) at {biggest.where}"
        )


def pipeline_options(opts: dict[str, Any] | Options, caller: str = "evaluate") -> dict[str, Any]:
    """The options given (checked and normalized) plus ``target``, the device the graph will
    run on (the first of ``device=``, else the default): the passes may tailor the graph to it
    (fusion caps on the CPU)."""
    o = parse_options(caller, opts)
    target = DEFAULT_DEVICE if o.devices is None else o.devices[0]
    return {**o.given, "target": target}


def build_graph(tensors: tuple[Any, ...]) -> Graph:
    return Graph(tuple(lift(t, "evaluate") for t in tensors))


# Optimized graphs of recent evaluate calls, keyed by the outputs' identities and the options
# that shape optimization: evaluating the same tensors again skips the passes. Entries hold
# their outputs, so an id cannot be reused while its entry lives; the cache is bounded (LRU).
_OPTIMIZED: "collections.OrderedDict[tuple, tuple[tuple, Graph]]" = collections.OrderedDict()
_OPTIMIZED_MAX = 32
_OPTIMIZED_LOCK = threading.Lock()
PASS_RUNS = {"n": 0}  # how often the pipeline ran (tests check the cache)


_KEY_OPTIONS = ("passes", "optimize", "device", "memory_limit", "threads")


def _opt_key(graph: Graph, opts: Any) -> tuple | None:
    ids = tuple(id(o) for o in graph.outputs)
    if not opts:  # the common case: all defaults
        return (ids, _passes.DEFAULT_PIPELINE)
    if opts.get("verify"):
        return None  # verify= checks the passes as they run: never skip them
    if not any(k in opts for k in _KEY_OPTIONS):
        return (ids, _passes.DEFAULT_PIPELINE)
    parts: list = [opts.get("passes") is None and _passes.DEFAULT_PIPELINE]
    for name in _KEY_OPTIONS:
        v = opts.get(name)
        if isinstance(v, (list, tuple)):
            v = tuple(v)
        elif isinstance(v, dict):
            v = repr(sorted(v.items()))
        elif v is not None and not isinstance(v, (str, bool, int)):
            return None  # an optimizer object: its own state decides
        parts.append(v)
    return (ids, *parts)


def _cached(key: tuple | None) -> Graph | None:
    if key is None:
        return None
    with _OPTIMIZED_LOCK:
        hit = _OPTIMIZED.get(key)
    if hit is None or not still_frozen(hit[1]):  # folded from an array made writeable since
        return None
    return hit[1]


def optimize_graph(graph: Graph, opts: dict[str, Any] | Options, key: Any = False) -> Graph:
    """The graph after the pass pipeline, from the cache when these outputs were seen."""
    o = parse_options("evaluate", opts)
    if key is False:
        key = _opt_key(graph, o.given)
    if key is not None:
        with _OPTIMIZED_LOCK:
            hit = _OPTIMIZED.get(key)
            if hit is not None and still_frozen(hit[1]):
                _OPTIMIZED.move_to_end(key)
                return hit[1]
    PASS_RUNS["n"] += 1
    optimized, _ = run_pipeline(graph, o.passes, pipeline_options(o), verify=o.verify)
    if key is not None:
        with _OPTIMIZED_LOCK:
            _OPTIMIZED[key] = (graph.outputs, optimized)
            while len(_OPTIMIZED) > _OPTIMIZED_MAX:
                _OPTIMIZED.popitem(last=False)
    return optimized


def evaluate(*tensors: Value, **opts: Any) -> tuple[np.ndarray, ...]:
    """Evaluate tensors together (shared subgraphs run once); always returns a tuple of arrays.

    Options: ``feed={placeholder: array}``, ``device="cpu"``, ``passes=(names...)`` (default the
    full pipeline), ``optimize=...`` (contraction order search), ``to_host=True``; all of them
    are checked first (runtime/options.py), before any work.
    """
    o = parse_options("evaluate", opts)
    graph = build_graph(tensors)
    names = [DEFAULT_DEVICE] if o.devices is None else o.devices
    limit = o.memory_limit
    # Bind (and check) the feed before any optimization work. On a cache hit the optimized
    # graph's placeholders are the same nodes, and its placeholder list is already computed.
    key = _opt_key(graph, o.given)
    hit = _cached(key)
    bound = bind_feed(hit if hit is not None else graph, o.feed)
    backend = get_backend(*parse_device(names[0]))
    if len(names) > 1:
        open_devices(names[1:])
    if limit is not None and hit is None:
        check_limit_feasible(graph, limit)
    optimized = hit if hit is not None else optimize_graph(graph, o, key)
    if limit is not None:
        check_memory_limit(optimized, limit)
    threads = DEFAULT_THREADS if o.threads is None else o.threads
    to_host = o.to_host
    deterministic = o.deterministic
    client, progress = o.scheduler, o.progress
    plain = threads == 1 and not deterministic and len(names) == 1 and limit is None
    if plain and client is None and not progress:  # nothing to set up around the run
        return tuple(execute(optimized, bound, backend, names[0], to_host, 1))
    with (
        deterministic_mode(deterministic, threads),
        slicing_context(names, client, limit),
        flops_bar(optimized, progress) as bar,
        no_pooling(limit is not None),
    ):
        prog = None if bar is None else counted(program_for(optimized, backend), bar)
        return tuple(execute(optimized, bound, backend, names[0], to_host, threads, prog))


@contextlib.contextmanager
def no_pooling(on: bool) -> Iterator[None]:
    """Under a memory limit, runs keep no freed buffers for reuse, and what earlier runs kept is
    let go first, so that it does not count against the limit (runtime/buffers.py)."""
    if not on:
        yield
        return
    from tenloom.runtime.buffers import POOLING, clear_pools

    clear_pools()
    token = POOLING.set(False)
    try:
        yield
    finally:
        POOLING.reset(token)


@contextlib.contextmanager
def slicing_context(names: list[str], client: Any, limit: int | None) -> Iterator[None]:
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


_POOL: concurrent.futures.ThreadPoolExecutor | None = None


def evaluate_async(*tensors: Value, **opts: Any) -> "concurrent.futures.Future":
    """Like ``evaluate`` but returns a Future resolving to the tuple of arrays."""
    global _POOL
    o = parse_options("evaluate_async", opts)
    if o.devices is not None:  # an absent device is said here, not by the Future
        open_devices(o.devices)
    if _POOL is None:
        _POOL = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="tenloom-async")
    return _POOL.submit(evaluate, *tensors, **opts)
