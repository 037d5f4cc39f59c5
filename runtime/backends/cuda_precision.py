"""Contractions at a lowered precision on CUDA (runtime/precision.py says what each means).

A lowered CONTRACT is the reference's recipe (graph/ops/contract.py ``contract_ref``: lone
labels summed, operands grouped as A[batch, left, con] and B[batch, con, right], one batched
GEMM, the result in ``out``'s order) with the GEMM a direct ``cublasGemmStridedBatchedEx``
call rather than ``cupy.matmul``:

- "tf32": float32 / complex64 operands as they are, compute type
  ``CUBLAS_COMPUTE_32F_FAST_TF32``;
- "fp16" / "bf16": operands converted to float16 / bfloat16, compute type
  ``CUBLAS_COMPUTE_32F``, a float32 result written by the GEMM itself (no rounding of the
  result to half precision). CuPy has no bfloat16 dtype: bfloat16 operands are the upper 16
  bits of the float32 ones, rounded to nearest even by one elementwise kernel, held in uint16
  arrays and handed to cuBLAS as ``CUDA_R_16BF``. Complex64 operands become one real GEMM of
  twice the size: [[Ar, -Ai], [Ai, Ar]] @ [[Br], [Bi]] = [[Cr], [Ci]] (cuBLAS has no complex
  half GEMM).

Why cuBLAS directly and not CuPy's ``set_compute_type`` (or ``CUPY_TF32``): that setting is
one process-wide table read by every ``cupy.matmul``, so a tf32 run would change the
arithmetic of a "highest" run in another thread (the scheduler's workers, ``evaluate_async``)
and of the user's own CuPy code; and ``cupy.matmul`` of float16 operands returns float16, a
result rounded to half precision. The explicit compute type of one GEMM call touches nothing
else. CuPy's binding sets the handle's stream to the calling thread's current stream, so the
workers' streams are kept.
"""

from __future__ import annotations

from typing import Any

import cupy as cp
import numpy as np
from tenloom.graph.ops.contract import contract_layout

try:  # CuPy >= 10
    from cupy_backends.cuda.libs import cublas
except ImportError:  # pragma: no cover - older CuPy
    from cupy.cuda import cublas  # type: ignore[no-redef]

# cuBLAS / CUDA library enums (cublas_api.h, library_types.h)
_OP_N = 0
_R_32F, _C_32F, _R_16F, _R_16BF = 0, 4, 2, 14
_COMPUTE_32F, _COMPUTE_32F_FAST_TF32 = 68, 77
_GEMM_DEFAULT = -1
# alpha and beta in host memory (the handle's default pointer mode), read-only
_ONE = {_R_32F: np.ones(1, np.float32), _C_32F: np.ones(1, np.complex64)}
_ZERO = {_R_32F: np.zeros(1, np.float32), _C_32F: np.zeros(1, np.complex64)}

# float32 -> bfloat16 bits, round to nearest even; NaN stays a (quiet) NaN
_TO_BF16 = cp.ElementwiseKernel(
    "float32 x",
    "uint16 y",
    """
    unsigned int u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        y = (unsigned short)((u >> 16) | 0x0040u);
    } else {
        y = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
    """,
    "tenloom_to_bf16",
)


def _half(x, precision: str):
    """A float32 array as the (float16 or bfloat16) operand storage of ``precision``."""
    if precision == "fp16":
        return x.astype(cp.float16)
    return _TO_BF16(x)


def gemm(a, b, precision: str, out_dtype) -> Any:
    """C[nb, nl, nr] = A[nb, nl, nk] @ B[nb, nk, nr] of C-contiguous float32 or complex64
    arrays at ``precision`` ("tf32", "bf16" or "fp16")."""
    nb, nl, nk = a.shape
    nr = b.shape[2]
    complex_ = out_dtype.kind == "c"
    if precision == "tf32":
        ctype = _C_32F if complex_ else _R_32F
        return _strided_gemm(a, b, ctype, ctype, _COMPUTE_32F_FAST_TF32, out_dtype)
    if complex_:  # one real GEMM: [[Ar, -Ai], [Ai, Ar]] @ [[Br], [Bi]] = [[Cr], [Ci]]
        ar, ai = a.real, a.imag
        big_a = cp.empty((nb, 2 * nl, 2 * nk), np.float32)
        big_a[:, :nl, :nk] = ar
        big_a[:, :nl, nk:] = -ai
        big_a[:, nl:, :nk] = ai
        big_a[:, nl:, nk:] = ar
        big_b = cp.concatenate((b.real, b.imag), axis=1)
        c = gemm(big_a, big_b, precision, np.dtype(np.float32))
        out = cp.empty((nb, nl, nr), out_dtype)
        parts = out.view(np.float32).reshape(nb, nl, nr, 2)
        parts[..., 0] = c[:, :nl]
        parts[..., 1] = c[:, nl:]
        return out
    htype = _R_16F if precision == "fp16" else _R_16BF
    a16, b16 = _half(a, precision), _half(b, precision)
    return _strided_gemm(a16, b16, htype, _R_32F, _COMPUTE_32F, out_dtype)


def _strided_gemm(a, b, in_type: int, out_type: int, compute: int, out_dtype) -> Any:
    """One cublasGemmStridedBatchedEx of row-major A[nb, nl, nk] and B[nb, nk, nr]: in cuBLAS's
    column-major terms C^T = B^T A^T, so B goes first."""
    nb, nl, nk = a.shape
    nr = b.shape[2]
    c = cp.empty((nb, nl, nr), out_dtype)
    if c.size == 0:
        return c
    if nk == 0:
        c.fill(0)
        return c
    handle = cp.cuda.device.get_cublas_handle()
    cublas.gemmStridedBatchedEx(
        handle,
        _OP_N,
        _OP_N,
        nr,
        nl,
        nk,
        _ONE[out_type].ctypes.data,
        b.data.ptr,
        in_type,
        nr,
        nk * nr,
        a.data.ptr,
        in_type,
        nk,
        nl * nk,
        _ZERO[out_type].ctypes.data,
        c.data.ptr,
        out_type,
        nr,
        nl * nr,
        nb,
        compute,
        _GEMM_DEFAULT,
    )
    return c


def lowered_contract(a_shape: tuple, b_shape: tuple, attrs: Any, dtype: Any):
    """``(a, b, precision) -> c`` for one CONTRACT of result ``dtype`` (float32 or complex64)
    at a lowered precision, in the reference's recipe (module docstring)."""
    g = contract_layout(attrs, a_shape, b_shape)
    dt = np.dtype(dtype)
    perm_c = None if g.perm_c == tuple(range(len(g.perm_c))) else g.perm_c

    def run(a, b, precision: str):
        if g.a_only:
            a = a.sum(axis=g.a_only, dtype=dt)
        if g.b_only:
            b = b.sum(axis=g.b_only, dtype=dt)
        a = cp.ascontiguousarray(a.astype(dt, copy=False).transpose(g.perm_a))
        b = cp.ascontiguousarray(b.astype(dt, copy=False).transpose(g.perm_b))
        c = gemm(a.reshape(g.nb, g.nl, g.nk), b.reshape(g.nb, g.nk, g.nr), precision, dt)
        c = c.reshape(g.c_shape)
        return c if perm_c is None else c.transpose(perm_c)

    return run


__all__ = ["gemm", "lowered_contract"]
