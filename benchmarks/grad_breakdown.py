"""Where W8's time goes: the forward and the value+grad of W2 and W3 taken apart.

    python benchmarks/grad_breakdown.py [--calls 20] [--only W2]

For each workload (the arrays and networks of ``grad_ratio.py``), the forward (``value``) and
the value+grad (``value, *grads``) are evaluated ``--calls`` times each, and every call's time is
split into:

- ``kernels``: inside the compiled program's kernels (each ``Step.kernel`` wrapped with a clock);
- ``loop``: the executor's own loop around them (``_run_sequential`` minus its kernels);
- ``front+outputs``: the rest of ``tl.evaluate`` (graph lookup, binding, output copies).

Then each kernel is run again on its own inputs until its time settles (best of 20 calls: hot
caches; buffers come from an arena and go back to it, as in a run), and the kernels are summed
by class (op, GEMM dims ``batch x left x contracted x right`` for contractions, shape for
copies) in context and hot. Writes
benchmarks/results/grad_breakdown.json. The clocks add about 0.3 us per kernel; compare the two
runs with each other, not with ``grad_ratio.py``'s times.
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


def build(inputs, output, arrays):
    labels: dict = {}
    ts = [tl.asarray(a) for a in arrays]
    args: list = []
    for t, term in zip(ts, inputs):
        args += [t, [labels.setdefault(x, len(labels)) for x in term]]
    value = tl.einsum(*args, [labels[x] for x in output])
    return value, tl.grad(value, ts)


def kernel_class(node) -> str:
    if node.op.name == "CONTRACT":
        ta, tb, _out, *groups = node.attrs
        sz = dict(zip(ta, node.inputs[0].shape))
        sz.update(zip(tb, node.inputs[1].shape))
        dims = "x".join(str(prod(sz[x] for x in grp)) for grp in groups)
        return f"CONTRACT {dims}"
    return f"{node.op.name} {node.shape}"


def breakdown(outs: tuple, calls: int) -> dict:
    run = lambda: tl.evaluate(*outs)  # noqa: E731
    run(), run()
    prog = executor.program_for(
        ev.optimize_graph(ev.build_graph(outs), {}), backends.get_backend("cpu", 0)
    )
    spent = {"run": 0.0, "kernels": 0.0}
    per_step = [0.0] * len(prog.steps)

    def clocked(kernel, k):
        def call(*args):
            t0 = time.perf_counter()
            value = kernel(*args)
            dt = time.perf_counter() - t0
            spent["kernels"] += dt
            per_step[k] += dt
            return value

        return call

    kernels = [s.kernel for s in prog.steps]
    for k, step in enumerate(prog.steps):
        if step.kernel is not None:
            step.kernel = clocked(step.kernel, k)
    prog.__dict__.pop("run_steps", None)
    sequential = executor._run_sequential

    def timed_run(*args):
        t0 = time.perf_counter()
        try:
            return sequential(*args)
        finally:
            spent["run"] += time.perf_counter() - t0

    executor._run_sequential = timed_run
    try:
        run()
        spent["run"] = spent["kernels"] = 0.0
        per_step[:] = [0.0] * len(per_step)
        t0 = time.perf_counter()
        for _ in range(calls):
            run()
        total = (time.perf_counter() - t0) / calls
    finally:
        executor._run_sequential = sequential
        for step, kernel in zip(prog.steps, kernels):
            step.kernel = kernel
        prog.__dict__.pop("run_steps", None)
    # hot: every kernel again on the inputs it had (one more run keeps all values)
    vals = list(prog.slots)
    for step in prog.steps:
        if step.kernel is not None:
            vals[step.out] = step.kernel(*[vals[i] for i in step.inputs])
    classes: dict = collections.defaultdict(lambda: [0, 0.0, 0.0])
    # results and temporaries come from an arena and go back to it, as in a run (a fresh
    # allocation per call would time page faults)
    arena = buffers.Arena()
    token = buffers.CURRENT.set(arena)
    try:
        for step, t in zip(prog.steps, per_step):
            if step.kernel is None:
                continue
            args = [vals[i] for i in step.inputs]
            best = float("inf")
            for _ in range(20):
                t0 = time.perf_counter()
                value = step.kernel(*args)
                best = min(best, time.perf_counter() - t0)
                if isinstance(value, np.ndarray):
                    arena.give(buffers.root(value))
            c = classes[kernel_class(step.node)]
            c[0] += 1
            c[1] += t / calls
            c[2] += best
    finally:
        buffers.CURRENT.reset(token)
    return {
        "total_s": total,
        "kernels_s": spent["kernels"] / calls,
        "loop_s": (spent["run"] - spent["kernels"]) / calls,
        "front_and_outputs_s": total - spent["run"] / calls,
        "steps": sum(s.kernel is not None for s in prog.steps),
        "kernels_hot_s": sum(c[2] for c in classes.values()),
        "classes": {
            k: {"n": n, "in_context_s": ctx, "hot_s": hot}
            for k, (n, ctx, hot) in sorted(classes.items(), key=lambda kv: -kv[1][1])
        },
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--only", choices=("W2", "W3"))
    args = p.parse_args()
    workloads = {"W3": GR.lattice, "W2": lambda: GR.mps(100, 64)}
    results = {}
    for name, make in workloads.items():
        if args.only and name != args.only:
            continue
        value, grads = build(*make())
        results[name] = {
            "forward": breakdown((value,), args.calls),
            "value_and_grad": breakdown((value, *grads), args.calls),
        }
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
    out = pathlib.Path(__file__).parent / "results" / "grad_breakdown.json"
    out.write_text(json.dumps(results, indent=1) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
