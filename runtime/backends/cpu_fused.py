"""Fused elementwise regions on the CPU, chunk by chunk through NumPy's ufuncs.

    out[rows] = f_n(... f_1(in0[rows], in1) ...)      for each chunk of rows, on every core

The region's output is cut along its first axis into chunks of about CHUNK elements. Each
chunk runs the region's steps as one straight line of ufunc calls that write (``out=``) into
scratch buffers reused from step to step, so a temporary never leaves the core's L2 cache and
the last step writes straight into the result. Chunks are shared out over a pool of one thread
per core (ufuncs release the GIL), as numexpr and BLAS parallelize inside one call.

Why not numexpr, which this replaces where it can: NumPy picks an AVX2/AVX-512 loop for each
ufunc at run time, while numexpr's wheels run baseline (SSE2) loops; measured on the 2-core
development machine (Zen 5), NumPy's loops are about 4x faster per arithmetic op, and the
2000-op chain of benchmark W9 runs 1.2x faster this way than through numexpr at 1e6 elements
(see docs/benchmarks.md). The results are also NumPy's own, bit for bit: the same ufunc loops as
the op-by-op reference, with no numexpr typing rules to work around. Regions this does not
cover (ops that take attributes, outputs whose first axis cannot be cut) stay with numexpr.
"""

from __future__ import annotations

import contextvars
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np
from tenloom.graph.ops import Op
from tenloom.graph.ops.elementwise import BINARY, UNARY
from tenloom.graph.ops.fused import program_steps
from tenloom.runtime.buffers import take
from tenloom.runtime.codegen.ufuncs import chunk_function

CHUNK = 32768  # elements per chunk: 256 KiB of float64 per live temporary, L2-sized
# element-steps (size x ops) below which one thread does it all: handing work to a pool thread
# and waiting for it costs about 50 us on the development VM, a few hundred thousand ops' time
PARALLEL_WORK = 1 << 20


def _cores() -> int:
    env = os.environ.get("TENLOOM_NUM_THREADS")
    if env:
        return max(1, int(env))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()
_SCRATCH = threading.local()  # per thread: dtype -> list of flat scratch buffers


def _pool() -> ThreadPoolExecutor | None:
    global _POOL
    if _POOL is None and _cores() > 1:
        with _POOL_LOCK:
            if _POOL is None:
                _POOL = ThreadPoolExecutor(_cores() - 1, thread_name_prefix="tenloom-fused")
    return _POOL


def _scratch(dtype: np.dtype, k: int, size: int) -> np.ndarray:
    """This thread's k-th flat scratch buffer of ``dtype`` with room for ``size`` elements.
    Kept between calls: a fresh buffer of this size would be mapped and faulted in each time."""
    per = getattr(_SCRATCH, "bufs", None)
    if per is None:
        per = _SCRATCH.bufs = {}
    bufs = per.setdefault(dtype, [])
    while len(bufs) <= k:
        bufs.append(np.empty(0, dtype))
    if bufs[k].size < size:
        bufs[k] = np.empty(size, dtype)
    return bufs[k]


def chunked_kernel(program: tuple, out_shape: tuple, out_dtype, in_shapes, in_dtypes):
    """A function ``(*arrays) -> array`` running ``program`` chunk by chunk, or None when the
    region is not one this kernel runs (see the module docstring)."""
    n0 = out_shape[0] if out_shape else 0
    if n0 < 2 or math.prod(out_shape) == 0:
        return None
    for op, attrs, _ in program:
        fn = UNARY.get(op) or BINARY.get(op)
        if attrs or (op is not Op.WHERE and not isinstance(fn, np.ufunc)):
            return None  # (np.real and np.imag are functions: no out=)
    ndim = len(out_shape)

    class _In:  # an input as program_steps sees it
        def __init__(self, shape, dtype):
            self.shape, self.dtype = tuple(shape), np.dtype(dtype)

    steps = program_steps(program, [_In(s, d) for s, d in zip(in_shapes, in_dtypes)])
    if steps[-1].shape != tuple(out_shape) or steps[-1].dtype != np.dtype(out_dtype):
        return None
    # every ufunc must produce the step's dtype itself, so out= never changes a result
    with np.errstate(all="ignore"):
        probe_in = [np.empty(0, d) for d in in_dtypes]
        probe: list[np.ndarray] = []
        for (op, _, args), sv in zip(program, steps):
            xs = [probe_in[i] if kind == "in" else probe[i] for kind, i in args]
            r = np.where(*xs) if op is Op.WHERE else (UNARY.get(op) or BINARY[op])(*xs)
            if r.dtype != sv.dtype:
                return None
            probe.append(r)

    # which values are cut into row chunks: those whose (left-padded) first axis is n0
    def cut(shape) -> bool:
        return len(shape) == ndim and shape[0] == n0

    in_cut = [cut(s) for s in in_shapes]
    step_cut = [cut(sv.shape) for sv in steps]
    row = math.prod(out_shape[1:])
    if row > 4 * CHUNK:  # rows too long to cut into cache-sized chunks
        return None
    rows = max(1, CHUNK // max(row, 1))
    last_use = {}
    for j, (_, _, args) in enumerate(program):
        for kind, i in args:
            if kind == "step":
                last_use[i] = j
    # scratch assignment by liveness, per dtype; a ufunc may write over an operand that dies
    # with it when both have the same shape and dtype (elementwise, so in place is exact)
    slot: dict[int, tuple] = {}  # step -> (dtype, k)
    free: dict[np.dtype, list[int]] = {}
    count: dict[np.dtype, int] = {}
    final = len(program) - 1
    for j, (op, _, args) in enumerate(program[:-1]):
        sv = steps[j]
        dying = list(dict.fromkeys(i for kind, i in args if kind == "step" and last_use[i] == j))
        for i in dying:
            if op is not Op.WHERE and steps[i].shape == sv.shape and steps[i].dtype == sv.dtype:
                slot[j] = slot[i]
                dying.remove(i)
                break
        if j not in slot:  # taken before the dying operands are given back: no overlap
            fl = free.setdefault(sv.dtype, [])
            if fl:
                slot[j] = (sv.dtype, fl.pop())
            else:
                slot[j] = (sv.dtype, count.get(sv.dtype, 0))
                count[sv.dtype] = count.get(sv.dtype, 0) + 1
        for i in dying:
            free.setdefault(steps[i].dtype, []).append(slot[i][1])
    # room per scratch buffer: the largest chunk-shaped step that uses it
    room: dict[tuple, int] = {}
    for j in range(final):
        size = rows * row if step_cut[j] else steps[j].size
        room[slot[j]] = max(room.get(slot[j], 0), size)

    # the per-chunk body, generated once: a straight line of calls (runtime/codegen/ufuncs.py)
    chunk = chunk_function(program, len(in_shapes))

    def views(r: int) -> list:
        """Scratch views of every non-final step for a chunk of r rows, in this thread."""
        bufs = {key: _scratch(key[0], key[1], n) for key, n in room.items()}
        out = []
        for j in range(final):
            shp = (r,) + tuple(steps[j].shape[1:]) if step_cut[j] else steps[j].shape
            out.append(bufs[slot[j]][: math.prod(shp)].reshape(shp))
        return out

    n_chunks = -(-n0 // rows)
    parallel = n_chunks > 1 and math.prod(out_shape) * len(program) >= PARALLEL_WORK

    def run_range(xs, out, c0, c1):
        full = None
        for c in range(c0, c1):
            lo, hi = c * rows, min(n0, (c + 1) * rows)
            if hi - lo == rows:
                if full is None:
                    full = views(rows)
                sc = full
            else:
                sc = views(hi - lo)
            chunk(*[x[lo:hi] if k else x for x, k in zip(xs, in_cut)], *sc, out[lo:hi])

    def run(*xs):
        xs = [np.asarray(x) for x in xs]
        out = take(math.prod(out_shape), out_dtype).reshape(out_shape)
        pool = _pool() if parallel else None
        if pool is None:
            run_range(xs, out, 0, n_chunks)
            return out
        parts = min(_cores(), n_chunks)
        bounds = [(n_chunks * p) // parts for p in range(parts + 1)]
        # each chunk task runs in a copy of the caller's context: np.errstate is a context
        # variable, so warnings and errors follow the caller's settings in every thread
        futures = [
            pool.submit(
                contextvars.copy_context().run, run_range, xs, out, bounds[p], bounds[p + 1]
            )
            for p in range(1, parts)
        ]
        try:
            run_range(xs, out, bounds[0], bounds[1])
        finally:
            wait(futures)  # none still writing ``out`` once this call has returned or raised
        for f in futures:
            f.result()  # re-raises a chunk's error
        return out

    return run
