"""``evaluate``: the public path from lazy tensors to arrays.

tensors -> Graph -> passes (run_pipeline) -> executor on the chosen backend -> ndarrays
"""

from __future__ import annotations

import collections
import concurrent.futures
import re
import threading
from typing import Any

import numpy as np
import tenloom.passes as _passes
from tenloom.graph.api import lift
from tenloom.graph.errors import DeviceError, MemoryLimitError
from tenloom.graph.graph import Graph
from tenloom.graph.tensor import Tensor
from tenloom.passes import run_pipeline
from tenloom.runtime.backends import get_backend
from tenloom.runtime.determinism import deterministic_mode
from tenloom.runtime.executor import bind_feed, execute

OPTIONS = (
    "feed",
    "device",
    "passes",
    "optimize",
    "to_host",
    "verify",
    "cache_dir",
    "progress",
    "threads",
    "deterministic",
    "memory_limit",
)


def check_options(opts: dict[str, Any]) -> None:
    for k in opts:
        if k not in OPTIONS:
            raise TypeError(f"evaluate: unknown option {k!r}; valid options: {', '.join(OPTIONS)}")


# The device used when evaluate is not given one (tests point it at a GPU to run the corpus
# there: TENLOOM_TEST_DEVICE=cuda:0).
DEFAULT_DEVICE = "cpu"


def parse_device(device: Any) -> tuple[str, int]:
    if device is None:
        device = DEFAULT_DEVICE
    if not isinstance(device, str):
        raise DeviceError(f"device {device!r} is not a device name like 'cpu' or 'cuda:0'")
    kind, _, index = device.partition(":")
    try:
        idx = int(index) if index else 0
    except ValueError:
        raise DeviceError(f"device {device!r}: index {index!r} is not an int") from None
    return kind, idx


_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


def parse_bytes(limit: Any) -> int:
    """``memory_limit`` as bytes: an int, or a string such as "4GiB", "512 MB"."""
    value = None
    if isinstance(limit, (int, float, np.integer, np.floating)) and not isinstance(limit, bool):
        value = int(limit)
    elif isinstance(limit, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", limit)
        if m and m.group(2).lower() in _UNITS:
            value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value is None:
        raise ValueError(f"memory_limit={limit!r} is not a size like 1000000 or '4GiB'")
    if value < 1:
        raise ValueError(f"memory_limit={limit!r} must be at least one byte")
    return value


def check_memory_limit(graph: Graph, limit: int) -> None:
    """Raise MemoryLimitError when the predicted peak of intermediates and outputs exceeds
    ``limit``. (Slicing contractions to fit comes with the scale-out work; a limit that only
    slicing could meet is refused too, naming the peak and the biggest node.)"""
    from tenloom.passes.cost import peak_bytes

    peak = peak_bytes(graph)
    if peak > limit:
        biggest = max(graph.order, key=lambda n: n.nbytes)
        raise MemoryLimitError(
            f"evaluate: predicted peak memory {peak} bytes exceeds memory_limit={limit} bytes; "
            f"the largest array is {biggest.op.value} {biggest.dtype}{biggest.shape} "
            f"({biggest.nbytes} bytes) at {biggest.where}"
        )


def build_graph(tensors: tuple[Any, ...]) -> Graph:
    return Graph(tuple(lift(t, "evaluate") for t in tensors))


# Optimized graphs of recent evaluate calls, keyed by the outputs' identities and the options
# that shape optimization: evaluating the same tensors again skips the passes. Entries hold
# their outputs, so an id cannot be reused while its entry lives; the cache is bounded (LRU).
_OPTIMIZED: "collections.OrderedDict[tuple, tuple[tuple, Graph]]" = collections.OrderedDict()
_OPTIMIZED_MAX = 32
_OPTIMIZED_LOCK = threading.Lock()
PASS_RUNS = {"n": 0}  # how often the pipeline ran (tests check the cache)


def _opt_key(graph: Graph, opts: dict[str, Any]) -> tuple | None:
    parts: list = [opts.get("passes") is None and _passes.DEFAULT_PIPELINE]
    for name in ("passes", "optimize", "device"):
        v = opts.get(name)
        if isinstance(v, (list, tuple)):
            v = tuple(v)
        elif isinstance(v, dict):
            v = repr(sorted(v.items()))
        elif v is not None and not isinstance(v, (str, bool)):
            return None  # an optimizer object: its own state decides
        parts.append(v)
    return (tuple(id(o) for o in graph.outputs), *parts)


def _cached(graph: Graph, opts: dict[str, Any]) -> Graph | None:
    key = _opt_key(graph, opts)
    if key is None:
        return None
    with _OPTIMIZED_LOCK:
        hit = _OPTIMIZED.get(key)
    return None if hit is None else hit[1]


def optimize_graph(graph: Graph, opts: dict[str, Any]) -> Graph:
    """The graph after the pass pipeline, from the cache when these outputs were seen."""
    key = _opt_key(graph, opts)
    if key is not None:
        with _OPTIMIZED_LOCK:
            hit = _OPTIMIZED.get(key)
            if hit is not None:
                _OPTIMIZED.move_to_end(key)
                return hit[1]
    PASS_RUNS["n"] += 1
    optimized, _ = run_pipeline(graph, opts.get("passes"), opts, verify=opts.get("verify", False))
    if key is not None:
        with _OPTIMIZED_LOCK:
            _OPTIMIZED[key] = (graph.outputs, optimized)
            while len(_OPTIMIZED) > _OPTIMIZED_MAX:
                _OPTIMIZED.popitem(last=False)
    return optimized


def evaluate(*tensors: Tensor, **opts: Any) -> tuple[np.ndarray, ...]:
    """Evaluate tensors together (shared subgraphs run once); always returns a tuple of arrays.

    Options: ``feed={placeholder: array}``, ``device="cpu"``, ``passes=(names...)`` (default the
    full pipeline), ``optimize=...`` (contraction order search), ``to_host=True``.
    """
    check_options(opts)
    graph = build_graph(tensors)
    # Bind (and check) the feed before any optimization work. On a cache hit the optimized
    # graph's placeholders are the same nodes, and its placeholder list is already computed.
    hit = _cached(graph, opts)
    bound = bind_feed(hit if hit is not None else graph, opts.get("feed"))
    kind, index = parse_device(opts.get("device"))
    backend = get_backend(kind, index)
    optimized = hit if hit is not None else optimize_graph(graph, opts)
    device = opts.get("device") or DEFAULT_DEVICE
    limit = opts.get("memory_limit")
    if limit is not None:
        check_memory_limit(optimized, parse_bytes(limit))
    threads = opts.get("threads", 1)
    threads = 1 if threads is None else threads
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"evaluate: threads={threads!r} must be a positive int")
    with deterministic_mode(bool(opts.get("deterministic", False)), threads):
        return tuple(execute(optimized, bound, backend, device, opts.get("to_host", True), threads))


_POOL: concurrent.futures.ThreadPoolExecutor | None = None


def evaluate_async(*tensors: Tensor, **opts: Any) -> "concurrent.futures.Future":
    """Like ``evaluate`` but returns a Future resolving to the tuple of arrays."""
    global _POOL
    check_options(opts)
    if _POOL is None:
        _POOL = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="tenloom-async")
    return _POOL.submit(evaluate, *tensors, **opts)
