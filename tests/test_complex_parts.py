"""``tl.complex(real, imag)`` (graph/ops/complex_parts.py), the array API's complex composites
that build their infinite and NaN parts with it (acos, acosh, asin, asinh, atan, atanh, cosh,
sinh, tan in tenloom/array_api_elementwise.py), and ``Tensor.__floordiv__`` with the standard's
infinities.

Values against NumPy (complex arrays built by assigning ``.real`` and ``.imag``, so an infinite
part stays infinite), special values against the array API standard's tables (2024.12, C99
Annex G), gradients against finite differences, and every error path."""

from __future__ import annotations

import math
import os
import tempfile

import numpy as np
import pytest
from helpers import assert_close, device_params, on_cpu
from tenloom.graph.errors import DTypeError, ShapeError
from tenloom.graph.node import make_node
from tenloom.graph.ops import Op
from tenloom.graph.traverse import toposort
from test_autodiff import check_grads
from test_jvp import MODES, check_jvp

import tenloom as tl
import tenloom.array_api as xp

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

INF, NAN, PI = math.inf, math.nan, math.pi


def parts(re, im, dtype="complex128") -> np.ndarray:
    """The complex array with these parts, exactly (``re + 1j * im`` is not, at infinities)."""
    re, im = np.broadcast_arrays(np.asarray(re, float), np.asarray(im, float))
    out = np.empty(re.shape, dtype)
    out.real, out.imag = re, im
    return out


def same_bits(got, expected) -> None:
    """Equal dtype, shape and bits (NaN payloads aside: any NaN equals any NaN)."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert (got.dtype, got.shape) == (expected.dtype, expected.shape)
    for g, e in ((got.real, expected.real), (got.imag, expected.imag)):
        nan = np.isnan(e)
        np.testing.assert_array_equal(np.isnan(g), nan)
        np.testing.assert_array_equal(g[~nan], e[~nan])
        np.testing.assert_array_equal(np.signbit(g[~nan]), np.signbit(e[~nan]))


# ---- tl.complex -------------------------------------------------------------------------------

SPECIAL = np.array([0.0, -0.0, 1.5, -2.5, INF, -INF, NAN, 1e-300])


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_complex_keeps_every_part_exactly(dtype, device):
    re = SPECIAL.astype(dtype)[:, None]  # every pair of special values, broadcast
    im = SPECIAL.astype(dtype)[None, :]
    got = tl.complex(tl.asarray(re), tl.asarray(im)).evaluate(device=device)
    same_bits(got, parts(re, im, np.result_type(dtype, np.complex64)))
    assert np.isinf(got[4, 0].real) and got[4, 0].imag == 0  # where inf + 1j * 0 is NaN
    # batched, and inside a chain of fused elementwise neighbours on either side
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4)).astype(dtype), rng.standard_normal(4).astype(dtype)
    z = tl.complex(tl.exp(tl.asarray(a)) * 2.0, tl.sin(tl.asarray(b)) + 1.0)
    got = (z * z + 1.0).evaluate(device=device)
    ez = parts(np.exp(a) * 2, np.sin(b) + 1, np.result_type(dtype, np.complex64))
    assert_close(got, ez * ez + 1)


@pytest.mark.parametrize(
    "re_dtype, im_dtype, expected",
    [
        ("float32", "float32", "complex64"),
        ("float64", "float64", "complex128"),
        ("float32", "float64", "complex128"),
        ("float16", "float16", "complex64"),
        ("bool", "int8", "complex64"),
        ("int16", "uint8", "complex64"),
        ("int32", "float32", "complex128"),
        ("int64", "int64", "complex128"),
        ("uint64", "float16", "complex128"),
    ],
)
def test_complex_promotes_as_numpy_promotes_to_complex(re_dtype, im_dtype, expected):
    re = np.array([[0, 1], [1, 0]], dtype=re_dtype)
    im = np.array([1, 0], dtype=im_dtype)
    z = tl.complex(re, tl.asarray(im))
    assert z.dtype == np.dtype(expected) == np.result_type(re_dtype, im_dtype, np.complex64)
    same_bits(z.evaluate(), parts(re, im, expected))


def test_complex_python_scalars_take_the_other_parts_dtype():
    x = tl.asarray(np.array([1.0, -INF], np.float32))
    assert tl.complex(x, 0.5).dtype == np.complex64  # NEP 50: the scalar is weak
    same_bits(tl.complex(0.5, x).evaluate(), parts(0.5, [1.0, -INF], "complex64"))
    assert tl.complex(tl.asarray(np.arange(2, dtype=np.int32)), 0.5).dtype == np.complex128
    same_bits(tl.complex(2.0, -INF).evaluate(), parts(2.0, -INF))
    assert tl.complex(2.0, -INF).shape == ()


def test_complex_errors_name_the_op_and_operand():
    x = tl.asarray(np.ones((2, 3)))
    with pytest.raises(DTypeError, match=r"complex: operand 1 \(imag\) is complex128\(2, 3\)"):
        tl.complex(x, x * 1j)
    with pytest.raises(DTypeError, match=r"complex: operand 0 \(real\) is complex"):
        tl.complex(1j, x)
    with pytest.raises(ShapeError, match=r"complex: cannot broadcast operand 0 \(2, 3\) and"):
        tl.complex(x, tl.ones((4,)))
    # the node itself takes two parts of one dtype, float32 or float64 (the builder converts)
    f32 = tl.asarray(np.ones(3, np.float32)).node
    f64 = tl.asarray(np.ones(3)).node
    with pytest.raises(DTypeError, match=r"complex: operand 1 \(imag\) is float64\(3,\) next"):
        make_node(Op.COMPLEX, (f32, f64))
    with pytest.raises(DTypeError, match=r"complex: operand 0 \(real\) is int64"):
        make_node(Op.COMPLEX, (tl.asarray(np.arange(3)).node,) * 2)


def test_complex_saves_loads_and_dumps():
    a = tl.placeholder((3,), "float32", name="a")
    b = tl.placeholder((3,), "float32", name="b")
    z = tl.complex(a, b) * 2
    assert "complex(%" in tl.dump(z)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "g.json")
        tl.save(z, path)
        loaded = tl.load(path)
    leaves = [n for n in toposort([loaded.node]) if n.op is Op.PLACEHOLDER]
    by_name = {n.attrs.name: tl.Tensor(n) for n in leaves}
    av, bv = np.array([1, INF, 0], np.float32), np.array([-INF, 2, NAN], np.float32)
    got = loaded.evaluate(feed={by_name["a"]: av, by_name["b"]: bv})
    same_bits(got, 2 * parts(av, bv, "complex64"))


def test_complex_gradient_follows_the_pytorch_convention():
    """z = x + i y: the cotangent of x is Re(g), of y is Im(g) (g = dL/dRe z + i dL/dIm z)."""
    x = tl.placeholder((2, 3), name="x")
    y = tl.placeholder((3,), name="y")  # broadcast: its cotangent is summed
    c = np.array([1 + 2j, -3 + 0.5j, 0.25 - 1j])
    z = tl.complex(x, y)
    loss = tl.sum(tl.real(z * c)) + tl.sum(tl.abs(z) ** 2)  # sum(x Re c - y Im c + x^2 + y^2)
    gx, gy = tl.grad(loss, [x, y])
    xv, yv = np.arange(6.0).reshape(2, 3), np.array([0.5, -1.0, 2.0])
    got_x, got_y = tl.evaluate(gx, gy, feed={x: xv, y: yv})
    np.testing.assert_allclose(got_x, c.real + 2 * xv)
    np.testing.assert_allclose(got_y, 2 * (-c.imag + 2 * yv))
    # complex(real(w), imag(w)) is w itself: its gradient is w's own (2w for |w|^2)
    w = tl.placeholder((3,), "complex128", name="w")
    (gw,) = tl.grad(tl.sum(tl.abs(tl.complex(tl.real(w), tl.imag(w))) ** 2), [w])
    np.testing.assert_allclose(gw.evaluate(feed={w: c}), 2 * c)


def test_complex_gradients_match_finite_differences():
    def f(a, b):
        return tl.complex(a * a, tl.sin(b[:1])) * tl.complex(b, a)

    check_grads(f, [(3, 4), (3, 4)])
    # float32 parts: complex64 values, float32 cotangents
    x = tl.placeholder((3,), "float32", name="x")
    (g,) = tl.grad(tl.sum(tl.real(tl.complex(x, x) * (1 - 2j))), [x])
    got = g.evaluate(feed={x: np.ones(3, np.float32)})
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.full(3, 3.0, np.float32))  # Re(c) - Im(c)


@pytest.mark.parametrize("mode", MODES)
def test_complex_tangents_match_finite_differences_and_the_vjp(mode):
    check_jvp(lambda a, b: tl.complex(a, b[0]) * tl.complex(b, 2.0), [(3, 4)] * 2, mode=mode)
    check_jvp(lambda a: tl.complex(0.5, a) * tl.complex(a, a), [(3, 4)], mode=mode)


# ---- the array API's complex composites: special values -----------------------------------------

# The standard's special cases (2024.12) for complex operands a + bj, as (a values, b values,
# expected, unspecified signs: "r" real, "i" imaginary). "cis" results are +inf * cis(b).
FIN = [0.0, -0.0, 2.5, -1.5]  # a finite number
NONZERO = [2.5, -1.5]  # a nonzero finite number
POS = [0.5, 3.0]  # a positive finite number
ZEROS = [0.0, -0.0]
STANDARD = {
    "acos": [
        (ZEROS, [0.0], complex(PI / 2, -0.0), ""),
        (ZEROS, [NAN], complex(PI / 2, NAN), ""),
        (FIN, [INF], complex(PI / 2, -INF), ""),
        (NONZERO, [NAN], complex(NAN, NAN), ""),
        ([-INF], POS, complex(PI, -INF), ""),
        ([INF], POS, complex(0.0, -INF), ""),
        ([-INF], [INF], complex(3 * PI / 4, -INF), ""),
        ([INF], [INF], complex(PI / 4, -INF), ""),
        ([INF, -INF], [NAN], complex(NAN, INF), "i"),
        ([NAN], FIN, complex(NAN, NAN), ""),
        ([NAN], [INF], complex(NAN, -INF), ""),
        ([NAN], [NAN], complex(NAN, NAN), ""),
    ],
    "acosh": [
        (ZEROS, [0.0], complex(0.0, PI / 2), ""),
        (FIN, [INF], complex(INF, PI / 2), ""),
        (NONZERO, [NAN], complex(NAN, NAN), ""),
        ([0.0], [NAN], complex(NAN, PI / 2), "i"),
        ([-INF], POS, complex(INF, PI), ""),
        ([INF], POS, complex(INF, 0.0), ""),
        ([-INF], [INF], complex(INF, 3 * PI / 4), ""),
        ([INF], [INF], complex(INF, PI / 4), ""),
        ([INF, -INF], [NAN], complex(INF, NAN), ""),
        ([NAN], FIN, complex(NAN, NAN), ""),
        ([NAN], [INF], complex(INF, NAN), ""),
        ([NAN], [NAN], complex(NAN, NAN), ""),
    ],
    "asinh": [
        ([0.0], [0.0], complex(0.0, 0.0), ""),
        (POS, [INF], complex(INF, PI / 2), ""),
        (FIN, [NAN], complex(NAN, NAN), ""),
        ([INF], POS, complex(INF, 0.0), ""),
        ([INF], [INF], complex(INF, PI / 4), ""),
        ([NAN], [0.0], complex(NAN, 0.0), ""),
        ([NAN], NONZERO, complex(NAN, NAN), ""),
        ([NAN], [INF], complex(INF, NAN), "r"),
        ([NAN], [NAN], complex(NAN, NAN), ""),
    ],
    "atanh": [
        ([0.0], [0.0], complex(0.0, 0.0), ""),
        ([0.0], [NAN], complex(0.0, NAN), ""),
        ([1.0], [0.0], complex(INF, 0.0), ""),
        (POS, [INF], complex(0.0, PI / 2), ""),
        (NONZERO, [NAN], complex(NAN, NAN), ""),
        ([INF], POS, complex(0.0, PI / 2), ""),
        ([INF], [INF], complex(0.0, PI / 2), ""),
        ([INF], [NAN], complex(0.0, NAN), ""),
        ([NAN], FIN, complex(NAN, NAN), ""),
        ([NAN], [INF], complex(0.0, PI / 2), "r"),
        ([NAN], [NAN], complex(NAN, NAN), ""),
    ],
    "cosh": [
        ([0.0], [0.0], complex(1.0, 0.0), ""),
        ([0.0], [INF], complex(NAN, 0.0), "i"),
        ([0.0], [NAN], complex(NAN, 0.0), "i"),
        (NONZERO, [INF], complex(NAN, NAN), ""),
        (NONZERO, [NAN], complex(NAN, NAN), ""),
        ([INF], [0.0], complex(INF, 0.0), ""),
        ([INF], NONZERO, "cis", ""),
        ([INF], [INF], complex(INF, NAN), "r"),
        ([INF], [NAN], complex(INF, NAN), ""),
        ([NAN], ZEROS, complex(NAN, 0.0), "i"),
        ([NAN], NONZERO, complex(NAN, NAN), ""),
        ([NAN], [NAN], complex(NAN, NAN), ""),
    ],
    "tanh": [
        ([0.0], [0.0], complex(0.0, 0.0), ""),
        (NONZERO, [INF], complex(NAN, NAN), ""),
        ([0.0], [INF], complex(0.0, NAN), ""),
        (NONZERO, [NAN], complex(NAN, NAN), ""),
        ([0.0], [NAN], complex(0.0, NAN), ""),
        ([INF], POS + [2.0, 1e300], complex(1.0, 0.0), ""),  # sin(2b) < 0 for b = 2
        ([INF], [INF], complex(1.0, 0.0), "i"),
        ([INF], [NAN], complex(1.0, 0.0), "i"),
        ([NAN], [0.0], complex(NAN, 0.0), ""),
        ([NAN], NONZERO, complex(NAN, NAN), ""),
        ([NAN], [NAN], complex(NAN, NAN), ""),
    ],
    "sinh": [
        ([0.0], [0.0], complex(0.0, 0.0), ""),
        ([0.0], [INF], complex(0.0, NAN), "r"),
        ([0.0], [NAN], complex(0.0, NAN), "r"),
        (POS, [INF], complex(NAN, NAN), ""),
        (POS, [NAN], complex(NAN, NAN), ""),
        ([INF], [0.0], complex(INF, 0.0), ""),
        ([INF], POS, "cis", ""),
        ([INF], [INF], complex(INF, NAN), "r"),
        ([INF], [NAN], complex(INF, NAN), "r"),
        ([NAN], [0.0], complex(NAN, 0.0), ""),
        ([NAN], NONZERO, complex(NAN, NAN), ""),
        ([NAN], [NAN], complex(NAN, NAN), ""),
    ],
}


def _check_part(got: float, want: float, any_sign: bool, what: str) -> None:
    if math.isnan(want):
        assert math.isnan(got), what
        return
    if any_sign:
        got, want = abs(got), abs(want)
    if want == 0 or math.isinf(want):
        assert got == want and math.copysign(1, got) == math.copysign(1, want), what
    else:  # multiples of pi
        assert math.isclose(got, want, rel_tol=1e-6), what


# measured on an H100 (TENLOOM_TEST_DEVICE=cuda:0): CuPy's complex tanh and tan (thrust's)
# give NaN + NaN j where the standard and NumPy keep a zero part
_CUPY_SPECIALS = {
    "tanh": "CuPy's complex tanh: tanh(0 + inf j) is nan + nan j (the standard: 0 + nan j)",
    "tan": "CuPy's complex tan: tan(inf + 0 j) is nan + nan j (NumPy: nan + 0 j)",
}


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", list(STANDARD))
def test_special_values_follow_the_standard(name, dtype):
    if name in _CUPY_SPECIALS and not on_cpu():
        pytest.xfail(_CUPY_SPECIALS[name])
    cases = [(a, b, want, signs) for avals, bvals, want, signs in STANDARD[name]
             for a in avals for b in bvals]  # fmt: skip
    z = parts([c[0] for c in cases], [c[1] for c in cases], dtype)
    got = getattr(xp, name)(tl.asarray(z)).evaluate()
    assert got.dtype == np.dtype(dtype)
    for (a, b, want, signs), g in zip(cases, got):
        if want == "cis":
            want = complex(INF * math.cos(b), INF * math.sin(b))
        what = f"{name}({a} + {b}j) = {g}, the standard: {want}"
        _check_part(float(g.real), want.real, "r" in signs, what)
        _check_part(float(g.imag), want.imag, "i" in signs, what)


GRID = [0.0, -0.0, 0.5, -1.5, 2.5, INF, -INF, NAN]


def open_signs(name: str, z: complex) -> str:
    """The parts whose sign tenloom's differs from NumPy's where the standard leaves it open
    or decides it otherwise: acos, asin and atan of +-inf + NaN j (through asinh(NaN + inf j)
    and atanh(NaN + inf j), whose real part's sign is open), and tan(a +- inf j) = -i tanh(iz)
    with the standard's tanh(+-inf + bj) = +-1 + 0j for b > 0, where NumPy's C library gives
    the zero the sign of sin(2b)."""
    if name in ("acos", "asin", "atan") and math.isinf(z.real) and math.isnan(z.imag):
        return "i"
    if name == "tan" and math.isinf(z.imag) and math.isfinite(z.real) and z.real != 0:
        return "r"
    return ""


def same_values(got, want, open_sign: str = "", what: str = "") -> None:
    """Finite parts to a few ulps, infinities and zeros with their signs (except the parts in
    ``open_sign``), NaN where ``want`` has NaN."""
    eps = float(np.finfo(np.asarray(got).dtype).eps)
    for part, gp, wp in (("r", got.real, want.real), ("i", got.imag, want.imag)):
        gp, wp = float(gp), float(wp)
        if math.isnan(wp):
            assert math.isnan(gp), what
        elif math.isinf(wp) or (wp == 0 and gp == 0):
            _check_part(gp, wp, part in open_sign, what)
        else:
            assert abs(gp - wp) <= 4 * eps * max(1.0, abs(wp)), what


NUMPY = {
    "acos": np.arccos,
    "acosh": np.arccosh,
    "asin": np.arcsin,
    "asinh": np.arcsinh,
    "atan": np.arctan,
    "atanh": np.arctanh,
    "cosh": np.cosh,
    "sinh": np.sinh,
    "tan": np.tan,
}


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", list(NUMPY))
def test_every_quadrant_matches_numpy(name, dtype):
    """Zeros of either sign, finite values, infinities and NaN in every combination, so the
    symmetries (conj, odd, even) and the branch cuts' signed zeros are checked too; finite
    parts to a few ulps, infinities and zeros with their signs, NaN where NumPy has NaN."""
    if name in _CUPY_SPECIALS and not on_cpu():
        pytest.xfail(_CUPY_SPECIALS[name])
    z = parts([a for a in GRID for _ in GRID], [b for _ in GRID for b in GRID], dtype)
    got = getattr(xp, name)(tl.asarray(z)).evaluate()
    want = NUMPY[name](z)
    for zi, g, w in zip(z, got, want):
        same_values(g, w, open_signs(name, complex(zi)), f"{name}({zi}) = {g}, NumPy {w}")


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", list(NUMPY))
def test_finite_values_match_numpy(name, dtype):
    rng = np.random.default_rng(1)
    z = parts(rng.standard_normal((2, 3, 5)) * 2, rng.standard_normal((2, 3, 5)) * 2, dtype)
    got = getattr(xp, name)(tl.asarray(z)).evaluate()
    assert_close(got, NUMPY[name](z))


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_cosh_and_sinh_stay_finite_where_numpy_does(dtype):
    """|Re z| past the overflow of exp but cosh(a) * cos(b) finite: NumPy scales, so do we."""
    limit = math.log(float(np.finfo(dtype).max))  # exp overflows past here
    a = np.array([limit + 0.3, -(limit + 0.6), 30.0, -25.0])
    z = parts(a, [1.3, -2.0, 0.7, 3.0], dtype)
    for name in ("cosh", "sinh"):
        got = getattr(xp, name)(tl.asarray(z)).evaluate()
        assert np.isfinite(got).all(), (name, got)
        assert_close(got, NUMPY[name](z))


COMPOSITES = ["acos", "acosh", "asin", "asinh", "atan", "atanh", "cosh", "sinh", "tan"]


@pytest.mark.parametrize("name", COMPOSITES)
def test_composite_gradients_match_finite_differences(name):
    f = getattr(xp, name)
    check_grads(lambda x: f(x * 0.5), [(3, 4)], "complex128")


def test_composite_special_values_on_opencl():
    from helpers import opencl_device

    device = opencl_device()
    if device is None:
        pytest.skip("no OpenCL device")
    z = parts([a for a in GRID for _ in GRID], [b for _ in GRID for b in GRID])
    for name in ("acosh", "cosh", "atanh"):
        t = getattr(xp, name)(tl.asarray(z))
        for zi, g, w in zip(z, t.evaluate(device=device), t.evaluate()):
            same_values(g, w, what=f"{name}({zi}) = {g} on {device}, {w} on the CPU")


# ---- Tensor // with the standard's infinities ----------------------------------------------------


def standard_floor_divide(a, b):
    """NumPy's floor_divide with the standard's special cases at infinities."""
    with np.errstate(all="ignore"):
        out = np.floor_divide(a, b)
        q = np.true_divide(a, b)  # its sign is the result's
    if out.dtype.kind == "f":
        out = np.where(np.isinf(a) & np.isfinite(b), q, out)
        out = np.where(np.isfinite(a) & np.isinf(b), np.copysign(0.0, q), out)
    return out.astype(np.result_type(a, b))


FLOORDIV_GRID = np.array([0.0, -0.0, 1.5, -1.5, 7.0, -0.25, INF, -INF, NAN])


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_floordiv_follows_the_standard_at_infinities(dtype):
    a = FLOORDIV_GRID.astype(dtype)[:, None]
    b = FLOORDIV_GRID.astype(dtype)[None, :]
    ta, tb = tl.asarray(a), tl.asarray(b)
    want = standard_floor_divide(a, b)
    same_bits((ta // tb).evaluate(), want)
    same_bits(xp.floor_divide(ta, tb).evaluate(), want)  # one implementation
    t = ta
    t //= tb
    same_bits(t.evaluate(), want)
    # the standard's rows, as written there
    rows = {(INF, 2.0): INF, (INF, -2.0): -INF, (-INF, 2.0): -INF, (-INF, -2.0): INF}
    rows |= {(1.5, -INF): -0.0, (-1.5, INF): -0.0, (1.5, INF): 0.0, (-1.5, -INF): 0.0}
    for (x, y), r in rows.items():
        got = float((tl.asarray(np.array(x, dtype)) // np.array(y, dtype)).evaluate())
        assert got == r and math.copysign(1, got) == math.copysign(1, r), (x, y, got)
    # Python scalars on either side stay weak (NEP 50)
    same_bits((ta // 2).evaluate(), standard_floor_divide(a, np.array(2, dtype)))
    same_bits((2.5 // tb).evaluate(), standard_floor_divide(np.array(2.5, dtype), b))
    # tl.floor_divide stays NumPy's (NaN for inf // 2)
    same_bits(tl.floor_divide(ta, tb).evaluate(), np.floor_divide(a, b))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "bool"])
def test_floordiv_of_integers_is_numpys(dtype):
    a = np.array([[-7, 0, 5, 9]], dtype=np.int64).astype(dtype)
    b = np.array([[2], [-3], [0], [1]], dtype=np.int64).astype(dtype)
    with np.errstate(all="ignore"):
        want = a // b
    same_bits((tl.asarray(a) // tl.asarray(b)).evaluate(), want)
    same_bits((tl.asarray(a) // 2).evaluate(), a // 2)  # bool // bool is int8, bool // 2 int64
    with pytest.raises(DTypeError, match="floordiv: value 300 does not fit"):
        tl.asarray(np.ones(2, np.int8)) // 300  # NumPy raises OverflowError
    with pytest.raises(DTypeError, match="floordiv"):
        tl.asarray(a) // (1 + 2j)


def test_floordiv_has_zero_derivative_everywhere():
    a = tl.placeholder((5,), name="a")
    b = tl.placeholder((5,), name="b")
    ga, gb = tl.grad(tl.sum(a // b + a), [a, b])
    av, bv = np.array([1.5, -2.0, INF, 3.0, 0.0]), np.array([0.0, 0.5, 2.0, -INF, 0.0])
    got_a, got_b = tl.evaluate(ga, gb, feed={a: av, b: bv})
    np.testing.assert_array_equal(got_a, np.ones(5))  # from "+ a" alone, no NaN at b == 0
    np.testing.assert_array_equal(got_b, np.zeros(5))
