"""tl.linalg.tensor_svd (graph/ops/tensor_svd.py, the front end in tenloom/linalg.py): values
against numpy.linalg.svd of the matricized tensor for every dtype, axis groups and absorb mode;
the three cutoff modes, static (max_rank) and evaluated (cutoff alone) ranks; the discarded
weight; exact derivatives of the truncated factors (the truncation term included) against
finite differences and forward against reverse mode; the data-dependent-shape rule in traced
functions; typed errors."""

from __future__ import annotations

import numpy as np
import pytest
from rule_checks import rule_tests
from test_autodiff import _rand

import tenloom as tl

DTYPES = ["float32", "float64", "complex64", "complex128"]


def _tensor(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return _rand(rng, shape, dtype)


def _matricize(a, left):
    right = [i for i in range(a.ndim) if i not in left]
    m = int(np.prod([a.shape[i] for i in left]))
    return a.transpose(list(left) + right).reshape(m, -1)


def _tol(dtype):
    return 2e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    ("shape", "left"), [((3, 4, 5, 2), (0, 2)), ((4, 6), 0), ((2, 3, 4), (2, 0))]
)
@pytest.mark.parametrize("max_rank", [None, 1, 3])
def test_values_match_the_svd_of_the_matricized_tensor(dtype, shape, left, max_rank):
    a = _tensor(shape, dtype)
    u, s, vh, d = tl.linalg.tensor_svd(a, left, max_rank=max_rank)
    lt = (left,) if isinstance(left, int) else left
    m = _matricize(a, lt)
    s0 = np.linalg.svd(m.astype(np.complex128 if a.dtype.kind == "c" else np.float64), False, False)
    r = len(s0) if max_rank is None else min(max_rank, len(s0))
    right = [i for i in range(a.ndim) if i not in lt]
    assert u.shape == tuple(a.shape[i] for i in lt) + (r,)
    assert vh.shape == (r,) + tuple(a.shape[i] for i in right)
    assert s.shape == (r,) and d.shape == ()
    U, S, VH, D = tl.evaluate(u, s, vh, d)
    assert U.dtype == a.dtype and VH.dtype == a.dtype and S.dtype == np.empty(0, a.dtype).real.dtype
    tol = _tol(dtype)
    np.testing.assert_allclose(S, s0[:r], rtol=tol, atol=tol)
    np.testing.assert_allclose(D, (s0[r:] ** 2).sum(), rtol=10 * tol, atol=10 * tol)
    um, vm = U.reshape(-1, r), VH.reshape(r, -1)
    np.testing.assert_allclose(um.conj().T @ um, np.eye(r), atol=10 * tol)
    np.testing.assert_allclose(vm @ vm.conj().T, np.eye(r), atol=10 * tol)
    # the best rank-r approximation: its error is the discarded weight (Eckart-Young)
    err = np.linalg.norm((um * S) @ vm - m) ** 2
    np.testing.assert_allclose(err, D, rtol=1e-3 if tol > 1e-6 else 1e-8, atol=10 * tol)


@pytest.mark.parametrize("absorb", ["left", "right", "both"])
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_absorb_puts_the_singular_values_into_the_factors(absorb, dtype):
    a = _tensor((4, 3, 5), dtype)
    u, s, vh, d = tl.evaluate(*tl.linalg.tensor_svd(a, (0, 1), max_rank=4))
    lf, rf, d2 = tl.evaluate(*tl.linalg.tensor_svd(a, (0, 1), max_rank=4, absorb=absorb))
    f = {"left": (s, 1), "right": (1, s), "both": (np.sqrt(s), np.sqrt(s))}[absorb]
    np.testing.assert_allclose(lf, u * f[0], atol=1e-12)
    np.testing.assert_allclose(rf, vh * np.reshape(f[1], (-1, 1)), atol=1e-12)
    np.testing.assert_allclose(
        np.einsum("abk,kc->abc", lf, rf), np.einsum("abk,k,kc->abc", u, s, vh)
    )
    assert d2 == pytest.approx(float(d))


def _spectrum_tensor(s, seed=0):
    """A (4, 2, 3) tensor with (0, 1) | (2,) singular values s (len 3)."""
    rng = np.random.default_rng(seed)
    q1, _ = np.linalg.qr(rng.normal(size=(8, 3)))
    q2, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return ((q1 * s) @ q2.T).reshape(4, 2, 3)


CUTS = [("rel", 0.2, 2), ("abs", 0.5, 1), ("discarded", 0.05, 2), ("discarded", 1e-6, 3)]


@pytest.mark.parametrize(("mode", "cutoff", "kept"), CUTS)
def test_a_cutoff_alone_evaluates_the_spectrum_and_fixes_the_rank(mode, cutoff, kept):
    s = np.array([1.0, 0.3, 0.1])  # weights 1, 0.09, 0.01 of 1.1
    a = _spectrum_tensor(s)
    u, sv, vh, d = tl.linalg.tensor_svd(a, (0, 1), cutoff=cutoff, cutoff_mode=mode)
    assert sv.shape == (kept,) and u.shape == (4, 2, kept) and vh.shape == (kept, 3)
    np.testing.assert_allclose(sv.evaluate(), s[:kept])
    np.testing.assert_allclose(d.evaluate(), (s[kept:] ** 2).sum(), atol=1e-14)


@pytest.mark.parametrize(("mode", "cutoff", "kept"), CUTS)
def test_a_cutoff_under_a_bound_zeroes_what_it_cuts(mode, cutoff, kept):
    s = np.array([1.0, 0.3, 0.1])
    a = tl.asarray(_spectrum_tensor(s))
    u, sv, vh, d = tl.linalg.tensor_svd(a, (0, 1), max_rank=3, cutoff=cutoff, cutoff_mode=mode)
    assert sv.shape == (3,)
    U, S, VH, D = tl.evaluate(u, sv, vh, d)
    np.testing.assert_allclose(S, np.where(np.arange(3) < kept, s, 0), atol=1e-14)
    assert not U[..., kept:].any() and not VH[kept:].any()
    np.testing.assert_allclose(D, (s[kept:] ** 2).sum(), atol=1e-14)


def test_the_rank_of_a_traced_function_needs_a_bound():
    @tl.function
    def split(a):
        return tl.linalg.tensor_svd(a, (0,), cutoff=1e-3)[1]

    with pytest.raises(tl.DataDependentShapeError, match="tensor_svd.*placeholder.*max_rank"):
        split(np.ones((3, 3)))
    with pytest.raises(tl.DataDependentShapeError, match="tensor_svd"):
        tl.linalg.tensor_svd(tl.placeholder((3, 3), "float64"), 0, cutoff=1e-3)

    @tl.function
    def bounded(a):
        return tl.linalg.tensor_svd(a, (0,), max_rank=2, cutoff=0.5)[1]

    a = _spectrum_tensor(np.array([1.0, 0.3, 0.1])).reshape(8, 3)
    np.testing.assert_allclose(bounded(a), [1.0, 0.0], atol=1e-14)
    np.testing.assert_allclose(bounded(a * 0.4), [0.4, 0.0], atol=1e-14)  # same plan, new values


def test_the_evaluated_rank_reads_the_values_of_the_time_of_the_call():
    """The rank is fixed when the graph is built; values changed in place later keep the
    shape, and the cutoff (in the graph) zeroes what it cuts within it."""
    a = _spectrum_tensor(np.array([1.0, 0.3, 0.1]))
    u, s, vh, d = tl.linalg.tensor_svd(a, (0, 1), cutoff=0.2)
    assert s.shape == (2,)
    a[...] = _spectrum_tensor(np.array([1.0, 0.1, 0.05]))
    np.testing.assert_allclose(s.evaluate(), [1.0, 0.0], atol=1e-14)


def _truncated(a, left=(0, 1), r=2, absorb=None, **kw):
    out = tl.linalg.tensor_svd(a, left, max_rank=r, absorb=absorb, **kw)
    if absorb is None:
        u, s, vh, d = out
        return tl.concatenate(
            [tl.reshape(tl.einsum("abk,k,kc->abc", u, s, vh), (-1,)), tl.reshape(d, (1,))]
        )
    lf, rf, d = out
    return tl.concatenate(
        [tl.reshape(tl.einsum("abk,kc->abc", lf, rf), (-1,)), tl.reshape(d, (1,))]
    )


# gauge-invariant functions of the truncated factors: the best rank-r approximation (its
# derivative carries the truncation term: the coupling of kept and cut singular pairs) and the
# discarded weight; for real tensors the factors themselves (signs are locally constant)
GRADS = {
    "rank2": (lambda a: _truncated(a), [(3, 2, 4)]),
    "rank1_absorb_both": (lambda a: _truncated(a, r=1, absorb="both"), [(3, 2, 4)]),
    "rank3_wide": (lambda a: _truncated(a, left=(1, 0), r=3), [(2, 2, 5)]),
    "discarded": (lambda a: tl.linalg.tensor_svd(a, (0,), max_rank=2)[3], [(4, 5)]),
    "projector": (
        lambda a: tl.abs(tl.linalg.tensor_svd(a, (0, 1), max_rank=2)[0]) ** 2,
        [(3, 2, 4)],
    ),
}
REAL_ONLY = {
    "factors": (
        lambda a: tl.concatenate(
            [tl.reshape(x, (-1,)) for x in tl.linalg.tensor_svd(a, (0, 2), max_rank=2)]
        ),
        [(3, 2, 4)],
    ),
}
(
    test_truncated_gradients_match_finite_differences,
    test_truncated_jvp_matches_finite_differences_and_the_vjp,
) = rule_tests(GRADS, REAL_ONLY)


def test_the_truncation_term_is_needed():
    """The gradient of the rank-1 approximation differs from the one that ignores the
    discarded pairs (the rule's F restricted to the kept block): the truncation term matters,
    and tenloom's matches finite differences (above)."""
    rng = np.random.default_rng(3)
    a = rng.normal(size=(4, 4))
    w = rng.normal(size=(4, 4))
    x = tl.asarray(a)
    u, s, vh, _ = tl.linalg.tensor_svd(x, 0, max_rank=1)
    loss = tl.sum((u * s) @ vh * w)
    (g,) = tl.evaluate(*tl.grad(loss, [x]))
    # the naive rank-1 gradient: d(s u v^T) with u, v fixed = the projection u u^T W v v^T only
    uu, ss, vv = np.linalg.svd(a)
    naive = np.outer(uu[:, 0], uu[:, 0]) @ w @ np.outer(vv[0], vv[0])
    assert np.abs(g - naive).max() > 1e-3


def test_errors_are_typed_and_name_the_op():
    a = np.ones((3, 4, 5))
    with pytest.raises(tl.ShapeError, match="tensor_svd.*axis 3.*out of bounds"):
        tl.linalg.tensor_svd(a, (0, 3), max_rank=2)
    with pytest.raises(tl.OptionError, match="tensor_svd.*repeats"):
        tl.linalg.tensor_svd(a, (0, -3), max_rank=2)
    with pytest.raises(tl.OptionError, match="tensor_svd.*each side"):
        tl.linalg.tensor_svd(a, (0, 1, 2))
    with pytest.raises(tl.OptionError, match="tensor_svd.*each side"):
        tl.linalg.tensor_svd(a, ())
    with pytest.raises(tl.OptionTypeError, match="tensor_svd.*max_rank"):
        tl.linalg.tensor_svd(a, 0, max_rank=2.0)
    with pytest.raises(tl.OptionError, match="tensor_svd.*max_rank must be >= 1"):
        tl.linalg.tensor_svd(a, 0, max_rank=0)
    with pytest.raises(tl.OptionError, match="tensor_svd.*cutoff must be"):
        tl.linalg.tensor_svd(a, 0, cutoff=-1.0)
    with pytest.raises(tl.OptionTypeError, match="tensor_svd.*cutoff"):
        tl.linalg.tensor_svd(a, 0, cutoff="big")
    with pytest.raises(tl.OptionError, match="tensor_svd.*cutoff_mode"):
        tl.linalg.tensor_svd(a, 0, cutoff=0.1, cutoff_mode="sum2")
    with pytest.raises(tl.OptionError, match="tensor_svd.*absorb"):
        tl.linalg.tensor_svd(a, 0, absorb="middle")
    with pytest.raises(tl.OptionTypeError, match="tensor_svd.*left"):
        tl.linalg.tensor_svd(a, None)
    with pytest.raises(tl.DTypeError):
        tl.linalg.tensor_svd(a.astype(np.float16), 0)


def test_a_tensor_svd_of_a_network_merges_around_it():
    """The contraction networks before and after the SVD each merge and are ordered as one."""
    rng = np.random.default_rng(0)
    ms = [rng.normal(size=(4, 4)) for _ in range(4)]
    ps = [tl.placeholder((4, 4), name=n) for n in "abcd"]
    theta = tl.einsum("ab,bc,cd->ad", *ps[:3])
    lf, rf, _ = tl.linalg.tensor_svd(theta, 0, max_rank=3, absorb="right")
    out = tl.einsum("ak,kb,bc->ac", lf, rf, ps[3])
    u, s, vh = np.linalg.svd(ms[0] @ ms[1] @ ms[2])
    want = (u[:, :3] * s[:3]) @ vh[:3] @ ms[3]
    np.testing.assert_allclose(out.evaluate(feed=dict(zip(ps, ms))), want, atol=1e-10)
    assert tl.dump(out).count(": 2 pairwise contractions") == 2
    assert tl.dump(out).count("svd[") == 1


def test_empty_and_rank_one_edges():
    u, s, vh, d = tl.linalg.tensor_svd(np.zeros((3, 2)), 0, cutoff=0.5)
    assert s.shape == (1,)  # a zero tensor keeps one (zero) singular value: the bond survives
    np.testing.assert_array_equal(s.evaluate(), [0.0])
    u, s, vh, d = tl.linalg.tensor_svd(np.ones((1, 5)), 0, max_rank=4)
    assert u.shape == (1, 1) and vh.shape == (1, 5)
    np.testing.assert_allclose(s.evaluate(), [np.sqrt(5)])


def test_return_rank_counts_the_kept_singular_values_in_a_traced_function():
    @tl.function
    def split(a):
        return tl.linalg.tensor_svd(
            a, (0,), max_rank=3, cutoff=0.2, absorb="right", return_rank=True
        )

    a = _spectrum_tensor(np.array([1.0, 0.3, 0.1])).reshape(8, 3)
    left, right, discarded, rank = split(a)
    assert rank.dtype == np.int64 and rank.shape == () and int(rank) == 2
    assert left.shape == (8, 3) and not left[:, 2:].any()
    np.testing.assert_allclose(discarded, 0.01, atol=1e-14)
    # without a cutoff the rank is the bound
    out = tl.linalg.tensor_svd(a, 0, max_rank=2, return_rank=True)
    assert len(out) == 5 and int(out[-1].evaluate()) == 2
    with pytest.raises(tl.OptionTypeError, match="return_rank"):
        tl.linalg.tensor_svd(a, 0, return_rank="yes")


def test_the_evaluated_rank_is_the_graphs_own_and_keeps_at_least_one():
    """float32 singular values compared in float32 (as the graph does); a cutoff that cuts
    everything keeps the largest value (a bond of one, as quimb and ITensor); options are
    checked before anything runs."""
    for a, cutoff, mode, want in [
        (np.diag(np.float32([1, 0.1])), 0.1, "rel", 1),
        (np.diag(np.float32([1, 0.3])), 0.3, "abs", 1),
        (np.diag([2.0, 2.0]), 1.0, "rel", 1),
        (np.diag([2.0, 2.0]), 5.0, "abs", 1),
        (np.diag([2.0, 1.0]), 1.0, "discarded", 1),
    ]:
        u, s, vh, d, rank = tl.linalg.tensor_svd(
            a, 0, cutoff=cutoff, cutoff_mode=mode, return_rank=True
        )
        assert s.shape == (want,) and int(rank.evaluate()) == want
        assert np.all(s.evaluate() > 0)  # no zero-padded column without a max_rank
    with pytest.raises(tl.OptionError, match="absorb"):
        tl.linalg.tensor_svd(np.eye(3), 0, cutoff=0.1, absorb="x")
    with pytest.raises(tl.OptionTypeError, match="return_rank"):
        tl.linalg.tensor_svd(np.eye(3), 0, cutoff=0.1, return_rank="y")
    with pytest.raises(tl.DeviceError):
        tl.linalg.tensor_svd(np.eye(3), 0, cutoff=0.1, device="cuda:99")


@pytest.mark.parametrize("mode", ["rel", "abs", "discarded"])
def test_absorb_both_under_a_cutoff_has_a_finite_gradient(mode):
    """sqrt(s) masked by the cutoff, not sqrt of the masked s (sqrt's infinite derivative at a
    zeroed value, times 0, was NaN)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 5))
    d = rng.standard_normal((4, 5))
    w1, w2 = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    cut = {"rel": 0.5, "abs": 1.5, "discarded": 0.2}[mode]
    p = tl.placeholder((4, 5))
    left, right, _ = tl.linalg.tensor_svd(
        p, 0, max_rank=3, cutoff=cut, cutoff_mode=mode, absorb="both"
    )
    loss = tl.sum(left * tl.asarray(w1)) * tl.sum(right * tl.asarray(w2))
    (g,) = tl.evaluate(tl.grad(loss, p), feed={p: x})
    assert np.isfinite(g).all()
    kept = int(
        tl.evaluate(
            tl.linalg.tensor_svd(x, 0, max_rank=3, cutoff=cut, cutoff_mode=mode, return_rank=True)[
                -1
            ]
        )[0]
    )
    assert kept < 3  # the cutoff zeroed some of the bound
    h = 1e-6

    def f(y):
        return float(tl.evaluate(loss, feed={p: y})[0])

    fd = (f(x + h * d) - f(x - h * d)) / (2 * h)
    assert abs(float(np.vdot(g, d)) - fd) <= 1e-6 * max(1.0, abs(fd))
