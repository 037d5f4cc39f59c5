"""Per-node overheads of tracing, dumping and evaluating a long elementwise chain.

    python benchmarks/trace_overhead.py [--nodes 100000]

Reports microseconds per node to build a 100k-node graph (the issue's goal: <= 5 us/node,
autoray.lazy measured 3-4 us/node here), with the cyclic GC on (as users run) and off, next to
autoray.lazy on the same chain when it is installed. Writes benchmarks/results/trace_overhead.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import pathlib
import platform
import statistics
import time

import numpy as np

import tenloom as tl


def build_tenloom(x, n_iter: int):
    y = x
    for _ in range(n_iter):
        y = y * 1.0000001 + 0.5
    return y


def time_build(fn, x, n_iter: int, repeats: int, gc_on: bool) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        if not gc_on:
            gc.disable()
        t0 = time.perf_counter()
        y = fn(x, n_iter)
        t1 = time.perf_counter()
        gc.enable()
        del y
        times.append((t1 - t0) / (2 * n_iter) * 1e6)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--nodes", type=int, default=100_000)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    n_iter = args.nodes // 2
    base = np.ones(8)
    res: dict = {"nodes": args.nodes, "python": platform.python_version()}
    x = tl.asarray(base)
    build_tenloom(x, 1000)  # warm-up
    res["tenloom_build_us_per_node_gc_on"] = time_build(
        build_tenloom, x, n_iter, args.repeats, True
    )
    res["tenloom_build_us_per_node_gc_off"] = time_build(
        build_tenloom, x, n_iter, args.repeats, False
    )
    y = build_tenloom(x, n_iter)
    t0 = time.perf_counter()
    text = tl.dump(y)
    res["tenloom_dump_us_per_node"] = (time.perf_counter() - t0) / args.nodes * 1e6
    assert len(text.splitlines()) >= args.nodes
    t0 = time.perf_counter()
    (out,) = tl.evaluate(y, passes=())
    res["tenloom_eval_unoptimized_us_per_node"] = (time.perf_counter() - t0) / args.nodes * 1e6
    expected = base.copy()
    for _ in range(n_iter):
        expected = expected * 1.0000001 + 0.5
    assert np.allclose(out, expected)
    try:
        from autoray import lazy

        ax = lazy.array(base)
        res["autoray_lazy_build_us_per_node_gc_on"] = time_build(
            build_tenloom, ax, n_iter, args.repeats, True
        )
    except ImportError:
        pass
    for k, v in res.items():
        print(f"{k:42s} {v:.2f}" if isinstance(v, float) else f"{k:42s} {v}")
    if "autoray_lazy_build_us_per_node_gc_on" in res:
        ratio = res["tenloom_build_us_per_node_gc_on"] / res["autoray_lazy_build_us_per_node_gc_on"]
        print(f"{'ratio tenloom / autoray.lazy (build)':42s} {ratio:.2f}")
    out_dir = pathlib.Path(__file__).parent / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "trace_overhead.json").write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
