"""Slicing a contraction tree until one slice fits ``memory_limit`` (used by contraction_order).

    tree(x1..xn), peak > limit  ->  SLICED(x1..xn; sliced indices, path), slice peak <= limit

The slices come from cotengra: ``ContractionTree.slice_`` picks the indices to fix and
``subtree_reconfigure_`` re-optimizes the subtrees around them, doubling the slices until the
predicted per-slice peak (``slice_peak_bytes``, graph/ops/sliced.py) plus the output fits. A
limit that no slicing can meet (the output alone, or an operand, exceeds it) raises
MemoryLimitError at once, without a search. Results are cached by network signature and limit
(a bounded cache, ``tl.cache_info()["passes.slicings"]``).
"""

from __future__ import annotations

import math
import re

import numpy as np
from tenloom.graph.errors import MemoryLimitError, OptionError, fmt_shape
from tenloom.graph.ops.sliced import slice_peak_bytes
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


# (network, limit, reverse, workers, starting tree) -> (sliced indices, path)
_CACHE: LRUCache[tuple, tuple] = LRUCache("passes.slicings", 1024)
SLICE_SEARCHES = counter("passes.slice_searches")


def _attrs(terms, out, sliced, path):
    return (tuple(map(tuple, terms)), tuple(out), tuple(sliced), tuple(map(tuple, path)), None)


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
):
    """``(sliced, path)`` making the network's per-slice peak plus its output fit ``limit``;
    ``None`` when it fits unsliced. Raises MemoryLimitError when no slicing can fit. With
    ``reverse``, the slices must also hold the network's reverse sweep (gradients); with
    ``"forward"``, its forward-mode tangents. With
    ``workers`` > 1 (threads sharing one memory), that many slices and accumulators must fit
    at once, as far as slicing can make them; fewer then run at once (runtime/sliced.py)."""
    shapes = [tuple(sizes[lab] for lab in t) for t in terms]
    out_bytes = math.prod(sizes[lab] for lab in out) * itemsize
    if (
        slice_peak_bytes(_attrs(terms, out, (), path), shapes, itemsize, reverse) + out_bytes
        <= limit
    ):
        return None
    if out_bytes >= limit:
        raise MemoryLimitError(
            f"contraction: the output {fmt_shape(tuple(sizes[lab] for lab in out))} alone needs "
            f"{out_bytes} bytes, more than memory_limit={limit} bytes; no slicing can fit"
        )
    # each worker holds one slice and its own accumulator
    per_worker = limit // max(workers, 1)
    key = (
        tuple(map(tuple, terms)),
        tuple(out),
        tuple(sorted(sizes.items())),
        itemsize,
        limit,
        reverse,
        workers,
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
    # the sliced indices, until one slice fits.
    minimize = tree.get_default_objective()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(desc="slicing", unit="step", leave=False)
    result = peak = fallback = None
    extra, fallback_cost = 0, 0.0
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
        if peak + out_bytes <= limit and fallback is None:
            fallback, extra = (sliced, new_path), 0
            fallback_cost = float(tree.contraction_cost())
        if peak + out_bytes <= per_worker:
            # finer slices for several workers pay off only when the extra work (and smaller
            # GEMMs) is clearly beaten by running them side by side; else one worker, coarser
            cost = float(tree.contraction_cost())
            if fallback is None or cost / max(workers, 1) <= 0.7 * fallback_cost:
                result = (sliced, new_path)
            break
        if fallback is not None:
            extra += 1  # slicing finer for parallel room: a few doublings at most
            if extra > max(workers, 1).bit_length():
                break
    result = result or fallback
    if bar is not None:
        bar.close()
    if result is None:
        raise MemoryLimitError(
            f"contraction: even the finest slicing leaves a per-slice peak of {peak} bytes plus "
            f"{out_bytes} bytes of output, more than memory_limit={limit} bytes"
        )
    _CACHE.put(key, result)
    return result
