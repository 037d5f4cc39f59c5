"""Every backend implements the one protocol of runtime/backends/base.py, with its kernels in a
table keyed by op."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
from tenloom.graph.ops import Op
from tenloom.passes.fuse_elementwise import FusionLimits
from tenloom.runtime.backends import get_backend
from tenloom.runtime.backends.base import Backend, BackendBase

import tenloom as tl


def _backends() -> list:
    found = [get_backend("cpu", 0)]
    if importlib.util.find_spec("pyopencl") is not None:
        os.environ.setdefault("OCL_ICD_VENDORS", "/etc/OpenCL/vendors/pocl.icd")
        try:
            found.append(get_backend("opencl", 0))
        except Exception:  # no OpenCL device here
            pass
    return found


@pytest.mark.parametrize("backend", _backends(), ids=lambda b: b.kind)
def test_backends_implement_the_protocol_with_kernel_tables(backend):
    assert isinstance(backend, Backend) and isinstance(backend, BackendBase)
    assert backend.KERNELS and all(isinstance(op, Op) for op in backend.KERNELS)
    assert all(callable(f) for f in backend.KERNELS.values())
    assert isinstance(backend.streams, bool) and isinstance(backend.shares_host_memory, bool)
    assert isinstance(backend.fusion, FusionLimits) and backend.fusion.ops
    with backend.activate(), backend.worker_stream():
        x = backend.from_host(np.arange(3.0))
        np.testing.assert_array_equal(backend.to_host(x), np.arange(3.0))
    backend.synchronize()
    x = np.arange(6.0).reshape(2, 3)
    a = tl.asarray(x)
    np.testing.assert_allclose((a @ a.T + 1.0).evaluate(device=backend.kind), x @ x.T + 1)


def test_an_op_no_factory_takes_is_a_device_error():
    class Bare(BackendBase):
        kind = "bare:0"

    node = tl.asarray(np.ones(2)).node
    with pytest.raises(tl.DeviceError, match="bare:0: no kernel for op"):
        Bare().kernel(node)
