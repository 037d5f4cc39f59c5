"""TRUNCATED_SVD (graph/ops/tensor_svd.py): the node tensor_svd builds for a rank below
min(M, N), its reference, its CPU kernel (the Gram route's head alone, runtime/kernels/
gram_svd.py ``gram_head``, else LAPACK cut), its derivatives through the reduced SVD and the
cse pass that shares that one. Results against NumPy for every dtype. The routes are counted
on the CPU backend (as tests/test_gram_svd.py): CUDA's are in tests/test_cuda_svd.py."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import (
    check_truncated_svd,
    matrix_with_spectrum,
    numpy_with_eigh,
    random_spectrum_matrix,
    spectrum_cases,
    truncated_reference,
    upper_gram_checks,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from tenloom.graph.graph import Graph
from tenloom.graph.node import make_node
from tenloom.graph.ops import Op
from tenloom.graph.ops.tensor_svd import _truncated_views
from tenloom.runtime.backends import cpu
from tenloom.runtime.kernels import gram_svd as gs

import tenloom as tl

DTYPES = ["float32", "float64", "complex64", "complex128"]


def _counters():
    return dict(cpu.SVD_COUNTERS)


def _delta(before):
    return {k: v - before[k] for k, v in _counters().items()}


def _node(x, r, eps=1e-12):
    """The TRUNCATED_SVD node of ``x`` (any batch) and its four views, evaluated."""
    t = tl.asarray(x)
    node = make_node(Op.TRUNCATED_SVD, (t.node,), (eps, r))
    return tl.evaluate(*(tl.Tensor(v) for v in _truncated_views(node, x.shape, r)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(300, 300), (280, 400), (400, 280), (2, 280, 300), (5, 7)])
def test_the_node_matches_numpy_batched_or_not(dtype, shape):
    x = matrix_with_spectrum(shape, dtype, "gauss", seed=sum(shape))
    r = min(shape[-2:]) // 4 + 1
    before = _counters()
    check_truncated_svd(x, r, *_node(x, r), dtype)
    d = _delta(before)
    count = int(np.prod(shape[:-2], dtype=int))
    if dtype.startswith("float") and min(shape[-2:]) >= cpu.GRAM_MIN_SIDE:
        assert d["gram"] == count and d["lapack"] == 0, d  # the head alone, checked
    else:  # complex (gesdd: _SVD_DTYPES) and small matrices: the reference
        assert d["gram"] == d["lapack"] == 0, d


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_svd_below_k_builds_the_truncated_node(dtype):
    x = matrix_with_spectrum((12, 5, 40), dtype, "gauss", seed=1)
    parts = tl.linalg.tensor_svd(tl.asarray(x), (0, 1), max_rank=9)
    ops = {n.op for n in Graph(tuple(p.node for p in parts)).order}
    assert Op.TRUNCATED_SVD in ops and Op.SVD not in ops
    u, s, vh, rest = tl.evaluate(*parts)
    check_truncated_svd(x.reshape(60, 40), 9, u.reshape(60, 9), s, vh, rest, dtype)
    # at the bound K the reduced SVD, as before
    parts = tl.linalg.tensor_svd(tl.asarray(x), (0, 1), max_rank=40)
    ops = {n.op for n in Graph(tuple(p.node for p in parts)).order}
    assert Op.SVD in ops and Op.TRUNCATED_SVD not in ops


@pytest.mark.parametrize("mode,cutoff", [("rel", 0.61), ("abs", 10.5), ("discarded", 0.2)])
def test_cutoffs_below_a_rank_bound_count_what_the_bound_cut(mode, cutoff):
    """The cutoff's mask over the first r values and the discarded weight, which adds the
    squared sum of those the bound cut: as NumPy gives them from the whole spectrum."""
    x = matrix_with_spectrum((30, 20), "float64", np.linspace(20, 1, 20), seed=2)
    r = 12
    u, s, vh, disc, kept = tl.evaluate(
        *tl.linalg.tensor_svd(x, 0, max_rank=r, cutoff=cutoff, cutoff_mode=mode, return_rank=True)
    )
    ref = np.linalg.svd(x, compute_uv=False)
    if mode == "rel":
        keep = ref > cutoff * ref[0]
    elif mode == "abs":
        keep = ref > cutoff
    else:
        tail = np.cumsum((ref**2)[::-1])[::-1]
        keep = tail > cutoff * tail[0]
    keep[0] = True
    keep[r:] = False
    assert 0 < kept == keep.sum() < r  # the cutoff cut within the bound
    np.testing.assert_allclose(s, np.where(keep[:r], ref[:r], 0), rtol=1e-12)
    np.testing.assert_allclose(disc, (ref[~keep] ** 2).sum(), rtol=1e-12)


def test_a_spectrum_whose_rest_is_tiny_goes_to_lapack():
    """rest from the eigenvalues is within REST_ERROR n eps s_max^2: where that is not within
    the tolerance of rest itself (here rest is 1e-20 of s_max^2), LAPACK's SVD is cut."""
    spectrum = np.concatenate([np.linspace(1, 0.5, 100), np.full(200, 1e-10)])
    x = matrix_with_spectrum((300, 300), "float64", spectrum, seed=3)
    a = x / 2.0 ** np.ceil(np.log2(np.linalg.norm(x)))
    assert gs.gram_head(np, a, 100, gs.NUMPY_CHECKS, precheck=False) is None
    before = _counters()
    u, s, vh, rest = _node(x, 100)
    assert _delta(before)["lapack"] == 1
    np.testing.assert_allclose(rest, 200 * 1e-20, rtol=1e-4)  # (the matrix: to 1e-16)
    check_truncated_svd(x, 100, u, s, vh, rest, "float64")


def test_a_head_predicted_short_of_the_rank_goes_to_lapack():
    """Columns below s_max / sqrt(TOL_ULPS) are predicted not to be orthonormal to the
    tolerance: a rank that reaches them is declined before any product."""
    # (distinct values: a rank inside a repeated value has no unique truncation)
    spectrum = np.concatenate([np.linspace(1, 0.9, 100), np.geomspace(1e-3, 1e-4, 200)])
    x = matrix_with_spectrum((300, 300), "float64", spectrum, seed=4)
    a = x / 2.0 ** np.ceil(np.log2(np.linalg.norm(x)))
    assert gs.gram_head(np, a, 90, gs.NUMPY_CHECKS, precheck=False) is not None
    assert gs.gram_head(np, a, 120, gs.NUMPY_CHECKS, precheck=False) is None
    check_truncated_svd(x, 120, *_node(x, 120), "float64")


@pytest.mark.parametrize("which", ["residual", "u", "v"])
def test_each_check_of_the_head_is_read(which):
    """A NaN in any one of the three checks (each column's residual, U's columns and V's
    orthonormal) declines the head."""
    x = matrix_with_spectrum((300, 300), "float64", "gauss", seed=5)
    a = x / 2.0 ** np.ceil(np.log2(np.linalg.norm(x)))
    calls = []

    def poisoned(fn, index):
        def run(*args, **kw):
            calls.append(fn.__name__)
            got = np.array(fn(*args, **kw), copy=True)
            if len(calls) == index:
                got[-1] = np.nan
            return got

        return run

    index = {"residual": 1, "u": 2, "v": 3}[which]
    checks = gs.NUMPY_CHECKS._replace(
        resid_norms=poisoned(gs._np_resid_norms, index), offmax=poisoned(gs._np_offmax, index)
    )
    assert gs.gram_head(np, a, 75, gs.NUMPY_CHECKS, precheck=False) is not None
    assert gs.gram_head(np, a, 75, checks, precheck=False) is None
    assert calls == ["_np_resid_norms", "_np_offmax", "_np_offmax"]


def test_an_eigendecomposition_whose_v_is_not_orthonormal_is_declined():
    x = matrix_with_spectrum((300, 300), "float64", "gauss", seed=6)
    a = x / 2.0 ** np.ceil(np.log2(np.linalg.norm(x)))
    xp = numpy_with_eigh(lambda g, w, v: (w, v * (1 + 1e-11)))
    assert gs.gram_head(np, a, 75, gs.NUMPY_CHECKS, precheck=False) is not None
    assert gs.gram_head(xp, a, 75, gs.NUMPY_CHECKS, precheck=False) is None


@pytest.mark.parametrize("dtype", DTYPES)
def test_only_the_grams_upper_triangle_is_read(dtype):
    x = matrix_with_spectrum((200, 160), dtype, "gauss", seed=7)
    a = x / 2.0 ** np.ceil(np.log2(np.linalg.norm(x)))
    want = gs.gram_head(np, a, 40, gs.NUMPY_CHECKS, precheck=False)
    got = gs.gram_head(np, a, 40, upper_gram_checks(), precheck=False)
    assert want is not None and got is not None
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_the_route_scales_wide_matrices_and_the_rest():
    """GramRoute with a rank: a wide matrix through its transpose, any norm (scaled by a power
    of two), rest scaled back by its square."""
    x = matrix_with_spectrum((260, 330), "float64", "gauss", seed=8) * 3e5
    route = gs.GramRoute(np, gs.NUMPY_CHECKS, None, {"gram": 0, "gram_declined": 0}, False)
    u, s, vh, rest = route(x, 60)
    assert route.counters == {"gram": 1, "gram_declined": 0}
    check_truncated_svd(x, 60, u, s, vh, rest, "float64")


def test_non_finite_values_and_deterministic_runs_use_lapack():
    x = matrix_with_spectrum((300, 300), "float64", "gauss", seed=9)
    before = _counters()
    got = tl.evaluate(*tl.linalg.tensor_svd(x, 0, max_rank=50), deterministic=True)
    assert _delta(before) == {"gram": 0, "gram_declined": 0, "lapack": 1}
    u, s, vh, rest = got
    ref = truncated_reference(x, 50)
    np.testing.assert_array_equal(s, ref[1])  # LAPACK's own bits
    y = x.copy()
    y[3, 4] = np.nan
    with pytest.raises(tl.EvaluationError, match="truncated_svd") as e:
        tl.evaluate(*tl.linalg.tensor_svd(y, 0, max_rank=50))
    assert isinstance(e.value.__cause__, np.linalg.LinAlgError)  # LAPACK's verdict stands


def test_a_gradient_shares_one_reduced_svd():
    """The derivative rules build the reduced SVD of the operand; cse makes the truncated node
    a view of it: one decomposition in the optimized graph."""
    x = matrix_with_spectrum((9, 7), "float64", "gauss", seed=10)
    t = tl.asarray(x)
    u, s, vh, disc = tl.linalg.tensor_svd(t, 0, max_rank=3)
    loss = tl.sum(s**3) + disc + tl.sum(tl.abs(u @ vh) ** 2)
    g = tl.grad(loss, t)
    plan = tl.compile([loss, g])
    ops = [n.op for n in plan.optimized.order]
    assert ops.count(Op.SVD) == 1 and Op.TRUNCATED_SVD not in ops
    value, grad = plan()
    uu, ss, vvh = np.linalg.svd(x, full_matrices=False)
    ref = (ss[:3] ** 3).sum() + (ss[3:] ** 2).sum() + (np.abs(uu[:, :3] @ vvh[:3]) ** 2).sum()
    np.testing.assert_allclose(value, ref, rtol=1e-12)
    assert np.isfinite(grad).all()


@pytest.mark.parametrize(
    "attrs,match",
    [
        ((1e-12, 0), "rank must be an int >= 1"),
        ((1e-12, True), "rank must be an int >= 1"),
        ((1e-12, 2.0), "rank must be an int >= 1"),
        ((-1.0, 2), "eps must be a finite float >= 0"),
        ((float("inf"), 2), "eps must be a finite float >= 0"),
    ],
)
def test_bad_attributes_are_refused(attrs, match):
    from tenloom.graph.ops import OPS

    x = tl.placeholder((4, 5))
    with pytest.raises(Exception, match=match):
        OPS[Op.TRUNCATED_SVD].check_attrs((x.node,), attrs, Op.TRUNCATED_SVD)


def test_shapes_and_attributes_are_checked_at_trace_time():
    x = tl.placeholder((4, 5))
    for attrs, what in (((1e-12, 0), "rank"), ((1e-12, 2.0), "rank"), ((-1.0, 2), "eps")):
        with pytest.raises(tl.OptionError, match=f"truncated_svd: {what} must be"):
            make_node(Op.TRUNCATED_SVD, (x.node,), attrs)
    with pytest.raises(tl.ShapeError, match=r"truncated_svd: rank 5 is above min\(M, N\) = 4"):
        make_node(Op.TRUNCATED_SVD, (x.node,), (1e-12, 5))
    v = tl.placeholder((6,))
    with pytest.raises(tl.ShapeError, match=r"truncated_svd: operand 0 of shape \(6,\)"):
        make_node(Op.TRUNCATED_SVD, (v.node,), (1e-12, 1))


@settings(max_examples=25, deadline=None)
@given(**spectrum_cases(rank=st.integers(1, 255)))
def test_random_spectra_and_ranks_match_numpy(m, n, dtype, decay, zeros, rank, seed):
    x = random_spectrum_matrix(m, n, dtype, decay, zeros, seed)[0]
    check_truncated_svd(x, rank, *_node(x, rank), dtype)


@pytest.mark.parametrize(
    "eps,error",
    [
        (-1.0, tl.OptionError),
        (float("nan"), tl.OptionError),
        (float("inf"), tl.OptionError),
        (True, tl.OptionTypeError),
        ("abc", tl.OptionTypeError),
        (None, tl.OptionTypeError),
    ],
)
@pytest.mark.parametrize("max_rank", [2, 4])
def test_eps_is_checked_below_k_as_at_k(eps, error, max_rank):
    with pytest.raises(error, match="tensor_svd: eps"):
        tl.linalg.tensor_svd(tl.placeholder((4, 6)), 0, max_rank=max_rank, eps=eps)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("passes", [None, ()])
def test_derivatives_are_right_without_the_cse_pass(dtype, passes):
    """Without cse the graph has both the truncated node and its rules' reduced SVD, run by
    different kernels (here LAPACK for the truncated node, whose rest is too small for the
    eigenvalues, and the Gram route for the reduced SVD), whose singular vectors differ in
    sign: the rules read the truncated node's own for the kept triplets."""
    spectrum = np.concatenate([np.linspace(2, 1, 100), np.full(200, 1e-9)])
    x = matrix_with_spectrum((300, 300), dtype, spectrum, seed=11)
    w, d = (matrix_with_spectrum((300, 300), dtype, "gauss", seed=s) for s in (13, 14))
    p = tl.placeholder((300, 300), dtype, name="x")
    u, s, vh, disc = tl.linalg.tensor_svd(p, 0, max_rank=40)
    loss = tl.sum(tl.real(tl.asarray(w) * (u @ vh))) + tl.sum(s**2) * 0.01 + disc * 0.1
    opts = {} if passes is None else {"passes": passes}
    before = _counters()
    (g,) = tl.evaluate(tl.grad(loss, p), feed={p: x}, **opts)
    (t,) = tl.evaluate(tl.jvp(loss, p, tl.asarray(d)), feed={p: x}, **opts)
    if passes == () and dtype == "float64":  # two kernels ran on the one operand
        assert _delta(before)["gram"] >= 1 and _delta(before)["lapack"] >= 1, _delta(before)

    def f(y):
        return float(tl.evaluate(loss, feed={p: y})[0])

    h = 1e-6
    fd = (f(x + h * d) - f(x - h * d)) / (2 * h)
    assert abs(float(np.real(np.vdot(g, d))) - fd) <= 1e-6 * max(1.0, abs(fd))
    assert abs(float(np.real(t)) - fd) <= 1e-6 * max(1.0, abs(fd))


def test_two_ranks_of_one_operand_share_one_decomposition():
    x = matrix_with_spectrum((40, 30), "float64", "gauss", seed=15)
    t = tl.asarray(x)
    a = tl.linalg.tensor_svd(t, 0, max_rank=5)
    b = tl.linalg.tensor_svd(t, 0, max_rank=12)
    plan = tl.compile([*a, *b])
    ops = [n.op for n in plan.optimized.order if n.op in (Op.SVD, Op.TRUNCATED_SVD)]
    assert ops == [Op.TRUNCATED_SVD]
    got = plan()
    check_truncated_svd(x, 5, *got[:4], "float64")
    check_truncated_svd(x, 12, *got[4:], "float64")


def test_a_rank_a_cutoff_chose_is_chosen_again_from_the_same_node():
    """Without max_rank the front end evaluates the reduced SVD to count what the cutoff keeps;
    the graph it returns cuts at that count from the same node (a truncated node's kernel could
    differ in the last place and keep fewer at a threshold)."""
    x = matrix_with_spectrum((40, 30), "float64", np.linspace(3, 1, 30), seed=16)
    out = tl.linalg.tensor_svd(x, 0, cutoff=0.5, return_rank=True)
    ops = {n.op for n in Graph(tuple(o.node for o in out)).order}
    assert Op.SVD in ops and Op.TRUNCATED_SVD not in ops
    u, s, vh, disc, kept = tl.evaluate(*out)
    assert int(kept) == s.shape[0] < 30 and (s > 0).all()
