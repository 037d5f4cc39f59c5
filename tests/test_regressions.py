"""Regressions found in review: each test is a bug that existed once."""

from __future__ import annotations

import gc
import threading
import weakref

import numpy as np
import pytest
from helpers import run_in_threads

import tenloom as tl


def test_fused_integer_abs_keeps_its_dtype_and_value():
    x = np.full((64, 48), 2**60 + 1, np.int64)
    y = abs(tl.asarray(x) + 1)
    assert y.evaluate()[0, 0] == 2**60 + 2
    assert tl.sum(y).evaluate() == np.sum(np.abs(x + 1))  # int64 wraps as in NumPy
    z = np.random.default_rng(0).integers(-20, 20, (64, 48)).astype(np.int32)
    np.testing.assert_array_equal(tl.invert(abs(tl.asarray(z) * 2)).evaluate(), ~np.abs(z * 2))


def test_sum_over_no_axes_of_a_big_array():
    x = np.arange(1 << 20).reshape(1024, 1024)
    out = tl.sum(tl.asarray(x), axis=()).evaluate()
    np.testing.assert_array_equal(out, np.sum(x, axis=()))


def test_evaluated_graphs_do_not_keep_their_constants_alive():
    from tenloom.runtime import evaluate as ev

    refs = []
    for _ in range(5):
        a = np.random.default_rng(0).random((50, 50))
        (tl.asarray(a) @ tl.asarray(a) + 1.0).evaluate()
        refs.append(weakref.ref(a))
        del a
    ev._OPTIMIZED.clear()  # the bounded cache of optimized graphs holds its entries on purpose
    gc.collect()
    assert all(r() is None for r in refs)


def test_threads_sharing_a_cache_dir(tmp_path):
    from tenloom.passes import contraction_order as co

    co._CACHE.clear()
    rng = np.random.default_rng(1)
    mats = [tl.asarray(rng.standard_normal((4, 4))) for _ in range(4)]
    t = tl.einsum("ij,jk,kl,li->", *mats)
    barrier = threading.Barrier(8)

    def work(_):
        barrier.wait()
        for _ in range(5):
            co._CACHE.clear()
            tl.evaluate(t, optimize="greedy", cache_dir=tmp_path, passes=None)

    run_in_threads(work, 8)


def test_contract_keeps_integer_and_bool_dtypes_when_summing_lone_labels():
    rng = np.random.default_rng(2)
    passes = ("canonicalize", "eliminate_permutations")
    ab, bb = rng.random((3, 4)) > 0.5, rng.random((4, 5)) > 0.5
    got = (~tl.einsum("ij,jk->i", tl.asarray(ab), tl.asarray(bb))).evaluate(passes=passes)
    np.testing.assert_array_equal(got, ~np.einsum("ij,jk->i", ab, bb))
    a = rng.integers(0, 2**30, (3, 4, 5)).astype(np.int32)
    b = rng.integers(0, 2**30, (4, 6)).astype(np.int32)
    got = (tl.einsum("ijk,jl->il", tl.asarray(a), tl.asarray(b)) // 7).evaluate(passes=passes)
    np.testing.assert_array_equal(got, np.einsum("ijk,jl->il", a, b) // 7)


def test_memory_limit_counts_arrays_created_at_run_time():
    with pytest.raises(tl.MemoryLimitError):
        tl.full((2000, 2000), 1.0).evaluate(memory_limit=1000)
    with pytest.raises(tl.MemoryLimitError):
        (tl.zeros((2000, 2000)) + 1).evaluate(memory_limit=1000)
    with pytest.raises(tl.MemoryLimitError):
        tl.eye(2000).evaluate(memory_limit="1MB")
    with pytest.raises(ValueError):
        tl.eye(2).evaluate(memory_limit="0GiB")


def test_outputs_never_share_memory_with_inputs_or_each_other():
    big = np.arange(12.0).reshape(3, 4)
    cpu = {"device": "cpu"}  # memory sharing is a host-array question
    assert not np.shares_memory(tl.asarray(big).T.evaluate(to_host=False, **cpu), big)
    assert not np.shares_memory(tl.asarray(big[1:]).evaluate(to_host=False, **cpu), big)
    y = tl.asarray(big) * 2.0
    a, b = tl.evaluate(y, y)
    assert a is not b and not np.shares_memory(a, b)
    c, d = tl.evaluate(y, y.T)
    assert not np.shares_memory(c, d)
    s = (tl.asarray(1.0) + tl.asarray(2.0) * 3).evaluate(to_host=False, **cpu)
    assert isinstance(s, np.ndarray) and s.shape == ()


def test_maximum_keeps_the_sign_of_zero_through_the_pipeline():
    a, b = tl.asarray(np.array([-0.0])), tl.asarray(np.array([0.0]))
    y = tl.maximum(a, b) + tl.maximum(b, a) * 0
    np.testing.assert_array_equal(np.signbit(y.evaluate()), np.signbit(y.evaluate(passes=())))


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_a_long_chain_of_maximum_fuses_without_running_out_of_memory(op):
    """numexpr's maximum spells its first operand 4 times, so a chain of n steps is an
    expression 4^n characters long: the fusion pass measured it by writing it out, and 16
    steps ran out of memory (found by a test of cse's operand order)."""
    x = np.linspace(-1.0, 1.0, 11)
    y, want = tl.asarray(x), x
    for k in range(40):
        y = getattr(tl, op)(y * 0.9, 0.1 * (-1) ** k)
        want = getattr(np, op)(want * 0.9, 0.1 * (-1) ** k)
    np.testing.assert_array_equal(y.evaluate(device="cpu"), want)


def test_the_expression_size_is_the_length_of_the_expression():
    from tenloom.graph.ops import Op
    from tenloom.passes import run_pipeline
    from tenloom.runtime.codegen.numexpr import expression, expression_size
    from tenloom.runtime.evaluate import build_graph

    rng = np.random.default_rng(0)
    steps = [
        lambda a, b: a * a,
        lambda a, b: tl.maximum(a, b),
        lambda a, b: tl.minimum(a, 0.5),
        lambda a, b: a * b + 1,
        lambda a, b: tl.where(a > 0, a, b),
        lambda a, b: tl.exp(a) - a,
    ]
    seen = 0
    for _ in range(60):
        x, y = (tl.asarray(rng.standard_normal(5)) for _ in range(2))
        z = x
        for f in rng.integers(0, len(steps), size=rng.integers(1, 6)):
            z = steps[f](z, y)
        g, _ = run_pipeline(build_graph((z,)), None, {})
        for node in g.order:
            if node.op is Op.FUSED:
                seen += 1
                assert expression_size(node.attrs[0]) == len(expression(node.attrs[0]))
    assert seen > 30


# ---- found by a fuzzer of long elementwise chains (session 16) ------------------------------


def test_squares_are_exact_and_a_chain_of_them_fuses_quickly():
    """numexpr spelt y * y as "y ** 2": libm's pow in its unoptimized mode (not NumPy's bits)
    and, in its aggressive mode, one shared node whose duplicate search doubled with every
    square (75 s for 22 of them)."""
    x = np.array([468.1489094895136])
    y = tl.asarray(x) + 0.5
    out = ((y * y - 3.0) * 2.0 + 1.0) / 4.0
    yn = x + 0.5
    np.testing.assert_array_equal(out.evaluate(device="cpu"), ((yn * yn - 3.0) * 2.0 + 1.0) / 4.0)
    for x in (np.arange(5, dtype=np.int64) % 3 - 1, np.full((1, 4096), 0.999)):
        y, want = tl.asarray(x), x
        for _ in range(22):
            y, want = y * y, want * want
        np.testing.assert_array_equal(y.evaluate(device="cpu"), want)


def test_a_long_region_that_cannot_be_chunked_frees_its_steps():
    """A (1, N) region of 2000 steps runs step by step through NumPy (it cannot be cut into
    chunks along its first axis): its generated function held every step's array until it
    returned, 3.1 GB for 1.6 MB arrays."""
    import tracemalloc

    x = np.random.default_rng(0).standard_normal((1, 200_000))
    t, want = tl.asarray(x), x
    for _ in range(1000):
        t, want = t * 0.999 + 0.001, want * 0.999 + 0.001
    tracemalloc.start()
    try:
        got = t.evaluate(device="cpu")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(got, want)
    assert peak < 40 * x.nbytes, peak


def test_complex_products_keep_their_operand_order():
    """NumPy's complex multiply fuses multiply-adds, so b * a and a * b can differ in the last
    bit; cse reordered them to one canonical order."""
    a = np.array([1 - 3.354542406276376j])
    b = np.array([1.1042240645212544 - 2.05822297530387j])
    for x, y in ((a, b), (b, a)):
        got = (tl.asarray(x) * tl.asarray(y)).evaluate(device="cpu")
        np.testing.assert_array_equal(got, x * y)


def test_clip_is_numpys_on_signed_zeros_nans_and_scalar_kinds():
    """Two bounds are NumPy's clip ufunc (it keeps a where a ties with a bound, takes a NaN
    bound); one bound is maximum or minimum (the bound on ties). A NumPy float64 -0.0 bound
    reused 0.0's node (the scalar cache keyed float subclasses by value)."""
    import itertools

    vals = [-0.0, 0.0, 1.0, -1.0, np.nan, np.inf, -np.inf]
    for x, lo, hi in itertools.product(vals, vals, vals):
        for dt in ("float64", "float32"):
            a = np.array([x, -x], dt)
            bounds = [(lo, hi), (np.array(lo, dt), np.array(hi, dt)), (np.float64(lo), None)]
            bounds += [(None, np.array([hi])), (lo, None), (None, hi), (np.float32(lo), hi)]
            for lo_, hi_ in bounds:
                with np.errstate(all="ignore"):
                    want = np.clip(a, lo_, hi_)
                got = tl.clip(tl.asarray(a), lo_, hi_).evaluate(device="cpu")
                what = (x, lo_, hi_, dt)
                assert got.dtype == want.dtype, what
                np.testing.assert_array_equal(got, want, err_msg=str(what))
                known = ~np.isnan(want)
                assert np.array_equal(np.signbit(got)[known], np.signbit(want)[known]), what


# ---- found by a fuzzer of reductions, indexing and einsum (session 16) ---------------------


def test_a_lazy_index_out_of_range_on_one_axis_raises_instead_of_reading_another_row():
    """Per-axis indices were combined into one flat index and only that was checked: t[0, 6]
    on a 3 x 4 tensor read t[1, 2]."""
    t = tl.asarray(np.arange(12.0).reshape(3, 4))
    k = tl.placeholder((), dtype=np.int64, name="k")
    for value in (6, 4, -5):
        with pytest.raises(tl.EvaluationError, match="out of bounds"):
            tl.evaluate(t[0, k], feed={k: value})
    for idx in (np.array([-5]), np.array([4])):
        with pytest.raises(tl.EvaluationError, match="out of bounds"):
            t[1, tl.asarray(idx) * 1].evaluate()
    with pytest.raises(tl.EvaluationError, match="out of bounds"):
        tl.asarray(np.arange(5.0))[tl.asarray(np.array([-6])) * 1].evaluate()
    (got,) = tl.evaluate(t[2, k], feed={k: -4})
    assert got == 8.0
    np.testing.assert_array_equal(t[1, tl.asarray(np.array([-4, 3])) * 1].evaluate(), [4.0, 7.0])


def test_an_ellipsis_that_covers_no_axis_still_separates_advanced_indices():
    a = np.arange(120.0).reshape(2, 3, 4, 5)
    keys = [
        (slice(None), slice(None), [0, 1, 0], ..., [1, 2, 3]),
        ([0, 1], ..., [1, 2]),
        (0, ..., [1, 2]),
        ([1], [0], ..., [2], [3]),
        (slice(None), [0, 1], ..., [1, 2]),
        ([0, 1], [1, 2], ...),
        (..., [0, 1], [1, 2]),
    ]
    for key in keys:
        np.testing.assert_array_equal(tl.asarray(a)[key].evaluate(), a[key], err_msg=str(key))


def test_array_api_take_and_sort_keep_values_as_they_are_and_check_bounds():
    """take and take_along_axis were one-hot masked sums: an index out of range gave 0 and a
    -0.0 came out +0.0 (sort too)."""
    import tenloom.array_api as xa

    v = tl.asarray(np.arange(5.0))
    with pytest.raises((tl.EvaluationError, IndexError)):
        xa.take(v, tl.asarray(np.array([7])) * 1).evaluate()
    with pytest.raises((tl.EvaluationError, IndexError)):
        xa.take_along_axis(v, tl.asarray(np.array([-9])) * 1, axis=0).evaluate()
    z = np.array([-0.0, 1.0, 0.0, -0.0])
    for got, want in (
        (xa.take(tl.asarray(z), tl.asarray(np.array([0, 3, 2]))), np.take(z, [0, 3, 2])),
        (xa.sort(tl.asarray(z)), np.sort(z, kind="stable")),
    ):
        got = got.evaluate()
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    rng = np.random.default_rng(0)
    for _ in range(50):
        shape = tuple(rng.integers(1, 5, size=rng.integers(1, 4)))
        x = rng.standard_normal(shape)
        ax = int(rng.integers(0, len(shape)))
        n = shape[ax]
        idx = rng.integers(-n, n, size=tuple(rng.integers(0, 4, size=rng.integers(0, 3))))
        got = xa.take(tl.asarray(x), tl.asarray(idx) * 1, axis=ax).evaluate()
        np.testing.assert_array_equal(got, np.take(x, idx, axis=ax))
        ishape = list(shape)
        ishape[ax] = int(rng.integers(0, 4))
        idx2 = rng.integers(-n, n, size=ishape)
        got = xa.take_along_axis(tl.asarray(x), tl.asarray(idx2) * 1, axis=ax).evaluate()
        np.testing.assert_array_equal(got, np.take_along_axis(x, idx2, axis=ax))


def test_at_set_refuses_a_python_int_the_dtype_cannot_hold():
    with pytest.raises(tl.DTypeError, match="does not fit"):
        tl.asarray(np.zeros(3, np.int8)).at[0].set(300)
    with pytest.raises(tl.DTypeError, match="does not fit"):
        tl.asarray(np.zeros(3, np.uint8)).at[1].set(-1)
    got = tl.asarray(np.zeros(3, np.int8)).at[0].set(127).evaluate()
    np.testing.assert_array_equal(got, [127, 0, 0])


def test_the_gradient_of_a_power_of_zero_is_zero_at_zero():
    """d(a**b)/da was b a^(b-1): 0 * inf = NaN at a == 0 when b == 0, and the second derivative
    of a**1 there too; PyTorch and JAX's integer_pow give 0 (found by a gradient fuzzer)."""
    x = tl.placeholder((3,), name="x")
    at = {x: np.array([0.0, 1.0, -2.0])}
    for loss in (tl.sum(x**0), tl.sum(x**0.0), tl.sum(tl.power(x, tl.zeros(3)))):
        (g,) = tl.grad(loss, [x])
        np.testing.assert_array_equal(tl.evaluate(g, feed=at)[0], [0.0, 0.0, 0.0])
    hv = tl.hvp(tl.sum(x**1), [x], [tl.asarray(np.ones(3))])
    (h,) = tl.evaluate(hv[0] if isinstance(hv, (list, tuple)) else hv, feed=at)
    np.testing.assert_array_equal(h, [0.0, 0.0, 0.0])
    (g,) = tl.grad(tl.sum(x**3), [x])
    np.testing.assert_array_equal(tl.evaluate(g, feed=at)[0], [0.0, 3.0, 12.0])


def test_norms_and_pinv_of_empty_matrices_are_numpys():
    """Positive-order norms of empty vectors and matrices are 0 in NumPy (max has no identity,
    but |x| >= 0), and the Hermitian pseudo-inverse of a 0 x 0 matrix is empty; these raised
    (found by a linear-algebra fuzzer). Negative orders still raise where NumPy's do."""
    for a in (np.zeros((0, 0)), np.zeros((0, 3)), np.zeros((3, 0))):
        for order in (1, np.inf, 2, "nuc", "fro"):
            assert tl.linalg.norm(tl.asarray(a), order).evaluate() == np.linalg.norm(a, order)
    for a in (np.zeros(0), np.zeros((2, 0))):
        assert tl.linalg.vector_norm(tl.asarray(a), ord=np.inf).evaluate() == 0.0
    with pytest.raises(tl.TenloomError):
        tl.linalg.norm(tl.asarray(np.zeros((0, 0))), -2).evaluate()
    for a in (np.zeros((0, 0)), np.zeros((3, 0, 0))):
        got = tl.linalg.pinv(tl.asarray(a), hermitian=True).evaluate()
        assert got.shape == np.linalg.pinv(a, hermitian=True).shape


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_array_api_nextafter_is_numpys_over_the_whole_range(dtype):
    """Every binade, subnormals, zeros of both signs, the largest finite values and
    infinities; toward 0, +-inf and mixed targets. (A unit built as 2^(e-p+64) * 2^-64
    overflowed for large e; -tiny stepped to zero must be -0.0.) On CUDA float32 subnormals
    are flushed to zero, so the float32 case fails in a CUDA corpus run."""
    import tenloom.array_api as xa

    rng = np.random.default_rng(0)
    fi = np.finfo(dtype)
    a = np.ldexp(rng.standard_normal(300), rng.integers(fi.minexp - fi.nmant, fi.maxexp, 300))
    special = [0.0, -0.0, fi.smallest_subnormal, -fi.smallest_subnormal, fi.tiny, -fi.tiny]
    special += [fi.max, -fi.max, np.inf, -np.inf, 1.0, 2.0, 0.5, np.nan]
    a = np.concatenate([a.astype(dtype), np.array(special, dtype)])
    targets = [np.zeros_like(a), np.full_like(a, np.inf), np.full_like(a, -np.inf)]
    targets.append(rng.choice(np.array([0, 1, -1, 2], dtype), size=a.size))
    for b in targets:
        with np.errstate(all="ignore"):
            want = np.nextafter(a, b)
        got = xa.nextafter(tl.asarray(a), tl.asarray(b)).evaluate()
        np.testing.assert_array_equal(got, want)
        known = ~np.isnan(want)
        assert np.array_equal(np.signbit(got)[known], np.signbit(want)[known])


def test_array_api_cumulative_ops_keep_signs_and_infinities_and_scale_linearly():
    """(Left in session 16.) The cumulative ops were masked reductions over an n x n
    triangle: a leading -0.0 came out +0.0 (a sum filled with +0.0) and a leading complex
    infinity NaN (a product filled with 1 + 0j: inf * 0 in the imaginary part), and an axis of
    n held n^2 elements. They are now a scan in log2(n) steps."""
    import tenloom.array_api as xa

    for x in (np.array([-0.0]), np.array([-0.0, -0.0, 2.0]), np.array([[-0.0, 1.0]] * 2)):
        got = xa.cumulative_sum(tl.asarray(x), axis=-1).evaluate()
        want = np.cumsum(x, axis=-1)
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want))
    c = np.array([complex(np.inf, 0.0), 2 + 1j])
    got = xa.cumulative_prod(tl.asarray(c)).evaluate()
    assert got[0] == c[0] and np.isinf(got[1].real) and np.isinf(got[1].imag)
    for n in (1, 2, 3, 7, 64, 65):
        x = np.random.default_rng(n).standard_normal((2, n))
        np.testing.assert_allclose(
            xa.cumulative_sum(tl.asarray(x), axis=1).evaluate(), np.cumsum(x, 1), atol=1e-12
        )
        np.testing.assert_allclose(
            xa.cumulative_prod(tl.asarray(x), axis=1).evaluate(), np.cumprod(x, 1), rtol=1e-12
        )
    big = np.random.default_rng(1).standard_normal(200_000)  # its n^2 mask: 40 GB of bools
    got = xa.cumulative_sum(tl.asarray(big)).evaluate()
    np.testing.assert_allclose(got, np.cumsum(big), atol=1e-9)


# ---- session 19: an array-API fuzzer's finds (tenloom/array_api_elementwise.py, updates.py)
def _ulps(got, want, dtype):
    return np.abs((np.asarray(got) - want) / want) / np.finfo(dtype).eps


@pytest.mark.parametrize("dtype,top", [("float64", 710.0), ("float32", 89.0)])
def test_sinh_and_cosh_stay_finite_up_to_the_largest_float(dtype, top):
    import tenloom.array_api as xp

    v = np.array([top, -top, top - 0.5, 25.0, -3.0], dtype)
    for f, ref in ((xp.sinh, np.sinh), (xp.cosh, np.cosh)):
        assert _ulps(f(tl.asarray(v)).evaluate(), ref(v), dtype).max() <= 2


def test_atanh_and_acosh_near_the_ends_of_their_domains():
    import tenloom.array_api as xp

    v = np.array([-0.99999994, 0.99999994], np.float32)
    assert _ulps(xp.atanh(tl.asarray(v)).evaluate(), np.arctanh(v), "float32").max() <= 4
    w = np.array([1 + 1.3e-13, 1 + 1e-8, 3.0])
    assert _ulps(xp.acosh(tl.asarray(w)).evaluate(), np.arccosh(w), "float64").max() <= 4


def test_atan2_keeps_nan_beside_an_infinity():
    import tenloom.array_api as xp

    y = np.array([np.nan, np.nan, np.inf, -np.inf])
    x = np.array([np.inf, -np.inf, np.nan, np.nan])
    assert np.isnan(xp.atan2(tl.asarray(y), tl.asarray(x)).evaluate()).all()
    with np.errstate(invalid="ignore"):
        assert np.isnan(xp.asin(tl.asarray(np.array([np.inf, -np.inf]))).evaluate()).all()
        assert np.isnan(xp.acos(tl.asarray(np.array([np.inf, -np.inf]))).evaluate()).all()


def test_complex_log2_log10_and_round_keep_their_parts():
    import tenloom.array_api as xp

    z = np.array([0j, complex(0, np.inf), complex(np.inf, 0), 4 + 2j])
    with np.errstate(divide="ignore", invalid="ignore"):
        for f, ref in ((xp.log2, np.log2), (xp.log10, np.log10)):
            np.testing.assert_allclose(f(tl.asarray(z)).evaluate(), ref(z), rtol=1e-15)
    w = np.array([complex(0, np.inf), complex(2.5, np.nan), complex(2.5, -np.inf)])
    with np.errstate(invalid="ignore"):
        got = xp.round(tl.asarray(w)).evaluate()
    np.testing.assert_array_equal(got, np.round(w))


def test_at_set_writes_a_negative_zero_and_add_leaves_others_alone():
    x = np.array([1.0, 2.0, 3.0])
    got = tl.asarray(x).at[np.array([0, 2])].set(-0.0).evaluate()
    assert np.signbit(got).tolist() == [True, False, True]
    y = np.array([-0.0, 1.0])
    got = tl.asarray(y).at[1].add(1.0).evaluate()
    assert np.signbit(got).tolist() == [True, False] and got[1] == 2.0
    c = np.array([1 + 1j, 2 + 2j])
    got = tl.asarray(c).at[0].set(complex(-0.0, -0.0)).evaluate()
    assert np.signbit(got.real[0]) and np.signbit(got.imag[0])


def test_complex_functions_near_zero_keep_their_digits():
    """exp(z) - 1, log(1 + z) and the inverse functions built on them lost the small parts
    near 0 (expm1(1e-10) had 7 digits; expm1(1e-20 + 1e-20j) had a real part of 0). Against
    their Taylor series, exact to double precision at these arguments."""
    import tenloom.array_api as xp

    z = np.array([1e-10 + 0j, 1e-10j, 1e-20 + 1e-20j, -3e-9 + 2e-9j, 1e-7 - 2e-7j])
    series = {
        xp.expm1: z + z**2 / 2 + z**3 / 6,
        xp.log1p: z - z**2 / 2 + z**3 / 3,
        xp.asinh: z - z**3 / 6,
        xp.atanh: z + z**3 / 3,
        xp.asin: z + z**3 / 6,
        xp.atan: z - z**3 / 3,
    }
    for f, want in series.items():
        got = f(tl.asarray(z)).evaluate()
        for part in (np.real, np.imag):
            err = np.abs(part(got) - part(want))
            assert np.all(err <= 4 * np.finfo(float).eps * np.abs(want)), (f.__name__, got, want)


def test_mixed_kinds_numpy_refuses_are_refused():
    """uint64 shifted by a signed integer has no common integer dtype, and hypot and logaddexp
    take real floats only: NumPy raises, and so does the namespace (not float results)."""
    import tenloom.array_api as xp

    a = tl.asarray(np.array([1, 5], np.uint64))
    b = tl.asarray(np.array([3, 1], np.int64))
    for f in (xp.bitwise_left_shift, xp.bitwise_right_shift):
        with pytest.raises(tl.DTypeError, match="no common integer dtype"):
            f(a, b)
    with pytest.raises(tl.DTypeError):
        _ = a << b
    x = tl.asarray(np.array([3.0]))
    for f in (xp.hypot, xp.logaddexp):
        with pytest.raises(tl.DTypeError, match=f.__name__):
            f(x, tl.asarray(np.array([4j])))


def test_clip_of_integers_takes_python_bounds_past_the_dtypes_range():
    import tenloom.array_api as xp

    u = np.array([0, 5, 200], np.uint8)
    got = xp.clip(tl.asarray(u), -1, 1).evaluate()
    np.testing.assert_array_equal(got, np.clip(u, -1, 1))
    assert got.dtype == np.uint8
    i = np.array([-100, 5, 100], np.int8)
    for lo, hi in ((-300, 300), (-300, 50), (-50, 1000)):
        got = xp.clip(tl.asarray(i), lo, hi).evaluate()
        np.testing.assert_array_equal(got, np.clip(i, lo, hi))
        assert got.dtype == np.int8
