"""The CUDA backend (CuPy). Skipped where CuPy or a GPU is absent; run on the device machine."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import cuda_marks, gpu_count

import tenloom as tl

cp = pytest.importorskip("cupy")
_N_GPUS = gpu_count(cp)
pytestmark = cuda_marks(cp)
RNG = np.random.default_rng(5)


def test_devices_lists_the_gpu():
    kinds = [d.kind for d in tl.devices()]
    assert kinds[0] == "cpu" and ("cuda" in kinds or "rocm" in kinds)


def test_contraction_network_matches_cpu():
    a, b, c = (RNG.standard_normal((64, 64)) for _ in range(3))
    t = tl.trace(tl.asarray(a) @ tl.asarray(b) @ tl.asarray(c)) * 2.0
    np.testing.assert_allclose(t.evaluate(device="cuda:0"), t.evaluate(), rtol=1e-10)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_einsum_dtypes_on_gpu(dtype):
    a = RNG.standard_normal((5, 6, 7)).astype(dtype)
    b = RNG.standard_normal((7, 6, 3)).astype(dtype)
    t = tl.einsum("ijk,kjl->il", tl.asarray(a), tl.asarray(b))
    out = t.evaluate(device="cuda:0")
    assert out.dtype == np.dtype(dtype)
    tol = 1e-4 if dtype in ("float32", "complex64") else 1e-10
    np.testing.assert_allclose(out, np.einsum("ijk,kjl->il", a, b), rtol=tol, atol=tol)


def test_fused_region_runs_as_one_generated_kernel():
    x = RNG.standard_normal(10_000)
    t = tl.asarray(x)
    y = t
    for _ in range(20):
        y = tl.tanh(y * 0.9 + 0.1)
    ops = [n.op.value for n in tl.explain(y).graph.order]
    assert "fused" in ops
    expected = x.copy()
    for _ in range(20):
        expected = np.tanh(expected * 0.9 + 0.1)
    np.testing.assert_allclose(y.evaluate(device="cuda:0"), expected, rtol=1e-12)
    m = tl.maximum(t, 0.0) * tl.where(t > 0.5, t, 2.0 * t)
    np.testing.assert_allclose(
        m.evaluate(device="cuda:0"), np.maximum(x, 0) * np.where(x > 0.5, x, 2 * x)
    )


def test_to_host_false_returns_device_arrays_and_constants_are_copied_once():
    from tenloom.runtime.backends import get_backend

    a = RNG.standard_normal((32, 32))
    t = tl.asarray(a) @ tl.asarray(a)
    (out,) = tl.evaluate(t, device="cuda:0", to_host=False)
    assert isinstance(out, cp.ndarray)
    be = get_backend("cuda", 0)
    n_before = len(be._consts)
    tl.evaluate(t, device="cuda:0")
    assert len(be._consts) == n_before  # no new device copies of the same constant
    np.testing.assert_allclose(cp.asnumpy(out), a @ a, rtol=1e-12)


def test_placeholders_and_movement_ops_on_gpu():
    x = tl.placeholder((4, 6), name="x")
    y = tl.concatenate([x[:, ::2], tl.transpose(x)[::2, :4].T], axis=1).sum(axis=0)
    arr = RNG.standard_normal((4, 6))
    expected = np.concatenate([arr[:, ::2], arr.T[::2, :4].T], axis=1).sum(axis=0)
    np.testing.assert_allclose(y.evaluate(device="cuda:0", feed={x: arr}), expected)
    np.testing.assert_allclose(tl.eye(3).evaluate(device="cuda:0"), np.eye(3))


def test_bad_device_index_is_a_device_error():
    with pytest.raises(tl.DeviceError, match="does not exist"):
        tl.asarray(np.ones(2)).evaluate(device=f"cuda:{_N_GPUS + 7}")


def test_independent_branches_on_worker_streams():
    a = RNG.standard_normal((256, 256))
    b = RNG.standard_normal((256, 256))
    ta, tb = tl.asarray(a), tl.asarray(b)
    left = tl.tanh(ta @ ta) + 1.0
    right = tl.sin(tb @ tb.T) * 2.0
    both = left.sum() + right.sum()
    for threads in (1, 2, 4):
        np.testing.assert_allclose(
            both.evaluate(device="cuda:0", threads=threads),
            np.tanh(a @ a).sum() + 256 * 256 + 2 * np.sin(b @ b.T).sum(),
            rtol=1e-10,
        )


def _lattice_einsum(n, d, dtype, seed=0):
    import cotengra as ctg

    inputs, output, shapes, _ = ctg.utils.lattice_equation([n, n], d_min=d, d_max=d)
    rng = np.random.default_rng(seed)
    labels: dict = {}
    args = []
    for t, s in zip(inputs, shapes):
        a = (rng.standard_normal(s) / np.sqrt(np.prod(s)) * 2).astype(dtype)
        args += [tl.asarray(a), [labels.setdefault(x, len(labels)) for x in t]]
    args.append([])
    return tl.einsum(*args)


def test_sliced_network_on_gpu_matches_cpu():
    y = _lattice_einsum(5, 6, "float64")
    expected = y.evaluate(optimize="greedy")
    got = y.evaluate(device="cuda:0", optimize="greedy", memory_limit="200 KB")
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    from tenloom.runtime.sliced import LAST_RUN

    assert LAST_RUN.workers == ["cuda:0"] and LAST_RUN.slices[0] > 1


@pytest.mark.skipif(_N_GPUS < 2, reason="needs two GPUs")
def test_slices_spread_over_two_gpus():
    from tenloom.runtime.sliced import LAST_RUN

    y = _lattice_einsum(5, 6, "complex128", seed=1)
    expected = y.evaluate(optimize="greedy")
    for device in (["cuda:0", "cuda:1"], "cuda:*"):
        got = y.evaluate(device=device, optimize="greedy", memory_limit="200 KB")
        np.testing.assert_allclose(got, expected, rtol=1e-10)
        assert LAST_RUN.workers[:2] == ["cuda:0", "cuda:1"]
        assert all(c > 0 for c in LAST_RUN.slices)
    # deterministic mode deals slices round-robin: the same bits every time
    runs = {
        y.evaluate(
            device=["cuda:0", "cuda:1"],
            optimize="greedy",
            memory_limit="200 KB",
            deterministic=True,
        ).tobytes()
        for _ in range(5)
    }
    assert len(runs) == 1


def test_slices_on_two_streams_of_one_gpu():
    from tenloom.runtime.sliced import LAST_RUN

    y = _lattice_einsum(5, 6, "float64", seed=2)
    expected = y.evaluate(optimize="greedy")
    # sliced (6 slices), with room for two slices at once: each worker streams its own
    got = y.evaluate(device="cuda:0", optimize="greedy", memory_limit="800 KB", threads=2)
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    assert LAST_RUN.workers == ["cuda:0", "cuda:0"]


def test_fused_region_mixing_bool_into_complex():
    """thrust's complex has no operator with bool: the generated kernel converts the bool
    operands (bool + complex128 failed to compile; found by the differential fuzzer)."""
    b = np.array([[True], [False]])
    z = np.array([1 + 2j, -3j])
    t = (tl.asarray(b) + tl.asarray(z)) * 2 + (tl.asarray(b) == tl.asarray(z))
    for device in ("cuda:0", "cpu"):
        np.testing.assert_array_equal(t.evaluate(device=device), (b + z) * 2 + (b == z))


def test_complex_ordering_is_numpys():
    """NumPy orders complex numbers by real part, then imaginary part (a NaN imaginary part
    makes the real-part test false); CuPy's comparisons differed (True > 1+0j was True)."""
    vals = [0.0, 1.0, -2.5, np.nan, np.inf]
    z = np.array([complex(a, b) for a in vals for b in vals])
    x, y = (a.ravel() for a in np.meshgrid(z, z))
    b = np.resize(np.array([True, False]), x.size)
    for f in (np.less, np.less_equal, np.greater, np.greater_equal):
        got = getattr(tl, f.__name__)(tl.asarray(x), tl.asarray(y)).evaluate(device="cuda:0")
        np.testing.assert_array_equal(got, f(x, y), err_msg=f.__name__)
        got = getattr(tl, f.__name__)(tl.asarray(b), tl.asarray(y)).evaluate(device="cuda:0")
        np.testing.assert_array_equal(got, f(b, y), err_msg=f.__name__)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_linalg_runs_cupy_linalg_and_matches_cpu(dtype):
    """tl.linalg's NumPy references dispatch to cupy.linalg on the GPU: values and gradients
    match the CPU's, batched, a vector and a broadcast right-hand side for solve."""
    n = 4
    a = RNG.standard_normal((2, n, n)) + n * np.eye(n)
    if dtype.startswith("complex"):
        a = a + 1j * RNG.standard_normal((2, n, n))
    a = a.astype(dtype)
    x = tl.placeholder(a.shape, dtype, name="a")
    w, v = tl.linalg.eigh(x)
    q, r = tl.linalg.qr(x[:, :, :3])
    sign, logabs = tl.linalg.slogdet(x)
    u, s, vh = tl.linalg.svd(x[:, :3, :], full_matrices=False)
    h = x @ tl.conj(tl.moveaxis(x, -1, -2))
    outs = [
        tl.linalg.inv(x),
        tl.linalg.solve(x, np.ones(n, dtype)),
        tl.linalg.solve(x, np.ones((n, 2), dtype)),
        tl.linalg.det(x),
        sign,
        logabs,
        tl.linalg.cholesky(h),
        w,
        tl.abs(v),
        q,
        r,
        s,
        tl.abs(u),
        tl.abs(vh),
    ]
    loss = tl.sum(tl.real(tl.linalg.inv(x) * tl.linalg.det(x)[:, None, None])) + tl.sum(logabs)
    outs += list(tl.grad(loss, [x]))
    gpu = tl.evaluate(*outs, feed={x: a}, device="cuda:0")
    cpu = tl.evaluate(*outs, feed={x: a})
    tol = 2e-3 if dtype in ("float32", "complex64") else 1e-9
    for k, (g, c) in enumerate(zip(gpu, cpu)):
        assert g.dtype == c.dtype, k
        np.testing.assert_allclose(g, c, rtol=tol, atol=tol, err_msg=f"output {k}")
