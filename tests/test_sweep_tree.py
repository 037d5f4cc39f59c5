"""A derivative's pre-pass picks its forward tree counting the sweep it will carry
(passes/contraction_order.py ``_auto_path``, Options.sweep_madds, tenloom/autodiff.py
SWEEP_MADDS): each forward contraction has two cotangent (or tangent) contractions of its own
size, which the forward's copies do not predict."""

from __future__ import annotations

import numpy as np
import pytest
from cotengra.utils import lattice_equation
from tenloom.passes import contraction_order as co
from tenloom.passes.cost import graph_flops, layout_cost
from tenloom.passes.options import Options
from tenloom.passes.paths import path_cost
from tenloom.runtime import session

import tenloom as tl
import tenloom.autodiff as ad


def _lattice(n: int, d: int):
    inputs, output, _shapes, sd = lattice_equation([n, n], d_min=d, d_max=d, seed=1)
    return [tuple(t) for t in inputs], tuple(output), dict(sd)


@pytest.mark.parametrize("sweep", [0.0, 2.0])
def test_auto_picks_the_least_layout_cost_plus_the_sweeps_madds(sweep):
    terms, out, sizes = _lattice(6, 3)
    best, others = co._auto_path(terms, out, sizes, effort=3.0, sweep=sweep)
    assert others, "the search gave one tree: nothing was chosen"

    def cost(p):
        return layout_cost(terms, out, sizes, p) + sweep * path_cost(terms, out, sizes, p)

    assert cost(best) <= min(cost(p) for p in others)


def test_the_sweep_is_part_of_the_search_key():
    plain = co._search_key(Options(), False)[1]
    pre = co._search_key(Options(sweep_madds=2.0), False)[1]
    assert plain != pre and plain == ("auto", 1.0, False)  # a value's key is unchanged
    assert Options().pass_key != Options(sweep_madds=2.0).pass_key


def _value_and_grad_flops(n: int, d: int) -> float:
    inputs, output, _shapes, sd = lattice_equation([n, n], d_min=d, d_max=d, seed=1)
    rng = np.random.default_rng(1)
    ts = [tl.asarray(rng.uniform(0.5, 1.0, [sd[i] for i in t])) for t in inputs]
    labels: dict = {}
    args: list = []
    for t, x in zip(inputs, ts):
        args += [x, [labels.setdefault(c, len(labels)) for c in t]]
    loss = tl.einsum(*args, [labels[c] for c in output])
    grads = tl.grad(loss, ts, cache_dir=False)
    graph = session.build_graph([loss, *grads])
    return graph_flops(session.optimize(graph, Options(cache_dir=False)).graph)


def test_lattice_10x10_value_and_gradient_takes_the_cheaper_tree(monkeypatch):
    """Measured when this was built: 2.75e10 flops with the tree chosen by the forward alone,
    2.06e10 with the sweep counted (the effort-1 search's tree: 2.49e10)."""
    with_sweep = _value_and_grad_flops(10, 4)
    monkeypatch.setattr(ad, "SWEEP_MADDS", 0.0)
    without = _value_and_grad_flops(10, 4)
    assert with_sweep < 0.9 * without, (with_sweep, without)
