"""What a backend is: everything the runtime calls on one, in one protocol.

    program.compile_program(graph, backend)  -> backend.kernel(node) per op node, once;
                                                backend.from_host(constant, True) for constants
    program.run(prog, feed, backend)         -> kernel(*values) per step; from_host for leaves
    executor.execute(...)                    -> backend.to_host(output) per output
    scheduler (threads > 1)                  -> worker_stream(), wait_event(), record_event(),
                                                synchronize() where ``streams`` is true
    sliced (memory_limit)                    -> zeros(), activate(), worker_stream(), marker(),
                                                synchronize()
    fuse_elementwise (limits by device kind) -> fusion: the regions its fused kernels take

A backend object serves one device (``kind`` is ``"cpu"``, ``"cuda:0"``, ``"opencl:1"`` ...)
and is made once per device by ``backends.get_backend``; compiled programs are cached per graph
and ``kind``. Kernels are made from a table: ``KERNELS`` maps an ``Op`` to a factory
``(backend, node) -> kernel``, prepared once per node (shapes, permutations, generated code
worked out); a factory may answer None ("not this node"), and the backend's
``default_kernel`` runs what no factory takes. ``BackendBase`` holds that dispatch and the
defaults of a device with no streams; the CPU (cpu.py), CUDA/ROCm (cuda.py) and OpenCL
(opencl/) backends derive from it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager as ContextManager
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
from tenloom.graph.errors import DeviceError
from tenloom.graph.node import Node
from tenloom.graph.ops import Op
from tenloom.passes.fuse_elementwise import FusionLimits

Kernel = Callable[..., Any]  # f(*device_arrays) -> device_array, made once per node
KernelFactory = Callable[[Any, Node], "Kernel | None"]  # (backend, node) -> kernel or None


@runtime_checkable
class Backend(Protocol):
    """The protocol every backend implements (see the module docstring for who calls what)."""

    kind: str  # the device's name, "cpu", "cuda:0", "opencl:1": the key of compiled programs
    dtypes: tuple[np.dtype, ...]  # the dtypes its kernels and memory take
    # from_host returns the host array itself (no copy): constants are then read in place
    shares_host_memory: bool
    streams: bool  # whether threads may drive their own queues (worker_stream and events)
    fusion: FusionLimits  # the fused regions its kernels take (runtime/codegen builds them)

    # ---- memory ----------------------------------------------------------------------------
    def from_host(self, array: np.ndarray, constant: bool = False) -> Any:
        """The backend's array of a host array. ``constant``: a graph constant, which the
        backend may copy once and reuse while the host array is frozen."""

    def to_host(self, array: Any) -> np.ndarray:
        """A host array of the backend's array (waits for the value)."""

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        """A new zero-filled array on the device."""

    def memory_stats(self) -> dict[str, int]:
        """Bytes in use, and where known the high-water mark and total (may be empty)."""

    # ---- kernels ---------------------------------------------------------------------------
    def kernel(self, node: Node) -> Kernel:
        """A callable ``f(*arrays) -> array`` computing ``node`` from its inputs' values."""

    # ---- queues and synchronization ----------------------------------------------------------
    def activate(self) -> ContextManager[Any]:
        """A context in which the calling thread works on this backend's device."""

    def worker_stream(self) -> ContextManager[Any]:
        """A new queue for one worker thread; ``with stream:`` makes it the thread's queue."""

    def record_event(self, stream: Any) -> Any:
        """An event marking the work enqueued on ``stream`` so far (None: already done)."""

    def wait_event(self, stream: Any, event: Any) -> None:
        """Make ``stream`` wait for ``event`` (None: nothing to wait for)."""

    def marker(self) -> Any:
        """An event on the current queue whose ``.synchronize()`` waits for the work enqueued
        so far, or None where work is done when its call returns."""

    def synchronize(self) -> None:
        """Wait for all work enqueued on this device, every worker queue included."""

    def caches(self) -> dict[str, list[dict]]:
        """The backend's own caches, for ``tl.cache_info()`` / ``tl.clear_caches()``:
        ``"constants"``, tables of device copies of frozen constants (each entry goes with its
        array), and ``"kernels"``, tables of compiled kernels or programs."""


class BackendBase:
    """Table dispatch of kernels, and the defaults of a device whose work is done when its call
    returns (no queues, events or device context). Subclasses set ``kind``, ``dtypes``,
    ``fusion``, ``KERNELS`` and the memory methods."""

    KERNELS: ClassVar[Mapping[Op, KernelFactory]] = {}
    kind: str
    dtypes: tuple[np.dtype, ...]
    fusion: FusionLimits
    shares_host_memory = False
    streams = False

    def kernel(self, node: Node) -> Kernel:
        factory = self.KERNELS.get(node.op)
        if factory is not None:
            fn = factory(self, node)
            if fn is not None:
                return fn
        return self.default_kernel(node)

    def default_kernel(self, node: Node) -> Kernel:
        """The kernel of an op no factory of ``KERNELS`` takes."""
        raise DeviceError(f"{self.kind}: no kernel for op {node.op.value!r}")

    def memory_stats(self) -> dict[str, int]:
        return {}

    def activate(self) -> ContextManager[Any]:
        return contextlib.nullcontext()

    def worker_stream(self) -> ContextManager[Any]:
        return contextlib.nullcontext()

    def record_event(self, stream: Any) -> Any:
        return None

    def wait_event(self, stream: Any, event: Any) -> None:
        pass

    def marker(self) -> Any:
        return None

    def synchronize(self) -> None:
        pass

    def caches(self) -> dict[str, list[dict]]:
        return {}
