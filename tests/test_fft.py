"""tl.fft (graph/ops/fft.py, tenloom/fft.py): values against numpy.fft over dtypes, norms,
n/s padding and cropping, axes and batches; derivatives against finite differences (reverse
and forward mode, real and complex inputs); errors; the CPU kernel's threads; save/load and
dump; NumPy's ``np.fft`` on Tensors; the array API namespace; OpenCL and CUDA.

Runs on the device TENLOOM_TEST_DEVICE names (tests/conftest.py), the CPU by default."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import assert_close, opencl_device, require_cuda
from rule_checks import check_hvp, rule_tests
from tenloom.graph.node import make_node
from tenloom.graph.ops import Op

import tenloom as tl

NORMS = ("backward", "ortho", "forward")
DTYPES = ("float32", "float64", "complex64", "complex128")


def _rand(rng, shape, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        return rng.integers(-5, 6, shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def _check(name, x, **kw):
    got = getattr(tl.fft, name)(x, **kw).evaluate()
    want = getattr(np.fft, name)(x, **kw)
    assert_close(got, want, scale=max(1.0, float(np.abs(x).sum())))


# ---- values -----------------------------------------------------------------------------------

# (n, axis) of the one-axis transforms on a (4, 6) operand: default, padded, cropped, odd, axis 0
ONE_AXIS = [(None, -1), (9, -1), (4, 1), (5, 0), (3, -2)]
C2R_ONE_AXIS = [(None, -1), (11, -1), (6, 1), (7, 0), (2, -2)]


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_complex_transforms_match_numpy(dtype, norm):
    x = _rand(np.random.default_rng(0), (4, 6), dtype)
    for name in ("fft", "ifft"):
        for n, axis in ONE_AXIS:
            _check(name, x, n=n, axis=axis, norm=norm)
    for name in ("irfft", "hfft"):
        for n, axis in C2R_ONE_AXIS:
            _check(name, x, n=n, axis=axis, norm=norm)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_real_transforms_match_numpy(dtype, norm):
    x = _rand(np.random.default_rng(1), (4, 7), dtype)
    for name in ("rfft", "ihfft"):
        for n, axis in ONE_AXIS:
            _check(name, x, n=n, axis=axis, norm=norm)


# (s, axes) on a (3, 4, 5) operand: all axes, some in another order, padded and cropped, -1
ND = [
    (None, None),
    (None, (2, 0)),
    ((4, 6), (0, 2)),
    ((2, 3, 7), (1, 2, 0)),
    ((-1, 2), (2, 1)),
    ((5,), (-2,)),
]


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_nd_transforms_match_numpy(dtype, norm):
    x = _rand(np.random.default_rng(2), (3, 4, 5), dtype)
    for s, axes in ND:
        for name in ("fftn", "ifftn", "irfftn") + (("rfftn",) if dtype.startswith("f") else ()):
            if name == "irfftn" and s is not None and s[-1] == -1:
                continue  # the standard's -1 on irfftn's last axis: tested below
            _check(name, x, s=s, axes=axes, norm=norm)


def test_irfftn_takes_minus_one_on_the_last_axis_as_the_default():
    x = _rand(np.random.default_rng(3), (3, 4), "complex128")
    got = tl.fft.irfftn(x, s=(2, -1), axes=(0, 1)).evaluate()
    assert_close(got, np.fft.irfftn(x, s=(2, 6), axes=(0, 1)))  # 2 * (4 - 1)


@pytest.mark.parametrize(
    ("dtype", "complex_", "real"),
    [
        ("bool", "complex128", "float64"),
        ("int8", "complex128", "float64"),
        ("int64", "complex128", "float64"),
        ("uint16", "complex128", "float64"),
        ("float16", "complex64", "float32"),
    ],
)
def test_integers_and_bool_promote_to_float64_and_float16_to_float32(dtype, complex_, real):
    x = _rand(np.random.default_rng(4), (3, 6), dtype)
    wide = x.astype(real)
    for name, out in (("fft", complex_), ("rfft", complex_), ("ihfft", complex_)):
        got = getattr(tl.fft, name)(x).evaluate()
        assert got.dtype == out
        assert_close(got, getattr(np.fft, name)(wide).astype(out))
    for name in ("irfft", "hfft", "irfftn"):
        got = getattr(tl.fft, name)(x).evaluate()
        assert got.dtype == real
        assert_close(got, getattr(np.fft, name)(wide).astype(real))


def test_batches_empty_batches_and_no_axes():
    rng = np.random.default_rng(5)
    x = _rand(rng, (2, 3, 4, 5), "complex64")
    _check("fft", x, axis=2)
    _check("fftn", x, axes=(3, 1))
    _check("rfftn", _rand(rng, (2, 3, 4, 5), "float32"), axes=(0, 3, 2), s=(3, 4, 6))
    empty = np.zeros((0, 4), "complex128")
    for name in ("fft", "ifft"):
        _check(name, empty)
    assert tl.fft.irfft(empty, n=6).evaluate().shape == (0, 6)
    assert tl.fft.rfft(np.zeros((0, 4))).evaluate().shape == (0, 3)
    assert tl.fft.fft(np.zeros((3, 0)), n=4).evaluate().shape == (3, 4)  # all padding
    # no axes: the operand as it is, in the complex dtype
    got = tl.fft.fftn(x, axes=()).evaluate()
    assert got.dtype == np.complex64 and np.array_equal(got, x)


def test_round_trips():
    rng = np.random.default_rng(6)
    x = _rand(rng, (3, 7), "float64")
    for norm in NORMS:
        assert_close(tl.fft.irfft(tl.fft.rfft(x, norm=norm), n=7, norm=norm).evaluate(), x)
        assert_close(tl.fft.ifftn(tl.fft.fftn(x, norm=norm), norm=norm).evaluate(), x + 0j)
        assert_close(tl.fft.hfft(tl.fft.ihfft(x, norm=norm), n=7, norm=norm).evaluate(), x)


# ---- frequencies and shifts ---------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 7, 8])
def test_fftfreq_and_rfftfreq(n):
    for name in ("fftfreq", "rfftfreq"):
        want = getattr(np.fft, name)(n, 0.25)
        for dtype in (None, "float32", "float64"):
            got = getattr(tl.fft, name)(n, 0.25, dtype=dtype, device="cpu").evaluate()
            assert_close(got, want.astype(dtype or "float64"))
        assert getattr(tl.fft, name)(n).evaluate().dtype == np.float64


@pytest.mark.parametrize("shape", [(5,), (4, 7), (2, 3, 6)])
def test_fftshift_and_ifftshift(shape):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    for axes in (None, 0, (-1,), tuple(range(len(shape)))[::-1]):
        for name in ("fftshift", "ifftshift"):
            got = getattr(tl.fft, name)(x, axes=axes).evaluate()
            np.testing.assert_array_equal(got, getattr(np.fft, name)(x, axes=axes))
    assert_close(tl.fft.ifftshift(tl.fft.fftshift(x)).evaluate(), x)


# ---- derivatives ------------------------------------------------------------------------------


def _re(x):
    """A real operand from a real or complex placeholder, depending on both parts of it."""
    return x if x.dtype.kind == "f" else tl.real(x) + 2.0 * tl.imag(x)


GRADS = {
    "fft_pad_ortho": (lambda x: tl.fft.fft(x, n=7, axis=0, norm="ortho"), [(5, 3)]),
    "ifft_crop": (lambda x: tl.fft.ifft(x, n=3), [(3, 5)]),
    "fftn_forward": (lambda x: tl.fft.fftn(x, s=(4, 6), axes=(1, 0), norm="forward"), [(3, 4)]),
    "ifftn": (lambda x: tl.fft.ifftn(x), [(2, 3, 4)]),
    "rfft_even_pad": (lambda x: tl.fft.rfft(_re(x), n=8), [(2, 5)]),
    "rfft_odd_ortho": (lambda x: tl.fft.rfft(_re(x), n=5, axis=0, norm="ortho"), [(6, 2)]),
    "rfftn": (lambda x: tl.fft.rfftn(_re(x), axes=(1, 0), norm="forward"), [(4, 5)]),
    "irfft_even": (lambda x: tl.fft.irfft(x), [(2, 4)]),
    "irfft_odd_forward": (lambda x: tl.fft.irfft(x, n=7, norm="forward"), [(3, 4)]),
    "irfftn_ortho": (lambda x: tl.fft.irfftn(x, s=(4, 5), axes=(1, 0), norm="ortho"), [(3, 4)]),
    "hfft": (lambda x: tl.fft.hfft(x, n=5), [(2, 4)]),
    "ihfft_forward": (lambda x: tl.fft.ihfft(_re(x), n=6, norm="forward"), [(3, 5)]),
    "fftshift_of_fft": (lambda x: tl.fft.fftshift(tl.fft.fft(x), axes=1) * x, [(2, 5)]),
}
test_gradients_match_finite_differences, test_jvp_matches_finite_differences_and_the_vjp = (
    rule_tests(GRADS)
)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_second_derivatives(dtype):
    rng = np.random.default_rng(7)
    x = tl.placeholder((3, 6), dtype)
    spectrum = tl.fft.rfft(_re(x), norm="ortho") * tl.fft.fft(x, axis=0)[:, :4]
    loss = tl.sum(tl.abs(spectrum) ** 2) + tl.sum(tl.fft.irfft(tl.fft.fft(x) ** 2))
    check_hvp(loss, x, _rand(rng, (3, 6), dtype), _rand(rng, (3, 6), dtype))


def test_the_real_transforms_gradients_weigh_the_unmirrored_bins_once():
    """The gradient of sum(|rfft(x)|^2) over the n // 2 + 1 bins: Parseval with the mirrored
    bins counted once, 2 * irfft(rfft(x) / w) * n, checked against its closed form."""
    x = np.random.default_rng(8).standard_normal(6)
    p = tl.placeholder((6,))
    (g,) = tl.grad(tl.sum(tl.abs(tl.fft.rfft(p)) ** 2), [p])
    w = np.array([1.0, 2, 2, 1])
    want = 2 * 6 * np.fft.irfft(np.fft.rfft(x) / w, n=6)
    assert_close(g.evaluate(feed={p: x}), want)


# ---- errors -----------------------------------------------------------------------------------


def test_argument_errors_name_the_function_the_operand_and_its_shape():
    x = np.ones((3, 4))
    z = x + 0j
    with pytest.raises(tl.DTypeError, match=r"rfft: operand 0 of shape \(3, 4\) has the complex"):
        tl.fft.rfft(z)
    with pytest.raises(tl.DTypeError, match=r"ihfft: operand 0 of shape \(3, 4\)"):
        tl.fft.ihfft(z)
    with pytest.raises(tl.DTypeError, match="rfftn: operand 0"):
        tl.fft.rfftn(z)
    with pytest.raises(tl.ShapeError, match=r"fft: n=0 for axis 1 of operand 0 of shape \(3, 4\)"):
        tl.fft.fft(x, n=0)
    with pytest.raises(tl.ShapeError, match="irfft: n=-1"):
        tl.fft.irfft(x, n=-1)
    for bad in (1.5, True, "4"):
        with pytest.raises(tl.OptionTypeError, match="fft: n"):
            tl.fft.fft(x, n=bad)
    with pytest.raises(tl.ShapeError, match=r"hfft: axis 2 is out of bounds .* \(3, 4\)"):
        tl.fft.hfft(x, axis=2)
    with pytest.raises(tl.ShapeError, match=r"fftn: axis 1 repeated in axes \(1, -1\)"):
        tl.fft.fftn(x, axes=(1, -1))
    with pytest.raises(tl.OptionTypeError, match="fftn: axes 1 is not a sequence"):
        tl.fft.fftn(x, axes=1)
    with pytest.raises(tl.OptionError, match=r"ifftn: s=\(2, 2\) without axes .* \(3, 4\)"):
        tl.fft.ifftn(x, s=(2, 2))
    with pytest.raises(tl.ShapeError, match=r"rfftn: s \(2,\) has 1 entries for the 2 axes"):
        tl.fft.rfftn(x, s=(2,), axes=(0, 1))
    with pytest.raises(tl.ShapeError, match="irfftn: s entry 0 for axis 0"):
        tl.fft.irfftn(x, s=(0, 4), axes=(0, 1))
    with pytest.raises(tl.OptionTypeError, match="fftn: s 3 is not a sequence"):
        tl.fft.fftn(x, s=3, axes=(0,))
    with pytest.raises(tl.OptionError, match="fft: norm 'none' is not one of"):
        tl.fft.fft(x, norm="none")
    with pytest.raises(tl.OptionTypeError, match="ifft: norm 1 is not a string"):
        tl.fft.ifft(x, norm=1)
    with pytest.raises(tl.ShapeError, match=r"irfft: .* \(3, 1\) has 1 entries .* = 0 output"):
        tl.fft.irfft(np.ones((3, 1)))
    with pytest.raises(tl.ShapeError, match=r"fft: 0 points along axis 1 .* \(3, 0\)"):
        tl.fft.fft(np.ones((3, 0)))
    with pytest.raises(tl.ShapeError, match=r"rfftn: no axes .* \(3, 4\)"):
        tl.fft.rfftn(x, axes=())
    with pytest.raises(tl.ShapeError, match=r"irfftn: no axes"):
        tl.fft.irfftn(x, axes=[])
    with pytest.raises(tl.ShapeError, match=r"fftshift: axis 3 is out of bounds"):
        tl.fft.fftshift(x, axes=3)


def test_frequency_errors():
    with pytest.raises(tl.OptionError, match="fftfreq: n=0"):
        tl.fft.fftfreq(0)
    with pytest.raises(tl.OptionTypeError, match="rfftfreq: n"):
        tl.fft.rfftfreq(2.0)
    with pytest.raises(tl.OptionError, match="fftfreq: the sample spacing d=0"):
        tl.fft.fftfreq(4, 0)
    with pytest.raises(tl.OptionError, match="d=inf"):
        tl.fft.fftfreq(4, float("inf"))
    with pytest.raises(tl.OptionTypeError, match="rfftfreq: d '1' is not a real number"):
        tl.fft.rfftfreq(4, "1")
    with pytest.raises(tl.DTypeError, match="fftfreq: dtype complex64 is not a real"):
        tl.fft.fftfreq(4, dtype="complex64")
    with pytest.raises(tl.DeviceError, match="rfftfreq: device 'cuda:0'"):
        tl.fft.rfftfreq(4, device="cuda:0")


def test_the_ops_rules_refuse_what_the_builders_never_make():
    c = tl.placeholder((3, 4), "complex128").node
    r = tl.placeholder((3, 4), "float32").node
    with pytest.raises(
        tl.DTypeError, match=r"fft_c2c: operand 0 of shape \(3, 4\) has dtype float32;"
    ):
        make_node(Op.FFT_C2C, (r,), ((1,), False, "ortho"))
    with pytest.raises(tl.DTypeError, match="fft_r2c: operand 0 .* complex128; .* float32 or"):
        make_node(Op.FFT_R2C, (c,), ((1,), "ortho"))
    with pytest.raises(tl.DTypeError, match="fft_c2r: .* float32"):
        make_node(Op.FFT_C2R, (r,), ((1,), 6, "ortho"))
    with pytest.raises(tl.ShapeError, match=r"fft_c2r: .* 4 entries along axis 1; 9 output"):
        make_node(Op.FFT_C2R, (c,), ((1,), 9, "ortho"))
    with pytest.raises(tl.ShapeError, match="fft_c2c: axis 2 is out of bounds"):
        make_node(Op.FFT_C2C, (c,), ((2,), False, "ortho"))
    with pytest.raises(tl.ShapeError, match="fft_r2c: axes .* distinct and at least one"):
        make_node(Op.FFT_R2C, (r,), ((), "ortho"))
    with pytest.raises(tl.ShapeError, match="fft_c2c: axis 1 of operand 0 .* no points"):
        make_node(Op.FFT_C2C, (tl.placeholder((3, 0), "complex64").node,), ((1,), True, "ortho"))


# ---- kernels, save/load, dump -----------------------------------------------------------------


def test_threads_give_the_same_bits():
    """The CPU kernel spreads a big batch over the evaluation's threads (scipy.fft workers=);
    each transform is one thread's, so the bits do not change."""
    x = _rand(np.random.default_rng(9), (64, 600), "float32")
    for t in (tl.fft.rfft(x), tl.fft.fftn(x, axes=(0, 1)), tl.fft.irfft(x + 1j, n=300)):
        one, two = t.evaluate(threads=1), t.evaluate(threads=2)
        assert np.array_equal(one, two)


def test_save_load_and_dump(tmp_path):
    x = tl.placeholder((3, 4), "complex64", name="x")
    outs = (
        tl.fft.ifftn(x, axes=(1, 0), norm="ortho"),
        tl.fft.rfftn(tl.real(x), axes=(1, 0)),
        tl.fft.irfft(x, n=7, axis=0, norm="forward"),
    )
    text = "".join(tl.dump(t) for t in outs)
    for part in (
        "fft_c2c[axes=[0, 1], inverse, norm=ortho]",
        "fft_r2c[axes=[1, 0], norm=backward]",
        "fft_c2r[axes=[0], n=7, norm=forward]",
    ):
        assert part in text
    path = tmp_path / "f.json"
    tl.save(outs, path)
    back = tl.load(path)
    a = _rand(np.random.default_rng(10), (3, 4), "complex64")
    for got, want in zip(tl.evaluate(*back, feed={x: a}), tl.evaluate(*outs, feed={x: a})):
        np.testing.assert_array_equal(got, want)
    # attributes a file cannot hold: each refused, naming the op
    doc = json.loads(path.read_text())
    bad = {
        "fft_c2c": [([0, 1], True, "sideways"), ([1, 0], True, "ortho"), ([0, 1], 1, "ortho")],
        "fft_r2c": [([1, 1], "backward"), ([0, 2], "backward")],
        "fft_c2r": [([0], 0, "forward"), ([0], 7.0, "forward")],
    }
    for op, variants in bad.items():
        (node,) = [n for n in doc["nodes"] if n["op"] == op]
        good = node["attrs"]
        for attrs in variants:
            node["attrs"] = list(attrs)
            path.write_text(json.dumps(doc))
            with pytest.raises(tl.GraphFormatError, match=op):
                tl.load(path)
        node["attrs"] = good


def test_numpy_fft_functions_build_lazy_nodes():
    a = _rand(np.random.default_rng(11), (3, 6), "float64")
    t = tl.asarray(a)
    for name, kw in (("fft", {"n": 8}), ("rfftn", {"axes": (0, 1)}), ("irfft", {"axis": 0})):
        got = getattr(np.fft, name)(t, **kw)
        assert isinstance(got, tl.Tensor)
        assert_close(got.evaluate(), getattr(np.fft, name)(a, **kw))
    shifted = np.fft.fftshift(t, axes=1)
    assert isinstance(shifted, tl.Tensor)
    np.testing.assert_array_equal(shifted.evaluate(), np.fft.fftshift(a, axes=1))
    # what tl.fft takes differently from NumPy evaluates and calls NumPy
    assert isinstance(np.fft.fftn(t, axes=(1, 1)), np.ndarray)
    assert isinstance(np.fft.irfftn(t + 0j, s=(3, -1), axes=(0, 1)), np.ndarray)
    assert isinstance(np.fft.hfft(t.astype("float16")), np.ndarray)


def test_the_array_api_namespace_has_the_extension():
    import tenloom.array_api as xp

    assert xp.fft is tl.fft and tl.asarray(np.ones(2)).__array_namespace__().fft is tl.fft
    for name in ("fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft"):
        assert callable(getattr(xp.fft, name))
    x = xp.asarray(np.arange(8.0))
    got = xp.fft.irfft(xp.fft.rfft(x, n=8, axis=-1, norm="ortho"), n=8, norm="ortho")
    assert_close(got.evaluate(), np.arange(8.0))


@pytest.mark.opencl
def test_opencl_has_no_kernel_a_device_error_naming_the_op():
    device = opencl_device()
    if device is None:
        pytest.skip("no OpenCL device (see test_opencl.py)")
    x = tl.placeholder((2, 4), "complex64")
    for op, t in (("fft_c2c", tl.fft.fft(x)), ("fft_c2r", tl.fft.irfft(x))):
        with pytest.raises(tl.DeviceError, match=f"{device}: no kernel for op '{op}'"):
            t.evaluate(device=device, feed={x: np.ones((2, 4), "complex64")})


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cuda_runs_cupy_fft_in_the_operands_precision(dtype):
    require_cuda()
    x = _rand(np.random.default_rng(12), (5, 6), dtype)
    outs = [tl.fft.fftn(x, s=(4, 7), axes=(1, 0), norm="ortho"), tl.fft.hfft(x, n=9, axis=0)]
    wants = [np.fft.fftn(x, s=(4, 7), axes=(1, 0), norm="ortho"), np.fft.hfft(x, n=9, axis=0)]
    if dtype.startswith("f"):
        outs.append(tl.fft.rfftn(x, axes=(0, 1), norm="forward"))
        wants.append(np.fft.rfftn(x, axes=(0, 1), norm="forward"))
    for t, want in zip(outs, wants):
        assert_close(t.evaluate(device="cuda:0"), want, scale=float(np.abs(x).sum()))
