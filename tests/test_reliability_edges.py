"""Issue 18, classes 4, 5 and 7: edge cases that gave wrong answers or raw errors.

* 4: basic indexing (slices with any start/stop/step, ints, None, Ellipsis) equals NumPy's,
  empty results included (``x[-7:-6:-1]`` returned the whole axis reversed).
* 5: fused elementwise regions compute what NumPy's ufuncs compute, also near overflow and for
  special values: numexpr's complex arithmetic overflowed (``sqrt(1e308+1e308j)``) and its
  maximum/minimum kept the wrong zero; OpenCL's complex sqrt/log/exp/sin/cos/tanh overflowed.
* 7: einsum networks with a zero-size dimension (cotengra raised a raw KeyError) and
  reductions over zero-size axes.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tenloom.runtime.backends import cpu as cpu_backend

import tenloom as tl

RNG = np.random.default_rng(18)
CI = os.environ.get("CI") == "true"


# ---- devices ---------------------------------------------------------------------------------


def _opencl_device() -> tuple[str | None, str]:
    try:
        from tenloom.runtime.backends import opencl
    except ImportError as e:
        return None, f"pyopencl is not importable ({e})"
    for index, _name, _ in opencl.list_devices():
        device = f"opencl:{index}"
        try:
            out = (tl.asarray(np.arange(4.0)) * 2.0).evaluate(device=device)
            if np.array_equal(out, np.arange(4.0) * 2.0):
                return device, ""
        except Exception:  # a broken compiler: try the next device
            continue
    return None, "no OpenCL device compiles kernels"


@pytest.fixture(scope="module")
def ocl() -> str:
    device, why = _opencl_device()
    if device is None:
        if CI:
            pytest.fail(f"CI=true requires a working OpenCL device: {why}")
        pytest.skip(why)
    return device


@pytest.fixture(scope="module")
def gpu() -> str:
    cp = pytest.importorskip("cupy")
    try:
        n = cp.cuda.runtime.getDeviceCount()
    except Exception:  # no driver
        n = 0
    if n == 0:
        pytest.skip("no CUDA GPU present")
    return "cuda:0"


# ---- class 4: basic indexing -----------------------------------------------------------------

BOUNDS = [*range(-7, 8), None]
STEPS = (-3, -2, -1, 1, 2, 3, None)


def _check_all_slices(device: str) -> None:
    """Every slice of every short axis (lengths 0..5) against NumPy, one evaluate per length."""
    for n in range(6):
        x = np.arange(n, dtype=np.float64) * 1.5 + 1
        t = tl.asarray(x)
        keys = [slice(a, b, c) for a in BOUNDS for b in BOUNDS for c in STEPS]
        got = tl.evaluate(*[t[k] for k in keys], device=device)
        for k, r in zip(keys, got):
            e = x[k]
            assert r.shape == e.shape and np.array_equal(r, e), (n, k, r, e)


def test_every_slice_of_short_axes_matches_numpy():
    _check_all_slices("cpu")


@pytest.mark.opencl
def test_every_slice_of_short_axes_matches_numpy_on_opencl(ocl):
    _check_all_slices(ocl)


def test_invalid_slices_raise_typed_errors():
    # NumPy: ValueError for a zero step, TypeError for a non-integer bound; both were Python's
    # own exceptions from slice.indices, not TenloomErrors
    x = tl.asarray(np.arange(5.0))
    for k in (slice(None, None, 0), slice(1, 3, np.int64(0))):
        with pytest.raises(tl.ShapeError, match="step cannot be zero"):
            x[k]
        with pytest.raises(ValueError):
            np.arange(5.0)[k]
    for k in (slice(1.0, 2), slice("a", None), slice(None, None, 0.5)):
        with pytest.raises(tl.IndexingError, match="ints or None"):
            x[k]
        with pytest.raises(TypeError):
            np.arange(5.0)[k]
    np.testing.assert_array_equal(x[True:].evaluate(), np.arange(5.0)[True:])  # as NumPy


def test_equal_selections_are_one_node():
    x = tl.asarray(np.arange(4.0))
    assert x[-7:-6:-1].node is x[3:3].node is x[0:0:-2].node  # empty: one canonical form
    assert x[::-1].node is x[3::-1].node is x[3:-5:-1].node
    assert x[1:4:2].node is x[1::2].node is x[1:9:2].node
    assert x[2:3].node is x[2:1:-1].node


@st.composite
def _indexed(draw):
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=3)))
    bound = st.one_of(st.none(), st.integers(-6, 6))
    step = st.one_of(st.none(), st.sampled_from((-3, -2, -1, 1, 2, 3)))
    axis_item = st.one_of(
        st.builds(slice, bound, bound, step),
        st.integers(-5, 5),
    )
    n_axes = draw(st.integers(0, len(shape)))
    items = draw(st.lists(axis_item, min_size=n_axes, max_size=n_axes))
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), Ellipsis)
    return shape, tuple(items)


@given(_indexed())
def test_index_tuples_match_numpy(case):
    shape, key = case
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) + 1
    try:
        expected = x[key]
    except IndexError:
        with pytest.raises(tl.IndexOutOfBoundsError):
            tl.asarray(x)[key]  # raised while tracing, before any work
        return
    t = tl.asarray(x)[key]
    assert t.shape == expected.shape
    got = t.evaluate()
    assert got.shape == expected.shape and np.array_equal(got, expected), (shape, key)
    # the gradient of sum(x[key] * w) scatters w back to where x[key] came from
    w = RNG.standard_normal(expected.shape)
    xt = tl.asarray(x)
    (g,) = tl.grad(tl.sum(xt[key] * tl.asarray(w)), [xt])
    want = np.zeros_like(x)
    want[key] += w  # basic indexing selects each element at most once
    np.testing.assert_allclose(g.evaluate(), want)


# ---- class 5: fused elementwise regions ------------------------------------------------------


def _grid(dtype) -> np.ndarray:
    """Ordinary values, values near overflow and underflow, subnormals, -0.0, inf and nan."""
    f = np.finfo(np.float32 if dtype in ("float32", "complex64") else np.float64)
    r = np.array(
        [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 20.0, 1e-20, 1e20, f.max, -f.max / 3, f.max / 2]
        + [float(f.tiny), -float(f.tiny) / 8, float(f.max) ** 0.9, float(f.tiny) ** 0.9]
        + [np.log(float(f.max)) + 1, -np.log(float(f.max)) - 40, np.inf, -np.inf, np.nan]
    )
    if np.dtype(dtype).kind == "f":
        return r.astype(dtype)
    re, im = np.meshgrid(r, r)
    return (re + 1j * im).ravel().astype(dtype)


def _bits_equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise: the same value (both NaN counts as the same), the same sign of zero."""
    if a.dtype.kind == "c":
        return _bits_equal(a.real, b.real) & _bits_equal(a.imag, b.imag)
    if a.dtype.kind != "f":
        return a == b
    return ((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))


def _region(f, args, pad: bool):
    """f(*args) inside one fused region that the CPU would hand to numexpr: with ``pad``,
    five exact ops (negations and additions of 0) bring it to NUMEXPR_MIN_OPS ops."""
    r = f(*args)
    if r.dtype == np.dtype(bool):
        return ~(~(~(~(~(~r))))) if pad else ~r
    if pad:
        zero = np.zeros((), r.dtype) if isinstance(r, np.ndarray) else tl.zeros((), r.dtype)
        r = -(-(-r + zero) - zero)
    return -r


# the CPU kernel paths: small regions of many ops go through numexpr, shapes (n,) with n >= 2048
# chunk by chunk through NumPy, a big region whose first axis cannot be cut through numexpr
SHAPES = [((10,), True), ((1000,), True), ((1, 4096), False), ((100_000,), False)]

UNARY = {
    "neg": lambda x: -x,
    "abs": lambda x: abs(x),
    "exp": lambda x: np.exp(x) if isinstance(x, np.ndarray) else tl.exp(x),
    "log": lambda x: np.log(x) if isinstance(x, np.ndarray) else tl.log(x),
    "sqrt": lambda x: np.sqrt(x) if isinstance(x, np.ndarray) else tl.sqrt(x),
    "sin": lambda x: np.sin(x) if isinstance(x, np.ndarray) else tl.sin(x),
    "cos": lambda x: np.cos(x) if isinstance(x, np.ndarray) else tl.cos(x),
    "tanh": lambda x: np.tanh(x) if isinstance(x, np.ndarray) else tl.tanh(x),
    "conj": lambda x: np.conj(x) if isinstance(x, np.ndarray) else tl.conj(x),
}
BINARY = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / y,
    "pow": lambda x, y: x**y,
    "maximum": lambda x, y: np.maximum(x, y) if isinstance(x, np.ndarray) else tl.maximum(x, y),
    "minimum": lambda x, y: np.minimum(x, y) if isinstance(x, np.ndarray) else tl.minimum(x, y),
    "eq": lambda x, y: x == y,
    "lt": lambda x, y: x < y,
    "where": lambda x, y: (
        np.where(x == y, x, y) if isinstance(x, np.ndarray) else tl.where(x == y, x, y)
    ),
}
# rounded by the C library's transcendental functions: within a few ulps of NumPy's loops
ROUNDED = {"exp", "log", "sin", "cos", "tanh", "pow"}


def _operands(dtype, size: int, arity: int) -> list[np.ndarray]:
    g = _grid(dtype)
    if arity == 1:
        return [np.resize(g, size)]
    i = RNG.integers(0, g.size, size)
    j = RNG.integers(0, g.size, size)
    if size >= g.size**2:
        i, j = (
            np.resize(np.repeat(np.arange(g.size), g.size), size),
            np.resize(np.tile(np.arange(g.size), g.size), size),
        )
    return [g[i], g[j]]


def _check_region(name: str, dtype: str, device: str = "cpu", exact: bool | None = None):
    f = UNARY.get(name) or BINARY[name]
    arity = 1 if name in UNARY else 2
    for shape, pad in SHAPES:
        size = int(np.prod(shape))
        xs = [x.reshape(shape) for x in _operands(dtype, size, arity)]
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = _region(f, xs, pad)
            got = _region(f, [tl.asarray(x) for x in xs], pad).evaluate(device=device)
        assert got.dtype == want.dtype and got.shape == want.shape
        same = _bits_equal(got, want)
        if name == "mul" and dtype == "complex128":
            # NumPy's complex product depends on its loop (FMA or not) and on the operands'
            # order, which tenloom may swap: an ulp apart, and near overflow inf or finite
            big = np.maximum(abs(xs[0].real), abs(xs[0].imag)) * np.maximum(
                abs(xs[1].real), abs(xs[1].imag)
            )
            same |= ~(big < 1e300)
        swapped = name == "mul" and dtype == "complex128"  # a commutative op: see above
        if exact is False or swapped or (exact is None and name in ROUNDED and dtype[0] == "f"):
            tol = 1e-5 if np.dtype(dtype).itemsize == 4 else 1e-13
            finite = np.isfinite(got) & np.isfinite(want)
            close = np.abs(got - want) <= tol * np.abs(want) + np.finfo(want.dtype).tiny
            same |= finite & close
        bad = np.flatnonzero(~same)
        assert not bad.size, (
            f"{name} {dtype} {shape}: {bad.size} of {size} differ from NumPy, e.g. "
            + ", ".join(
                f"{[x.flat[k] for x in xs]} -> {got.flat[k]} (NumPy {want.flat[k]})"
                for k in bad[:3]
            )
        )


@pytest.mark.parametrize("name", list(UNARY) + list(BINARY))
def test_complex_fused_regions_are_numpys(name):
    """numexpr's complex * / exp log sqrt sin cos tanh ** are textbook formulas: no longer
    run; regions of complex ops are NumPy's ufuncs, bit for bit, whichever path a size takes."""
    if name in ("abs", "maximum", "minimum", "lt"):
        pytest.skip("not fused for complex operands")
    _check_region(name, "complex128")


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("name", list(UNARY) + list(BINARY))
def test_real_fused_regions_are_numpys(name, dtype):
    """Real regions may run through numexpr: exact ops bit for bit (maximum/minimum: NaN and
    signed zeros as NumPy's), the C library's functions within a few ulps, same specials."""
    if name == "conj" or (dtype[0] == "i" and name in ("exp", "log", "sqrt", "sin", "cos")):
        pytest.skip("not an op of this dtype in fused regions")
    if dtype[0] == "i" and name in ("div", "pow", "tanh", "abs"):
        pytest.skip("integer operands are not fused for this op")
    if dtype[0] == "i":
        _check_ints(name, dtype)
    else:
        _check_region(name, dtype)


def _check_ints(name: str, dtype: str):
    f = UNARY.get(name) or BINARY[name]
    info = np.iinfo(dtype)
    vals = np.array([0, 1, -1, 2, -3, 7, info.max, info.min, info.max - 1, info.min + 1], dtype)
    arity = 1 if name in UNARY else 2
    for shape, pad in SHAPES:
        size = int(np.prod(shape))
        xs = [RNG.choice(vals, size).reshape(shape) for _ in range(arity)]
        with np.errstate(all="ignore"):
            want = _region(f, xs, pad)
        got = _region(f, [tl.asarray(x) for x in xs], pad).evaluate()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_issue_examples_fused_near_overflow():
    """The issue's reports, on sizes that take each CPU path."""
    for n in (10, 1000, 100_000):
        a = np.full(n, 1e300 + 1e300j)
        b = np.full(n, 3e10 + 4e10j)
        ta, tb = tl.asarray(a), tl.asarray(b)
        want = ((((a / b) * 2 + 1) * 3) - 1) * 2 + b
        got = (((((ta / tb) * 2 + 1) * 3) - 1) * 2 + tb).evaluate()
        np.testing.assert_allclose(got, want, rtol=1e-14)
        z = np.full((1, max(n, 2048)), 1e308 + 1e308j)
        zero = tl.zeros((), "complex128")
        got = (-(tl.sqrt(tl.asarray(z)) + zero)).evaluate()  # one region of two ops
        np.testing.assert_allclose(got, -np.sqrt(z), rtol=1e-14)


def test_numexpr_runs_only_exact_complex_ops():
    """The CPU backend's list of complex ops numexpr may run holds only exact ones."""
    from tenloom.graph.ops import Op

    assert cpu_backend.NUMEXPR_COMPLEX_EXACT.isdisjoint(
        {Op.MUL, Op.DIV, Op.POW, Op.EXP, Op.LOG, Op.SQRT, Op.SIN, Op.COS, Op.TANH, Op.ABS}
    )


# devices: complex functions must not overflow where the result is finite. For finite inputs
# whose NumPy result is comfortably finite, the device's is close to it (relative to |result|);
# for these ops the special values (inf, nan, -0.0 inputs) also come out as NumPy's.
DEVICE_SPECIALS = ("sqrt", "abs", "exp", "log", "tanh", "div", "add", "sub", "neg", "conj")
DEVICE_FINITE = ("sin", "cos", "mul", "pow")


def _without_subnormals(xs: list[np.ndarray]) -> list[np.ndarray]:
    """The operands whose parts are 0, inf, nan or of moderate size: where subnormals are
    flushed to zero (inputs, intermediates such as 1/b in a division, and results), only those
    have results that do not depend on it."""
    lim = float(np.finfo(xs[0].dtype).tiny) ** 0.5
    moderate = [
        (p == 0) | ~np.isfinite(p) | ((abs(p) >= lim) & (abs(p) <= 1 / lim))
        for x in xs
        for p in (x.real, x.imag)
    ]
    keep = np.logical_and.reduce(moderate)
    return [x[keep] for x in xs]


def _check_device_op(name: str, dtype: str, device: str, strict: bool = True, flush=False):
    """``strict``: each part's nan and inf as NumPy's where its result is not finite (else only
    not finite there too). ``flush``: the device flushes subnormal operands to zero: none."""
    f = UNARY.get(name) or BINARY[name]
    arity = 1 if name in UNARY else 2
    size = _grid(dtype).size ** arity
    xs = _operands(dtype, size, arity)
    if flush:
        xs = _without_subnormals(xs)
    if name in DEVICE_FINITE:
        keep = np.logical_and.reduce([np.isfinite(x) for x in xs])
        if name == "pow":  # beyond, exp(b log a) is ill-conditioned, NumPy's own digits too
            keep &= abs(xs[1]) <= 1e3
        xs = [x[keep] for x in xs]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = f(*xs)
        got = f(*[tl.asarray(x) for x in xs]).evaluate(device=device)
    assert got.dtype == want.dtype
    fi = np.finfo(want.dtype)
    tol = 1e-5 if fi.bits == 32 else 1e-12
    if name == "pow":  # exp(b log a): the error of log a grows with |b log a|
        tol = 1e-3 if fi.bits == 32 else 1e-8
    # comfortably finite: away from the overflow threshold, where rounding decides
    ordinary = np.isfinite(want) & (np.abs(want) < float(fi.max) / 16)
    err = np.abs(got.astype(np.complex128) - want)
    ok = np.where(ordinary, err <= tol * np.abs(want) + 4 * float(fi.tiny), True)
    if name in DEVICE_SPECIALS:
        nonfinite = ~np.isfinite(want)
        ok &= ~nonfinite | ~np.isfinite(got)
        if not strict:
            pass
        elif want.dtype.kind == "c":
            for part in ("real", "imag"):
                w, g = getattr(want, part), getattr(got, part)
                ok &= ~nonfinite | (np.isnan(w) == np.isnan(g)) & (np.isinf(w) == np.isinf(g))
        else:
            ok &= ~nonfinite | (np.isnan(want) == np.isnan(got)) & (np.isinf(want) == np.isinf(got))
    else:
        ok &= np.isfinite(got) | ~ordinary
    bad = np.flatnonzero(~ok)
    assert not bad.size, (
        f"{name} {dtype} on {device}: {bad.size} of {got.size} wrong, e.g. "
        + ", ".join(f"{[x[k] for x in xs]} -> {got[k]} (NumPy {want[k]})" for k in bad[:3])
    )


@pytest.mark.opencl
@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
@pytest.mark.parametrize("name", DEVICE_SPECIALS + DEVICE_FINITE)
def test_complex_ops_do_not_overflow_on_opencl(ocl, name, dtype):
    _check_device_op(name, dtype, ocl)


@pytest.mark.opencl
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_zeros_and_nan_on_opencl(ocl, name, dtype):
    _check_region(name, dtype, device=ocl, exact=True)


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
@pytest.mark.parametrize("name", ["div", "sqrt", "abs", "exp", "add", "neg"])
def test_complex_ops_do_not_overflow_on_cuda(gpu, name, dtype):
    # not strict: CuPy's own complex functions (sqrt, exp) keep C99's special values their own
    # way; its float32 kernels flush subnormals to zero (seen on an H100 with CuPy 14, also
    # in CuPy's own x * 2)
    _check_device_op(name, dtype, gpu, strict=False, flush=dtype == "complex64")
    # and inside a fused region (one generated kernel)
    xs = _operands(dtype, 4096, 1 if name in UNARY else 2)
    if dtype == "complex64":
        xs = _without_subnormals(xs)
    f = UNARY.get(name) or BINARY[name]
    with np.errstate(all="ignore"):
        want = -f(*xs)
    got = (-f(*[tl.asarray(x) for x in xs])).evaluate(device=gpu)
    fin = np.isfinite(want) & (np.abs(want) < float(np.finfo(want.dtype).max) / 16)
    tol = 1e-5 if np.dtype(dtype).itemsize == 8 else 1e-12
    assert np.all(np.isfinite(got[fin]))
    np.testing.assert_allclose(got[fin], want[fin], rtol=tol, atol=4 * np.finfo(want.dtype).tiny)


@pytest.mark.cuda
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_zeros_and_nan_on_cuda(gpu, name):
    _check_region(name, "float64", device=gpu, exact=True)


# ---- class 7: zero-size dimensions in contractions and reductions ----------------------------

ZERO_NETWORKS = [
    ("ij,jk,kl->il", [(2, 0), (0, 3), (3, 2)]),  # contracted zero-size label: zeros
    ("ij,jk,kl->", [(2, 0), (0, 3), (3, 2)]),
    ("ij,jk,kl->ilj", [(2, 0), (0, 3), (3, 2)]),  # zero-size output
    ("ij,jk,kl->il", [(0, 2), (2, 3), (3, 2)]),
    ("ab,bc,cd,da->", [(3, 4), (4, 0), (0, 2), (2, 3)]),
    ("ab,bc,cd,de->ae", [(3, 4), (4, 5), (5, 0), (0, 3)]),
    ("ij,jk->ik", [(2, 0), (0, 3)]),
    ("ij,jk->ijk", [(2, 0), (0, 3)]),
    ("ij->i", [(2, 0)]),
    ("ii->i", [(0, 0)]),
    ("ij,j,jk->ik", [(2, 0), (0,), (0, 2)]),
]


@pytest.mark.parametrize("dtype", ["float64", "complex128", "int64", "bool"])
@pytest.mark.parametrize("subscripts,shapes", ZERO_NETWORKS)
def test_networks_with_a_zero_size_dimension(subscripts, shapes, dtype):
    ops = []
    for s in shapes:
        x = RNG.standard_normal(s)
        if dtype in ("float64", "complex128") and x.size:
            x.flat[0] = np.nan  # NaN and inf elsewhere: an empty sum is still exactly 0
            x.flat[-1] = np.inf
        ops.append(x.astype(dtype) if dtype != "bool" else x > 0)
    want = np.einsum(subscripts, *ops)
    for opts in ({}, {"memory_limit": 10**6}, {"passes": ()}):
        got = tl.einsum(subscripts, *[tl.asarray(x) for x in ops]).evaluate(**opts)
        assert got.shape == want.shape and got.dtype == want.dtype, opts
        np.testing.assert_array_equal(got, want)


@pytest.mark.opencl
def test_networks_with_a_zero_size_dimension_on_opencl(ocl):
    for subscripts, shapes in ZERO_NETWORKS:
        ops = [RNG.standard_normal(s) for s in shapes]
        got = tl.einsum(subscripts, *[tl.asarray(x) for x in ops]).evaluate(device=ocl)
        want = np.einsum(subscripts, *ops)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


# A zero-size label that is lone in one operand, NaN/inf in the others: every entry is an empty
# sum, exactly 0 (NumPy); summing the lone label first and multiplying after gave 0 * NaN = NaN
# (prereduce, a CONTRACT's lone labels, NumPy's own optimized path in the n-ary kernel).
LONE_ZERO_NETWORKS = [
    ("e,->", [(0,), ()]),
    ("e,a->a", [(0,), (2,)]),
    ("e,a->", [(0,), (2,)]),
    ("ae,a->a", [(2, 0), (2,)]),
    ("e,ab,b->a", [(0,), (2, 3), (3,)]),
    ("ae,ab,bc->c", [(2, 0), (2, 3), (3, 2)]),
]


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("subscripts,shapes", LONE_ZERO_NETWORKS)
def test_lone_zero_size_labels_beside_nan(subscripts, shapes, dtype):
    from conftest import PIPELINE_VARIANTS

    ops = [
        np.full(s, np.nan, dtype) if i % 2 else np.full(s, np.inf, dtype)
        for i, s in enumerate(shapes)
    ]
    want = np.einsum(subscripts, *ops, optimize=False)
    devices = ["cpu"] + ([_opencl_device()[0]] if _opencl_device()[0] else [])
    for device in devices:
        for name, passes in PIPELINE_VARIANTS.items():
            for limit in (None, 10**6):
                got = tl.einsum(subscripts, *ops).evaluate(
                    passes=passes, memory_limit=limit, device=device
                )
                assert got.dtype == want.dtype and got.shape == want.shape, (device, name)
                np.testing.assert_array_equal(got, want, err_msg=f"{device} {name} {limit}")


@pytest.mark.parametrize("subscripts,shapes", ZERO_NETWORKS)
def test_gradients_through_zero_size_networks(subscripts, shapes):
    ops = [tl.asarray(RNG.standard_normal(s)) for s in shapes]
    loss = tl.sum(tl.einsum(subscripts, *ops) * 2.0)
    for opts in ({}, {"memory_limit": 10**6}):
        grads = tl.grad(loss, ops, **opts)
        for x, g in zip(ops, grads):
            v = g.evaluate()
            assert v.shape == x.shape and not np.any(v)


def test_reductions_over_zero_size_axes():
    x = np.ones((2, 0, 3))
    t = tl.asarray(x)
    for axis in (None, 1, (0, 1), (1, 2)):
        np.testing.assert_array_equal(tl.sum(t, axis=axis).evaluate(), np.sum(x, axis=axis))
        np.testing.assert_array_equal(tl.prod(t, axis=axis).evaluate(), np.prod(x, axis=axis))
    for fn in (tl.max, tl.min):
        assert fn(t, axis=(0, 2)).evaluate().shape == (0,)  # nothing reduced over the empty axis
        for axis in (None, 1, (0, 1)):
            with pytest.raises(tl.ShapeError, match="zero-size"):
                fn(t, axis=axis)  # NumPy raises ValueError when it runs; we while tracing
