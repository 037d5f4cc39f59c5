"""Interoperability (tenloom/interop.py): DLPack import/export and the autoray backend, with
the quimb and cotengra workflows it enables. CUDA tests are marked ``cuda`` and skip without a
GPU and CuPy."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest
from helpers import on_cpu
from tenloom.graph.errors import DeviceError, OptionTypeError, ShapeError
from tenloom.runtime.executor import register_device_leaf
from test_autodiff import check_grads

import tenloom as tl

DTYPES = ["float32", "float64", "complex64", "complex128"]


def _rand(rng, shape, dtype):
    dt = np.dtype(dtype)
    x = rng.standard_normal(shape)
    if dt.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dt)


def _has_cuda() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


cuda = pytest.mark.skipif(not _has_cuda(), reason="needs a CUDA GPU and CuPy")


# ---- DLPack on the host ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [*DTYPES, "int64", "int32", "bool"])
def test_numpy_round_trip_shares_memory(dtype):
    rng = np.random.default_rng(0)
    a = _rand(rng, (3, 4), "float64" if dtype == "bool" else dtype)
    a = (a > 0) if dtype == "bool" else a.astype(dtype)
    t = tl.from_dlpack(a)
    assert isinstance(t, tl.Tensor) and t.shape == a.shape and t.dtype == a.dtype
    assert t.__dlpack_device__() == (1, 0)
    b = np.from_dlpack(t)  # a leaf exports its own memory
    assert np.shares_memory(a, b)
    np.testing.assert_array_equal(b, a)
    np.testing.assert_array_equal(t.evaluate(), a)


def test_import_is_zero_copy_and_lazy():
    a = np.arange(6.0).reshape(2, 3)
    t = tl.from_dlpack(a)
    y = t * 2
    a[0, 0] = 100.0  # the constant is a's memory: evaluation reads it then
    np.testing.assert_array_equal(y.evaluate(), a * 2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_export_materializes_a_computed_tensor(dtype):
    rng = np.random.default_rng(1)
    a, b = _rand(rng, (3, 4), dtype), _rand(rng, (4, 2), dtype)
    t = tl.from_dlpack(a) @ tl.from_dlpack(b)
    assert t.__dlpack_device__() == (1, 0)
    out = np.from_dlpack(t)
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_allclose(
        out, a @ b, rtol=1e-5 if dtype in ("float32", "complex64") else 1e-12
    )
    assert not np.shares_memory(out, a)


def test_strided_and_scalar_and_readonly():
    a = np.arange(24.0).reshape(4, 6)[::2, 1::2]  # non-contiguous view
    t = tl.from_dlpack(a)
    assert np.shares_memory(np.from_dlpack(t), a)
    np.testing.assert_array_equal((t + 1).evaluate(), a + 1)
    s = tl.from_dlpack(np.asarray(3.5))
    assert s.shape == () and float(np.from_dlpack(s * 2)) == 7.0
    ro = np.arange(3.0)
    ro.flags.writeable = False
    np.testing.assert_array_equal(np.from_dlpack(tl.from_dlpack(ro)), ro)


def test_copy_and_device_options():
    a = np.arange(4.0)
    c = tl.from_dlpack(a, copy=True)
    a[0] = 9.0
    assert c.evaluate()[0] == 0.0  # a copy: later writes to a are not seen
    np.testing.assert_array_equal(tl.from_dlpack(a, device="cpu").evaluate(), a)
    t = tl.asarray(a)
    assert tl.from_dlpack(t) is t


def test_from_dlpack_errors():
    with pytest.raises(OptionTypeError, match=r"from_dlpack: x is a builtins.list.*not a DLPack"):
        tl.from_dlpack([1.0, 2.0])
    with pytest.raises(OptionTypeError, match="from_dlpack: copy="):
        tl.from_dlpack(np.ones(2), copy="yes")
    with pytest.raises(DeviceError, match="from_dlpack: device='opencl:0'.*'cpu' or 'cuda:N'"):
        tl.from_dlpack(np.ones(2), device="opencl:0")

    class OtherDevice:  # a producer on a device type tenloom does not import (ROCm = 10)
        def __dlpack_device__(self):
            return (10, 0)

        def __dlpack__(self, **kw):
            raise AssertionError("not exported")

    with pytest.raises(DeviceError, match="DLPack device type 10"):
        tl.from_dlpack(OtherDevice())
    with pytest.raises(BufferError, match="copy=False, but x is on the host and device='cuda:0'"):
        tl.from_dlpack(np.ones(2), device="cuda:0", copy=False)

    class OnGpu1(OtherDevice):  # checked before CuPy is needed
        def __dlpack_device__(self):
            return (2, 1)

    with pytest.raises(DeviceError, match="x is on cuda:1 but device='cuda:0'; move it there"):
        tl.from_dlpack(OnGpu1(), device="cuda:0")
    with pytest.raises(BufferError, match="copy=False, but x is on cuda:1 and device='cpu'"):
        tl.from_dlpack(OnGpu1(), device="cpu", copy=False)


@pytest.mark.skipif(_has_cuda(), reason="checks the error raised without CuPy")
def test_cuda_without_cupy_is_a_device_error():
    class CudaProducer:
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, **kw):
            raise AssertionError("not exported")

    with pytest.raises(DeviceError, match="needs CuPy"):
        tl.from_dlpack(CudaProducer())
    with pytest.raises(DeviceError, match="needs CuPy"):
        tl.from_dlpack(np.ones(2), device="cuda:0")


class _FakeCudaArray:
    """Stands in for a CUDA array in the runtime's binding checks (no GPU needed)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, np.dtype(dtype)
        self.__cuda_array_interface__ = {"shape": shape, "typestr": self.dtype.str, "data": (0, 0)}

        class _Dev:
            id = 0

        self.device = _Dev()


@pytest.mark.skipif(not on_cpu(), reason="the corpus runs on a device: the default is not the CPU")
def test_device_resident_leaf_on_the_cpu_is_a_device_error():
    t = tl.placeholder((2, 3), "float64", name="gpu_leaf")
    register_device_leaf(t.node, _FakeCudaArray((2, 3), "float64"))
    y = tl.sum(t * 2)
    with pytest.raises(DeviceError, match=r"from_dlpack: tensor 'gpu_leaf'.*cuda:0.*runs on cpu"):
        y.evaluate()
    with pytest.raises(DeviceError, match="from_dlpack: tensor 'gpu_leaf'"):
        np.asarray(y)
    assert y.__dlpack_device__() == (2, 0)  # says where it lives without evaluating
    # a feed still binds it: a host array for the same placeholder runs on the CPU
    host = np.arange(6.0).reshape(2, 3)
    assert y.evaluate(feed={t: host}) == 2 * host.sum()


def test_torch_cpu_round_trip():
    torch = pytest.importorskip("torch")
    x = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    t = tl.from_dlpack(x)
    x[0, 0] = 50.0  # shares torch's memory
    np.testing.assert_array_equal(t.evaluate(), x.numpy())
    back = torch.from_dlpack(t)
    assert back.data_ptr() == x.data_ptr()
    y = torch.from_dlpack(tl.exp(t) * 2)
    torch.testing.assert_close(y, torch.exp(x) * 2)


# ---- DLPack on CUDA (the device machine) ------------------------------------------------------


@pytest.mark.cuda
@cuda
@pytest.mark.parametrize("dtype", DTYPES)
def test_cupy_round_trip_stays_on_the_device(dtype):
    import cupy as cp

    rng = np.random.default_rng(2)
    a_host, b_host = _rand(rng, (5, 4), dtype), _rand(rng, (4, 3), dtype)
    a, b = cp.asarray(a_host), cp.asarray(b_host)
    ta, tb = tl.from_dlpack(a), tl.from_dlpack(b)
    assert ta.__dlpack_device__() == (2, 0)
    assert cp.from_dlpack(ta).data.ptr == a.data.ptr  # the leaf is a's memory
    y = ta @ tb
    a[0, 0] = 7  # used in place: the run sees the write
    a_host[0, 0] = 7
    out = y.evaluate(device="cuda", to_host=False)
    assert isinstance(out, cp.ndarray)
    tol = 1e-4 if dtype in ("float32", "complex64") else 1e-10
    np.testing.assert_allclose(cp.asnumpy(out), a_host @ b_host, rtol=tol, atol=tol)
    exported = cp.from_dlpack(y)  # materialized on the GPU
    np.testing.assert_allclose(cp.asnumpy(exported), a_host @ b_host, rtol=tol, atol=tol)
    with pytest.raises(DeviceError, match="from_dlpack: tensor .* runs on cpu"):
        y.evaluate(device="cpu")
    host = tl.from_dlpack(a, device="cpu")  # an explicit import to the host (one copy)
    np.testing.assert_array_equal(host.evaluate(), a_host)
    moved = tl.from_dlpack(a_host, device="cuda:0")
    np.testing.assert_array_equal(
        cp.asnumpy(moved.evaluate(device="cuda:0", to_host=False)), a_host
    )


@pytest.mark.cuda
@cuda
def test_torch_cuda_round_trip():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    x = torch.arange(6, dtype=torch.float32, device="cuda").reshape(2, 3)
    t = tl.from_dlpack(x)
    assert t.__dlpack_device__() == (2, 0)
    y = torch.from_dlpack(t * 3)
    assert y.is_cuda
    torch.testing.assert_close(y, x * 3)
    assert torch.from_dlpack(t).data_ptr() == x.data_ptr()


# ---- autoray ---------------------------------------------------------------------------------

ar = pytest.importorskip("autoray")


_CHECK_REGISTERED = (
    "t = tl.asarray(np.arange(3.0))\n"
    "assert ar.infer_backend(t) == 'tenloom'\n"
    "assert ar.to_numpy(ar.do('diag', t)).tolist() == np.diag(np.arange(3.0)).tolist()\n"
    # only the registration makes autoray's svd the reduced one (tl.linalg.svd is NumPy's)
    "assert ar.do('linalg.svd', tl.asarray(np.ones((3, 2))))[0].shape == (3, 2)\n"
)


@pytest.mark.parametrize(
    "imports",
    [
        # tenloom first: autoray is not imported, the hook registers when it is
        "import sys, numpy as np, tenloom as tl\n"
        "assert 'autoray' not in sys.modules\n"
        "import autoray as ar\n",
        # autoray first: tenloom registers as it is imported
        "import autoray as ar, numpy as np\nimport tenloom as tl\n",
    ],
    ids=["tenloom-first", "autoray-first"],
)
def test_registration_on_import(imports):
    code = imports + _CHECK_REGISTERED
    subprocess.run([sys.executable, "-P", "-c", code], check=True, timeout=120)


def test_infer_backend_and_to_numpy():
    t = tl.asarray(np.arange(4.0)) * 2
    assert ar.infer_backend(t) == "tenloom"
    out = ar.to_numpy(t)
    assert isinstance(out, np.ndarray)
    np.testing.assert_array_equal(out, np.arange(4.0) * 2)
    assert ar.shape(t) == (4,) and ar.ndim(t) == 1 and ar.size(t) == 4
    assert ar.get_dtype_name(t) == "float64"


def _m(rng, dtype, shape=(4, 4)):
    return _rand(rng, shape, dtype)


# (name, args as a function of (rng, dtype), kwargs): each run through autoray on NumPy
# arrays and on tenloom arrays, compared
_CASES = [
    ("tensordot", lambda r, d: (_m(r, d, (3, 4)), _m(r, d, (4, 5))), {"axes": 1}),
    ("einsum", lambda r, d: ("ij,jk->ki", _m(r, d, (3, 4)), _m(r, d, (4, 2))), {}),
    ("transpose", lambda r, d: (_m(r, d, (2, 3, 4)), (2, 0, 1)), {}),
    ("reshape", lambda r, d: (_m(r, d, (2, 6)), (3, 4)), {}),
    ("conj", lambda r, d: (_m(r, d),), {}),
    ("real", lambda r, d: (_m(r, d),), {}),
    ("imag", lambda r, d: (_m(r, d),), {}),
    ("abs", lambda r, d: (_m(r, d),), {}),
    ("sqrt", lambda r, d: (np.abs(_m(r, d)) + 0.1,), {}),
    ("exp", lambda r, d: (_m(r, d),), {}),
    ("log", lambda r, d: (np.abs(_m(r, d)) + 0.1,), {}),
    ("sum", lambda r, d: (_m(r, d, (3, 4)),), {"axis": 1}),
    ("max", lambda r, d: (np.real(_m(r, d, (3, 4))),), {"axis": 0}),
    ("trace", lambda r, d: (_m(r, d),), {}),
    ("diag", lambda r, d: (_m(r, d),), {}),
    ("diag", lambda r, d: (_m(r, d, (3,)),), {}),
    ("diag", lambda r, d: (_m(r, d, (3,)), 2), {}),
    ("diag", lambda r, d: (_m(r, d, (3,)), -1), {}),
    ("diag", lambda r, d: (_m(r, d, (3, 5)), 1), {}),
    ("stack", lambda r, d: ((_m(r, d, (2, 3)), _m(r, d, (2, 3))),), {"axis": 1}),
    ("concatenate", lambda r, d: ((_m(r, d, (2, 3)), _m(r, d, (1, 3))),), {"axis": 0}),
    ("split", lambda r, d: (_m(r, d, (6, 2)), 3), {}),
    ("split", lambda r, d: (_m(r, d, (2, 7)), [2, 5]), {"axis": -1}),
    ("take", lambda r, d: (_m(r, d, (3, 5)), [4, 0, 0]), {"axis": 1}),
    ("take", lambda r, d: (_m(r, d, (3, 5)), 2), {"axis": 0}),
    ("take", lambda r, d: (_m(r, d, (3, 5)), [[1, 2], [0, 14]]), {}),
    ("cumsum", lambda r, d: (_m(r, d, (3, 5)),), {"axis": -1}),
    ("cumsum", lambda r, d: (_m(r, d, (3, 5)),), {"axis": 0}),
    ("cumsum", lambda r, d: (_m(r, d, (3, 5)),), {}),
    ("clip", lambda r, d: (np.real(_m(r, d)), -0.5, 0.5), {}),
    ("linalg.norm", lambda r, d: (_m(r, d),), {}),
    ("linalg.expm", lambda r, d: (_m(r, d) * 0.3,), {}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", _CASES, ids=lambda c: c[0])
def test_do_matches_numpy(case, dtype):
    name, make, kwargs = case
    args = make(np.random.default_rng(3), dtype)
    want = ar.do(name, *args, like="numpy", **kwargs)
    lifted = [
        tuple(tl.asarray(x) for x in a)
        if isinstance(a, tuple) and a and isinstance(a[0], np.ndarray)
        else tl.asarray(a)
        if isinstance(a, np.ndarray)
        else a
        for a in args
    ]
    got = ar.do(name, *lifted, **kwargs)
    tol = 2e-5 if dtype in ("float32", "complex64") else 1e-12
    if isinstance(want, list):
        assert len(got) == len(want)
        assert all(ar.infer_backend(g) == "tenloom" for g in got)
        for g, w in zip(got, want):
            np.testing.assert_allclose(ar.to_numpy(g), w, rtol=tol, atol=tol)
        return
    assert ar.infer_backend(got) == "tenloom"
    np.testing.assert_allclose(ar.to_numpy(got), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_linalg_factorizations_through_autoray(dtype):
    rng = np.random.default_rng(4)
    a = _m(rng, dtype, (5, 3))
    tol = 1e-4 if dtype in ("float32", "complex64") else 1e-10
    u, s, vh = (ar.to_numpy(x) for x in ar.do("linalg.svd", tl.asarray(a)))
    assert u.shape == (5, 3) and vh.shape == (3, 3)  # reduced, like autoray's NumPy backend
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=tol, atol=tol)
    np.testing.assert_allclose((u * s) @ vh, a, rtol=tol, atol=tol)
    q, r = (ar.to_numpy(x) for x in ar.do("linalg.qr", tl.asarray(a)))
    np.testing.assert_allclose(q @ r, a, rtol=tol, atol=tol)
    h = a.conj().T @ a
    w, v = (ar.to_numpy(x) for x in ar.do("linalg.eigh", tl.asarray(h)))
    np.testing.assert_allclose(w, np.linalg.eigvalsh(h), rtol=tol, atol=tol)
    np.testing.assert_allclose((v * w) @ v.conj().T, h, rtol=tol, atol=tol)


def test_creation_like_and_dtypes():
    like = tl.asarray(np.ones(2, np.complex64))
    for name in ("ones", "zeros"):
        t = ar.do(name, (2, 3), like=like)
        assert ar.infer_backend(t) == "tenloom" and t.dtype == np.complex64
        np.testing.assert_array_equal(ar.to_numpy(t), getattr(np, name)((2, 3)))
    e = ar.do("eye", 3, like="tenloom")
    np.testing.assert_array_equal(ar.to_numpy(e), np.eye(3))
    arr = ar.do("array", np.arange(3), like="tenloom")
    assert isinstance(arr, tl.Tensor)
    t = ar.astype(tl.asarray(np.arange(3.0)), "complex64")
    assert isinstance(t, tl.Tensor) and t.dtype == np.complex64
    assert ar.to_backend_dtype("float32", like="tenloom") == np.float32
    np.random.seed(7)
    want = np.random.normal(size=(2, 3))
    np.random.seed(7)
    r = ar.do("random.normal", size=(2, 3), like="tenloom")
    assert isinstance(r, tl.Tensor)
    np.testing.assert_array_equal(ar.to_numpy(r), want)
    u = ar.do("random.uniform", size=(4,), like="tenloom", dtype="float32")
    assert u.dtype == np.float32 and np.all((ar.to_numpy(u) >= 0) & (ar.to_numpy(u) < 1))


def test_evaluating_helpers():
    """count_nonzero and allclose decide shapes and branches: they return concrete values."""
    x = tl.asarray(np.array([[0.0, 1.0, 2.0], [0.0, 0.0, 3.0]]))
    n = ar.do("count_nonzero", x)
    assert not isinstance(n, tl.Tensor) and n == 3
    np.testing.assert_array_equal(ar.do("count_nonzero", x > 0.5, axis=-1), [2, 1])
    assert ar.do("allclose", x, x + 1e-12) is True
    assert ar.do("allclose", x, x + 1) is False


def test_helper_errors():
    x = tl.asarray(np.ones((4, 3)))
    with pytest.raises(ShapeError, match="split: 3 sections do not divide axis 0"):
        ar.do("split", x, 3)
    with pytest.raises(ShapeError, match="split: axis 2 is out of range"):
        ar.do("split", x, 2, axis=2)
    with pytest.raises(ShapeError, match=r"diag: x must be 1-d or 2-d, got shape \(1, 4, 3\)"):
        ar.do("diag", tl.reshape(x, (1, 4, 3)))
    with pytest.raises(ShapeError, match="cumsum: axis -3 is out of range"):
        ar.do("cumsum", x, axis=-3)
    with pytest.raises(ShapeError, match="take: axis 5 is out of range"):
        ar.do("take", x, [0], axis=5)
    with pytest.raises(ShapeError, match="take: indices must be integers"):
        ar.do("take", x, [0.5], axis=0)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_helper_gradients(dtype):
    fns = [
        lambda a: ar.do("cumsum", a, axis=1),
        lambda a: ar.do("diag", a, 1),
        lambda a: ar.do("take", a, [2, 0, 2], axis=1),
        lambda a: ar.do("split", a, [1], axis=0)[1] * 2,
    ]
    for f in fns:
        check_grads(f, [(3, 3)], dtype)


# ---- quimb and cotengra on tenloom arrays ----------------------------------------------------


# the example's own builders (examples/quimb_interop.py), so the test and the example agree
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "examples"))
from quimb_interop import on_tenloom as _on_tenloom  # noqa: E402
from quimb_interop import random_circuit  # noqa: E402


def _random_circuit(qtn, n=6, depth=4, seed=0):
    return random_circuit(qtn, n, depth, seed)


def test_quimb_circuit_amplitude():
    qtn = pytest.importorskip("quimb.tensor")
    circ = _random_circuit(qtn)
    for bits in ("010101", "111000"):
        want = circ.amplitude(bits)  # quimb on NumPy
        tn = _on_tenloom(circ.amplitude_tn(bits))
        got = tn.contract(all, optimize="greedy")
        assert isinstance(got, tl.Tensor)
        np.testing.assert_allclose(complex(np.asarray(got)), want, rtol=1e-10)
        # quimb converting the arrays itself (autoray's "array" for the backend)
        via = circ.amplitude(bits, backend="tenloom")
        np.testing.assert_allclose(complex(np.asarray(via)), want, rtol=1e-10)


def test_quimb_mps_expectation():
    qtn = pytest.importorskip("quimb.tensor")
    psi = qtn.MPS_rand_state(8, 4, dtype=complex, seed=1)
    ham = qtn.MPO_ham_heis(8)
    want = qtn.expec_TN_1D(psi.H, ham, psi)
    p, h = _on_tenloom(psi), _on_tenloom(ham)
    got = qtn.expec_TN_1D(p.H, h, p)
    assert isinstance(got, tl.Tensor)
    np.testing.assert_allclose(complex(np.asarray(got)), want, rtol=1e-10, atol=1e-12)


def test_quimb_mps_compress_and_gates():
    """The truncated SVD path (count_nonzero on the spectrum, cumsum, reduced svd)."""
    quimb = pytest.importorskip("quimb")
    qtn = pytest.importorskip("quimb.tensor")
    psi = qtn.MPS_rand_state(8, 6, dtype=complex, seed=2)
    ref, p = psi.copy(), _on_tenloom(psi)
    for mps in (ref, p):
        mps.compress(max_bond=3, cutoff=1e-10)
    assert p.max_bond() == ref.max_bond() == 3
    np.testing.assert_allclose(complex(np.asarray(p.H @ p)), ref.H @ ref, rtol=1e-9)
    overlap = p.H @ _on_tenloom(psi)
    np.testing.assert_allclose(complex(np.asarray(overlap)), ref.H @ psi, rtol=1e-9)
    g = quimb.rand_uni(4, seed=3)
    ref.gate_split_(g, (2, 3), max_bond=4)
    p.gate_split_(tl.asarray(g), (2, 3), max_bond=4)
    overlap = _on_tenloom(ref).H @ p
    np.testing.assert_allclose(complex(np.asarray(overlap)), ref.H @ ref, rtol=1e-9)


def test_cotengra_contract_backend():
    ctg = pytest.importorskip("cotengra")
    rng = np.random.default_rng(5)
    inputs = [("a", "b"), ("b", "c"), ("c", "d", "a"), ("d", "e")]
    sizes = {"a": 2, "b": 3, "c": 4, "d": 5, "e": 3}
    arrays = [_rand(rng, [sizes[i] for i in t], "complex128") for t in inputs]
    want = ctg.array_contract(arrays, inputs, ("e",))
    got = ctg.array_contract([tl.asarray(a) for a in arrays], inputs, ("e",), backend="tenloom")
    assert isinstance(got, tl.Tensor)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
    tree = ctg.array_contract_tree(inputs, ("e",), shapes=[a.shape for a in arrays])
    got = tree.contract([tl.asarray(a) for a in arrays], backend="tenloom")
    assert isinstance(got, tl.Tensor)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
