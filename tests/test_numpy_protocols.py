"""NumPy's protocols on lazy Tensors (tenloom/numpy_protocols.py): ufuncs and functions build
lazy nodes where tenloom has the op and evaluate then call where it does not; the scalar
conversions evaluate. Everything is compared with NumPy on the same ndarrays."""

from __future__ import annotations

import operator
import warnings

import numpy as np
import pytest
import scipy.linalg
from helpers import assert_close, random_array
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from tenloom.graph.value import Value
from test_autodiff import check_grads
from test_jvp import check_jvp

import tenloom as tl
from tenloom import numpy_protocols as npp

RNG = np.random.default_rng(0)
FLOATS = ("float32", "float64", "complex64", "complex128")
DTYPES = ("bool", "int32", "int64", *FLOATS)


def _numpy(fn, *args, **kwargs):
    """NumPy's result, or the exception class it raises, with its warnings silenced."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return fn(*args, **kwargs)
        except TypeError:  # UFuncTypeError and friends: tenloom raises a TypeError too
            return TypeError
        except ValueError:
            return ValueError


def _lazy(x):
    """``x`` (a Tensor or a tuple of them) is lazy: a Tensor, not an evaluated array."""
    if isinstance(x, tuple):
        assert x and all(isinstance(v, tl.Tensor) for v in x), x
    else:
        assert isinstance(x, tl.Tensor), type(x)
    return x


def _check(got, expected):
    """A lazy result (Tensor or tuple of Tensors) against NumPy's: shapes, dtypes, values."""
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected)
        if hasattr(expected, "_fields"):
            assert got._fields == expected._fields
        for g, e in zip(got, expected):
            _check(g, e)
        return
    _lazy(got)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        assert_close(got.evaluate(), np.asarray(expected))


def _data(dtype, shape, kind="positive"):
    return random_array(RNG, shape, dtype, kind)


# ---- ufuncs ---------------------------------------------------------------------------------
MAPPED_UFUNCS = sorted(  # each once (np.abs is np.absolute, np.bitwise_not is np.invert, ...)
    {u for u in vars(np).values() if isinstance(u, np.ufunc) and npp.ufunc_impl(u)},
    key=lambda u: u.__name__,
)


def test_the_mapped_ufuncs_include_the_common_ones():
    names = {u.__name__ for u in MAPPED_UFUNCS}
    want = "add subtract multiply divide power exp log sqrt sin cos tanh absolute negative "
    want += "maximum minimum equal less greater_equal conjugate matmul sign square divmod isnan"
    assert set(want.split()) <= names
    assert npp.ufunc_impl(np.spacing) is None  # no tenloom op: evaluate then call


# composites that evaluate then call for these dtype kinds (numpy_protocols.COMPOSITES)
EVALUATED = {"reciprocal": "biuc", "positive": "b"}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ufunc", MAPPED_UFUNCS, ids=lambda u: u.__name__)
def test_mapped_ufunc_is_lazy_and_matches_numpy(ufunc, dtype):
    shape = (3, 3)
    ins = [_data(dtype, shape, "positive" if i else "normal") for i in range(ufunc.nin)]
    if ufunc.__name__ in ("floor_divide", "remainder", "divmod", "power"):
        ins[0] = _data(dtype, shape, "positive")
    expected = _numpy(ufunc, *ins)
    ts = [tl.asarray(x) for x in ins]
    if isinstance(expected, type):  # NumPy has no loop for this dtype: tenloom raises as well
        with pytest.raises(expected), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ufunc(*ts)
        return
    if np.dtype(dtype).kind in EVALUATED.get(ufunc.__name__, ""):
        with np.errstate(all="ignore"):
            got = ufunc(*ts)  # a composite tenloom cannot make exact for this dtype
        assert isinstance(got, np.ndarray)
        assert_close(got, expected)
        return
    _check(ufunc(*ts), expected)
    if ufunc.nin == 2:  # mixed operands: ndarray with Tensor, either side, and broadcasting
        _check(ufunc(ins[0], ts[1]), expected)
        _check(ufunc(ts[0], ins[1]), expected)
        _check(ufunc(ts[0], ts[1][0]), _numpy(ufunc, ins[0], ins[1][0]))


@pytest.mark.parametrize(
    "name",
    ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor"]
    + ["eq", "ne", "lt", "le", "gt", "ge"],
)
@pytest.mark.parametrize("dtype", ["int64", "float64", "complex128"])
def test_ndarray_operator_tensor_builds_a_node(name, dtype):
    op = getattr(operator, name)
    a, b = _data(dtype, (3, 3)), _data(dtype, (3, 3))
    expected = _numpy(op, a, b)
    if isinstance(expected, type):
        with pytest.raises(expected):
            op(a, tl.asarray(b))
        return
    _check(op(a, tl.asarray(b)), expected)  # ndarray <op> Tensor: NumPy hands over, lazily
    _check(op(tl.asarray(a), b), expected)


@pytest.mark.parametrize("scalar", [2, 2.5, 1 + 2j, np.float32(2.5), np.int8(3), True])
@pytest.mark.parametrize("dtype", ["int32", "float32", "complex64"])
def test_scalars_and_0d_operands(scalar, dtype):
    x = _data(dtype, (4,))
    t, t0 = tl.asarray(x), tl.asarray(x[1])  # a 0-d Tensor too
    for ufunc in (np.add, np.multiply, np.maximum, np.less):
        for args, ref in (
            ((t, scalar), (x, scalar)),
            ((scalar, t), (scalar, x)),
            ((t0, t), (x[1], x)),
            ((t0, scalar), (np.asarray(x[1]), scalar)),
        ):
            expected = _numpy(ufunc, *ref)
            if isinstance(expected, type):
                with pytest.raises(expected):
                    ufunc(*args)
            else:
                _check(ufunc(*args), expected)


@settings(max_examples=40)
@given(
    data=st.data(),
    ufunc=st.sampled_from([np.add, np.subtract, np.multiply, np.maximum, np.minimum, np.equal]),
    dtype=st.sampled_from(["int32", "float32", "float64", "complex128"]),
)
def test_broadcast_mixed_operands_property(data, ufunc, dtype):
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))
    elems = (
        hnp.from_dtype(
            np.dtype(dtype), allow_nan=False, allow_infinity=False, min_value=-100, max_value=100
        )
        if dtype[0] != "c"
        else None
    )
    if elems is None:
        a, b = (_data(dtype, s, "normal") for s in shapes.input_shapes)
    else:
        a, b = (data.draw(hnp.arrays(dtype, s, elements=elems)) for s in shapes.input_shapes)
    which = data.draw(st.sampled_from(["tt", "at", "ta"]))
    args = [tl.asarray(a) if which[0] == "t" else a, tl.asarray(b) if which[1] == "t" else b]
    if ufunc is np.maximum and dtype[0] == "c":
        return  # NumPy orders complex lexicographically; tenloom's maximum is real-only
    _check(ufunc(*args), _numpy(ufunc, a, b))


@pytest.mark.parametrize("ufunc", [np.add, np.multiply, np.maximum, np.minimum])
@pytest.mark.parametrize(
    "kwargs",
    [{}, {"axis": 1}, {"axis": None}, {"axis": (0, 2), "keepdims": True}, {"dtype": "float32"}],
)
@pytest.mark.parametrize("dtype", ["bool", "int8", "int64", "float64", "complex128"])
def test_ufunc_reduce_is_the_reduction(ufunc, kwargs, dtype):
    x = _data(dtype, (2, 3, 4), "normal")
    expected = _numpy(ufunc.reduce, x, **kwargs)
    t = tl.asarray(x)
    if ufunc in (np.maximum, np.minimum) and "dtype" in kwargs or isinstance(expected, type):
        got = _numpy(ufunc.reduce, t, **kwargs)  # evaluate then call: NumPy's result or error
        if isinstance(expected, type):
            assert got is expected
        else:
            assert isinstance(got, np.ndarray)
            assert_close(got, expected)
        return
    if ufunc in (np.maximum, np.minimum) and dtype[0] == "c":
        return  # complex ordering: not a tenloom reduction
    _check(ufunc.reduce(t, **kwargs), expected)


@settings(max_examples=30)
@given(
    x=hnp.arrays(
        st.sampled_from(["int32", "float64"]),
        hnp.array_shapes(min_dims=1, max_dims=3, max_side=3),
        elements={"min_value": -50, "max_value": 50},
    ),
    data=st.data(),
)
def test_numpy_reductions_property(x, data):
    axis = data.draw(st.none() | st.integers(-x.ndim, x.ndim - 1))
    keepdims = data.draw(st.booleans())
    fn = data.draw(st.sampled_from([np.sum, np.prod, np.max, np.min, np.mean]))
    expected = fn(x, axis=axis, keepdims=keepdims)
    _check(fn(tl.asarray(x), axis=axis, keepdims=keepdims), expected)


def test_numpy_scalar_operands_on_the_left():
    x = _data("float32", (3,))
    t = tl.asarray(x)
    for s in (np.float32(2.5), np.float64(2.5), np.int16(3), np.complex64(1j)):
        _check(s * t, s * x)
        _check(s - t, s - x)
        _check(s < t, s < x)


def test_ufunc_outer_is_lazy():
    a, b = _data("float64", (3,)), _data("float64", (2, 2))
    _check(np.multiply.outer(tl.asarray(a), b), np.multiply.outer(a, b))
    _check(np.add.outer(a, tl.asarray(b)), np.add.outer(a, b))
    _check(np.greater.outer(tl.asarray(a), tl.asarray(a)), np.greater.outer(a, a))


def test_ufunc_methods_without_an_op_evaluate_then_call():
    x = _data("float64", (3, 4))
    t = tl.asarray(x)
    for got, expected in (
        (np.add.accumulate(t, axis=1), np.add.accumulate(x, axis=1)),
        (np.add.reduceat(t, [0, 2], axis=1), np.add.reduceat(x, [0, 2], axis=1)),
        (np.add.reduce(t, initial=5.0), np.add.reduce(x, initial=5.0)),
        (np.add.reduce(t, where=x > 1), np.add.reduce(x, where=x > 1)),
        (np.spacing(t), np.spacing(x)),  # no tenloom op (nor in the array API)
        (np.exp(t, dtype="float32"), np.exp(x, dtype="float32")),  # a keyword: NumPy's
        (np.heaviside(t, x), np.heaviside(x, x)),
    ):
        assert isinstance(got, np.ndarray)
        assert_close(got, expected)
    a, b = np.modf(t)  # two results, no op: NumPy's tuple of ndarrays
    assert isinstance(a, np.ndarray)
    assert_close(a, np.modf(x)[0])


def test_ufunc_at_writes_into_an_ndarray_and_refuses_a_tensor():
    x = np.zeros(4)
    t = tl.asarray(np.arange(2.0) + 1)
    assert np.add.at(x, [0, 2], t) is None
    np.testing.assert_array_equal(x, [1.0, 0.0, 2.0, 0.0])
    with pytest.raises(tl.OptionTypeError, match=r"numpy\.add\.at.*immutable"):
        np.add.at(t, [0], 1.0)


def test_out_an_ndarray_writes_the_values_and_out_a_tensor_raises():
    x = _data("float64", (3,))
    t = tl.asarray(x)
    buf = np.empty(3)
    assert np.exp(t, out=buf) is buf
    assert_close(buf, np.exp(x))
    acc = np.ones(3)
    acc += t  # np.add(acc, t, out=acc): the in-place update of an ndarray
    assert_close(acc, 1 + x)
    mask = x > 1
    out = np.zeros(3)
    np.multiply(t, 2, out=out, where=mask)
    assert_close(out, np.where(mask, 2 * x, 0))
    q, r = np.empty(3), np.empty(3)
    np.divmod(t, 0.3, out=(q, r))
    assert_close(q, np.floor_divide(x, 0.3))
    assert_close(r, np.remainder(x, 0.3))
    with pytest.raises(tl.OptionTypeError, match=r"numpy\.add: out= is a Tensor"):
        np.add(t, 1, out=t)
    with pytest.raises(tl.OptionTypeError, match="out= is a Tensor"):
        np.divmod(t, 2, out=(np.empty(3), t))


def test_value_keeps_handing_ndarray_operators_to_its_reflected_ones():
    # the differentiation rules compute with plain Values: NumPy must not grab them
    assert Value.__array_ufunc__ is None
    v = Value(tl.asarray(np.ones(3)).node)
    out = np.arange(3.0) + v
    assert type(out) is Value
    with pytest.raises(TypeError):
        np.exp(v)


class _Foreign:
    """Another array library that handles ufuncs and functions itself and knows no Tensor."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return NotImplemented

    def __array_function__(self, func, types, args, kwargs):
        return NotImplemented


def test_foreign_array_types_get_not_implemented():
    t = tl.asarray(np.ones(2))
    assert t.__array_ufunc__(np.add, "__call__", t, _Foreign()) is NotImplemented
    with pytest.raises(TypeError):
        np.add(t, _Foreign())
    assert t.__array_function__(np.sum, (tl.Tensor, _Foreign), (t,), {}) is NotImplemented
    with pytest.raises(TypeError):
        np.concatenate([t, _Foreign()])


# ---- functions ------------------------------------------------------------------------------
def _m(dtype="float64", shape=(4, 4)):
    return _data(dtype, shape, "normal")


def _hpd(dtype="float64", n=4):
    a = _m(dtype, (n, n))
    return a @ np.conj(a.T) + n * np.eye(n, dtype=dtype)


A, B, V3 = _m(shape=(3, 4)), _m(shape=(4, 2)), _m(shape=(3,))
C = _m("complex128", (3, 3))
H, HC = _hpd(), _hpd("complex128")
I8 = _m("int8", (3, 4))
F32, C64 = _m("float32", (3, 4)), _m("complex64", (3, 3))
HB = np.stack([_hpd(), _hpd()])  # a batch of two Hermitian positive definite matrices

# (function, args): each call runs on ndarrays (NumPy) and on the same values as Tensors
FUNCTION_CASES = [
    (np.sum, (A,), {}),
    (np.sum, (A, 1), {"keepdims": True}),
    (np.sum, (I8,), {"dtype": "int8"}),
    (np.sum, (I8 > 0,), {"dtype": bool}),
    (np.prod, (A,), {"axis": (0, 1)}),
    (np.max, (A,), {"axis": 0}),
    (np.amax, (A,), {}),
    (np.min, (A, None, None, True), {}),
    (np.amin, (A,), {"axis": -1}),
    (np.mean, (A,), {"axis": 1}),
    (np.mean, (I8,), {"dtype": "float32"}),
    (np.reshape, (A, (2, 6)), {}),
    (np.reshape, (A, (6, -1)), {"order": "F"}),
    (np.ravel, (A,), {}),
    (np.ravel, (A, "F"), {}),
    (np.transpose, (A,), {}),
    (np.transpose, (A[None], (2, 0, 1)), {}),
    (np.moveaxis, (A[None], 0, -1), {}),
    (np.swapaxes, (A[None], 0, 2), {}),
    (np.squeeze, (A[None],), {}),
    (np.expand_dims, (A, (0, 2)), {}),
    (np.broadcast_to, (V3[:, None], (3, 5)), {}),
    (np.concatenate, ([A, A[:1]],), {}),
    (np.concatenate, ([A, I8],), {"axis": 1, "dtype": "float32"}),
    (np.concatenate, ([A, A],), {"axis": None}),
    (np.concatenate, ([A, I8],), {"dtype": "int8", "casting": "unsafe"}),
    (np.stack, ([A, A],), {"axis": -1}),
    (np.stack, ([I8, I8],), {"dtype": "int64"}),
    (np.where, (A > 0, A, 0.5), {}),
    (np.clip, (A, -0.5, 0.5), {}),
    (np.clip, (A,), {"min": 0.1}),
    (np.diagonal, (A[None], 1, 1, 2), {}),
    (np.trace, (A,), {"offset": 1}),
    (np.trace, (I8,), {"dtype": "float32"}),
    (np.dot, (A, B), {}),
    (np.inner, (A, A), {}),
    (np.outer, (A, V3), {}),
    (np.tensordot, (A, B), {"axes": 1}),
    (np.einsum, ("ij,jk->ik", A, B), {"optimize": True}),
    (np.einsum, (A, [0, 1], B, [1, 2]), {}),
    (np.real, (C,), {}),
    (np.imag, (C,), {}),
    (np.zeros_like, (A,), {}),
    (np.ones_like, (A,), {"dtype": "complex64", "shape": (2,)}),
    (np.full_like, (I8, 2.7), {}),
    (np.full_like, (A, V3[:, None]), {}),
    (np.astype, (A, "float32"), {}),
    (np.linalg.svd, (A,), {}),
    (np.linalg.svd, (np.stack([A, 2 * A]),), {"full_matrices": False}),
    (np.linalg.svd, (C64,), {}),
    (np.sum, (F32,), {"axis": 0}),
    (np.mean, (C64,), {}),
    (np.einsum, ("ij,jk->ik", C64, C64), {}),
    (np.linalg.eigh, (HB,), {}),
    (np.linalg.inv, (HB,), {}),
    (np.linalg.det, (HB,), {}),
    (np.linalg.solve, (H, V3[[0, 1, 2, 0]]), {}),
    (np.linalg.qr, (F32,), {"mode": "complete"}),
    (np.linalg.svd, (C,), {"full_matrices": False}),
    (np.linalg.svd, (A,), {"compute_uv": False}),
    (np.linalg.svdvals, (C,), {}),
    (np.linalg.qr, (A.T,), {}),
    (np.linalg.qr, (C,), {"mode": "r"}),
    (np.linalg.eigh, (H,), {}),
    (np.linalg.eigh, (HC,), {"UPLO": "U"}),
    (np.linalg.eigvalsh, (HC,), {}),
    (np.linalg.eig, (C,), {}),
    (np.linalg.eigvals, (C,), {}),
    (np.linalg.inv, (H,), {}),
    (np.linalg.solve, (H, _m(shape=(4, 2))), {}),
    (np.linalg.det, (C,), {}),
    (np.linalg.slogdet, (HC,), {}),
    (np.linalg.cholesky, (HC,), {}),
    (np.linalg.pinv, (A,), {}),
    (np.linalg.pinv, (A,), {"rtol": 0.1}),
    (np.linalg.matrix_power, (H, 3), {}),
    (np.linalg.norm, (A,), {}),
    (np.linalg.norm, (A,), {"ord": 1, "axis": 1, "keepdims": True}),
    (np.linalg.matrix_norm, (C,), {"ord": "nuc"}),
    (np.linalg.vector_norm, (A,), {"ord": 3, "axis": 0}),
    (np.linalg.trace, (A[None],), {"offset": -1}),
    (np.linalg.trace, (I8,), {"dtype": "float64"}),
    (np.linalg.matmul, (A, B), {}),
    (np.linalg.tensordot, (A, B), {"axes": 1}),
    (np.linalg.outer, (V3, V3), {}),
    (np.linalg.diagonal, (A[None],), {"offset": 1}),
    (np.linalg.multi_dot, ([V3, A, B, B.T],), {}),
    (np.linalg.matrix_transpose, (A[None],), {}),
    (np.matrix_transpose, (A,), {}),
    # numpy.fft: tl.fft (tests/test_fft.py has the rest)
    (np.fft.fft, (C,), {"n": 5, "norm": "ortho"}),
    (np.fft.ifft, (A,), {"axis": 0}),
    (np.fft.rfft, (A,), {"n": 6}),
    (np.fft.irfft, (C,), {"axis": 0, "norm": "forward"}),
    (np.fft.hfft, (C,), {"n": 5}),
    (np.fft.ihfft, (I8,), {}),
    (np.fft.fftn, (A,), {"s": (2, 5), "axes": (1, 0)}),
    (np.fft.ifftn, (C,), {}),
    (np.fft.rfftn, (A,), {"axes": (0, 1)}),
    (np.fft.irfftn, (C,), {"s": (3, 4), "axes": (0, 1)}),
    (np.fft.fftshift, (A,), {}),
    (np.fft.ifftshift, (A,), {"axes": 1}),
]
STATIC_CASES = [(np.shape, (A,), {}), (np.ndim, (A,), {}), (np.size, (A,), {"axis": -1})]
STATIC_CASES += [(np.size, (A,), {}), (np.result_type, (I8, 1.5), {})]


def _as_tensors(obj):
    if isinstance(obj, np.ndarray):
        return tl.asarray(obj)
    if isinstance(obj, list):
        return [_as_tensors(x) for x in obj]
    return obj


def _case_id(case):
    fn, args, kwargs = case
    return f"{fn.__module__}.{fn.__name__}-{'-'.join(map(str, kwargs.values()))}"


def test_every_mapped_function_has_a_case():
    covered = {fn for fn, _, _ in FUNCTION_CASES + STATIC_CASES}
    assert set(npp.FUNCTIONS) == covered


@pytest.mark.parametrize("case", FUNCTION_CASES, ids=_case_id)
def test_mapped_function_is_lazy_and_matches_numpy(case):
    fn, args, kwargs = case
    expected = fn(*args, **kwargs)
    got = fn(*(_as_tensors(a) for a in args), **kwargs)
    if isinstance(expected, tuple) and hasattr(expected, "_fields"):
        assert type(got).__name__ == type(expected).__name__
    _check(got, expected)


@pytest.mark.parametrize("case", STATIC_CASES, ids=_case_id)
def test_static_functions_answer_without_evaluating(case):
    fn, args, kwargs = case
    placeholders = [
        tl.placeholder(a.shape, a.dtype) if isinstance(a, np.ndarray) else a for a in args
    ]  # no values: anything that evaluated would raise
    assert fn(*placeholders, **kwargs) == fn(*args, **kwargs)


@pytest.mark.parametrize(
    "fn, args, kwargs",
    [
        (np.sum, (A,), {"initial": 5.0}),
        (np.sum, (A,), {"where": A > 0}),
        (np.max, (A,), {"initial": 10.0}),
        (np.mean, (I8,), {"dtype": "int64"}),
        (np.reshape, (A, (4, 3)), {"order": "A"}),
        (np.concatenate, ([A, A],), {"casting": "no"}),
        (np.einsum, ("ij->i", I8), {"dtype": "float32"}),
        (np.clip, (A, 0, 1), {"dtype": "float32"}),
        (np.linalg.svd, (H,), {"hermitian": True}),
        (np.linalg.cholesky, (HC,), {"upper": True}),
        (np.linalg.eig, (H,), {}),  # real input: NumPy's dtype depends on the values
        (np.where, (A > 0,), {}),  # nonzero: a data-dependent shape
        (np.cumsum, (A,), {"axis": 1}),  # not in the table
        (np.sort, (A,), {}),
        (np.kron, (A, B), {}),
        (np.allclose, (A, A), {}),
        (np.copy, (A,), {}),
    ],
    ids=lambda v: getattr(v, "__name__", None) if callable(v) else None,
)
def test_unsupported_arguments_and_functions_evaluate_then_call(fn, args, kwargs):
    expected = fn(*args, **kwargs)
    got = fn(*(_as_tensors(a) for a in args), **kwargs)
    flat_e = expected if isinstance(expected, tuple) else (expected,)
    flat_g = got if isinstance(got, tuple) else (got,)
    assert type(got) is type(expected) or isinstance(got, np.ndarray)
    for g, e in zip(flat_g, flat_e, strict=True):
        assert not isinstance(g, tl.Tensor)
        np.testing.assert_array_equal(np.asarray(g), np.asarray(e))


def test_unsupported_keyword_errors_are_numpys():
    t = tl.asarray(A)
    with pytest.raises(TypeError):  # NumPy's dispatcher rejects an unknown keyword
        np.sum(t, foo=1)
    with pytest.raises(TypeError):  # the cast NumPy refuses (same_kind: float -> int)
        np.concatenate([t, t], dtype="int8")
    with pytest.raises(ValueError, match="forbidden"):  # a_min and min: NumPy's error
        np.clip(t, 0, 1, min=0)
    out = np.empty(())
    assert np.sum(t, out=out) is out  # out= an ndarray: NumPy writes it
    assert_close(out, np.sum(A))


def test_lazy_function_errors_are_tenloom_errors_at_trace_time():
    t = tl.asarray(A)
    with pytest.raises(tl.ShapeError):
        np.reshape(t, (5, 5))
    with pytest.raises(tl.ShapeError, match="swapaxes"):
        np.swapaxes(t, 0, 3)
    with pytest.raises(tl.ShapeError, match="matrix_transpose"):
        np.matrix_transpose(tl.asarray(V3))
    with pytest.raises(tl.ShapeError, match="linalg.outer: operand 0"):
        np.linalg.outer(t, tl.asarray(V3))
    with pytest.raises(tl.ShapeError):
        np.dot(t, t)


def test_scipy_expm_evaluates():
    t = tl.asarray(H / 10) * 2  # an expression, not just a constant
    with pytest.raises(tl.EvaluationError, match="not bound"):  # np.asarray: t.__array__
        scipy.linalg.expm(tl.placeholder((4, 4)))
    got = scipy.linalg.expm(t)
    assert isinstance(got, np.ndarray)
    assert_close(got, scipy.linalg.expm(H / 5))
    _check(tl.linalg.expm(t), scipy.linalg.expm(H / 5))  # the lazy, differentiable spelling


def test_placeholders_raise_on_the_evaluating_path():
    x = tl.placeholder((3,), name="xin")
    _lazy(np.exp(x))  # lazy paths need no values
    _lazy(np.sum(x))
    with pytest.raises(tl.ConcretizationError, match=r"numpy\.spacing.*'xin'"):
        np.spacing(x)
    with pytest.raises(tl.ConcretizationError, match=r"numpy\.cumsum"):
        np.cumsum(x)

    @tl.function
    def f(v):
        return np.sum(np.exp(v)) * 2  # lazy inside a traced function

    assert_close(f(A), 2 * np.sum(np.exp(A)))

    @tl.function
    def g(v):
        return np.sort(v)

    with pytest.raises(tl.ConcretizationError):
        g(A)


def test_evaluate_then_call_evaluates_shared_operands_once():
    t = tl.asarray(A) * 2
    got = np.kron(t, [np.exp(t), t])
    assert_close(got, np.kron(2 * A, [np.exp(2 * A), 2 * A]))


# ---- differentiation ------------------------------------------------------------------------
def test_grad_through_numpy_calls():
    t = tl.asarray(A)
    (g,) = tl.grad(np.sum(np.exp(t)), [t])
    _lazy(g)
    assert_close(g.evaluate(), np.exp(A))


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_check_grads_through_numpy_ufuncs_and_functions(dtype):
    def f(x, y):
        z = np.multiply(np.exp(x / 4), np.conj(y)) + np.sqrt(y * np.conj(y) + 1)
        z = np.einsum("ij,kj->ik", z, x) + np.maximum(np.real(x), 0.1)
        return np.linalg.norm(np.mean(np.reshape(z, (3, 3)) ** 2, axis=0)) + np.trace(z)

    check_grads(f, [(3, 3), (3, 3)], dtype)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_forward_mode_through_numpy_calls(dtype):
    def f(x):
        y = np.tensordot(np.tanh(x), np.conj(x), axes=([1], [1])) - np.multiply.outer(x[0], 0.5)
        return np.stack([np.sum(y, axis=0), np.linalg.svd(y, compute_uv=False)], axis=-1)

    check_jvp(f, [(3, 3)], dtype)


def test_complex_grad_pytorch_convention():
    z0 = _m("complex128", (3,))
    z = tl.asarray(z0)
    (g,) = tl.grad(np.sum(np.real(np.conj(z) * z)), [z])  # |z|^2: dL/dRe + i dL/dIm = 2z
    assert_close(g.evaluate(), 2 * z0)


def test_grad_through_linalg_namespace():
    def f(x):
        s = np.linalg.svd(x, compute_uv=False)
        w, v = np.linalg.eigh(x @ np.matrix_transpose(x) + 4 * np.eye(3))
        return np.sum(s) + np.sum(w * np.abs(v[0]))

    check_grads(f, [(3, 4)])


# ---- scalar conversions ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_scalar_conversions_evaluate(dtype):
    x = _data(dtype, (2, 3), "normal")
    t = tl.asarray(x)
    s, ref = t.sum(), np.asarray(np.sum(x))  # a 0-d array: NumPy's rules for arrays
    for conv in (float, int, complex, operator.index):
        expected = _numpy(conv, ref)
        if isinstance(expected, type):
            with pytest.raises(expected):
                conv(s)
        else:
            got = conv(s)
            assert type(got) is type(expected) and got == expected
    assert t.item(4) == x.item(4) and type(t.item(4)) is type(x.item(4))
    assert t.item(1, -1) == x.item(1, -1)
    assert t.item((0, 2)) == x.item((0, 2))
    assert t[1:2, :1].item() == x[1:2, :1].item()  # size 1, 2-d


def test_float_of_a_reduction_and_python_uses():
    t = tl.asarray(np.arange(5.0))
    assert float(t.sum()) == 10.0
    assert float(np.sum(t)) == 10.0
    n = tl.asarray(np.int64(3))
    assert list(range(n)) == [0, 1, 2]
    assert ["a", "b", "c", "d"][n] == "d"
    assert f"{float(np.linalg.norm(t)):.3f}" == f"{np.linalg.norm(np.arange(5.0)):.3f}"
    assert complex(tl.asarray(1 + 2j)) == 1 + 2j


def test_scalar_conversion_errors_are_numpys_and_need_no_evaluation():
    x = tl.placeholder((2,), "float64")  # no value: NumPy's error comes first
    with pytest.raises(TypeError, match="only 0-dimensional arrays"):
        float(x)
    with pytest.raises(TypeError, match="integer scalar arrays"):
        operator.index(tl.placeholder((), "float64"))
    with pytest.raises(ValueError, match="size 1"):
        x.item()
    with pytest.raises(IndexError):
        x.item(2)
    with pytest.raises(tl.ConcretizationError, match="float"):
        float(tl.placeholder((), "float64"))
    with pytest.raises(tl.ConcretizationError, match="item"):
        x.item(0)
    with pytest.raises(tl.ConcretizationError, match="truth value"):
        bool(tl.asarray(1.0))  # SPEC: never guessed
    with pytest.raises(tl.ConcretizationError):
        if tl.asarray(np.ones(2)).sum() > 0:
            pass


def test_grad_of_an_evaluated_value_is_a_typed_error_naming_it():
    x = tl.asarray(np.arange(3.0))
    evaluated = np.cumsum(x)[-1]  # evaluate-then-call: a NumPy value, outside the graph
    with pytest.raises(tl.OptionTypeError, match="grad: the loss is a numpy.float64, not a lazy"):
        tl.grad(evaluated, [x])
