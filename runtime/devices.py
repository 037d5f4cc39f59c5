"""``tl.devices()``: the devices present. The CPU is always there."""

from __future__ import annotations

import importlib.util
import os
import platform
from typing import NamedTuple


class Device(NamedTuple):
    kind: str
    index: int
    name: str
    total_memory: int

    def __str__(self) -> str:
        return f"{self.kind}:{self.index} {self.name} ({self.total_memory / 2**30:.1f} GiB)"


def _cpu() -> Device:
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        mem = 0
    name = platform.processor() or platform.machine() or "cpu"
    return Device("cpu", 0, f"{name} ({os.cpu_count()} cores)", mem)


def devices() -> list[Device]:
    """The CPU, then every device an installed backend can reach (CuPy: CUDA or ROCm GPUs;
    pyopencl: every OpenCL device, numbered across platforms as ``opencl:N``)."""
    found = [_cpu()]
    if importlib.util.find_spec("cupy") is not None:
        try:
            import cupy as cp
            from tenloom.runtime.backends.cuda import list_devices

            kind = "rocm" if cp.cuda.runtime.is_hip else "cuda"
            found += [Device(kind, i, n, m) for i, n, m in list_devices(kind)]
        except Exception:  # a broken driver or no GPU: the CPU is still there
            pass
    if importlib.util.find_spec("pyopencl") is not None:
        try:
            from tenloom.runtime.backends.opencl import list_devices as list_opencl

            found += [Device("opencl", i, n, m) for i, n, m in list_opencl()]
        except Exception:  # a broken ICD: the CPU is still there
            pass
    return found
