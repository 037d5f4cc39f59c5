"""Chain networks get the exact matrix-chain order (passes/chain_path.py)."""

from __future__ import annotations

import functools
import itertools
import operator

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tenloom.passes.chain_path import chain_order, chain_path
from tenloom.passes.contraction_order import path_cost

import tenloom as tl


def brute_force(terms, out, sizes) -> float:
    """The cheapest cost over every pairwise order (small networks only)."""
    best = None
    stack = [([tuple(t) for t in terms], 0.0)]
    while stack:
        live, cost = stack.pop()
        if len(live) == 1:
            best = cost if best is None else min(best, cost)
            continue
        for i, j in itertools.combinations(range(len(live)), 2):
            rest = [t for k, t in enumerate(live) if k not in (i, j)]
            keep = {lab for t in rest for lab in t} | set(out)
            merged = tuple(dict.fromkeys(lab for lab in live[i] + live[j] if lab in keep))
            c = float(np.prod([sizes[lab] for lab in set(live[i]) | set(live[j])]))
            stack.append((rest + [merged], cost + c))
    return best


@given(
    st.lists(st.integers(2, 9), min_size=4, max_size=7),
    st.randoms(use_true_random=False),
    st.booleans(),
)
def test_chain_order_is_optimal_and_valid(dims, rnd, with_outputs):
    n = len(dims) - 1
    terms = [(i, i + 1) + ((100 + i,) if with_outputs and i % 2 else ()) for i in range(n)]
    out = (0, n) + tuple(100 + i for i in range(n) if with_outputs and i % 2)
    sizes = {i: d for i, d in enumerate(dims)}
    sizes.update({100 + i: 2 for i in range(n)})  # bonds >= 2: merging neighbours is optimal
    order = list(range(n))
    rnd.shuffle(order)
    terms = [terms[i] for i in order]
    path = chain_path(terms, out, sizes)
    assert path is not None and len(path) == n - 1
    assert path_cost(terms, out, sizes, path) == pytest.approx(brute_force(terms, out, sizes))


def test_size_one_bonds_keep_the_cheaper_greedy_order():
    x = [tl.asarray(np.ones(s)) for s in ((1, 1), (1, 1, 2), (1, 1))]
    y = tl.einsum("ab,bcx,cd->adx", *x)
    np.testing.assert_allclose(y.evaluate(), np.ones((1, 1, 2)))
    assert tl.explain(y).after.flops == 2 * 3  # outer product of the size-1 ends first


def test_non_chains_are_left_to_the_search():
    sizes = dict.fromkeys(range(10), 3)
    assert chain_order([(0, 1), (1, 2), (2, 0)], (), sizes) is None  # a ring
    assert chain_order([(0, 1), (1, 2), (1, 3)], (0, 2, 3), sizes) is None  # a hyper-index
    assert chain_order([(0, 1), (1, 2), (2, 3), (1, 4)], (0, 3, 4), sizes) is None  # a star
    assert chain_order([(0, 1), (1, 2), (2, 3)], (0, 2, 3), sizes) is None  # shared and kept
    assert chain_order([(0, 1), (1, 2), (2, 3)], (0, 3), sizes) == [0, 1, 2]


def test_matrix_chain_evaluates_with_the_optimal_order():
    rng = np.random.default_rng(3)
    dims = [int(d) for d in rng.integers(2, 60, 16)]
    mats = [rng.standard_normal((dims[i], dims[i + 1])) for i in range(15)]
    y = functools.reduce(operator.matmul, [tl.asarray(m) for m in mats])
    np.testing.assert_allclose(y.evaluate(), np.linalg.multi_dot(mats), rtol=1e-10)
    terms = [(i, i + 1) for i in range(15)]
    sizes = dict(enumerate(dims))
    best = path_cost(terms, (0, 15), sizes, chain_path(terms, (0, 15), sizes))
    flops = tl.explain(y).after.flops
    assert flops == 2 * best
