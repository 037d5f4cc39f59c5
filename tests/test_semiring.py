"""SEMIRING_EINSUM's rules and how the passes treat it (graph/ops/semiring.py): dtypes and
errors, matmul/tensordot, merging only within one semiring, ordering, slicing, the gradient
rules against brute force, explain, save/load. The kernels have tests/test_semiring_kernels.py;
the examples and random networks tests/test_semiring_examples.py."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from helpers import device_params
from tenloom.graph.ops import Op
from tenloom.graph.ops.semiring import semiring_dtype, semiring_ref

import tenloom as tl

RINGS = ["max_plus", "min_plus", "max_times", "log_sum_exp", "count"]


def brute(arrays, terms, out, semiring):
    """Every configuration of every label at once (tiny networks only)."""
    labels = sorted({lab for t in terms for lab in t})
    sizes = {}
    for a, t in zip(arrays, terms):
        sizes.update(zip(t, a.shape))
    shape = tuple(sizes[lab] for lab in labels)
    total = None
    for a, t in zip(arrays, terms):
        idx = np.ix_(*[np.arange(sizes[lab]) for lab in labels])
        v = a[tuple(idx[labels.index(lab)] for lab in t)]
        v = np.broadcast_to(v, shape)
        if total is None:
            total = v.astype(np.float64)
        else:
            total = total * v if semiring == "max_times" else total + v
    rest = tuple(i for i, lab in enumerate(labels) if lab not in out)
    perm = [labels.index(lab) for lab in out]
    if semiring in ("max_plus", "max_times"):
        r = total.max(axis=rest)
    elif semiring == "min_plus":
        r = total.min(axis=rest)
    elif semiring == "log_sum_exp":
        r = np.log(np.exp(total).sum(axis=rest))
    else:
        m = total.max(axis=rest, keepdims=True)
        c = (total == m).sum(axis=rest)
        kept = [lab for lab in labels if lab in out]
        order = [kept.index(lab) for lab in out]
        return np.stack([np.squeeze(m, rest).transpose(order), c.transpose(order)], -1)
    kept = [lab for lab in labels if lab in out]
    return r.transpose([kept.index(lab) for lab in out]) if perm else r


def ring_inputs(rng, semiring, shapes, dtype=np.float64):
    if semiring == "count":  # integer weights: ties, so counts above 1
        return [rng.integers(-2, 3, s).astype(dtype) for s in shapes]
    if semiring == "max_times":
        return [rng.random(s).astype(dtype) for s in shapes]
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


NETWORK = ([(0, 1), (1, 2), (2, 3), (3, 0), (1, 3)], (0, 2))
SIZES = {0: 3, 1: 4, 2: 2, 3: 5}


def network_args(arrays, terms, out):
    args = []
    for a, t in zip(arrays, terms):
        args += [a, list(t)]
    return [*args, list(out)]


@pytest.mark.parametrize("semiring", RINGS)
def test_network_matches_brute_force_ordered_and_left_to_right(semiring):
    rng = np.random.default_rng(0)
    terms, out = NETWORK
    arrays = ring_inputs(rng, semiring, [tuple(SIZES[lab] for lab in t) for t in terms])
    want = brute(arrays, terms, out, semiring)
    t = tl.einsum(*network_args(arrays, terms, out), semiring=semiring)
    for opts in ({}, {"optimize": False}, {"passes": ()}, {"threads": 2}):
        got = t.evaluate(**opts)
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=str(opts))
    np.testing.assert_allclose(semiring_ref(arrays, terms, out, semiring), want, rtol=1e-12)


@pytest.mark.parametrize("semiring", RINGS)
def test_sliced_network_equals_unsliced_and_explain_names_the_semiring(semiring):
    rng = np.random.default_rng(1)
    n, d = 6, 6
    terms = [(i, (i + 1) % n) for i in range(n)] + [(0, 3)]
    arrays = ring_inputs(rng, semiring, [(d, d)] * len(terms))
    t = tl.einsum(*network_args(arrays, terms, ()), semiring=semiring)
    want = t.evaluate()
    np.testing.assert_allclose(want, brute(arrays, terms, (), semiring), rtol=1e-12)
    limit = 1200 if semiring == "count" else 600
    report = str(tl.explain(t, memory_limit=limit))
    assert f"({semiring} semiring), sliced over" in report
    for threads in (1, 2):
        got = t.evaluate(memory_limit=limit, threads=threads)
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_sliced_output_indices_combine_in_place():
    rng = np.random.default_rng(2)
    terms = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)]
    arrays = ring_inputs(rng, "max_plus", [(8, 8)] * 5)
    t = tl.einsum(*network_args(arrays, terms, (0, 2)), semiring="max_plus")
    got = t.evaluate(memory_limit=1200)
    np.testing.assert_allclose(got, brute(arrays, terms, (0, 2), "max_plus"))
    assert "sliced over" in str(tl.explain(t, memory_limit=1200))


def test_merging_stays_within_one_semiring():
    rng = np.random.default_rng(3)
    a, b, c = (rng.standard_normal((4, 4)) for _ in range(3))
    ab = tl.matmul(a, b, semiring="max_plus")
    same = tl.einsum("ij,ji->", ab, c, semiring="max_plus")
    assert "merged=1" in str(tl.explain(same))
    np.testing.assert_allclose(same.evaluate(), (a[:, :, None] + b[None] + c.T[:, None]).max())
    other = tl.einsum("ij,ji->", ab, c, semiring="min_plus")
    assert "merged=1" not in str(tl.explain(other))
    want = ((a[:, :, None] + b[None]).max(1) + c.T).min()
    np.testing.assert_allclose(other.evaluate(), want)
    plain = tl.einsum("ij,ji->", tl.einsum("ij,jk->ik", a, b), c, semiring="max_plus")
    assert "merged=1" not in str(tl.explain(plain))
    np.testing.assert_allclose(plain.evaluate(), (a @ b + c.T).max())
    ordinary = tl.einsum("ij,ji->", ab, c)  # a semiring result in an ordinary einsum
    np.testing.assert_allclose(
        ordinary.evaluate(), np.einsum("ij,ji->", (a[:, :, None] + b[None]).max(1), c)
    )


def test_matmul_and_tensordot_semirings_broadcast_like_numpy():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 1, 3, 4))
    b = rng.standard_normal((5, 4, 6))
    got = tl.matmul(a, b, semiring="min_plus").evaluate()
    want = (a[..., :, :, None] + b[None, :, None, :, :]).min(-2)
    assert got.shape == np.matmul(a, b).shape == want.shape
    np.testing.assert_allclose(got, want)
    v = rng.standard_normal(4)
    np.testing.assert_allclose(
        tl.matmul(v, b, semiring="max_plus").evaluate(), (v[None, :, None] + b).max(1)
    )
    np.testing.assert_allclose(tl.matmul(a, v, semiring="max_plus").evaluate(), (a + v).max(-1))
    x, y = rng.standard_normal((3, 4, 5)), rng.standard_normal((5, 4, 2))
    got = tl.tensordot(x, y, axes=([1, 2], [1, 0]), semiring="log_sum_exp").evaluate()
    want = np.log(np.exp(x[:, :, :, None] + y.transpose(1, 0, 2)[None]).sum(axis=(1, 2)))
    np.testing.assert_allclose(got, want)
    with pytest.raises(tl.ShapeError, match="tensordot"):
        tl.tensordot(x, y, axes=([0], [0]), semiring="max_plus")


@pytest.mark.parametrize(
    "dtypes, semiring, want",
    [
        ((np.int8, np.int16), "max_plus", np.int32),
        ((np.uint32,), "max_plus", np.int64),
        ((np.int64, np.int32), "min_plus", np.int64),
        ((np.float16,), "max_times", np.float32),
        ((np.float32, np.float64), "max_plus", np.float64),
        ((np.int32,), "log_sum_exp", np.float64),
        ((np.float32,), "log_sum_exp", np.float32),
        ((np.float32, np.int8), "count", np.float64),
    ],
)
def test_result_dtypes(dtypes, semiring, want):
    assert semiring_dtype(semiring, [np.dtype(d) for d in dtypes], "t") == want
    arrays = [np.ones((2, 2), d) for d in dtypes]
    args = []
    for k, a in enumerate(arrays):
        args += [a, [k, k + 1]]
    t = tl.einsum(*args, [0], semiring=semiring)
    assert t.dtype == want
    assert t.evaluate().dtype == want


def test_integer_networks_are_exact():
    rng = np.random.default_rng(5)
    a = rng.integers(-(2**40), 2**40, (3, 4))
    b = rng.integers(-(2**40), 2**40, (4, 5))
    got = tl.matmul(a, b, semiring="max_plus").evaluate()
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, (a[:, :, None] + b[None]).max(1))


def test_zero_size_labels_give_the_semirings_zero():
    a, b = np.ones((3, 0)), np.ones((0, 2))
    assert np.all(tl.matmul(a, b, semiring="max_plus").evaluate() == -np.inf)
    assert np.all(tl.matmul(a, b, semiring="min_plus").evaluate() == np.inf)
    assert np.all(tl.matmul(a, b, semiring="max_times").evaluate() == 0)
    assert np.all(tl.matmul(a, b, semiring="log_sum_exp").evaluate() == -np.inf)
    c = tl.matmul(a, b, semiring="count").evaluate()
    assert c.shape == (3, 2, 2) and np.all(c[..., 0] == -np.inf) and np.all(c[..., 1] == 0)
    ai = np.ones((3, 0), np.int32)
    got = tl.matmul(ai, ai.T, semiring="max_plus").evaluate()
    assert np.all(got == np.iinfo(np.int32).min)


def test_count_skips_minus_infinity_and_counts_ties():
    # a max independent set count on a triangle plus a pendant vertex: {3, 0}, {3, 1}... by hand
    v = np.array([0.0, 1.0])
    e = np.array([[0.0, 0.0], [0.0, -np.inf]])
    edges = [(0, 1), (1, 2), (0, 2), (2, 3)]
    args = []
    for i in range(4):
        args += [v, [i]]
    for i, j in edges:
        args += [e, [i, j]]
    got = tl.einsum(*args, [], semiring="count").evaluate()
    sets = [
        s for s in itertools.product((0, 1), repeat=4) if all(not (s[i] and s[j]) for i, j in edges)
    ]
    best = max(sum(s) for s in sets)
    assert got[0] == best == 2
    assert got[1] == sum(sum(s) == best for s in sets) == 2
    # nothing feasible: the semiring's zero (-inf, 0)
    bad = tl.einsum(np.full(2, -np.inf), [0], [], semiring="count").evaluate()
    assert bad[0] == -np.inf and bad[1] == 0


def test_nan_propagates():
    a = np.array([[1.0, np.nan], [2.0, 3.0]])
    got = tl.matmul(a, np.ones((2, 2)), semiring="max_plus").evaluate()
    assert np.isnan(got[0]).all() and np.array_equal(got[1], [4.0, 4.0])


def test_errors_are_typed_and_name_the_op():
    a = np.ones((2, 3))
    with pytest.raises(tl.OptionError, match="unknown semiring 'max'"):
        tl.einsum("ij->i", a, semiring="max")
    with pytest.raises(tl.OptionError, match="unknown semiring"):
        tl.matmul(a, a.T, semiring="tropical")
    with pytest.raises(tl.DTypeError, match="takes real numbers"):
        tl.einsum("ij->i", a.astype(complex), semiring="max_plus")
    with pytest.raises(tl.DTypeError, match="takes real numbers"):
        tl.einsum("ij->i", a > 0, semiring="log_sum_exp")
    with pytest.raises(tl.DTypeError, match="uint64"):
        tl.einsum("ij->i", a.astype(np.uint64), semiring="max_plus")
    with pytest.raises(tl.ShapeError, match="einsum"):
        tl.einsum("ij,jk->ik", a, np.ones((4, 2)), semiring="max_plus")
    with pytest.raises(tl.ShapeError, match="matmul"):
        tl.matmul(a, np.ones((4, 2)), semiring="max_plus")
    with pytest.raises(TypeError):
        tl.add(a, a, semiring="max_plus")
    x = tl.asarray(a)
    with pytest.raises(tl.DTypeError, match="count"):
        tl.grad(tl.einsum("ij->", x, semiring="count")[0], [x])


def test_repeated_labels_take_the_diagonal_first():
    rng = np.random.default_rng(6)
    a = rng.standard_normal((4, 4))
    b = rng.standard_normal(4)
    got = tl.einsum("ii,i->", a, b, semiring="max_plus").evaluate()
    np.testing.assert_allclose(got, (np.diag(a) + b).max())
    got = tl.einsum("ii->i", a, semiring="min_plus").evaluate()
    np.testing.assert_allclose(got, np.diag(a))


def _indicator(arrays, terms, semiring):
    """The brute-force argmax configuration's entries, one indicator per operand."""
    labels = sorted({lab for t in terms for lab in t})
    sizes = {}
    for a, t in zip(arrays, terms):
        sizes.update(zip(t, a.shape))
    best, arg = None, None
    for conf in itertools.product(*[range(sizes[lab]) for lab in labels]):
        c = dict(zip(labels, conf))
        v = sum(a[tuple(c[lab] for lab in t)] for a, t in zip(arrays, terms))
        if best is None or (v > best if semiring == "max_plus" else v < best):
            best, arg = v, c
    out = []
    for a, t in zip(arrays, terms):
        ind = np.zeros_like(a)
        ind[tuple(arg[lab] for lab in t)] = 1
        out.append(ind)
    return out


@pytest.mark.parametrize("semiring", ["max_plus", "min_plus"])
def test_tropical_gradient_is_the_argmax_configuration(semiring):
    rng = np.random.default_rng(7)
    terms, _ = NETWORK
    arrays = [rng.standard_normal(tuple(SIZES[lab] for lab in t)) for t in terms]
    xs = [tl.asarray(a) for a in arrays]
    y = tl.einsum(*network_args(xs, terms, ()), semiring=semiring)
    grads = tl.evaluate(*tl.grad(y, xs))
    for g, want in zip(grads, _indicator(arrays, terms, semiring)):
        np.testing.assert_array_equal(g, want)
    # the same through a sliced network's gradient
    grads = tl.evaluate(*tl.grad(y, xs, memory_limit=2000), memory_limit=2000)
    for g, want in zip(grads, _indicator(arrays, terms, semiring)):
        np.testing.assert_array_equal(g, want)


def test_log_sum_exp_gradient_is_the_marginals():
    rng = np.random.default_rng(8)
    terms, _ = NETWORK
    arrays = [rng.standard_normal(tuple(SIZES[lab] for lab in t)) for t in terms]
    xs = [tl.asarray(a) for a in arrays]
    y = tl.einsum(*network_args(xs, terms, ()), semiring="log_sum_exp")
    grads = tl.evaluate(*tl.grad(y, xs))
    z = brute(arrays, terms, (), "log_sum_exp")
    for k, t in enumerate(terms):
        # marginal of operand k's entries: the probability of configurations through each
        marg = np.exp(brute(arrays, terms, t, "log_sum_exp") - z)
        np.testing.assert_allclose(grads[k], marg, rtol=1e-10)


def test_log_sum_exp_gradient_is_stable_at_large_magnitudes():
    a = np.array([[1000.0, -1000.0], [0.0, 5.0]])
    x = tl.asarray(a)
    (g,) = tl.grad(tl.einsum("ij->", x, semiring="log_sum_exp"), [x])
    g = g.evaluate()
    assert np.isfinite(g).all()
    np.testing.assert_allclose(g.sum(), 1.0)
    np.testing.assert_allclose(g[0, 0], 1.0)


def test_max_times_gradient_is_the_product_of_the_others():
    rng = np.random.default_rng(9)
    a, b = rng.random((3, 4)), rng.random((4, 2))
    xa, xb = tl.asarray(a), tl.asarray(b)
    y = tl.einsum("ij,jk->", xa, xb, semiring="max_times")
    ga, gb = tl.evaluate(*tl.grad(y, [xa, xb]))
    p = a[:, :, None] * b[None]
    i, j, k = np.unravel_index(p.argmax(), p.shape)
    want_a = np.zeros_like(a)
    want_a[i, j] = b[j, k]
    want_b = np.zeros_like(b)
    want_b[j, k] = a[i, j]
    np.testing.assert_allclose(ga, want_a)
    np.testing.assert_allclose(gb, want_b)


def test_integer_operands_get_no_gradient_but_the_others_do():
    a = np.arange(6.0).reshape(2, 3)
    b = np.arange(3)
    xa, xb = tl.asarray(a), tl.asarray(b)
    y = tl.einsum("ij,j->", xa, xb, semiring="max_plus")  # int promoted to float64
    (g,) = tl.grad(y, [xa])
    np.testing.assert_array_equal(g.evaluate(), [[0, 0, 0], [0, 0, 1]])


def test_constant_networks_fold_and_placeholders_feed():
    a = np.array([[1.0, 2.0], [3.0, 0.0]])
    p = tl.placeholder((2, 2), name="p")
    t = tl.einsum("ij,jk->ik", p, a, semiring="min_plus")
    plan = tl.compile([t], inputs=[p])
    for x in (a, a + 1):
        (got,) = plan(x)
        np.testing.assert_allclose(got, (x[:, :, None] + a[None]).min(1))


def test_save_and_load_keep_the_semiring(tmp_path):
    rng = np.random.default_rng(10)
    p = tl.placeholder((5, 5), name="p")
    ws = [rng.standard_normal((5, 5)) for _ in range(3)]
    t = tl.einsum("ab,bc,cd,da->", p, *ws, semiring="log_sum_exp")
    plan = tl.compile([t], inputs=[p], memory_limit=400)
    assert any(n.op is Op.SLICED and n.attrs.semiring for n in plan.optimized.order)
    plan.save(tmp_path / "s.json")
    loaded = tl.load(tmp_path / "s.json")
    x = rng.standard_normal((5, 5))
    np.testing.assert_array_equal(plan(x)[0], loaded(x)[0])
    np.testing.assert_allclose(
        plan(x)[0], brute([x, *ws], [(0, 1), (1, 2), (2, 3), (3, 0)], (), "log_sum_exp")
    )
    doc = json.loads((tmp_path / "s.json").read_text())
    for node in doc["nodes"]:
        if node.get("op") == "sliced":
            node["attrs"][5] = "max"
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(tl.GraphFormatError, match="unknown semiring 'max'"):
        tl.load(tmp_path / "bad.json")


def test_plans_saved_before_sliced_nodes_had_a_semiring_still_load(tmp_path):
    rng = np.random.default_rng(11)
    p = tl.placeholder((5, 5), name="p")
    ws = [rng.standard_normal((5, 5)) for _ in range(3)]
    t = tl.einsum("ab,bc,cd,da->", p, *ws)
    plan = tl.compile([t], inputs=[p], memory_limit=400)
    plan.save(tmp_path / "s.json")
    doc = json.loads((tmp_path / "s.json").read_text())
    old = [n for n in doc["nodes"] if n.get("op") == "sliced"]
    assert old
    for node in old:
        assert node["attrs"].pop() is None  # the attrs as written before semirings
    (tmp_path / "old.json").write_text(json.dumps(doc))
    loaded = tl.load(tmp_path / "old.json")
    x = rng.standard_normal((5, 5))
    np.testing.assert_array_equal(plan(x)[0], loaded(x)[0])


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("semiring", RINGS)
def test_every_device_matches_brute_force_and_slices_where_it_can(device, semiring):
    rng = np.random.default_rng(12)
    terms, out = NETWORK
    arrays = ring_inputs(rng, semiring, [tuple(SIZES[lab] for lab in t) for t in terms])
    t = tl.einsum(*network_args(arrays, terms, out), semiring=semiring)
    want = brute(arrays, terms, out, semiring)
    np.testing.assert_allclose(t.evaluate(device=device), want, rtol=1e-12)
    limit = 1000 if semiring == "count" else 500
    assert "sliced over" in str(tl.explain(t, memory_limit=limit))
    if device.startswith("opencl"):
        with pytest.raises(tl.DeviceError, match="sliced .* network .* cpu and cuda"):
            t.evaluate(device=device, memory_limit=limit)
    else:
        got = t.evaluate(device=device, memory_limit=limit)
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_sliced_count_network_counts_its_pairs_in_the_peak():
    rng = np.random.default_rng(13)
    terms = [(i, (i + 1) % 6) for i in range(6)]
    arrays = ring_inputs(rng, "count", [(6, 6)] * 6)
    t = tl.einsum(*network_args(arrays, terms, ()), semiring="count")
    report = tl.explain(t, memory_limit=1200)
    (summary,) = report.slicing
    # the table's peak holds at least one slice of (value, count) pairs, as the runner does
    assert report.after.peak_bytes >= summary["peak_per_slice"]


# ---- regressions found by review -----------------------------------------------------------


def test_unsliced_semiring_graphs_and_gradient_plans_round_trip(tmp_path):
    t = tl.einsum("ab,bc->a", np.ones((3, 3)), np.arange(9.0).reshape(3, 3), semiring="max_plus")
    tl.save(t, tmp_path / "t.json")
    np.testing.assert_array_equal(tl.load(tmp_path / "t.json").evaluate(), t.evaluate())
    p = tl.placeholder((3, 3), name="p")
    y = tl.einsum("ab,bc->", p, np.ones((3, 3)), semiring="log_sum_exp")
    plan = tl.compile(tl.grad(y, [p]), inputs=[p])
    plan.save(tmp_path / "g.json")
    x = np.arange(9.0).reshape(3, 3) / 9
    np.testing.assert_array_equal(tl.load(tmp_path / "g.json")(x)[0], plan(x)[0])


def test_a_count_result_read_as_raw_weights_is_not_merged():
    a = np.zeros((1, 5))
    c = tl.einsum("ij->i", a, semiring="count")  # [[0, 5]]: a (value, count) pair
    d = tl.einsum("iz,i->", c, np.zeros(1), semiring="count")  # the pair read as weights
    np.testing.assert_array_equal(d.evaluate(), d.evaluate(passes=()))
    np.testing.assert_array_equal(d.evaluate(), [5.0, 1.0])
    e = tl.einsum("iz->z", c, semiring="count")
    np.testing.assert_array_equal(e.evaluate(), [[0.0, 1.0], [5.0, 1.0]])


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("passes", [None, ()])
def test_an_empty_sum_in_an_nary_network_is_the_zero(device, passes):
    kw = {} if passes is None else {"passes": passes}
    a, b = np.zeros((2, 0), np.int32), np.zeros((0, 2), np.int32)
    c = -np.ones((2, 2), np.int32)
    got = tl.einsum("ij,jk,kl->il", a, b, c, semiring="max_plus").evaluate(device=device, **kw)
    assert np.all(got == np.iinfo(np.int32).min)
    got = tl.einsum("ij,jk,kl->il", a, b, c, semiring="min_plus").evaluate(device=device, **kw)
    assert np.all(got == np.iinfo(np.int32).max)
    inf = np.full((2, 2), np.inf)
    got = tl.einsum("ij,jk,kl->il", a * 1.0, b * 1.0, inf, semiring="max_plus")
    assert np.all(got.evaluate(device=device, **kw) == -np.inf)
    got = tl.einsum("ij,jk,kl->il", a * 1.0, b * 1.0, inf, semiring="count")
    got = got.evaluate(device=device, **kw)
    assert np.all(got[..., 0] == -np.inf) and np.all(got[..., 1] == 0)


@pytest.mark.parametrize("device", device_params())
def test_log_sum_exp_keeps_the_log_beside_large_shifts(device):
    a = np.full((16, 16), 1e8, np.float32)
    b = np.full((16, 16), -1e8, np.float32)
    got = tl.einsum("ij,jk->ik", a, b, semiring="log_sum_exp").evaluate(device=device)
    np.testing.assert_allclose(got, np.log(16.0), rtol=1e-6)


def test_tropical_gradient_marks_the_optimum_only_beside_a_big_penalty():
    x = tl.asarray(np.array([1.0, 2.0, 3e6], np.float32))
    y = tl.asarray(np.array([3.0, 2.5, -3e6], np.float32))
    z = tl.einsum("i,i->", x, y, semiring="max_plus")  # totals 4, 4.5, 0
    (g,) = tl.grad(z, [x])
    np.testing.assert_array_equal(g.evaluate(), [0.0, 1.0, 0.0])
    close = tl.asarray(np.array([1000.0, 1000.0005], np.float32))
    (g,) = tl.grad(tl.einsum("i->", close, semiring="max_plus"), [close])
    np.testing.assert_array_equal(g.evaluate(), [0.0, 1.0])
    (t,) = [tl.jvp(tl.einsum("i->", close, semiring="max_plus"), [close], [np.ones(2)])]
    assert float(t.evaluate()) == 1.0


def test_a_nan_value_counts_nothing():
    got = tl.einsum("i,j->ij", np.array([np.nan, 1.0]), np.array([1.0, 2.0]), semiring="count")
    got = got.evaluate()
    assert np.isnan(got[0, :, 0]).all() and np.all(got[0, :, 1] == 0)
    np.testing.assert_array_equal(got[1], [[2.0, 1.0], [3.0, 1.0]])
