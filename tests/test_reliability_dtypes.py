"""Issue 18, classes 8, 9 and 10: NumPy's dtypes, exactly.

* 10: every supported dtype, small and unsigned integers included, gives the result dtype
  ``numpy.result_type`` / NumPy's own loops give, for every op and pair of dtypes (NEP 50 weak
  Python scalars), and the values NumPy gives (bit for bit for integers, wraparound included)
  on the CPU (plain, fused through the chunked kernel and numexpr) and on OpenCL.
* 8: a Python int out of the range of an integer array's dtype compares by its true value
  (NumPy 2: ``int32_array < 2**40`` is all True); in arithmetic it raises DTypeError where
  NumPy 2 raises OverflowError.
* 9: feeds never narrow: a typed array converts to a placeholder's dtype only where NumPy's
  ``can_cast(..., "safe")`` allows it; Python scalars and lists convert when their values fit.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from helpers import device_params
from hypothesis import given
from hypothesis import strategies as st
from tenloom.graph.dtypes import SUPPORTED

import tenloom as tl

DTYPES = [d.name for d in SUPPORTED]
NEW = ["int8", "int16", "uint8", "uint16", "uint32", "uint64"]
INTS = [d for d in DTYPES if np.dtype(d).kind in "iu"]

BINARY = {
    "add": (tl.add, np.add),
    "subtract": (tl.subtract, np.subtract),
    "multiply": (tl.multiply, np.multiply),
    "divide": (tl.divide, np.true_divide),
    "floor_divide": (tl.floor_divide, np.floor_divide),
    "remainder": (tl.remainder, np.remainder),
    "power": (tl.power, np.power),
    "maximum": (tl.maximum, np.maximum),
    "minimum": (tl.minimum, np.minimum),
    "equal": (tl.equal, np.equal),
    "not_equal": (tl.not_equal, np.not_equal),
    "less": (tl.less, np.less),
    "less_equal": (tl.less_equal, np.less_equal),
    "greater": (tl.greater, np.greater),
    "greater_equal": (tl.greater_equal, np.greater_equal),
    "bitwise_and": (tl.bitwise_and, np.bitwise_and),
    "bitwise_or": (tl.bitwise_or, np.bitwise_or),
    "bitwise_xor": (tl.bitwise_xor, np.bitwise_xor),
}
UNARY = {
    "negative": (tl.negative, np.negative),
    "abs": (tl.abs, np.abs),
    "sign": (tl.sign, np.sign),
    "invert": (tl.invert, np.invert),
    "exp": (tl.exp, np.exp),
    "sqrt": (tl.sqrt, np.sqrt),
    "real": (tl.real, np.real),
    "imag": (tl.imag, np.imag),
    "conj": (tl.conj, np.conj),
}
REDUCTIONS = {
    "sum": (tl.sum, np.sum),
    "prod": (tl.prod, np.prod),
    "max": (tl.max, np.max),
    "min": (tl.min, np.min),
    "mean": (tl.mean, np.mean),
}


def numpy_result(fn, *args):
    """NumPy's result, or the exception type it raises."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return np.asarray(fn(*args))
        except (TypeError, ValueError, OverflowError) as e:
            return type(e)


def assert_same(got: np.ndarray, expected: np.ndarray, what: str = "") -> None:
    """Same dtype and shape; integer and bool values equal exactly, inexact ones bit for bit
    up to NaN payloads (or within a few ulps where ``what`` says transcendental)."""
    assert got.dtype == expected.dtype, (what, got.dtype, expected.dtype)
    assert got.shape == expected.shape, (what, got.shape, expected.shape)
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(got, expected, err_msg=what)
    else:
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected), err_msg=what)
        np.testing.assert_array_equal(
            np.where(np.isnan(got), 0, got), np.where(np.isnan(expected), 0, expected), what
        )


def special_values(dtype: str) -> np.ndarray:
    """Boundary values of ``dtype``: its extremes, 0, +-1 and a few in between."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return np.array([False, True, True, False])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        vals = [info.min, info.max, 0, 1, 2, info.max - 1, info.min + 1, 7]
        if dt.kind == "i":
            vals += [-1, -2, -7]
        return np.array(vals, dtype=dt)
    vals = np.array([0.0, -0.0, 1.0, -1.5, 2.0, 3.25, np.inf, -np.inf, np.nan, 1e30])
    with np.errstate(all="ignore"):
        if dt.kind == "c":
            out = np.empty(len(vals), dt)
            out.real, out.imag = vals, vals[::-1]
            return out
        return vals.astype(dt)


def values(draw, dtype: str, shape: tuple) -> np.ndarray:
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    pool = special_values(dtype)
    idx = draw(st.lists(st.integers(0, len(pool) - 1), min_size=n, max_size=n))
    return pool[idx].reshape(shape) if n else np.empty(shape, dt)


# ---- 10: result dtypes ------------------------------------------------------------------------


def test_small_and_unsigned_integers_are_supported_without_widening():
    assert set(NEW) <= set(DTYPES)
    for d in DTYPES:
        x = np.zeros(3, d)
        assert tl.asarray(x).dtype == x.dtype
        assert tl.placeholder((3,), d).dtype == x.dtype
        assert tl.zeros((2,), d).dtype == x.dtype
        assert tl.astype(tl.asarray(np.ones(2)), d).evaluate().dtype == x.dtype


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_result_dtypes_for_every_pair(name):
    """Every pair of supported dtypes: tenloom's dtype is NumPy's, or both refuse."""
    fn, ref = BINARY[name]
    for a, b in itertools.product(DTYPES, DTYPES):
        x, y = np.ones(2, a), np.ones(2, b)
        expected = numpy_result(ref, x, y)
        if isinstance(expected, type):
            with pytest.raises(tl.DTypeError, match=name[:3]):
                fn(tl.asarray(x), tl.asarray(y))
            continue
        if expected.dtype.name not in DTYPES:  # bool ** bool is int8 in NumPy: also ours now
            raise AssertionError(f"NumPy gives {expected.dtype} for {a} {name} {b}")
        assert fn(tl.asarray(x), tl.asarray(y)).dtype == expected.dtype, (a, name, b)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_python_scalars_are_weak_for_every_dtype(name):
    """NEP 50: a Python bool/int/float/complex takes the array's dtype where its kind allows."""
    fn, ref = BINARY[name]
    for d, s in itertools.product(DTYPES, [True, 3, 2.5, 1.5j]):
        x = np.ones(2, d)
        for args in ((x, s), (s, x)):
            expected = numpy_result(ref, *args)
            targs = [tl.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
            if isinstance(expected, type):
                with pytest.raises((tl.DTypeError, TypeError)):
                    fn(*targs)
                continue
            assert fn(*targs).dtype == expected.dtype, (d, name, args)


def test_unary_reduction_and_structural_result_dtypes():
    for d in DTYPES:
        x = np.arange(6).reshape(2, 3).astype(d)
        for name, (fn, ref) in UNARY.items():
            expected = numpy_result(ref, x)
            if isinstance(expected, type):
                with pytest.raises(tl.DTypeError):
                    fn(tl.asarray(x))
                continue
            assert fn(tl.asarray(x)).dtype == expected.dtype, (d, name)
        for name, (fn, ref) in REDUCTIONS.items():
            for axis in (None, 0, 1):
                got = fn(tl.asarray(x), axis=axis)
                assert got.dtype == np.asarray(ref(x, axis=axis)).dtype, (d, name, axis)
        assert tl.trace(tl.asarray(x)).dtype == np.trace(x).dtype, d
        for e in DTYPES:
            y = np.ones((3, 2), e)
            assert (tl.asarray(x) @ y).dtype == (x @ y).dtype, (d, e)
            assert tl.einsum("ij,jk->ik", x, y).dtype == np.einsum("ij,jk->ik", x, y).dtype
            assert tl.tensordot(x, y, 1).dtype == np.tensordot(x, y, 1).dtype
            assert tl.concatenate([x, y.T]).dtype == np.concatenate([x, y.T]).dtype
            assert tl.where(x > 1, x, y.T).dtype == np.where(x > 1, x, y.T).dtype, (d, e)


def test_examples_from_the_issue():
    f32, i16 = np.ones(3, np.float32), np.ones(3, np.int16)
    assert (tl.asarray(f32) * i16).dtype == np.float32
    i8 = np.array([100, -128, 127], np.int8)
    got = (tl.asarray(i8) + i8).evaluate()
    assert got.dtype == np.int8 and np.array_equal(got, i8 + i8)  # wraps, as NumPy
    u8 = np.array([200, 255, 1], np.uint8)
    assert tl.sum(u8).evaluate().dtype == np.uint64 and tl.sum(u8).evaluate() == 456
    assert tl.sum(np.array([True, True])).evaluate().dtype == np.int64
    assert tl.mean(i8).evaluate().dtype == np.float64
    assert tl.mean(i8).evaluate() == np.mean(i8)


# ---- 10: values, on the CPU -------------------------------------------------------------------

SHAPES = st.sampled_from([((4,), (4,)), ((2, 3), (3,)), ((3, 1), (1, 4)), ((), (5,)), ((0,), ())])


@given(
    st.sampled_from(DTYPES), st.sampled_from(DTYPES), st.sampled_from(sorted(BINARY)), SHAPES,
    st.data(),
)  # fmt: skip
def test_binary_values_match_numpy(a, b, name, shapes, data):
    fn, ref = BINARY[name]
    x, y = values(data.draw, a, shapes[0]), values(data.draw, b, shapes[1])
    if name == "power" and np.result_type(a, b).kind in "iu":
        y = np.abs(y) % 5  # NumPy refuses negative integer powers
    expected = numpy_result(ref, x, y)
    if isinstance(expected, type):
        return
    assert_same(fn(tl.asarray(x), tl.asarray(y)).evaluate(), expected, f"{a} {name} {b}")


@given(st.sampled_from(DTYPES), st.sampled_from(sorted(REDUCTIONS)), st.data())
def test_reduction_values_match_numpy(d, name, data):
    fn, ref = REDUCTIONS[name]
    x = values(data.draw, d, (3, 4))
    axis = data.draw(st.sampled_from([None, 0, 1, (0, 1)]))
    expected = numpy_result(lambda v: ref(v, axis=axis), x)
    got = fn(tl.asarray(x), axis=axis).evaluate()
    if name == "mean" or (name in ("sum", "prod") and np.dtype(d).kind in "fc"):
        assert got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=1e-3, equal_nan=True)
    else:
        assert_same(got, expected, f"{name} {d}")


@pytest.mark.parametrize("dtype", NEW)
@pytest.mark.parametrize("size", [64, 4096])  # numexpr-sized and the chunked fused kernel's
def test_fused_integer_chains_wrap_as_numpy(dtype, size):
    """Long elementwise chains in a small or unsigned integer dtype (the fusion pass's regions
    and the CPU's fused kernels) wrap around exactly as NumPy's op-by-op evaluation."""
    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)
    y = rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True)

    def chain(m, a, b):
        t = a * b + a
        t = m.maximum(t - b * 3, a) ^ b
        t = (t * t) // (b | 1) + (t % 7)
        return m.where(t > a, t, -t) * 5 + 1

    with np.errstate(all="ignore"):
        expected = chain(np, x, y)
    ta, tb = tl.asarray(x), tl.asarray(y)
    assert_same(chain(tl, ta, tb).evaluate(), expected, dtype)
    assert_same(chain(tl, ta, tb).evaluate(passes=()), expected, dtype)


@pytest.mark.parametrize("dtype", NEW + ["int32", "int64", "bool"])
def test_casts_between_every_dtype(dtype):
    src = special_values(dtype)
    for d in DTYPES:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            expected = src.astype(d)
        assert_same(tl.astype(src, d).evaluate(), expected, f"{dtype} -> {d}")


def test_contractions_of_small_integers_wrap_as_numpy():
    rng = np.random.default_rng(5)
    for d in NEW:
        info = np.iinfo(d)
        a = rng.integers(info.min, info.max, (5, 6), dtype=d, endpoint=True)
        b = rng.integers(info.min, info.max, (6, 4), dtype=d, endpoint=True)
        with np.errstate(all="ignore"):
            assert_same((tl.asarray(a) @ b).evaluate(), a @ b, d)
            expected = np.einsum("ij,jk,k->i", a, b, b[0])
        assert_same(tl.einsum("ij,jk,k->i", a, b, b[0]).evaluate(), expected, d)


def test_big_endian_and_rejected_dtypes():
    be = np.arange(6, dtype=">i4").reshape(2, 3)
    got = (tl.asarray(be) * 2).evaluate()
    assert_same(got, (be * 2).astype("<i4"))
    assert tl.astype(tl.asarray(np.ones(2)), ">f4").dtype == np.float32
    for bad in (np.array([1], object), np.array([1], np.longdouble), np.array(["a"])):
        with pytest.raises(tl.DTypeError, match="supported dtypes are bool, int8"):
            tl.asarray(bad)
    with pytest.raises(tl.DTypeError, match="astype: dtype object"):
        tl.astype(tl.asarray(np.ones(2)), object)


# ---- 8: NEP 50 comparisons and out-of-range Python ints ----------------------------------------

CMP = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
BIG = [2**40, -(2**40), 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63) - 1, 2**100, -(2**100)]


@pytest.mark.parametrize("dtype", INTS)
def test_comparisons_with_out_of_range_python_ints(dtype):
    x = special_values(dtype)
    for name, value in itertools.product(CMP, BIG + [-1, 300, 70000, 2**31, 2**32]):
        fn, ref = BINARY[name]
        for args in ((x, value), (value, x)):
            expected = numpy_result(ref, *args)
            targs = [tl.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
            assert_same(fn(*targs).evaluate(), expected, f"{dtype} {name} {args}")
    assert np.array_equal((tl.asarray(np.array([1, 2], np.int32)) < 2**40).evaluate(), [1, 1])


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "uint64"])
def test_arithmetic_with_out_of_range_python_ints_raises(dtype):
    x = tl.asarray(np.ones(2, dtype))
    info = np.iinfo(dtype)
    for value in (int(info.max) + 1, int(info.min) - 1):
        for name in ("add", "multiply", "maximum"):
            fn, ref = BINARY[name]
            with pytest.raises(OverflowError):
                ref(np.ones(2, dtype), value)  # NumPy 2
            with pytest.raises(tl.DTypeError, match=f"{value}.*{dtype}"):
                fn(x, value)
            with pytest.raises(tl.DTypeError, match=f"{value}.*{dtype}"):
                fn(value, x)


def test_clip_with_bounds_beyond_the_dtype_range():
    x = np.array([1, -5, 100], np.int8)
    assert_same(tl.clip(x, -1000, 1000).evaluate(), np.clip(x, -1000, 1000))
    assert_same(tl.clip(x, 0, 300).evaluate(), np.clip(x, 0, 300))


# ---- 9: feeds never narrow ----------------------------------------------------------------------


def test_feed_rejects_narrowing_arrays():
    x = tl.placeholder((2,), "int32")
    with pytest.raises(tl.DTypeError, match="casting='safe'"):
        (x + 0).evaluate(feed={x: np.array([2**40 + 5, 1])})
    f = tl.placeholder((), "float32")
    with pytest.raises(tl.DTypeError, match="float32"):
        (f * 1).evaluate(feed={f: np.float64(1e300)})
    with pytest.raises(tl.DTypeError, match="infinity"):
        (f * 1).evaluate(feed={f: 1e300})
    with pytest.raises(tl.DTypeError):
        (f * 1).evaluate(feed={f: np.array(0.5)})  # typed float64: not safe, even if it fits


@pytest.mark.parametrize("src, dst", list(itertools.product(DTYPES, DTYPES)))
def test_feed_follows_safe_casting_by_dtype(src, dst):
    x = tl.placeholder((4,), dst)
    v = special_values(src)[:4]
    if np.can_cast(src, dst, "safe"):
        assert_same(x.evaluate(feed={x: v}), v.astype(dst))
    else:
        with pytest.raises(tl.DTypeError, match=f"{dst}.*{src}"):
            x.evaluate(feed={x: v})


def test_feed_of_python_values_checks_that_they_fit():
    u8 = tl.placeholder((3,), "uint8")
    assert_same(u8.evaluate(feed={u8: [0, 1, 255]}), np.array([0, 1, 255], np.uint8))
    for bad in ([0, 1, 256], [-1, 0, 0], [0.5, 1.0, 2.0], [1j, 0, 0]):
        with pytest.raises(tl.DTypeError):
            u8.evaluate(feed={u8: bad})
    f16 = tl.placeholder((), "float16")
    assert f16.evaluate(feed={f16: 0.1}) == np.float16(0.1)  # rounds, as a weak scalar
    assert f16.evaluate(feed={f16: float("inf")}) == np.inf
    with pytest.raises(tl.DTypeError, match="infinity"):
        f16.evaluate(feed={f16: 70000})
    c = tl.placeholder((), "complex64")
    assert c.evaluate(feed={c: True}) == 1


def test_plans_and_functions_feed_by_the_same_rule():
    x = tl.placeholder((2,), "int32")
    plan = tl.compile([x * 2], [x])
    assert_same(plan(np.array([1, 2], np.int16))[0], np.array([2, 4], np.int32))
    with pytest.raises(tl.DTypeError, match="safe"):
        plan(np.array([2**40, 1]))

    @tl.function
    def double(v):
        return v * 2

    be = np.array([1.5, 2.5], ">f8")
    assert_same(double(be), np.array([3.0, 5.0]))
    assert_same(double(np.array([1, 2], np.uint8)), np.array([2, 4], np.uint8))


# ---- OpenCL ------------------------------------------------------------------------------------


def _opencl_device() -> str | None:
    try:
        from test_opencl import DEVICE
    except Exception:  # no pyopencl, no device: test_opencl skips itself
        return None
    return DEVICE


@pytest.fixture(scope="module")
def ocl():
    device = _opencl_device()
    if device is None:
        pytest.skip("no OpenCL device (see test_opencl.py)")
    return device


OCL_BINARY = ["subtract", "multiply", "floor_divide", "remainder", "maximum", "power"]


@pytest.mark.opencl
@pytest.mark.parametrize("dtype", NEW)
def test_opencl_small_and_unsigned_integers(ocl, dtype):
    x = special_values(dtype)
    y = np.roll(x, 3)
    for name in OCL_BINARY:
        fn, ref = BINARY[name]
        b = np.abs(y) % 5 if name == "power" else y
        assert_same(fn(x, b).evaluate(device=ocl), numpy_result(ref, x, b), f"{dtype} {name}")
    for name in ("abs", "invert"):
        fn, ref = UNARY[name]
        assert_same(fn(x).evaluate(device=ocl), numpy_result(ref, x), f"{name} {dtype}")
    m = x[:8].reshape(2, 4)
    for name in ("sum", "max"):
        fn, ref = REDUCTIONS[name]
        assert_same(fn(m, axis=1).evaluate(device=ocl), ref(m, axis=1), f"{name} {dtype}")
    with np.errstate(all="ignore"):
        assert_same((tl.asarray(m) @ m.T).evaluate(device=ocl), m @ m.T, f"matmul {dtype}")
    f = np.array([-1.0, 300.5, 7.9, -7.9], np.float32)
    with np.errstate(all="ignore"):
        expected = f.astype(dtype) if dtype != "uint64" else f[2:3].astype(dtype)
    got = tl.astype(f if dtype != "uint64" else f[2:3], dtype).evaluate(device=ocl)
    assert_same(got, expected, f"float32 -> {dtype}")


@pytest.mark.opencl
@pytest.mark.parametrize(
    "a, b",
    [("int8", "uint8"), ("int16", "float32"), ("uint32", "int32"), ("uint8", "float16"),
     ("uint64", "int64"), ("int8", "uint64"), ("bool", "uint16")],
)  # fmt: skip
def test_opencl_mixed_dtypes(ocl, a, b):
    x, y = special_values(a), special_values(b)
    n = min(len(x), len(y))
    x, y = x[:n], np.roll(y[:n], 1)
    for name in ("add", "less", "equal"):
        fn, ref = BINARY[name]
        expected = numpy_result(ref, x, y)
        assert_same(fn(x, y).evaluate(device=ocl), expected, f"{a} {name} {b}")
    assert_same((tl.asarray(x) < 2**40).evaluate(device=ocl), x < 2**40)


# ---- CUDA (the device machine) -----------------------------------------------------------------


def _cuda_count() -> int:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount()
    except Exception:  # no CuPy, no driver
        return 0


@pytest.mark.cuda
@pytest.mark.skipif(_cuda_count() == 0, reason="no CUDA GPU present (run on the device machine)")
@pytest.mark.parametrize("dtype", NEW + ["bool", "int32"])
def test_cuda_dtypes_match_numpy(dtype):
    x = special_values(dtype)
    partners = [dtype, "int8", "int64", "uint64", "float16", "float32"]
    for b, name in itertools.product(partners, sorted(BINARY)):
        y = np.roll(special_values(b), 1)[: len(x)]
        y = np.resize(y, x.shape)
        if name == "power" and np.result_type(dtype, b).kind in "iu":
            y = np.abs(y) % 5
        expected = numpy_result(BINARY[name][1], x, y)
        if isinstance(expected, type):
            continue
        got = BINARY[name][0](x, y).evaluate(device="cuda:0")
        if expected.dtype.kind in "fc" and name in ("divide", "power"):
            assert got.dtype == expected.dtype
            np.testing.assert_allclose(got, expected, rtol=1e-3, equal_nan=True)
        else:
            assert_same(got, expected, f"{dtype} {name} {b}")
    for name in ("sum", "prod", "max", "min"):
        fn, ref = REDUCTIONS[name]
        assert_same(fn(x).evaluate(device="cuda:0"), np.asarray(ref(x)), f"{name} {dtype}")
    # a 0-d array operand is strong (NEP 50): int8 with a 0-d int64 is int64
    zero_d = np.array(100, np.int64)
    assert_same((tl.asarray(x) * zero_d).evaluate(device="cuda:0"), x * zero_d)
    for name in CMP:
        fn, ref = BINARY[name]
        for v in (2**40, 2**63, -1):
            expected = numpy_result(ref, x, v)
            if isinstance(expected, type):  # bool with a value beyond int64: NumPy raises too
                with pytest.raises(tl.DTypeError):
                    fn(x, v)
                continue
            assert_same(fn(x, v).evaluate(device="cuda:0"), expected, f"{dtype} {name} {v}")
    if dtype != "bool":
        m = x[:8].reshape(2, 4)
        with np.errstate(all="ignore"):
            assert_same((tl.asarray(m) @ m.T).evaluate(device="cuda:0"), m @ m.T, dtype)
            assert_same(tl.einsum("ij,kj->", m, m).evaluate(device="cuda:0"),
                        np.asarray(np.einsum("ij,kj->", m, m)), dtype)  # fmt: skip


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int32", "uint64"])
def test_out_of_range_python_int_where_numpys_loop_is_float(dtype):
    """True division of integers runs NumPy's float64 loop, and clip with a float bound runs in
    float64: a Python int beyond the integer dtype's range is an ordinary operand there."""
    a = np.array([1, 0], dtype=dtype)
    for got, want in [
        ((tl.asarray(a) / 2**40).evaluate(), a / 2**40),
        (tl.divide(a, -(2**65)).evaluate(), np.divide(a, -(2**65))),
    ]:
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    if dtype != "bool":
        with np.errstate(divide="ignore"):
            want = 2**70 / a
        got = (2**70 / tl.asarray(a)).evaluate()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        got = tl.clip(a, 2**40, 0.5).evaluate()
        want = np.clip(a, 2**40, 0.5)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_where_refuses_an_out_of_range_python_int():
    """A design difference (docs/reliability.md): NumPy 2 casts the scalar unsafely
    (np.where(c, uint8_array, -129) holds 127); tenloom refuses it at trace time."""
    a = np.array([1, 2], dtype=np.uint8)
    with pytest.raises(tl.DTypeError, match="-129"):
        tl.where(tl.asarray(a) > 1, a, -129)


@pytest.mark.parametrize(
    "dtype", ["int8", "uint8", "int32", "uint64", "bool", "float16", "float32", "complex64"]
)
def test_clip_bounds_grid_matches_numpy(dtype):
    """NumPy 2 first drops a Python int bound at or beyond an int dtype's range, then runs in
    the dtype of all three (clip(int8, inf, 2**40) is inf: the int bound is no bound)."""
    a = np.array([True, False]) if dtype == "bool" else np.array([0, 1, 2, 100], dtype)
    if dtype.startswith("float"):
        a = np.array([1.0, -np.inf, np.nan, 3e4], dtype)
    lows = [None, -1000, -1, 0, 1, 2**40, -(2**31), 0.5, np.inf, -np.inf, 127, -128, 255, 1j]
    highs = [None, -1000, 0, 1, 2**40, 0.5, np.inf, 127, 255, 1j, -1j]
    for lo, hi in itertools.product(lows, highs):
        try:
            with np.errstate(all="ignore"):
                want = np.clip(a, lo, hi)
        except Exception:  # noqa: BLE001 - NumPy refuses: tenloom must refuse, typed
            with pytest.raises(tl.TenloomError):
                tl.clip(a, lo, hi).evaluate()
            continue
        got = tl.clip(a, lo, hi).evaluate()
        assert got.dtype == want.dtype, (lo, hi)
        np.testing.assert_array_equal(got, want, err_msg=f"clip({dtype}, {lo}, {hi})")


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_integer_power_refuses_negative_exponents_on_every_device(device, dtype):
    """NumPy raises for an integer to a negative integer power; OpenCL's and CuPy's kernels
    gave 0 silently."""
    x = np.array([2, 3, -1, 1], dtype=dtype)
    with pytest.raises(tl.EvaluationError, match="negative integer powers"):
        (tl.asarray(x) ** -1).evaluate(device=device)
    e = np.array([1, 2, 0, -3], dtype=dtype)
    with pytest.raises(tl.EvaluationError, match="negative integer powers"):
        (tl.asarray(x) ** tl.asarray(e)).evaluate(device=device)
    e[3] = 3
    np.testing.assert_array_equal((tl.asarray(x) ** tl.asarray(e)).evaluate(device=device), x**e)


@pytest.mark.parametrize(
    "dtype", ["bool", "int8", "uint8", "float16", "float32", "complex64", "complex128"]
)
@pytest.mark.parametrize("e", [2, 2.0, 0.5, 3, 1.5, 0, 1])
def test_power_operator_takes_numpys_fast_paths(dtype, e):
    """NumPy's ** is sqrt for x ** 0.5 and square for x ** 2 (bool ** 2 is int8; (1+infj)**0.5
    is inf+infj, np.power's inf+nanj); tl.power stays np.power."""
    vals = [0.0, -0.0, 1.0, -2.5, np.nan, np.inf, -np.inf, 3.0]
    if dtype.startswith("complex"):
        x = np.array([complex(a, b) for a in vals for b in vals], dtype)
    elif dtype.startswith("float"):
        x = np.array(vals, dtype)
    else:
        x = np.array([0, 1, 2, 3]).astype(dtype)
    with np.errstate(all="ignore"):
        want, want_power = x**e, np.power(x, e)
    got = (tl.asarray(x) ** e).evaluate()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=2e-3)
    assert tl.power(x, e).evaluate().dtype == want_power.dtype
