"""The order search's cheap pieces against what they stand for (passes/contraction_order.py):
greedy's path without a cotengra tree, the step order cotengra's tree gives a path, and the
multiply-adds of a path without a cotengra tree (issue 22: a TEBD energy's first call)."""

from __future__ import annotations

import random

import cotengra as ctg
import pytest
from tenloom.graph.ops.contract import pairwise_madds
from tenloom.graph.ops.sliced import path_steps
from tenloom.passes import contraction_order as co
from tenloom.passes.paths import as_path, greedy_path, path_cost, tree_order


def networks():
    for seed in range(24):
        i, o, _, sd = ctg.utils.rand_equation(
            5 + seed, 3, n_out=2, n_hyper_in=1, n_hyper_out=seed % 2, d_min=2, d_max=4, seed=seed
        )
        yield [tuple(t) for t in i], tuple(o), dict(sd)
    for n in (16, 30, 44):
        i, o, _, sd = ctg.utils.randreg_equation(n, 3, d_min=2, d_max=5, seed=n)
        yield [tuple(t) for t in i], tuple(o), dict(sd)
    i, o, _, sd = ctg.utils.lattice_equation([4, 5], d_min=3, d_max=3, seed=2)
    yield [tuple(t) for t in i], tuple(o), dict(sd)


def random_paths(n, rng, k=4):
    for _ in range(k):
        alive, path, fresh = list(range(n)), [], n
        while len(alive) > 1:
            a, b = rng.sample(alive, 2)
            alive.remove(a)
            alive.remove(b)
            alive.append(fresh)
            path.append((a, b))
            fresh += 1
        yield path


def test_tree_order_is_the_step_order_of_cotengras_tree():
    rng = random.Random(0)
    checked = 0
    for terms, out, sizes in networks():
        n = len(terms)
        paths = [
            ctg.array_contract_tree(terms, out, sizes, optimize="random-greedy").get_ssa_path()
        ]
        paths += list(random_paths(n, rng))
        for p in paths:
            tree = ctg.ContractionTree.from_path(terms, out, sizes, ssa_path=p)
            assert tree_order(p, n) == tuple(map(tuple, tree.get_ssa_path()))
            checked += 1
    assert checked > 100
    assert tree_order((), 1) == ()


def test_greedy_path_is_cotengras_greedy_preset():
    for terms, out, sizes in networks():
        found = greedy_path(terms, out, sizes)
        tree = ctg.array_contract_tree(terms, out, sizes, optimize="greedy")
        assert as_path(found) == tuple(map(tuple, tree.get_ssa_path()))


def test_greedy_path_with_a_lone_index_is_the_presets_tree():
    # cotengra's greedy sums the lone index 'x' on its own first: a one-operand step, which an
    # SSA path of pairs cannot hold; the preset's tree is returned
    terms, out, sizes = (
        [("a", "x"), ("a", "b"), ("b", "c")],
        ("c",),
        {"a": 2, "b": 3, "c": 4, "x": 5},
    )
    found = greedy_path(terms, out, sizes)
    tree = ctg.array_contract_tree(terms, out, sizes, optimize="greedy")
    assert as_path(found) == tuple(map(tuple, tree.get_ssa_path()))


@pytest.mark.parametrize("kind", ["greedy", "random", "chain"])
def test_path_cost_is_the_sum_over_path_steps_and_cotengras_cost(kind):
    rng = random.Random(1)
    for terms, out, sizes in networks():
        n = len(terms)
        if kind == "greedy":
            path = as_path(greedy_path(terms, out, sizes))
        elif kind == "random":
            path = next(random_paths(n, rng, 1))
        else:
            path = co._left_to_right(n)
        steps = path_steps(terms, out, path)
        expected = float(sum(pairwise_madds(a, b, keep, sizes) for _, _, a, b, keep in steps))
        assert path_cost(terms, out, sizes, path) == expected
        tree = ctg.ContractionTree.from_path(terms, out, sizes, ssa_path=path)
        assert path_cost(terms, out, sizes, path) == float(tree.contraction_cost())


def test_path_cost_with_repeated_labels_in_a_term():
    terms, out = [(0, 0, 1), (1, 2), (2, 3, 3), (3, 4)], (4,)
    sizes = {0: 2, 1: 3, 2: 4, 3: 5, 4: 6}
    for path in ([(0, 1), (2, 3), (4, 5)], [(0, 3), (1, 2), (4, 5)], [(1, 2), (0, 4), (3, 5)]):
        steps = path_steps(terms, out, path)
        expected = float(sum(pairwise_madds(a, b, keep, sizes) for _, _, a, b, keep in steps))
        assert path_cost(terms, out, sizes, path) == expected


def greedy_networks(count: int):
    """Random networks of every shape cotengra makes, sizes 1-6 (many ties among scores)."""
    rng = random.Random(0)
    for seed in range(count):
        kind = seed % 6
        if kind == 0:
            i, o, _, sd = ctg.utils.rand_equation(
                rng.randint(3, 40),
                rng.randint(2, 4),
                n_out=rng.randint(0, 3),
                n_hyper_in=rng.randint(0, 2),
                n_hyper_out=rng.randint(0, 1),
                d_min=1,
                d_max=4,
                seed=seed,
            )
        elif kind == 1:
            n = rng.randrange(4, 60, 2)
            i, o, _, sd = ctg.utils.randreg_equation(n, 3, d_min=2, d_max=6, seed=seed)
        elif kind == 2:
            shape = [rng.randint(2, 6), rng.randint(2, 6)]
            i, o, _, sd = ctg.utils.lattice_equation(shape, d_min=1, d_max=5, seed=seed)
        elif kind == 3:
            n, deg = rng.randint(3, 30), rng.randint(2, 5)
            i, o, _, sd = ctg.utils.rand_equation(n, deg, n_out=2, d_min=2, d_max=2, seed=seed)
        elif kind == 4:
            n = rng.randrange(60, 200, 2)
            deg = rng.choice([3, 4])
            i, o, _, sd = ctg.utils.randreg_equation(n, deg, d_min=2, d_max=2, seed=seed)
        else:
            n = rng.randint(3, 40)
            i, o, _, sd = ctg.utils.tree_equation(n, d_min=1, d_max=3, n_outer=1, seed=seed)
        yield [tuple(t) for t in i], tuple(o), dict(sd)


def test_fast_greedy_is_cotengras_greedy_step_for_step():
    from cotengra.presets import greedy_optimize
    from tenloom.passes.paths import _plain_greedy, canonical, fast_greedy

    assert _plain_greedy(greedy_optimize)  # cotengrust is not installed here: the Python greedy
    applied = 0
    for terms, out, sizes in greedy_networks(600):
        t, o, s = canonical(terms, out, sizes)
        found = fast_greedy(t, o, dict(s))
        if found is None:
            continue
        applied += 1
        assert found == [tuple(p) for p in greedy_optimize.ssa_path(t, o, dict(s))]
    assert applied > 200


@pytest.mark.parametrize(
    "terms, out",
    [
        ([("a", "x"), ("a", "b"), ("b", "c")], ("c",)),  # a lone index
        ([("a", "b"), ("a", "b"), ("b", "c")], ("c",)),  # a Hadamard product
        ([("a", "a", "b"), ("b", "c"), ("c", "d")], ("d",)),  # a diagonal
        ([("a", "b"), ("b", "c", "a"), ("c", "a")], ()),  # a label on every tensor
        ([("a", "b"), ("a", "b", "c"), ("d", "e"), ("d", "e", "f")], ("c", "f")),  # two pieces
    ],
)
def test_fast_greedy_leaves_simplifications_to_cotengra(terms, out):
    from tenloom.passes.paths import canonical, fast_greedy

    sizes = dict.fromkeys("abcdefx", 3)
    t, o, s = canonical(terms, out, sizes)
    assert fast_greedy(t, o, dict(s)) is None
    found = greedy_path(terms, out, sizes)  # cotengra's own path
    tree = ctg.array_contract_tree(terms, out, sizes, optimize="greedy")
    assert as_path(found) == tuple(map(tuple, tree.get_ssa_path()))
