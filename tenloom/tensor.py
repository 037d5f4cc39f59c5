"""The lazy ``Tensor``: a graph ``Value`` that can be evaluated.

Operators build nodes; nothing runs until ``evaluate``. ``==`` and ``<`` are elementwise and lazy,
so ``bool(t)`` raises instead of guessing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tenloom.graph.value import Value


class Tensor(Value):
    """A lazy array. Build with the ``tenloom`` functions and operators; run with ``evaluate``."""

    __slots__ = ()

    def evaluate(self, **opts: Any) -> np.ndarray:
        """Run the graph and return this tensor's value (a 0-d ndarray for scalars)."""
        from tenloom.runtime.evaluate import evaluate

        return evaluate(self, **opts)[0]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self.evaluate()
        return out if dtype is None else out.astype(dtype)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack export (``np.from_dlpack(t)``, ``torch.from_dlpack(t)``): a constant or a
        device-resident leaf exports its own memory; any other tensor is materialized first
        (evaluated on the GPU of its device-resident leaves, else on the CPU), see
        tenloom/interop.py."""
        from tenloom.interop import dlpack_export  # interop

        return dlpack_export(
            self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy
        )

    def __dlpack_device__(self) -> tuple[int, int]:
        """(1, 0) for the CPU, (2, N) when the tensor depends on arrays resident on cuda:N
        (``tl.from_dlpack`` of a CUDA array); nothing is evaluated."""
        from tenloom.interop import dlpack_device  # interop

        return dlpack_device(self)

    # the array API standard: tenloom/array_api.py is the namespace (__array_namespace__)
    def __array_namespace__(self, *, api_version: str | None = None):
        """``tenloom.array_api``, the array API standard's namespace (2024.12)."""
        if api_version not in (None, "2021.12", "2022.12", "2023.12", "2024.12"):
            raise ValueError(f"__array_namespace__: api_version {api_version!r} is not supported")
        from tenloom import array_api

        return array_api

    @property
    def device(self) -> str:
        """``"cpu"``, or ``"cuda:N"`` for a tensor of a CUDA DLPack array (tl.from_dlpack)."""
        kind, index = self.__dlpack_device__()
        return "cpu" if kind == 1 else f"cuda:{index}"

    def to_device(self, device, /, *, stream=None) -> "Tensor":
        """The tensor itself on its own device; the array API namespace has no transfers."""
        if device != self.device and getattr(device, "kind", None) != self.device:
            from tenloom.graph.errors import DeviceError

            raise DeviceError(f"to_device: {device!r}; this tensor is on {self.device!r}")
        return self

    # ``//`` follows the array API standard at infinities (``inf // 2`` is inf, ``1 // -inf``
    # is -0, where NumPy's floor_divide gives NaN and -1); ``tl.floor_divide`` stays NumPy's
    def __floordiv__(self, other) -> "Tensor":
        from tenloom.array_api_elementwise import floor_divide

        return floor_divide(self, other)

    def __rfloordiv__(self, other) -> "Tensor":
        from tenloom.array_api_elementwise import floor_divide

        return floor_divide(other, self)

    def __lshift__(self, other) -> "Tensor":
        from tenloom.array_api_elementwise import bitwise_left_shift

        return bitwise_left_shift(self, other)

    def __rlshift__(self, other) -> "Tensor":
        from tenloom.array_api_elementwise import bitwise_left_shift

        return bitwise_left_shift(other, self)

    def __rshift__(self, other) -> "Tensor":
        from tenloom.array_api_elementwise import bitwise_right_shift

        return bitwise_right_shift(self, other)

    def __rrshift__(self, other) -> "Tensor":
        from tenloom.array_api_elementwise import bitwise_right_shift

        return bitwise_right_shift(other, self)

    @property
    def mT(self) -> "Tensor":
        """The matrix transpose (the last two axes swapped)."""
        from tenloom.array_api_linalg import matrix_transpose

        return matrix_transpose(self)

    def _repr_svg_(self) -> str | None:
        """Jupyter: the graph as traced, as SVG (no pass runs). None, so that Jupyter shows the
        text repr, when graphviz or its ``dot`` program is missing or the graph is too big to
        draw; ``tl.visualize`` draws the optimized graph."""
        from tenloom.visualize import repr_svg

        return repr_svg(self)

    # NumPy's protocols and the scalar conversions: tenloom/numpy_protocols.py has the rules
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from tenloom.numpy_protocols import array_ufunc

        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from tenloom.numpy_protocols import array_function

        return array_function(func, types, args, kwargs)

    def __float__(self) -> float:
        from tenloom.numpy_protocols import to_scalar

        return to_scalar(self, "float")

    def __int__(self) -> int:
        from tenloom.numpy_protocols import to_scalar

        return to_scalar(self, "int")

    def __complex__(self) -> complex:
        from tenloom.numpy_protocols import to_scalar

        return to_scalar(self, "complex")

    def __index__(self) -> int:
        from tenloom.numpy_protocols import to_scalar

        return to_scalar(self, "index")

    def item(self, *args):
        """The element as a Python scalar, evaluated (``ndarray.item``'s arguments)."""
        from tenloom.numpy_protocols import item

        return item(self, args)

    @property
    def at(self):
        """Functional updates, JAX's spelling: ``t.at[idx].set(v)``, ``.add(v)``,
        ``.multiply(v)``, ``.get()`` return new Tensors (tenloom/updates.py)."""
        from tenloom.updates import IndexUpdater  # def at: functional updates

        return IndexUpdater(self)


# def at's module: also registers the evaluator of lazy boolean masks (graph/ops/gather.py)
from tenloom import updates as _updates  # noqa: E402, F401
