"""The concurrent scheduler: dependency counting, a ready queue, a pool of worker threads.

A policy around the steps of a compiled program (runtime/program.py): where the step loop runs
steps in order, this one runs each step as soon as its inputs are there, on a worker, with the
same pieces (``leaf_value``, the kernel call, ``failure``).

    ready = steps whose inputs are all computed, kept in a heap by topological position
    while steps remain: hand ready steps to idle workers; as each finishes, release its
    consumers and free every input whose last consumer it was

Independent nodes run at the same time (NumPy, BLAS and CuPy release the GIL). Taking the
lowest topological position first follows the sequential order where it can, which keeps
the number of live intermediates, and so peak memory, close to the sequential executor's.
On a device each worker drives its own stream; a value made on one stream and read on
another is ordered by an event. When a node fails no new work starts, running work is waited
for, every value is dropped, and EvaluationError names the node: no hang, nothing leaked.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextvars
import heapq
import threading
from typing import Any

import numpy as np
from tenloom.graph.errors import EvaluationError
from tenloom.runtime import testing
from tenloom.runtime.buffers import CURRENT, root
from tenloom.runtime.program import Program, failure, leaf_value


def run_concurrent(
    prog: Program,
    bound: dict[int, Any],
    backend: Any,
    device: str,
    threads: int,
    leaf_roots: set[int],
) -> list[Any]:
    """Run ``prog`` on ``threads`` workers; returns the values of the program's slots for its
    outputs (the caller turns them into results)."""
    steps = prog.steps
    n = len(steps)
    producers = [tuple(dict.fromkeys(s.inputs)) for s in steps]
    waiting = [len(p) for p in producers]
    consumers: list[list[int]] = [[] for _ in range(n)]
    for k, p in enumerate(producers):
        for i in p:
            consumers[i].append(k)
    uses = [len(c) for c in consumers]
    keep = set(prog.outputs)
    values: list[Any] = [None] * n
    events: list[Any] = [None] * n  # device event recorded after each value
    ready = [k for k in range(n) if waiting[k] == 0]
    heapq.heapify(ready)
    local = threading.local()
    streams = backend.worker_stream if backend.streams else None

    def work(k: int):
        step = steps[k]
        node = step.node
        testing.check(node)
        if streams is not None:
            if getattr(local, "stream", None) is None:
                local.stream = streams()
            for i in producers[k]:
                if events[i] is not None:
                    backend.wait_event(local.stream, events[i])
            with local.stream:
                out = step.kernel(*[values[i] for i in step.inputs])
                return out, backend.record_event(local.stream)
        return step.kernel(*[values[i] for i in step.inputs]), None

    done_count = 0
    failed: tuple[int, BaseException] | None = None
    arena = prog.arena()
    token = CURRENT.set(arena)  # None too: a run nested in another never takes the outer's
    try:
        with cf.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="tenloom-worker"
        ) as pool:
            running: dict[cf.Future, int] = {}
            while done_count < n:
                while ready and failed is None and len(running) < threads:
                    k = heapq.heappop(ready)
                    step = steps[k]
                    if step.kernel is None:  # leaves: bound here, no worker needed
                        try:
                            testing.check(step.node)
                            values[k] = leaf_value(step.node, bound, backend.from_host)
                        except Exception as e:
                            failed = (k, e)
                            break
                        v = values[k]
                        leaf_roots.add(id(root(v)) if isinstance(v, np.ndarray) else id(v))
                        done_count += 1
                        _release(k, consumers, waiting, ready)
                        continue
                    running[pool.submit(contextvars.copy_context().run, work, k)] = k
                if failed is not None:
                    # drain: let running work finish, start nothing new
                    cf.wait(running)
                    break
                if not running:
                    if done_count < n:  # pragma: no cover - a cycle cannot be built
                        raise EvaluationError("scheduler: no runnable node; the graph is malformed")
                    break
                finished, _ = cf.wait(running, return_when=cf.FIRST_COMPLETED)
                for f in finished:
                    k = running.pop(f)
                    exc = f.exception()
                    if exc is not None:
                        if failed is None:
                            failed = (k, exc)
                        continue
                    values[k], events[k] = f.result()
                    done_count += 1
                    _release(k, consumers, waiting, ready)
                    for i in producers[k]:
                        uses[i] -= 1
                        if uses[i] == 0 and i not in keep:
                            if arena is not None:
                                arena.drop(values, i)
                            values[i] = None
                            events[i] = None
        if failed is not None:
            k, exc = failed
            values.clear()
            raise failure(steps[k].node, device, exc) from exc
        if streams is not None:
            backend.synchronize()
        out = [values[k] for k in prog.outputs]
        values.clear()
        return out
    finally:
        CURRENT.reset(token)
        if arena is not None:
            prog.release(arena)


def _release(k: int, consumers, waiting, ready) -> None:
    for c in consumers[k]:
        waiting[c] -= 1
        if waiting[c] == 0:
            heapq.heappush(ready, c)
