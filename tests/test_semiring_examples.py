"""Semiring einsums end to end (issue 24): small random networks against a brute-force NumPy
reference that enumerates every configuration of their labels, through every pipeline variant,
sliced and not, on 1 and 2 threads; gradients (log-sum-exp: the marginals and finite
differences; max-plus/min-plus: the indicator of the optimal configuration); typed errors; and
the two examples (examples/spin_glass.py, examples/max_independent_set.py) against brute force
and networkx."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import assert_close

import tenloom as tl

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))

import max_independent_set  # noqa: E402
import spin_glass  # noqa: E402

SEMIRINGS = ("max_plus", "min_plus", "max_times", "log_sum_exp", "count")
TROPICAL = ("max_plus", "min_plus", "max_times")

# ---- the brute-force reference -------------------------------------------------------------


def configurations(arrays, subs):
    """(labels, sizes, grid): the labels in order of first appearance, their sizes, and a
    (labels, configurations) array of every assignment of values to them."""
    labels, sizes = [], {}
    for a, s in zip(arrays, subs):
        for label, d in zip(s, np.shape(a)):
            if label not in sizes:
                labels.append(label)
                sizes[label] = d
            assert sizes[label] == d, "inconsistent test network"
    dims = [sizes[label] for label in labels]
    grid = np.indices(dims).reshape(len(dims), -1) if dims else np.zeros((0, 1), dtype=int)
    return labels, sizes, grid


def entries(arrays, subs, labels, grid):
    """Each operand's entry in every configuration: a list of (configurations,) arrays and the
    index tuples that picked them (repeated labels take the diagonal)."""
    pos = {label: k for k, label in enumerate(labels)}
    picks = [tuple(grid[pos[label]] for label in s) for s in subs]
    vals = [np.broadcast_to(np.asarray(a)[p], grid.shape[1:]) for a, p in zip(arrays, picks)]
    return vals, picks


def reference(arrays, subs, out, semiring, *, with_argmax=False):
    """The semiring contraction by enumeration, in float64 (int64 for integer operands): every
    configuration's product (the semiring's multiplication: + or *), reduced per output entry
    with the semiring's addition (max, min, log-sum-exp; "count": the max and how many
    configurations reach it exactly, stacked on a trailing axis; "sum": ordinary einsum, to
    check the reference itself). ``with_argmax`` also returns the configuration index of each
    output entry's optimum (the first in enumeration order) and the grid."""
    arrays = [np.asarray(a) for a in arrays]
    exact = all(a.dtype.kind in "biu" for a in arrays)
    acc = np.int64 if exact else np.float64
    labels, sizes, grid = configurations(arrays, subs)
    vals, _ = entries(arrays, subs, labels, grid)
    vals = [v.astype(acc) for v in vals]
    total = (
        np.ones(grid.shape[1], acc)
        if semiring in ("max_times", "sum")
        else np.zeros(grid.shape[1], acc)
    )
    for v in vals:
        total = total * v if semiring in ("max_times", "sum") else total + v
    pos = {label: k for k, label in enumerate(labels)}
    out_shape = tuple(sizes[label] for label in out)
    group = (
        np.ravel_multi_index(tuple(grid[pos[label]] for label in out), out_shape)
        if out
        else np.zeros(grid.shape[1], dtype=np.intp)
    )
    n_out = int(np.prod(out_shape, dtype=np.int64))
    if semiring == "sum":
        res = np.zeros(n_out, acc)
        np.add.at(res, group, total)
        return res.reshape(out_shape)
    low = np.iinfo(acc).min if exact else -np.inf
    high = np.iinfo(acc).max if exact else np.inf
    if semiring == "min_plus":
        best = np.full(n_out, high, acc)
        np.minimum.at(best, group, total)
    else:
        best = np.full(n_out, low, acc)
        np.maximum.at(best, group, total)
    if semiring == "log_sum_exp":
        shift = np.where(np.isfinite(best), best, 0.0)
        s = np.zeros(n_out)
        np.add.at(s, group, np.exp(total - shift[group]))
        with np.errstate(divide="ignore"):
            res = (shift + np.log(s)).reshape(out_shape)
    elif semiring == "count":
        hits = np.zeros(n_out)
        np.add.at(hits, group, (total == best[group]).astype(np.float64))
        res = np.stack([best.astype(np.float64), hits], axis=-1).reshape(out_shape + (2,))
    else:
        res = best.reshape(out_shape)
    if not with_argmax:
        return res
    arg = np.full(n_out, -1, dtype=np.intp)
    hit = np.flatnonzero(total == best[group])[::-1]  # the first hit in each group wins
    arg[group[hit]] = hit
    return res, arg, (labels, grid)


def tropical_gradients(arrays, subs, out, semiring, weights):
    """d sum(weights * result) / d operand for max-plus/min-plus, by enumeration: each output
    entry's optimal configuration adds its weight to the entries it uses."""
    _, arg, (labels, grid) = reference(arrays, subs, out, semiring, with_argmax=True)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    _, picks = entries(arrays, subs, labels, grid)
    grads = []
    for a, p in zip(arrays, picks):
        g = np.zeros(np.shape(a))
        idx = tuple(np.asarray(ix)[arg] for ix in p) if p else ()
        np.add.at(g, idx, w) if p else g.fill(w.sum())
        grads.append(g)
    return grads


def lse_gradients(arrays, subs, out, weights):
    """d sum(weights * logsumexp-contraction) / d operand, by enumeration: the marginals, each
    configuration weighted by exp(its sum - its output entry)."""
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    res = reference(arrays, subs, out, "log_sum_exp")
    labels, sizes, grid = configurations(arrays, subs)
    vals, picks = entries(arrays, subs, labels, grid)
    total = np.sum(vals, axis=0) if vals else np.zeros(grid.shape[1])
    pos = {label: k for k, label in enumerate(labels)}
    out_shape = tuple(sizes[label] for label in out)
    group = (
        np.ravel_multi_index(tuple(grid[pos[label]] for label in out), out_shape)
        if out
        else np.zeros(grid.shape[1], dtype=np.intp)
    )
    flat = np.asarray(res).reshape(-1)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    p = np.exp(total - flat[group]) * w[group]
    grads = []
    for a, pk in zip(arrays, picks):
        g = np.zeros(a.shape)
        np.add.at(g, pk, p) if pk else g.fill(p.sum())
        grads.append(g)
    return grads


def random_network(seed, n_ops=None, n_labels=6, dims=(2, 3), repeats=True):
    """(shapes, subs, out): 3-6 operands on ``n_labels`` integer labels (some shared by three
    or more operands: hyperedges), 0-3 labels each, occasionally one repeated inside an operand
    (a diagonal), 0-3 output labels (those that appear on two or more operands are batch
    labels)."""
    rng = np.random.default_rng(seed)
    n_ops = int(rng.integers(3, 7)) if n_ops is None else n_ops
    pool = [int(x) for x in rng.permutation(50)[:n_labels]]  # arbitrary integer labels
    sizes = {label: int(rng.choice(dims)) for label in pool}
    subs = []
    for _ in range(n_ops):
        k = int(rng.integers(0, 4))
        s = [pool[int(i)] for i in rng.choice(n_labels, size=k, replace=False)]
        if repeats and s and rng.random() < 0.2:
            s.insert(int(rng.integers(0, len(s) + 1)), s[0])
        subs.append(s)
    used = list(dict.fromkeys(label for s in subs for label in s))
    if not used:
        subs[0] = [pool[0]]
        used = [pool[0]]
    n_out = int(rng.integers(0, min(3, len(used)) + 1))
    out = [used[int(i)] for i in rng.choice(len(used), size=n_out, replace=False)]
    shapes = [tuple(sizes[label] for label in s) for s in subs]
    return shapes, subs, out


def operands(shapes, dtype, seed, integer_valued):
    """Random operands: small integers (ties, exact sums) or standard normals."""
    rng = np.random.default_rng(seed)
    if integer_valued:
        return [rng.integers(-3, 4, size=s).astype(dtype) for s in shapes]
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def lazy(arrays, subs, out, semiring, tensors=None):
    ts = tensors if tensors is not None else [tl.asarray(a) for a in arrays]
    return tl.einsum(*[x for t, s in zip(ts, subs) for x in (t, s)], out, semiring=semiring)


def expected_dtype(semiring, dtype):
    return np.dtype(np.float64) if semiring == "count" else np.dtype(dtype)


def check(result, expected, semiring, dtype):
    expected = np.asarray(expected).astype(expected_dtype(semiring, dtype))
    if semiring == "count":  # the value (float64 of the dtype's sums) and the exact count
        assert result.shape == expected.shape and result.dtype == expected.dtype
        assert_close(result[..., 0], expected[..., 0], dtype=dtype)
        np.testing.assert_array_equal(result[..., 1], expected[..., 1])
    else:
        assert_close(result, expected, dtype=dtype)


# ---- the reference checks itself ---------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_reference_agrees_with_numpy_on_ordinary_and_log_sums(seed):
    shapes, subs, out = random_network(seed)
    arrays = operands(shapes, "float64", seed, integer_valued=False)
    args = [x for a, s in zip(arrays, subs) for x in (a, s)]
    np.testing.assert_allclose(reference(arrays, subs, out, "sum"), np.einsum(*args, out))
    exps = [x for a, s in zip(arrays, subs) for x in (np.exp(a), s)]
    np.testing.assert_allclose(
        reference(arrays, subs, out, "log_sum_exp"), np.log(np.einsum(*exps, out))
    )
    # max-plus is the zero-temperature limit of log-sum-exp
    beta = 200.0
    scaled = [beta * a for a in arrays]
    np.testing.assert_allclose(
        reference(scaled, subs, out, "log_sum_exp") / beta,
        reference(arrays, subs, out, "max_plus"),
        atol=np.log(np.prod([np.prod(s, dtype=float) for s in shapes]) + 1) / beta,
    )


@pytest.mark.parametrize("seed", range(4))
def test_reference_gradients_agree_with_finite_differences_of_the_reference(seed):
    shapes, subs, out = random_network(seed + 10, repeats=seed % 2 == 0)
    arrays = operands(shapes, "float64", seed, integer_valued=False)
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(tuple(np.shape(reference(arrays, subs, out, "max_plus"))))
    dirs = [rng.standard_normal(s) for s in shapes]
    for semiring, eps in (("max_plus", 1e-7), ("min_plus", 1e-7), ("log_sum_exp", 1e-6)):
        if semiring == "log_sum_exp":
            grads = lse_gradients(arrays, subs, out, w)
        else:
            grads = tropical_gradients(arrays, subs, out, semiring, w)

        def loss(sign, semiring=semiring):
            moved = [a + sign * eps * d for a, d in zip(arrays, dirs)]
            return float(np.sum(w * reference(moved, subs, out, semiring)))

        numeric = (loss(1) - loss(-1)) / (2 * eps)
        analytic = sum(float(np.vdot(g, d)) for g, d in zip(grads, dirs))
        assert abs(numeric - analytic) <= 1e-5 * max(1.0, abs(numeric)), (semiring, numeric)


def test_spin_glass_brute_force_against_itertools():
    import itertools

    edges, J, h = spin_glass.random_glass(8, seed=3, field=0.5)  # noqa: N806
    energies = [
        spin_glass.energy(np.array(s), edges, J, h)
        for s in itertools.product((1.0, -1.0), repeat=8)
    ]
    e0, deg = spin_glass.brute_force(edges, J, h)
    assert e0 == pytest.approx(min(energies))
    assert deg == sum(abs(e - min(energies)) <= 1e-9 for e in energies) == 1
    edges, J, h = spin_glass.random_glass(10, seed=1)  # noqa: N806
    energies = [
        spin_glass.energy(np.array(s), edges, J, h)
        for s in itertools.product((1.0, -1.0), repeat=10)
    ]
    assert spin_glass.brute_force(edges, J, h) == (min(energies), energies.count(min(energies)))


def independent_sets_by_enumeration(graph):
    """(maximum size, number of maximum independent sets) over all 2^n vertex subsets."""
    n = graph.number_of_nodes()
    codes = np.arange(1 << n, dtype=np.int64)
    x = (codes[:, None] >> np.arange(n)) & 1
    e = np.array(sorted(graph.edges()), dtype=np.intp).reshape(-1, 2)
    ok = ~np.any(x[:, e[:, 0]] & x[:, e[:, 1]], axis=1)
    sizes = np.where(ok, x.sum(axis=1), -1)
    return int(sizes.max()), int(np.sum(sizes == sizes.max()))


@pytest.mark.parametrize("seed", range(3))
def test_networkx_mis_against_enumeration(seed):
    graph = max_independent_set.random_graph(14, seed, "gnp", 0.3)
    assert max_independent_set.networkx_mis(graph) == independent_sets_by_enumeration(graph)
