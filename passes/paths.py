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
    found. The path is ``fast_greedy``'s where it applies, else cotengra's own. Where cotengra's
    greedy contracts a single operand first (a lone index), the tree is built as the preset
    builds it and returned instead."""
    import cotengra as ctg
    from cotengra.presets import greedy_optimize

    t, o, s = canonical(terms, out, sizes)
    path = fast_greedy(t, o, dict(s)) if _plain_greedy(greedy_optimize) else None
    if path is None:
        path = greedy_optimize.ssa_path(t, o, dict(s))
    if all(len(p) == 2 for p in path):
        return tree_order(path, len(terms))
    args = ([tuple(x) for x in terms], tuple(out), dict(sizes))
    return ctg.array_contract_tree(*args, optimize="greedy")


def _plain_greedy(optimizer) -> bool:
    """Whether cotengra's greedy preset runs its own Python greedy with its default settings
    (the one ``fast_greedy`` reproduces; not cotengrust's, where that is installed)."""
    from cotengra.pathfinders import path_basic

    return (
        getattr(optimizer, "_optimize_fn", None) is path_basic.optimize_greedy
        and optimizer.costmod == 1.0
        and optimizer.temperature == 0.0
        and optimizer.max_neighbors == _MAX_NEIGHBORS
        and optimizer.simplify is True
    )


_MAX_NEIGHBORS = 16  # cotengra's DEFAULT_MAX_NEIGHBORS: an index on more nodes pairs none


def fast_greedy(terms, out, sizes) -> list | None:
    """The SSA path of cotengra 0.8's ``optimize_greedy`` (path_basic.py: costmod 1, no
    temperature, at most 16 neighbours, simplifications on) for networks it needs no
    simplification or clean-up for, or None (the caller then runs cotengra's): the same
    scores, the same candidates in the same order, so the same steps; the tests check it
    against cotengra's on hundreds of networks. Cheaper (a TEBD energy's 15 networks: about
    half the time) because a candidate's result size is worked out from the labels the pair
    shares and its result's labels only when it is contracted, and a pair offered twice (two
    shared labels) is queued once: its second entry, of the same score and queued later, could
    only be popped after the first, when it is stale.

    Not applied (None): a label of every tensor, a repeated label within a term,
    a label found in one term only and not in the output, a term with no labels, two terms
    with the same labels (cotengra's simplifications), or a network greedy leaves in several
    pieces (cotengra contracts those by size)."""
    import heapq

    # labels numbered in order of first appearance, as cotengra's ContractionProcessor does
    index: dict = {}
    app: list[int] = []
    dims: list[int] = []
    nodes: dict[int, dict] = {}
    edges: dict[int, dict] = {}
    for i, term in enumerate(terms):
        legs = {}
        for lab in term:
            d = sizes[lab]
            if d == 1:
                continue  # cotengra leaves size-1 labels out
            ix = index.get(lab)
            if ix is None:
                ix = index[lab] = len(app)
                app.append(0)
                dims.append(d)
                edges[ix] = {}
            if ix in legs:
                return None  # a repeated label: a diagonal cotengra takes first
            legs[ix] = 1
            app[ix] += 1
            edges[ix][i] = None
        if not legs:
            return None
        nodes[i] = dict(sorted(legs.items()))
    for lab in out:
        if lab in index:
            app[index[lab]] += 1
    n = len(nodes)
    if n < 2 or any(len(e) >= n for e in edges.values()):
        return None  # cotengra drops labels every term has (simplify_batch)
    seen_sets = set()
    for legs in nodes.values():
        for ix in legs:
            if app[ix] == 1:
                return None  # a lone label: summed first
        key = frozenset(legs)
        if key in seen_sets:
            return None  # a Hadamard product: taken first
        seen_sets.add(key)

    def size(legs) -> int:
        k = 1
        for ix in legs:
            k *= dims[ix]
        return k

    # a pair's result size from the labels it shares: each kept one (also held elsewhere or
    # by the output) counted once, each contracted one not at all
    node_size = {i: size(legs) for i, legs in nodes.items()}
    queue: list = []
    pairs: list[tuple[int, int]] = []  # queue entry c -> its pair
    offered: set = set()
    for ix_nodes in edges.values():
        if len(ix_nodes) > _MAX_NEIGHBORS:
            continue
        members = list(ix_nodes)
        for p, i in enumerate(members):
            a, si = nodes[i], node_size[i]
            for j in members[p + 1 :]:
                if (i, j) in offered:
                    continue
                offered.add((i, j))
                b, sj = nodes[j], node_size[j]
                sk = si * sj
                for ix in a.keys() & b.keys():
                    d = dims[ix]
                    sk //= d * d if a[ix] + b[ix] == app[ix] else d
                queue.append((sk / 1.0 - (si + sj) * 1.0, len(pairs)))
                pairs.append((i, j))
    heapq.heapify(queue)  # the same heap order as pushing one by one: (score, c) are distinct
    heappop, heappush = heapq.heappop, heapq.heappush
    path: list[tuple[int, int]] = []
    k = n
    while len(nodes) > 1 and queue:
        i, j = pairs[heappop(queue)[1]]
        if i not in nodes or j not in nodes:
            continue
        a, b = nodes.pop(i), nodes.pop(j)
        for ix in a:
            e = edges[ix]
            del e[i]
            if not e:
                del edges[ix]
        for ix in b:
            e = edges[ix]
            del e[j]
            if not e:
                del edges[ix]
        merged = dict(a)  # the result's labels: a shared one is kept unless it ends here
        for ix, cb in b.items():
            ca = merged.get(ix)
            if ca is None:
                merged[ix] = cb
            elif ca + cb == app[ix]:
                del merged[ix]
            else:
                merged[ix] = ca + cb
        new: dict = {}
        sk = 1
        for ix in sorted(merged):
            new[ix] = merged[ix]
            sk *= dims[ix]
            e = edges.get(ix)
            if e is None:
                edges[ix] = {k: None}
            else:
                e[k] = None
        nodes[k] = new
        node_size[k] = sk
        path.append((i, j))
        done: set = {k}
        for ix in new:
            ix_nodes = edges[ix]
            if len(ix_nodes) > _MAX_NEIGHBORS:
                continue
            for m in ix_nodes:
                if m in done:
                    continue
                done.add(m)
                b, sm = nodes[m], node_size[m]
                sn = sk * sm
                for jx in new.keys() & b.keys():
                    d = dims[jx]
                    sn //= d * d if new[jx] + b[jx] == app[jx] else d
                heappush(queue, (sn / 1.0 - (sk + sm) * 1.0, len(pairs)))
                pairs.append((k, m))
        k += 1
    if len(nodes) != 1:
        return None  # pieces greedy cannot join: cotengra contracts them by size
    return path


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
