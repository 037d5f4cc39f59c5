"""Semiring einsums end to end (issue 24): small random networks against a brute-force NumPy
reference that enumerates every configuration of their labels, through every pipeline variant,
sliced and not, on 1 and 2 threads; gradients (log-sum-exp: the marginals and finite
differences; max-plus/min-plus: the indicator of the optimal configuration); typed errors; and
the two examples (examples/spin_glass.py, examples/max_independent_set.py) against brute force
and networkx."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from helpers import assert_close
from tenloom.runtime.sliced import LAST_RUN

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
    configurations reach it exactly, those of sum -inf not counted, stacked on a trailing
    axis; "sum": ordinary einsum, to
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
        hits = np.zeros(n_out)  # an entry of -inf is no configuration at all
        reach = (total == best[group]) & (total > -np.inf)
        np.add.at(hits, group, reach.astype(np.float64))
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


def operands(shapes, dtype, seed, integer_valued, nonnegative=False):
    """Random operands: small integers (ties, exact sums and products) or standard normals;
    ``nonnegative`` (max_times is a semiring over numbers >= 0 only): 0..3 or |normal|."""
    rng = np.random.default_rng(seed)
    if integer_valued:
        low = 0 if nonnegative else -3
        return [rng.integers(low, 4, size=s).astype(dtype) for s in shapes]
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    return [np.abs(a) for a in arrays] if nonnegative else arrays


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


# ---- values: random networks, every semiring, every pipeline variant ----------------------

# the dtypes each semiring is checked in (integer-valued data for every semiring but
# log_sum_exp, so that sums, products, maxima and tie counts are exact in each of them)
DTYPES = {
    "max_plus": ("float32", "float64", "int32", "int64"),
    "min_plus": ("float32", "float64", "int32", "int64"),
    "max_times": ("float32", "float64", "int64"),
    "log_sum_exp": ("float32", "float64"),
    "count": ("float32", "float64", "int64"),
}


def semiring_operands(shapes, dtype, seed, semiring):
    """``operands`` as a semiring wants them: integer-valued (exact sums) but for log_sum_exp,
    nonnegative for max_times."""
    return operands(
        shapes,
        dtype,
        seed,
        integer_valued=semiring != "log_sum_exp",
        nonnegative=semiring == "max_times",
    )


def cases(seed):
    """Every (semiring, dtype) on network ``seed``: (semiring, dtype, arrays, subs, out)."""
    shapes, subs, out = random_network(seed)
    for semiring in SEMIRINGS:
        for dtype in DTYPES[semiring]:
            yield semiring, dtype, semiring_operands(shapes, dtype, seed, semiring), subs, out


@pytest.mark.parametrize("seed", range(8))
def test_random_networks_every_semiring_and_dtype(pipeline_variant, seed):
    """All the semirings' networks on the same operands evaluated together (merging never
    mixes them), against the enumeration."""
    todo = list(cases(seed))
    results = tl.evaluate(*[lazy(a, s, o, sr) for sr, _, a, s, o in todo])
    for (semiring, dtype, arrays, subs, out), got in zip(todo, results):
        check(got, reference(arrays, subs, out, semiring), semiring, dtype)


# ---- sliced under memory_limit, on 1 and 2 threads ----------------------------------------


def regular_network(seed, n=12):
    """(shapes, subs, out): a spin-glass-like network on a random 3-regular graph (one vector
    per vertex, one matrix per edge; every vertex label a hyperedge of four operands), label
    sizes 2 or 3, 0-2 vertex labels in the output. Its intermediates outgrow its operands, so
    ``memory_limit`` slices it."""
    rng = np.random.default_rng(seed)
    graph = nx.random_regular_graph(3, n, seed=seed)
    sizes = {i: int(rng.choice((2, 3), p=(0.7, 0.3))) for i in range(n)}
    subs = [[i] for i in range(n)] + [list(e) for e in sorted(graph.edges())]
    out = [int(x) for x in rng.choice(n, size=int(rng.integers(0, 3)), replace=False)]
    return [tuple(sizes[label] for label in s) for s in subs], subs, out


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("semiring", SEMIRINGS)
@pytest.mark.parametrize("seed", range(3))
def test_sliced_networks(seed, semiring, threads):
    shapes, subs, out = regular_network(seed)
    nets = []
    # count networks compute in float64: other dtypes are cast in the graph, and those casts
    # are operands slicing cannot shrink (a limit below them all is refused), so float64 only
    dtypes = ("float64",) if semiring == "count" else DTYPES[semiring]
    for dtype in dtypes:
        arrays = semiring_operands(shapes, dtype, seed, semiring)
        nets.append((dtype, arrays, lazy(arrays, subs, out, semiring)))
    for dtype, arrays, y in nets:
        limit = slicing_limit(y)
        text = str(tl.explain(y, memory_limit=limit))
        assert f"({semiring} semiring), sliced over" in text, text
        (got,) = tl.evaluate(y, memory_limit=limit, threads=threads)
        assert sum(LAST_RUN.slices) > 1  # it ran sliced
        check(got, reference(arrays, subs, out, semiring), semiring, dtype)


def slicing_limit(*ys, fractions=(0.5, 0.6, 0.75, 0.9), **opts):
    """A ``memory_limit`` below ``y``'s unsliced peak that slices it (into more than one
    slice): the first of ``fractions`` of the peak that slicing can meet (what slicing cannot
    shrink, operands computed in the graph such as a count network's casts among them, may
    rule out the smaller ones)."""
    peak = tl.explain(*ys, **opts).after.peak_bytes
    for f in fractions:
        try:
            report = tl.explain(*ys, memory_limit=int(peak * f), **opts)
        except tl.MemoryLimitError:
            continue
        assert report.slicing and report.slicing[0]["slices"] > 1, str(report)
        return int(peak * f)
    raise AssertionError(f"no limit below the peak ({peak} bytes) slices {ys}")


# ---- gradients -------------------------------------------------------------------------------


def tied_gradients(arrays, subs, out, semiring, weights):
    """d sum(weights * result) / d operand as tenloom defines it for tied optima
    (graph/ops/semiring.py): each output entry's weight flows once to every operand entry
    that some optimal configuration of that entry uses."""
    _, _, (labels, grid) = reference(arrays, subs, out, semiring, with_argmax=True)
    best = reference(arrays, subs, out, semiring)
    vals, picks = entries(arrays, subs, labels, grid)
    total = np.sum([v.astype(np.float64) for v in vals], axis=0)
    pos = {label: k for k, label in enumerate(labels)}
    out_shape = np.shape(best)
    group = (
        np.ravel_multi_index(tuple(grid[pos[label]] for label in out), out_shape)
        if out
        else np.zeros(grid.shape[1], dtype=np.intp)
    )
    optimal = total == np.asarray(best, dtype=np.float64).reshape(-1)[group]
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    grads = []
    for a, p in zip(arrays, picks):
        g = np.zeros(np.shape(a))
        flat = np.ravel_multi_index(p, np.shape(a)) if p else np.zeros(grid.shape[1], np.intp)
        pairs = np.unique(np.stack([group[optimal], flat[optimal]]), axis=1)
        np.add.at(g.reshape(-1), pairs[1], w[pairs[0]])
        grads.append(g)
    return grads


def max_times_gradients(arrays, subs, out, weights):
    """d sum(weights * max-times contraction) / d operand (positive operands, no ties): at each
    output entry's optimal configuration, the product of the other operands' entries."""
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    _, arg, (labels, grid) = reference(arrays, subs, out, "max_times", with_argmax=True)
    vals, picks = entries(arrays, subs, labels, grid)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    grads = []
    for k, (a, p) in enumerate(zip(arrays, picks)):
        others = np.prod([v[arg] for j, v in enumerate(vals) if j != k], axis=0)
        g = np.zeros(a.shape)
        if p:
            np.add.at(g, tuple(np.asarray(ix)[arg] for ix in p), w * others)
        else:
            g.fill(np.sum(w * others))
        grads.append(g)
    return grads


def network_grads(arrays, subs, out, semiring, w, **opts):
    ts = [tl.asarray(a) for a in arrays]
    y = lazy(arrays, subs, out, semiring, ts)
    loss = tl.sum(y * tl.asarray(w.astype(y.dtype)))
    return tl.evaluate(*tl.grad(loss, ts), **opts)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("seed", range(6))
def test_log_sum_exp_gradients_are_the_marginals(seed, dtype):
    shapes, subs, out = random_network(seed)
    arrays = operands(shapes, dtype, seed, integer_valued=False)
    w = np.random.default_rng(seed).standard_normal(np.shape(reference(arrays, subs, out, "sum")))
    got = network_grads(arrays, subs, out, "log_sum_exp", w)
    for g, ref, a in zip(got, lse_gradients(arrays, subs, out, w), arrays):
        assert g.shape == a.shape and g.dtype == a.dtype
        assert_close(g, ref.astype(dtype), scale=np.abs(w).sum())


@pytest.mark.parametrize("seed", range(3))
def test_log_sum_exp_gradient_against_finite_differences(seed):
    from test_autodiff import check_grads

    shapes, subs, out = random_network(seed + 20, repeats=True)

    def f(*xs):
        return tl.einsum(
            *[x for t, s in zip(xs, subs) for x in (t, s)], out, semiring="log_sum_exp"
        )

    check_grads(f, shapes, seed=seed)


@pytest.mark.parametrize("semiring", ["max_plus", "min_plus"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("seed", range(6))
def test_tropical_gradients_are_the_argmax_indicators(seed, dtype, semiring):
    """Continuous random weights (no ties): the gradient of sum(w * result) puts each output
    entry's weight on the entries of its unique optimal configuration."""
    shapes, subs, out = random_network(seed)
    arrays = operands(shapes, dtype, seed, integer_valued=False)
    w = np.random.default_rng(seed).standard_normal(np.shape(reference(arrays, subs, out, "sum")))
    got = network_grads(arrays, subs, out, semiring, w)
    for g, ref, a in zip(got, tropical_gradients(arrays, subs, out, semiring, w), arrays):
        assert g.shape == a.shape and g.dtype == a.dtype
        assert_close(g, ref.astype(dtype), scale=np.abs(w).sum())


@pytest.mark.parametrize("seed", range(4))
def test_max_times_gradients(seed):
    shapes, subs, out = random_network(seed, repeats=False)
    arrays = [np.abs(a) + 0.5 for a in operands(shapes, "float64", seed, integer_valued=False)]
    w = np.random.default_rng(seed).standard_normal(np.shape(reference(arrays, subs, out, "sum")))
    got = network_grads(arrays, subs, out, "max_times", w)
    for g, ref in zip(got, max_times_gradients(arrays, subs, out, w)):
        assert_close(g, ref, scale=np.abs(ref).sum())


@pytest.mark.parametrize("semiring", ["max_plus", "min_plus"])
@pytest.mark.parametrize("seed", range(6))
def test_tied_tropical_gradients_mark_every_optimal_configuration(seed, semiring):
    """Integer-valued float64 weights (ties): each output entry's weight on the union of its
    optimal configurations' entries, as graph/ops/semiring.py documents (integer tensors
    have no gradient: tl.grad refuses them with a DTypeError, as for ordinary networks)."""
    shapes, subs, out = random_network(seed + 40)
    arrays = operands(shapes, "float64", seed, integer_valued=True)
    w = np.random.default_rng(seed).standard_normal(np.shape(reference(arrays, subs, out, "sum")))
    got = network_grads(arrays, subs, out, semiring, w)
    for g, ref in zip(got, tied_gradients(arrays, subs, out, semiring, w)):
        assert_close(g, ref, scale=np.abs(w).sum())


def lattice(n: int, m: int, d: int, seed: int = 0):
    """A closed n x m lattice of random float64 tensors of bond dimension d: (arrays, subs)."""
    rng = np.random.default_rng(seed)
    bonds: dict = {}
    arrays, subs = [], []
    for i in range(n):
        for j in range(m):
            s = [
                bonds.setdefault(tuple(sorted([(i, j), (i + di, j + dj)])), len(bonds))
                for di, dj in ((-1, 0), (1, 0), (0, -1), (0, 1))
                if 0 <= i + di < n and 0 <= j + dj < m
            ]
            arrays.append(rng.standard_normal((d,) * len(s)))
            subs.append(s)
    return arrays, subs


@pytest.mark.parametrize("semiring", ["max_plus", "min_plus", "log_sum_exp"])
def test_gradients_of_a_sliced_network(semiring):
    """A 3 x 3 lattice, D = 6 (too many configurations to enumerate: the unsliced gradient,
    checked against enumeration on the small networks above, is the reference), with a limit
    at 3/4 of the gradient program's unsliced peak."""
    arrays, subs = lattice(3, 3, 6, seed=3)
    ts = [tl.asarray(a) for a in arrays]
    y = lazy(arrays, subs, [], semiring, ts)
    plain = tl.evaluate(*tl.grad(y, ts))
    limit = int(0.75 * tl.explain(*tl.grad(y, ts)).after.peak_bytes)
    grads = tl.grad(y, ts, memory_limit=limit)
    report = tl.explain(*grads, memory_limit=limit)
    assert report.slicing and max(s["slices"] for s in report.slicing) > 1, str(report)
    for threads in (1, 2):
        got = tl.evaluate(*grads, memory_limit=limit, threads=threads)
        for g, p in zip(got, plain):
            np.testing.assert_allclose(g, p, rtol=1e-9, atol=1e-12)
    if semiring != "log_sum_exp":  # one configuration: one entry of each tensor marked
        assert all(np.sum(p) == 1.0 and set(np.unique(p)) <= {0.0, 1.0} for p in plain)


@pytest.mark.parametrize("mode", ["tl", "traced", "optimized"])
@pytest.mark.parametrize("semiring", ["max_plus", "min_plus", "max_times", "log_sum_exp"])
@pytest.mark.parametrize("seed", range(2))
def test_forward_mode_against_finite_differences_and_reverse(seed, semiring, mode):
    """tl.jvp (and jvp_nodes on the traced and optimized graphs) along a random direction
    against central differences and against the VJP (continuous random weights: the tropical
    networks are differentiable there; max_times on positive weights)."""
    from test_jvp import check_jvp

    shapes, subs, out = random_network(seed + 60)

    def f(*xs):
        if semiring == "max_times":
            xs = [tl.exp(x) for x in xs]  # positive entries
        return tl.einsum(*[x for t, s in zip(xs, subs) for x in (t, s)], out, semiring=semiring)

    check_jvp(f, shapes, seed=seed, mode=mode)


# ---- matmul and tensordot ------------------------------------------------------------------


@pytest.mark.parametrize("semiring", SEMIRINGS)
def test_matmul_and_tensordot_take_the_semiring(semiring):
    rng = np.random.default_rng(3)
    kind = {"max_times": (0, 4), "log_sum_exp": None}.get(semiring, (-3, 4))
    a, b = (
        (rng.standard_normal(s) if kind is None else rng.integers(*kind, size=s).astype(float))
        for s in ((2, 3, 4), (2, 4, 5))
    )
    got = tl.matmul(tl.asarray(a), tl.asarray(b), semiring=semiring).evaluate()
    check(got, reference([a, b], [[0, 1, 2], [0, 2, 3]], [0, 1, 3], semiring), semiring, "float64")
    got = tl.tensordot(tl.asarray(a), tl.asarray(b), axes=([0, 2], [0, 1]), semiring=semiring)
    check(
        got.evaluate(),
        reference([a, b], [[0, 1, 2], [0, 2, 3]], [1, 3], semiring),
        semiring,
        "float64",
    )
    v = a[0, 0]  # matrix-vector: (4,) . (2, 4, 5) -> (2, 5)
    got = tl.matmul(tl.asarray(v), tl.asarray(b), semiring=semiring).evaluate()
    check(got, reference([v, b], [[2], [0, 2, 3]], [0, 3], semiring), semiring, "float64")


def test_string_subscripts_and_sublists_agree():
    rng = np.random.default_rng(4)
    a, b, c = (rng.standard_normal(s) for s in ((2, 3), (3, 4), (4, 2)))
    s = tl.einsum("ij,jk,ki->j", a, b, c, semiring="max_plus").evaluate()
    i = tl.einsum(a, [7, -1], b, [-1, 100], c, [100, 7], [-1], semiring="max_plus").evaluate()
    np.testing.assert_array_equal(s, i)
    check(s, reference([a, b, c], [[0, 1], [1, 2], [2, 0]], [1], "max_plus"), "max_plus", "float64")


def test_count_of_a_network_with_minus_infinity():
    """-inf entries are no configuration: an output entry all of whose configurations are
    -inf is (-inf, 0), and the others count only the finite optima."""
    a = np.array([[0.0, -np.inf], [-np.inf, -np.inf]])
    b = np.array([[1.0, 1.0], [-np.inf, 0.0]])
    got = tl.einsum("ij,jk->ik", a, b, semiring="count").evaluate()
    ref = reference([a, b], [[0, 1], [1, 2]], [0, 2], "count")
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got[1], [[-np.inf, 0.0], [-np.inf, 0.0]])


# ---- typed errors -----------------------------------------------------------------------------


def test_errors():
    a, b = tl.asarray(np.ones((2, 3))), tl.asarray(np.ones((3, 4)))
    for bad in ("maxplus", "tropical", "sum", 3, None.__class__):
        with pytest.raises(tl.OptionError, match=r"einsum: unknown semiring .*'max_plus'"):
            tl.einsum("ij,jk->ik", a, b, semiring=bad)
    with pytest.raises(tl.OptionError, match="matmul: unknown semiring 'tropical'"):
        tl.matmul(a, b, semiring="tropical")
    with pytest.raises(tl.OptionError, match="tensordot: unknown semiring 'MAX_PLUS'"):
        tl.tensordot(a, b, 1, semiring="MAX_PLUS")
    for semiring in SEMIRINGS:
        with pytest.raises(tl.DTypeError, match=rf"semiring={semiring!r}.*complex128"):
            tl.einsum("ij,jk->ik", a * 1j, b, semiring=semiring)
        with pytest.raises(tl.DTypeError, match=rf"semiring={semiring!r}.*operand 0 is bool"):
            tl.einsum("ij,jk->ik", a > 0, b > 0, semiring=semiring)
        # one bool operand among real ones is refused too (not promoted away)
        with pytest.raises(tl.DTypeError, match=rf"semiring={semiring!r}.*operand 1 is bool"):
            tl.einsum("ij,jk->ik", a, b > 0, semiring=semiring)
    with pytest.raises(tl.DTypeError, match="complex64"):
        tl.matmul(np.ones((2, 2), np.complex64), np.ones((2, 2), np.float32), semiring="count")
    with pytest.raises(tl.DTypeError, match="uint64"):
        tl.einsum(
            "ij,jk->ik", np.ones((2, 3), np.uint64), np.ones((3, 4), np.uint64), semiring="max_plus"
        )
    # shapes: the op, the operand and the sizes
    with pytest.raises(tl.ShapeError, match=r"size of label 'j' for operand 1 \(2\).*\(3\)"):
        tl.einsum("ij,jk->ik", a, a, semiring="max_plus")
    with pytest.raises(tl.ShapeError, match="matmul"):
        tl.matmul(a, a, semiring="min_plus")
    with pytest.raises(tl.ShapeError, match="tensordot"):
        tl.tensordot(a, a, ([0], [1]), semiring="min_plus")
    with pytest.raises(tl.ShapeError, match="output label 0 repeated"):
        tl.einsum(a, [0, 1], b, [1, 2], [0, 0], semiring="max_plus")
    # the keyword on ops that do not take it
    for op, args in ((tl.dot, (a, b)), (tl.outer, (a, b)), (tl.sum, (a,)), (tl.trace, (a,))):
        with pytest.raises(TypeError, match="semiring"):
            op(*args, semiring="max_plus")
    # no gradient for counts, no forward mode
    y = tl.einsum("ij,jk->ik", a, b, semiring="count")
    with pytest.raises(tl.DTypeError, match=r"semiring='count'\) has no gradient"):
        tl.grad(tl.sum(y), [a])
    k = tl.asarray(np.ones((2, 3), np.int64))
    with pytest.raises(tl.DTypeError, match="grad: cannot differentiate.*int64"):
        tl.grad(tl.sum(tl.einsum("ij,jk->ik", k, k.T, semiring="max_plus")), [k])
    x = tl.placeholder((2, 3), "float64", name="x")
    with pytest.raises(tl.DTypeError, match=r"jvp: einsum\(semiring='count'\) has no derivative"):
        tl.jvp(tl.einsum("ij,jk->ik", x, b, semiring="count"), [x], [tl.asarray(np.ones((2, 3)))])


# ---- the examples: spin glass and maximum independent set --------------------------------


def quiet(main, argv):
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()) as out:
        result = main(argv)
    return result, out.getvalue()


@pytest.mark.parametrize(
    ("n", "seed", "dtype"),
    [(12, 0, "float64"), (16, 1, "float32"), (18, 2, "float64"), (20, 3, "float32")],
)
def test_spin_glass_pm_j_ground_state_and_degeneracy(n, seed, dtype):
    """+-J couplings (tied ground states): the energy, the degeneracy (count semiring) and the
    energy of the configuration read from the gradient against enumeration."""
    out, text = quiet(spin_glass.main, ["--n", str(n), "--seed", str(seed), "--dtype", dtype])
    assert out["brute_degeneracy"] >= 2  # the global spin flip at least
    assert out["energy"] == out["brute_energy"] == -out["max_neg"]
    assert out["degeneracy"] == out["brute_degeneracy"]
    assert out["one_hot"] and out["config_energy"] == out["brute_energy"]
    assert f"degeneracy = {out['brute_degeneracy']}" in text.splitlines()[-1]


def brute_spins(edges, J, h):  # noqa: N803
    """All 2^n configurations' energies (s = 1 - 2 * bit) and the optimal configuration."""
    n = len(h)
    s = 1.0 - 2.0 * ((np.arange(1 << n)[:, None] >> np.arange(n)) & 1)
    e = np.asarray(edges)
    energies = (s[:, e[:, 0]] * s[:, e[:, 1]]) @ J + s @ h
    return energies, s[np.argmin(energies)]


@pytest.mark.parametrize("seed", range(3))
def test_spin_glass_continuous_couplings_optimum_from_the_gradient(seed):
    """Gaussian couplings and fields (no ties, no flip symmetry): tl.grad of the min-plus
    energy with respect to the vertex tensors is the one-hot of the brute-force argmin,
    also under slicing; max_plus of -H gives the same energy."""
    edges, J, h = spin_glass.random_glass(16, seed, couplings="gauss", field=0.5)  # noqa: N806
    energies, best = brute_spins(edges, J, h)
    vertex, edge, subs = spin_glass.network(edges, J, h)
    vs = [tl.asarray(v) for v in vertex]
    ops = [x for t, s in zip(vs + [tl.asarray(e) for e in edge], subs) for x in (t, s)]
    e0 = tl.einsum(*ops, [], semiring="min_plus")
    neg = [x if isinstance(x, list) else -x for x in ops]
    top = tl.einsum(*neg, [], semiring="max_plus")
    limit = slicing_limit(e0)
    value, neg_value, *g = tl.evaluate(e0, top, *tl.grad(e0, vs))
    (value_sliced,) = tl.evaluate(e0, memory_limit=limit)
    np.testing.assert_allclose([value, value_sliced, -neg_value], energies.min(), rtol=1e-12)
    np.testing.assert_array_equal(np.stack(g), np.stack([(best > 0), (best < 0)], axis=1))
    out, _ = quiet(
        spin_glass.main,
        ["--n", "16", "--seed", str(seed), "--couplings", "gauss", "--field", "0.5"],
    )
    assert out["brute_degeneracy"] == 1 and out["one_hot"]
    np.testing.assert_array_equal(out["spins"], best)


@pytest.mark.parametrize("seed", range(2))
def test_spin_glass_real_couplings_without_fields(seed):
    """The global flip pairs every state (degeneracy 2, counted exactly); the example clamps
    s_0 = +1 and reads one of the pair from the gradient."""
    out, _ = quiet(spin_glass.main, ["--n", "16", "--seed", str(seed), "--couplings", "gauss"])
    assert out["degeneracy"] == out["brute_degeneracy"] == 2
    assert out["energy"] == pytest.approx(out["brute_energy"], rel=1e-12)
    assert out["one_hot"] and out["spins"][0] == 1.0
    assert out["config_energy"] == pytest.approx(out["brute_energy"], rel=1e-12)


@pytest.mark.parametrize(
    ("kind", "n", "seed"),
    [("gnp", 14, 0), ("gnp", 16, 1), ("gnp", 18, 2), ("regular", 16, 3), ("regular", 20, 4)],
)
def test_max_independent_set_against_networkx_and_enumeration(kind, n, seed):
    out, text = quiet(
        max_independent_set.main,
        ["--graph", kind, "--n", str(n), "--seed", str(seed), "--p", "0.25"],
    )
    graph = max_independent_set.random_graph(n, seed, kind, 0.25)
    size, count = independent_sets_by_enumeration(graph)
    assert out["reference"] == (size, count)
    assert (out["size"], out["count"]) == (size, count)
    assert out["independent"] and len(out["set"]) == size
    assert "networkx:" in text.splitlines()[-1]


def test_max_independent_set_sliced():
    out, _ = quiet(max_independent_set.main, ["--n", "24", "--seed", "5", "--memory-limit", "300"])
    assert out["slices"] > 1
    assert (out["size"], out["count"]) == out["reference"]
    assert out["independent"] and len(out["set"]) == out["size"]


@pytest.mark.parametrize("module", [spin_glass, max_independent_set], ids=lambda m: m.__name__)
def test_examples_header_and_command_line(module):
    doc = module.__doc__
    assert f"python examples/{module.__name__}.py --small" in doc and "Prints" in doc
    run = subprocess.run(
        [sys.executable, "-W", "ignore", f"examples/{module.__name__}.py", "--small"],
        cwd=EXAMPLES.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    last = {"spin_glass": "brute force: E0 =", "max_independent_set": "networkx: size ="}
    assert last[module.__name__] in run.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_benchmark_peer_contracts_right(dtype):
    """benchmarks/semiring_network.py's peer (tropical_gemm pairwise over a path, batched or
    2-D calls, or NumPy for small products) against enumeration, so that its times compare
    like with like."""
    pytest.importorskip("tropical_gemm")
    import opt_einsum as oe

    sys.path.insert(0, str(EXAMPLES.parent / "benchmarks"))
    import semiring_network as bench
    import tropical_gemm

    gemm = tropical_gemm.maxplus_matmul_2d if dtype == "float32" else None
    for seed in range(12):
        shapes, subs, out = random_network(seed, repeats=False)
        arrays = operands(shapes, dtype, seed, integer_valued=False)
        if len(arrays) < 2:
            continue
        args = [x for a, s in zip(arrays, subs) for x in (a, s)]
        path = oe.contract_path(*args, out, optimize="greedy")[0]
        ref = reference(arrays, subs, out, "max_plus").astype(dtype)
        inputs = [tuple(s) for s in subs]
        for kw in ({"gemm": gemm}, {"small_gemm": 64}):
            got = bench.pairwise(arrays, inputs, tuple(out), path, **kw)
            assert_close(np.asarray(got, dtype=dtype), ref)
    edges, J, h = spin_glass.random_glass(16, 2, field=1.0)  # noqa: N806
    h = np.round(h)
    vertex, edge, subs = spin_glass.network(edges, J, h, dtype, sign=-1.0)
    inputs = [tuple(s) for s in subs]
    path, _ = bench.contraction_path(inputs, (), {i: 2 for i in range(16)}, repeats=2)
    assert (
        -float(bench.pairwise(vertex + edge, inputs, (), path))
        == spin_glass.brute_force(edges, J, h)[0]
    )
