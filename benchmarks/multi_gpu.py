"""Multi-GPU scaling of one sliced contraction (issues 7 and 8).

A closed 8x8 lattice network of bond dimension D (W3/W10 GPU size of BENCHMARKS.md), or a closed
random 3-regular network (cotengra's ``randreg_equation``, ``--network randreg``, W1's family),
is sliced by ``memory_limit`` with cotengra, and the same plan runs on 1, 2, ... GPUs in one
process:
``tl.evaluate(y, device=["cuda:0", "cuda:1"], memory_limit=...)``. Each GPU keeps its own copy
of the operands and pulls its next slice when it finishes the last (balanced by throughput);
the partial sums meet at the end.

    python benchmarks/multi_gpu.py --D 10 --dtype complex64 --limit 4GiB --gpus 1,2
    python benchmarks/multi_gpu.py --network randreg --n 60 --D 14 --gpus 1,2,4

Prints one line per GPU count (time, speed-up, parallel efficiency, slices per GPU, slice
imbalance) and writes JSON with ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time

import numpy as np


def a_size(shape) -> float:
    return float(np.prod(shape))


def lattice(n: int, d: int, dtype: str, seed: int = 0):
    import cotengra as ctg

    inputs, output, shapes, _ = ctg.utils.lattice_equation([n, n], d_min=d, d_max=d)
    return closed_network(inputs, shapes, dtype, seed)


def randreg(n: int, d: int, dtype: str, seed: int = 1):
    import cotengra as ctg

    inputs, output, shapes, _ = ctg.utils.randreg_equation(n, 3, d_min=d, d_max=d, seed=seed)
    return closed_network(inputs, shapes, dtype, seed)


def closed_network(inputs, shapes, dtype: str, seed: int):
    import tenloom as tl

    rng = np.random.default_rng(seed)
    labels: dict = {}
    args = []
    for t, s in zip(inputs, shapes):
        # entries near D^(-legs/2): the network's value stays near 1 at any size
        noise = rng.standard_normal(s)
        if np.dtype(dtype).kind == "c":
            noise = noise + 1j * rng.standard_normal(s)
        a = ((1.0 + 0.1 * noise) / np.sqrt(a_size(s))).astype(dtype)
        args += [tl.asarray(a), [labels.setdefault(x, len(labels)) for x in t]]
    args.append([])
    return tl.einsum(*args)


def main(argv=None) -> int:
    from tenloom.runtime.sliced import LAST_RUN

    import tenloom as tl

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--network", default="lattice", choices=["lattice", "randreg"])
    p.add_argument("--n", type=int, default=8, help="lattice side, or randreg tensors")
    p.add_argument("--D", type=int, default=10, help="bond dimension")
    p.add_argument("--dtype", default="complex64")
    p.add_argument("--limit", default="4GiB", help="memory_limit: decides the slicing")
    p.add_argument("--gpus", default="1,2", help="GPU counts to run, comma separated")
    p.add_argument("--repeat", type=int, default=2, help="timed runs per GPU count (best kept)")
    p.add_argument(
        "--cuda-graphs",
        default="on",
        choices=["on", "off", "both"],
        help="replay each GPU's slice program as a CUDA graph (issue 23), or not, or both",
    )
    p.add_argument("--out", default=None, help="write the results as JSON here")
    args = p.parse_args(argv)
    import cupy as cp  # after the arguments: --help works without a GPU

    counts = [int(c) for c in args.gpus.split(",")]
    n_gpus = cp.cuda.runtime.getDeviceCount()
    counts = [c for c in counts if c <= n_gpus]
    names = [cp.cuda.runtime.getDeviceProperties(i)["name"].decode() for i in range(n_gpus)]
    print(f"{n_gpus} GPU(s): {', '.join(names)}")

    if args.network == "lattice":
        y = lattice(args.n, args.D, args.dtype)
        workload = f"lattice {args.n}x{args.n} D={args.D} {args.dtype}"
    else:
        y = randreg(args.n, args.D, args.dtype)
        workload = f"randreg n={args.n} deg 3 D={args.D} {args.dtype}"
    opts = {"optimize": "greedy", "memory_limit": args.limit}
    t0 = time.perf_counter()
    report = tl.explain(y, **opts)
    search = time.perf_counter() - t0
    sl = report.slicing[0] if report.slicing else {"slices": 1, "indices": [], "overhead": 1.0}
    flops = report.after.flops
    print(
        f"{workload}: {flops:.3g} flops, "
        f"{sl['slices']} slices over {sl['indices']} (flops overhead {sl['overhead']:.3f}x), "
        f"path + slicing {search:.1f} s"
    )
    rows, values = [], []
    base: dict = {}
    modes = {"on": [True], "off": [False], "both": [False, True]}[args.cuda_graphs]
    from tenloom.runtime.backends.cuda_graphs import COUNTERS

    for c, graphs in [(c, g) for c in counts for g in modes]:
        device = "cuda:0" if c == 1 else [f"cuda:{i}" for i in range(c)]
        run = dict(opts, cuda_graphs=graphs)
        values.append(complex(y.evaluate(device=device, **run)))  # warm-up: copies, kernels
        best = math.inf
        replays = COUNTERS["replays"]
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            values.append(complex(y.evaluate(device=device, **run)))
            best = min(best, time.perf_counter() - t0)
        replays = COUNTERS["replays"] - replays
        slices = list(LAST_RUN.slices)
        base.setdefault(graphs, best)
        speedup = base[graphs] / best
        imbalance = max(slices) / (sum(slices) / len(slices))
        row = {
            "gpus": c,
            "cuda_graphs": graphs,
            "replays": replays,
            "seconds": best,
            "speedup": speedup,
            "efficiency": speedup / c,
            "slices_per_gpu": slices,
            "busy_seconds_per_gpu": [round(s, 3) for s in LAST_RUN.seconds],
            "slice_imbalance": imbalance,
            "tflops": flops / best / 1e12,
        }
        rows.append(row)
        print(
            f"{c} GPU(s), cuda_graphs={graphs}: {best:.3f} s  speed-up {speedup:.3f}x  "
            f"efficiency {speedup / c:.3f}  slices {slices}  imbalance {imbalance:.3f}  "
            f"{row['tflops']:.1f} TFLOP/s  slice replays {replays}"
        )
    ref = values[0]
    spread = max(abs(v - ref) for v in values) / max(abs(ref), 1e-300)
    print(f"value {ref:.6g}; largest relative difference between runs {spread:.2e}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(
                {
                    "workload": workload,
                    "memory_limit": args.limit,
                    "flops": flops,
                    "slicing": {k: sl[k] for k in ("slices", "indices", "overhead")},
                    "gpus": names,
                    "host": platform.node(),
                    "rows": rows,
                    "relative_spread": spread,
                },
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
