"""The CPU kernel of full inner products (runtime/kernels/inner.py: ``trace(A @ B)`` band by
band) and the pooling of operand copies by their own size (issue 22), against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import on_cpu
from tenloom.runtime import buffers
from tenloom.runtime.kernels import inner

import tenloom as tl

FLOATS = ("float32", "float64", "complex64", "complex128")
INTS = ("int8", "int32", "int64", "uint8")
N = 300  # 300 x 300 summed elements: over INNER_MIN, so the band kernel runs


def rand(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 100, shape).astype(dtype)  # int8/uint8 products wrap
    if dtype == np.bool_:
        return rng.random(shape) < 0.01
    x = rng.standard_normal(shape)
    if dtype.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def close(got, want, a, b):
    """Equal for integers and bool (wrapping as NumPy's sums do); for floats within the
    rounding of a sum of |a * b| in the dtype."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
        return
    eps = np.finfo(want.dtype).eps
    scale = np.abs(a).astype(np.float64).sum() * np.abs(b).max()
    assert np.all(np.abs(got - want) <= 8 * eps * scale + 1e-30)


def test_the_band_kernel_takes_the_products_it_is_for():
    assert N * N >= inner.INNER_MIN
    assert inner.fits(np.float64, N * N) and inner.fits(np.int8, N * N)
    assert not inner.fits(np.float64, inner.INNER_MIN - 1)
    assert not inner.fits(np.bool_, N * N) and not inner.fits(np.float16, N * N)


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_trace_of_a_product_as_numpy(dtype):
    rng = np.random.default_rng(0)
    A, B = rand(rng, (N, N), dtype), rand(rng, (N, N), dtype)
    # as NumPy: small integers' products wrap in their dtype before the trace widens them
    got = tl.trace(tl.asarray(A) @ tl.asarray(B)).evaluate()
    close(got, np.trace(A @ B), A, B.T)
    got = tl.einsum("ij,ji->", tl.asarray(A), tl.asarray(B)).evaluate()
    close(got, np.einsum("ij,ji->", A, B), A, B.T)


@pytest.mark.parametrize(
    "spec, shapes",
    [
        ("abc,cab->", [(40, 50, 60), (60, 40, 50)]),
        ("abc,cba->", [(40, 50, 60), (60, 50, 40)]),
        ("ab,ba->", [(70000, 1), (1, 70000)]),  # size-1 axes dropped
        ("xab,bay->xy", [(1, 300, 300), (300, 300, 1)]),  # a 1 x 1 result
        ("ij,ij->", [(300, 300), (300, 300)]),  # one memory order: BLAS's dot
    ],
)
@pytest.mark.parametrize("dtype", ("float64", "complex64", "int32"))
def test_inner_products_of_many_layouts(spec, shapes, dtype):
    rng = np.random.default_rng(1)
    xs = [rand(rng, s, dtype) for s in shapes]
    got = tl.einsum(spec, *map(tl.asarray, xs)).evaluate()
    want = np.einsum(spec, *xs)
    close(got, want, *xs)


def test_mixed_dtypes_widen_as_numpy():
    rng = np.random.default_rng(2)
    A, B = rand(rng, (N, N), "float32"), rand(rng, (N, N), "complex128")
    got = tl.einsum("ij,ji->", tl.asarray(A), tl.asarray(B)).evaluate()
    want = np.einsum("ij,ji->", A, B)
    close(got, want, A, B.T)
    I8, I64 = rand(rng, (N, N), "int8"), rand(rng, (N, N), "int64")
    got = tl.einsum("ij,ji->", tl.asarray(I8), tl.asarray(I64)).evaluate()
    close(got, np.einsum("ij,ji->", I8, I64), I8, I64)


@pytest.mark.parametrize("dtype", ("bool", "float16"))
def test_bool_and_half_keep_the_gemm_kernel(dtype):
    rng = np.random.default_rng(3)
    A, B = rand(rng, (N, N), dtype), rand(rng, (N, N), dtype)
    got = tl.einsum("ij,ji->", tl.asarray(A), tl.asarray(B)).evaluate()
    want = np.einsum("ij,ji->", A, B)
    assert got.dtype == want.dtype
    if dtype == "bool":
        assert got == want
    else:  # float16 sums round in half precision on either side: a loose check
        ref = np.einsum("ij,ji->", A.astype(np.float64), B.astype(np.float64))
        assert abs(float(got) - ref) <= 0.05 * np.einsum("ij,ji->", abs(A), abs(B).astype("f8"))


def test_strided_and_read_only_operands():
    rng = np.random.default_rng(4)
    big = rand(rng, (2 * N, 3 * N), "float64")
    A = big[::2, ::3]  # neither operand contiguous
    B = rand(rng, (N, 2 * N), "float64")[:, ::2]
    B.setflags(write=False)
    got = tl.trace(tl.asarray(A) @ tl.asarray(B)).evaluate()
    close(got, np.einsum("ij,ji->", A, B), A, B.T)
    assert not B.flags.writeable  # read, never written


def test_zero_size_and_one_element():
    A, B = np.zeros((0, 70000)), np.zeros((70000, 0))
    got = tl.einsum("ij,ji->", tl.asarray(A), tl.asarray(B)).evaluate()
    assert got == 0 and got.dtype == np.float64
    assert inner.inner_product(A, B.T, np.float64) == 0
    y = np.ones((N, N))
    assert inner.inner_product(y, y, np.float64) is None  # one memory order: the GEMM's
    x = np.full((1, 1), 3.0)
    assert inner.inner_product(x, x.T, np.dtype("complex128")) == 9
    with pytest.raises(ValueError, match="differ"):
        inner.inner_product(np.ones((2, 3)), np.ones((3, 2)), np.float64)


@pytest.mark.parametrize("dtype", ("float64", "complex128"))
def test_bits_do_not_depend_on_threads(dtype):
    rng = np.random.default_rng(5)
    A, B = rand(rng, (700, 1500), dtype), rand(rng, (1500, 700), dtype)  # 1.05e6: threaded
    assert A.size >= inner.PARALLEL_MIN
    one = inner.inner_product(A, B.T, np.dtype(dtype), threads=1)
    two = inner.inner_product(A, B.T, np.dtype(dtype), threads=2)
    three = inner.inner_product(A, B.T, np.dtype(dtype), threads=3)
    assert one.tobytes() == two.tobytes() == three.tobytes()
    expr = tl.einsum("ij,ji->", tl.asarray(A), tl.asarray(B))
    assert expr.evaluate(threads=2).tobytes() == expr.evaluate(deterministic=True).tobytes()
    close(one, np.einsum("ij,ji->", A, B), A, B.T)


def test_small_bands_and_tiles_cover_every_element(monkeypatch):
    """Bands and tiles of a few elements (many of them, with ragged last ones) sum exactly
    what one pass does: integers, so any element missed or counted twice shows."""
    rng = np.random.default_rng(6)
    A, B = rand(rng, (37, 29, 11), "int64"), rand(rng, (11, 37, 29), "int64")
    want = np.einsum("abc,cab->", A, B)
    for band, tile in ((1, 1), (8 * 29 * 11 * 3, 8 * 5), (8 * 29 * 11 * 2 + 8, 8 * 40)):
        monkeypatch.setattr(inner, "BAND_BYTES", band)
        monkeypatch.setattr(inner, "TILE_BYTES", tile)
        got = inner.inner_product(A, B.transpose(1, 2, 0), np.dtype("int64"), threads=2)
        assert got == want


def test_gradient_of_an_inner_product():
    rng = np.random.default_rng(7)
    A, B = rand(rng, (N, N), "complex128"), rand(rng, (N, N), "complex128")
    a = tl.asarray(A)
    val = tl.einsum("ij,ji->", a, tl.asarray(B))
    close(val.evaluate(), np.einsum("ij,ji->", A, B), A, B.T)
    ga = tl.grad(val.real, a).evaluate()
    np.testing.assert_allclose(ga, np.conj(B.T), rtol=0, atol=0)


@pytest.mark.skipif(not on_cpu(), reason="the CPU backend's buffer pools")
def test_operand_copies_are_pooled_by_their_own_size():
    """A small result of big operands whose copies are big: the program keeps an arena for
    them, and the second run takes the first run's copy buffers back."""
    rng = np.random.default_rng(8)
    A = rand(rng, (60, 70, 40), "float64")
    B = rand(rng, (40, 60, 70, 3), "float64")  # one of them is copied for the GEMM
    expr = tl.einsum("abc,cabd->d", tl.asarray(A), tl.asarray(B))
    want = np.einsum("abc,cabd->d", A, B)
    buffers.clear_pools()
    close(expr.evaluate(), want, A, B)
    held = buffers.held_bytes()
    assert held >= buffers.POOL_MIN_BYTES  # an operand copy kept for the next run
    close(expr.evaluate(), want, A, B)
    assert buffers.held_bytes() == held  # taken back and given again, not a second one
    buffers.clear_pools()


# ---- the tree score's element weights (passes/cost.py layout_cost) ---------------------------


def test_layout_cost_weighs_written_and_copied_elements_by_dtype():
    from tenloom.passes import cost

    sizes = {0: 3, 1: 4, 2: 5}
    # ij,jk->ik: both operands are GEMM views; 15 elements written
    for complex_ in (False, True):
        copy_w, write_w = cost.element_weights(complex_)
        got = cost.layout_cost([(0, 1), (1, 2)], (0, 2), sizes, [(0, 1)], complex_=complex_)
        assert got == 60 + write_w * 15 + cost.CALL_MADDS
        # ijk,kij->: one operand of 60 elements is copied, one element written
        got = cost.layout_cost([(0, 1, 2), (2, 0, 1)], (), sizes, [(0, 1)], complex_=complex_)
        assert got == 60 + copy_w * 60 + write_w + cost.CALL_MADDS
    assert cost.element_weights(False) == (cost.COPY_MADDS, cost.WRITE_MADDS)
    assert cost.element_weights(True) == (cost.COPY_MADDS_COMPLEX, cost.WRITE_MADDS_COMPLEX)
    # real networks are scored as before the written elements were weighed (W1, W3's fit)
    assert cost.layout_cost([(0, 1), (1, 2)], (0, 2), sizes, [(0, 1)]) == 60 + cost.CALL_MADDS


def test_complex_scores_prefer_fewer_written_elements():
    """A chain x_a A_ab B_bc y_c with big a, c and a small b: contracting the two matrices
    first writes an a x c result for fewer multiply-adds than going through the vectors;
    the complex weights see the writes."""
    from tenloom.passes import cost

    a, b, c = 0, 1, 2
    sizes = {a: 2000, b: 2, c: 2000}
    terms = [(a,), (a, b), (b, c), (c,)]
    matrices_first = [(1, 2), (0, 4), (3, 5)]  # A B (a x c written), then x, then y
    vectors_first = [(0, 1), (2, 3), (4, 5)]  # x A, B y, then the two b-vectors
    m1 = cost.layout_cost(terms, (), sizes, matrices_first, complex_=False)
    m2 = cost.layout_cost(terms, (), sizes, vectors_first, complex_=False)
    c1 = cost.layout_cost(terms, (), sizes, matrices_first, complex_=True)
    c2 = cost.layout_cost(terms, (), sizes, vectors_first, complex_=True)
    assert c2 < c1 and m2 < m1
    assert c1 - c2 > m1 - m2  # the written a x c result weighs more in complex
