"""The semiring contraction kernels (runtime/kernels/semiring.py; CUDA RawKernels in
runtime/backends/cuda_semiring.py; the OpenCL kernel in runtime/backends/opencl/semiring.py)
against a brute-force NumPy reference that broadcasts every operand over all labels and reduces:
every semiring and dtype, batched/lone/kept labels, zero sizes, k = 1, 0-d outputs, NaN and
infinities, the log-sum-exp underflow case, counting ties, raw and pair counting operands, and
the tropical-gemm path against the blocked NumPy one."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import require_cuda
from tenloom.graph.errors import DTypeError, OptionError, ShapeError
from tenloom.graph.ops.semiring import semiring_ref, zero_of
from tenloom.runtime.kernels import semiring as S

import tenloom as tl

RNG = np.random.default_rng(24)
DTYPES = {
    "max_plus": ("float32", "float64", "int32", "int64"),
    "min_plus": ("float32", "float64", "int32", "int64"),
    "max_times": ("float32", "float64", "int32", "int64"),
    "log_sum_exp": ("float32", "float64"),
    "count": ("float64",),
}
CASES = [  # (a labels, b labels, out): sizes from SIZES
    ((0, 1), (1, 2), (0, 2)),  # matmul
    ((3, 0, 1), (3, 1, 2), (3, 2, 0)),  # batched, output transposed
    ((0, 1, 4), (5, 1, 2), (2, 0)),  # a lone label in each operand
    ((0, 1), (0, 1), ()),  # a full inner product: 0-d output
    ((0,), (2,), (2, 0)),  # outer product: nothing summed (k = 1)
    ((0, 1), (1, 2), (0, 1, 2)),  # the summed label kept: k = 1 again
    ((1, 0), (2, 1), (0, 2)),  # operands transposed
]
SIZES = {0: 5, 1: 7, 2: 6, 3: 3, 4: 2, 5: 4}
CASE_IDS = ["matmul", "batched", "lone", "inner", "outer", "kept", "transposed"]


# ---- the brute-force reference ------------------------------------------------------------


def _full(x, term, labels, sizes):
    """``x`` (labelled ``term``) broadcast over all ``labels``, in their order."""
    order = sorted(range(len(term)), key=lambda i: labels.index(term[i]))
    x = np.transpose(x, order)
    shape = [sizes[lab] if lab in term else 1 for lab in labels]
    return np.broadcast_to(x.reshape(shape), [sizes[lab] for lab in labels])


def brute(terms, out, semiring, *xs):
    """Every operand broadcast over every label, combined with the semiring's product, the
    labels not in ``out`` reduced with its addition (count: raw operands count 1 per entry,
    0 for -inf; ties by exact equality; a NaN value counts 0)."""
    labels = sorted({lab for t in terms for lab in t})
    sizes: dict = {}
    parts = []
    counting = semiring == "count"
    for x, t in zip(xs, terms):
        pair = counting and x.ndim == len(t) + 1
        v = x[..., 0] if pair else x
        c = x[..., 1] if pair else np.where(v == -np.inf, 0.0, 1.0)
        sizes.update(zip(t, v.shape))
        parts.append((v, c, t))
    dt = np.dtype(np.float64) if counting else np.result_type(*xs)
    wide = np.float64 if semiring == "log_sum_exp" else dt
    with np.errstate(all="ignore"):
        tot, cnt = None, np.ones([sizes[lab] for lab in labels])
        for v, c, t in parts:
            a = _full(v.astype(wide), t, labels, sizes)
            tot = a.copy() if tot is None else (tot * a if semiring == "max_times" else tot + a)
            cnt = cnt * _full(c, t, labels, sizes)
        axes = tuple(i for i, lab in enumerate(labels) if lab not in out)
        kept = [lab for lab in labels if lab in out]
        if any(tot.shape[i] == 0 for i in axes):  # empty sums: the zero
            shape = [n for i, n in enumerate(tot.shape) if i not in axes]
            r, c = np.full(shape, zero_of(semiring, dt), dt), np.zeros(shape)
        elif semiring == "log_sum_exp":
            m = np.max(tot, axis=axes, keepdims=True)
            shift = np.where(np.isfinite(m), m, 0)
            r = np.log(np.sum(np.exp(tot - shift), axis=axes)) + np.squeeze(shift, axes)
        else:
            r = (np.min if semiring == "min_plus" else np.max)(tot, axis=axes)
            if counting:
                hit = tot == np.expand_dims(r, axes)
                c = np.sum(np.where(hit, cnt, 0.0), axis=axes)
        perm = [kept.index(lab) for lab in out]
        r = np.asarray(r).transpose(perm).astype(dt)
        if counting:
            r = np.stack([r, np.asarray(c).transpose(perm)], -1)
    return r


def operand(shape, semiring, dt, rng=RNG, scale=3.0):
    """Random entries: integer-valued for integers and counting (ties), >= 0 for max_times."""
    x = rng.standard_normal(shape) * scale
    if dt.startswith("int") or semiring == "count":
        x = np.round(x)
    if semiring == "max_times":
        x = np.abs(x)
    return x.astype(dt)


def check(actual, expected):
    assert isinstance(actual, np.ndarray)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    if expected.dtype.kind in "iu":
        np.testing.assert_array_equal(actual, expected)
        return
    rtol = 2e-6 if expected.dtype == np.float32 else 1e-12
    finite = np.abs(expected[np.isfinite(expected)])
    atol = rtol * max(1.0, float(finite.max()) if finite.size else 1.0)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)


@pytest.fixture(params=["tropical_gemm", "numpy"])
def path(request, monkeypatch):
    """Both CPU GEMMs: tropical-gemm (at every size) and the blocked NumPy kernel."""
    if request.param == "tropical_gemm":
        if S.tropical_gemm is None:
            pytest.skip("tropical-gemm is not installed")
        monkeypatch.setattr(S, "TROPICAL_MIN_MADDS", 0)
    else:
        monkeypatch.setattr(S, "USE_TROPICAL_GEMM", False)
    return request.param


def _pairs():
    return [(s, d) for s in S.SEMIRINGS for d in DTYPES[s]]


@pytest.mark.parametrize("semiring,dtype", _pairs())
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_pair_kernel_matches_brute_force(semiring, dtype, case, path):
    ta, tb, out = case
    a = operand([SIZES[lab] for lab in ta], semiring, dtype)
    b = operand([SIZES[lab] for lab in tb], semiring, dtype)
    want = brute((ta, tb), out, semiring, a, b)
    check(S.pair_kernel(ta, tb, out, semiring)(a, b), want)
    shapes = (a.shape, b.shape)  # the layout worked out up front
    check(S.pair_kernel(ta, tb, out, semiring, shapes)(a, b), want)


@pytest.mark.parametrize("semiring", S.SEMIRINGS)
def test_einsum_kernel_one_and_many_operands(semiring, path):
    dt = DTYPES[semiring][-1]
    x = operand((4, 5, 3), semiring, dt)
    y = operand((3, 6), semiring, dt)
    z = operand((6, 4, 2), semiring, dt)
    w = operand((2,), semiring, dt)
    for terms, out, xs in [
        (((0, 1, 2),), (2, 0), (x,)),  # a reduction and a transpose
        (((0, 1, 2),), (), (x,)),  # everything reduced
        (((0, 1, 2),), (0, 1, 2), (x,)),  # nothing to do
        (((0, 1, 2), (2, 3), (3, 0, 4)), (1, 4), (x, y, z)),
        (((0, 1, 2), (2, 3), (3, 0, 4), (4,)), (), (x, y, z, w)),
        (((0, 1, 2), (2, 3), (3, 0, 4), (4,)), (0, 1, 2, 3, 4), (x, y, z, w)),
    ]:
        check(S.einsum_kernel(terms, out, semiring)(*xs), brute(terms, out, semiring, *xs))


def test_einsum_kernel_takes_diagonals_of_repeated_labels():
    x = operand((4, 4, 3), "max_plus", "float64")
    y = operand((3, 4), "max_plus", "float64")
    got = S.einsum_kernel(((0, 0, 1), (1, 0)), (0,), "max_plus")(x, y)
    diag = np.einsum("iij->ij", x)
    check(got, brute(((0, 1), (1, 0)), (0,), "max_plus", diag, y))


@pytest.mark.parametrize("semiring,dtype", [p for p in _pairs() if p[1].startswith("float")])
def test_nan_and_infinities_propagate_as_the_reference(semiring, dtype, path):
    a = operand((9, 40), semiring, dtype)
    b = operand((40, 11), semiring, dtype)
    # NaN, both infinities (inf - inf and 0 * inf terms), rows and columns of them, zeros
    a[0, 3], a[1, :], a[2, 5], a[3, 7], a[4, :] = np.nan, -np.inf, np.inf, -np.inf, 0.0
    b[3, 1], b[:, 2], b[5, 3], b[7, 4], b[9, 5] = np.nan, -np.inf, -np.inf, np.inf, np.inf
    b[:, 6] = 0.0
    want = brute(((0, 1), (1, 2)), (0, 2), semiring, a, b)
    assert np.isnan(want).any() and np.isinf(want).any()
    check(S.pair_kernel((0, 1), (1, 2), (0, 2), semiring)(a, b), want)


def test_tropical_gemm_serves_only_where_its_answer_is_right(monkeypatch):
    """It skips NaN terms, starts integer maxima at a sentinel and max-times at 0: those inputs
    go to the NumPy kernel (a spy counts its calls); the results are right either way."""
    if S.tropical_gemm is None:
        pytest.skip("tropical-gemm is not installed")
    calls = []
    real = S._tropical
    monkeypatch.setattr(S, "_tropical", lambda a, b, s: calls.append(s) or real(a, b, s))
    monkeypatch.setattr(S, "TROPICAL_MIN_MADDS", 0)
    i32, i64 = np.iinfo(np.int32), np.iinfo(np.int64)
    cases = [  # (semiring, a, b, whether tropical-gemm may run)
        ("max_plus", np.full((3, 4), 1.5, np.float32), np.ones((4, 2), np.float32), True),
        ("max_plus", np.array([[np.nan, 1.0]]), np.ones((2, 2)), False),
        ("max_plus", np.array([[-np.inf, 1.0]]), np.array([[np.inf], [0.0]]), False),
        ("min_plus", np.array([[np.inf, 1.0]]), np.array([[-np.inf], [0.0]]), False),
        ("max_plus", np.array([[-np.inf, 1.0]]), np.array([[-np.inf], [0.0]]), True),
        ("max_times", np.array([[-2.0, -1.0]]), np.array([[3.0], [4.0]]), False),
        ("max_times", np.array([[0.0, 1.0]]), np.array([[np.inf], [2.0]]), False),
        ("max_times", np.array([[0.5, 1.0]]), np.array([[np.inf], [2.0]]), True),
        ("max_plus", np.array([[-6 * 10**8] * 2], np.int32), np.full((2, 2), -6 * 10**8), False),
        ("max_plus", np.array([[-(2**59)] * 2], np.int64), np.full((2, 1), -(2**59)), True),
        ("max_plus", np.array([[-(2**60)] * 2], np.int64), np.full((2, 1), -(2**59)), False),
        ("min_plus", np.array([[6 * 10**8] * 2], np.int32), np.full((2, 2), 6 * 10**8), False),
        ("max_plus", np.array([[i32.max, 1]], np.int32), np.ones((2, 2), np.int32), False),
        ("max_plus", np.array([[i64.min, 0]], np.int64), np.full((2, 2), -1, np.int64), False),
        ("max_times", np.array([[2**20, 3]], np.int32), np.full((2, 2), 2**12), False),
        ("max_times", np.array([[2**10, 3]], np.int32), np.full((2, 2), 2**12), True),
        ("max_times", np.array([[-2, 3]], np.int32), np.full((2, 2), 5), False),
    ]
    for semiring, a, b, fits in cases:
        b = b.astype(a.dtype)
        calls.clear()
        got = S.pair_kernel((0, 1), (1, 2), (0, 2), semiring)(a, b)
        assert bool(calls) == fits, (semiring, a, b)
        check(got, brute(((0, 1), (1, 2)), (0, 2), semiring, a, b))


def test_max_times_with_negative_entries_is_the_max_of_products(path):
    """One GEMM (no lone labels): the max of the products, however negative."""
    a = RNG.standard_normal((6, 50))
    b = -np.abs(RNG.standard_normal((50, 4)))
    got = S.pair_kernel((0, 1), (1, 2), (0, 2), "max_times")(a, b)
    check(got, (a[:, :, None] * b[None]).max(1))
    neg = -np.abs(a)  # every product < 0: not clipped at the empty sum's 0
    got = S.pair_kernel((0, 1), (1, 2), (0, 2), "max_times")(neg, np.abs(b))
    assert (got < 0).all()
    check(got, (neg[:, :, None] * np.abs(b)[None]).max(1))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_log_sum_exp_underflow_is_recomputed(dtype):
    big = 1000.0 if dtype == "float64" else 150.0
    a = np.array([[0.0, -big], [0.0, 0.0], [-np.inf, -np.inf]], dtype)
    b = np.array([[-big, 0.0], [0.0, -np.inf]], dtype)
    got = S.pair_kernel((0, 1), (1, 2), (0, 2), "log_sum_exp")(a, b)
    want = brute(((0, 1), (1, 2)), (0, 2), "log_sum_exp", a, b)
    assert np.isfinite(want[0, 0]) and want[2, 0] == -np.inf
    check(got, want)
    assert got[0, 0] == pytest.approx(-big + np.log(2.0), rel=1e-6)


def test_log_sum_exp_with_wide_ranges_and_many_underflowing_entries():
    """Blocks of rows and columns whose large terms never meet: most shifted sums underflow
    (the path that first finds the entries with any finite term by one more GEMM), some
    entries have no finite term at all, others are ordinary."""
    k = 64
    a = np.full((12, k), -np.inf)
    b = np.full((k, 10), -np.inf)
    for i in range(12):  # row i large on its own block of k, small on a shared one
        a[i, (i % 4) * 8 : (i % 4) * 8 + 8] = 50.0 + RNG.standard_normal(8)
        a[i, 40:48] = -900.0 + RNG.standard_normal(8)
    for j in range(10):
        b[(j % 4) * 8 + 32 : (j % 4) * 8 + 40, j] = 60.0 + RNG.standard_normal(8)
        b[40:48, j] = -800.0 + RNG.standard_normal(8)
    b[:, 9] = -np.inf  # a column with no finite term
    a[5, 40:48] = -np.inf  # a row whose only meeting terms are -inf
    want = brute(((0, 1), (1, 2)), (0, 2), "log_sum_exp", a, b)
    check(S.pair_kernel((0, 1), (1, 2), (0, 2), "log_sum_exp")(a, b), want)
    a3, b3 = np.stack([a, a[::-1]]), np.stack([b, b[:, ::-1]])  # batched
    want3 = brute(((3, 0, 1), (3, 1, 2)), (3, 0, 2), "log_sum_exp", a3, b3)
    check(S.pair_kernel((3, 0, 1), (3, 1, 2), (3, 0, 2), "log_sum_exp")(a3, b3), want3)


def test_log_sum_exp_float32_wide_range_random():
    a = (RNG.standard_normal((20, 300)) * 40).astype(np.float32)
    b = (RNG.standard_normal((300, 30)) * 40).astype(np.float32)
    got = S.pair_kernel((0, 1), (1, 2), (0, 2), "log_sum_exp")(a, b)
    check(got, brute(((0, 1), (1, 2)), (0, 2), "log_sum_exp", a, b))


def test_count_ties_raw_and_pair_operands():
    a = RNG.integers(0, 2, (6, 30)).astype(np.float64)  # many ties
    b = RNG.integers(0, 2, (30, 5)).astype(np.int32)  # raw operands of any real dtype
    a[0, :] = -np.inf  # no configuration: (-inf, 0)
    a[1, :4] = -np.inf  # raw -inf entries count 0
    pa = np.stack([a, RNG.integers(1, 4, a.shape).astype(np.float64)], -1)
    pb = np.stack([b.astype(np.float64), RNG.integers(1, 4, b.shape).astype(np.float64)], -1)
    k = S.pair_kernel((0, 1), (1, 2), (0, 2), "count")
    for x, y in [(a, b), (pa, b), (a, pb), (pa, pb)]:
        got = k(x, y)
        want = brute(((0, 1), (1, 2)), (0, 2), "count", x, y)
        assert got.dtype == np.float64 and got.shape == (6, 5, 2)
        np.testing.assert_array_equal(got, want)
    raw = k(a, b)
    assert (raw[0, :, 0] == -np.inf).all() and (raw[0, :, 1] == 0).all()
    assert (raw[..., 1] > 1).any()  # ties were counted


def test_count_many_blocks_and_lone_labels(monkeypatch):
    monkeypatch.setattr(S, "BLOCK_BYTES", 4096)  # many row and k blocks to merge
    a = RNG.integers(-2, 2, (2, 13, 37, 3)).astype(np.float64)
    b = RNG.integers(-2, 2, (2, 37, 11)).astype(np.float64)
    want = brute(((0, 1, 2, 3), (0, 2, 4)), (1, 0, 4), "count", a, b)
    got = S.pair_kernel((0, 1, 2, 3), (0, 2, 4), (1, 0, 4), "count")(a, b)
    np.testing.assert_array_equal(got, want)


def test_blocked_kernel_merges_row_and_k_blocks(monkeypatch):
    monkeypatch.setattr(S, "USE_TROPICAL_GEMM", False)
    monkeypatch.setattr(S, "BLOCK_BYTES", 2048)
    for semiring in ("max_plus", "min_plus", "max_times"):
        a = operand((3, 17, 45), semiring, "float64")
        b = operand((3, 45, 9), semiring, "float64")
        a[1, 3, 20] = np.nan  # a NaN term in a later k block of a later row block
        want = brute(((0, 1, 2), (0, 2, 3)), (0, 1, 3), semiring, a, b)
        check(S.gemm(a, b, semiring), want)


@pytest.mark.parametrize("semiring", S.SEMIRINGS)
def test_zero_sizes_give_the_semirings_zero(semiring, path):
    dt = DTYPES[semiring][0]
    for ta, tb, out, shapes in [
        ((0, 1), (1, 2), (0, 2), ((3, 0), (0, 4))),  # k = 0: every entry an empty sum
        ((0, 1), (1, 2), (0, 2), ((0, 5), (5, 4))),  # no rows
        ((0, 1, 3), (1, 2), (0, 2), ((3, 5, 0), (5, 4))),  # a lone label of size 0
        ((0, 1), (1, 2), (), ((3, 0), (0, 4))),  # 0-d output of an empty network
    ]:
        a = operand(shapes[0], semiring, dt)
        b = operand(shapes[1], semiring, dt)
        want = brute((ta, tb), out, semiring, a, b)
        check(S.pair_kernel(ta, tb, out, semiring)(a, b), want)
    got = S.einsum_kernel(((0, 1),), (0,), semiring)(operand((3, 0), semiring, dt))
    assert got.shape == ((3, 2) if semiring == "count" else (3,))
    v = got[..., 0] if semiring == "count" else got
    assert (v == zero_of(semiring, v.dtype)).all()


@pytest.mark.parametrize("semiring", S.SEMIRINGS)
def test_semiring_add_and_reduce(semiring):
    dt = DTYPES[semiring][-1]
    x = operand((4, 6, 5), semiring, dt)
    if semiring == "count":
        x = np.stack([x, RNG.integers(1, 3, x.shape).astype(np.float64)], -1)
    for axes in [(1,), (0, 2), (0, 1, 2), ()]:
        want = brute(((0, 1, 2),), tuple(i for i in range(3) if i not in axes), semiring, x)
        check(np.asarray(S.reduce(x, axes, semiring)), want)
    y = operand((4, 6), semiring, dt)
    if semiring == "count":
        raw = S.reduce(y, (1,), semiring, raw=True)
        check(raw, brute(((0, 1),), (0,), semiring, y))
        y = np.stack([y, RNG.integers(1, 3, y.shape).astype(np.float64)], -1)
    y[0, 0] = y[1, 1] = x[0, 0, 0]  # ties (count: equal values add their counts)
    both = np.stack([x[:, :, 0], y])  # labels (stack, 0, 1): the sum over the stack
    want = brute(((2, 0, 1),), (0, 1), semiring, both)
    check(S.semiring_add(x[:, :, 0], y, semiring), want)


def test_public_gemm_on_count_pairs():
    a = np.stack([RNG.integers(0, 3, (2, 4, 6)), RNG.integers(1, 3, (2, 4, 6))], -1) * 1.0
    b = np.stack([RNG.integers(0, 3, (2, 6, 5)), RNG.integers(1, 3, (2, 6, 5))], -1) * 1.0
    want = brute(((0, 1, 2), (0, 2, 3)), (0, 1, 3), "count", a, b)
    np.testing.assert_array_equal(S.gemm(a, b, "count"), want)


def test_errors_are_typed_and_name_the_problem():
    a, b = np.ones((2, 3)), np.ones((3, 4))
    with pytest.raises(OptionError, match="semiring"):
        S.pair_kernel((0, 1), (1, 2), (0, 2), "max_min")
    with pytest.raises(OptionError, match="semiring"):
        S.einsum_kernel(((0, 1),), (0,), "plus_times")
    with pytest.raises(DTypeError, match="log_sum_exp.*int64"):
        S.pair_kernel((0, 1), (1, 2), (0, 2), "log_sum_exp")(a.astype(int), b.astype(int))
    with pytest.raises(DTypeError, match="max_plus.*complex128"):
        S.pair_kernel((0, 1), (1, 2), (0, 2), "max_plus")(a + 0j, b + 0j)
    with pytest.raises(DTypeError, match="count.*complex"):
        S.einsum_kernel(((0, 1),), (0,), "count")(a + 0j)
    with pytest.raises(ShapeError, match=r"label 1 has size 3 and 4.*\(2, 3\) and \(4, 4\)"):
        S.pair_kernel((0, 1), (1, 2), (0, 2), "max_plus")(a, np.ones((4, 4)))
    with pytest.raises(ShapeError, match=r"operand b has shape \(3,\) for 2 labels"):
        S.pair_kernel((0, 1), (1, 2), (0, 2), "max_plus")(a, np.ones(3))
    with pytest.raises(ShapeError, match="output labels"):
        S.pair_kernel((0, 1), (1, 2), (0, 7), "max_plus")(a, b)
    with pytest.raises(ShapeError, match="2 operands for 3 terms"):
        S.einsum_kernel(((0,), (0,), (0,)), (), "max_plus")(np.ones(2), np.ones(2))
    with pytest.raises(ShapeError, match=r"operand of shape \(2, 3\) for labels \(0,\)"):
        S.einsum_kernel(((0,), (0,)), (), "max_plus")(a, np.ones(2))
    with pytest.raises(ShapeError, match="no operands"):
        S.einsum_kernel((), (), "max_plus")
    with pytest.raises(ShapeError, match=r"output labels \(5,\) not in operand"):
        S.einsum_kernel(((0, 1),), (5,), "max_plus")(a)


@pytest.mark.parametrize("semiring", S.SEMIRINGS)
def test_cpu_backend_runs_the_kernels(semiring, monkeypatch):
    """tl.einsum(semiring=) on the CPU backend goes through these kernels (a spy), pairwise
    after the order pass and n-ary without it, and agrees with the op's reference."""
    from tenloom.graph.ops import Op
    from tenloom.runtime.backends.cpu import Backend

    assert Op.SEMIRING_EINSUM in Backend.KERNELS
    built = []
    real = S.semiring_kernel
    monkeypatch.setattr(S, "semiring_kernel", lambda *a: built.append(a) or real(*a))
    dt = DTYPES[semiring][-1]
    x, y, z = (operand(s, semiring, dt) for s in ((5, 6), (6, 7), (7, 3)))
    terms = ((0, 1), (1, 2), (2, 3))
    want = semiring_ref([x, y, z], terms, (0, 3), semiring)
    for optimize in ("greedy", False):
        t = tl.einsum("ij,jk,kl->il", *map(tl.asarray, (x, y, z)), semiring=semiring)
        check(t.evaluate(optimize=optimize, device="cpu"), want)
    assert built


# ---- CUDA (the RawKernels; run on a GPU machine) -------------------------------------------


@pytest.mark.cuda
@pytest.mark.parametrize("semiring,dtype", _pairs())
def test_cuda_kernels_match_brute_force(semiring, dtype):
    cp = require_cuda()
    from tenloom.runtime.backends import cuda_semiring

    rng = np.random.default_rng(5)
    for nb, m, k, n in [(1, 70, 33, 65), (3, 5, 17, 130), (2, 64, 64, 64), (1, 1, 2, 1)]:
        a = operand((nb, m, k), semiring, dtype, rng)
        b = operand((nb, k, n), semiring, dtype, rng)
        if dtype.startswith("float"):
            a[0, 0, 1], a[-1, -1, :] = np.nan, -np.inf
            b[0, 1, -1], b[-1, 0, 0] = np.inf, np.inf
        want = brute(((0, 1, 2), (0, 2, 3)), (0, 1, 3), semiring, a, b)
        for use_raw in (True, False):  # the RawKernels and the CuPy path
            S.USE_CUDA_KERNELS = use_raw
            try:
                got = S.pair_kernel((0, 1, 2), (0, 2, 3), (0, 1, 3), semiring)(
                    cp.asarray(a), cp.asarray(b)
                )
            finally:
                S.USE_CUDA_KERNELS = True
            check(cp.asnumpy(got), want)
    if semiring in S.TROPICAL:
        direct = cuda_semiring.gemm(cp.asarray(a), cp.asarray(b), semiring)
        check(cp.asnumpy(direct), want)


@pytest.mark.cuda
def test_cuda_count_with_pair_operands_and_lone_labels():
    cp = require_cuda()
    a = np.stack([RNG.integers(0, 2, (4, 80, 3)), RNG.integers(1, 3, (4, 80, 3))], -1) * 1.0
    b = RNG.integers(0, 2, (80, 70)).astype(np.float64)
    b[:3] = -np.inf
    want = brute(((0, 1, 2), (1, 3)), (3, 0), "count", a, b)
    got = S.pair_kernel((0, 1, 2), (1, 3), (3, 0), "count")(cp.asarray(a), cp.asarray(b))
    np.testing.assert_array_equal(cp.asnumpy(got), want)


@pytest.mark.cuda
@pytest.mark.parametrize("semiring", S.SEMIRINGS)
def test_cuda_backend_runs_the_kernels(semiring):
    require_cuda()
    dt = DTYPES[semiring][-1]
    x, y, z = (operand(s, semiring, dt) for s in ((50, 66), (66, 70), (70, 3)))
    want = semiring_ref([x, y, z], ((0, 1), (1, 2), (2, 3)), (0, 3), semiring)
    t = tl.einsum("ij,jk,kl->il", *map(tl.asarray, (x, y, z)), semiring=semiring)
    check(t.evaluate(device="cuda:0"), want)


# ---- OpenCL (PoCL here) --------------------------------------------------------------------


def _opencl_device() -> str | None:
    try:
        from tenloom.runtime.backends import opencl

        found = opencl.list_devices()
    except Exception:  # no pyopencl, or no platform
        return None
    return f"opencl:{found[0][0]}" if found else None


OPENCL = _opencl_device()
needs_opencl = pytest.mark.skipif(OPENCL is None, reason="no OpenCL device")


def _on_opencl(expr, xs, semiring, monkeypatch, **kw):
    """``tl.einsum(expr, *xs, semiring=)`` evaluated on OpenCL, checked to run the OpenCL
    semiring kernel (a spy)."""
    from tenloom.runtime.backends.opencl import semiring as OS

    built = []
    real = OS.semiring_kernel
    monkeypatch.setattr(
        OS, "semiring_kernel", lambda be, node: built.append(node) or real(be, node)
    )
    got = tl.einsum(expr, *map(tl.asarray, xs), semiring=semiring).evaluate(device=OPENCL, **kw)
    assert built
    return got


@pytest.mark.opencl
@needs_opencl
@pytest.mark.parametrize("semiring,dtype", _pairs())
def test_opencl_networks_match_brute_force(semiring, dtype, monkeypatch):
    rng = np.random.default_rng(3)
    x = operand((3, 17, 5), semiring, dtype, rng)  # b i l: l lone
    y = operand((3, 5, 17, 20), semiring, dtype, rng)  # b l j k
    z = operand((20, 4), semiring, dtype, rng)
    if dtype.startswith("float"):  # (max_times: defined for entries >= 0 only)
        low = 0.0 if semiring == "max_times" else -np.inf
        x[0, 0, 1], x[1, 2, :], y[2, 0, 3, 4], z[5, 1] = np.nan, low, np.inf, low
    terms, out = ((0, 1, 2), (0, 2, 3, 4), (4, 5)), (1, 0, 5)
    want = brute(terms, out, semiring, x, y, z)
    for optimize in ("greedy", False):
        got = _on_opencl("bil,bljk,km->ibm", (x, y, z), semiring, monkeypatch, optimize=optimize)
        check(got, want)


@pytest.mark.opencl
@needs_opencl
@pytest.mark.parametrize("semiring", S.SEMIRINGS)
def test_opencl_reductions_zero_sizes_and_outer_products(semiring, monkeypatch):
    dt = DTYPES[semiring][-1]
    x = operand((4, 6), semiring, dt)
    check(_on_opencl("ij->j", (x,), semiring, monkeypatch), brute(((0, 1),), (1,), semiring, x))
    check(_on_opencl("ij->ji", (x,), semiring, monkeypatch), brute(((0, 1),), (1, 0), semiring, x))
    y = operand((5,), semiring, dt)
    want = brute(((0, 1), (2,)), (2, 0, 1), semiring, x, y)
    check(_on_opencl("ij,k->kij", (x, y), semiring, monkeypatch), want)
    e = operand((4, 0), semiring, dt)
    f = operand((0, 3), semiring, dt)
    want = brute(((0, 1), (1, 2)), (0, 2), semiring, e, f)
    check(_on_opencl("ij,jk->ik", (e, f), semiring, monkeypatch), want)


@pytest.mark.opencl
@needs_opencl
def test_opencl_log_sum_exp_does_not_underflow(monkeypatch):
    a = np.array([[0.0, -1000.0], [-np.inf, -np.inf], [np.inf, 0.0]])
    b = np.array([[-1000.0, 0.0], [0.0, 1.0]])
    want = brute(((0, 1), (1, 2)), (0, 2), "log_sum_exp", a, b)
    check(_on_opencl("ij,jk->ik", (a, b), "log_sum_exp", monkeypatch), want)


def _cuda_as_opencl(source: str) -> str:
    """A CUDA RawKernel source of cuda_semiring.py as OpenCL C (the few constructs it uses)."""
    s = source.replace('extern "C" __global__ void', "__kernel void")
    s = s.replace("__device__ __forceinline__", "inline").replace("__restrict__", "")
    s = s.replace("long long", "long").replace("__shared__", "__local")
    s = re.sub(r"\b(\d+)LL\b", r"\1L", s)
    s = s.replace("__syncthreads()", "barrier(CLK_LOCAL_MEM_FENCE)")
    for axis, i in (("x", 0), ("y", 1), ("z", 2)):
        s = s.replace(f"threadIdx.{axis}", f"(int)get_local_id({i})")
        s = s.replace(f"blockIdx.{axis}", f"(long)get_group_id({i})")
        s = s.replace(f"gridDim.{axis}", f"(long)get_num_groups({i})")
    s = re.sub(r"(const )?(T|double)\* ", lambda m: f"__global {m.group(1) or ''}{m.group(2)}* ", s)
    return "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n" + s


@pytest.mark.opencl
@needs_opencl
def test_cuda_kernel_sources_translated_to_opencl():
    """The RawKernels' logic (tiles, bounds, grid-stride loops over batches and row tiles,
    NaN, wrapping integers, counting) checked without a GPU: their sources, translated to
    OpenCL C, run on the OpenCL device with CUDA's grid; the GPU itself runs them in
    test_cuda_kernels_match_brute_force."""
    import pyopencl as cl
    from tenloom.runtime.backends import cuda_semiring as C
    from tenloom.runtime.backends import get_backend

    be = get_backend("opencl", int(OPENCL.split(":")[1]))
    if not be.fp64:
        pytest.skip("the device has no float64")
    ctx, q = be.context, be.queue
    rng = np.random.default_rng(9)

    def buf(x):
        flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
        return cl.Buffer(ctx, flags, hostbuf=np.ascontiguousarray(x))

    def launch(source, name, grid, args):
        knl = getattr(cl.Program(ctx, _cuda_as_opencl(source)).build(), name)
        t = C.THREADS
        knl(q, (grid[0] * t, grid[1] * t, grid[2]), (t, t, 1), *args)

    shapes = [(1, 70, 33, 65, False), (3, 5, 17, 130, False), (2, 130, 40, 64, True)]
    sizes = lambda nb, m, k, n: tuple(np.int64(v) for v in (nb, m, n, k))  # noqa: E731
    for semiring, dtype in _pairs():
        if semiring not in S.TROPICAL:
            continue
        source = C._tropical_source(semiring, dtype)
        for nb, m, k, n, one_block in shapes:
            a = operand((nb, m, k), semiring, dtype, rng)
            b = operand((nb, k, n), semiring, dtype, rng)
            if dtype.startswith("float"):
                a[0, 0, 1], a[-1, -1, :], b[0, 1, -1], b[-1, 0, 0] = np.nan, -np.inf, np.inf, 0
            else:
                a[0, 0, 0] = np.iinfo(dtype).max  # sums and products wrap around
            c = np.empty((nb, m, n), dtype)
            out = buf(c)
            grid = C._grid(nb, m, n)
            grid = (grid[0], 1, 1) if one_block else grid  # the grid-stride loops
            launch(source, "semiring_gemm", grid, (buf(a), buf(b), out, *sizes(nb, m, k, n)))
            cl.enqueue_copy(q, c, out)
            want = brute(((0, 1, 2), (0, 2, 3)), (0, 1, 3), semiring, a, b)
            check(c, want)
    for nb, m, k, n, one_block in shapes:
        for pa, pb in ((False, False), (True, False), (False, True), (True, True)):
            av = np.round(rng.standard_normal((nb, m, k)))
            bv = np.round(rng.standard_normal((nb, k, n)))
            av[0, 0, :3], av[0, 1, 2] = -np.inf, np.nan
            ac = rng.integers(1, 3, av.shape).astype(float) if pa else av
            bc = rng.integers(1, 3, bv.shape).astype(float) if pb else bv
            cv, cc = np.empty((nb, m, n)), np.empty((nb, m, n))
            bufs = (buf(av), buf(ac), buf(bv), buf(bc), buf(cv), buf(cc))
            grid = C._grid(nb, m, n)
            grid = (grid[0], 1, 1) if one_block else grid
            args = (*bufs, np.int32(pa), np.int32(pb), *sizes(nb, m, k, n))
            launch(C._count_source(), "count_gemm", grid, args)
            cl.enqueue_copy(q, cv, bufs[4])
            cl.enqueue_copy(q, cc, bufs[5])
            x = np.stack([av, ac], -1) if pa else av
            y = np.stack([bv, bc], -1) if pb else bv
            want = brute(((0, 1, 2), (0, 2, 3)), (0, 1, 3), "count", x, y)
            np.testing.assert_array_equal(np.stack([cv, cc], -1), want)


@pytest.mark.opencl
@needs_opencl
@pytest.mark.parametrize("tile", [16, 8])
def test_opencl_gemm_over_many_blocks_and_slices(tile, monkeypatch):
    """Stacks larger than a work-group's block and than a slice of k, with both work-group
    sizes the backend picks (8 on devices whose work-groups stay under 256)."""
    from tenloom.runtime.backends import get_backend

    be = get_backend("opencl", int(OPENCL.split(":")[1]))
    monkeypatch.setattr(be, "tile", tile)
    rng = np.random.default_rng(4)
    for semiring, dtype in _pairs():
        a = operand((2, 70, 37), semiring, dtype, rng)
        b = operand((2, 37, 130), semiring, dtype, rng)
        if dtype.startswith("float"):
            a[1, 65, 33], b[0, 20, 129] = np.nan, np.inf
        want = brute(((0, 1, 2), (0, 2, 3)), (0, 1, 3), semiring, a, b)
        check(_on_opencl("bij,bjk->bik", (a, b), semiring, monkeypatch), want)
