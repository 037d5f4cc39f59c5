"""SSA contraction paths for the order search (passes/contraction_order.py): cotengra's greedy
path without a cotengra tree, in the step order cotengra's tree gives it (``tree_order``), and
a path's multiply-adds (``path_cost``), without building cotengra trees: on a first call of
many small networks (a TEBD energy's 15 of 33 tensors) building and costing trees took half
the search's time. The tests check each against cotengra itself. passes/caches.py's disk key
digests this module's source with the search's, so a change here invalidates cached paths.
"""

from __future__ import annotations

from typing import Any


def canonical(terms, out, sizes) -> tuple:
    """The network with its labels renumbered in order of first appearance: one network
    reached with other label numbers (a gradient's pre-pass, a later evaluation of the same
    tensors) gets the same cache entry, hence the same tree."""
    ids: dict = {}
    t = tuple(tuple(ids.setdefault(lab, len(ids)) for lab in term) for term in terms)
    o = tuple(ids.setdefault(lab, len(ids)) for lab in out)
    return t, o, tuple(sorted((ids[lab], n) for lab, n in sizes.items() if lab in ids))


def as_path(t: Any) -> tuple:
    """The SSA path of ``t``, an SSA path or a cotengra tree."""
    if isinstance(t, tuple):
        return t
    return tuple(tuple(int(i) for i in p) for p in t.get_ssa_path())


def greedy_path(terms, out, sizes):
    """cotengra's "greedy" preset (the search ``array_contract_tree(..., optimize="greedy")``
    runs, on the labels renumbered in order of first appearance as cotengra renames them) as the
    SSA path its tree gives (``tree_order``), without building the tree: a TEBD energy's 15 small
    networks spent half their search time building and costing trees that greedy alone had
    found. Where cotengra's greedy contracts a single operand first (a lone index), the tree is
    built as the preset builds it and returned instead."""
    import cotengra as ctg
    from cotengra.presets import greedy_optimize

    t, o, s = canonical(terms, out, sizes)
    path = greedy_optimize.ssa_path(t, o, dict(s))
    if all(len(p) == 2 for p in path):
        return tree_order(path, len(terms))
    args = ([tuple(x) for x in terms], tuple(out), dict(sizes))
    return ctg.array_contract_tree(*args, optimize="greedy")


def tree_order(path, n: int) -> tuple:
    """The SSA path of ``path``'s tree in the order cotengra's ``ContractionTree.from_path(...,
    ssa_path=path).get_ssa_path()`` gives its steps (cotengra 0.8's rules, which the tests check
    against cotengra itself): each contraction's children ordered heavier (more leaves) first,
    ties by the earlier node (cotengra's node ids: leaves 0..n-1, the root n, the other
    contractions n+1, n+2, ... as they are made), visited depth first, the first child first;
    each step's pair sorted. The step order decides each intermediate's label order."""
    if n < 2:
        return ()
    node = list(range(n))  # SSA id -> cotengra node id
    extent = [1] * n + [n] + [0] * max(n - 2, 0)  # by cotengra node id
    children: dict[int, tuple[int, int]] = {}
    fresh = n + 1
    for i, j in path:
        x, y = node[i], node[j]
        ex, ey = extent[x], extent[y]
        if ex + ey == n:
            parent = n
        else:
            parent, fresh = fresh, fresh + 1
            extent[parent] = ex + ey
        first_x = x < y if ex == ey else ex > ey
        children[parent] = (x, y) if first_x else (y, x)
        node.append(parent)
    pos = {k: k for k in range(n)}
    out: list[tuple[int, int]] = []
    stack = [n]
    while stack:
        top = stack[-1]
        left, right = children[top]
        if left in pos and right in pos:
            stack.pop()
            a, b = pos[left], pos[right]
            out.append((a, b) if a < b else (b, a))
            pos[top] = n + len(out) - 1
            continue
        if right not in pos:
            stack.append(right)
        if left not in pos:
            stack.append(left)
    return tuple(out)


def path_cost(terms, out, sizes, ssa_path) -> float:
    """Multiply-adds of the pairwise contractions along ``ssa_path``, each the product of its
    labels' sizes, as cotengra's ``contraction_cost`` counts them (without building a cotengra
    tree: on a first call of many small networks that was a tenth of the passes' time). Each
    intermediate keeps the labels still needed later, as ``path_steps`` says; only which labels,
    not their order, matters here, so this is a leaner walk of the same steps. The last few
    answers are kept (``_RECENT``): the search costs greedy's path for its budget and the pass
    costs it again against the left-to-right order."""
    key = (id(terms), id(out), id(sizes), tuple(ssa_path))
    hit = _RECENT.get(key)
    if hit is not None and hit[0] is terms and hit[1] is out and hit[2] is sizes:
        return hit[3]
    cost = _path_cost(terms, out, sizes, ssa_path)
    if len(_RECENT) >= 8:
        _RECENT.clear()
    _RECENT[key] = (terms, out, sizes, cost)  # the objects held: their ids stay theirs
    return cost


# (ids of terms, out, sizes; path) -> (those objects, cost): path_cost's last answers, a few
_RECENT: dict[tuple, tuple] = {}


def _path_cost(terms, out, sizes, ssa_path) -> float:
    live: list = [tuple(t) for t in terms]
    needed: dict = dict.fromkeys(out, 1)  # how many live terms (and the output) hold a label
    for t in live:
        for lab in t:
            needed[lab] = needed.get(lab, 0) + 1
    total = 0
    for i, j in ssa_path:
        ta, tb = live[i], live[j]
        for lab in ta:
            needed[lab] -= 1
        for lab in tb:
            needed[lab] -= 1
        madds = 1
        keep = []
        for lab in {*ta, *tb}:
            madds *= sizes[lab]
            if needed[lab] > 0:  # still held by another term or the output
                keep.append(lab)
                needed[lab] += 1
        live.append(keep)
        total += madds
    return float(total)
