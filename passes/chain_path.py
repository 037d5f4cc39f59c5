"""Exact contraction order for chain networks (used by contraction_order).

A network is a chain when its operands can be lined up so that each label is shared by two
neighbours only (a bond) or belongs to one operand and the output: matrix products
``a @ b @ c @ ...``, MPS-like sweeps without a second row. For a chain the best order that
only ever merges neighbours is the classic matrix-chain dynamic program over intervals (what
numpy.linalg.multi_dot solves): an interval's intermediate keeps the bonds at its two ends and
the output labels inside it, so

    cost(i..k | k+1..j) = bond[i] * bond[k+1] * bond[j+1] * out(i..j)

and that optimum is found in O(n^3) steps, where cotengra's presets search (its "auto" finds
4.7x more work on a 100-matrix chain; its exact "dp" takes 1.5 s). Merging non-neighbours (an
outer product) can only win through size-1 bonds, so contraction_order also costs cotengra's
greedy order and keeps the cheaper. We write the interval program ourselves: a few lines, and
exact where a search is not.
"""

from __future__ import annotations

import math
from collections import defaultdict

MAX_CHAIN = 200  # O(n^3) in Python: ~0.3 s at 200 operands


def chain_order(terms, out, sizes) -> list[int] | None:
    """The operands' positions along the chain, or None if the network is not a chain."""
    n = len(terms)
    if n < 3 or n > MAX_CHAIN or 0 in sizes.values():
        return None
    outset = set(out)
    owners: dict = defaultdict(list)
    for k, t in enumerate(terms):
        if len(set(t)) != len(t):
            return None
        for lab in t:
            owners[lab].append(k)
    nbrs: dict[int, set] = defaultdict(set)
    for lab, ks in owners.items():
        if len(ks) == 1:
            if lab not in outset:
                return None  # a lone summed index: left to pre-reduction
        elif len(ks) == 2 and lab not in outset:
            nbrs[ks[0]].add(ks[1])
            nbrs[ks[1]].add(ks[0])
        else:
            return None  # a hyper-index or a kept shared index
    if any(len(v) > 2 for v in nbrs.values()):
        return None
    ends = [k for k in range(n) if len(nbrs[k]) == 1]
    if len(ends) != 2:
        return None
    order, prev, cur = [ends[0]], None, ends[0]
    while len(order) < n:
        nxt = [k for k in nbrs[cur] if k != prev]
        if len(nxt) != 1:
            return None
        prev, cur = cur, nxt[0]
        order.append(cur)
    return order if len(set(order)) == n else None


def chain_path(terms, out, sizes) -> tuple[tuple[int, int], ...] | None:
    """The best neighbour-merging SSA path of a chain network; None when it is not a chain."""
    order = chain_order(terms, out, sizes)
    if order is None:
        return None
    n = len(order)
    outset = set(out)
    # bond[i]: size of the labels shared by operands order[i-1] and order[i] (1 at the ends)
    bond = [1] * (n + 1)
    outp = [1] * n
    for i, k in enumerate(order):
        t = terms[k]
        outp[i] = math.prod(sizes[lab] for lab in t if lab in outset)
        if i:
            prev = set(terms[order[i - 1]])
            bond[i] = math.prod(sizes[lab] for lab in t if lab in prev)
    pre = [1] * (n + 1)  # prefix products of the output sizes
    for i in range(n):
        pre[i + 1] = pre[i] * outp[i]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length - 1
            ends = bond[i] * bond[j + 1] * (pre[j + 1] // pre[i])
            best = best_k = None
            row, col = cost[i], cost
            for k in range(i, j):
                c = row[k] + col[k + 1][j] + ends * bond[k + 1]
                if best is None or c < best:
                    best, best_k = c, k
            cost[i][j], split[i][j] = best, best_k
    # SSA path from the split table, post-order with an explicit stack
    path: list[tuple[int, int]] = []
    ids: dict[tuple[int, int], int] = {(i, i): order[i] for i in range(n)}
    next_id = len(terms)
    stack = [(0, n - 1, False)]
    while stack:
        i, j, ready = stack.pop()
        if i == j:
            continue
        k = split[i][j]
        if not ready:
            stack.append((i, j, True))
            stack.append((k + 1, j, False))
            stack.append((i, k, False))
            continue
        path.append((ids[(i, k)], ids[(k + 1, j)]))
        ids[(i, j)] = next_id
        next_id += 1
    return tuple(path)
