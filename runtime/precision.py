"""``precision=``: the arithmetic of contractions, JAX's ``precision`` as the model.

    "highest"  every contraction in its own dtype (the default; bit-identical to no option)
    "tf32"     float32 and complex64 contractions as TF32 tensor-core GEMMs (cuBLAS's TF32
               math: operands with a 10-bit mantissa, float32 accumulation)
    "bf16"     float32 and complex64 contraction operands stored as bfloat16 (8-bit mantissa,
               float32's range), float32 accumulation, the result in float32 / complex64
    "fp16"     the same with float16 operands (10-bit mantissa, values beyond 65504 overflow)

Only CUDA runs anything but "highest" (runtime/backends/cuda_precision.py): the CPU and OpenCL
backends refuse it, before any work, naming the device. What is lowered: CONTRACT nodes (every
pairwise contraction the order search makes, sliced networks' slices included) whose dtype is
float32 or complex64 and that sum over at least one index. Contractions of float64,
complex128, float16 and integers, products that sum nothing (outer and Hadamard products),
leftover EINSUM nodes (only without the order pass) and every non-contraction op keep their
dtype and arithmetic.

The precision is a run setting, not a graph rewrite: no cast node is inserted, the optimized
graph and its cache key (``Options.pass_key``) are the same for every precision, and the CUDA
contraction kernel reads ``PRECISION`` (a context variable, carried into the scheduler's and
the sliced runner's worker threads like runtime/determinism.py's) on each call.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from tenloom.graph.errors import OptionError

PRECISIONS: tuple[str, ...] = ("highest", "tf32", "bf16", "fp16")
HIGHEST = "highest"
# the device kinds that run lowered contractions (CuPy's cuBLAS; ROCm's hipBLAS too, untested)
LOWERING_KINDS = frozenset({"cuda", "rocm"})
# the dtypes whose contractions are lowered
LOWERED_DTYPES = (np.dtype(np.float32), np.dtype(np.complex64))

PRECISION: contextvars.ContextVar[str] = contextvars.ContextVar(
    "tenloom_precision", default=HIGHEST
)

# The documented bound of max|lowered - float64| / max|float64| (over the result's elements)
# of a contraction of up to three chained GEMMs of inner sizes up to ~4096 on operands of one
# sign-mixed scale (tests/test_precision.py checks it). Each operand loses its mantissa beyond
# p bits (tf32 and fp16: p = 10, about 5e-4 relative; bf16: p = 7, about 4e-3), a relative
# error that float32 accumulation keeps per product and that chaining adds up; TF32 inputs may
# be truncated rather than rounded (up to 1e-3 per operand). fp16 also overflows beyond 65504
# and flushes below 6e-8: scaled data stays far inside. Measured errors per workload are in
# benchmarks/precision.py's output.
TOLERANCE = {"highest": 1e-5, "tf32": 5e-3, "fp16": 5e-3, "bf16": 4e-2}


@contextlib.contextmanager
def precision_mode(precision: str) -> Iterator[None]:
    """Run the enclosed work (and the workers it starts) at ``precision``."""
    token = PRECISION.set(precision)
    try:
        yield
    finally:
        PRECISION.reset(token)


def check_devices(caller: str, precision: str, names: Sequence[str]) -> None:
    """OptionError, before any work, where a device of the run cannot lower contractions:
    anything but "highest" needs a CUDA (or ROCm) device."""
    if precision == HIGHEST:
        return
    for name in names:
        kind = name.partition(":")[0] if isinstance(name, str) else None
        if kind not in LOWERING_KINDS:
            raise OptionError(
                f"{caller}: precision={precision!r} is not available on device {name!r}: "
                f"only CUDA devices run {precision} contractions (tensor cores through cuBLAS); "
                f"on {name!r} use precision='highest' (the default), or device='cuda:0'"
            )


def lowered(dtype: Any, summed: int) -> bool:
    """Whether a contraction of ``dtype`` that sums ``summed`` elements per output is lowered
    (at a precision other than "highest")."""
    return summed > 1 and np.dtype(dtype) in LOWERED_DTYPES


def describe(precision: str, dtype: Any) -> str:
    """How a lowered contraction of ``dtype`` runs at ``precision`` (explain's words)."""
    if precision == "tf32":
        return "TF32 tensor-core GEMM, float32 accumulation"
    half = "bfloat16" if precision == "bf16" else "float16"
    how = f"{half} operands, float32 accumulation, result in {np.dtype(dtype)}"
    if np.dtype(dtype).kind == "c":
        how += " (real block GEMM of the real and imaginary parts)"
    return how


def summary(graph: Any, precision: str) -> list[tuple[int, str, str]]:
    """(count, what, how) of the graph's contractions at ``precision``: explain's lines."""
    from tenloom.graph.ops import Op
    from tenloom.graph.ops.contract import contract_layout

    counts: dict[tuple[str, str], int] = {}

    def add(what: str, how: str) -> None:
        counts[(what, how)] = counts.get((what, how), 0) + 1

    for node in graph.order:
        if node.op is Op.CONTRACT:
            a, b = node.inputs
            nk = contract_layout(node.attrs, a.shape, b.shape).nk
            what = f"{node.dtype} contraction"
            if precision == HIGHEST:
                add(what, "exact (highest)")
            elif lowered(node.dtype, nk):
                add(what, describe(precision, node.dtype))
            elif nk <= 1 and np.dtype(node.dtype) in LOWERED_DTYPES:
                add(what, "exact (sums over nothing: a broadcast product)")
            else:
                add(what, "exact (only float32 and complex64 contractions are lowered)")
        elif node.op is Op.SLICED:
            what = f"{node.dtype} sliced network"
            if precision != HIGHEST and np.dtype(node.dtype) in LOWERED_DTYPES:
                add(what, "its slices' contractions: " + describe(precision, node.dtype))
            else:
                add(what, "exact")
        elif node.op is Op.EINSUM and len(node.inputs) >= 2:
            add(f"{node.dtype} einsum", "exact (not split into pairwise contractions)")
    return [(n, what, how) for (what, how), n in counts.items()]


__all__ = [
    "HIGHEST",
    "PRECISION",
    "PRECISIONS",
    "TOLERANCE",
    "check_devices",
    "precision_mode",
    "summary",
]
