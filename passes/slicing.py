"""Slicing a contraction tree until one slice fits ``memory_limit`` (used by contraction_order).

    tree(x1..xn), peak > limit  ->  SLICED(x1..xn; sliced indices, path), slice peak <= limit

The slices come from cotengra: ``ContractionTree.slice_`` picks the indices to fix and
``subtree_reconfigure_`` re-optimizes the subtrees around them, doubling the slices until the
predicted per-slice peak (``slice_peak_bytes``, graph/ops/sliced.py) plus what slicing cannot
shrink (the output, a reverse sweep's cotangents, operands computed in the graph) fits. A limit
that no slicing can meet raises MemoryLimitError at once, without a search, naming what fills
it. The plan does not depend on ``threads=``: explain and evaluate share it. Results are cached
by network signature and limit (a bounded cache, ``tl.cache_info()["passes.slicings"]``).
"""

from __future__ import annotations

import functools
import math
import re

import numpy as np
from tenloom.graph.errors import MemoryLimitError, OptionError, fmt_shape
from tenloom.graph.ops.sliced import label_sizes, slice_peak_bytes
from tenloom.passes.caches import LRUCache, counter

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})


def parse_bytes(limit) -> int:
    """``memory_limit`` as bytes: an int, or a string such as "4GiB", "512 MB"."""
    value = None
    if isinstance(limit, (int, float, np.integer, np.floating)) and not isinstance(limit, bool):
        value = int(limit)
    elif isinstance(limit, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", limit)
        if m and m.group(2).lower() in _UNITS:
            value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value is None:
        raise OptionError(f"memory_limit={limit!r} is not a size like 1000000 or '4GiB'")
    if value < 1:
        raise OptionError(f"memory_limit={limit!r} must be at least one byte")
    return value


# (network, limit, reverse, bytes beside, starting tree) -> (sliced indices, path)
_CACHE: LRUCache[tuple, tuple] = LRUCache("passes.slicings", 1024)
SLICE_SEARCHES = counter("passes.slice_searches")

# A plan whose slices together do more than this many times the multiply-adds of the same tree
# unsliced is refused (MemoryLimitError, by explain and evaluate alike): such a limit is met
# only in name. (The PEPS 6x6 D=3 gradient under 1 MiB: 14348907 slices, 4121x, days of run
# time: a reverse sweep keeps each slice's forward intermediates alive.)
MAX_SLICING_OVERHEAD = 256


def _attrs(terms, out, sliced, path):
    return (tuple(map(tuple, terms)), tuple(out), tuple(sliced), tuple(map(tuple, path)), None)


def fixed_bytes(terms, out, sizes, itemsize: int, reverse: bool | str = False) -> int:
    """What no slicing shrinks while a sliced network runs: its output (the accumulator of the
    slices' parts), and for a reverse sweep the accumulated cotangents of its operands."""
    out_bytes = math.prod(sizes[lab] for lab in out) * itemsize
    if reverse is True:
        out_bytes += sum(math.prod(sizes[lab] for lab in t) for t in terms) * itemsize
    return out_bytes


def check_sliceable(terms, out, sizes, itemsize: int, limit: int, reverse=False, beside=0):
    """MemoryLimitError, before any search, when no slicing can fit the network in ``limit``:
    what slicing cannot shrink (``fixed_bytes``, plus ``beside``: arrays live beside the network,
    e.g. operands computed in the graph) leaves no room for a slice."""
    shape = fmt_shape(tuple(sizes[lab] for lab in out))
    out_bytes = math.prod(sizes[lab] for lab in out) * itemsize
    if out_bytes >= limit:
        raise MemoryLimitError(
            f"contraction: the output {shape} alone needs {out_bytes} bytes, more than "
            f"memory_limit={limit} bytes; no slicing can fit"
        )
    fixed = fixed_bytes(terms, out, sizes, itemsize, reverse)
    if fixed + beside >= limit:
        parts = [f"the output {shape} ({out_bytes} bytes)"]
        if fixed > out_bytes:
            parts.append(f"the reverse sweep's operand cotangents ({fixed - out_bytes} bytes)")
        if beside:
            parts.append(f"operands computed in the graph ({beside} bytes)")
        raise MemoryLimitError(
            f"contraction of {len(terms)} operands: {' and '.join(parts)} need "
            f"{fixed + beside} bytes together, more than memory_limit={limit} bytes; no "
            "slicing can fit"
        )


def slice_to_fit(
    terms,
    out,
    sizes,
    path,
    itemsize: int,
    limit: int,
    progress: bool = False,
    reverse: bool | str = False,
    workers: int = 1,
    beside: int = 0,
    bound: float | None = None,
):
    """``(sliced, path)`` making the network's per-slice peak plus what slicing cannot shrink
    (``fixed_bytes``, and ``beside``: bytes live beside the network) fit ``limit``; ``None``
    when it fits unsliced. Raises MemoryLimitError, before searching, when no slicing can fit.
    With ``reverse``, the slices must also hold the network's reverse sweep (gradients); with
    ``"forward"``, its forward-mode tangents. ``bound``: the multiply-adds of a sliced tree
    already found; DearerError as soon as this one's slices cost as much (the caller keeps
    the other).

    ``workers`` (the ``threads=`` of the run) does not shape the slicing: explain, evaluate and
    every thread count get the same plan, and the runtime runs as many slices at once as the
    limit leaves room for (runtime/sliced.py ``concurrency``). (Slicing finer for threads made
    plans depend on ``threads=``, and at 1 MiB searched for minutes, for slices too small to
    run well.)"""
    del workers
    shapes = [tuple(sizes[lab] for lab in t) for t in terms]
    fixed = fixed_bytes(terms, out, sizes, itemsize, reverse) + beside
    peak = slice_peak_bytes(_attrs(terms, out, (), path), shapes, itemsize, reverse)
    if peak + fixed <= limit:
        return None
    check_sliceable(terms, out, sizes, itemsize, limit, reverse, beside)
    key = (
        tuple(map(tuple, terms)),
        tuple(out),
        tuple(sorted(sizes.items())),
        itemsize,
        limit,
        reverse,
        beside,
        tuple(map(tuple, path)),  # slicing starts from this tree
    )
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    import cotengra as ctg

    SLICE_SEARCHES["n"] += 1
    tree = ctg.ContractionTree.from_path(
        [tuple(t) for t in terms], tuple(out), dict(sizes), ssa_path=[tuple(p) for p in path]
    )
    # cotengra's slice_and_reconfigure, step by step with fixed seeds (the same plan on every
    # machine): slice about one more factor of 2 of the work, reconfigure the subtrees around
    # the sliced indices, until one slice fits. (Larger steps search faster but slice more:
    # on the PEPS 6x6 D=3 norm under 1 MiB, steps of sqrt(peak / room) slices gave 6561 slices
    # where doubling gives 729, for a flop overhead of 18x against 1.9x.)
    minimize = tree.get_default_objective()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(desc="slicing", unit="step", leave=False)
    room = limit - fixed
    result = None
    for step in range(64):
        if tree.max_size() <= 1:
            break
        tree.slice_(target_slices=2, temperature=0.01, minimize=minimize, seed=step)
        tree.subtree_reconfigure_(minimize=minimize)
        sliced = tuple((lab, sizes[lab]) for lab in sorted(tree.sliced_inds))
        new_path = tuple(tuple(int(i) for i in p) for p in tree.get_ssa_path())
        peak = slice_peak_bytes(_attrs(terms, out, sliced, new_path), shapes, itemsize, reverse)
        if bar is not None:
            bar.set_description(f"slicing: {tree.nslices} slices, peak {peak} bytes per slice")
            bar.update()
        if peak <= room:
            result = (sliced, new_path)
            break
        if bound is not None and float(tree.contraction_cost()) >= bound:
            raise DearerError
    if bar is not None:
        bar.close()
    if result is None:
        raise MemoryLimitError(
            f"contraction of {len(terms)} operands: even the finest slicing leaves a per-slice "
            f"peak of {peak} bytes beside {fixed} bytes that slicing cannot shrink, more than "
            f"memory_limit={limit} bytes"
        )
    _CACHE.put(key, result)
    return result


@functools.lru_cache(maxsize=256)
def slicing_overhead(attrs: tuple, shapes: tuple) -> float:
    """The multiply-adds of all slices of a SLICED network over those of its tree unsliced."""
    import cotengra as ctg

    terms, out, sliced, path, wrt = attrs[:5]
    sizes = label_sizes(shapes, terms)
    tree = ctg.ContractionTree.from_path(
        [tuple(t) for t in terms], tuple(out), sizes, ssa_path=[tuple(p) for p in path]
    )
    unsliced = float(tree.contraction_cost())
    for lab, _ in sliced:
        tree.remove_ind_(lab)
    return float(tree.contraction_cost()) / max(unsliced, 1.0)


class DearerError(Exception):
    """slice_to_fit's tree grew as dear as the ``bound`` it was given (internal)."""


def check_overhead(attrs: tuple, shapes, limit: int, caller: str) -> None:
    """MemoryLimitError when the slicing of a SLICED network costs more than
    ``MAX_SLICING_OVERHEAD`` times its multiply-adds unsliced."""
    terms, out, sliced, path, wrt = attrs[:5]
    overhead = slicing_overhead(attrs, tuple(tuple(s) for s in shapes[: len(terms)]))
    if overhead > MAX_SLICING_OVERHEAD:
        n = math.prod(size for _, size in sliced)
        why = (
            " (a reverse sweep keeps every forward intermediate of a slice alive)"
            if wrt is not None and wrt[0] >= 0
            else ""
        )
        raise MemoryLimitError(
            f"{caller}: memory_limit={limit} bytes is met only by slicing the contraction of "
            f"{len(terms)} operands into {n} slices{why}, {overhead:.0f}x its multiply-adds "
            f"unsliced, more than MAX_SLICING_OVERHEAD={MAX_SLICING_OVERHEAD}x"
        )
