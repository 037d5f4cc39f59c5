"""Feeds of CUDA arrays (runtime/executor.py ``bind_feed``): bound with no copy when the run is
on that CUDA device (evaluate, plans, @tl.function), a DeviceError naming the placeholder and
both devices anywhere else, and the usual shape and dtype checks."""

from __future__ import annotations

import numpy as np
import pytest

import tenloom as tl


class FakeCudaArray:
    """Something with ``__cuda_array_interface__`` (the CPU side of the rule needs no GPU)."""

    __cuda_array_interface__ = {"shape": (3,), "typestr": "<f8", "data": (0, False), "version": 3}
    shape, dtype = (3,), np.dtype("float64")

    class device:  # noqa: N801
        id = 0


def test_a_cuda_array_on_a_cpu_run_is_a_device_error_naming_the_placeholder():
    x = tl.placeholder((3,), name="x")
    with pytest.raises(
        tl.DeviceError,
        match="placeholder 'x' is bound to a .*FakeCudaArray on cuda:0, but the program runs on ",
    ):
        (x * 2).evaluate(feed={x: FakeCudaArray()})
    plan = tl.compile([x * 2], [x])
    with pytest.raises(tl.DeviceError, match="placeholder 'x'.*runs on cpu"):
        plan(FakeCudaArray())


try:
    import cupy as cp

    _GPUS = cp.cuda.runtime.getDeviceCount()
except Exception:  # no CuPy or no driver
    cp, _GPUS = None, 0
cuda = pytest.mark.skipif(_GPUS == 0, reason="no CUDA GPU present")


@pytest.mark.cuda
@cuda
def test_cuda_arrays_feed_evaluate_plans_and_functions_without_a_copy():
    a = cp.arange(12, dtype=cp.float64).reshape(3, 4)
    x = tl.placeholder((3, 4), name="x")
    got = (x @ x.T).evaluate(feed={x: a}, device="cuda:0", to_host=False)
    assert isinstance(got, cp.ndarray)
    cp.testing.assert_allclose(got, a @ a.T)
    plan = tl.compile([tl.linalg.svdvals(x)], [x], device="cuda:0", to_host=False)
    (s,) = plan(a)
    cp.testing.assert_allclose(s, cp.linalg.svd(a, compute_uv=False), rtol=1e-12)
    (again,) = plan(s[:, None] * cp.ones((3, 4)))  # a device result fed back in
    assert isinstance(again, cp.ndarray)
    # int32 converts safely to float64 on the device; float64 into float32 does not
    (b,) = plan(cp.ones((3, 4), dtype=cp.int32))
    assert b.dtype == cp.float64
    y = tl.placeholder((3,), "float32", name="y")
    with pytest.raises(tl.DTypeError, match="placeholder 'y'.*float64"):
        (y * 2).evaluate(feed={y: cp.ones(3)}, device="cuda:0")
    with pytest.raises(tl.ShapeError, match="placeholder 'y' has shape \\(3,\\)"):
        (y * 2).evaluate(feed={y: cp.ones(4, dtype=cp.float32)}, device="cuda:0")
    with pytest.raises(tl.DeviceError, match="runs on cpu"):
        (y * 2).evaluate(feed={y: cp.ones(3, dtype=cp.float32)})


@pytest.mark.cuda
@cuda
def test_outputs_never_alias_a_fed_device_array():
    a = cp.ones(5)
    x = tl.placeholder((5,), name="x")
    out = (x + 0).evaluate(feed={x: a}, device="cuda:0", to_host=False)
    out[0] = 7
    assert float(a[0]) == 1.0


class FakeTorchCudaTensor(FakeCudaArray):
    """torch's dtypes print as 'torch.float32' and are not NumPy dtypes."""

    class dtype:  # noqa: N801
        def __str__(self):
            return "torch.float64"

    dtype = dtype()


def test_functions_read_torch_dtypes_and_device_leaves_are_not_traced_inputs():
    @tl.function
    def double(x):
        return x * 2

    # the dtype is understood; the run is on the CPU, so the CUDA array is refused by name
    with pytest.raises(tl.DeviceError, match="FakeTorchCudaTensor on cuda:0, but the program"):
        double(FakeTorchCudaTensor())
    # a device-resident leaf (tl.from_dlpack of a CUDA array) has a value: a data-dependent
    # shape evaluates it (here on the CPU, refused), it is not a traced function's input
    from tenloom.runtime.executor import register_device_leaf

    leaf = tl.placeholder((3,), name="dl")
    register_device_leaf(leaf.node, FakeCudaArray())
    m = tl.reshape(leaf, (3, 1)) * tl.ones((1, 2))
    with pytest.raises(tl.DeviceError, match="program runs on cpu"):
        tl.linalg.tensor_svd(m, 0, cutoff=0.1)
