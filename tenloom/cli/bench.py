"""``tenloom bench``: a few quick CPU benchmarks that ship with the package.

- *plan overhead*: what calling a compiled plan costs over running its kernels bare, for plans
  of about 1, 10, 100 and 1000 nodes on tiny arrays (so the kernels themselves take well under a
  microsecond or two), fitted as ``a + b * nodes`` (``benchmarks/plan_overhead.py`` runs the same
  measurement longer and writes the results file);
- *MPS/MPO*: the ``tenloom demo`` workload, evaluated, against a hand-written NumPy sweep;
- *elementwise chain*: a 200-op chain on 100,000 elements (one fused kernel) against NumPy
  running the ops one by one.

The bare kernels are the plan's own compiled program (``Plan.program``): each step's
``Step.kernel`` called in a plain Python loop over preset slots, with no binding of the inputs,
no checks, no freeing and no copying of the outputs. A hand-written NumPy loop doing the same
ops is timed as well, to show what the kernel wrappers themselves cost.
"""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

import tenloom as tl
from tenloom.cli.demo import median_time
from tenloom.graph.ops import Op
from tenloom.passes import DEFAULT_PIPELINE

FAMILIES = ("elementwise", "matmul")
SIZES = (1, 10, 100, 1000)  # ops (kernel nodes) per plan
GOAL = (20.0, 3.0)  # overhead <= a + b * nodes, microseconds
TO_RESOLVE = (50.0, 10.0)
# fusion off: every op stays one node and one kernel call
UNFUSED = tuple(p for p in DEFAULT_PIPELINE if p != "fuse_elementwise")


@dataclass
class OverheadPoint:
    """One plan's timings, microseconds per call (best round)."""

    family: str
    ops: int  # nodes that run a kernel
    nodes: int  # all nodes of the plan (leaves included; the executor walks them too)
    plan_us: float
    bare_us: float
    numpy_us: float

    @property
    def overhead_us(self) -> float:
        return self.plan_us - self.bare_us

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "overhead_us": self.overhead_us}


def overhead_case(family: str, ops: int, seed: int = 0):
    """(plan, input arrays, hand-written NumPy function) for a chain of ``ops`` unfused ops:
    ``elementwise`` alternates sin and cos on 8 float64 numbers; ``matmul`` alternates a
    product with a constant 4x4 matrix and tanh, starting with the product."""
    rng = np.random.default_rng(seed)
    if family == "elementwise":
        arr = rng.standard_normal(8)
        x = tl.placeholder(arr.shape, name="x")
        y, fns = x, (np.sin, np.cos)
        for k in range(ops):
            y = tl.sin(y) if k % 2 == 0 else tl.cos(y)

        def numpy_fn(a: np.ndarray) -> np.ndarray:
            for k in range(ops):
                a = fns[k % 2](a)
            return a

    elif family == "matmul":
        arr = rng.standard_normal((4, 4))
        mats = [rng.standard_normal((4, 4)) / 2 for _ in range((ops + 1) // 2)]
        x = tl.placeholder(arr.shape, name="x")
        y = x
        for k in range(ops):
            y = y @ tl.asarray(mats[k // 2]) if k % 2 == 0 else tl.tanh(y)
        dot, tanh = np.dot, np.tanh

        def numpy_fn(a: np.ndarray) -> np.ndarray:
            for k in range(ops):
                a = dot(a, mats[k // 2]) if k % 2 == 0 else tanh(a)
            return a

    else:
        raise ValueError(f"unknown family {family!r}; valid: {', '.join(FAMILIES)}")
    plan = tl.compile([y], inputs=[x], passes=UNFUSED, optimize="greedy")
    return plan, [arr], numpy_fn


def bare_kernels(plan: Any, arrays: Sequence[np.ndarray]) -> Callable[[], list]:
    """A function running ``plan``'s compiled steps directly: each ``Step.kernel`` on preset
    slots, in order, with no binding, checking, freeing or output copies."""
    prog = plan.program
    feed = {id(p): a for p, a in zip(plan.inputs, arrays)}
    vals: list[Any] = [None] * prog.n_slots
    steps = []
    for s in prog.steps:
        if s.kernel is None:
            vals[s.out] = s.node.attrs.constant.value if s.node.op is Op.CONST else feed[id(s.node)]
        else:
            steps.append((s.kernel, s.inputs, s.out))
    outputs = prog.outputs

    def run() -> list:
        for kernel, ins, out in steps:
            vals[out] = kernel(*[vals[i] for i in ins])
        return [vals[k] for k in outputs]

    return run


def best_times(fns: dict[str, Callable[[], Any]], min_time: float, rounds: int) -> dict[str, float]:
    """Seconds per call of each function: the best of ``rounds`` rounds (run in turn, so
    drift hits all alike), each round calling it for about ``min_time`` seconds; the cyclic GC
    is off while timing, as in ``timeit``."""
    reps = {}
    for name, fn in fns.items():
        t0 = time.perf_counter()
        fn()
        reps[name] = max(1, int(min_time / max(time.perf_counter() - t0, 1e-7)))
    best = dict.fromkeys(fns, math.inf)
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(rounds):
            for name, fn in fns.items():
                n = reps[name]
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                best[name] = min(best[name], (time.perf_counter() - t0) / n)
    finally:
        if enabled:
            gc.enable()
    return best


def measure_overhead(
    family: str, ops: int, min_time: float = 0.05, rounds: int = 5
) -> OverheadPoint:
    plan, arrays, numpy_fn = overhead_case(family, ops)
    bare = bare_kernels(plan, arrays)
    (want,) = plan(*arrays)
    np.testing.assert_allclose(bare()[0], want, rtol=1e-12)
    np.testing.assert_allclose(numpy_fn(*arrays), want, rtol=1e-12)
    t = best_times(
        {"plan": lambda: plan(*arrays), "bare": bare, "numpy": lambda: numpy_fn(*arrays)},
        min_time,
        rounds,
    )
    return OverheadPoint(
        family, ops, len(plan.optimized), t["plan"] * 1e6, t["bare"] * 1e6, t["numpy"] * 1e6
    )


def fit_overhead(points: Sequence[OverheadPoint]) -> tuple[float, float]:
    """(a, b) of ``overhead = a + b * nodes`` by weighted least squares. A point's timing noise
    grows with the whole call's time, not with the overhead alone, so each point is weighted
    by 1 / plan time: the small plans fix ``a`` and the big ones fix ``b``."""
    n = np.array([p.nodes for p in points], dtype=float)
    y = np.array([p.overhead_us for p in points], dtype=float)
    w = 1.0 / np.array([p.plan_us for p in points], dtype=float)
    (a, b), *_ = np.linalg.lstsq(np.stack([w, w * n], axis=1), w * y, rcond=None)
    return float(a), float(b)


def within(points: Sequence[OverheadPoint], bound: tuple[float, float]) -> bool:
    """Whether every measured plan's overhead is within ``bound[0] + bound[1] * nodes``."""
    return all(p.overhead_us <= bound[0] + bound[1] * p.nodes for p in points)


def verdict(a: float, b: float) -> str:
    if a <= GOAL[0] and b <= GOAL[1]:
        return f"meets the goal (<= {GOAL[0]:g} us + {GOAL[1]:g} us/node)"
    if a <= TO_RESOLVE[0] and b <= TO_RESOLVE[1]:
        return (
            f"misses the goal (<= {GOAL[0]:g} us + {GOAL[1]:g} us/node) but is within "
            f"the bound to resolve (<= {TO_RESOLVE[0]:g} us + {TO_RESOLVE[1]:g} us/node)"
        )
    return f"misses the bound to resolve (<= {TO_RESOLVE[0]:g} us + {TO_RESOLVE[1]:g} us/node)"


def run_overhead(
    families: Sequence[str] = FAMILIES,
    sizes: Sequence[int] = SIZES,
    min_time: float = 0.05,
    rounds: int = 5,
    out: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Measure and print the plan overhead; returns the points and the fits as plain data."""
    points: list[OverheadPoint] = []
    out(
        f"{'plan':<12} {'ops':>5} {'nodes':>6} {'plan us':>10} {'bare us':>10} "
        f"{'overhead':>9} {'numpy us':>9}"
    )
    for family in families:
        for ops in sizes:
            p = measure_overhead(family, ops, min_time, rounds)
            points.append(p)
            out(
                f"{family:<12} {p.ops:>5} {p.nodes:>6} {p.plan_us:>10.1f} {p.bare_us:>10.1f} "
                f"{p.overhead_us:>9.1f} {p.numpy_us:>9.1f}"
            )
    groups = {f: [p for p in points if p.family == f] for f in families}
    if len(families) > 1:
        groups["all"] = points
    fits = {}
    for name, group in groups.items():
        if len(group) < 2:
            continue
        a, b = fit_overhead(group)
        fits[name] = {
            "a_us": a,
            "b_us_per_node": b,
            "verdict": verdict(a, b),
            "every_point_within_goal": within(group, GOAL),
        }
        each = "every plan within it" if within(group, GOAL) else "NOT every plan within it"
        out(f"fit {name:<12} overhead = {a:.2f} us + {b:.3f} us/node: {verdict(a, b)}; {each}")
    return {"points": [p.as_dict() for p in points], "fits": fits}


# ---- the other quick comparisons -------------------------------------------------------------


def mps_mpo_vs_numpy(repeats: int = 5) -> dict[str, float]:
    """The demo's workload (L=40, chi=32), evaluated, against the NumPy sweep."""
    from tenloom.cli.demo import expectation_lazy, expectation_numpy, make_workload

    mps, mpo = make_workload(40, 32)
    value = expectation_lazy(mps, mpo)
    ours = value.evaluate()  # optimizes once; later calls hit the cache
    ref = expectation_numpy(mps, mpo)
    np.testing.assert_allclose(ours, ref, rtol=1e-9)
    t_ours = median_time(value.evaluate, repeats)
    t_np = median_time(lambda: expectation_numpy(mps, mpo), repeats)
    return {"tenloom_ms": t_ours * 1e3, "numpy_ms": t_np * 1e3}


def elementwise_vs_numpy(repeats: int = 5, ops: int = 200, size: int = 100_000):
    """A chain of ``ops`` sin/mul/add ops on ``size`` float64 numbers, compiled (one fused
    kernel on CPU), against NumPy running the ops one by one."""
    arr = np.random.default_rng(0).standard_normal(size)
    x = tl.placeholder(arr.shape, name="x")

    def chain(y, sin, k=ops):
        for i in range(k // 2):
            y = sin(y) * 0.9 + 0.1 if i % 2 == 0 else y * 1.01 - 0.05
        return y

    plan = tl.compile([chain(x, tl.sin)], inputs=[x])
    (ours,) = plan(arr)
    np.testing.assert_allclose(ours, chain(arr, np.sin), rtol=1e-9, atol=1e-12)
    t_ours = median_time(lambda: plan(arr), repeats)
    t_np = median_time(lambda: chain(arr, np.sin), repeats)
    return {"tenloom_ms": t_ours * 1e3, "numpy_ms": t_np * 1e3}


def run_quick(out: Callable[[str], None] = print) -> dict[str, Any]:
    """The quick set: plan overhead (shorter timings than the benchmark script), then the two
    NumPy comparisons. Takes a few seconds on two cores."""
    t0 = time.perf_counter()
    out("plan overhead over the bare kernels (CPU, microseconds per call, best of 3 rounds)")
    results: dict[str, Any] = {"plan_overhead": run_overhead(min_time=0.01, rounds=3, out=out)}
    out("")
    out(f"{'workload':<44} {'tenloom ms':>11} {'numpy ms':>9} {'ratio':>6}")
    for name, fn in (
        ("MPS/MPO <psi|H|psi>, L=40 chi=32 (the demo)", mps_mpo_vs_numpy),
        ("200-op elementwise chain, 1e5 elements", elementwise_vs_numpy),
    ):
        r = fn()
        r["ratio"] = r["tenloom_ms"] / r["numpy_ms"]
        results[name] = r
        out(f"{name:<44} {r['tenloom_ms']:>11.2f} {r['numpy_ms']:>9.2f} {r['ratio']:>6.2f}")
    out("ratio = tenloom / numpy (below 1: tenloom is faster); medians of 5 calls")
    out(f"took {time.perf_counter() - t0:.1f} s")
    return results
