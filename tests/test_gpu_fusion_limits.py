"""issue 23: the fusion limits CUDA and ROCm register (runtime/codegen ``GPU``): a region over
``GPU_BIG_REGION`` elements may hold up to ``BIG_MAX_OPS`` ops (one generated kernel), with at
most ``MAX_INPUTS`` inputs (a kernel's parameters are bounded); smaller regions keep the
portable caps. Checked on the pass alone (no GPU needed), results against NumPy."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest
from tenloom.graph.ops import Op
from tenloom.passes.options import Options
from tenloom.runtime import session
from tenloom.runtime.codegen import BIG_MAX_OPS, GPU, GPU_BIG_REGION, LIMITS, MAX_INPUTS, MAX_OPS

import tenloom as tl


def chain_ops(xp, y, x, blocks: int):
    """benchmarks/workloads.py's 2000-op chain (8 ops a block), the one the benchmarks time."""
    sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "benchmarks"))
    from workloads import chain_ops as chain

    return chain(xp, y, x, blocks)


def _fused(outputs, limits):
    graph = session.build_graph(outputs)
    g = session.optimize(graph, Options(fusion=limits)).graph
    return [n for n in g.order if n.op is Op.FUSED]


def test_cuda_and_rocm_register_the_gpu_limits():
    assert LIMITS["cuda"] is GPU and LIMITS["rocm"] is GPU
    assert GPU.big_elements == GPU_BIG_REGION and GPU.big_max_ops == BIG_MAX_OPS
    assert GPU.big_max_inputs == MAX_INPUTS
    from tenloom.passes.fuse_elementwise import LIMITS as registered

    assert registered["cuda"].big_elements == GPU_BIG_REGION


@pytest.mark.parametrize("n, regions", [(GPU_BIG_REGION, 1), (1000, None)])
def test_a_2000_op_chain_is_one_region_when_big(n, regions):
    x = np.random.default_rng(0).random(n).astype(np.float32)
    t = tl.asarray(x)
    y = chain_ops(tl, t, t, 250)
    fused = _fused([y], GPU)
    ops = [len(f.attrs.program) for f in fused]
    if regions is not None:
        assert len(fused) == regions and ops[0] == 2000
    else:  # the portable cap
        assert max(ops) <= MAX_OPS and len(fused) >= 2000 // MAX_OPS
    np.testing.assert_allclose(y.evaluate(), chain_ops(np, x, x, 250), rtol=1e-5)


def test_a_big_region_takes_at_most_max_inputs_inputs():
    n = GPU_BIG_REGION
    xs = [tl.asarray(np.full(n, k + 1.0)) for k in range(3 * MAX_INPUTS)]
    total = xs[0]
    for x in xs[1:]:
        total = total + x * 0.5
    fused = _fused([total], GPU)
    assert fused and all(len(f.inputs) <= MAX_INPUTS for f in fused)
    assert sum(len(f.attrs.program) for f in fused) >= 2 * (3 * MAX_INPUTS - 1) - len(fused)
    expect = 1.0 + sum(0.5 * (k + 1.0) for k in range(1, 3 * MAX_INPUTS))
    np.testing.assert_allclose(total.evaluate(), np.full(n, expect))


def test_the_cpu_big_regions_still_take_any_number_of_inputs():
    cpu = LIMITS["cpu"]
    assert cpu.big_max_inputs is None
    n = cpu.big_elements
    xs = [tl.asarray(np.full(n, k + 1.0)) for k in range(3 * MAX_INPUTS)]
    total = xs[0]
    for x in xs[1:]:
        total = total + x
    fused = _fused([total], cpu)
    assert len(fused) == 1 and len(fused[0].inputs) == 3 * MAX_INPUTS


def test_a_big_region_over_the_inputs_cap_is_cut_in_one_pass(monkeypatch):
    """A Horner polynomial whose every step brings a new scalar input: each big region is cut
    back to its longest prefix within the inputs cap at once, not one member at a time (which
    rebuilt the program per member: minutes at 2000 steps)."""
    from tenloom.passes import fuse_elementwise as fe

    calls = []
    real = fe._program
    monkeypatch.setattr(fe, "_program", lambda *a: calls.append(1) or real(*a))
    xs = np.random.default_rng(1).random(GPU_BIG_REGION)
    x = tl.asarray(xs)
    y, want = x, xs.copy()
    for k in range(400):
        y = y * x + (k + 0.5)
        want = want * xs + (k + 0.5)
    fused = _fused([y], GPU)
    assert fused and all(len(f.inputs) <= MAX_INPUTS for f in fused)
    assert len(calls) <= 2 * len(fused) + 2, (len(calls), len(fused))
    np.testing.assert_allclose(y.evaluate(), want, rtol=1e-12)
