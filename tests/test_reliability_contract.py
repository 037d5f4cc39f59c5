"""Contractions compute what NumPy computes (issue 18, classes 2 and 3).

* Class 2: every partial result inside a contraction network -- a lone label summed first, a
  pairwise contraction, a merged call -- is in the dtype NumPy's einsum would use: the
  network's result dtype (bool sums are not ORs in a numeric network, int32 partial sums do
  not wrap in an int64 one), and a call that NumPy computes in a narrower dtype is not merged
  into a wider network.
* Class 3: IEEE values survive every rewrite of an elementwise op and of a single pairwise
  contraction: NaN and inf times a zero (0-d factors, outer products, scalings) stay NaN,
  complex infinities are multiplied as NumPy multiplies them. The oracle for one pairwise
  contraction is NumPy's einsum on it (for complex operands with non-finite values and a
  summed label, NumPy's own matmul and einsum disagree; BLAS is the reference there).
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from conftest import PIPELINE_VARIANTS
from helpers import device_params
from hypothesis import given
from hypothesis import strategies as st

import tenloom as tl

VARIANTS = sorted(k for k in PIPELINE_VARIANTS if k != "threads-2")


def _ev(t, variant="full"):
    return t.evaluate(passes=PIPELINE_VARIANTS[variant])


def _same(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)  # NaN positions equal, infinities signed


# ---- class 2: partial results in the network's dtype -----------------------------------------


@pytest.mark.parametrize("variant", VARIANTS)
def test_bool_operand_of_float_network_is_counted_not_ored(variant):
    b = np.ones((3, 3), dtype=bool)
    v = np.arange(1.0, 4.0)
    got = _ev((tl.asarray(b) @ v).sum(), variant)
    assert got == (b @ v).sum() == 18.0


@pytest.mark.parametrize("variant", VARIANTS)
def test_int32_lone_label_sums_in_int64_network(variant):
    a = np.full(2, 2**30, dtype=np.int32)
    b = np.ones(2, dtype=np.int64)
    _same(_ev(tl.einsum("a,b->b", a, b), variant), np.einsum("a,b->b", a, b))


@pytest.mark.parametrize("variant", VARIANTS)
def test_three_operand_network_of_mixed_ints(variant):
    a = np.full((2, 3), 2**30, dtype=np.int32)
    b = np.full((3, 2), 3, dtype=np.int32)
    c = np.ones((2, 2), dtype=np.int64)
    _same(_ev(tl.einsum("ij,jk,kl->il", a, b, c), variant), np.einsum("ij,jk,kl->il", a, b, c))


@pytest.mark.parametrize("variant", VARIANTS)
def test_narrow_call_feeding_a_wider_one_keeps_its_own_dtype(variant):
    """NumPy computes a bool matmul as an OR of ANDs before the float matmul widens it."""
    b1 = np.array([[1, 1], [0, 1]], dtype=bool)
    b2 = np.array([[1, 1], [1, 1]], dtype=bool)
    v = np.array([1.0, 2.0])
    want = (b1 @ b2) @ v
    _same(_ev((tl.asarray(b1) @ b2) @ v, variant), want)
    i1 = np.full((2, 2), 2**30, dtype=np.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = np.trace((i1 @ i1).astype(np.int64) @ np.ones((2, 2), np.int64))
    _same(_ev(tl.trace(tl.asarray(i1) @ i1 @ np.ones((2, 2), np.int64)), variant), want)


INT_DTYPES = ["bool", "int32", "int64", "float32", "float64", "complex64"]


@given(
    st.sampled_from(INT_DTYPES),
    st.sampled_from(INT_DTYPES),
    st.sampled_from(["ab,b->a", "ab,c->c", "a,b->b", "ab,bc->", "aab,b->a", "ab,ab->b"]),
    st.integers(0, 2**31 - 1),
)
def test_two_operand_networks_follow_numpys_einsum_dtype(d1, d2, eq, seed):
    rng = np.random.default_rng(seed)
    terms = eq.split("->")[0].split(",")
    size = {"a": 3, "b": 2, "c": 2}
    big = {"int32": 2**29, "int64": 2**40}
    arrays = []
    for term, dt in zip(terms, (d1, d2)):
        shape = tuple(size[c] for c in term)
        if dt == "bool":
            arr = rng.random(shape) < 0.7
        else:
            arr = (rng.integers(1, 4, shape) * big.get(dt, 1)).astype(dt)
        arrays.append(arr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = np.einsum(eq, *arrays)
    got = tl.einsum(eq, *arrays).evaluate()
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5)


# ---- class 3: IEEE values through contractions and simplifications ---------------------------

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.0])


@pytest.mark.parametrize("variant", VARIANTS)
def test_zero_dim_factor_keeps_nan_and_inf(variant):
    a = np.array([[np.nan, np.inf], [1.0, -np.inf]])
    with np.errstate(invalid="ignore"):
        _same(_ev(tl.einsum("ab,->ab", a, 0.0), variant), np.einsum("ab,->ab", a, 0.0))
        _same(_ev(tl.asarray(a) * 0.0, variant), a * 0.0)
        _same(_ev(tl.einsum("ab,->ba", a, -0.0), variant), np.einsum("ab,->ba", a, -0.0))


@pytest.mark.parametrize("variant", VARIANTS)
def test_complex_times_one_keeps_numpys_infinities(variant):
    z = np.array([complex(np.inf, 0), complex(0, np.inf), complex(np.nan, 1), 1 + 2j])
    with np.errstate(invalid="ignore"):
        _same(_ev(tl.asarray(z) * 1, variant), z * 1)
        _same(_ev(tl.asarray(z) / 1, variant), z / 1)
        _same(_ev(tl.asarray(z) - 0, variant), z - 0)
        _same(_ev(tl.asarray(z) ** 1, variant), z**1)


@pytest.mark.parametrize("variant", VARIANTS)
def test_complex_outer_with_infinities(variant):
    z = np.array([complex(np.inf, 0), complex(1, np.inf)])
    w = np.array([1 + 1j, 0j, complex(0, -np.inf)])
    with np.errstate(invalid="ignore"):
        _same(_ev(tl.einsum("i,j->ij", z, w), variant), np.einsum("i,j->ij", z, w))
        _same(
            _ev(tl.outer(z, w) if hasattr(tl, "outer") else tl.einsum("i,j->ij", z, w), variant),
            np.einsum("i,j->ij", z, w),
        )


SHAPES = [(1, 1, 1), (1, 1, 3), (3, 1, 1), (2, 1, 3), (1, 2, 1), (3, 2, 1), (1, 3, 4), (4, 3, 2)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("shape", SHAPES)
def test_single_pairwise_contraction_with_special_values(shape, dtype):
    """Every GEMM shape, including the degenerate ones BLAS takes shortcuts on, against
    NumPy's einsum of the same contraction (matmul for complex with a summed label)."""
    rng = np.random.default_rng(hash(shape) % 2**32)
    nl, nk, nr = shape
    for _trial in range(12):
        a = rng.choice(SPECIAL, (nl, nk))
        b = rng.choice(SPECIAL, (nk, nr))
        a, b = a.astype(dtype), b.astype(dtype)
        if dtype.startswith("complex"):  # special values in the imaginary parts too
            a.imag = rng.choice(SPECIAL, (nl, nk))
            b.imag = rng.choice(SPECIAL, (nk, nr))
        with np.errstate(all="ignore"):
            want = np.einsum("ij,jk->ik", a, b)
            if dtype.startswith("complex") and nk > 1:
                want = np.matmul(a, b)
            got = tl.einsum("ij,jk->ik", a, b).evaluate()
            got_t = tl.einsum("ij,jk->ki", a, b).evaluate()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{a}\n{b}")
        finite = ~np.isnan(want)
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5)
        np.testing.assert_array_equal(np.isnan(got_t), np.isnan(want.T))


@pytest.mark.parametrize("eq", ["ab,bc->ac", "abc,c->ab", "ab,cb->abc", "a,a->a", "ab,->ba"])
def test_pairwise_networks_in_all_variants_keep_nan(eq):
    terms = eq.split("->")[0].split(",")
    rng = np.random.default_rng(3)
    arrays = [rng.choice(SPECIAL, tuple(2 for _ in t)) for t in terms]
    with np.errstate(all="ignore"):
        want = np.einsum(eq, *arrays)
        for variant in VARIANTS:
            got = _ev(tl.einsum(eq, *arrays), variant)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=variant)
            np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want), err_msg=variant)


def test_three_operand_network_matches_numpy_on_the_same_tree():
    """For 3+ operands, which non-finite value appears depends on the tree; the oracle is
    NumPy running tenloom's pairwise tree (read off the optimized graph)."""
    from tenloom.graph.ops import Op

    rng = np.random.default_rng(7)
    arrays = [rng.choice(SPECIAL, (2, 2)) for _ in range(3)]
    t = tl.einsum("ij,jk,kl->il", *arrays)
    optimized = tl.explain(t).graph
    contracts = [n for n in optimized.order if n.op is Op.CONTRACT]
    assert len(contracts) == 2
    values: dict = {}
    with np.errstate(all="ignore"):
        for n in optimized.order:
            if n.op is Op.CONST:
                values[id(n)] = n.attrs[0].value
            elif n.op is Op.CONTRACT:
                a_l, b_l, out = n.attrs[:3]
                a, b = (values[id(x)] for x in n.inputs)
                values[id(n)] = np.einsum(a, list(a_l), b, list(b_l), list(out))
            elif n.inputs:
                from tenloom.graph.ops import op_def

                values[id(n)] = op_def(n.op).ref([values[id(x)] for x in n.inputs], n.attrs)
        want = values[id(optimized.outputs[0])]
        got = t.evaluate()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    np.testing.assert_array_equal(got[finite], want[finite])


def test_all_dtype_pairs_of_bool_and_ints_with_lone_labels():
    for d1, d2 in itertools.product(["bool", "int32", "int64"], repeat=2):
        a = np.ones((3, 2), dtype=d1)
        b = np.ones((2,), dtype=d2)
        want = np.einsum("ab,c->c", a, b)
        got = tl.einsum("ab,c->c", a, b).evaluate()
        _same(got, want)


# ---- the same on the device backends (OpenCL on PoCL in CI; CUDA on a GPU) --------------------


DEVICE_VARIANTS = [  # those this run has (TENLOOM_TEST_PIPELINES may keep only "full")
    v
    for v in ["full", "no-passes", "without-prereduce", "without-contraction_order"]
    if v in PIPELINE_VARIANTS
]


@pytest.mark.parametrize("variant", DEVICE_VARIANTS)
@pytest.mark.parametrize("device", device_params(include_cpu=False))
def test_network_dtypes_and_special_values_on_devices(device, variant):
    passes = PIPELINE_VARIANTS[variant]
    cases = [
        ("ab,c->c", np.ones((3, 2), bool), np.ones(2, np.float32)),
        ("a,b->b", np.full(2, 2**30, np.int32), np.ones(2, np.int64)),
        ("ab,b->a", np.ones((3, 3), bool), np.arange(1.0, 4.0, dtype=np.float32)),
        ("ab,->ab", np.array([[np.nan, np.inf], [1.0, -np.inf]], np.float32), np.float32(0.0)),
        ("i,j->ij", np.array([np.inf, 1.0], np.float32), np.array([0.0, -0.0, 2.0], np.float32)),
    ]
    for eq, a, b in cases:
        with np.errstate(all="ignore"):
            want = np.einsum(eq, a, b)
        got = tl.einsum(eq, a, b).evaluate(device=device, passes=passes)
        assert got.dtype == want.dtype, (eq, got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want, err_msg=f"{eq} on {device} ({variant})")


def test_pre_reduced_lone_label_is_the_documented_tree():
    """A label only one operand carries is summed on it first (trace pre-reduction): with a
    zero there and an infinity in the other operand, tenloom gives what NumPy's optimized
    einsum gives (inf), not plain einsum's nan (docs/reliability.md)."""
    x, y = np.array([0.0, 2.0]), np.array([1.0, np.inf])
    with np.errstate(invalid="ignore"):
        want = np.einsum("a,d->", x, y, optimize=True)
        assert np.isnan(np.einsum("a,d->", x, y)) and want == np.inf
    assert tl.einsum("a,d->", x, y).evaluate() == want
    # with no passes nothing is pre-reduced on the CPU: NumPy's plain einsum runs, nan (on
    # CUDA, cupy.einsum sums lone labels first itself: inf)
    assert np.isnan(tl.einsum("a,d->", x.copy(), y.copy()).evaluate(passes=(), device="cpu"))
