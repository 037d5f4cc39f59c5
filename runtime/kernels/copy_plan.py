"""How a CONTRACT operand becomes the matrix its GEMM reads: a view, or one transposing copy.

An operand arrives as a view with its axes in GEMM order, (batch, first group, second group)
(A: batch, left, contracted; B: batch, contracted, right). The GEMM needs each group as one
axis. Three ways to get there:

- ``VIEW``: each group's axes already lie one inside the other in memory; a reshape, no copy
  (BLAS reads a matrix stored either way round).
- ``COPY``: copy into (batch, first, second) order.
- ``COPY_SWAPPED``: copy into (batch, second, first) order, read as a transposed matrix.
- a ``RunCopy`` in place of either copy where the operand's last few elements lie
  contiguously (runs of 2 - 32 doubles): the same copy moving each run as one element.
- a ``SplitCopy`` beside either copy where the copy's last axis is short and far apart in
  memory: one copy per index of that axis, so that NumPy's inner loop runs along the next one.
- a ``Gather``: copy into (batch, first, second) order by ``numpy.take`` through precomputed
  element offsets. Its cost hardly depends on the layout (about 0.5 ns an element here), where
  a strided copy whose inner loops run over axes of 2 - 4 elements costs 1 - 2 ns an element:
  W7's copies take 89 us this way against 165 us strided. It needs an index array of the
  operand's size, so it is offered only for operands of up to ``GATHER_MAX`` elements whose
  memory is one dense block.

Which copy is cheaper depends on how NumPy's copy loop walks the source: its inner loop runs
along the copy's last axis (after merging axes that lie contiguously in both), so a copy whose
inner loop has 2 elements pays the loop overhead every 2 elements, and one that reads with a
stride of thousands of elements pays a cache line per element. ``copy_cost`` models this with
weights fitted to 385 copies timed both ways on W1, W2, W3 and W7. It is not exact: on W1,
whose operands have many axes of 4, its picks copy in 237 us where the faster order of each
copy would take 180 us. So where the caller allows it (not under ``deterministic=True``), the
kernel times the candidates on its first call and keeps the fastest (``measure``), as FFTW's
planner measures rather than guesses. The plan changes no value, only (through BLAS reading a
transposed matrix) perhaps the rounding.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import math
import os
import platform
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np
from tenloom.graph.ops import Op
from tenloom.passes import caches

VIEW, COPY, COPY_SWAPPED = "view", "copy", "copy_swapped"

# copy_cost weights (microseconds): per element, per inner loop, per element read with a stride,
# per element read a cache line apart, per second-level loop, per call
_PER_ELEMENT = 9.5e-5
_PER_INNER_LOOP = 2.0e-3
_PER_STRIDED = 1.0e-4
_PER_FAR = 6.3e-5
_PER_OUTER_LOOP = 2.2e-3
_PER_CALL = 0.6
_GATHER_CALL = 0.5  # ravel, stride check, take's set-up
_PER_GATHERED = 5.2e-4
GATHER_MAX = 1 << 18  # elements: the index array costs 8 bytes an element
# RunCopy moves runs of up to this many contiguous bytes as single elements; longer runs
# already keep NumPy's copy loop busy (runs of 512 bytes copy faster the plain way)
RUN_MAX_BYTES = 256
# SplitCopy: the longest last axis it splits a copy along (each index costs one NumPy call),
# the shortest axis before it (the inner loop it leaves: shorter ones gain nothing), and the
# stride (bytes) from which the last axis counts as far apart (one cache line)
SPLIT_MAX = 8
SPLIT_MIN_INNER = 16
SPLIT_FAR_BYTES = 64


def _trailing_run(x: np.ndarray) -> tuple[int, int]:
    """(elements, axes) of ``x``'s trailing axes that lie contiguously in memory, C order."""
    item, run, k = x.itemsize, 1, 0
    for n, s in zip(reversed(x.shape), reversed(x.strides)):
        if n != 1:
            if s != run * item:
                break
            run *= n
        k += 1
    return run, k


class RunCopy:
    """Copy plan for one memory layout: a C-order copy that moves runs as single elements.

    NumPy's copy loop runs along the last axis and pays a fixed cost per inner loop, so a
    transposing copy whose source keeps only its last 2 - 16 elements contiguous pays it every
    few elements. Here those trailing elements (a run of up to RUN_MAX_BYTES bytes, contiguous in
    source and copy alike) are one element of a void dtype of the run's size, and the inner
    loop runs over runs: 2 - 4x faster on such copies (W3's 6^6 permutations with runs of 6
    elements: 30 -> 15 us), the same bytes. ``swap``: the plan copies the operand's swapped
    axis order (as COPY_SWAPPED does). Operands of a later call whose strides differ are copied
    the plain way."""

    __slots__ = ("strides", "unit", "lead", "run", "swap")

    def __init__(self, x: np.ndarray, swap: bool = False) -> None:
        """``x``: the view to copy, in the order it is copied (swapped already if ``swap``)."""
        self.strides, self.swap = x.strides, swap
        self.run, k = _trailing_run(x)
        self.unit = np.dtype((np.void, self.run * x.itemsize))
        self.lead = x.shape[: x.ndim - k]

    def cost(self, x: np.ndarray) -> float:
        """Modelled time (us) of copying ``x`` (of the planned layout) this way: a plain copy
        of the runs, plus the bytes."""
        runs_only = x.reshape(self.lead + (self.run,))[..., 0]
        return copy_cost(runs_only) + x.size * _PER_ELEMENT

    @staticmethod
    def fits(x: np.ndarray) -> bool:
        """Whether copying ``x`` by runs saves loops: a run of 2 or more elements and at most
        RUN_MAX_BYTES bytes, with axes outside it, of a dtype without Python objects."""
        run, k = _trailing_run(x)
        return (
            run > 1 and run * x.itemsize <= RUN_MAX_BYTES and k < x.ndim and not x.dtype.hasobject
        )

    def into(self, dst: np.ndarray, src: np.ndarray) -> None:
        """Copy ``src`` into ``dst`` (C-contiguous, of ``src``'s shape)."""
        if src.strides != self.strides:
            np.copyto(dst, src)
            return
        lead = self.lead
        units = src.reshape(lead + (self.run,)).view(self.unit)[..., 0]
        np.copyto(dst.reshape(-1).view(self.unit).reshape(lead), units)


class SplitCopy:
    """Copy plan for one memory layout: a C-order copy whose last axis is short (2 - SPLIT_MAX
    elements) and far apart in the source, done as one copy per index of that short axis.

    NumPy's copy loop walks the copy's memory order, so such a copy pays an inner loop for
    every few elements, each read a long stride apart (W2's gradient copies 64 x 5 x 2 x 64
    cotangents whose 5-axis lies last in the copy and 64 KB apart in the source: 35 us for
    327 KB). One copy per index of the short axis makes the next axis the inner loop, n calls
    of long loops writing every n-th element (18 us). ``swap`` as for RunCopy. Operands of a
    later call whose strides differ are copied the plain way."""

    __slots__ = ("strides", "swap")

    def __init__(self, x: np.ndarray, swap: bool = False) -> None:
        """``x``: the view to copy, in the order it is copied (swapped already if ``swap``)."""
        self.strides, self.swap = x.strides, swap

    @staticmethod
    def fits(x: np.ndarray) -> bool:
        """Whether ``x``'s last axis is short and far apart in memory while the one before
        it is long enough to keep NumPy's inner loop busy."""
        return (
            x.ndim >= 2
            and 2 <= x.shape[-1] <= SPLIT_MAX
            and x.shape[-2] >= SPLIT_MIN_INNER
            and abs(x.strides[-1]) >= SPLIT_FAR_BYTES
            and not x.dtype.hasobject
        )

    def into(self, dst: np.ndarray, src: np.ndarray) -> None:
        """Copy ``src`` into ``dst`` (C-contiguous, of ``src``'s shape)."""
        if src.strides != self.strides:
            np.copyto(dst, src)
            return
        for j in range(src.shape[-1]):
            np.copyto(dst[..., j], src[..., j])


def runs(x: np.ndarray) -> list[tuple[int, int]]:
    """(length, stride in elements) of the loops a C-order walk over ``x`` makes, outermost
    first: size-1 axes dropped, and neighbouring axes merged where one steps into the next."""
    out: list[tuple[int, int]] = []
    item = x.itemsize
    for n, s in zip(x.shape, x.strides):
        if n == 1:
            continue
        s //= item
        if out and out[-1][1] == s * n:
            out[-1] = (out[-1][0] * n, s)
        else:
            out.append((n, s))
    return out


def copy_cost(x: np.ndarray) -> float:
    """Modelled time (us) of copying the view ``x`` into a C-contiguous array."""
    n = x.size
    loops = runs(x) or [(1, 1)]
    inner, stride = loops[-1]
    second = loops[-2][0] if len(loops) > 1 else 1
    return (
        _PER_CALL
        + n * (_PER_ELEMENT + _PER_STRIDED * (abs(stride) > 1) + _PER_FAR * (abs(stride) >= 8))
        + n / inner * _PER_INNER_LOOP
        + n / (inner * second) * _PER_OUTER_LOOP
    )


def gather_cost(x: np.ndarray) -> float:
    """Modelled time (us) of gathering ``x`` (``Gather.matrix``) into a C-contiguous array."""
    return _PER_CALL + _GATHER_CALL + x.size * _PER_GATHERED


class Gather:
    """Copy plan for one memory layout: numpy.take through the C-order offsets of the elements
    in the operand's memory block. Operands of a later call whose strides differ are copied
    the ordinary way (``matrix`` checks)."""

    __slots__ = ("strides", "shape", "itemsize", "_index")

    def __init__(self, x: np.ndarray) -> None:
        self.strides = x.strides
        self.shape = x.shape
        self.itemsize = x.itemsize
        self._index = None  # worked out when first gathered: most plans are never run

    @property
    def index(self) -> np.ndarray:
        """The C-order offsets of the elements in the operand's memory block."""
        index = self._index
        if index is None:
            offsets = np.zeros((), np.intp)
            for n, s in zip(self.shape, self.strides):
                offsets = offsets[..., None] + np.arange(n, dtype=np.intp) * (s // self.itemsize)
            index = self._index = offsets.reshape(-1)  # two threads may both: the same array
        return index

    @staticmethod
    def fits(x: np.ndarray) -> bool:
        """Whether ``x`` can be gathered: at most GATHER_MAX elements filling one dense block
        of memory with positive strides (so that ``ravel("K")`` is a view of that block)."""
        if not 1 < x.size <= GATHER_MAX:
            return False
        axes = sorted(((s, n) for n, s in zip(x.shape, x.strides) if n != 1), reverse=True)
        step = x.itemsize
        for s, n in reversed(axes):
            if s != step:
                return False
            step = s * n
        return True

    def matrix(self, x: np.ndarray, shape: tuple, take: Callable | None = None):
        """``x`` gathered into the matrix ``shape`` (and the buffer from ``take``, if any)."""
        if x.strides != self.strides:  # not the planned layout: an ordinary copy
            if take is None:
                return x.reshape(shape), None
            buf = take(x.size, x.dtype)
            np.copyto(buf.reshape(x.shape), x)
            return buf.reshape(shape), buf
        buf = np.empty(x.size, x.dtype) if take is None else take(x.size, x.dtype)
        # the block in memory order, a view; mode="wrap" skips the bounds check (the offsets
        # lie inside the block by construction)
        np.take(x.ravel("K"), self.index, out=buf, mode="wrap")
        return buf.reshape(shape), (None if take is None else buf)


def swapped(split: tuple[int, int], ndim: int) -> tuple[int, ...]:
    """The axis order (batch, second, first) of an operand split at ``split`` = (batch axes,
    first group's axes)."""
    nb, n1 = split
    return (*range(nb), *range(nb + n1, ndim), *range(nb, nb + n1))


def view_as(x: np.ndarray, shape: tuple) -> np.ndarray:
    """``x`` reshaped without copying; ValueError (AttributeError before NumPy 2.1, which has
    no ``copy=``) when its memory does not allow it."""
    try:
        return x.reshape(shape, copy=False)
    except TypeError:
        v = x.view()
        v.shape = shape
        return v


def _viewable(x: np.ndarray, shape: tuple) -> bool:
    try:
        view_as(x, shape)
    except (ValueError, AttributeError):
        return False
    return True


def choices(x: Any, shape: tuple, split: tuple[int, int]) -> tuple:
    """The ways operand ``x`` can become the matrix ``shape``: a view when its memory allows
    (one way), else the two copies and, where it fits, a gather, cheapest by the model first;
    then split copies where they fit, for timing to pick (the model's estimate of them leaves
    out their strided writes: measured on complex W2 cotangents 84 us split against 51 plain,
    where it guessed 15 against 28)."""
    if not isinstance(x, np.ndarray) or _viewable(x, shape):
        return (VIEW,)  # other libraries' arrays (CuPy) are reshaped by their own library
    xs = x.transpose(swapped(split, x.ndim))
    ways = [(copy_cost(x), 1, COPY), (copy_cost(xs), 2, COPY_SWAPPED)]
    # a copy by runs where it saves loops, in place of the plain copy of the same order
    splits = []
    for i, (y, swap) in enumerate(((x, False), (xs, True))):
        if RunCopy.fits(y):
            plan = RunCopy(y, swap)
            ways[i] = (plan.cost(y), ways[i][1], plan)
        elif SplitCopy.fits(y):  # an extra way: the plain copy of that order stays a choice
            splits.append(SplitCopy(y, swap))
    if Gather.fits(x):
        ways.append((gather_cost(x), 0, Gather(x)))
    return tuple(w for _, _, w in sorted(ways, key=lambda w: w[:2])) + tuple(splits)


def as_matrix(x: Any, shape: tuple, perm: tuple[int, ...], how: Any, take: Callable | None):
    """``x`` as the matrix (or stack of matrices) ``shape`` the way ``how`` says, and the buffer
    a copy went into (None for a view or a copy NumPy allocated). ``perm`` is the swapped axis
    order (``swapped``). With ``take(n, dtype)`` a copy goes into an array from it, for the
    caller to hand back after the GEMM; with None NumPy's reshape makes it (one call: the least
    overhead, for small operands)."""
    if how is VIEW:
        return x.reshape(shape), None
    if how.__class__ is Gather:
        return how.matrix(x, shape, take)
    runs_of = how if how.__class__ is RunCopy or how.__class__ is SplitCopy else None
    swap = how is COPY_SWAPPED or (runs_of is not None and runs_of.swap)
    if swap:
        x = x.transpose(perm)
        shape = shape[:-2] + (shape[-1], shape[-2])
    if runs_of is not None:
        buf = np.empty(x.size, x.dtype) if take is None else take(x.size, x.dtype)
        runs_of.into(buf.reshape(x.shape), x)
        m, buf = buf.reshape(shape), (None if take is None else buf)
    elif take is None:
        m, buf = x.reshape(shape), None
    else:
        buf = take(x.size, x.dtype)
        np.copyto(buf.reshape(x.shape), x)
        m = buf.reshape(shape)
    return (m.swapaxes(-1, -2) if swap else m), buf


ROUNDS = 3  # timing rounds of ``measure``


def measure(
    candidates: Sequence[Any],
    run: Callable[[Any], object],
    rounds: int = ROUNDS,
    clock: Callable[[], float] = time.perf_counter,
) -> Any:
    """The candidate whose ``run(candidate)`` took least time, the minimum over ``rounds``
    rounds that each try every candidate once (so a slow patch of the machine hits all of
    them). Ties keep the earlier candidate."""
    best = [float("inf")] * len(candidates)
    for _ in range(rounds):
        for i, c in enumerate(candidates):
            t0 = clock()
            run(c)
            best[i] = min(best[i], clock() - t0)
    return candidates[min(range(len(candidates)), key=best.__getitem__)]


# ---- timing within a budget, remembered across processes (issue 22) ---------------------------
#
# Timing a kernel's candidate plans runs it about ROUNDS x (candidates) times more on its first
# call: on a 20-qubit state-vector program (a few hundred small kernels) 78 of the first
# evaluate's 98 s. So the kernels of one program (runtime/program.py binds them with
# ``bind_budget``) share a budget of TUNE_FRACTION times the program's predicted run time (at
# least TUNE_MIN_S); a kernel whose timing would overrun what is left keeps the model's plan.
# A program that runs again gets at least AGAIN_MIN_S in all: kernels refused on its first run
# for want of budget are timed on a later run while that lasts (``Budget.ran``), so a program
# run once (a first call of many tiny kernels: a TEBD energy's 180) does not spend several
# times its run timing plans that only its later runs would profit from. What timing picks is
# kept in memory and written to the cache folder (``cache_dir``: passes/caches.py
# cache_folder) once at the end of the run (``flush``), so a later process reads it and times
# nothing. ``deterministic=True`` never times and never reads a timed plan (the kernels'
# ``tune()`` says no).
TUNE_FRACTION = 1.0  # of the program's predicted run time
TUNE_MIN_S = 0.0  # seconds: the least a program's first run may spend
AGAIN_MIN_S = 0.005  # seconds: a program run again may still time a few kernels
ELEMENT_S = 5e-10  # seconds a kernel spends per element it reads or writes, about
MAX_ENTRIES = 4096  # timed plans kept per cache folder (the oldest go first; ~40 bytes each)
CACHE_DIR: ContextVar[Any] = ContextVar("tenloom_tuning_cache_dir", default=None)
_RATES: dict[str, float] = {}  # dtype char -> measured seconds per GEMM multiply-add
# folder (None: no disk cache, this process only) -> key -> choice indices
_TABLES: dict[str | None, dict[str, list[int]]] = {}
_TABLE_LOCK = threading.Lock()
# tl.cache_info() / tl.clear_caches() see the tables (the files stay: clear_caches leaves disk
# caches alone, as the path cache's)
caches.register(
    "runtime.copy_plan_timings",
    caches.Computed(
        lambda: caches.CacheInfo(sum(len(t) for t in list(_TABLES.values())), MAX_ENTRIES),
        _TABLES.clear,
    ),
)
CALL_S = 3e-6  # seconds a kernel call costs besides its work, about
# timings made, refused by the budget and read from the cache, and the seconds timing took
_PRODUCTS = frozenset((Op.CONTRACT, Op.EINSUM))  # the ops whose cost counts multiply-adds
STATS: dict[str, float] = {"measured": 0, "refused": 0, "disk_hits": 0, "seconds": 0.0}


class Budget:
    """Seconds the kernels of one program may still spend timing plans, in all: ``left`` on
    the program's first run; once it has run (``ran``), what ``later`` adds to that."""

    __slots__ = ("left", "lock", "extra", "first")

    def __init__(self, seconds: float, later: float | None = None) -> None:
        self.left = seconds
        self.lock = threading.Lock()
        self.extra = 0.0 if later is None else max(later - seconds, 0.0)
        self.first = True  # the program has not finished a run yet

    def grant(self, estimate: float) -> bool:
        """Reserve ``estimate`` seconds if that much is left (False: time nothing)."""
        with self.lock:
            if estimate > self.left:
                return False
            self.left -= estimate
            return True

    def settle(self, estimate: float, spent: float) -> None:
        """Charge what a granted timing really took in place of its estimate."""
        with self.lock:
            self.left -= spent - estimate

    def deferred(self, estimate: float) -> bool:
        """Whether a timing of ``estimate`` seconds refused now may be granted on a later run
        of the program."""
        return self.first and estimate <= self.left + self.extra

    def ran(self) -> None:
        """The program finished a run: kernels may spend what ``later`` added from now on."""
        if self.first:
            with self.lock:
                if self.first:
                    self.first = False
                    self.left += self.extra


def madd_seconds(dtype: Any) -> float:
    """Seconds per multiply-add of a GEMM in ``dtype``, measured once per process on a small
    product (BLAS for floating dtypes; NumPy's own loop, slower, for the others)."""
    dtype = np.dtype(dtype)
    rate = _RATES.get(dtype.char)
    if rate is None:
        n = 128 if dtype.kind in "fc" and dtype.itemsize >= 4 else 48
        x = np.ones((n, n), dtype)
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            np.dot(x, x)
            best = min(best, time.perf_counter() - t0)
        rate = _RATES[dtype.char] = max(best, 1e-9) / n**3
    return rate


def kernel_seconds(madds: int, elements: int, dtype: Any) -> float:
    """Predicted seconds of one kernel call: its multiply-adds at the measured GEMM rate and
    the elements it reads and writes."""
    return CALL_S + madds * madd_seconds(dtype) + elements * ELEMENT_S


def bind_budget(steps: Sequence[Any]) -> Budget | None:
    """Give the kernels of one program's ``steps`` (objects with ``.kernel`` and ``.node``)
    that time plans (a ``tuning`` list attribute) one shared Budget: TUNE_FRACTION times the
    program's predicted run time (at least TUNE_MIN_S) on its first run, at least AGAIN_MIN_S
    in all once it runs again."""
    from tenloom.passes.cost import node_madds

    slots = [t for s in steps if isinstance(t := getattr(s.kernel, "tuning", None), list)]
    if not slots:
        return None
    total = 0.0
    prod = math.prod
    for s in steps:
        if s.kernel is None:
            continue
        node = s.node
        elements = prod(node.shape)
        for x in node.inputs:
            elements += prod(x.shape)
        madds = node_madds(node) if node.op in _PRODUCTS else 0
        total += kernel_seconds(madds, elements, node.dtype)
    first = max(TUNE_MIN_S, TUNE_FRACTION * total)
    budget = Budget(first, max(AGAIN_MIN_S, first))
    for t in slots:
        t[0] = budget
    return budget


def describe(way: Any) -> str:
    """A way's name, the same in every process (for the cache key)."""
    if isinstance(way, str):
        return way
    name = type(way).__name__
    return name + ("-swapped" if getattr(way, "swap", False) else "")


def _table_file(folder: str) -> str:
    from tenloom.passes.caches import disk_key

    tag = f"{disk_key()}|{platform.machine()}|{os.cpu_count()}"
    return os.path.join(folder, f"copy-plans-{hashlib.sha1(tag.encode()).hexdigest()[:12]}.json")


def _read_table(folder: str) -> dict[str, list[int]]:
    """The timed plans on disk in ``folder`` (empty for a missing, foreign or corrupt file;
    entries that are not lists of small non-negative integers are left out)."""
    from tenloom.passes.caches import disk_key

    try:
        with open(_table_file(folder)) as f:
            data = json.load(f)
        if not isinstance(data, dict) or data.get("version") != disk_key():
            return {}
        plans = data.get("plans")
        if not isinstance(plans, dict):
            return {}
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return {
        k: v
        for k, v in plans.items()
        if isinstance(k, str)
        and isinstance(v, list)
        and 0 < len(v) <= 2
        and all(type(i) is int and 0 <= i < 64 for i in v)
    }


@contextlib.contextmanager
def tuning_cache(cache_dir: Any) -> Iterator[None]:
    """Kernels running inside keep and read timed plans in the folder of the ``cache_dir``
    option (None: the default folder; False: none)."""
    token = CACHE_DIR.set(cache_dir)
    try:
        yield
    finally:
        CACHE_DIR.reset(token)


def _folder() -> str | None:
    from tenloom.passes.caches import cache_folder

    return cache_folder(CACHE_DIR.get())


def cached_choice(key: str, counts: Sequence[int]) -> tuple[int, ...] | None:
    """The candidate indices timing picked for ``key`` in this or an earlier process (this one
    only without a cache folder), or None; an entry that does not fit ``counts`` (candidates
    per operand) is ignored."""
    folder = _folder() or None  # None: kept in this process only
    with _TABLE_LOCK:
        table = _TABLES.get(folder)
        if table is None:
            table = _TABLES[folder] = {} if folder is None else _read_table(folder)
        hit = table.get(key)
    if hit is None or len(hit) != len(counts) or any(i >= n for i, n in zip(hit, counts)):
        return None
    STATS["disk_hits"] += 1
    return tuple(hit)


def remember(key: str, choice: Sequence[int]) -> None:
    """Keep what timing picked, here and (at the next ``flush``) on disk."""
    folder = _folder() or None
    with _TABLE_LOCK:
        table = _TABLES.setdefault(folder, {})
        table[key] = list(choice)
        while len(table) > MAX_ENTRIES:
            del table[next(iter(table))]
        if folder is not None:
            _DIRTY.add(folder)


_DIRTY: set[str] = set()  # folders whose table has entries not written yet


def flush() -> None:
    """Write the tables with new entries to their folders, each merged with what other
    processes wrote there, atomically (a reader sees the old file or the new one): once per
    program run, not once per timed kernel (a file write costs what timing a small kernel
    does). A folder that cannot be written to only loses the cache."""
    if not _DIRTY:
        return
    from tenloom.passes.caches import disk_key

    with _TABLE_LOCK:
        folders = list(_DIRTY)
        _DIRTY.clear()
        for folder in folders:
            merged = {**_read_table(folder), **_TABLES.get(folder, {})}
            while len(merged) > MAX_ENTRIES:
                del merged[next(iter(merged))]
            _TABLES[folder] = merged
            try:
                os.makedirs(folder, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
                try:
                    with os.fdopen(fd, "w") as f:
                        f.write(json.dumps({"version": disk_key(), "plans": merged}))
                    os.replace(tmp, _table_file(folder))
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.remove(tmp)
                    raise
            except OSError:
                pass


def timing_key(*parts: Any) -> str:
    """A cache key for plans chosen among candidates for one layout: a digest of ``parts``
    (shapes, strides, dtype and the candidates' names), the same in every process."""
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:24]


def bounded(
    key: str,
    candidates: Sequence[Sequence[Any]],
    time_them: Callable[[], tuple[Any, ...]],
    trial_s: float,
    tuning: list,
    retry: bool = False,
) -> tuple[Any, ...] | None:
    """The candidates (one list per operand, the model's first) timing picks, read from the
    cache where an earlier call or process timed this layout, else timed by ``time_them``
    when the program's budget (``tuning[0]``; None: no bound) has ROUNDS x candidates x
    ``trial_s`` seconds left, else the model's. ``retry``: the caller asks again on a later
    run, so where the budget refuses now but a later run of the program may grant it
    (``Budget.deferred``), None (the caller runs the model's plan meanwhile)."""
    counts = [len(c) for c in candidates]
    hit = cached_choice(key, counts)
    if hit is not None:
        return tuple(c[i] for c, i in zip(candidates, hit))
    budget = tuning[0]
    estimate = ROUNDS * sum(n for n in counts if n > 1) * trial_s
    if budget is not None and not budget.grant(estimate):
        if retry and budget.deferred(estimate):
            STATS["deferred"] = STATS.get("deferred", 0) + 1
            return None
        STATS["refused"] += 1
        return tuple(c[0] for c in candidates)
    t0 = time.perf_counter()
    picked = time_them()
    remember(key, [next(i for i, w in enumerate(c) if w is p) for c, p in zip(candidates, picked)])
    spent = time.perf_counter() - t0
    if budget is not None:
        budget.settle(estimate, spent)
    STATS["measured"] += 1
    STATS["seconds"] += spent
    return picked


atexit.register(flush)  # entries timed outside a program's run (a kernel called on its own)
