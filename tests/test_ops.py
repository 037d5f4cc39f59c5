"""Every op of the public API contract against its NumPy counterpart, over dtypes.

Result dtypes must equal NumPy's (NumPy 2 / NEP 50: Python scalars are weak).
Combinations NumPy itself rejects are skipped (see test_errors.py for tenloom's errors).
"""

from __future__ import annotations

import operator
import warnings

import numpy as np
import pytest
from helpers import ALL_DTYPES, assert_close, numpy_or_skip, random_array

import tenloom as tl

pytestmark = pytest.mark.usefixtures("pipeline_variant")

SEED = 1234
Tensor = type(tl.asarray(np.zeros(())))


def rng():
    return np.random.default_rng(SEED)


def _check(t, expected, *, scale=None):
    assert isinstance(t, Tensor), f"expected a lazy Tensor, got {type(t)!r}"
    expected = np.asarray(expected)
    assert tuple(t.shape) == expected.shape, f"trace-time shape {t.shape} != {expected.shape}"
    assert t.dtype == expected.dtype, f"trace-time dtype {t.dtype} != {expected.dtype}"
    assert_close(t.evaluate(), expected, scale=scale)


# ---------------------------------------------------------------------------------------------
# arithmetic operators, incl. reflected forms

BINOPS = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "pow": operator.pow,
}
PY_SCALAR = {"b": True, "i": 2, "f": 2.0, "c": 1.5 - 0.5j}


def _operands(op, dtype):
    r = rng()
    # left operand: positive for pow (avoid nan / negative-integer powers)
    # (positive for truediv as well: the reflected forms divide by it)
    x = random_array(r, (3, 4), dtype, "positive" if op in ("pow", "truediv") else "normal")
    # right operand: nonzero for division, small non-negative for pow
    kind = {"truediv": "positive", "pow": "small"}.get(op, "normal")
    y = random_array(r, (4,), dtype, kind)
    y_col = random_array(r, (3, 1), dtype, kind)
    return x, y, y_col


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("op", list(BINOPS))
@pytest.mark.parametrize(
    "form", ["tensor-tensor", "tensor-scalar", "scalar-tensor", "numpy-tensor", "tensor-numpy"]
)
def test_binary_operator(op, dtype, form):
    fn = BINOPS[op]
    x, y, y_col = _operands(op, dtype)
    s = PY_SCALAR[np.dtype(dtype).kind]
    if op == "pow" and form == "scalar-tensor":
        # base is the scalar, exponent the tensor: exponents must be small & non-negative
        x = random_array(rng(), (3, 4), dtype, "small")
    tx = tl.asarray(x)
    if form == "tensor-tensor":
        expected = numpy_or_skip(fn, x, y)
        t = fn(tx, tl.asarray(y))
    elif form == "tensor-scalar":
        expected = numpy_or_skip(fn, x, s)
        t = fn(tx, s)
    elif form == "scalar-tensor":
        expected = numpy_or_skip(fn, s, x)
        t = fn(s, tx)
    elif form == "numpy-tensor":
        expected = numpy_or_skip(fn, y_col, x)
        t = fn(y_col, tx)
    else:
        expected = numpy_or_skip(fn, x, y_col)
        t = fn(tx, y_col)
    _check(t, expected)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("scalar", [True, 3, 2.5, 1j], ids=["bool", "int", "float", "complex"])
@pytest.mark.parametrize("op", ["add", "mul"])
def test_python_scalars_are_weak(op, dtype, scalar):
    """NEP 50: ``tl.asarray(np.ones(3, np.float32)) * 2.0`` stays float32, etc."""
    fn = BINOPS[op]
    x = random_array(rng(), (3,), dtype)
    expected = numpy_or_skip(fn, x, scalar)
    _check(fn(tl.asarray(x), scalar), expected)
    expected_r = numpy_or_skip(fn, scalar, x)
    _check(fn(scalar, tl.asarray(x)), expected_r)


def test_weak_scalar_examples():
    t = tl.asarray(np.ones(3, np.float32)) * 2.0
    assert t.dtype == np.float32
    assert (tl.asarray(np.ones(3, np.int32)) + 1).dtype == np.int32
    assert (tl.asarray(np.ones(3, np.int32)) * 1.5).dtype == np.float64
    assert (tl.asarray(np.ones(3, np.float16)) + 1).dtype == np.float16
    assert (2.0 - tl.asarray(np.ones(3, np.float32))).dtype == np.float32
    assert (tl.asarray(np.ones(3, np.float32)) + 1j).dtype == np.complex64


@pytest.mark.parametrize("a", ALL_DTYPES)
@pytest.mark.parametrize("b", ALL_DTYPES)
def test_add_promotion_matrix(a, b):
    r = rng()
    x, y = random_array(r, (2, 3), a), random_array(r, (3,), b)
    expected = numpy_or_skip(np.add, x, y)
    _check(tl.asarray(x) + tl.asarray(y), expected)


def test_numpy_scalar_is_strong():
    x = np.ones(3, np.float32)
    _check(tl.asarray(x) + np.float64(2.0), x + np.float64(2.0))


def test_chained_arithmetic():
    r = rng()
    x, y = random_array(r, (3, 4), "float64"), random_array(r, (3, 4), "float64", "positive")
    tx, ty = tl.asarray(x), tl.asarray(y)
    t = (2.0 - tx) * ty / (1.0 + ty) ** 2 - -tx
    _check(t, (2.0 - x) * y / (1.0 + y) ** 2 - -x)


# ---------------------------------------------------------------------------------------------
# unary elementwise

UNARY = {
    "neg": (operator.neg, operator.neg, "normal"),
    "abs_builtin": (abs, abs, "normal"),
    "abs": (lambda t: tl.abs(t), np.abs, "normal"),
    "exp": (lambda t: tl.exp(t), np.exp, "normal"),
    "log": (lambda t: tl.log(t), np.log, "positive"),
    "sqrt": (lambda t: tl.sqrt(t), np.sqrt, "positive"),
    "sin": (lambda t: tl.sin(t), np.sin, "normal"),
    "cos": (lambda t: tl.cos(t), np.cos, "normal"),
    "tanh": (lambda t: tl.tanh(t), np.tanh, "normal"),
    "conj": (lambda t: tl.conj(t), np.conj, "normal"),
    "real": (lambda t: tl.real(t), np.real, "normal"),
    "imag": (lambda t: tl.imag(t), np.imag, "normal"),
}


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary(name, dtype):
    tl_fn, np_fn, kind = UNARY[name]
    x = random_array(rng(), (3, 4), dtype, kind)
    expected = numpy_or_skip(np_fn, x)
    _check(tl_fn(tl.asarray(x)), expected)


@pytest.mark.parametrize("name", ["exp", "sqrt", "neg", "abs", "real"])
def test_unary_on_0d(name):
    tl_fn, np_fn, _ = UNARY[name]
    x = np.array(2.25)
    _check(tl_fn(tl.asarray(x)), np_fn(x))


# ---------------------------------------------------------------------------------------------
# binary functions: maximum, minimum, where, clip


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum(name, dtype):
    r = rng()
    x, y = random_array(r, (3, 4), dtype), random_array(r, (4,), dtype)
    np_fn, tl_fn = getattr(np, name), getattr(tl, name)
    _check(tl_fn(tl.asarray(x), tl.asarray(y)), numpy_or_skip(np_fn, x, y))
    s = PY_SCALAR[np.dtype(dtype).kind]
    if np.dtype(dtype).kind != "c":
        _check(tl_fn(tl.asarray(x), s), numpy_or_skip(np_fn, x, s))


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_mixed_dtypes(name):
    r = rng()
    x, y = random_array(r, (3, 4), "float32"), random_array(r, (3, 4), "int64")
    _check(getattr(tl, name)(tl.asarray(x), tl.asarray(y)), getattr(np, name)(x, y))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_where(dtype):
    r = rng()
    c = random_array(r, (3, 4), "bool")
    x, y = random_array(r, (3, 4), dtype), random_array(r, (4,), dtype)
    _check(tl.where(tl.asarray(c), tl.asarray(x), tl.asarray(y)), np.where(c, x, y))


def test_where_broadcast_and_mixed():
    r = rng()
    c = random_array(r, (3, 1), "bool")
    x, y = random_array(r, (1, 4), "float32"), random_array(r, (3, 4), "float64")
    _check(tl.where(tl.asarray(c), tl.asarray(x), tl.asarray(y)), np.where(c, x, y))
    # python scalar is weak: stays float32
    _check(tl.where(tl.asarray(c), tl.asarray(x), 0.0), np.where(c, x, 0.0))
    # condition from a lazy comparison
    z = random_array(r, (3, 4), "float64")
    tz = tl.asarray(z)
    _check(tl.where(tz > 0, tz, 0.0), np.where(z > 0, z, 0.0))
    # int tensor with a python float -> float64
    i = random_array(r, (3, 4), "int32")
    _check(tl.where(tl.asarray(c), tl.asarray(i), 0.5), np.where(c, i, 0.5))


@pytest.mark.parametrize("dtype", ["int32", "int64", "float16", "float32", "float64"])
@pytest.mark.parametrize("bounds", [(-1, 1), (-0.5, 0.5), (None, 1), (0, None)], ids=str)
def test_clip(dtype, bounds):
    x = random_array(rng(), (3, 4), dtype)
    lo, hi = bounds
    expected = numpy_or_skip(np.clip, x, lo, hi)
    _check(tl.clip(tl.asarray(x), lo, hi), expected)


def test_clip_with_array_bounds():
    r = rng()
    x = random_array(r, (3, 4), "float64")
    lo = random_array(r, (4,), "float64") - 0.5
    hi = lo + 1.0
    _check(tl.clip(tl.asarray(x), tl.asarray(lo), tl.asarray(hi)), np.clip(x, lo, hi))


# ---------------------------------------------------------------------------------------------
# comparisons are lazy and elementwise

COMPARISONS = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("op", list(COMPARISONS))
@pytest.mark.parametrize(
    "form", ["tensor-tensor", "tensor-scalar", "scalar-tensor", "numpy-tensor"]
)
def test_comparison(op, dtype, form):
    fn = COMPARISONS[op]
    r = rng()
    x, y = random_array(r, (3, 4), dtype), random_array(r, (4,), dtype)
    x[0, :] = y  # make sure some elements compare equal
    s = {"b": True, "i": 0, "f": 0.0, "c": 0j}[np.dtype(dtype).kind]
    tx = tl.asarray(x)
    if form == "tensor-tensor":
        expected, t = numpy_or_skip(fn, x, y), fn(tx, tl.asarray(y))
    elif form == "tensor-scalar":
        expected, t = numpy_or_skip(fn, x, s), fn(tx, s)
    elif form == "scalar-tensor":
        expected, t = numpy_or_skip(fn, s, x), fn(s, tx)
    else:
        expected, t = numpy_or_skip(fn, y, x), fn(y, tx)
    _check(t, expected)


# ---------------------------------------------------------------------------------------------
# reductions

REDUCTIONS = ["sum", "prod", "max", "min", "mean"]
AXES = [None, 1, -1, (0, 2), (-1, 0), ()]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction(name, dtype, axis, keepdims):
    r = rng()
    kind = np.dtype(dtype).kind
    if name == "prod" and kind in "fc":
        # magnitudes near 1 so that a product of 24 values stays in float16 range
        x = r.uniform(0.7, 1.4, (2, 3, 4)) * np.where(r.random((2, 3, 4)) < 0.5, -1, 1)
        if kind == "c":
            x = x * np.exp(1j * r.uniform(0, 2 * np.pi, (2, 3, 4)))
        x = x.astype(dtype)
    else:
        x = random_array(r, (2, 3, 4), dtype)
    np_fn, tl_fn = getattr(np, name), getattr(tl, name)
    expected = numpy_or_skip(np_fn, x, axis=axis, keepdims=keepdims)
    scale = None
    if name in ("sum", "mean") and np.dtype(dtype).kind in "fc":
        scale = float(np.max(np.sum(np.abs(x.astype(np.complex128)), axis=axis)))
    _check(tl_fn(tl.asarray(x), axis=axis, keepdims=keepdims), expected, scale=scale)


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_default_args_and_0d(name):
    x = random_array(rng(), (3, 4), "float64")
    _check(getattr(tl, name)(tl.asarray(x)), getattr(np, name)(x))
    z = np.array(1.5)
    _check(getattr(tl, name)(tl.asarray(z)), getattr(np, name)(z))


def test_reduction_of_expression():
    r = rng()
    x, y = random_array(r, (3, 4), "float32"), random_array(r, (3, 4), "float32")
    t = tl.sum(tl.asarray(x) * tl.asarray(y), axis=1) + tl.mean(tl.asarray(x), axis=-1)
    _check(t, np.sum(x * y, axis=1) + np.mean(x, axis=-1))


# ---------------------------------------------------------------------------------------------
# astype


# complex -> real casts are covered by test_astype_complex_to_real
_ASTYPE_PAIRS = [
    (s, t)
    for s in ALL_DTYPES
    for t in ALL_DTYPES
    if not (s.startswith("complex") and not t.startswith("complex"))
]


@pytest.mark.parametrize(
    "source,target", _ASTYPE_PAIRS, ids=[f"{s}->{t}" for s, t in _ASTYPE_PAIRS]
)
def test_astype(source, target):
    x = random_array(rng(), (3, 4), source) * (3 if np.dtype(source).kind in "fc" else 1)
    x = x.astype(source)
    _check(tl.asarray(x).astype(target), x.astype(target))


@pytest.mark.parametrize("target", ["float32", "float64", "int64", "bool"])
def test_astype_complex_to_real(target):
    """NumPy's astype takes the real part (with a ComplexWarning)."""
    x = random_array(rng(), (3, 4), "complex128") * 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        expected = x.astype(target)
    _check(tl.asarray(x).astype(target), expected)


@pytest.mark.parametrize(
    "spec", ["float32", np.float32, np.dtype("float32")], ids=["str", "type", "dtype"]
)
def test_astype_dtype_spellings(spec):
    x = random_array(rng(), (3,), "float64")
    _check(tl.asarray(x).astype(spec), x.astype(np.float32))


# ---------------------------------------------------------------------------------------------
# shape manipulation (the same lambda runs on numpy and on tenloom)

SHAPE_OPS = {
    "transpose-default": ((2, 3, 4), lambda m, x: m.transpose(x)),
    "transpose-axes": ((2, 3, 4), lambda m, x: m.transpose(x, (1, 0, 2))),
    "transpose-negative-axes": ((2, 3, 4), lambda m, x: m.transpose(x, (-1, 0, -2))),
    "permute_dims": ((2, 3, 4), lambda m, x: m.permute_dims(x, (2, 0, 1))),
    "moveaxis": ((2, 3, 4), lambda m, x: m.moveaxis(x, 0, -1)),
    "moveaxis-lists": ((2, 3, 4), lambda m, x: m.moveaxis(x, [0, 1], [2, 0])),
    "reshape": ((2, 3, 4), lambda m, x: m.reshape(x, (6, 4))),
    "reshape-minus1": ((2, 3, 4), lambda m, x: m.reshape(x, (4, -1))),
    "reshape-flat-int": ((2, 3, 4), lambda m, x: m.reshape(x, -1)),
    "reshape-add-ones": ((2, 3, 4), lambda m, x: m.reshape(x, (1, 2, 1, 12))),
    "reshape-to-0d": ((1, 1), lambda m, x: m.reshape(x, ())),
    "reshape-after-transpose": ((2, 3, 4), lambda m, x: m.reshape(m.transpose(x), (12, 2))),
    "squeeze-all": ((1, 3, 1, 4), lambda m, x: m.squeeze(x)),
    "squeeze-axis": ((1, 3, 1, 4), lambda m, x: m.squeeze(x, axis=2)),
    "squeeze-negative-axis": ((1, 3, 1, 4), lambda m, x: m.squeeze(x, axis=-2)),
    "squeeze-tuple": ((1, 3, 1, 4), lambda m, x: m.squeeze(x, axis=(0, 2))),
    "expand_dims-0": ((3, 4), lambda m, x: m.expand_dims(x, 0)),
    "expand_dims-neg": ((3, 4), lambda m, x: m.expand_dims(x, -1)),
    "expand_dims-tuple": ((3, 4), lambda m, x: m.expand_dims(x, (0, 2))),
    "broadcast_to": ((3, 1), lambda m, x: m.broadcast_to(x, (2, 3, 4))),
    "broadcast_to-0d": ((), lambda m, x: m.broadcast_to(x, (2, 3))),
    "broadcast_to-same": ((3, 4), lambda m, x: m.broadcast_to(x, (3, 4))),
}
SHAPE_DTYPES = ["float64", "int32", "bool", "complex64"]


@pytest.mark.parametrize("dtype", SHAPE_DTYPES)
@pytest.mark.parametrize("name", list(SHAPE_OPS))
def test_shape_ops(name, dtype):
    shape, fn = SHAPE_OPS[name]
    x = random_array(rng(), shape, dtype)
    expected = fn(np, x)
    _check(fn(tl, tl.asarray(x)), expected)


@pytest.mark.parametrize("dtype", SHAPE_DTYPES)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenate(dtype, axis):
    r = rng()
    arrays = []
    for k in (1, 2, 3):
        shape = [2, 3]
        shape[axis] = k
        arrays.append(random_array(r, tuple(shape), dtype))
    expected = np.concatenate(arrays, axis=axis)
    _check(tl.concatenate([tl.asarray(a) for a in arrays], axis=axis), expected)


def test_concatenate_mixed_dtypes_and_default_axis():
    r = rng()
    a, b = random_array(r, (2, 3), "float32"), random_array(r, (1, 3), "int64")
    _check(tl.concatenate([tl.asarray(a), tl.asarray(b)]), np.concatenate([a, b]))
    _check(tl.concatenate((tl.asarray(a), tl.asarray(a)), axis=1), np.concatenate((a, a), axis=1))


@pytest.mark.parametrize("dtype", SHAPE_DTYPES)
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
def test_stack(dtype, axis):
    r = rng()
    arrays = [random_array(r, (2, 3), dtype) for _ in range(3)]
    expected = np.stack(arrays, axis=axis)
    _check(tl.stack([tl.asarray(a) for a in arrays], axis=axis), expected)


def test_stack_default_axis_and_0d():
    r = rng()
    arrays = [np.array(float(i)) for i in range(4)]
    _check(tl.stack([tl.asarray(a) for a in arrays]), np.stack(arrays))
    a, b = random_array(r, (3,), "int32"), random_array(r, (3,), "float32")
    _check(tl.stack([tl.asarray(a), tl.asarray(b)]), np.stack([a, b]))


# ---------------------------------------------------------------------------------------------
# basic indexing

INDICES = {
    "slice-newaxis-ellipsis-int": np.s_[1:, None, ..., 0],
    "reverse": np.s_[::-1],
    "last": np.s_[-1],
    "ellipsis-step": np.s_[..., ::2],
    "int": np.s_[1],
    "int-int-int": np.s_[0, 2, 3],
    "neg-ints": np.s_[-1, -2],
    "slice-middle": np.s_[:, 1:3],
    "newaxis-front": np.s_[None],
    "newaxis-back": np.s_[..., None],
    "empty-tuple": np.s_[()],
    "ellipsis-only": np.s_[...],
    "neg-step-bounds": np.s_[-2:, ::-2],
    "neg-step-from": np.s_[:, 2::-1, 1],
    "out-of-range-slice": np.s_[1:100],
    "empty-slice": np.s_[:, 3:1],
    "step-3": np.s_[:, :, ::3],
    "newaxis-mid": np.s_[:, None, 1, None],
    "numpy-int": np.s_[np.int64(1), :, np.int32(-1)],
    "ellipsis-middle": np.s_[0, ..., 1],
}


@pytest.mark.parametrize("dtype", ["float64", "int64", "complex128", "bool"])
@pytest.mark.parametrize("name", list(INDICES))
def test_basic_indexing(name, dtype):
    x = random_array(rng(), (2, 3, 5), dtype)
    idx = INDICES[name]
    _check(tl.asarray(x)[idx], np.asarray(x[idx]))


def test_indexing_chain_and_expression():
    x = random_array(rng(), (4, 5), "float64")
    t = (tl.asarray(x) * 2.0)[1:][::-1, 2]
    _check(t, (x * 2.0)[1:][::-1, 2])


# ---------------------------------------------------------------------------------------------
# contractions: tensordot, matmul / @, dot, outer, trace, diagonal

CONTRACTIONS = {
    "tensordot-2": ([(3, 4, 5), (4, 5, 2)], lambda m, a, b: m.tensordot(a, b)),
    "tensordot-int1": ([(3, 4), (4, 5)], lambda m, a, b: m.tensordot(a, b, axes=1)),
    "tensordot-int0": ([(3,), (4, 2)], lambda m, a, b: m.tensordot(a, b, axes=0)),
    "tensordot-lists": (
        [(3, 4, 5), (5, 3, 2)],
        lambda m, a, b: m.tensordot(a, b, axes=([0, 2], [1, 0])),
    ),
    "tensordot-tuples": ([(3, 4), (2, 4)], lambda m, a, b: m.tensordot(a, b, axes=((1,), (1,)))),
    "tensordot-int-pair": ([(3, 4), (4, 2)], lambda m, a, b: m.tensordot(a, b, axes=(1, 0))),
    "matmul-1d-1d": ([(4,), (4,)], lambda m, a, b: m.matmul(a, b)),
    "matmul-1d-2d": ([(4,), (4, 3)], lambda m, a, b: m.matmul(a, b)),
    "matmul-2d-1d": ([(3, 4), (4,)], lambda m, a, b: m.matmul(a, b)),
    "matmul-2d-2d": ([(3, 4), (4, 5)], lambda m, a, b: m.matmul(a, b)),
    "matmul-batched": ([(2, 3, 4), (2, 4, 5)], lambda m, a, b: m.matmul(a, b)),
    "matmul-batch-broadcast": ([(2, 1, 3, 4), (5, 4, 2)], lambda m, a, b: m.matmul(a, b)),
    "matmul-batch-vs-2d": ([(2, 3, 4), (4, 5)], lambda m, a, b: m.matmul(a, b)),
    "matmul-1d-batched": ([(4,), (2, 4, 3)], lambda m, a, b: m.matmul(a, b)),
    "matmul-op": ([(2, 3, 4), (4, 2)], lambda m, a, b: a @ b),
    "matmul-op-1d": ([(4,), (4,)], lambda m, a, b: a @ b),
    "dot-1d": ([(4,), (4,)], lambda m, a, b: m.dot(a, b)),
    "dot-2d": ([(3, 4), (4, 5)], lambda m, a, b: m.dot(a, b)),
    "dot-2d-1d": ([(3, 4), (4,)], lambda m, a, b: m.dot(a, b)),
    "dot-nd": ([(2, 3, 4), (5, 4, 2)], lambda m, a, b: m.dot(a, b)),
    "dot-0d": ([(), (3, 2)], lambda m, a, b: m.dot(a, b)),
    "outer-1d": ([(3,), (4,)], lambda m, a, b: m.outer(a, b)),
    "outer-2d-flattens": ([(2, 2), (3,)], lambda m, a, b: m.outer(a, b)),
}
CONTRACTION_DTYPES = ["float64", "float32", "complex128", "int32", "int64", "bool"]


@pytest.mark.parametrize("dtype", CONTRACTION_DTYPES)
@pytest.mark.parametrize("name", list(CONTRACTIONS))
def test_contractions(name, dtype):
    shapes, fn = CONTRACTIONS[name]
    r = rng()
    a, b = (random_array(r, s, dtype) for s in shapes)
    expected = numpy_or_skip(fn, np, a, b)
    _check(fn(tl, tl.asarray(a), tl.asarray(b)), expected)


def test_matmul_reflected_numpy_left():
    r = rng()
    a, b = random_array(r, (3, 4), "float64"), random_array(r, (4, 2), "float64")
    _check(a @ tl.asarray(b), a @ b)
    _check(tl.asarray(a) @ b, a @ b)


def test_matmul_mixed_dtypes():
    r = rng()
    a, b = random_array(r, (3, 4), "float32"), random_array(r, (4, 2), "complex128")
    _check(tl.asarray(a) @ tl.asarray(b), a @ b)


TRACE_DIAG = {
    "trace": ((4, 4), lambda m, x: m.trace(x)),
    "trace-rect": ((3, 5), lambda m, x: m.trace(x)),
    "trace-offset1": ((4, 4), lambda m, x: m.trace(x, offset=1)),
    "trace-offset-1": ((4, 5), lambda m, x: m.trace(x, offset=-1)),
    "trace-offset-past": ((3, 3), lambda m, x: m.trace(x, offset=5)),
    "trace-axes": ((3, 2, 3), lambda m, x: m.trace(x, axis1=0, axis2=2)),
    "trace-axes-3d-default": ((3, 3, 2), lambda m, x: m.trace(x)),
    "trace-axes-neg": ((2, 4, 4), lambda m, x: m.trace(x, offset=1, axis1=-1, axis2=-2)),
    "diagonal": ((4, 4), lambda m, x: m.diagonal(x)),
    "diagonal-rect": ((3, 5), lambda m, x: m.diagonal(x)),
    "diagonal-offset1": ((4, 5), lambda m, x: m.diagonal(x, offset=1)),
    "diagonal-offset-2": ((4, 5), lambda m, x: m.diagonal(x, offset=-2)),
    "diagonal-axes": ((3, 2, 3), lambda m, x: m.diagonal(x, axis1=0, axis2=2)),
    "diagonal-axes-swapped": ((3, 4, 2), lambda m, x: m.diagonal(x, 1, 2, 0)),
    "diagonal-3d-default": ((3, 3, 2), lambda m, x: m.diagonal(x)),
}


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex64", "int32", "bool"])
@pytest.mark.parametrize("name", list(TRACE_DIAG))
def test_trace_diagonal(name, dtype):
    shape, fn = TRACE_DIAG[name]
    x = random_array(rng(), shape, dtype)
    expected = numpy_or_skip(fn, np, x)
    _check(fn(tl, tl.asarray(x)), expected)


def test_trace_of_matmul():
    r = rng()
    a, b = random_array(r, (3, 4), "float64"), random_array(r, (4, 3), "float64")
    _check(tl.trace(tl.asarray(a) @ tl.asarray(b)), np.trace(a @ b))


# ---------------------------------------------------------------------------------------------
# creation functions

CREATION = {
    "zeros": lambda m: m.zeros((2, 3)),
    "zeros-int-shape": lambda m: m.zeros(4),
    "zeros-int32": lambda m: m.zeros((2, 3), dtype="int32"),
    "zeros-0d": lambda m: m.zeros(()),
    "zeros-empty": lambda m: m.zeros((0, 3)),
    "ones": lambda m: m.ones((3,)),
    "ones-complex": lambda m: m.ones((2, 2), dtype=np.complex64),
    "ones-bool": lambda m: m.ones((2,), dtype=bool),
    "full-int": lambda m: m.full((2, 3), 7),
    "full-float": lambda m: m.full((2,), 1.5),
    "full-bool": lambda m: m.full((2, 2), True),
    "full-complex": lambda m: m.full((2,), 1 + 2j),
    "full-dtype": lambda m: m.full((2, 3), 3, dtype="float32"),
    "eye": lambda m: m.eye(3),
    "eye-rect-k": lambda m: m.eye(3, 4, k=1),
    "eye-neg-k": lambda m: m.eye(4, k=-2),
    "eye-int32": lambda m: m.eye(3, dtype="int32"),
    "arange": lambda m: m.arange(5),
    "arange-start-stop-step": lambda m: m.arange(2, 10, 3),
    "arange-negative-step": lambda m: m.arange(5, -3, -2),
    "arange-float": lambda m: m.arange(0.0, 1.0, 0.25),
    "arange-dtype": lambda m: m.arange(5, dtype="float32"),
    "arange-empty": lambda m: m.arange(3, 1),
}


@pytest.mark.parametrize("name", list(CREATION))
def test_creation(name):
    fn = CREATION[name]
    _check(fn(tl), fn(np))


def test_creation_in_expression():
    x = random_array(rng(), (3, 3), "float32")
    t = tl.asarray(x) + tl.eye(3, dtype="float32") * 2 - tl.ones((3,), dtype="float32")
    _check(t, x + np.eye(3, dtype="float32") * 2 - np.ones((3,), dtype="float32"))


# ---------------------------------------------------------------------------------------------
# Tensor attributes and protocol


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 3, 4), (0, 2)], ids=str)
def test_attributes(shape):
    x = random_array(rng(), shape, "float32")
    t = tl.asarray(x)
    assert t.shape == shape
    assert isinstance(t.shape, tuple)
    assert t.dtype == np.float32
    assert np.dtype(t.dtype) == np.dtype("float32")
    assert t.ndim == x.ndim
    assert t.size == x.size
    assert isinstance(t.size, int)
    tt = t.T
    assert isinstance(tt, Tensor)
    assert tt.shape == x.T.shape
    assert_close(tt.evaluate(), x.T)


def test_asarray_preserves_dtype_and_values():
    for dtype in ALL_DTYPES:
        x = random_array(rng(), (2, 3), dtype)
        out = tl.asarray(x).evaluate()
        assert_close(out, x)


def test_bool_raises():
    # a lazy tensor has no truth value yet; any clear error type will do
    errors = (TypeError, ValueError, tl.TenloomError)
    t = tl.asarray(np.ones(3))
    u = t + 0.0
    with pytest.raises(errors):
        bool(t)
    with pytest.raises(errors):
        bool(tl.asarray(np.array(True)))
    with pytest.raises(errors):
        if t == u:  # the point is that this must not silently work
            pass


def test_hash_by_identity():
    x = np.arange(6.0).reshape(2, 3)
    a = tl.asarray(x)
    b = a + 1
    c = a * 2
    d = {a: "a", b: "b", c: "c"}
    assert d[a] == "a" and d[b] == "b" and d[c] == "c"
    assert hash(a) == hash(a)
    assert a in d and b in {b}
    # == is elementwise and lazy, not identity
    eq = a == a  # noqa: PLR0124 -- elementwise, must be a lazy Tensor
    assert isinstance(eq, Tensor)
    assert_close(eq.evaluate(), np.ones((2, 3), dtype=bool))


def test_placeholder_feed():
    x = tl.placeholder((3, 4), dtype="float64", name="x")
    assert x.shape == (3, 4)
    assert x.dtype == np.float64
    y = tl.sum(x * 2.0 + 1.0, axis=1)
    assert y.shape == (3,)
    arr = random_array(rng(), (3, 4), "float64")
    assert_close(y.evaluate(feed={x: arr}), np.sum(arr * 2.0 + 1.0, axis=1))
    (res,) = tl.evaluate(y, feed={x: arr})
    assert_close(res, np.sum(arr * 2.0 + 1.0, axis=1))
    arr2 = arr + 1.0
    assert_close(y.evaluate(feed={x: arr2}), np.sum(arr2 * 2.0 + 1.0, axis=1))


def test_placeholder_with_constants_and_two_placeholders():
    r = rng()
    a = random_array(r, (4, 5), "float32")
    x = tl.placeholder((3, 4), dtype="float32", name="lhs")
    w = tl.placeholder((5,), dtype="float32", name="w")
    y = (x @ tl.asarray(a)) * w
    xv, wv = random_array(r, (3, 4), "float32"), random_array(r, (5,), "float32")
    assert_close(y.evaluate(feed={x: xv, w: wv}), (xv @ a) * wv)


def test_unbound_placeholder_raises_naming_it():
    x = tl.placeholder((3, 4), dtype="float64", name="x")
    y = x + 1.0
    with pytest.raises(tl.TenloomError) as info:
        y.evaluate()
    assert "x" in str(info.value)


def test_unbound_placeholder_named_among_several():
    x = tl.placeholder((3,), dtype="float64", name="alpha_input")
    z = tl.placeholder((3,), dtype="float64", name="zeta_input")
    y = x * z
    with pytest.raises(tl.TenloomError) as info:
        tl.evaluate(y, feed={x: np.ones(3)})
    assert "zeta_input" in str(info.value)


def test_shared_subgraph_evaluate():
    r = rng()
    a, b = random_array(r, (3, 4), "float64"), random_array(r, (4, 5), "float64")
    s = tl.asarray(a) @ tl.asarray(b)
    y = tl.exp(s) + 1.0
    z = tl.sum(s * 2.0, axis=0)
    res = tl.evaluate(y, z)
    assert isinstance(res, tuple) and len(res) == 2
    assert_close(res[0], np.exp(a @ b) + 1.0)
    assert_close(res[1], np.sum((a @ b) * 2.0, axis=0))
    # the same tensor twice, and the shared node itself
    r1, r2, r3 = tl.evaluate(y, y, s)
    assert_close(r1, np.exp(a @ b) + 1.0)
    assert_close(r2, np.exp(a @ b) + 1.0)
    assert_close(r3, a @ b)


def test_evaluate_twice_gives_same_result():
    r = rng()
    a = random_array(r, (3, 4), "float64")
    t = tl.sin(tl.asarray(a)).T @ tl.asarray(a)
    first = t.evaluate()
    second = t.evaluate()
    assert_close(first, np.sin(a).T @ a)
    np.testing.assert_array_equal(first, second)


# ---------------------------------------------------------------------------------------------
# zero-size arrays and odd feeds


def test_zero_size_elementwise_and_reductions():
    x = np.zeros((0, 3))
    t = tl.asarray(x)
    _check(tl.exp(t) + 1.0, np.exp(x) + 1.0)
    _check(tl.sum(t, axis=0), np.sum(x, axis=0))
    _check(tl.sum(t), np.sum(x))
    _check(tl.prod(t, axis=0), np.prod(x, axis=0))
    _check(tl.max(t, axis=1), np.max(x, axis=1))
    _check(t.T @ t, x.T @ x)


def test_placeholder_wrong_feed_shape_raises():
    x = tl.placeholder((3, 4), dtype="float64", name="x_in")
    y = x * 2.0
    with pytest.raises(tl.TenloomError) as info:
        y.evaluate(feed={x: np.ones((4, 3))})
    assert "x_in" in str(info.value)


@pytest.mark.parametrize("dtype", ["int32", "complex64", "bool"])
def test_placeholder_dtypes(dtype):
    x = tl.placeholder((2, 3), dtype=dtype, name="p")
    assert x.dtype == np.dtype(dtype)
    y = tl.sum(x, axis=0)
    v = random_array(rng(), (2, 3), dtype)
    assert y.dtype == np.sum(v, axis=0).dtype
    assert_close(y.evaluate(feed={x: v}), np.sum(v, axis=0))
