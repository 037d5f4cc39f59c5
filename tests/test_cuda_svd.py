"""SVD on CUDA (runtime/backends/cuda_svd.py): the Gram path, cuSOLVER's gesvdp where its own
error report says it is accurate, the Gram path's levels, gesvd otherwise. Skipped without a
GPU; run on the device machine (TENLOOM_TEST_DEVICE is not needed: each test names cuda:0)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import SVD_TOL, check_svd, check_truncated_svd, cuda_marks, matrix_with_spectrum
from tenloom.graph.errors import EvaluationError

import tenloom as tl

cp = pytest.importorskip("cupy")
pytestmark = cuda_marks(cp)

DTYPES = ["float32", "float64", "complex64", "complex128"]
TOL = SVD_TOL


def _counters():
    from tenloom.runtime.backends.cuda_svd import COUNTERS

    return dict(COUNTERS)


def _delta(before):
    return {k: v - before[k] for k, v in _counters().items()}


_matrix = matrix_with_spectrum
_check = check_svd


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(300, 300), (260, 400), (400, 260), (2, 280, 300)])
def test_gaussian_matrices_take_gesvdp_and_match_numpy(dtype, shape):
    x = _matrix(shape, dtype, "gauss", seed=sum(shape))
    before = _counters()
    u, s, vh = tl.linalg.svd(tl.asarray(x), full_matrices=False)
    u, s, vh = tl.evaluate(u, s, vh, device="cuda:0")
    _check(x, u, s, vh, dtype)
    d = _delta(before)
    # a Gaussian matrix's singular values above s_max / 32 are most of them: the Gram path
    assert d["gram"] == int(np.prod(shape[:-2], dtype=int)), d
    assert d["redone"] == 0 and d["gesvdp"] == 0, d


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("kind", ["decay", "rank_deficient"])
def test_ill_conditioned_spectra_stay_as_accurate_as_gesvd(dtype, kind):
    n = 320
    spectrum = (
        np.logspace(0, -14, n)
        if kind == "decay"
        else np.r_[np.linspace(1, 0.5, 170), np.zeros(n - 170)]
    )
    x = _matrix((n, n), dtype, spectrum, seed=3)
    before = _counters()
    u, s, vh = tl.evaluate(*tl.linalg.svd(tl.asarray(x), full_matrices=False), device="cuda:0")
    _check(x, u, s, vh, dtype)
    np.testing.assert_allclose(s, spectrum, atol=1e-13)
    d = _delta(before)
    if kind == "decay":  # the Gram path's head would be 1/10 of the columns: not tried
        assert d["gram_declined"] == 1 and d["gesvdp"] + d["redone"] == 1, d
    else:  # 170 of 320 columns are the head; the null rest is the tail, solved apart
        assert d["gram"] == 1, d


def _plan_bad_good(seed: int, n: int = 320):
    """A compiled float32 SVD, a matrix gesvdp gets wrong (a spectrum decaying over 7 orders:
    its error report is far above tolerance) and a Gaussian one it gets right."""
    p = tl.placeholder((n, n), "float32", name="x")
    plan = tl.compile(list(tl.linalg.svd(p, full_matrices=False)), [p], device="cuda:0")
    bad = _matrix((n, n), "float32", np.logspace(0, -7, n), seed=seed)
    good = _matrix((n, n), "float32", "gauss", seed=seed + 1)
    return plan, bad, good


def test_a_kernel_redone_again_and_again_goes_past_gesvdp_for_a_while():
    """gesvdp's failures are taken on by the levels (not gesvd); after ``FAILS_IN_A_ROW`` of
    them the kernel skips gesvdp for ``RETRY_AFTER`` calls (the Gram path or its levels take
    them), then tries it again."""
    from tenloom.runtime.backends import cuda_svd

    plan, bad, good = _plan_bad_good(seed=4)
    before = _counters()
    for _ in range(cuda_svd.FAILS_IN_A_ROW):
        _check(bad, *plan(bad), "float32")
    d = _delta(before)
    assert d["redone"] == cuda_svd.FAILS_IN_A_ROW, d
    assert d["levels"] == cuda_svd.FAILS_IN_A_ROW and d["gesvd"] == 0, d
    for _ in range(cuda_svd.RETRY_AFTER):
        _check(good, *plan(good), "float32")
    d = _delta(before)
    assert d["gesvdp"] == 0 and d["gesvd"] == 0, d
    assert d["gram"] + d["levels"] == cuda_svd.RETRY_AFTER + cuda_svd.FAILS_IN_A_ROW, d
    mid = _counters()
    plan(good)  # gesvdp tried again (the Gram path may still be resting: either counts)
    d = _delta(mid)
    assert d["gesvdp"] + d["gram"] == 1, d


@pytest.mark.parametrize("dtype", DTYPES)
def test_what_gesvdp_gets_wrong_the_levels_take_to_its_exact_zeros(dtype):
    """A DMRG-like split: half the values falling from 1 to 1e-14 (single precision: 1e-6),
    half exactly 0. The one-level Gram path declines it, gesvdp is not accurate on it, and the
    levels keep it, as accurate as gesvd."""
    from tenloom.runtime.backends import cuda_svd

    low = -6 if dtype in ("float32", "complex64") else -14
    spectrum = np.r_[np.logspace(0, low, 160), np.zeros(160)]
    x = _matrix((330, 320), dtype, spectrum, seed=41)
    p = tl.placeholder(x.shape, dtype, name="x")
    plan = tl.compile(list(tl.linalg.svd(p, full_matrices=False)), [p], device="cuda:0")
    before = _counters()
    u, s, vh = plan(x)
    _check(x, u, s, vh, dtype)
    np.testing.assert_allclose(s, spectrum, atol=10 * TOL[dtype])
    d = _delta(before)
    assert d["gesvd"] == 0 and d["levels"] + d["gesvdp"] == 1, d
    if d["levels"]:  # the next call skips gesvdp
        plan(x)
        d = _delta(before)
        assert d["gesvdp"] == 0 and d["redone"] == cuda_svd.FAILS_IN_A_ROW, d
        assert d["levels"] == 2, d


def test_levels_off_send_what_gesvdp_gets_wrong_to_gesvd(monkeypatch):
    from tenloom.runtime.backends import cuda_svd

    monkeypatch.setattr(cuda_svd, "GRAM_LEVELS", 1)
    plan, bad, _good = _plan_bad_good(seed=5)
    before = _counters()
    _check(bad, *plan(bad), "float32")
    d = _delta(before)
    assert d["redone"] == 1 and d["levels"] == 0 and d["levels_declined"] == 0, d


def test_a_redone_matrix_leaves_the_gram_path_to_the_next():
    plan, bad, good = _plan_bad_good(seed=6)
    before = _counters()
    _check(bad, *plan(bad), "float32")
    _check(good, *plan(good), "float32")
    d = _delta(before)
    assert d["gesvd"] == 0 and d["redone"] == 1 and d["gram"] == 1, d


def test_deterministic_runs_use_gesvd_and_repeat_their_bits():
    x = _matrix((300, 300), "float64", "gauss", seed=6)
    t = tl.linalg.svd(tl.asarray(x), full_matrices=False)
    before = _counters()
    a = tl.evaluate(*t, device="cuda:0", deterministic=True)
    b = tl.evaluate(*t, device="cuda:0", deterministic=True)
    d = _delta(before)
    assert d["gesvdp"] == 0 and d["gram"] == 0 and d["gesvd"] == 2, d
    for p, q in zip(a, b):
        assert np.array_equal(p, q)
    _check(x, *a, "float64")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(600, 256), (3, 520, 260), (520, 259), (256, 600)])
def test_gesvd_takes_tall_matrices_through_their_transpose_and_stays_exact(dtype, shape):
    """(runtime/backends/cuda.py TALL_BY_TRANSPOSE: gesvd is faster on the transpose of a
    matrix with twice as many rows as columns.) deterministic=True goes to gesvd alone; a
    decaying spectrum as DMRG's, and a Gaussian one."""
    k = min(shape[-2:])
    for spectrum in ("gauss", np.exp(-np.arange(k) / 8.0)):
        x = _matrix(shape, dtype, spectrum, seed=31)
        t = tl.linalg.svd(tl.asarray(x), full_matrices=False)
        before = _counters()
        u, s, vh = tl.evaluate(*t, device="cuda:0", deterministic=True)
        assert _delta(before)["gesvd"] == 1
        assert u.shape == shape[:-1] + (k,) and vh.shape == shape[:-2] + (k, shape[-1])
        _check(x, u, s, vh, dtype)


def test_small_single_matrices_go_to_the_host_and_full_and_nonfinite_ones_to_gesvd():
    before = _counters()
    for shape, dtype in [((40, 30), "float64"), ((30, 500), "complex64"), ((100, 1000), "float32")]:
        small = _matrix(shape, dtype, "gauss")
        t = tl.linalg.svd(tl.asarray(small), full_matrices=False)
        _check(small, *tl.evaluate(*t, device="cuda:0"), dtype)
    assert _delta(before)["host"] == 3
    stack = _matrix((3, 40, 30), "float64", "gauss")
    t = tl.linalg.svd(tl.asarray(stack), full_matrices=False)
    _check(stack, *tl.evaluate(*t, device="cuda:0"), "float64")
    wide = _matrix((260, 300), "float64", "gauss")
    u, s, vh = tl.evaluate(*tl.linalg.svd(tl.asarray(wide), full_matrices=True), device="cuda:0")
    assert u.shape == (260, 260) and vh.shape == (300, 300)
    np.testing.assert_allclose((u * s) @ vh[:260], wide, atol=1e-10)
    bad = _matrix((300, 300), "float64", "gauss")
    bad[3, 4] = np.nan
    ref = np.asarray(cp.linalg.svd(cp.asarray(bad), full_matrices=False)[1].get())
    try:
        got = tl.evaluate(tl.linalg.svd(tl.asarray(bad), full_matrices=False)[1], device="cuda:0")
    except EvaluationError as e:  # gesvd's own verdict on a NaN matrix stands
        assert isinstance(e.__cause__, np.linalg.LinAlgError), e
        got = None
    if got is not None:
        assert np.isnan(got).any() == np.isnan(ref).any()
    d = _delta(before)
    assert d["gesvdp"] == 0 and d["gram"] == 0 and d["gesvd"] == 3 and d["host"] == 3, d


def test_truncated_tensor_svd_and_its_gradient_on_gpu():
    y = _matrix((300, 300), "float64", "gauss", seed=10)
    t = tl.asarray(y)
    u, s, vh, w = tl.linalg.tensor_svd(t, left=(0,), max_rank=75)
    gpu = tl.evaluate(u, s, vh, w, device="cuda:0")
    cpu = tl.evaluate(u, s, vh, w)
    np.testing.assert_allclose(gpu[1], cpu[1], rtol=1e-12)
    np.testing.assert_allclose(gpu[3], cpu[3], rtol=1e-10)
    approx = (gpu[0] * gpu[1]) @ gpu[2]
    np.testing.assert_allclose(approx, (cpu[0] * cpu[1]) @ cpu[2], atol=1e-10)
    loss = tl.sum(s[:10] ** 3) + w
    g_gpu = tl.grad(loss, t).evaluate(device="cuda:0")
    g_cpu = tl.grad(loss, t).evaluate()
    np.testing.assert_allclose(g_gpu, g_cpu, atol=1e-9)


def _truncated(x, r):
    return tl.evaluate(*tl.linalg.tensor_svd(tl.asarray(x), 0, max_rank=r), device="cuda:0")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(300, 300), (260, 400), (400, 260)])
def test_truncated_gaussian_matrices_take_the_head_alone(dtype, shape):
    """TRUNCATED_SVD (tensor_svd below K) on a Gaussian matrix: the Gram route's head of r
    columns, checked (runtime/kernels/gram_svd.py ``gram_head``), nothing else."""
    x = _matrix(shape, dtype, "gauss", seed=sum(shape) + 1)
    r = min(shape) // 4
    before = _counters()
    got = _truncated(x, r)
    check_truncated_svd(x, r, *got, dtype)
    d = _delta(before)
    assert d["gram"] == 1 and sum(d.values()) == 1, d


def test_a_batch_of_truncated_matrices_matches_numpy():
    from tenloom.graph.node import make_node
    from tenloom.graph.ops import Op
    from tenloom.graph.ops.tensor_svd import _truncated_views

    x = _matrix((3, 280, 300), "complex128", "gauss", seed=5)
    node = make_node(Op.TRUNCATED_SVD, (tl.asarray(x).node,), (1e-12, 70))
    views = [tl.Tensor(v) for v in _truncated_views(node, x.shape, 70)]
    before = _counters()
    check_truncated_svd(x, 70, *tl.evaluate(*views, device="cuda:0"), "complex128")
    assert _delta(before)["gram"] == 3


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_truncated_spectra_the_head_cannot_take_are_the_full_svds_cut(dtype):
    """A DMRG-like spectrum (declined before any eigendecomposition: gesvdp or the levels) and
    one whose rest is too small for the eigenvalues (declined after it: not tried again by the
    full Gram route) give the full SVD's first triplets and rest."""
    n = 320
    decay = _matrix((n, n), dtype, np.logspace(0, -14, n), seed=6)
    tiny = _matrix((n, n), dtype, np.r_[np.linspace(1, 0.5, 100), np.full(n - 100, 1e-10)], 7)
    for x, r in ((decay, 100), (tiny, 100)):
        before = _counters()
        got = _truncated(x, r)
        check_truncated_svd(x, r, *got, dtype)
        d = _delta(before)
        assert d["gram"] == 0 and d["gram_declined"] == 1, d
        assert d["gesvdp"] + d["levels"] + d["gesvd"] + d["redone"] >= 1, d
    np.testing.assert_allclose(got[3], (n - 100) * 1e-20, rtol=1e-4)  # (the matrix: to 1e-16)


def test_truncated_small_and_non_finite_matrices_keep_their_routes():
    x = _matrix((60, 90), "float64", "gauss", seed=8)
    before = _counters()
    check_truncated_svd(x, 20, *_truncated(x, 20), "float64")
    assert _delta(before)["host"] == 1
    y = _matrix((300, 300), "float64", "gauss", seed=9)
    y[1, 2] = np.inf
    before = _counters()
    try:
        got = _truncated(y, 50)
        assert not np.isfinite(got[1]).all()
    except EvaluationError:
        pass  # cuSOLVER's own verdict on a non-finite matrix stands
    assert _delta(before)["gesvd"] == 1


@pytest.mark.parametrize("scale", [1e-30, 1e-4, 1e4, 1e30])
def test_the_tolerance_does_not_depend_on_the_matrix_scale(scale):
    x = _matrix((300, 300), "float64", "gauss", seed=21) * scale
    before = _counters()
    u, s, vh = tl.evaluate(*tl.linalg.svd(tl.asarray(x), full_matrices=False), device="cuda:0")
    _check(x, u, s, vh, "float64")
    d = _delta(before)
    assert d["gram"] == 1 and d["redone"] == 0, d


def test_a_zero_matrix_goes_to_gesvd():
    """No route runs on it (its norm is 0): gesvdp is not counted as having failed, and the
    kernel does not skip it afterwards."""
    x = np.zeros((256, 256))
    before = _counters()
    u, s, vh = tl.evaluate(*tl.linalg.svd(tl.asarray(x), full_matrices=False), device="cuda:0")
    assert np.all(s == 0) and np.isfinite(u).all() and np.isfinite(vh).all()
    d = _delta(before)
    assert d["gesvdp"] == 0 and d["redone"] == 0 and d["gesvd"] == 1, d


def test_full_square_and_batched_tall_and_mixed_batches():
    sq = _matrix((300, 300), "complex128", "gauss", seed=22)
    u, s, vh = tl.evaluate(*tl.linalg.svd(tl.asarray(sq), full_matrices=True), device="cuda:0")
    _check(sq, u, s, vh, "complex128")
    tall = _matrix((3, 400, 200), "float32", "gauss", seed=23)
    t = tl.linalg.svd(tl.asarray(tall), full_matrices=False)
    _check(tall, *tl.evaluate(*t, device="cuda:0"), "float32")
    # a batch of a Gaussian and a matrix whose spectrum falls to 1e-14: each kept or redone
    mixed = np.stack(
        [
            _matrix((320, 320), "float64", "gauss", seed=24),
            _matrix((320, 320), "float64", np.logspace(0, -14, 320), seed=25),
        ]
    )
    before = _counters()
    t = tl.linalg.svd(tl.asarray(mixed), full_matrices=False)
    _check(mixed, *tl.evaluate(*t, device="cuda:0"), "float64")
    d = _delta(before)
    assert d["gram"] == 1 and d["gesvdp"] + d["redone"] == 1, d


@pytest.mark.parametrize("dtype", ["float64", "complex64"])
def test_the_gram_paths_tail_goes_through_gesvdp_and_stays_accurate(dtype):
    """A head of 240 columns and a tail of 160 (s from 1e-3 to 1e-6, below s_max / 32): the
    tail's 160 x 160 factor is big enough for gesvdp, and every singular value comes out as
    accurate as gesvd's."""
    spectrum = np.r_[np.linspace(1, 0.5, 240), np.logspace(-3, -6, 160)]
    x = _matrix((400, 400), dtype, spectrum, seed=31)
    before = _counters()
    u, s, vh = tl.evaluate(*tl.linalg.svd(tl.asarray(x), full_matrices=False), device="cuda:0")
    _check(x, u, s, vh, dtype)
    np.testing.assert_allclose(s, spectrum, atol=10 * TOL[dtype])
    d = _delta(before)
    assert d["gram"] == 1 and d["gesvdp"] == 0 and d["redone"] == 0, d
    assert d["tail_gesvdp"] == 1 and d["tail_gesvd"] == 0, d


def test_a_kernel_whose_gram_tries_are_declined_stops_trying_for_a_while():
    from tenloom.runtime.backends import cuda_svd

    plan, bad, good = _plan_bad_good(seed=8)
    before = _counters()
    for _ in range(cuda_svd.GRAM_FAILS_IN_A_ROW + 1):
        _check(bad, *plan(bad), "float32")
    d = _delta(before)
    assert d["gram_declined"] == cuda_svd.GRAM_FAILS_IN_A_ROW, d
    # gesvdp tried until it failed FAILS_IN_A_ROW times, the levels taking every matrix
    assert d["redone"] == min(cuda_svd.FAILS_IN_A_ROW, cuda_svd.GRAM_FAILS_IN_A_ROW + 1), d
    assert d["levels"] == cuda_svd.GRAM_FAILS_IN_A_ROW + 1 and d["gesvd"] == 0, d


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (300, 40), (70, 700)])
def test_the_gram_paths_column_checks_match_numpy(dtype, shape):
    from tenloom.runtime.backends import cuda_svd

    rng = np.random.default_rng(sum(shape))
    cplx = np.dtype(dtype).kind == "c"
    real = np.float32 if dtype in ("float32", "complex64") else np.float64

    def g():
        x = rng.standard_normal(shape)
        return (x + 1j * rng.standard_normal(shape) if cplx else x).astype(dtype)

    y, v, s = g(), g(), rng.uniform(0.5, 2, shape[1]).astype(real)
    rtol = 1e-5 if real == np.float32 else 1e-12
    got = cuda_svd.resid_norms(cp.asarray(y), cp.asarray(v), cp.asarray(s))
    np.testing.assert_allclose(got, np.linalg.norm(y - v * s, axis=0), rtol=rtol)
    e = g()
    for triangular in (False, True):
        for identity in (False, True):
            ref = e - (np.eye(*shape, dtype=dtype) if identity else 0)
            ref = np.abs(np.triu(ref) if triangular else ref).max(axis=0)
            got = cuda_svd.colmax(cp.asarray(e), triangular, identity)
            np.testing.assert_allclose(got, ref, rtol=rtol)
    e[shape[0] // 2, 1] = np.nan  # a NaN is reported, not hidden by the max
    assert np.isnan(cuda_svd.colmax(cp.asarray(e), False, False)[1])
    u = g()
    scaled = cp.asarray(u)
    cuda_svd.scale_cols(scaled, cp.asarray(s))
    np.testing.assert_allclose(scaled.get(), u / s, rtol=rtol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 3), (300, 40), (70, 700), (1, 1)])
def test_offmax_by_herk_matches_the_products_triangle(dtype, shape):
    """``offmax`` forms x^H x (x x^H for rows) by cuBLAS's herk/syrk, of which only the
    upper triangle in C order is written: it must read as NumPy's product does, for both
    orientations, an offset view and a NaN."""
    from tenloom.runtime.backends import cuda_svd
    from tenloom.runtime.kernels.gram_svd import _np_offmax

    assert cuda_svd._rank_k() is not None  # the herk path, not the GEMM behind it
    rng = np.random.default_rng(sum(shape) + 1)
    cplx = np.dtype(dtype).kind == "c"
    real = np.float32 if dtype in ("float32", "complex64") else np.float64
    x = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if cplx else 0)
    x = np.linalg.qr(x)[0] if shape[0] >= shape[1] else np.linalg.qr(x.T)[0].T
    # off orthonormal by about 0.1: far above float32's rounding of a sum over 700 terms,
    # and a conjugate or triangle mixed up would differ by as much
    x = (x * (1 + 0.1 * rng.standard_normal(x.shape))).astype(dtype)
    rtol = 1e-4 if real == np.float32 else 1e-10
    atol = 4 * max(shape) * float(np.finfo(real).eps)
    for rows in (False, True):
        got = cuda_svd.offmax(cp.asarray(x), rows)
        np.testing.assert_allclose(got, _np_offmax(x, rows), rtol=rtol, atol=atol)
    big = cp.asarray(np.concatenate([x, x]))  # an offset view: data.ptr past the start
    np.testing.assert_allclose(
        cuda_svd.offmax(big[shape[0] :], False), _np_offmax(x), rtol=rtol, atol=atol
    )
    y = x.copy()
    y[0, -1] = np.nan
    assert np.isnan(cuda_svd.offmax(cp.asarray(y))[-1])
    if min(shape) > 1:
        with pytest.raises(ValueError, match="C-contiguous"):
            cuda_svd.offmax(cp.asarray(x).T)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("transposed", [False, True])
def test_gram_by_herk_is_the_products_upper_triangle(dtype, transposed):
    """``gram`` (herk) sets x^H x's upper triangle in C order, the one eigh(UPLO="U") reads,
    for a C-ordered matrix and a wide one's transpose (copied first); its eigenvalues match
    NumPy's."""
    from tenloom.runtime.backends import cuda_svd

    rng = np.random.default_rng(21)
    cplx = np.dtype(dtype).kind == "c"
    real = np.float32 if dtype in ("float32", "complex64") else np.float64
    x = rng.standard_normal((90, 60)) + (1j * rng.standard_normal((90, 60)) if cplx else 0)
    x = x.astype(dtype)
    dev = cp.asarray(x.T.copy()).T if transposed else cp.asarray(x)
    g = cuda_svd.gram(dev).get()
    want = x.conj().T @ x
    rtol = 1e-4 if real == np.float32 else 1e-12
    iu = np.triu_indices(60)
    np.testing.assert_allclose(g[iu], want[iu], rtol=rtol, atol=rtol * np.abs(want).max())
    w = cp.linalg.eigh(cuda_svd.gram(dev), UPLO="U")[0].get()
    np.testing.assert_allclose(w, np.linalg.eigvalsh(want), rtol=10 * rtol, atol=rtol * 100)
