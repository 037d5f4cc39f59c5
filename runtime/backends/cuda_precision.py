"""Contractions at a lowered precision on CUDA (runtime/precision.py says what each means).

A lowered CONTRACT is the reference's recipe (graph/ops/contract.py ``contract_ref``: lone
labels summed, operands grouped as A[batch, left, con] and B[batch, con, right], one batched
GEMM, the result in ``out``'s order) with the GEMM a direct ``cublasGemmStridedBatchedEx``
call rather than ``cupy.matmul``:

- "tf32": float32 / complex64 operands as they are (made C-contiguous), compute type
  ``CUBLAS_COMPUTE_32F_FAST_TF32``: cuBLAS's TF32 tensor-core math, as JAX and PyTorch use
  it. It *allows* TF32: cuBLAS may still run a GEMM shape in full float32. With
  ``TF32_ROUNDING = "nearest"`` every operand is rounded to the nearest TF32 value (10-bit
  mantissa) first, in the pass that transposes it, so that every lowered GEMM rounds alike;
  on an H100 neither was consistently more accurate or faster (benchmarks/precision.py
  measures both), so the default stays cuBLAS's, as in JAX and PyTorch;
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
from tenloom.graph.ops.contract import contract_layout, gemm_operands

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
# float32 -> the nearest TF32 value (10-bit mantissa, round to nearest even), kept as a float32;
# infinities and NaN as they are
_TO_TF32 = cp.ElementwiseKernel(
    "float32 x",
    "float32 y",
    """
    unsigned int u = __float_as_uint(x);
    if ((u & 0x7f800000u) != 0x7f800000u) {
        u = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;
    }
    y = __uint_as_float(u);
    """,
    "tenloom_to_tf32",
)
# How "tf32" operands become TF32: "hardware" leaves it to cuBLAS's TF32 GEMM (its kernels'
# own conversion; a GEMM cuBLAS runs in float32 is not rounded at all); "nearest" rounds every
# operand to nearest first (one elementwise pass per operand, fused with its transposition).
# Measured on an H100 (benchmarks/results/precision_session12_*): neither consistently more
# accurate (per workload each won by up to 10x in one run or the other) nor faster
TF32_ROUNDING = "hardware"


def store(x, precision: str):
    """A float32 array (any layout) as the C-contiguous operand storage of ``precision``:
    float32 rounded to TF32, float16, or bfloat16 bits (uint16); one pass."""
    if precision == "tf32":
        return _TO_TF32(x) if TF32_ROUNDING == "nearest" else cp.ascontiguousarray(x)
    if precision == "fp16":
        return x.astype(cp.float16, order="C")
    return _TO_BF16(x)


def _store_complex(x, precision: str):
    """A complex64 array (any layout) as C-contiguous TF32-rounded complex64 ("tf32" only)."""
    x = cp.ascontiguousarray(x)
    if TF32_ROUNDING != "nearest":
        return x
    return _TO_TF32(x.view(np.float32)).view(np.complex64)


def gemm(a, b, precision: str, out_dtype) -> Any:
    """C[nb, nl, nr] = A[nb, nl, nk] @ B[nb, nk, nr] of float32 or complex64 arrays (any
    layout) at ``precision`` ("tf32", "bf16" or "fp16"), a C-contiguous ``out_dtype`` array."""
    out_dtype = np.dtype(out_dtype)
    if out_dtype.kind != "c":
        return stored_gemm(store(a, precision), store(b, precision), precision, out_dtype)
    if precision == "tf32":
        return stored_gemm(
            _store_complex(a, precision), _store_complex(b, precision), precision, out_dtype
        )
    # one real GEMM: [[Ar, -Ai], [Ai, Ar]] @ [[Br], [Bi]] = [[Cr], [Ci]], the blocks written
    # straight into the half-precision storage
    nb, nl, nk = a.shape
    nr = b.shape[2]
    sdt = np.float16 if precision == "fp16" else np.uint16
    big_a = cp.empty((nb, 2 * nl, 2 * nk), sdt)
    big_b = cp.empty((nb, 2 * nk, nr), sdt)
    ar, ai, br, bi = a.real, a.imag, b.real, b.imag
    for dst, src in (
        (big_a[:, :nl, :nk], ar),
        (big_a[:, :nl, nk:], -ai),
        (big_a[:, nl:, :nk], ai),
        (big_a[:, nl:, nk:], ar),
        (big_b[:, :nk], br),
        (big_b[:, nk:], bi),
    ):
        if precision == "fp16":
            dst[...] = src
        else:
            _TO_BF16(src, dst)
    c = stored_gemm(big_a, big_b, precision, np.dtype(np.float32))
    out = cp.empty((nb, nl, nr), out_dtype)
    parts = out.view(np.float32).reshape(nb, nl, nr, 2)
    parts[..., 0] = c[:, :nl]
    parts[..., 1] = c[:, nl:]
    return out


def stored_gemm(a, b, precision: str, out_dtype) -> Any:
    """The GEMM of operands already in ``precision``'s storage (``store``), C-contiguous."""
    if precision == "tf32":
        t = _C_32F if out_dtype.kind == "c" else _R_32F
        return _strided_gemm(a, b, t, t, _COMPUTE_32F_FAST_TF32, out_dtype)
    htype = _R_16F if precision == "fp16" else _R_16BF
    return _strided_gemm(a, b, htype, _R_32F, _COMPUTE_32F, out_dtype)


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
        a, b = gemm_operands(g, a, b, dt)
        a_mat, b_mat = (g.nb, g.nl, g.nk), (g.nb, g.nk, g.nr)
        if dt.kind == "c" and precision != "tf32":  # the real block GEMM (gemm)
            a, b = cp.ascontiguousarray(a), cp.ascontiguousarray(b)
            c = gemm(a.reshape(a_mat), b.reshape(b_mat), precision, dt)
        elif dt.kind == "c":
            a, b = _store_complex(a, precision), _store_complex(b, precision)
            c = stored_gemm(a.reshape(a_mat), b.reshape(b_mat), precision, dt)
        else:  # transposed and converted in one pass each
            a, b = store(a, precision), store(b, precision)
            c = stored_gemm(a.reshape(a_mat), b.reshape(b_mat), precision, dt)
        c = c.reshape(g.c_shape)
        return c if perm_c is None else c.transpose(perm_c)

    return run


__all__ = ["TF32_ROUNDING", "gemm", "lowered_contract", "store", "stored_gemm"]
