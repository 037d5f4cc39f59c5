"""``tl.fft``: discrete Fourier transforms with NumPy's names and semantics (``numpy.fft``),
lazy and differentiable (forward and reverse mode, complex inputs included), batched over
every axis not transformed. It is also the array API namespace's ``fft`` extension
(``tenloom.array_api.fft``, 2024.12): NumPy's signatures take the standard's keywords.

``fft``, ``ifft``, ``rfft``, ``irfft``, ``hfft``, ``ihfft`` (``n``, ``axis``, ``norm``) and
``fftn``, ``ifftn``, ``rfftn``, ``irfftn`` (``s``, ``axes``, ``norm``), with ``norm``
"backward" (the default, also ``None``), "ortho" or "forward"; the ops and their rules are in
graph/ops/fft.py, which also lists the dtype rules (float32 -> complex64, float64 ->
complex128; integers and bool promoted to float64 and float16 to float32, as ``numpy.fft``)
and what differs from NumPy: ``s`` without ``axes`` raises, repeated axes raise, and
``s[-1] = -1`` in ``irfftn`` gives the default ``2 * (m - 1)`` points. On the CPU the
transforms run ``scipy.fft`` (single precision stays single, batches spread over the
evaluation's threads); on CUDA ``cupy.fft`` (cuFFT); OpenCL has no kernel for them.

``fftfreq`` and ``rfftfreq`` (``n``, ``d``, ``dtype=``, ``device=``) are constants;
``fftshift`` and ``ifftshift`` (``axes``) are built from slices and ``concatenate``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tenloom import api as tl
from tenloom.graph import build as _b
from tenloom.graph.errors import DTypeError, OptionError, OptionTypeError
from tenloom.graph.value import lifted
from tenloom.tensor import Tensor

_TRANSFORMS = ("fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft")
for _name in _TRANSFORMS:  # the builders of graph/ops/fft.py, returning Tensors
    globals()[_name] = lifted(Tensor, _b.BUILDERS[_name], _name, __name__)


def _window(n: Any, d: Any, dtype: Any, device: Any, op: str) -> tuple[int, float, np.dtype]:
    from tenloom.array_api import _check_device  # the namespace's rule: arrays are placed later

    _check_device(device, op)
    n = _b.int_arg(n, op, "n")
    if n < 1:
        raise OptionError(f"{op}: n={n}; the window length must be >= 1")
    if isinstance(d, bool) or not isinstance(d, (int, float, np.integer, np.floating)):
        raise OptionTypeError(f"{op}: d {d!r} is not a real number")
    if not (math.isfinite(float(d)) and d != 0):
        raise OptionError(f"{op}: the sample spacing d={d!r} must be finite and non-zero")
    dt = np.dtype("float64" if dtype is None else dtype)
    if dt.kind != "f":
        raise DTypeError(f"{op}: dtype {dt} is not a real floating-point dtype")
    return n, float(d), dt


def fftfreq(n: int, d: float = 1.0, *, dtype: Any = None, device: Any = None) -> Tensor:
    """The sample frequencies of :func:`fft` for a window of ``n`` points spaced ``d``:
    ``[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)`` (``numpy.fft.fftfreq``), a
    constant of ``dtype`` (default float64)."""
    n, d, dt = _window(n, d, dtype, device, "fftfreq")
    return tl.asarray(np.fft.fftfreq(n, d).astype(dt))


def rfftfreq(n: int, d: float = 1.0, *, dtype: Any = None, device: Any = None) -> Tensor:
    """The ``n // 2 + 1`` non-negative sample frequencies of :func:`rfft`
    (``numpy.fft.rfftfreq``)."""
    n, d, dt = _window(n, d, dtype, device, "rfftfreq")
    return tl.asarray(np.fft.rfftfreq(n, d).astype(dt))


def _shift(x: Any, axes: Any, sign: int, op: str) -> Tensor:
    x = x if isinstance(x, Tensor) else tl.asarray(x)
    for a in _b.normalize_axes(axes, x.ndim, op, x.shape):
        size = x.shape[a]
        k = (sign * (size // 2)) % size if size else 0
        if k:
            pre = (slice(None),) * a
            x = tl.concatenate(
                [x[pre + (slice(size - k, None),)], x[pre + (slice(0, size - k),)]], a
            )
    return x


def fftshift(x: Any, axes: Any = None) -> Tensor:
    """``x`` with the zero frequency moved to the middle of each of ``axes`` (None: all): rolled
    by ``size // 2`` (``numpy.fft.fftshift``)."""
    return _shift(x, axes, 1, "fftshift")


def ifftshift(x: Any, axes: Any = None) -> Tensor:
    """The inverse of :func:`fftshift`: rolled by ``-(size // 2)``."""
    return _shift(x, axes, -1, "ifftshift")


__all__ = [*_TRANSFORMS, "fftfreq", "rfftfreq", "fftshift", "ifftshift"]
