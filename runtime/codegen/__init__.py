"""Elementwise code generation, in one place: a FUSED region's program (graph/ops/fused.py:
steps ``(op, attrs, (("in", i) | ("step", j), ...))``) written in each backend's dialect.

    numexpr.py   one numexpr expression                 CPU, small regions of several ops
    ufuncs.py    a straight line of NumPy ufunc calls   CPU, the smallest regions; each chunk
                                                        of a big region (cpu_fused.py)
    cuda.py      a CuPy ElementwiseKernel body          CUDA and ROCm
    opencl.py    an OpenCL C kernel                     OpenCL (and the expressions its other
                                                        kernels build on)

What a region may hold is decided here too, as data the fusion pass reads
(``passes.fuse_elementwise.FusionLimits``; the pass owns no templates and imports no runtime):
every backend fuses the ops and dtypes that numexpr computes exactly as NumPy does, within
numexpr's caps (``PORTABLE``), and the CPU lets a region over ``ufuncs.BIG_REGION`` elements take
``ufuncs.BIG_MAX_OPS`` ops with any number of inputs (``CPU``); CUDA and ROCm let a region over
``GPU_BIG_REGION`` elements take as many ops with up to ``MAX_INPUTS`` inputs (``GPU``: one
generated kernel, its inputs kernel parameters). Each backend carries its limits
as ``fusion``; ``LIMITS`` holds them by device kind, registered with the pass at import for
graphs whose options name a ``target`` device.
"""

from __future__ import annotations

import dataclasses

from tenloom.graph.node import Node
from tenloom.passes.fuse_elementwise import FusionLimits, region_dtype, register_fusion_limits
from tenloom.runtime.codegen import numexpr
from tenloom.runtime.codegen.numexpr import MAX_CHARS, MAX_INPUTS, MAX_OPS, expression
from tenloom.runtime.codegen.ufuncs import BIG_MAX_OPS, BIG_REGION

PORTABLE = FusionLimits(
    ops=frozenset(numexpr.TEMPLATES),
    dtypes=numexpr.ARITH,
    float_only=numexpr.FLOAT_ONLY,
    not_complex=numexpr.NOT_COMPLEX,
    complex_only=numexpr.COMPLEX_ONLY,
    bool_only=numexpr.BOOL_ONLY,
    max_ops=MAX_OPS,
    max_inputs=MAX_INPUTS,
    max_size=MAX_CHARS,
    source_size=numexpr.expression_size,
)
CPU = dataclasses.replace(PORTABLE, big_elements=BIG_REGION, big_max_ops=BIG_MAX_OPS)
# issue 23: on a GPU a region over GPU_BIG_REGION elements is one generated kernel of up to
# BIG_MAX_OPS ops (cuda.py writes any program; the numexpr caps are the CPU's), so a long chain
# reads and writes memory once instead of once per 48 ops; smaller regions keep the portable
# caps, whose short kernels compile fast and are shared by repeated blocks
GPU_BIG_REGION = 1 << 16
GPU = dataclasses.replace(
    PORTABLE, big_elements=GPU_BIG_REGION, big_max_ops=BIG_MAX_OPS, big_max_inputs=MAX_INPUTS
)

# device kind -> limits (None: a graph optimized for no particular device)
LIMITS: dict[str | None, FusionLimits] = {
    None: PORTABLE,
    "cpu": CPU,
    "cuda": GPU,
    "rocm": GPU,
    "opencl": PORTABLE,
}
for _kind, _limits in LIMITS.items():
    register_fusion_limits(_kind, _limits)


def fusable(node: Node) -> bool:
    """Whether the fusion pass would put ``node`` in a fused region on any backend (what the
    kernel generators know exactly: a loaded file's regions are checked against it)."""
    return region_dtype(node, PORTABLE) is not None


__all__ = [
    "BIG_MAX_OPS",
    "GPU",
    "GPU_BIG_REGION",
    "BIG_REGION",
    "CPU",
    "LIMITS",
    "MAX_CHARS",
    "MAX_INPUTS",
    "MAX_OPS",
    "PORTABLE",
    "expression",
    "fusable",
]
