"""A value asked for together with its derivative takes the derivative's forward (runtime/
session.py ``shared_forwards``): one forward runs, along the tree the pre-pass chose (searched
at tenloom/autodiff.py ``SWEEP_EFFORT`` x evaluate's effort), and the value is the same number
as the value evaluated alone (up to the order of the sums)."""

from __future__ import annotations

import numpy as np
import pytest
from tenloom.passes import contraction_order as co

import tenloom as tl


def _lattice(n=4, d=3, seed=0, dtype="float64"):
    import cotengra as ctg

    inputs, output, shapes, _ = ctg.utils.lattice_equation([n, n], d_min=d, d_max=d, seed=seed)
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    labels: dict = {}
    args, ts = [], []
    for term, a in zip(inputs, arrays):
        t = tl.asarray(a)
        ts.append(t)
        args += [t, [labels.setdefault(x, len(labels)) for x in term]]
    args.append([labels[x] for x in output])
    return tl.einsum(*args), ts, (inputs, output, arrays)


def _reference(spec):
    inputs, output, arrays = spec
    eq = ",".join("".join(t) for t in inputs) + "->" + "".join(output)
    return np.einsum(eq, *arrays, optimize="greedy")


def test_value_with_its_gradient_runs_one_forward():
    # 8x8 D=6: evaluate's own tree (effort 1) and the pre-pass's (effort 3) differ, so a value
    # that kept its own graph would add a whole second forward
    value, ts, spec = _lattice(n=8, d=6, seed=1, dtype="float32")
    grads = tl.grad(value, ts)
    forward = tl.explain(value).after.flops
    both = tl.explain(value, *grads).after.flops
    alone = tl.explain(*grads).after.flops
    assert both - alone < 0.01 * forward  # at most the root's own step
    from tenloom.runtime.session import shared_forwards

    shared = shared_forwards((value.node, grads[0].node))
    assert shared[0] is not value.node and shared[1] is grads[0].node
    loss, gs = tl.value_and_grad(value, ts)
    assert tl.explain(loss, *gs).after.flops - tl.explain(*gs).after.flops < 0.01 * forward


def test_the_shared_value_is_the_value():
    value, ts, spec = _lattice()
    grads = tl.grad(value, ts)
    out = tl.evaluate(value, *grads)
    np.testing.assert_allclose(out[0], value.evaluate(), rtol=1e-12)
    np.testing.assert_allclose(out[0], _reference(spec), rtol=1e-10)


def test_the_value_alone_and_a_derived_expression_keep_their_own_graph():
    value, ts, spec = _lattice(seed=1)
    before = tl.explain(value).after.flops
    grads = tl.grad(value, ts)
    assert tl.explain(value).after.flops == before  # no derivative asked for: unchanged
    doubled = [g * 2.0 for g in grads]  # not the derivative's own node: nothing shared
    np.testing.assert_allclose(
        tl.evaluate(value, *doubled)[1], 2.0 * tl.evaluate(*grads)[0], rtol=1e-12
    )


def test_forward_mode_shares_the_forward_too():
    value, ts, _ = _lattice(n=8, d=6, seed=1, dtype="float32")
    tangents = [tl.asarray(np.ones(t.shape, np.float32)) for t in ts]
    tan = tl.jvp(value, ts, tangents)
    forward = tl.explain(value).after.flops
    assert tl.explain(value, tan).after.flops - tl.explain(tan).after.flops < 0.01 * forward
    small, sts, _ = _lattice(seed=2)
    stan = tl.jvp(small, sts, [tl.asarray(np.ones(t.shape)) for t in sts])
    np.testing.assert_allclose(tl.evaluate(small, stan)[0], small.evaluate(), rtol=1e-12)


def test_the_pre_pass_searches_at_sweep_effort(monkeypatch):
    from tenloom.autodiff import SWEEP_EFFORT

    seen = []
    real = co._auto_trees

    def spy(terms, out, sizes, effort, complex_, progress):
        seen.append(effort)
        return real(terms, out, sizes, effort, complex_, progress)

    monkeypatch.setattr(co, "_auto_trees", spy)
    value, ts, _ = _lattice(n=5, seed=3)
    tl.grad(value, ts, cache_dir=False)
    assert seen and seen[0] == pytest.approx(SWEEP_EFFORT)


def test_a_compiled_value_with_its_gradient_shares_the_forward():
    import cotengra as ctg

    inputs, output, shapes, _ = ctg.utils.lattice_equation([4, 4], d_min=3, d_max=3, seed=4)
    rng = np.random.default_rng(4)
    arrays = [rng.standard_normal(s) for s in shapes]
    phs = [tl.placeholder(s, "float64") for s in shapes]
    labels: dict = {}
    args = []
    for term, p in zip(inputs, phs):
        args += [p, [labels.setdefault(x, len(labels)) for x in term]]
    value = tl.einsum(*args, [labels[x] for x in output])
    grads = tl.grad(value, phs)
    plan = tl.compile([value, *grads], phs)
    traced = plan.graph.outputs
    assert traced[0] is not value.node and traced[1] is grads[0].node
    out = plan(*arrays)
    eq = ",".join("".join(t) for t in inputs) + "->" + "".join(output)
    np.testing.assert_allclose(out[0], np.einsum(eq, *arrays, optimize="greedy"), rtol=1e-10)


def test_the_traced_views_show_the_graph_as_traced():
    value, ts, _ = _lattice(seed=5)
    grads = tl.grad(value, ts)

    def networks(text):  # the einsum steps, without node numbers and source lines
        return {
            ln.split(" = ", 1)[1].split("#")[0].strip()
            for ln in text.splitlines()
            if "einsum[" in ln
        }

    alone = networks(tl.dump(value, optimized=False))
    assert len(alone) == 1 and networks(tl.dump(value, *grads, optimized=False)) >= alone
    g = tl.to_networkx(value, *grads)
    assert any(len(list(g.predecessors(n))) == len(ts) for n in g.nodes)
