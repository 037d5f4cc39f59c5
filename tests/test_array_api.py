"""tenloom.array_api: the array API standard's namespace (2024.12) against NumPy's values,
its dtypes and promotion, inspection helpers, the data-dependent-shape rule and the errors.
The conformance suite (array-api-tests) is a documented command: docs/array_api.md."""

import math

import numpy as np
import pytest
from test_autodiff import check_grads
from test_jvp import check_jvp

import tenloom as tl
from tenloom import array_api as xp

RNG = np.random.default_rng(21)

STANDARD_NAMES = [
    "e",
    "inf",
    "nan",
    "newaxis",
    "pi",
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "arange",
    "asarray",
    "empty",
    "empty_like",
    "eye",
    "from_dlpack",
    "full",
    "full_like",
    "linspace",
    "meshgrid",
    "ones",
    "ones_like",
    "tril",
    "triu",
    "zeros",
    "zeros_like",
    "astype",
    "can_cast",
    "finfo",
    "iinfo",
    "isdtype",
    "result_type",
    "abs",
    "acos",
    "acosh",
    "add",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "bitwise_and",
    "bitwise_left_shift",
    "bitwise_invert",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "ceil",
    "clip",
    "conj",
    "copysign",
    "cos",
    "cosh",
    "divide",
    "equal",
    "exp",
    "expm1",
    "floor",
    "floor_divide",
    "greater",
    "greater_equal",
    "hypot",
    "imag",
    "isfinite",
    "isinf",
    "isnan",
    "less",
    "less_equal",
    "log",
    "log1p",
    "log2",
    "log10",
    "logaddexp",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "maximum",
    "minimum",
    "multiply",
    "negative",
    "nextafter",
    "not_equal",
    "positive",
    "pow",
    "real",
    "reciprocal",
    "remainder",
    "round",
    "sign",
    "signbit",
    "sin",
    "sinh",
    "square",
    "sqrt",
    "subtract",
    "tan",
    "tanh",
    "trunc",
    "take",
    "take_along_axis",
    "matmul",
    "matrix_transpose",
    "tensordot",
    "vecdot",
    "broadcast_arrays",
    "broadcast_to",
    "concat",
    "expand_dims",
    "flip",
    "moveaxis",
    "permute_dims",
    "repeat",
    "reshape",
    "roll",
    "squeeze",
    "stack",
    "tile",
    "unstack",
    "argmax",
    "argmin",
    "count_nonzero",
    "nonzero",
    "searchsorted",
    "where",
    "argsort",
    "sort",
    "unique_all",
    "unique_counts",
    "unique_inverse",
    "unique_values",
    "cumulative_prod",
    "cumulative_sum",
    "max",
    "mean",
    "min",
    "prod",
    "std",
    "sum",
    "var",
    "all",
    "any",
    "diff",
    "__array_namespace_info__",
    "__array_api_version__",
]

LINALG_NAMES = [
    "cholesky",
    "cross",
    "det",
    "diagonal",
    "eigh",
    "eigvalsh",
    "inv",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "matrix_transpose",
    "outer",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "tensordot",
    "trace",
    "vecdot",
    "vector_norm",
]


def ev(t):
    return np.asarray(t.evaluate())


def test_names_and_namespace():
    missing = [n for n in STANDARD_NAMES if not hasattr(xp, n)]
    assert missing == []
    assert [n for n in LINALG_NAMES if not hasattr(xp.linalg, n)] == []
    assert xp.__array_api_version__ == "2024.12"
    t = tl.asarray([1.0])
    assert t.__array_namespace__() is xp
    assert t.__array_namespace__(api_version="2024.12") is xp
    with pytest.raises(ValueError, match="api_version"):
        t.__array_namespace__(api_version="1999.01")
    assert set(xp.__all__) >= set(STANDARD_NAMES) - {"__array_api_version__"}


def test_info_helpers():
    info = xp.__array_namespace_info__()
    caps = info.capabilities()
    assert caps["data-dependent shapes"] is False and caps["boolean indexing"] is False
    assert info.default_device() == "cpu" and info.devices() == ["cpu"]
    assert info.default_dtypes()["real floating"] == xp.float64
    assert info.default_dtypes()["indexing"] == xp.int64
    assert set(info.dtypes(kind="real floating").values()) == {xp.float32, xp.float64}
    assert len(info.dtypes()) == 13
    with pytest.raises(tl.DeviceError, match="dtypes"):
        info.dtypes(device="cuda:7")


def test_dtype_functions():
    assert xp.result_type(xp.int8, xp.uint8) == xp.int16
    assert xp.result_type(xp.float32, xp.complex64) == xp.complex64
    assert xp.result_type(xp.asarray([1], dtype=xp.int32), 1.0) == np.float64
    assert xp.result_type(xp.asarray([1.0], dtype=xp.float32), 1.0) == xp.float32
    assert xp.can_cast(xp.int8, xp.int16) and not xp.can_cast(xp.float64, xp.float32)
    assert xp.can_cast(xp.bool, xp.float64) and xp.can_cast(xp.uint8, xp.int16)
    assert not xp.can_cast(xp.float32, xp.int64) and not xp.can_cast(xp.complex64, xp.float64)
    assert xp.isdtype(xp.int8, "signed integer") and xp.isdtype(xp.uint8, "integral")
    assert xp.isdtype(xp.float32, ("bool", "real floating")) and not xp.isdtype(xp.bool, "numeric")
    with pytest.raises(tl.OptionError, match="isdtype"):
        xp.isdtype(xp.int8, "whole")
    f = xp.finfo(xp.complex64)
    assert f.bits == 32 and f.eps == np.finfo(np.float32).eps and f.dtype == xp.float32
    i = xp.iinfo(xp.uint16)
    assert (i.bits, i.min, i.max) == (16, 0, 65535)
    # the operators promote as result_type says
    a, b = xp.asarray([1], dtype=xp.int16), xp.asarray([1], dtype=xp.uint32)
    assert (a + b).dtype == xp.result_type(a, b) == xp.int64


def test_creation_against_numpy():
    assert ev(xp.arange(5, dtype=xp.int32)).dtype == np.int32
    np.testing.assert_array_equal(ev(xp.arange(1, 10, 3)), np.arange(1, 10, 3))
    np.testing.assert_allclose(
        ev(xp.linspace(0, 1, 5, endpoint=False)), np.linspace(0, 1, 5, False)
    )
    assert ev(xp.full((2,), True)).dtype == np.bool_ and ev(xp.full((2,), 1)).dtype == np.int64
    assert ev(xp.eye(3, 4, k=1)).tolist() == np.eye(3, 4, 1).tolist()
    x = RNG.standard_normal((3, 4))
    np.testing.assert_array_equal(ev(xp.tril(xp.asarray(x), k=-1)), np.tril(x, -1))
    np.testing.assert_array_equal(ev(xp.triu(xp.asarray(x), k=1)), np.triu(x, 1))
    gx, gy = xp.meshgrid(xp.arange(3), xp.arange(2))
    nx, ny = np.meshgrid(np.arange(3), np.arange(2))
    np.testing.assert_array_equal(ev(gx), nx)
    np.testing.assert_array_equal(ev(gy), ny)
    assert ev(xp.full_like(xp.asarray(x), 2, dtype=xp.float32)).dtype == np.float32
    t = xp.asarray(x)
    assert xp.asarray(t, copy=False) is t
    with pytest.raises(ValueError, match="copy=False"):
        xp.asarray([1, 2], copy=False)
    with pytest.raises(tl.DeviceError, match="zeros"):
        xp.zeros(3, device="cuda:0")
    with pytest.raises(tl.DTypeError, match="astype"):
        xp.astype(xp.asarray([1j]), xp.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_elementwise_composites(dtype):
    x = RNG.uniform(-0.9, 0.9, 17).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = (x + 0.3j * RNG.uniform(-0.9, 0.9, 17)).astype(dtype)
    rtol = 2e-5 if dtype in (np.float32, np.complex64) else 1e-12
    names = ["tan", "sinh", "cosh", "asin", "acos", "atan", "asinh", "atanh", "expm1", "log1p"]
    names += ["log2", "log10", "square", "reciprocal"]
    for name in names:
        ref = getattr(np, {"asin": "arcsin", "acos": "arccos", "atan": "arctan"}.get(name, name))
        ref = getattr(np, {"asinh": "arcsinh", "atanh": "arctanh"}.get(name, ref.__name__))
        got = ev(getattr(xp, name)(xp.asarray(x)))
        assert got.dtype == dtype, name
        np.testing.assert_allclose(got, ref(x), rtol=rtol, atol=rtol, err_msg=name)
    y = np.abs(x) + 1.5
    np.testing.assert_allclose(ev(xp.acosh(xp.asarray(y))), np.arccosh(y), rtol=rtol, atol=rtol)


def test_real_elementwise_and_special_values():
    x = np.array([-2.5, -1.5, -0.5, -0.0, 0.0, 0.5, 1.5, 2.5, 3.7, np.inf, -np.inf, np.nan])
    t = xp.asarray(x)
    for name in ["floor", "ceil", "trunc", "round", "isnan", "isinf", "isfinite", "signbit"]:
        np.testing.assert_array_equal(ev(getattr(xp, name)(t)), getattr(np, name)(x), name)
    assert np.signbit(ev(xp.round(xp.asarray([-0.4])))).all()  # -0.0, as NumPy
    y = np.array([1.0, -2.0, 0.0, -0.0, 3.0, np.inf, -1.0, 2.0, 1.0, 0.5, -0.5, 1.0])
    u = xp.asarray(y)
    np.testing.assert_allclose(ev(xp.atan2(t, u)), np.arctan2(x, y), rtol=1e-12)
    np.testing.assert_allclose(ev(xp.hypot(t, u)), np.hypot(x, y), rtol=1e-12)
    np.testing.assert_array_equal(ev(xp.copysign(u, t))[:-1], np.copysign(y, x)[:-1])
    np.testing.assert_allclose(ev(xp.logaddexp(t, u)), np.logaddexp(x, y), rtol=1e-12)
    np.testing.assert_allclose(ev(xp.expm1(xp.asarray([1e-10, 50.0]))), np.expm1([1e-10, 50.0]))
    np.testing.assert_allclose(ev(xp.log1p(xp.asarray([1e-12, -0.5]))), np.log1p([1e-12, -0.5]))
    # the standard's infinities in floor_divide (NumPy gives NaN and -1 there)
    got = ev(
        xp.floor_divide(
            xp.asarray([np.inf, -np.inf, 1.0, -1.0, 7.0]),
            xp.asarray([2.0, 3.0, -np.inf, np.inf, 2.0]),
        )
    )
    assert got[:2].tolist() == [np.inf, -np.inf] and got[4] == 3.0
    assert got[2] == 0 and np.signbit(got[2:4]).all()
    assert np.isnan(ev(xp.acosh(xp.asarray([-3e16, 0.5])))).all()
    for dt in (np.float32, np.complex64, np.complex128):  # no cancellation, no overflow
        z = np.array([-6.3e18 + 1j, 1e30 - 2j, -2 + 1j, 0.3 - 0.2j]).astype(dt)
        if dt == np.float32:
            z = z.real
        for name in ("asinh", "asin", "acos"):
            np.testing.assert_allclose(ev(getattr(xp, name)(xp.asarray(z))),
                                       getattr(np, "arc" + name[1:])(z), rtol=1e-5)  # fmt: skip
    for dt in (np.float32, np.float64):  # every kind of step, exactly NumPy's
        fi = np.finfo(dt)
        a = [1, 1, 0, -0.0, 2, 2, -2, fi.smallest_subnormal, fi.max, np.inf, 3.3, fi.tiny, np.nan]
        b = [2, 0, 1, -1, 0, 3, 0, 0, np.inf, 0, -np.inf, 0, 1]
        a, b = np.array(a, dt), np.array(b, dt)
        got = ev(xp.nextafter(xp.asarray(a), xp.asarray(b)))
        assert got.dtype == dt
        np.testing.assert_array_equal(got, np.nextafter(a, b))
        np.testing.assert_array_equal(np.signbit(got), np.signbit(np.nextafter(a, b)))
    assert not np.signbit(ev(xp.sign(xp.asarray([-0.0 - 0.0j]))).real).any()
    assert xp.copysign(xp.asarray(np.float32([1])), xp.asarray([-1.0])).dtype == np.float64
    c = np.array([0, 3 + 4j, -2j])
    np.testing.assert_allclose(ev(xp.sign(xp.asarray(c))), np.sign(c))
    with pytest.raises(tl.DTypeError, match="reciprocal"):
        xp.reciprocal(xp.asarray([1, 2]))


@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.uint8, np.uint32])
def test_shifts_and_logical(dtype):
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max, 20, dtype=dtype, endpoint=True)
    b = RNG.integers(0, info.bits, 20).astype(dtype)
    np.testing.assert_array_equal(
        ev(xp.bitwise_left_shift(xp.asarray(a), xp.asarray(b))), np.left_shift(a, b)
    )
    np.testing.assert_array_equal(
        ev(xp.bitwise_right_shift(xp.asarray(a), xp.asarray(b))), np.right_shift(a, b)
    )
    np.testing.assert_array_equal(ev(xp.logical_xor(xp.asarray(a), 0)), a != 0)
    t = xp.asarray(a)
    np.testing.assert_array_equal(ev(t << 1), np.left_shift(a, 1))  # Tensor's operators
    np.testing.assert_array_equal(ev(t >> xp.asarray(b)), np.right_shift(a, b))
    assert (t << 1).dtype == dtype and (2 >> t).dtype == dtype


@pytest.mark.parametrize("shape, axis", [((7,), -1), ((3, 6), 0), ((2, 3, 5), 1)])
def test_sorting_searching_against_numpy(shape, axis):
    x = RNG.integers(0, 4, shape).astype(np.float64)  # ties test stability
    x.flat[0] = np.nan
    t = xp.asarray(x)
    np.testing.assert_array_equal(ev(xp.sort(t, axis=axis)), np.sort(x, axis=axis))
    np.testing.assert_array_equal(
        ev(xp.argsort(t, axis=axis)), np.argsort(x, axis=axis, kind="stable")
    )
    desc = ev(xp.argsort(xp.asarray(-np.nan_to_num(x, nan=9)), axis=axis))
    np.testing.assert_array_equal(
        ev(xp.argsort(xp.asarray(np.nan_to_num(x, nan=9)), axis=axis, descending=True)), desc
    )
    np.testing.assert_array_equal(ev(xp.argmax(t, axis=axis)), np.argmax(x, axis=axis))
    np.testing.assert_array_equal(ev(xp.argmin(t, axis=axis, keepdims=True)),
                                  np.argmin(x, axis=axis, keepdims=True))  # fmt: skip
    np.testing.assert_allclose(ev(xp.cumulative_sum(t, axis=axis)), np.cumsum(x, axis=axis))
    u8 = xp.asarray(np.array([200, 100], np.uint8))
    assert xp.cumulative_sum(u8).dtype == np.uint64
    assert ev(xp.cumulative_sum(u8, dtype=xp.uint8, include_initial=True)).tolist() == [0, 200, 44]
    y = x + 1
    np.testing.assert_allclose(
        ev(xp.cumulative_prod(xp.asarray(y), axis=axis, include_initial=True)),
        np.concatenate([np.ones_like(np.take(y, [0], axis)), np.cumprod(y, axis)], axis),
    )
    s = np.sort(RNG.integers(0, 9, 6))
    v = RNG.integers(-1, 10, (2, 3))
    for side in ("left", "right"):
        got = xp.searchsorted(xp.asarray(s), xp.asarray(v), side=side)
        np.testing.assert_array_equal(ev(got), np.searchsorted(s, v, side=side))


def test_indexing_and_manipulation_against_numpy():
    x = RNG.standard_normal((3, 4, 5))
    t = xp.asarray(x)
    idx = np.array([[4, 0], [-1, 2]])
    np.testing.assert_array_equal(ev(xp.take(t, xp.asarray(idx), axis=2)), np.take(x, idx, 2))
    ia = RNG.integers(0, 4, (3, 2, 5))
    np.testing.assert_array_equal(
        ev(xp.take_along_axis(t, xp.asarray(ia), axis=1)), np.take_along_axis(x, ia, 1)
    )
    np.testing.assert_array_equal(ev(xp.flip(t, axis=(0, 2))), np.flip(x, (0, 2)))
    np.testing.assert_array_equal(ev(xp.roll(t, (2, -1), axis=(1, 2))), np.roll(x, (2, -1), (1, 2)))
    np.testing.assert_array_equal(ev(xp.roll(t, 3)), np.roll(x, 3))
    np.testing.assert_array_equal(ev(xp.tile(t, (2, 1, 1, 2))), np.tile(x, (2, 1, 1, 2)))
    np.testing.assert_array_equal(ev(xp.repeat(t, 2, axis=1)), np.repeat(x, 2, 1))
    row = x[0, 0]
    np.testing.assert_array_equal(ev(xp.repeat(xp.asarray(row), [1, 0, 2, 1, 3])),
                                  np.repeat(row, [1, 0, 2, 1, 3]))  # fmt: skip
    np.testing.assert_array_equal(
        ev(xp.repeat(t, xp.asarray([1, 0, 2]), axis=0)), np.repeat(x, [1, 0, 2], 0)
    )
    parts = xp.unstack(t, axis=1)
    assert len(parts) == 4 and np.array_equal(ev(parts[2]), x[:, 2])
    a, b = xp.broadcast_arrays(xp.asarray(x[:, :1]), xp.asarray(x[0]))
    assert a.shape == b.shape == (3, 4, 5)
    np.testing.assert_array_equal(ev(xp.diff(t, axis=1, n=2)), np.diff(x, 2, 1))
    np.testing.assert_array_equal(
        ev(xp.diff(t, prepend=xp.zeros((3, 4, 1)))), np.diff(x, prepend=np.zeros((3, 4, 1)))
    )
    with pytest.raises(IndexError, match="expand_dims"):
        xp.expand_dims(t, axis=4)
    assert xp.expand_dims(t, -4).shape == (1, 3, 4, 5)
    with pytest.raises(tl.ShapeError, match="take"):
        xp.take(t, xp.asarray([0]))


def test_statistics_and_utility_against_numpy():
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    t = xp.asarray(x)
    for corr in (0, 1):
        np.testing.assert_allclose(ev(xp.var(t, axis=0, correction=corr)),
                                   np.var(x, 0, ddof=corr), rtol=1e-5)  # fmt: skip
        np.testing.assert_allclose(ev(xp.std(t, correction=corr)), np.std(x, ddof=corr), rtol=1e-5)
    assert xp.var(t).dtype == np.float32
    i = xp.asarray(np.arange(6, dtype=np.int32).reshape(2, 3))
    assert xp.sum(i).dtype == np.int64 and xp.sum(i, dtype=xp.int32).dtype == np.int32
    assert ev(xp.prod(i, axis=1, keepdims=True)).tolist() == [[0], [60]]
    assert ev(xp.all(xp.asarray([[1, 0], [2, 3]]), axis=1)).tolist() == [False, True]
    assert ev(xp.any(xp.zeros((0,)))).item() is False
    assert ev(xp.count_nonzero(xp.asarray([[1, 0], [2, 3]]), axis=0)).tolist() == [2, 1]
    np.testing.assert_array_equal(ev(xp.clip(t, -0.5, xp.asarray(0.25))), np.clip(x, -0.5, 0.25))
    assert np.isnan(ev(xp.clip(t, None, math.nan))).all() and xp.clip(t, 0, 1).dtype == np.float32


def test_linalg_extension():
    a = RNG.standard_normal((2, 4, 3))
    u, s, vh = xp.linalg.svd(xp.asarray(a), full_matrices=False)
    np.testing.assert_allclose(ev(u * s[..., None, :] @ vh), a, atol=1e-12)
    assert xp.linalg.svd(xp.asarray(a)).S is not None
    h = a[0].T @ a[0]
    w = xp.linalg.eigh(xp.asarray(h))
    np.testing.assert_allclose(ev(w.eigenvalues), np.linalg.eigvalsh(h), rtol=1e-10)
    np.testing.assert_allclose(ev(xp.linalg.cholesky(xp.asarray(h), upper=True)),
                               np.linalg.cholesky(h).T, rtol=1e-10)  # fmt: skip
    np.testing.assert_array_equal(ev(xp.linalg.matrix_rank(xp.asarray(a))), [3, 3])
    c, d = RNG.standard_normal((4, 3)), RNG.standard_normal((1, 3))
    np.testing.assert_allclose(ev(xp.linalg.cross(xp.asarray(c), xp.asarray(d))), np.cross(c, d))
    z = c + 1j * RNG.standard_normal((4, 3))
    np.testing.assert_allclose(ev(xp.vecdot(xp.asarray(z), xp.asarray(c))),
                               np.vecdot(z, c), rtol=1e-12)  # fmt: skip
    np.testing.assert_allclose(ev(xp.linalg.trace(xp.asarray(a[:, :3]), offset=1)),
                               np.trace(a[:, :3], 1, -2, -1))  # fmt: skip
    assert xp.linalg.trace(xp.asarray(np.ones((2, 2), np.int8))).dtype == np.int64
    sd = xp.linalg.slogdet(xp.asarray(h))
    np.testing.assert_allclose(ev(sd.logabsdet), np.linalg.slogdet(h).logabsdet)
    assert xp.asarray(a).mT.shape == (2, 3, 4)
    with pytest.raises(tl.OptionError, match="qr"):
        xp.linalg.qr(xp.asarray(h), mode="r")
    with pytest.raises(tl.ShapeError, match="cross"):
        xp.linalg.cross(xp.asarray(np.ones((2, 4))), xp.asarray(np.ones((2, 4))))


def test_data_dependent_shapes_evaluate_or_raise():
    x = np.array([3.0, 1.0, 3.0, 0.0, 1.0])
    r = xp.unique_all(xp.asarray(x))
    ref = np.unique_all(x)
    for got, want in zip(r, ref):
        np.testing.assert_array_equal(ev(got), want)
    assert xp.unique_counts(xp.asarray(x)).counts.dtype == np.int64
    np.testing.assert_array_equal(ev(xp.unique_values(xp.asarray(x) * 2)), [0, 2, 6])
    (nz,) = xp.nonzero(xp.asarray(x))
    np.testing.assert_array_equal(ev(nz), np.nonzero(x)[0])

    @tl.function
    def traced(v):
        return xp.unique_values(v)

    with pytest.raises(tl.DataDependentShapeError, match="unique_values"):
        traced(x)

    @tl.function
    def lazy_sort(v):  # no data-dependent shape: traces
        return xp.sort(v)

    np.testing.assert_array_equal(np.asarray(lazy_sort(x)), np.sort(x))


def test_lazy_truth_and_scalars():
    t = xp.sum(xp.asarray([1.0, 2.0]))
    with pytest.raises(tl.ConcretizationError):
        bool(t)
    assert float(t) == 3.0 and math.isclose(complex(t).real, 3.0)
    assert t.device == "cpu" and t.to_device("cpu") is t
    with pytest.raises(tl.DeviceError, match="to_device"):
        t.to_device("cuda:3")


def test_sort_and_take_are_differentiable():
    x = RNG.standard_normal(6)

    def f(v):
        return xp.sum(xp.sort(v)[-2:] * xp.asarray([1.0, 3.0])) + xp.sum(
            xp.take(v, xp.asarray([1, 1]))
        )

    v = tl.asarray(x)
    g = np.asarray(tl.grad(f(v), v).evaluate())
    want = np.zeros(6)
    order = np.argsort(x)
    want[order[-2]] += 1.0
    want[order[-1]] += 3.0
    want[1] += 2.0
    np.testing.assert_allclose(g, want)


SQUASH = {  # keeps the inputs in each function's domain
    "asin": lambda x: xp.asin(0.9 * xp.tanh(x)),
    "acos": lambda x: xp.acos(0.9 * xp.tanh(x)),
    "atanh": lambda x: xp.atanh(0.9 * xp.tanh(x)),
    "acosh": lambda x: xp.acosh(x * x + 1.5),
    "log1p": lambda x: xp.log1p(0.9 * xp.tanh(x)),
    "log2": lambda x: xp.log2(x * x + 0.5),
    "log10": lambda x: xp.log10(x * x + 0.5),
}
UNARY = ["tan", "sinh", "cosh", "atan", "asinh", "expm1", "square", "reciprocal", *SQUASH]
UNARY_COMPLEX = ["tan", "sinh", "cosh", "expm1", "asinh", "square"]


@pytest.mark.parametrize("name", UNARY)
def test_composites_differentiate(name):
    fn = SQUASH.get(name, getattr(xp, name))
    check_grads(fn, [(3, 4)])
    check_jvp(fn, [(2, 3)], mode="traced")
    if name in UNARY_COMPLEX:
        check_grads(fn, [(3,)], dtype="complex128")


@pytest.mark.parametrize(
    "fn",
    [
        xp.atan2,
        xp.hypot,
        xp.logaddexp,
        lambda a, b: xp.sort(a * b, axis=0, descending=True),
        lambda a, b: xp.take_along_axis(a, xp.argsort(b, axis=1), axis=1),
        lambda a, b: xp.cumulative_sum(a, axis=1) * xp.cumulative_prod(b, axis=0),
        lambda a, b: xp.var(a, axis=0, correction=1) + xp.std(b),
        lambda a, b: xp.linalg.cross(a[:, :3], b[:, 1:]),
        lambda a, b: xp.roll(xp.flip(a, axis=1), 1) * xp.tile(b[:1], (3, 1)),
    ],
)
def test_functions_differentiate(fn):
    check_grads(fn, [(3, 4), (3, 4)])
    check_jvp(fn, [(3, 4), (3, 4)], mode="optimized")


M = xp.asarray(np.ones((2, 3)))
V = xp.asarray(np.ones(3))
ERRORS = [
    (lambda: xp.result_type(), tl.OptionError, "result_type"),
    (lambda: xp.result_type(1, 2.0), tl.OptionTypeError, "result_type"),
    (lambda: xp.meshgrid(V, indexing="ji"), tl.OptionError, "meshgrid"),
    (lambda: xp.asarray([1.5], dtype=np.float16), tl.DTypeError, "asarray"),
    (lambda: xp.broadcast_arrays(M, xp.ones(2)), tl.ShapeError, "broadcast_arrays"),
    (lambda: xp.unstack(xp.asarray(1.0)), tl.ShapeError, "unstack"),
    (lambda: xp.roll(M, (1, 2), axis=0), tl.ShapeError, "roll"),
    (lambda: xp.flip(M, axis=2), IndexError, "flip"),
    (lambda: xp.take(V, xp.asarray([0.5])), tl.DTypeError, "take"),
    (lambda: xp.take_along_axis(M, xp.asarray([0])), tl.ShapeError, "take_along_axis"),
    (lambda: xp.argmax(xp.asarray([True])), tl.DTypeError, "argmax"),
    (lambda: xp.argmin(xp.zeros((2, 0)), axis=1), tl.ShapeError, "argmin"),
    (lambda: xp.nonzero(xp.asarray(1.0)), tl.ShapeError, "nonzero"),
    (lambda: xp.searchsorted(M, V), tl.ShapeError, "searchsorted"),
    (lambda: xp.searchsorted(V, V, side="middle"), tl.OptionError, "searchsorted"),
    (lambda: xp.sort(xp.asarray(1.0)), tl.ShapeError, "sort"),
    (lambda: xp.argsort(xp.asarray([1j])), tl.DTypeError, "argsort"),
    (lambda: xp.cumulative_sum(M), tl.ShapeError, "cumulative_sum"),
    (lambda: xp.atan2(xp.asarray([1]), V), tl.DTypeError, "atan2"),
    (lambda: xp.nextafter(xp.asarray([1]), 2), tl.DTypeError, "nextafter"),
    (lambda: xp.bitwise_left_shift(V, 1), tl.DTypeError, "bitwise_left_shift"),
    (lambda: xp.bitwise_invert(V), tl.DTypeError, "bitwise_invert"),
    (lambda: xp.floor(xp.asarray([1j])), tl.DTypeError, "floor"),
    (lambda: xp.matrix_transpose(V), tl.ShapeError, "matrix_transpose"),
    (lambda: xp.linalg.outer(M, V), tl.ShapeError, "outer"),
    (lambda: xp.vecdot(M, xp.ones(2)), tl.ShapeError, "vecdot"),
    (lambda: xp.linalg.matrix_rank(V), tl.ShapeError, "matrix_rank"),
    (
        lambda: xp.linalg.cross(xp.asarray([True] * 3), xp.asarray([True] * 3)),
        tl.DTypeError,
        "cross",
    ),  # fmt: skip
]


@pytest.mark.parametrize("call, error, name", ERRORS, ids=[e[2] for e in ERRORS])
def test_errors_name_the_function(call, error, name):
    with pytest.raises(error, match=name):
        call()
