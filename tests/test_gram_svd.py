"""The SVD's Gram route on the CPU (runtime/kernels/gram_svd.py, runtime/backends/cpu.py
``_svd``): the eigendecomposition of A^H A where its leading columns are checked to be as
accurate as LAPACK's, the rest solved apart, LAPACK's gesdd otherwise. Results against NumPy
for every dtype, the routes counted."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import (
    SVD_TOL,
    check_svd,
    matrix_with_spectrum,
    numpy_with_eigh,
    random_spectrum_matrix,
    spectrum_cases,
    upper_gram_checks,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from tenloom.runtime.backends import cpu
from tenloom.runtime.kernels import gram_svd as gs

import tenloom as tl

DTYPES = ["float32", "float64", "complex64", "complex128"]
TOL = SVD_TOL


def _counters():
    return dict(cpu.SVD_COUNTERS)


def _delta(before):
    return {k: v - before[k] for k, v in _counters().items()}


_matrix = matrix_with_spectrum
_check = check_svd


def _svd(x, **kw):
    return tl.evaluate(*tl.linalg.svd(tl.asarray(x), full_matrices=False), **kw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(300, 300), (260, 400), (400, 260), (2, 280, 300)])
def test_gaussian_matrices_take_the_gram_route_and_match_numpy(dtype, shape):
    x = _matrix(shape, dtype, "gauss", seed=sum(shape))
    before = _counters()
    _check(x, *_svd(x), dtype)
    d = _delta(before)
    count = int(np.prod(shape[:-2], dtype=int))
    if dtype.startswith("float"):
        assert d["gram"] == count and d["lapack"] == 0, d
    else:  # complex: gesdd is faster here (runtime/backends/cpu.py _SVD_DTYPES)
        assert d["gram"] == 0 and d["lapack"] == 0 and d["gram_declined"] == 0, d


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_fast_decaying_spectrum_goes_to_lapack_and_stays_exact(dtype):
    spectrum = np.logspace(0, -14, 320)
    x = _matrix((320, 320), dtype, spectrum, seed=3)
    before = _counters()
    u, s, vh = _svd(x)
    _check(x, u, s, vh, dtype)
    np.testing.assert_allclose(s, spectrum, atol=10 * TOL[dtype])
    d = _delta(before)
    assert d["gram_declined"] == 1 and d["lapack"] == 1 and d["gram"] == 0, d


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_rank_deficient_matrix_keeps_its_head_and_solves_its_null_tail(dtype):
    spectrum = np.r_[np.linspace(1, 0.5, 170), np.zeros(150)]
    x = _matrix((320, 320), dtype, spectrum, seed=4)
    before = _counters()
    u, s, vh = _svd(x)
    _check(x, u, s, vh, dtype)
    np.testing.assert_allclose(s, spectrum, atol=10 * TOL[dtype])
    assert _delta(before)["gram"] == (1 if dtype.startswith("float") else 0)


def test_a_head_and_a_decaying_tail():
    spectrum = np.r_[np.linspace(1, 0.5, 240), np.logspace(-3, -12, 160)]
    x = _matrix((400, 400), "float64", spectrum, seed=5)
    before = _counters()
    u, s, vh = _svd(x)
    _check(x, u, s, vh, "float64")
    np.testing.assert_allclose(s, spectrum, atol=1e-14)
    assert _delta(before)["gram"] == 1


def test_deterministic_runs_and_non_finite_values_use_lapack():
    x = _matrix((300, 300), "float64", "gauss", seed=6)
    before = _counters()
    a = _svd(x, deterministic=True)
    b = _svd(x, deterministic=True)
    for p, q in zip(a, b):
        assert np.array_equal(p, q)
    ref = np.linalg.svd(x, full_matrices=False)
    for p, q in zip(a, ref):
        assert np.array_equal(p, q)  # LAPACK's own bits
    bad = x.copy()
    bad[3, 4] = np.nan
    try:
        got = _svd(bad)[1]
        assert np.isnan(got).any()
    except Exception as e:  # LAPACK's own verdict on a NaN matrix stands
        assert isinstance(e.__cause__, np.linalg.LinAlgError), e
    d = _delta(before)
    assert d["gram"] == 0 and d["lapack"] == 3, d


def test_small_and_full_non_square_matrices_keep_the_reference():
    before = _counters()
    for shape, full in [((200, 300), False), ((300, 260), True)]:
        x = _matrix(shape, "float64", "gauss", seed=7)
        u, s, vh = tl.evaluate(*tl.linalg.svd(tl.asarray(x), full_matrices=full))
        ref = np.linalg.svd(x, full_matrices=full)
        assert u.shape == ref[0].shape and vh.shape == ref[2].shape
        np.testing.assert_allclose(s, ref[1], rtol=1e-13)
    assert _delta(before) == {"gram": 0, "gram_declined": 0, "lapack": 0}


def test_the_route_depends_on_the_matrix_alone():
    """A plan called on a Gaussian matrix, then on matrices the route declines, then on the
    Gaussian again: the same route, hence the same factors, bit for bit."""
    p = tl.placeholder((300, 300), "float64", name="x")
    plan = tl.compile(list(tl.linalg.svd(p, full_matrices=False)), [p])
    bad = _matrix((300, 300), "float64", np.logspace(0, -12, 300), seed=8)
    good = _matrix((300, 300), "float64", "gauss", seed=9)
    first = [a.copy() for a in plan(good)]
    before = _counters()
    for _ in range(gs.GRAM_FAILS_IN_A_ROW + 2):
        _check(bad, *plan(bad), "float64")
    d = _delta(before)
    assert d["gram_declined"] == gs.GRAM_FAILS_IN_A_ROW + 2, d  # no rest on the CPU
    again = plan(good)
    for p_, q in zip(first, again):
        assert np.array_equal(p_, q)
    assert _delta(before)["gram"] == 1


def test_empty_batches_and_huge_values_keep_working(recwarn):
    import warnings

    u, s, vh = _svd(np.zeros((0, 300, 300)))
    assert u.shape == (0, 300, 300) and s.shape == (0, 300) and vh.shape == (0, 300, 300)
    x = _matrix((300, 300), "float64", "gauss", seed=11) * 1e160  # its norm overflows
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        u, s, vh = _svd(x)
    np.testing.assert_allclose(s, np.linalg.svd(x, compute_uv=False), rtol=1e-12)


def test_the_truncated_svds_gradient_is_the_one_lapack_gives(monkeypatch):
    y = _matrix((280, 280), "float64", "gauss", seed=10)

    def run():
        t = tl.asarray(y)
        u, s, vh, w = tl.linalg.tensor_svd(t, left=(0,), max_rank=70)
        loss = tl.sum(s[:10] ** 3) + w + tl.sum((u @ vh) ** 2)
        return tl.evaluate(loss, tl.grad(loss, t), cache_dir=False)

    before = _counters()
    value, grad = run()
    assert _delta(before)["gram"] >= 1
    monkeypatch.setattr(cpu, "GRAM_MIN_SIDE", 10**9)
    tl.clear_caches()  # the programs built with the route
    ref_value, ref_grad = run()
    np.testing.assert_allclose(value, ref_value, rtol=1e-12)
    np.testing.assert_allclose(grad, ref_grad, atol=1e-8 * np.abs(ref_grad).max())


@settings(max_examples=25, deadline=None)
@given(**spectrum_cases())
def test_random_spectra_match_numpy(m, n, dtype, decay, zeros, seed):
    x = random_spectrum_matrix(m, n, dtype, decay, zeros, seed)[0]
    _check(x, *_svd(x), dtype)


# ---- levels (runtime/kernels/gram_svd.py "Levels"): called directly with NumPy's checks ----


def _levels(x, levels=4):
    """``gram_svd`` with ``levels`` on NumPy, as GramRoute calls it (scaled by a power of two to
    a norm in (1/2, 1], wide matrices through their transpose), and the sizes of the factors
    ``small_svd`` was given."""
    import math

    import scipy.linalg

    small = []

    def small_svd(b):
        # gesvd: gesdd's U was orthonormal only to 1e-12 on a 108 x 108 tail of clustered
        # values near 1e-10 of its norm, which the route's check then declines
        small.append(b.shape)
        return scipy.linalg.svd(b, full_matrices=False, lapack_driver="gesvd")

    norm = float(np.linalg.norm(x))
    scale = 2.0 ** -math.ceil(math.log2(norm))
    a = x * scale
    wide = a.shape[0] < a.shape[1]
    got = gs.gram_svd(
        np, a.T if wide else a, small_svd, norm * scale, gs.NUMPY_CHECKS, levels=levels
    )
    if got is None:
        return None, small
    u, s, vh = got
    if wide:
        u, vh = vh.T, u.T
    return (u, s / scale, vh), small


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(320, 320), (400, 260), (260, 400)])
def test_levels_take_a_spectrum_falling_over_every_order_of_magnitude(dtype, shape):
    """s from 1 down to 1e-14 (float32: 1e-6): one level declines it (its head would be a few
    columns); the levels keep every column, with no full SVD of a big factor."""
    k = min(shape)
    low = -6 if dtype in ("float32", "complex64") else -14
    spectrum = np.logspace(0, low, k)
    x = _matrix(shape, dtype, spectrum, seed=k)
    assert _levels(x, levels=1)[0] is None
    got, small = _levels(x)
    assert got is not None
    _check(x, *got, dtype)
    np.testing.assert_allclose(got[1], spectrum, atol=10 * TOL[dtype])
    assert all(max(s) < gs.LEVEL_MIN_SIDE for s in small), small


@pytest.mark.parametrize("dtype", DTYPES)
def test_levels_take_a_dmrg_like_split_to_its_exact_zeros(dtype):
    """Half the values falling from 1 to 1e-14, half exactly 0 (a DMRG split's shape): the
    zeros come out as 0, with U and V orthonormal and the matrix rebuilt."""
    low = -6 if dtype in ("float32", "complex64") else -14
    spectrum = np.r_[np.logspace(0, low, 150), np.zeros(150)]
    x = _matrix((310, 300), dtype, spectrum, seed=12)
    got, small = _levels(x)
    assert got is not None and not small
    _check(x, *got, dtype)
    np.testing.assert_allclose(got[1], spectrum, atol=10 * TOL[dtype])
    assert np.all(got[1][150:] <= 10 * TOL[dtype])


def test_levels_measure_small_values_against_a_smaller_norm():
    """Values far below s_max come out nearer their true value than LAPACK's absolute 1e-16:
    each level measures them against what is left."""
    spectrum = np.logspace(0, -12, 300)
    x = _matrix((300, 300), "float64", spectrum, seed=13)
    (u, s, vh), _ = _levels(x)
    lapack = np.linalg.svd(x, compute_uv=False)
    tail = slice(200, None)  # s below 1e-8
    ours = np.abs(s[tail] / spectrum[tail] - 1).max()
    assert ours < 1e-4, ours
    assert ours < np.abs(lapack[tail] / spectrum[tail] - 1).max()


def test_levels_leave_a_gaussian_matrix_to_one_level():
    """A Gaussian matrix's head is most of it: no QR of the head and no further level (one
    eigendecomposition), as with one level."""
    x = _matrix((300, 300), "float64", "gauss", seed=14)
    calls = []

    def record(g, w, v):
        calls.append(g.shape)
        return w, v

    xp = numpy_with_eigh(record)
    a = x / 2.0 ** np.ceil(np.log2(np.linalg.norm(x)))
    got = gs.gram_svd(
        xp, a, lambda b: np.linalg.svd(b, full_matrices=False), 1.0, gs.NUMPY_CHECKS, levels=4
    )
    assert got is not None
    _check(a, *got, "float64")
    assert calls == [(300, 300)], calls


@settings(max_examples=30, deadline=None)
@given(
    m=st.integers(130, 260),
    n=st.integers(130, 260),
    dtype=st.sampled_from(DTYPES),
    decay=st.sampled_from([0.0, 2.0, 5.0, 9.0, 14.0]),
    zeros=st.integers(0, 80),
    seed=st.integers(0, 2**16),
)
def test_levels_on_random_spectra_match_numpy(m, n, dtype, decay, zeros, seed):
    if dtype in ("float32", "complex64"):
        decay = min(decay, 6.0)
    x, spectrum = random_spectrum_matrix(m, n, dtype, decay, zeros, seed)
    got, _ = _levels(x)
    if got is None:  # declined (the caller's next route runs): allowed, but not for these
        pytest.fail(f"levels declined {m}x{n} {dtype} decay {decay} zeros {zeros}")
    _check(x, *got, dtype)
    np.testing.assert_allclose(got[1], spectrum, atol=10 * TOL[dtype])


@pytest.mark.parametrize("n, rank, seed", [(74, 37, 601834405), (321, 169, 575769056)])
def test_levels_keep_a_square_matrix_with_exact_zeros(n, rank, seed):
    """(A fuzzer's find.) The zeros' basis comes from a square random matrix with the heads
    projected out, whose QR magnified what was left of the heads (cross 1153 ulp): it is
    projected and orthonormalized again, as the tail's basis is."""
    spectrum = np.r_[np.linspace(1, 0.5, rank), np.zeros(n - rank)]
    x = _matrix((n, n), "float64", spectrum, seed=seed)
    got, _ = _levels(x)
    assert got is not None
    _check(x, *got, "float64")
    np.testing.assert_allclose(got[1], spectrum, atol=10 * TOL["float64"])


def test_a_tail_factor_whose_v_is_not_unitary_is_declined(monkeypatch):
    """V's tail factor comes from ``small_svd`` unchecked by U's check: a right factor off
    from unitary by more than the tolerance makes the route decline."""
    spectrum = np.r_[np.linspace(1, 0.5, 240), np.logspace(-3, -6, 60)]
    x = _matrix((300, 300), "float64", spectrum, seed=15)
    a = x / 2.0 ** np.ceil(np.log2(np.linalg.norm(x)))

    def skewed(b):
        u, s, vh = np.linalg.svd(b, full_matrices=False)
        return u, s, vh * (1 + 1e-9)

    def exact(b):
        return np.linalg.svd(b, full_matrices=False)

    for levels in (1, 4):  # one level's tail, and the levels' last (60 columns: below 128)
        kw = {"levels": levels, "precheck": False}
        assert gs.gram_svd(np, a, exact, 1.0, gs.NUMPY_CHECKS, **kw) is not None
        assert gs.gram_svd(np, a, skewed, 1.0, gs.NUMPY_CHECKS, **kw) is None


@pytest.mark.parametrize("levels", [1, 4])
def test_an_eigendecomposition_whose_v_is_not_orthonormal_is_declined(levels):
    """(A reviewer's find: multithreaded OpenBLAS's syevd gave a V 27x the tolerance from
    orthonormal on clustered eigenvalues.) V is checked at the end; here eigh's V is skewed by
    1e-11, 40x the tolerance, and the route declines."""
    x = _matrix((300, 300), "float64", "gauss", seed=16)
    a = x / 2.0 ** np.ceil(np.log2(np.linalg.norm(x)))

    xp = numpy_with_eigh(lambda g, w, v: (w, v * (1 + 1e-11)))
    kw = {"levels": levels, "precheck": False}
    assert gs.gram_svd(np, a, np.linalg.svd, 1.0, gs.NUMPY_CHECKS, **kw) is not None
    assert gs.gram_svd(xp, a, np.linalg.svd, 1.0, gs.NUMPY_CHECKS, **kw) is None


@pytest.mark.parametrize("levels", [1, 4])
def test_v_rows_of_the_tail_not_orthogonal_to_the_heads_are_declined(levels):
    """One level checks V by parts (the head's rows while the host computes the tail, then the
    tail's against the head and among themselves): eigh's smallest eigenvector is tilted
    1e-11 towards its largest, which only the head-tail block of V V^H shows (U's checks pass,
    as the tail's U is made against the head's); the route must decline."""
    x = _matrix((300, 300), "float64", "gauss", seed=18)
    a = x / 2.0 ** np.ceil(np.log2(np.linalg.norm(x)))

    def tilt(g, w, v):
        v[:, 0] += 1e-11 * v[:, -1]
        return w, v

    xp = numpy_with_eigh(tilt)
    kw = {"levels": levels, "precheck": False}
    assert gs.gram_svd(np, a, np.linalg.svd, 1.0, gs.NUMPY_CHECKS, **kw) is not None
    assert gs.gram_svd(xp, a, np.linalg.svd, 1.0, gs.NUMPY_CHECKS, **kw) is None


@pytest.mark.parametrize("levels", [1, 4])
@pytest.mark.parametrize("dtype", DTYPES)
def test_only_the_grams_upper_triangle_is_read(levels, dtype):
    """CUDA's Gram matrix (herk) has only its upper triangle set: with NaN below the diagonal
    the route must give the same result as with the whole product."""

    x = _matrix((200, 160), dtype, "gauss", seed=19)
    a = x / 2.0 ** np.ceil(np.log2(np.linalg.norm(x)))
    checks = upper_gram_checks()
    kw = {"levels": levels, "precheck": False}
    svd = lambda b: np.linalg.svd(b, full_matrices=False)  # noqa: E731
    want = gs.gram_svd(np, a, svd, 1.0, gs.NUMPY_CHECKS, **kw)
    got = gs.gram_svd(np, a, svd, 1.0, checks, **kw)
    assert want is not None and got is not None
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_one_levels_v_head_check_is_read():
    """One level checks V's head rows apart (its second ``offmax``, launched before the
    host's tail SVD): a NaN there must decline the route, though U's checks pass."""
    x = _matrix((300, 300), "float64", "gauss", seed=20)
    a = x / 2.0 ** np.ceil(np.log2(np.linalg.norm(x)))
    calls = []

    def offmax(x, rows=False, fetch=True):
        calls.append(x.shape)
        got = gs._np_offmax(x, rows, fetch)
        if len(calls) == 2:
            got = got.copy()
            got[0] = np.nan
        return got

    checks = gs.NUMPY_CHECKS._replace(offmax=offmax)
    kw = {"levels": 1, "precheck": False}
    assert gs.gram_svd(np, a, np.linalg.svd, 1.0, gs.NUMPY_CHECKS, **kw) is not None
    assert gs.gram_svd(np, a, np.linalg.svd, 1.0, checks, **kw) is None
    assert calls == [(300, calls[0][1])] * 2  # U's head columns, then V's (n x h)


def test_narrow_tail_factors_take_gesdd_where_orthonormal_else_gesvd():
    """Below GESVD_BELOW the fallback (gesdd) runs first and its U and V are checked to
    HOST_TAIL_ULPS; a factor off by more (gesdd's on clustered tails) is redone by gesvd.
    At GESVD_BELOW and above the fallback's result is returned as it is."""
    calls = []

    def exact(b):
        calls.append(("exact", b.shape))
        return np.linalg.svd(b, full_matrices=False)

    def skewed(b):  # 1e-12 off orthonormal: 45x HOST_TAIL_ULPS in float64
        calls.append(("skewed", b.shape))
        u, s, vh = np.linalg.svd(b, full_matrices=False)
        return u * (1 + 1e-12), s, vh

    rng = np.random.default_rng(17)
    narrow, wide = gs.GESVD_BELOW - 1, gs.GESVD_BELOW
    b = rng.standard_normal((narrow, narrow))
    ref = np.linalg.svd(b, full_matrices=False)
    for got, want in zip(gs.host_tail_svd(b, exact), ref):
        np.testing.assert_array_equal(got, want)  # gesdd's own factors, kept
    u, s, vh = gs.host_tail_svd(b, skewed)  # redone by gesvd
    np.testing.assert_allclose((u * s) @ vh, b, atol=1e-12)
    eye = np.eye(narrow)
    assert np.abs(u.T @ u - eye).max() < 64 * np.finfo(float).eps
    assert np.abs(vh @ vh.T - eye).max() < 64 * np.finfo(float).eps
    b = rng.standard_normal((wide, wide))
    u, s, vh = gs.host_tail_svd(b, skewed)  # not checked: the route's own checks decide
    assert np.abs(u.T @ u - np.eye(wide)).max() > 1e-12
    assert calls == [("exact", (narrow,) * 2), ("skewed", (narrow,) * 2), ("skewed", (wide,) * 2)]
    with pytest.raises(np.linalg.LinAlgError):  # a non-finite factor: gesdd's own verdict
        gs.host_tail_svd(np.full((4, 4), np.nan), lambda b: np.linalg.svd(b))


def test_one_blas_thread_inside_restored_after_and_taken_in_turns():
    """``blas_threads.one_thread`` limits the BLAS libraries to one thread inside (nested
    too), restores them after, lets threads in one at a time (threadpoolctl honours one
    thread's limit at a time), and leaves no hold behind: the user's own limits still work."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    from tenloom.runtime.kernels.blas_threads import one_thread

    def counts():
        return {
            d["num_threads"] for d in threadpoolctl.threadpool_info() if d["user_api"] == "blas"
        }

    def set_blas(n):  # a limit that no thread holds (as a process starts with)
        threadpoolctl.ThreadpoolController().limit(limits=n, user_api="blas")
        release = getattr(
            getattr(threadpoolctl, "OpenBLASController", None), "clear_controlling_thread", None
        )
        if release is not None:
            release()

    original = min(counts())
    set_blas(2)
    try:
        _one_thread_checks(counts, one_thread)
    finally:
        set_blas(original)


def _one_thread_checks(counts, one_thread):
    import threading
    import time

    import threadpoolctl

    before = counts()
    assert before == {2}
    with one_thread():
        with one_thread():
            assert counts() == {1}
        assert counts() == {1}
    assert counts() == before
    order, seen = [], {}
    a_inside, release_a = threading.Event(), threading.Event()

    def a():
        with one_thread():
            order.append("a in")
            seen["a"] = counts()
            a_inside.set()
            release_a.wait(10)
            order.append("a out")

    def b():
        a_inside.wait(10)
        with one_thread():
            order.append("b in")
            seen["b"] = counts()

    ts = [threading.Thread(target=f) for f in (a, b)]
    for t in ts:
        t.start()
    a_inside.wait(10)
    time.sleep(0.2)  # time for b to get in, were it let in
    release_a.set()
    for t in ts:
        t.join(10)
    assert order == ["a in", "a out", "b in"]
    assert seen == {"a": {1}, "b": {1}}
    assert counts() == before
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):  # the user's, from main
        assert counts() == {1}
    assert counts() == before
