"""Sliced contraction on CPU: slices over 2 threads vs 1, and a Dask cluster of 2 workers vs
local evaluation (issue 7), in one process.

    OPENBLAS_NUM_THREADS=1 python benchmarks/slicing_cpu.py --n 6 --D 8 --limit 2MB

BLAS runs single-threaded (set before NumPy loads) so that the ratios measure slice
parallelism, not BLAS threads fighting over the same cores. Prints the times and ratios and
writes ``benchmarks/results/slicing_cpu.json``.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from harness import best_time  # noqa: E402


def lattice(n: int, d: int, seed: int = 1):
    import cotengra as ctg

    import tenloom as tl

    inputs, output, shapes, _ = ctg.utils.lattice_equation([n, n], d_min=d, d_max=d, seed=seed)
    rng = np.random.default_rng(seed)
    labels: dict = {}
    args = []
    for t, s in zip(inputs, shapes):
        a = (1.0 + 0.1 * rng.standard_normal(s)) / np.sqrt(np.prod(s))
        args += [tl.asarray(a), [labels.setdefault(x, len(labels)) for x in t]]
    args.append([])
    return tl.einsum(*args)


def main(argv=None) -> int:
    from tenloom.passes.slicing import parse_bytes
    from tenloom.runtime.sliced import LAST_RUN

    import tenloom as tl

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=6)
    p.add_argument("--D", type=int, default=8)
    p.add_argument("--limit", default="2MB")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", default=os.path.join("benchmarks", "results", "slicing_cpu.json"))
    args = p.parse_args(argv)

    y = lattice(args.n, args.D)
    opts = {"optimize": "greedy", "memory_limit": args.limit}
    report = tl.explain(y, **opts)
    sl = report.slicing[0]
    print(
        f"lattice {args.n}x{args.n} D={args.D}: {report.after.flops:.3g} flops sliced into "
        f"{sl['slices']} slices over {sl['indices']} (overhead {sl['overhead']:.3f}x), "
        f"predicted peak per slice {sl['peak_per_slice']} bytes, limit {args.limit}"
    )
    unsliced = best_time(lambda: y.evaluate(optimize="greedy"), args.repeat)
    one = best_time(lambda: y.evaluate(threads=1, **opts), args.repeat)
    slices1 = sum(LAST_RUN.slices)
    two = best_time(lambda: y.evaluate(threads=2, **opts), args.repeat)
    slices2 = sum(LAST_RUN.slices)
    # the same slicing on 2 threads: each thread's slice and accumulator get the 1-thread limit
    same = {"optimize": "greedy", "memory_limit": 2 * parse_bytes(args.limit)}
    two_same = best_time(lambda: y.evaluate(threads=2, **same), args.repeat)
    slices_same = sum(LAST_RUN.slices)
    rows = {
        "unsliced_seconds": unsliced,
        "threads1_seconds": one,
        "threads1_slices": slices1,
        "threads2_seconds": two,
        "threads2_slices": slices2,
        "threads2_same_slicing_seconds": two_same,
        "threads2_same_slicing_slices": slices_same,
    }
    print(f"unsliced {unsliced:.3f} s; sliced, 1 thread {one:.3f} s ({slices1} slices)")
    print(
        f"  2 threads, same limit: {two:.3f} s ({slices2} slices: each thread's slice must fit "
        f"half the limit); 2 threads / 1 thread = {two / one:.3f}"
    )
    print(
        f"  2 threads, same slicing (limit x2): {two_same:.3f} s ({slices_same} slices); "
        f"2 threads / 1 thread = {two_same / one:.3f}"
    )
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        print("dask.distributed is not installed: Dask comparison skipped")
    else:
        with (
            LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
        ):
            dask = best_time(lambda: y.evaluate(scheduler=client, **opts), args.repeat)
        rows["dask2_seconds"] = dask
        print(f"  Dask, 2 workers {dask:.3f} s: Dask / local 1 thread = {dask / one:.3f}")
    with open(args.out, "w") as f:
        json.dump(
            {
                "workload": f"lattice {args.n}x{args.n} D={args.D} float64",
                "memory_limit": args.limit,
                "slices": sl["slices"],
                "overhead": sl["overhead"],
                "cpu_count": os.cpu_count(),
                **rows,
            },
            f,
            indent=1,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
