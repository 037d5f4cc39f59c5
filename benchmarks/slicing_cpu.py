"""Sliced contraction on CPU.

Two workloads, in one script:

- ``--workload peps`` (the default; issue 22): the norm <psi|psi> of a random complex PEPS
  (6 x 6, D = 3) and its gradient with respect to the PEPS tensors (``tl.grad``), each under
  ``memory_limit`` = 1 MiB and 8 MiB and with ``threads`` = 1 and 2. Each row reports the sliced
  time over the unsliced time (same threads, same ``optimize``) beside the predicted flop
  overhead (the optimized sliced graph's flops over the unsliced graph's, as ``tl.explain``
  counts them: sliced multiply-adds / unsliced multiply-adds for the norm, forward and reverse
  sweeps together for the gradient). Each case runs in a fresh process with a time limit (a case
  past it is reported as such), so one slow case cannot hide the others.
- ``--workload lattice`` (issue 7): a square lattice network, slices over 2 threads vs 1 and a
  Dask cluster of 2 workers vs local evaluation.

    OPENBLAS_NUM_THREADS=1 python benchmarks/slicing_cpu.py --workload peps
    OPENBLAS_NUM_THREADS=1 python benchmarks/slicing_cpu.py --workload lattice --n 6 --D 8

BLAS runs single-threaded (set before NumPy loads) so that the ratios measure slicing and slice
parallelism, not BLAS threads fighting over the same cores. Prints the times and ratios and
writes ``benchmarks/results/slicing_cpu.json`` (lattice) or ``slicing_cpu_peps.json`` (PEPS).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from harness import best_time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))


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


def peps_norm(lx: int, ly: int, d: int, seed: int = 0):
    """(<psi|psi> as a lazy real scalar, the ket tensors): the bra layer is ``tl.conj`` of the
    kets, so that the gradient with respect to the kets runs through both layers."""
    from peps_norm import random_peps  # examples/peps_norm.py

    import tenloom as tl

    sites = random_peps(lx, ly, d, seed)
    labels: dict = {}

    def label(key):
        return labels.setdefault(key, len(labels))

    kets = [tl.asarray(a) for a, _ in sites.values()]
    ops: list = []
    for layer in ("ket", "bra"):
        for k, (site, (_, bonds)) in enumerate(sites.items()):
            t = kets[k] if layer == "ket" else tl.conj(kets[k])
            ops += [t, [label(("phys", site))] + [label((layer, b)) for b in bonds]]
    return tl.real(tl.einsum(*ops, [])), kets


def _wall(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def peps_case(args) -> dict:
    """One (network, limit, threads) case in this process: unsliced and sliced times, the flop
    overhead and the slicing as explain reports it."""
    from tenloom.runtime.sliced import LAST_RUN

    import tenloom as tl

    norm, kets = peps_norm(args.Lx, args.Ly, args.D)
    base = {"optimize": args.optimize}
    if args.network == "norm":
        whole = sliced = (norm,)
    else:
        whole = tuple(tl.grad(norm, kets, **base))
        sliced = tuple(tl.grad(norm, kets, memory_limit=args.limit, **base))
    lim = {"memory_limit": args.limit, **base}
    t0 = time.perf_counter()
    rep_whole = tl.explain(*whole, threads=args.threads, **base)
    rep = tl.explain(*sliced, threads=args.threads, **lim)
    explain_s = time.perf_counter() - t0
    ref = tl.evaluate(*whole, threads=args.threads, **base)
    t0 = time.perf_counter()
    got = tl.evaluate(*sliced, threads=args.threads, **lim)
    first_sliced = time.perf_counter() - t0
    err = max(
        float(np.linalg.norm(g - r) / max(np.linalg.norm(r), 1e-300)) for g, r in zip(got, ref)
    )
    # interleaved, as many rounds as asked: the medians of each
    t_whole, t_sliced = [], []
    for _ in range(args.repeat):
        t_whole.append(_wall(lambda: tl.evaluate(*whole, threads=args.threads, **base)))
        t_sliced.append(_wall(lambda: tl.evaluate(*sliced, threads=args.threads, **lim)))
    unsliced_s, sliced_s = float(np.median(t_whole)), float(np.median(t_sliced))
    overhead = rep.after.flops / max(rep_whole.after.flops, 1)
    return {
        "network": args.network,
        "memory_limit": args.limit,
        "threads": args.threads,
        "optimize": args.optimize,
        "unsliced_flops": rep_whole.after.flops,
        "sliced_flops": rep.after.flops,
        "flop_overhead": overhead,
        "slicing": [
            {"indices": s["indices"], "slices": s["slices"], "peak": s["peak_per_slice"]}
            for s in rep.slicing
        ],
        "explain_seconds": explain_s,
        "first_sliced_seconds": first_sliced,
        "unsliced_seconds": unsliced_s,
        "sliced_seconds": sliced_s,
        "time_ratio": sliced_s / unsliced_s,
        "ratio_over_overhead": sliced_s / unsliced_s / overhead,
        "workers": list(LAST_RUN.workers),
        "slices_per_worker": list(LAST_RUN.slices),
        "rel_err": err,
    }


def run_peps(args) -> int:
    rows = []
    for network in args.networks:
        for limit in args.limits:
            for threads in args.threads_list:
                cmd = [sys.executable, os.path.abspath(__file__), "--one", "--network", network]
                cmd += ["--limit", limit, "--threads", str(threads), "--optimize", args.optimize]
                cmd += ["--Lx", str(args.Lx), "--Ly", str(args.Ly), "--D", str(args.D)]
                cmd += ["--repeat", str(args.repeat)]
                label = f"{network:<5} limit {limit:>5} threads {threads}"
                # a fresh process per case, in its own session: a case past the time limit is
                # killed with everything it started
                proc = subprocess.Popen(
                    cmd,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    start_new_session=True,
                )
                try:
                    stdout, stderr = proc.communicate(timeout=args.timeout)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.communicate()
                    print(f"{label}: did not finish in {args.timeout:g} s", flush=True)
                    rows.append(
                        {
                            "network": network,
                            "memory_limit": limit,
                            "threads": threads,
                            "timeout_seconds": args.timeout,
                        }
                    )
                    continue
                if proc.returncode != 0:
                    # the exception's own line (a refused limit says why)
                    lines = stderr.strip().splitlines() or ["(no output)"]
                    print(f"{label}: failed: {lines[-1]}", flush=True)
                    rows.append(
                        {
                            "network": network,
                            "memory_limit": limit,
                            "threads": threads,
                            "error": stderr[-3000:],
                        }
                    )
                    continue
                row = json.loads(stdout.strip().splitlines()[-1])
                rows.append(row)
                sl = row["slicing"]
                desc = ", ".join(f"{s['slices']} slices over {len(s['indices'])}" for s in sl)
                print(
                    f"{label}: unsliced {row['unsliced_seconds']:.3f} s, sliced "
                    f"{row['sliced_seconds']:.3f} s = {row['time_ratio']:.2f}x for a flop "
                    f"overhead of {row['flop_overhead']:.2f}x "
                    f"(ratio / overhead {row['ratio_over_overhead']:.2f}); {desc or 'unsliced'}; "
                    f"first sliced call {row['first_sliced_seconds']:.2f} s, explain "
                    f"{row['explain_seconds']:.2f} s; slices per worker "
                    f"{row['slices_per_worker']}; rel err {row['rel_err']:.1e}",
                    flush=True,
                )
    with open(args.out or os.path.join(HERE, "results", "slicing_cpu_peps.json"), "w") as f:
        json.dump(
            {
                "workload": f"PEPS {args.Lx}x{args.Ly} D={args.D} complex128 norm and gradient",
                "optimize": args.optimize,
                "cpu_count": os.cpu_count(),
                "repeat": args.repeat,
                "rows": rows,
            },
            f,
            indent=1,
        )
    return 0


def run_lattice(args) -> int:
    from tenloom.passes.slicing import parse_bytes
    from tenloom.runtime.sliced import LAST_RUN

    import tenloom as tl

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
        f"  2 threads, same limit: {two:.3f} s ({slices2} slices); "
        f"2 threads / 1 thread = {two / one:.3f}"
    )
    print(
        f"  2 threads, limit x2: {two_same:.3f} s ({slices_same} slices); "
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
    with open(args.out or os.path.join(HERE, "results", "slicing_cpu.json"), "w") as f:
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", choices=("peps", "lattice"), default="peps")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", default=None)
    # lattice
    p.add_argument("--n", type=int, default=6)
    p.add_argument("--limit", default="2MB", help="the memory limit (lattice, or one PEPS case)")
    # PEPS
    p.add_argument("--Lx", type=int, default=6)
    p.add_argument("--Ly", type=int, default=6)
    p.add_argument("--D", type=int, default=None, help="bond dimension (PEPS 3, lattice 8)")
    p.add_argument("--optimize", default="auto")
    p.add_argument("--networks", nargs="+", default=["norm", "grad"])
    p.add_argument("--limits", nargs="+", default=["1MiB", "8MiB"])
    p.add_argument("--threads-list", nargs="+", type=int, default=[1, 2])
    p.add_argument("--timeout", type=float, default=540, help="seconds per PEPS case")
    # one PEPS case (what the driver runs in a fresh process)
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--network", choices=("norm", "grad"), default="norm")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    if args.workload == "lattice":
        args.D = 8 if args.D is None else args.D
        return run_lattice(args)
    args.D = 3 if args.D is None else args.D
    if args.one:
        print(json.dumps(peps_case(args)))
        return 0
    return run_peps(args)


if __name__ == "__main__":
    raise SystemExit(main())
