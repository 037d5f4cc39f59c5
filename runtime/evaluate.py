"""``evaluate``: the public path from lazy tensors to arrays.

tensors -> Graph -> passes (run_pipeline) -> executor on the chosen backend -> ndarrays
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
from typing import Any

import numpy as np
from tenloom.graph.api import lift
from tenloom.graph.errors import DeviceError
from tenloom.graph.graph import Graph
from tenloom.graph.tensor import Tensor
from tenloom.passes import run_pipeline
from tenloom.runtime.backends import get_backend
from tenloom.runtime.executor import bind_feed, execute

OPTIONS = ("feed", "device", "passes", "optimize", "to_host", "verify", "cache_dir", "progress")


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
    from tenloom import passes as _passes

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
    bound = bind_feed(graph, opts.get("feed"))
    kind, index = parse_device(opts.get("device"))
    backend = get_backend(kind, index)
    optimized = optimize_graph(graph, opts)
    device = opts.get("device") or DEFAULT_DEVICE
    return tuple(execute(optimized, bound, backend, device, opts.get("to_host", True)))


_POOL: concurrent.futures.ThreadPoolExecutor | None = None


def evaluate_async(*tensors: Tensor, **opts: Any) -> "concurrent.futures.Future":
    """Like ``evaluate`` but returns a Future resolving to the tuple of arrays."""
    global _POOL
    check_options(opts)
    if _POOL is None:
        _POOL = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="tenloom-async")
    return _POOL.submit(evaluate, *tensors, **opts)
