"""Where W8's time goes: the forward and the value+grad of W2 and W3 taken apart.

    python benchmarks/grad_breakdown.py [--calls 20] [--only W2]

For each workload (the arrays and networks of ``grad_ratio.py``), the forward (``value``) and
the value+grad (``value, *grads``) are evaluated ``--calls`` times each, alternately, and every
call's time is split into:

- ``kernels``: inside the compiled program's kernels (each ``Step.kernel`` wrapped with a clock);
- ``loop``: the executor's own loop around them (``_run_sequential`` minus its kernels);
- ``front+outputs``: the rest of ``tl.evaluate`` (graph lookup, binding, output copies).

Then each kernel is run again on its own inputs (hot caches): two passes of 10 calls over all
the kernels (forward and value+grad in turn), the best call counting, with buffers from an
arena as in a run. The kernels are
summed by class (op, GEMM dims ``batch x left x contracted x right`` for contractions, shape for
copies) in context (the mean over the calls) and hot. ``loop`` holds the executor's own work per
step: the clocks' calls (about 0.3 us per kernel), freeing values and handing buffers back.
Writes benchmarks/results/grad_breakdown.json (``--only`` replaces only that workload's part).
Compare the forward and the value+grad of one run with each other, not with ``grad_ratio.py``.
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import time
from math import prod

import grad_ratio as GR
import numpy as np
from tenloom.runtime import backends, buffers, executor
from tenloom.runtime import evaluate as ev

import tenloom as tl


def kernel_class(node) -> str:
    if node.op.name == "CONTRACT":
        ta, tb, _out, *groups = node.attrs
        sz = dict(zip(ta, node.inputs[0].shape))
        sz.update(zip(tb, node.inputs[1].shape))
        dims = "x".join(str(prod(sz[x] for x in grp)) for grp in groups)
        return f"CONTRACT {dims}"
    return f"{node.op.name} {node.shape}"


class Instrumented:
    """A compiled program whose kernels and executor loop are clocked while it is active."""

    def __init__(self, outs: tuple) -> None:
        self.outs = outs
        tl.evaluate(*outs), tl.evaluate(*outs)
        self.prog = executor.program_for(
            ev.optimize_graph(ev.build_graph(outs), {}), backends.get_backend("cpu", 0)
        )
        self.kernels = [s.kernel for s in self.prog.steps]
        self.per_step = [0.0] * len(self.prog.steps)
        self.best = [float("inf")] * len(self.prog.steps)
        self.values: list | None = None
        self.spent = {"total": 0.0, "run": 0.0, "kernels": 0.0, "calls": 0}

    def _clocked(self, kernel, k):
        spent, per_step = self.spent, self.per_step

        def call(*args):
            t0 = time.perf_counter()
            value = kernel(*args)
            dt = time.perf_counter() - t0
            spent["kernels"] += dt
            per_step[k] += dt
            return value

        return call

    def call(self) -> None:
        """One clocked ``tl.evaluate`` (in context)."""
        sequential, spent = executor._run_sequential, self.spent

        def timed_run(*args):
            t0 = time.perf_counter()
            try:
                return sequential(*args)
            finally:
                spent["run"] += time.perf_counter() - t0

        try:
            for k, step in enumerate(self.prog.steps):  # run_steps holds the same Steps
                if step.kernel is not None:
                    step.kernel = self._clocked(step.kernel, k)
            executor._run_sequential = timed_run
            t0 = time.perf_counter()
            tl.evaluate(*self.outs)
            spent["total"] += time.perf_counter() - t0
            spent["calls"] += 1
        finally:
            executor._run_sequential = sequential
            for step, kernel in zip(self.prog.steps, self.kernels):
                step.kernel = kernel

    def hot_pass(self, repeats: int = 10) -> None:
        """Every kernel ``repeats`` times on the inputs it had in a run (hot caches), its best
        call kept. Results and temporaries come from an arena and go back to it, as in a run
        (a fresh allocation per call would time page faults)."""
        if self.values is None:  # every step's value, from one more run
            self.values = vals = list(self.prog.slots)
            for step in self.prog.steps:
                if step.kernel is not None:
                    vals[step.out] = step.kernel(*[vals[i] for i in step.inputs])
        vals = self.values
        arena = buffers.Arena()
        token = buffers.CURRENT.set(arena)
        try:
            for k, step in enumerate(self.prog.steps):
                if step.kernel is None:
                    continue
                args = [vals[i] for i in step.inputs]
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    value = step.kernel(*args)
                    self.best[k] = min(self.best[k], time.perf_counter() - t0)
                    if isinstance(value, np.ndarray):
                        arena.give(buffers.root(value))
        finally:
            buffers.CURRENT.reset(token)

    def summary(self) -> dict:
        n = self.spent["calls"]
        classes: dict = collections.defaultdict(lambda: [0, 0.0, 0.0])
        for step, t, hot in zip(self.prog.steps, self.per_step, self.best):
            if step.kernel is not None:
                c = classes[kernel_class(step.node)]
                c[0] += 1
                c[1] += t / n
                c[2] += hot
        return {
            "total_s": self.spent["total"] / n,
            "kernels_s": self.spent["kernels"] / n,
            "loop_s": (self.spent["run"] - self.spent["kernels"]) / n,
            "front_and_outputs_s": (self.spent["total"] - self.spent["run"]) / n,
            "steps": sum(s.kernel is not None for s in self.prog.steps),
            "kernels_hot_s": sum(c[2] for c in classes.values()),
            "classes": {
                k: {"n": m, "in_context_s": ctx, "hot_s": hot}
                for k, (m, ctx, hot) in sorted(classes.items(), key=lambda kv: -kv[1][1])
            },
        }


def breakdown(value, grads, calls: int) -> dict:
    """The forward and the value+grad, called alternately (forward, value+grad, ...) so that
    the machine's drift hits both; then their hot passes, alternately too."""
    runs = {"forward": Instrumented((value,)), "value_and_grad": Instrumented((value, *grads))}
    for _ in range(calls):
        for r in runs.values():
            r.call()
    for _ in range(2):
        for r in runs.values():
            r.hot_pass()
    return {what: r.summary() for what, r in runs.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--only", choices=("W2", "W3"))
    args = p.parse_args()
    workloads = {"W3": lambda: GR.network(*GR.lattice()), "W2": lambda: GR.mps_sites(100, 64)}
    out = pathlib.Path(__file__).parent / "results" / "grad_breakdown.json"
    # --only replaces that workload's figures and keeps the other's
    results = json.loads(out.read_text()) if args.only and out.exists() else {}
    for name, make in workloads.items():
        if args.only and name != args.only:
            continue
        value, grads = make().build()
        results[name] = breakdown(value, grads, args.calls)
        for what, r in results[name].items():
            ms = {k: v * 1e3 for k, v in r.items() if k.endswith("_s")}
            print(
                f"{name} {what:14s} {ms['total_s']:8.2f} ms: kernels {ms['kernels_s']:.2f} "
                f"(hot {ms['kernels_hot_s']:.2f}), loop {ms['loop_s']:.2f}, front+outputs "
                f"{ms['front_and_outputs_s']:.2f}; {r['steps']} steps"
            )
            for k, c in list(r["classes"].items())[:8]:
                print(
                    f"    {c['n']:4d} x {k:34s} in context {c['in_context_s'] / c['n'] * 1e6:7.1f}"
                    f" us, hot {c['hot_s'] / c['n'] * 1e6:7.1f} us"
                )
        f, b = results[name]["forward"], results[name]["value_and_grad"]
        print(
            f"{name} value+grad / forward: total {b['total_s'] / f['total_s']:.2f}, kernels in "
            f"context {b['kernels_s'] / f['kernels_s']:.2f}, kernels hot "
            f"{b['kernels_hot_s'] / f['kernels_hot_s']:.2f}"
        )
    out.write_text(json.dumps(results, indent=1) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
