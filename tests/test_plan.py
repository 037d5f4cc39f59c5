"""Compiled plans and @function."""

from __future__ import annotations

import numpy as np
import pytest
from tenloom.passes import contraction_order as co
from tenloom.runtime import evaluate as ev
from tenloom.runtime import plan as pl

import tenloom as tl


def test_plan_second_call_runs_no_trace_pass_or_search():
    x = tl.placeholder((8, 8), name="x")
    y = tl.placeholder((8, 8), name="y")
    out = tl.trace(x @ y @ x) + tl.sum(tl.tanh(x))
    plan = tl.compile([out], inputs=[x, y])
    searches, passes = co.SEARCHES["n"], ev.PASS_RUNS["n"]
    rng = np.random.default_rng(0)
    for _ in range(3):
        a, b = rng.standard_normal((8, 8)), rng.standard_normal((8, 8))
        (r,) = plan(a, b)
        np.testing.assert_allclose(r, np.trace(a @ b @ a) + np.tanh(a).sum())
    assert co.SEARCHES["n"] == searches and ev.PASS_RUNS["n"] == passes
    assert plan.cost.flops > 0 and plan.cost.madds > 0 and plan.cost.peak_bytes > 0
    assert "contract" in plan.dump()


def test_function_traces_once_per_signature_and_keeps_structure():
    @tl.function
    def f(a, b):
        return {"mm": a @ b, "s": (tl.sum(a), tl.sum(b))}

    before = pl.COUNTERS["traces"]
    a, b = np.ones((2, 3)), np.ones((3, 4))
    r1 = f(a, b)
    r2 = f(a * 2, b)
    assert pl.COUNTERS["traces"] == before + 1
    np.testing.assert_allclose(r2["mm"], 2 * a @ b)
    assert isinstance(r1["s"], tuple) and float(r1["s"][1]) == 12.0
    f(np.ones((3, 3)), np.ones((3, 3)))  # new signature: traced again
    assert pl.COUNTERS["traces"] == before + 2


def test_compile_errors():
    x = tl.placeholder((2,), name="x")
    z = tl.placeholder((2,), name="z")
    with pytest.raises(tl.TenloomError, match="'z'"):
        tl.compile([x + z], inputs=[x])
    with pytest.raises(tl.TenloomError, match="not a placeholder"):
        tl.compile([x * 2], inputs=[tl.asarray(np.ones(2))])
    plan = tl.compile(x * 2, inputs=[x])
    with pytest.raises(tl.ShapeError):
        plan(np.ones(3))
