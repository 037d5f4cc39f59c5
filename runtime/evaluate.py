"""``evaluate``: the public path from lazy tensors to arrays.

    tensors -> Graph -> session.optimize (the passes, cached) -> execute on the chosen backend

The setup it shares with compile, dump, explain and the gradient pre-pass (options, devices,
memory limits, the cached optimization, what a run sets up around itself) is in
runtime/session.py; the names below that come from there are kept for the callers that
import them from here.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

import numpy as np
from tenloom.graph.graph import Graph
from tenloom.graph.value import Value
from tenloom.passes.options import Options
from tenloom.passes.slicing import parse_bytes  # noqa: F401  (re-exported)
from tenloom.runtime import session
from tenloom.runtime.backends import get_backend
from tenloom.runtime.executor import bind_feed, execute, program_for
from tenloom.runtime.options import parse_options
from tenloom.runtime.progress import counted, flops_bar
from tenloom.runtime.session import (  # noqa: F401  (re-exported)
    _OPTIMIZED,
    PASS_RUNS,
    build_graph,
    check_limit_feasible,
    check_memory_limit,
    device_names,
    no_pooling,
    open_devices,
    parse_device,
    slicing_context,
)


def optimize_graph(graph: Graph, opts: dict[str, Any] | Options) -> Graph:
    """The graph after the pass pipeline (``session.optimize``, cached), for ``opts`` given as
    keywords (checked) or as a record."""
    return session.optimize(graph, parse_options("evaluate", opts)).graph


def evaluate(*tensors: Value, **opts: Any) -> tuple[np.ndarray, ...]:
    """Evaluate tensors together (shared subgraphs run once); always returns a tuple of arrays.

    Options: ``feed={placeholder: array}``, ``device="cpu"``, ``passes=(names...)`` (default the
    full pipeline), ``optimize=...`` (contraction order search), ``to_host=True``; all of them
    are checked first (runtime/options.py), before any work.
    """
    o = parse_options("evaluate", opts)
    graph = build_graph(tensors)
    names = session.run_devices(o)
    limit = o.memory_limit
    # Bind (and check) the feed before any optimization work. On a cache hit the optimized
    # graph's placeholders are the same nodes, and its placeholder list is already computed.
    key = session.optimize_key(graph, o)
    hit = session.cached(key)
    bound = bind_feed(hit.graph if hit is not None else graph, o.feed, names)
    if hit is not None:  # run again: the PROMOTE_AT-th run gets a longer path search
        better = session.promoted(graph, o, key, hit)
        if better is not hit:
            hit, bound = better, bind_feed(better.graph, o.feed, names)
    backend = get_backend(*parse_device(names[0]))
    if len(names) > 1:
        open_devices(names[1:])
    optimized = session.optimize_within_limit(graph, o, hit, key).graph
    threads = session.default_threads(optimized, backend) if o.threads is None else o.threads
    plain = threads == 1 and not o.deterministic and len(names) == 1 and limit is None
    plain = plain and o.cache_dir is None  # issue 22: run_context tells kernels the cache_dir
    plain = plain and o.precision == "highest"  # precision=: run_context sets it
    plain = plain and o.cuda_graphs  # issue 23: run_context sets it
    if plain and o.scheduler is None and not o.progress:  # nothing to set up around the run
        return tuple(execute(optimized, bound, backend, names[0], o.to_host, 1))
    with session.run_context(o, names, threads), flops_bar(optimized, o.progress) as bar:
        prog = None if bar is None else counted(program_for(optimized, backend), bar)
        return tuple(execute(optimized, bound, backend, names[0], o.to_host, threads, prog))


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
