"""contraction_order: each n-ary EINSUM becomes a tree of pairwise EINSUMs ordered by cotengra.

    einsum(x1, ..., xn) -> einsum(einsum(x1, x3), einsum(x2, x4), ...)   (cotengra's tree)

``optimize=`` picks the search: "auto" (greedy, cotengra's exact programme or seeded
random-greedy rounds, and a high-quality hyper search when the predicted run time pays for it,
all budgeted in trials so that every process gets the same tree; the tree kept is the one that
costs least in multiply-adds plus GEMM operand copies), "greedy", "hyper" (a hyper-optimizer
with a 5 s budget), a dict such as {"method": "hyper", "max_time": 5}, a cotengra/opt_einsum
optimizer object (passed through), or False (left to right). Paths are cached by network
signature in memory and on disk (``cache_dir=``: the user cache folder by default, False for
none). 0-d factors are kept out of the search and multiplied in last. Each intermediate keeps
only the labels still needed by the rest of the network or the output.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import tempfile
import threading
import warnings
from collections import Counter
from typing import Any

import numpy as np
from tenloom.graph.einsum import einsum_node, in_network_dtype
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops import Op
from tenloom.graph.ops.semiring import semiring_node
from tenloom.graph.ops.sliced import pairwise_network, path_steps, slice_peak_bytes
from tenloom.passes.caches import LRUCache, cache_folder, counter, disk_key
from tenloom.passes.cost import einsum_sizes, layout_cost
from tenloom.passes.options import Options
from tenloom.passes.paths import as_path, canonical, greedy_path, path_cost
from tenloom.passes.registry import PassContext, register_pass
from tenloom.passes.rewrite import map_graph

# network signature -> SSA path; and the other trees the search found (candidates for slicing)
_CACHE: LRUCache[tuple, tuple] = LRUCache("passes.paths", 4096)
_ALTERNATIVES: LRUCache[tuple, tuple] = LRUCache("passes.path_alternatives", 4096)
SEARCHES = counter("passes.path_searches")  # how many path searches ran (plans reuse paths)


def _optimizer(optimize: Any, progress: bool):
    """(cotengra 'optimize' argument, cache key or None)."""
    if optimize is None or optimize == "auto":
        return "auto", "auto"
    if optimize == "greedy":
        return "greedy", "greedy"
    if optimize == "optimal":
        return "optimal", "optimal"
    if optimize == "hyper":
        optimize = {"method": "hyper"}
    if isinstance(optimize, dict):
        opts = dict(optimize)
        method = opts.pop("method", "hyper")
        if method != "hyper":
            return method, method
        import cotengra as ctg

        opts.setdefault("max_time", 5)
        opts.setdefault("max_repeats", 128)
        opts.setdefault("progbar", progress)
        key = ("hyper", tuple(sorted((k, repr(v)) for k, v in opts.items() if k != "progbar")))
        return ctg.HyperOptimizer(**opts), key
    if isinstance(optimize, str):
        return optimize, optimize
    return optimize, None  # an optimizer object: not cached here (it may keep its own cache)


def _left_to_right(n: int) -> list[tuple[int, int]]:
    ssa, cur = [], 0
    for k in range(1, n):
        ssa.append((cur, k))
        cur = n + k - 1
    return ssa


def _search_key(options: Options, complex_: bool):
    """(cotengra's optimize argument, the cache key or None) for ``options``."""
    opt, key = _optimizer(options.optimize, options.progress)
    if opt == "auto":  # its budget depends on the effort and on the dtype's cost
        key = ("auto", float(options.search_effort), bool(complex_))
        if options.sweep_madds:  # and its choice on the derivative's sweep
            key += (("sweep", float(options.sweep_madds)),)
    return opt, key


def find_path(
    terms, out, sizes, options: Options, complex_: bool = False, stats: dict | None = None
) -> tuple:
    """An SSA path (pairs of ids, new ids counting up from n) for the network; ``complex_``:
    its operands are complex (a multiply-add costs more, so "auto" searches longer).
    ``stats["auto_searches"]`` counts the networks whose path "auto"'s budget decides."""
    n = len(terms)
    optimize = "auto" if options.optimize is None else options.optimize
    if optimize is False or n <= 2:
        return tuple(_left_to_right(n))
    if all(len(t) == len(out) and set(t) == set(out) for t in terms):
        # elementwise products only (a gradient's reverse sweep through a chain of n ops
        # builds one of 2n operands): every order costs the same, and the searches would take
        # superlinear time in n for nothing
        return tuple(_left_to_right(n))
    if isinstance(optimize, (str, dict)):  # presets: a chain has an exact, cheap answer
        from tenloom.passes.chain_path import chain_path

        chain = chain_path(terms, out, sizes)
        if chain is not None:  # optimal among neighbour-merging orders; greedy may find an
            # outer product of size-1 bonds cheaper, so it is the one other candidate
            greedy = as_path(greedy_path(terms, out, sizes))
            if path_cost(terms, out, sizes, greedy) < path_cost(terms, out, sizes, chain):
                return greedy
            return chain
    opt, key = _search_key(options, complex_)
    if opt == "auto" and stats is not None:  # its budget depends on the effort
        stats["auto_searches"] = stats.get("auto_searches", 0) + 1
    sig = None
    folder = cache_folder(options.cache_dir)
    if key is not None:
        sig = (*canonical(terms, out, sizes), repr(key))
        hit = _CACHE.get(sig)
        if hit is not None:
            return hit
        if folder:
            text = repr(sig)  # the file's name and contents hold it: worked out once
            found = disk_get(folder, sig, n, text)
            if found is not None:
                ssa, others = found
                _CACHE.put(sig, ssa)
                if others:
                    _ALTERNATIVES.put(sig, others)
                DISK_HITS["n"] += 1
                return ssa
    import cotengra as ctg

    SEARCHES["n"] += 1
    others: tuple = ()
    if opt == "auto":
        ssa, others = _auto_path(
            terms,
            out,
            sizes,
            options.search_effort,
            complex_,
            options.progress,
            options.sweep_madds,
        )
        if sig is not None and others:  # the others stay candidates for slicing (narrower)
            _ALTERNATIVES.put(sig, others)
    else:
        tree = ctg.array_contract_tree(
            [tuple(t) for t in terms], tuple(out), dict(sizes), optimize=opt
        )
        ssa = tuple(tuple(int(i) for i in p) for p in tree.get_ssa_path())
    if sig is not None:
        _CACHE.put(sig, ssa)
        if folder:
            disk_put(folder, sig, ssa, others, text)
    return ssa


# ---- the disk cache of paths -----------------------------------------------------------------
#
# One JSON file per network and search key, named by a digest of both, in the cache folder
# (passes/caches.py cache_folder: the user cache folder unless cache_dir= says otherwise). A file
# holds the key it was written for, tenloom's version and disk format (disk_key: a new version or
# cost model never reads an old file), the tree kept and the search's other trees (slicing's
# candidates). A file is used only when all of that matches and every path is a valid SSA path
# of the network; anything else (a partial or foreign file) is ignored and overwritten.

DISK_HITS = counter("passes.path_disk_hits")


def _path_file(folder: str, sig, text: str | None = None) -> str:
    """The file of ``sig`` (``text``: its repr, where the caller has it)."""
    text = repr(sig) if text is None else text
    digest = hashlib.sha256(text.encode()).hexdigest()[:32]
    return os.path.join(folder, f"path-{digest}.json")


def valid_ssa(path, n: int) -> bool:
    """Whether ``path`` is an SSA contraction path of ``n`` tensors down to one."""
    try:
        if len(path) != n - 1:
            return False
        alive = set(range(n))
        for k, (i, j) in enumerate(path):
            i, j = int(i), int(j)
            if i == j or i not in alive or j not in alive:
                return False
            alive -= {i, j}
            alive.add(n + k)
        return alive == {2 * n - 2}
    except (TypeError, ValueError):
        return False


def disk_get(folder: str, sig, n: int, text: str | None = None):
    """(ssa path, other trees) cached on disk for ``sig`` (``text``: its repr, where the caller
    has it), or None."""
    text = repr(sig) if text is None else text
    try:
        with open(_path_file(folder, sig, text)) as f:
            data = json.load(f)
        if data.get("signature") != text or data.get("version") != disk_key():
            return None
        ssa = tuple(tuple(int(i) for i in p) for p in data["ssa_path"])
        others = tuple(
            tuple(tuple(int(i) for i in p) for p in alt) for alt in data.get("alternatives", ())
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if not valid_ssa(ssa, n) or not all(valid_ssa(p, n) for p in others):
        return None
    return ssa, others


def disk_put(folder: str, sig, ssa, others, text: str | None = None) -> None:
    """Write the entry atomically (readers see the old file or the new one); a folder that
    cannot be written to only loses the cache. Every DISK_PRUNE_EVERY-th write, a folder over
    DISK_MAX_FILES entries loses its oldest quarter. ``text``: repr(sig), where the caller has
    it. The entry is written to a file of this process and thread first (``mkstemp``'s random
    name where that file is left over from another process), then renamed."""
    text = repr(sig) if text is None else text
    data = {
        "signature": text,
        "version": disk_key(),
        "ssa_path": [list(p) for p in ssa],
        "alternatives": [[list(p) for p in alt] for alt in others],
    }
    payload = json.dumps(data).encode()  # one string (json.dump encodes piece by piece, slower)
    path = _path_file(folder, sig, text)
    tmp = None
    try:
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f"tmp-{os.getpid()}-{threading.get_ident()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        try:
            os.write(fd, payload)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    _WRITES["n"] += 1
    if _WRITES["n"] % DISK_PRUNE_EVERY == 0:
        prune(folder)


DISK_MAX_FILES = 20000  # path files kept in one folder (a few kB each)
DISK_PRUNE_EVERY = 256
_WRITES = {"n": 0}


def prune(folder: str, keep: int | None = None) -> int:
    """Remove the oldest path files of ``folder`` beyond three quarters of ``keep``
    (DISK_MAX_FILES) when it holds more than ``keep``; how many were removed."""
    keep = DISK_MAX_FILES if keep is None else keep
    try:
        files = [e for e in os.scandir(folder) if e.name.startswith("path-") and e.is_file()]
    except OSError:
        return 0
    if len(files) <= keep:
        return 0
    files.sort(key=lambda e: e.stat().st_mtime)
    removed = 0
    for e in files[: len(files) - (3 * keep) // 4]:
        with contextlib.suppress(OSError):
            os.unlink(e.path)
            removed += 1
    return removed


# ---- the "auto" search, budgeted in trials from the predicted run time -----------------------
#
# Every budget below is a number of trials worked out from the network and the cost of the best
# tree found so far, never a time measured in this process: the same network, options and
# tenloom version give the same tree in every process (issue 22). The predicted run time of a
# tree is its multiply-adds (complex ones counted 4x) at NOMINAL_MADDS_PER_S; the search may
# spend ``effort`` times that (Options.search_effort: 1 for evaluate, COMPILE_EFFORT for
# tl.compile), each trial charged a nominal cost per tensor of the network.
NOMINAL_MADDS_PER_S = 2e10  # a 2-core machine's float64 GEMM rate, about
# nominal seconds of one trial per tensor of the network, the dearest measured (2-core machine)
RG_TRIAL_S = 6e-5  # a plain random-greedy trial (measured 1e-5 - 7.6e-5 s: W3, W1, W7)
HQ_RG_TRIAL_S = 4e-4  # a hyper-optimized random-greedy trial with its subtree reconfiguration
HQ_TRIAL_S = 2e-3  # a hyper-optimized greedy/labels trial (measured 0.8e-3 - 3.5e-3 s)
RG_ROUND = 8  # random-greedy trials per round
RG_MAX = 256
HQ_MIN, HQ_MAX = 2, 128  # trials of a high-quality search: it runs when a third of the budget
# pays for HQ_MIN of them
OPTIMAL_HARDNESS = 250  # cotengra's own cut-off for its exact dynamic programme ("auto")
COMPILE_EFFORT = 100.0  # a compiled plan is run many times: worth 100x its run in search
# the least run time a budget assumes: a compiled plan's search has a second at least, however
# cheap its network (W1, W3: a millisecond's run, and 100 of them buy a poor tree)
MIN_PREDICTED_S = 0.01


def predicted_seconds(madds: float, complex_: bool) -> float:
    """The nominal run time the search budgets assume for a tree of ``madds`` multiply-adds."""
    return madds * (4.0 if complex_ else 1.0) / NOMINAL_MADDS_PER_S


def hq_optimizer(trials: int, progress: bool = False, kind: str = "labels", minimize="flops"):
    """A high-quality search: cotengra's hyper-optimizer, seeded, serial, ``trials`` trials and
    no time limit (so it is reproducible). ``kind`` "labels": over cotengra's default
    high-quality methods (greedy, labels; kahypar where installed), by multiply-adds; "rg":
    random-greedy with a subtree reconfiguration of each trial (cotengra's "auto" recipe) by
    ``minimize`` (W4's skinny complex GEMMs: trees that write less win there)."""
    import cotengra as ctg
    from cotengra.hyperoptimizers.hyper import get_default_hq_methods

    if kind == "rg":
        methods, reconf = ("random-greedy",), {"subtree_size": 4}
    else:
        methods, reconf = get_default_hq_methods(), {}
    return ctg.HyperOptimizer(
        methods=methods,
        max_repeats=trials,
        max_time=None,
        reconf_opts=reconf,
        minimize=minimize,
        parallel=False,
        seed=0,
        progbar=progress,
    )


# cotengra's high-quality preset warns once that the optional kahypar is not installed: a note
# for cotengra's users, not ours (set once, at import: catch_warnings is not thread-safe)
warnings.filterwarnings("ignore", message="Couldn't import `kahypar`", category=UserWarning)


# cotengra's hyper-optimizer seeds its sampler (``seed=``) but its trials draw from Python's
# global generator (``random``: greedy's noise, the labels method): the same seed gave different
# trees call after call. The searches run with it seeded and its state put back after, one
# search at a time (the lock), so a search is a function of the network alone. cotengra offers
# no way to hand its trials a private generator, so this is process-wide: another thread that
# draws from ``random`` while a search runs gets numbers from the search's stream (and makes
# that search's tree differ). NumPy's global generator is not touched.
_SEARCH_LOCK = threading.RLock()


@contextlib.contextmanager
def _seeded(seed: int = 0):
    import random

    with _SEARCH_LOCK:
        state = random.getstate()
        random.seed(seed)
        try:
            yield
        finally:
            random.setstate(state)


def _trials(budget: float, per_trial: float) -> int:
    return int(min(HQ_MAX, max(HQ_MIN, budget // per_trial)))


def auto_trees(terms, out, sizes, effort: float = 1.0, complex_: bool = False, progress=False):
    """The trees of the "auto" search (``_auto_trees``) as cotengra trees, with the global
    generators seeded (``_seeded``): the same trees in every call and process."""
    args = ([tuple(t) for t in terms], tuple(out), dict(sizes))
    with _seeded():
        found = _auto_trees(terms, out, sizes, effort, complex_, progress)
    return [_as_tree(args, t) for t in found]


def _as_tree(args, t):
    """A cotengra tree of ``t``, a tree or an SSA path."""
    if isinstance(t, tuple):
        import cotengra as ctg

        return ctg.ContractionTree.from_path(*args, ssa_path=t)
    return t


def _auto_trees(terms, out, sizes, effort, complex_, progress):
    """The trees of the "auto" search, each a cotengra tree or (greedy's, ``greedy_path``) an
    SSA path. The budget is ``effort`` x the predicted run time of the best tree so far, spent
    in trials at their nominal cost:

    - greedy; cotengra's exact programme on easy networks, else seeded random-greedy rounds
      while the budget allows (none where greedy's tree runs in less than a round costs: a
      circuit's gates, an MPS energy), then a subtree reconfiguration of the best of them;
    - where a third of the budget pays for HQ_MIN trials of a high-quality search, the
      rounds take a third of it and the high-quality searches a third each: a
      hyper-optimized random-greedy with reconfiguration that minimizes multiply-adds plus
      elements written (cotengra's "combo", each element weighed as passes/cost.py weighs it),
      then cotengra's high-quality methods by multiply-adds."""
    import cotengra as ctg
    from cotengra.presets import estimate_optimal_hardness
    from tenloom.passes.cost import element_weights

    args = ([tuple(t) for t in terms], tuple(out), dict(sizes))
    n = len(terms)
    trees: list = [greedy_path(terms, out, sizes)]
    costs: dict[int, float] = {}  # id(tree) -> its multiply-adds (cotengra walks the tree)

    def budget() -> float:
        for t in trees:
            if id(t) not in costs:
                costs[id(t)] = (
                    path_cost(terms, out, sizes, t)
                    if isinstance(t, tuple)
                    else t.contraction_cost()
                )
        best = min(costs[id(t)] for t in trees)
        return effort * max(predicted_seconds(best, complex_), MIN_PREDICTED_S)

    def hq_affordable(per_tensor: float) -> bool:
        return budget() / 3 >= HQ_MIN * per_tensor * n

    if estimate_optimal_hardness(args[0]) < OPTIMAL_HARDNESS:
        # the fewest multiply-adds exactly: no search can do better by that measure
        trees.append(ctg.array_contract_tree(*args, optimize="optimal"))
        return trees
    else:
        spent, rounds = 0.0, 0
        while rounds * RG_ROUND < RG_MAX:
            # all of the budget, or a third where the high-quality searches can run
            share = budget() / 3 if rounds and hq_affordable(HQ_RG_TRIAL_S) else budget()
            if spent + RG_ROUND * RG_TRIAL_S * n > share:
                break
            rg = ctg.RandomGreedyOptimizer(max_repeats=RG_ROUND, seed=rounds, parallel=False)
            trees.append(ctg.ContractionTree.from_path(*args, path=rg(*args)))
            spent += RG_ROUND * RG_TRIAL_S * n
            rounds += 1
        if rounds:
            best = min(trees[1:], key=lambda t: t.contraction_cost())
            trees.append(best.subtree_reconfigure(subtree_size=4))
    if hq_affordable(HQ_RG_TRIAL_S):
        write = element_weights(complex_)[1] or 64  # cotengra's default "combo" for real
        trials = _trials(budget() / 3, HQ_RG_TRIAL_S * n)
        rg = hq_optimizer(trials, progress, "rg", f"combo-{write}")
        trees.append(ctg.array_contract_tree(*args, optimize=rg))
    if hq_affordable(HQ_TRIAL_S):
        labels = hq_optimizer(_trials(budget() / 3, HQ_TRIAL_S * n), progress)
        trees.append(ctg.array_contract_tree(*args, optimize=labels))
    return trees


def _auto_path(
    terms,
    out,
    sizes,
    effort: float = 1.0,
    complex_: bool = False,
    progress=False,
    sweep: float = 0.0,
):
    """The "auto" search (``auto_trees``): of its trees the one with the least ``layout_cost``
    (multiply-adds plus what the GEMMs copy) plus ``sweep`` times its multiply-adds, and the
    others.

    ``sweep`` (Options.sweep_madds) is a derivative's: the forward tree also carries the
    reverse (or tangent) sweep, two contractions of each forward contraction's size, which
    the forward's copies do not predict. Lattice 10x10 D=4, the value and the gradient of all
    100 tensors: picked by the forward alone, 2.75e10 multiply-adds; with sweep=2, 2.06e10."""
    with _seeded():
        trees = _auto_trees(terms, out, sizes, effort, complex_, progress)
    paths = list(dict.fromkeys(as_path(t) for t in trees))
    if len(paths) == 1:  # greedy's tree alone (a chain, a circuit's gates): nothing to compare
        return paths[0], ()
    costs = [
        layout_cost(terms, out, sizes, p, complex_)
        + (sweep * path_cost(terms, out, sizes, p) if sweep else 0.0)
        for p in paths
    ]
    best = min(range(len(paths)), key=costs.__getitem__)
    return paths[best], tuple(p for k, p in enumerate(paths) if k != best)


def alternative_paths(terms, out, sizes, options: Options, complex_: bool = False) -> list:
    """Other trees found for this network by find_path (e.g. cotengra auto's own, narrower
    than the fewest-flops one kept): worth trying when the network has to be sliced."""
    _, key = _search_key(options, complex_)
    if key is None:
        return []
    sig = (*canonical(terms, out, sizes), repr(key))
    alt = _ALTERNATIVES.get(sig)
    return list(alt) if alt is not None else []


def sliced_cost(terms, out, sizes, sliced, path) -> float:
    """Multiply-adds of all slices of a sliced tree together."""
    import cotengra as ctg

    tree = ctg.ContractionTree.from_path(
        [tuple(t) for t in terms], tuple(out), dict(sizes), ssa_path=[tuple(p) for p in path]
    )
    for lab, _ in sliced:
        tree.remove_ind_(lab)
    return float(tree.contraction_cost())


def nested_path(terms, out, sizes, nest) -> list[tuple[int, int]]:
    """The SSA path that follows the user's own call structure: each call's operands (its
    nested calls first) contracted together, in the best order for that call alone."""
    import cotengra as ctg

    n = len(terms)
    total = Counter(lab for t in terms for lab in t)
    outset = set(out)
    path: list[tuple[int, int]] = []
    next_id = n
    # iterative post-order; each finished group yields (ssa id, term, leaf count) to its parent
    stack: list = [(list(nest)[::-1], [])]
    result = None
    while stack:
        todo, done = stack[-1]
        if todo:
            item = todo.pop()
            if isinstance(item, int):
                done.append((item, tuple(terms[item]), Counter(terms[item])))
            else:
                stack.append((list(item)[::-1], []))
            continue
        stack.pop()
        inside = sum((c for _, _, c in done), Counter())
        group_out = tuple(
            lab
            for lab in dict.fromkeys(lab for _, t, _ in done for lab in t)
            if inside[lab] < total[lab] or lab in outset
        )
        if len(done) == 1:
            entry = done[0]
        else:
            sub_terms = [t for _, t, _ in done]
            method = "optimal" if len(done) <= 8 else "greedy"
            sub = ctg.array_contract_tree(sub_terms, group_out, sizes, optimize=method)
            ids = [i for i, _, _ in done]
            for a, b in sub.get_ssa_path():
                path.append((ids[a], ids[b]))
                ids.append(next_id)
                next_id += 1
            entry = (ids[-1], group_out, inside)
        if stack:
            stack[-1][1].append(entry)
        else:
            result = entry
    assert result is not None
    return path


def _items_nest(nest, keep: dict[int, int]):
    """Re-index a nesting to the operands kept (0-d factors are dropped), iteratively."""
    out: list = []
    stack: list = [(out, list(nest)[::-1])]
    while stack:
        target, todo = stack[-1]
        if not todo:
            stack.pop()
            if stack and target:
                stack[-1][0].append(tuple(target))
            continue
        item = todo.pop()
        if isinstance(item, int):
            if item in keep:
                target.append(keep[item])
        else:
            stack.append(([], list(item)[::-1]))
    return tuple(out)


def build_tree(node: Node, options: Options, stats: dict, nest=None) -> Node:
    """Replace one n-ary EINSUM (or SEMIRING_EINSUM) by its tree of pairwise nodes of the
    same op (and semiring: semiring networks order with the same search, their pairwise steps
    cost what ordinary ones do)."""
    terms, out = node.attrs[:2]
    semiring = node.attrs.semiring if node.op is Op.SEMIRING_EINSUM else None
    sizes = einsum_sizes(node)
    operands = in_network_dtype(node.inputs, node.dtype)  # partial results in the network's dtype
    items = [(x, tuple(t)) for x, t in zip(operands, terms) if t]
    scalars = [x for x, t in zip(operands, terms) if not t]
    if len(items) <= 1 and not scalars:
        return node
    tried: list[tuple] = []  # every tree considered: candidates again if slicing is needed
    limit = options.memory_limit
    item_terms = [t for _, t in items]
    beside = sum(x.nbytes for x, _ in items if x.op not in (Op.CONST, Op.PLACEHOLDER))
    itemsize = np.result_type(*[x.dtype for x, _ in items]).itemsize if items else 0
    if semiring == "count":
        itemsize *= 2  # partial results are (value, count) pairs
    if limit is not None and len(items) >= 2:  # a limit nothing can meet: refused before searching
        from tenloom.passes.slicing import check_sliceable

        check_sliceable(item_terms, out, sizes, itemsize, limit, options.reverse_sweep, beside)
    if len(items) >= 3:
        complex_ = np.dtype(node.dtype).kind == "c"
        path = find_path(item_terms, out, sizes, options, complex_, stats)
        tried.append(path)
        if options.optimize is not False:
            # the plain left-to-right order is a candidate too: cheap to cost, and on chains
            # (MPS sweeps) it beats what a greedy search finds
            chain = tuple(_left_to_right(len(item_terms)))
            tried.append(chain)
            if path_cost(item_terms, out, sizes, chain) < path_cost(item_terms, out, sizes, path):
                path = chain
                stats["left_to_right_kept"] = stats.get("left_to_right_kept", 0) + 1
        if nest is not None and options.optimize is not False:
            keep = {k: i for i, k in enumerate(k for k, t in enumerate(terms) if t)}
            user = nested_path(item_terms, out, sizes, _items_nest(nest, keep))
            if len(user) == len(item_terms) - 1:
                tried.append(tuple(user))
            if len(user) == len(item_terms) - 1 and path_cost(
                item_terms, out, sizes, user
            ) < path_cost(item_terms, out, sizes, path):
                path = tuple(user)
                stats["user_order_kept"] = stats.get("user_order_kept", 0) + 1
    else:
        path = tuple(_left_to_right(len(items)))
    sliced = None
    if limit is not None and len(items) >= 2:
        from tenloom.graph.errors import MemoryLimitError
        from tenloom.passes.slicing import DearerError, slice_to_fit

        best = failed = None
        # the fewest-flops tree may be too wide to slice well: the search's other trees and the
        # left-to-right order are sliced too, and the fewest flops over all slices wins; a start
        # that no slicing fits does not fail the network while another start fits
        alts = alternative_paths(item_terms, out, sizes, options, node.dtype.kind == "c")
        starts = [path, *tried, *alts]
        for start in dict.fromkeys(starts):
            # slicing never makes a tree cheaper than it is unsliced: a start already as dear
            # as the best sliced tree so far cannot win, and one that grows as dear while it
            # is sliced stops there (each step reconfigures the whole tree: slicing a wide
            # chain order of a 250-tensor network step after step took half a minute)
            bound = None if best is None else best[0]
            if bound is not None and path_cost(item_terms, out, sizes, start) >= bound:
                continue
            try:
                found = slice_to_fit(
                    item_terms,
                    out,
                    sizes,
                    start,
                    itemsize,
                    limit,
                    options.progress,
                    options.reverse_sweep,  # tl.grad: room for the reverse sweep
                    options.threads or 1,  # threads share the memory: slices fit at once
                    beside=beside,
                    bound=bound,
                )
            except DearerError:
                continue
            except MemoryLimitError as e:
                failed = failed or e
                continue
            if found is None:  # the fewest-flops tree fits unsliced
                if start is path:
                    failed = None
                    break
                continue
            cost = sliced_cost(item_terms, out, sizes, *found)
            if best is None or cost < best[0]:
                best = (cost, found)
        if best is not None:
            sliced, path = best[1]
        elif failed is not None:
            raise failed
    if sliced:
        attrs = (tuple(item_terms), tuple(out), sliced, path, None, semiring)
        res, t = make_node(Op.SLICED, tuple(x for x, _ in items), attrs), tuple(out)
        n = math.prod(s for _, s in sliced)
        stats["sliced_networks"] = stats.get("sliced_networks", 0) + 1
        stats["sliced_indices"] = stats.get("sliced_indices", 0) + len(sliced)
        stats["slices"] = stats.get("slices", 0) + n
        stats["per_slice_peak_bytes"] = max(
            stats.get("per_slice_peak_bytes", 0),
            slice_peak_bytes(attrs, [x.shape for x, _ in items], itemsize),
        )
    elif items:
        nodes, terms_ = [x for x, _ in items], [t for _, t in items]
        if semiring is None:
            res = pairwise_einsums(nodes, terms_, out, path, sizes)
        else:
            res = pairwise_network(nodes, terms_, out, path, semiring)
        t = tuple(out)
        stats["pairwise"] = stats.get("pairwise", 0) + len(path)
    else:  # only 0-d factors: the output is 0-d too
        res, t = scalars[0], ()
        scalars = scalars[1:]
    for s in scalars:
        if semiring is None:
            res = einsum_node([res, s], [t, ()], t)
        else:
            res = semiring_node([res, s], [t, ()], t, semiring)
    stats["networks"] = stats.get("networks", 0) + 1
    stats["largest"] = max(stats.get("largest", 0), len(node.inputs))
    return res


def pairwise_einsums(nodes, terms, out, path, sizes) -> Node:
    """``pairwise_network`` (graph/ops/sliced.py) for an ordinary network whose operands'
    shapes are its label sizes (``sizes``; no size-1 axis broadcast against a bigger one, as in
    a network merged and normalized already): the same pairwise EINSUM nodes, each made
    directly with its labels renumbered in order of first appearance as ``einsum_node`` does,
    without its checks and squeezes (a TEBD energy's 480 pairwise steps spent 6 ms there).
    Any operand whose shape is not its labels' sizes goes the general way."""
    if any(
        len(x.shape) != len(t) or any(n != sizes[lab] for n, lab in zip(x.shape, t))
        for x, t in zip(nodes, terms)
    ):
        return pairwise_network(nodes, terms, out, path)
    live = list(nodes)
    for i, j, ta, tb, keep in path_steps(terms, out, path):
        ids: dict = {}
        a = tuple([ids.setdefault(lab, len(ids)) for lab in ta])
        b = tuple([ids.setdefault(lab, len(ids)) for lab in tb])
        o = tuple([ids[lab] for lab in keep])  # every kept label is one of a's or b's
        live.append(make_node(Op.EINSUM, (live[i], live[j]), ((a, b), o)))
    res = live[-1]
    t = keep if path else tuple(terms[0])
    if tuple(t) != tuple(out):
        res = einsum_node([res], [t], out)
    return res


def empty_network(node: Node) -> Node:
    """A network with a zero-size label, as the FULL node it equals: each output entry sums
    over an empty set of index values, so it is exactly zero whatever the operands hold (NaN and
    inf included: NumPy's einsum gives zeros too), or the output itself is empty. Nothing to
    order (cotengra's searches fail on such networks)."""
    zero = np.zeros((), node.dtype).tobytes()
    return make_node(Op.FULL, (), (tuple(node.shape), node.dtype.str, zero))


@register_pass("contraction_order")
def contraction_order(graph: Graph, ctx: PassContext) -> Graph:
    """Order every n-ary EINSUM and SEMIRING_EINSUM (n >= 3) into pairwise contractions with
    cotengra; with
    ``memory_limit``, a network whose tree does not fit becomes one SLICED node (passes/slicing)."""
    stats: dict = {}
    nesting = graph.meta.get("nesting", {})

    least = 2 if ctx.options.memory_limit is not None else 3  # 2: it may need slicing

    def fn(node: Node) -> Node:
        if node.op is Op.SEMIRING_EINSUM and len(node.inputs) >= least:
            if 0 in einsum_sizes(node).values():  # the kernel gives the semiring's zeros
                return node
            if not ctx.options.fold_constants:
                # the gradient pre-pass: a semiring network is differentiated whole (its rule's
                # environments are networks the order search trees afterwards), not through a
                # tree whose pairwise rules would span each step's every label
                return node
            hint = nesting.get(id(node))
            return build_tree(node, ctx.options, stats, hint[1] if hint else None)
        if node.op is Op.EINSUM and len(node.inputs) >= least:
            if 0 in einsum_sizes(node).values():
                stats["empty_networks"] = stats.get("empty_networks", 0) + 1
                return empty_network(node)
            hint = nesting.get(id(node))
            return build_tree(node, ctx.options, stats, hint[1] if hint else None)
        return node

    res = map_graph(graph, fn)
    ctx.record("contraction_order", **stats)
    return res


def tree_cost_log10(graph: Graph) -> float:
    """log10 of the total multiply-adds of all pairwise contractions in ``graph``."""
    from tenloom.passes.cost import node_madds

    total = sum(node_madds(n) for n in graph.order if n.op in (Op.EINSUM, Op.CONTRACT))
    return math.log10(max(total, 1))
