"""tl.linalg.vector_norm, matrix_norm, norm and pinv (graph/ops/norms.py): values and dtypes
against numpy.linalg for every dtype, batched and not; gradients against finite differences
and forward against reverse mode (real and complex), finite at a zero vector; typed errors;
OpenCL (the norms of elementwise ops and sums run there; the SVD-based ones raise a
DeviceError naming svd)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import assert_close
from rule_checks import rule_tests
from test_autodiff import _rand

import tenloom as tl

DTYPES = ["float32", "float64", "complex64", "complex128"]
VECTOR_ORDS = [2, 1, 0, 3, 0.5, -1, -2.5, math.inf, -math.inf]
MATRIX_ORDS = ["fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf]


def _real_of(dtype) -> np.dtype:
    return np.empty(0, dtype).real.dtype


# ---- values --------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:divide by zero")  # negative ords of the zero entry
@pytest.mark.parametrize("dtype", DTYPES)
def test_vector_norm_matches_numpy(dtype):
    x = _rand(np.random.default_rng(0), (2, 3, 4), dtype)
    x[0, 1, 2] = 0  # ord=0 counts it out
    for ord_ in VECTOR_ORDS:
        for axis in (None, 1, -1, (0, 2)):
            for keepdims in (False, True):
                got = tl.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord_)
                want = np.linalg.vector_norm(x, axis=axis, keepdims=keepdims, ord=ord_)
                assert got.dtype == want.dtype == _real_of(dtype), (ord_, axis)
                assert_close(got.evaluate(), want, dtype)


@pytest.mark.parametrize("shape", [(3, 4), (2, 4, 3), (2, 1, 3, 3)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_norm_matches_numpy(dtype, shape):
    x = _rand(np.random.default_rng(1), shape, dtype)
    outs, wants = [], []
    for ord_ in MATRIX_ORDS:
        for keepdims in (False, True):
            outs.append(tl.linalg.matrix_norm(x, keepdims=keepdims, ord=ord_))
            wants.append(np.linalg.matrix_norm(x, keepdims=keepdims, ord=ord_))
    for got, t, want in zip(tl.evaluate(*outs), outs, wants):
        assert t.dtype == want.dtype == _real_of(dtype)
        assert_close(got, want, dtype)


def test_norm_follows_numpy_linalg_norm():
    rng = np.random.default_rng(2)
    x3 = _rand(rng, (2, 3, 4), "complex128")
    m = _rand(rng, (3, 4), "float64")
    v = _rand(rng, (5,), "float32")
    cases = [
        (x3, {}),  # everything flattened: the 2-norm
        (x3, {"keepdims": True}),
        (m, {"ord": "nuc"}),
        (m, {"ord": "f"}),
        (m, {"ord": -math.inf, "keepdims": True}),
        (m, {"ord": 1, "axis": 0}),
        (v, {"ord": 3}),
        (v, {"ord": 0}),
        (x3, {"axis": 1}),
        (x3, {"axis": (2,), "ord": math.inf, "keepdims": True}),
        (x3, {"axis": (2, 0), "ord": 1}),  # rows on axis 2, columns on axis 0
        (x3, {"axis": (-1, 1), "ord": 2, "keepdims": True}),
        (x3, {"axis": (0, 1)}),
        (np.arange(6).reshape(2, 3), {"ord": -1}),  # integers: float64
        (np.arange(6) > 2, {}),
    ]
    for a, kw in cases:
        got, want = tl.linalg.norm(a, **kw), np.linalg.norm(a, **kw)
        assert got.dtype == want.dtype and got.shape == want.shape, kw
        assert_close(got.evaluate(), want)


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (2, 3, 5)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_pinv_matches_numpy(dtype, shape):
    rng = np.random.default_rng(3)
    a = _rand(rng, shape, dtype)
    tall = shape[-2] >= shape[-1]
    # a rank-deficient one: its smallest singular value is cut
    low = _rand(rng, shape[:-1] + (2,), dtype) @ _rand(rng, shape[:-2] + (2, shape[-1]), dtype)
    h = a[..., :3, :3] + np.conj(np.swapaxes(a[..., :3, :3], -1, -2))
    default = max(shape[-2:]) * np.finfo(_real_of(dtype)).eps
    cases = [
        (tl.linalg.pinv(a), np.linalg.pinv(a, rtol=default)),
        (tl.linalg.pinv(low), np.linalg.pinv(low, rtol=default)),
        (tl.linalg.pinv(a, 0.5), np.linalg.pinv(a, rtol=0.5)),
        (tl.linalg.pinv(a, rcond=0.3), np.linalg.pinv(a, rcond=0.3)),
        (tl.linalg.pinv(h, hermitian=True), np.linalg.pinv(h, rtol=default, hermitian=True)),
        (tl.linalg.pinv(h, 0.4, hermitian=True), np.linalg.pinv(h, rtol=0.4, hermitian=True)),
    ]
    if len(shape) == 3:  # an rtol per matrix, broadcast against the batch axes
        r = np.array([0.0, 0.6])
        cases.append((tl.linalg.pinv(a, r), np.linalg.pinv(a, rtol=r)))
    got = tl.evaluate(*(t for t, _ in cases))
    for g, (t, want) in zip(got, cases):
        assert t.dtype == want.dtype and t.shape == want.shape
        assert_close(g, want, dtype, scale=max(1.0, float(np.abs(want).max())))
    # the rank-deficient one really lost a singular value, and A A+ A = A still holds
    assert np.linalg.matrix_rank(got[1][0] if len(shape) == 3 else got[1]) == 2
    assert_close(low @ got[1] @ low, low, dtype, scale=float(np.abs(low).sum()))
    assert tall or got[0].shape[-2] > got[0].shape[-1]


def test_pinv_of_zeros_and_integers():
    assert_close(tl.linalg.pinv(np.zeros((2, 3))).evaluate(), np.zeros((3, 2)))
    ints = np.array([[1, 2], [3, 4], [5, 6]])
    got = tl.linalg.pinv(ints)
    assert got.dtype == np.float64
    assert_close(got.evaluate(), np.linalg.pinv(ints))


# ---- gradients -------------------------------------------------------------------------------


def _pinv_h(a):
    return tl.linalg.pinv(a + tl.conj(tl.moveaxis(a, -1, -2)), hermitian=True)


GRADS = {
    "vector_2": (lambda x: tl.linalg.vector_norm(x, axis=1), [(3, 4)]),
    "vector_1_keepdims": (lambda x: tl.linalg.vector_norm(x, 0, True, 1), [(3, 4)]),
    "vector_3_all": (lambda x: tl.linalg.vector_norm(x, ord=3), [(2, 3, 2)]),
    "vector_inf": (lambda x: tl.linalg.vector_norm(x, -1, ord=math.inf), [(3, 4)]),
    "vector_neg": (lambda x: tl.linalg.vector_norm(x, (0, 2), ord=-1.5), [(2, 3, 2)]),
    "fro_batched": (lambda x: tl.linalg.matrix_norm(x), [(2, 3, 4)]),
    "nuc": (lambda x: tl.linalg.matrix_norm(x, ord="nuc"), [(3, 4)]),
    "spectral": (lambda x: tl.linalg.matrix_norm(x, ord=2), [(2, 4, 3)]),
    "spectral_min": (lambda x: tl.linalg.matrix_norm(x, True, ord=-2), [(3, 3)]),
    "induced_1": (lambda x: tl.linalg.matrix_norm(x, ord=1), [(2, 3, 4)]),
    "induced_inf": (lambda x: tl.linalg.matrix_norm(x, ord=-math.inf), [(3, 4)]),
    "norm_axes": (lambda x: tl.linalg.norm(x, 2, (2, 0), keepdims=True), [(3, 2, 4)]),
    "norm_flat": (lambda x: tl.linalg.norm(x), [(2, 3, 4)]),
    "pinv_tall": (tl.linalg.pinv, [(4, 3)]),
    "pinv_wide_batched": (tl.linalg.pinv, [(2, 2, 4)]),
    "pinv_square": (lambda x: tl.linalg.pinv(x, 1e-3), [(3, 3)]),
    "pinv_hermitian": (_pinv_h, [(2, 3, 3)]),
}
test_gradients_match_finite_differences, test_jvp_matches_finite_differences_and_the_vjp = (
    rule_tests(GRADS)
)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_gradient_at_a_zero_vector_is_finite(dtype):
    """The 2-norm, the Frobenius norm and the p-norms (p > 1) have the subgradient 0 at a zero
    vector instead of nan; a zero row next to nonzero ones keeps the right gradient."""
    x = tl.placeholder((2, 3), dtype)
    a = np.zeros((2, 3), dtype)
    a[1] = [3.0, 4.0, 0.0]
    losses = [
        tl.sum(tl.linalg.vector_norm(x, axis=1)),
        tl.sum(tl.linalg.vector_norm(x, axis=1, ord=3)),
        tl.linalg.matrix_norm(x[:1]),
        tl.linalg.norm(x[:1]),
    ]
    grads = tl.evaluate(*(tl.grad(loss, [x])[0] for loss in losses), feed={x: a})
    for g in grads:
        assert np.all(np.isfinite(g)) and np.all(g[0] == 0)
    assert_close(grads[0][1], np.array([0.6, 0.8, 0.0], dtype))


def test_pinv_gradient_is_the_closed_form():
    """For a full-column-rank A (I - A+ A = 0), d A+ = -A+ dA A+ + A+ A+^H dA^H (I - A A+)
    (Golub and Pereyra): the JVP against that formula."""
    rng = np.random.default_rng(4)
    a, d = _rand(rng, (5, 3), "float64"), _rand(rng, (5, 3), "float64")
    x = tl.placeholder((5, 3))
    t = tl.jvp(tl.linalg.pinv(x), [x], [tl.asarray(d)])  # one output: one tangent
    p = np.linalg.pinv(a)
    want = -p @ d @ p + p @ p.T @ d.T @ (np.eye(5) - a @ p)
    assert_close(t.evaluate(feed={x: a}), want)


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (3, 4)])
@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_pinv_gradient_of_a_rank_deficient_matrix_along_rank_keeping_directions(dtype, shape):
    """A = B C of rank 2: the cut singular value contributes nothing, and the gradient matches
    central differences along A(t) = (B + t dB)(C + t dC), which keeps the rank (pinv is not
    continuous across rank changes)."""
    rng = np.random.default_rng(6)
    b, db = _rand(rng, (shape[0], 2), dtype), _rand(rng, (shape[0], 2), dtype)
    c, dc = _rand(rng, (2, shape[1]), dtype), _rand(rng, (2, shape[1]), dtype)
    w = _rand(rng, shape[::-1], dtype)
    # (an exactly zero singular value, as LAPACK may give here, is fine: pinv's own rule)
    x = tl.placeholder(shape, dtype)
    (g,) = tl.grad(tl.sum(tl.real(tl.linalg.pinv(x) * np.conj(w))), [x])
    got = g.evaluate(feed={x: b @ c})

    def loss(t):
        return float(np.sum(np.real(np.linalg.pinv((b + t * db) @ (c + t * dc)) * np.conj(w))))

    numeric = (loss(1e-6) - loss(-1e-6)) / 2e-6
    analytic = float(np.real(np.vdot(got, db @ c + b @ dc)))
    assert abs(analytic - numeric) <= 1e-6 * max(1.0, abs(numeric))


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_exactly_zero_singular_values_keep_the_spectral_norm_gradient_finite(dtype):
    """The spectral norm of a rank-deficient rectangular matrix is differentiable (its largest
    singular value is simple): its gradient is u_0 v_0^H. The singular values' own rules
    (graph/ops/spectra.py) divide by nothing, so this stays finite although the full SVD's
    rules give nan there (tests/test_linalg_spectra.py)."""
    a = np.zeros((4, 3), dtype)
    a[0, 0], a[1, 1] = 2.0, 1.0
    x = tl.placeholder((4, 3), dtype)
    (g,) = tl.grad(tl.linalg.matrix_norm(x, ord=2), [x])
    want = np.zeros((4, 3), dtype)
    want[0, 0] = 1.0
    assert_close(g.evaluate(feed={x: a}), want)


# ---- errors ------------------------------------------------------------------------------------


def test_errors_are_typed_and_name_the_op():
    m, v = np.ones((3, 4)), np.ones(4)
    with pytest.raises(tl.OptionError, match="vector_norm: ord 'fro' is not valid for vectors"):
        tl.linalg.vector_norm(v, ord="fro")
    with pytest.raises(tl.OptionTypeError, match="vector_norm: ord True is not a number"):
        tl.linalg.vector_norm(v, ord=True)
    with pytest.raises(tl.OptionError, match="vector_norm: ord must not be nan"):
        tl.linalg.vector_norm(v, ord=float("nan"))
    with pytest.raises(tl.ShapeError, match=r"vector_norm: axis 3 is out of bounds .* \(3, 4\)"):
        tl.linalg.vector_norm(m, axis=3)
    with pytest.raises(tl.OptionTypeError, match="vector_norm: keepdims=2"):
        tl.linalg.vector_norm(m, keepdims=2)
    with pytest.raises(tl.OptionError, match="matrix_norm: ord 3 is not valid for matrices"):
        tl.linalg.matrix_norm(m, ord=3)
    with pytest.raises(tl.OptionError, match="matrix_norm: ord 'max' is not valid"):
        tl.linalg.matrix_norm(m, ord="max")
    with pytest.raises(tl.OptionTypeError, match="matrix_norm: ord None is not a number"):
        tl.linalg.matrix_norm(m, ord=None)
    with pytest.raises(tl.ShapeError, match=r"matrix_norm: operand 0 of shape \(4,\) has 1"):
        tl.linalg.matrix_norm(v)
    with pytest.raises(tl.ShapeError, match=r"norm: ord=2 with axis=None needs .* \(2, 3, 4\)"):
        tl.linalg.norm(np.ones((2, 3, 4)), 2)
    with pytest.raises(tl.OptionError, match="norm: ord 'nuc' is not valid for vectors"):
        tl.linalg.norm(m, "nuc", axis=1)
    with pytest.raises(tl.ShapeError, match="norm: axis .* names the same axis twice"):
        tl.linalg.norm(m, axis=(1, -1))
    with pytest.raises(tl.ShapeError, match="norm: axis -3 is out of bounds"):
        tl.linalg.norm(m, axis=(0, -3))
    with pytest.raises(tl.ShapeError, match=r"norm: axis \(0, 1, 2\) names 3 axes"):
        tl.linalg.norm(np.ones((2, 2, 2)), axis=(0, 1, 2))
    with pytest.raises(tl.OptionTypeError, match="norm: axis 1.5 is not an int"):
        tl.linalg.norm(m, axis=(0, 1.5))
    with pytest.raises(tl.ShapeError, match=r"pinv: operand 0 of shape \(4,\) has 1 axes"):
        tl.linalg.pinv(v)
    with pytest.raises(tl.OptionError, match="pinv: give rtol= or rcond="):
        tl.linalg.pinv(m, 0.1, rcond=0.1)
    with pytest.raises(tl.OptionError, match="pinv: rtol must be finite and >= 0, got -1"):
        tl.linalg.pinv(m, -1)
    with pytest.raises(tl.OptionTypeError, match="pinv: rtol True is a bool"):
        tl.linalg.pinv(m, True)
    with pytest.raises(tl.OptionTypeError, match="pinv: rtol must be real, got dtype complex"):
        tl.linalg.pinv(m, np.array([1j]))
    with pytest.raises(tl.ShapeError, match=r"pinv: rtol of shape \(3,\) does not broadcast"):
        tl.linalg.pinv(np.ones((2, 3, 3)), np.ones(3))
    with pytest.raises(tl.ShapeError, match=r"pinv: operand 0 of shape \(3, 4\) is not a"):
        tl.linalg.pinv(m, hermitian=True)
    with pytest.raises(tl.OptionTypeError, match="pinv: hermitian='yes'"):
        tl.linalg.pinv(m, hermitian="yes")
    with pytest.raises(tl.DTypeError, match="svd: not defined for dtype float16"):
        tl.linalg.pinv(np.ones((2, 2), "float16"))


# ---- OpenCL --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ocl():
    try:
        from test_opencl import DEVICE
    except Exception:  # no pyopencl: test_opencl skips itself
        DEVICE = None
    if DEVICE is None:
        pytest.skip("no OpenCL device (see test_opencl.py)")
    return DEVICE


@pytest.mark.opencl
def test_opencl_runs_the_elementwise_norms_and_names_svd_for_the_others(ocl):
    x = _rand(np.random.default_rng(5), (3, 4), "float32")
    for ord_ in (2, 1, math.inf, 3):
        got = tl.linalg.vector_norm(x, axis=1, ord=ord_).evaluate(device=ocl)
        assert_close(got, np.linalg.vector_norm(x, axis=1, ord=ord_))
    for ord_ in ("fro", 1, -math.inf):
        got = tl.linalg.matrix_norm(x, ord=ord_).evaluate(device=ocl)
        assert_close(got, np.linalg.matrix_norm(x, ord=ord_))
    p = tl.placeholder((3, 4), "float32")
    for t in (tl.linalg.pinv(p), tl.linalg.matrix_norm(p, ord=2), tl.linalg.norm(p, "nuc")):
        with pytest.raises(tl.DeviceError, match=f"{ocl}: no kernel for op 'svd(vals)?'"):
            t.evaluate(device=ocl, feed={p: x})
    with pytest.raises(tl.DeviceError, match=f"{ocl}: no kernel for op 'eigh'"):
        tl.linalg.pinv(p[:, :3], hermitian=True).evaluate(device=ocl, feed={p: x})


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_nan_and_inf_entries_propagate_as_numpy(dtype):
    """The zero-safe root must not turn a NaN sum into 0 (it did: NaN > 0 is False)."""
    for bad in (np.nan, np.inf):
        a = np.ones((3, 4), dtype)
        a[0, 1] = bad
        for ord_ in (None, "fro"):
            assert_close(tl.linalg.norm(a, ord_).evaluate(), np.linalg.norm(a, ord_))
        for p in (2, 3, 0.5):
            assert_close(
                tl.linalg.vector_norm(a, axis=1, ord=p).evaluate(),
                np.linalg.vector_norm(a, axis=1, ord=p),
            )


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("kind", ["orthogonal", "scaled_identity", "two_equal", "isometry"])
def test_pinv_gradient_where_singular_values_repeat(dtype, kind):
    """pinv's own rule (the Moore-Penrose derivative), not the SVD's, whose broadening drops
    the pairs of equal singular values: pinv of an orthogonal matrix had a gradient of 0."""
    rng = np.random.default_rng(9)
    q = np.linalg.qr(_rand(rng, (3, 3), dtype))[0]
    a = {
        "orthogonal": q,
        "scaled_identity": 2.0 * np.eye(3, dtype=dtype),
        "two_equal": q + 3.0 * np.eye(3, dtype=dtype),
        "isometry": np.linalg.qr(_rand(rng, (4, 3), dtype))[0],
    }[kind]
    w, d = _rand(rng, a.shape[::-1], dtype), _rand(rng, a.shape, dtype)
    x = tl.placeholder(a.shape, dtype)
    loss = tl.sum(tl.real(tl.linalg.pinv(x) * np.conj(w)))
    (g,) = tl.evaluate(tl.grad(loss, [x])[0], feed={x: a})
    (t,) = tl.evaluate(tl.jvp(loss, [x], [tl.asarray(d)]), feed={x: a})

    def f(y):
        return float(np.sum(np.real(np.linalg.pinv(y) * np.conj(w))))

    numeric = (f(a + 1e-6 * d) - f(a - 1e-6 * d)) / 2e-6
    assert abs(float(np.real(np.vdot(g, d))) - numeric) <= 1e-7 * max(1.0, abs(numeric))
    assert abs(float(np.real(t)) - numeric) <= 1e-7 * max(1.0, abs(numeric))


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_hermitian_pinv_differentiates_the_lower_triangle_it_reads(dtype):
    rng = np.random.default_rng(10)
    b = _rand(rng, (3, 3), dtype)
    a = b @ b.conj().T + np.eye(3)
    a[0, 2] = 100.0  # above the diagonal: not read
    w, d = _rand(rng, (3, 3), dtype), _rand(rng, (3, 3), dtype)
    x = tl.placeholder((3, 3), dtype)
    loss = tl.sum(tl.real(tl.linalg.pinv(x, hermitian=True) * np.conj(w)))
    (g,) = tl.evaluate(tl.grad(loss, [x])[0], feed={x: a})
    assert np.all(np.triu(g, 1) == 0)

    def f(y):
        low = np.tril(y, -1)
        h = low + low.conj().T + np.diag(np.real(np.diag(y)))
        return float(np.sum(np.real(np.linalg.pinv(h) * np.conj(w))))

    numeric = (f(a + 1e-6 * d) - f(a - 1e-6 * d)) / 2e-6
    assert abs(float(np.real(np.vdot(g, d))) - numeric) <= 1e-7 * max(1.0, abs(numeric))
