"""The benchmark runner: tenloom against its peers, in one process, on the same arrays.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        python benchmarks/run.py --networks ../shared/data/networks        # full, < 15 min
    python benchmarks/run.py --quick --networks ../shared/data/networks    # smoke run, < 2 min
    python benchmarks/run.py --only W1,W3 --repeats 7

Workloads (see /work/shared/BENCHMARKS.md): W1 randreg n=60 D=4, W2 MPS/MPO expectation built
site by site, W3 lattice 6x6 D=6, W4 Sycamore m10 amplitude (quimb), W5 matrix chain and
batched matmul, W6 rtree_100, W7 random hyper network with self-loops and lone indices, W9
2000-op elementwise chain; REF runs the reference MPS overlap network; PATHS compares
contraction orders (no execution) on the reference networks too costly to run on a CPU.

For every workload tenloom and each peer (numpy, opt_einsum, cotengra, jax.jit, torch) run one
after the other on the same float64 arrays: one warm-up call (for tenloom and jax.jit it
includes compilation; reported separately as compile = first call - median), then --repeats
timed samples (a call under 10 ms is timed in loops of about 20 ms); medians and ratios
tenloom / peer are reported. Every peer's result is checked
against tenloom's (relative 2-norm error <= 1e-8); any mismatch fails the run after the results
are written. A peer that fails records its error string and the run goes on.

Output: benchmarks/results/<workload>.json (with --quick: benchmarks/results/quick/) and, for a
full run, a section of docs/benchmarks.md between the markers below plus
docs/benchmarks_ratios.png.

The OpenBLAS environment variables OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, set on these machines
for old OpenBLAS builds, make numpy's GEMM ~1.5x slower; unset them for the run (the kernel in
use is recorded in every result file).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import sys
import time
import traceback
from collections.abc import Callable

from harness import HERE, RTOL, Ctx, Peers, blas_info, gemm_peak, jsonable
from report import DOCS, PLOT, write_docs
from workloads import paths, ref_mps, w1, w2, w3, w4, w5, w6, w7, w9

WORKLOADS: dict[str, tuple[str, Callable[[Ctx], dict]]] = {
    "W1": ("randreg n=60 D=4", w1),
    "W2": ("MPS/MPO expectation built site by site", w2),
    "W3": ("lattice 6x6 D=6", w3),
    "W4": ("Sycamore m10 amplitude", w4),
    "W5": ("matrix chain and batched matmul", w5),
    "W6": ("rtree_100", w6),
    "W7": ("hyper network with self-loops and lone indices", w7),
    "W9": ("2000-op elementwise chain", w9),
    "REF": ("reference network mps_mpo_L100 (run)", ref_mps),
    "PATHS": ("path quality on reference networks (no execution)", paths),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--networks", help="folder of reference networks (cotengra json, qsim)")
    p.add_argument("--quick", action="store_true", help="small sizes, 3 repeats, no docs")
    p.add_argument("--only", help="comma-separated workload ids: " + ",".join(WORKLOADS))
    p.add_argument("--repeats", type=int, default=None, help="timed calls (default 5; quick 3)")
    p.add_argument("--out", help="results folder (default benchmarks/results[/quick])")
    p.add_argument(
        "--docs",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write docs/benchmarks.md + plot (default: on unless --quick/--only)",
    )
    p.add_argument("--no-memory", action="store_true", help="skip the tracemalloc peak runs")
    p.add_argument("--verbose", action="store_true", help="print peers' tracebacks")
    args = p.parse_args(argv)
    if args.repeats is None:
        args.repeats = 3 if args.quick else 5
    only = [w.strip().upper() for w in args.only.split(",")] if args.only else list(WORKLOADS)
    for w in only:
        if w not in WORKLOADS:
            p.error(f"unknown workload {w!r}; valid: {', '.join(WORKLOADS)}")
    out_dir = (
        pathlib.Path(args.out)
        if args.out
        else (HERE / "results" / "quick" if args.quick else HERE / "results")
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    write_docs_flag = args.docs if args.docs is not None else (not args.quick and not args.only)

    t_start = time.perf_counter()
    peers = Peers()
    ctx = Ctx(args, peers)
    ctx.peak = gemm_peak(1024 if args.quick else 2048)
    meta = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "versions": peers.versions(),
        "blas": blas_info(),
        "gemm_peak_gflops": ctx.peak,
        "repeats": args.repeats,
        "quick": args.quick,
        "peer_import_errors": peers.errors,
        "argv": sys.argv,
    }
    if peers.torch is not None:
        meta["torch_threads"] = peers.torch.get_num_threads()
    if meta["blas"]["OPENBLAS_CORETYPE"]:
        print("note: OPENBLAS_CORETYPE is set; numpy's GEMM runs an older kernel (see --help)")
    print(
        f"GEMM peak: {ctx.peak['float64']:.1f} GFLOP/s float64, {ctx.peak['float32']:.1f} float32",
        flush=True,
    )
    results: dict[str, dict] = {}
    for wid in only:
        title, fn = WORKLOADS[wid]
        print(f"== {wid}: {title}", flush=True)
        t0 = time.perf_counter()
        load0 = os.getloadavg()
        try:
            res = fn(ctx)
        except Exception as e:  # noqa: BLE001 - a broken workload is reported, others run
            traceback.print_exc()
            res = {"error": f"{type(e).__name__}: {e}"[:500]}
        res = {
            "workload": wid,
            "title": title,
            "elapsed_s": time.perf_counter() - t0,
            "loadavg_before_after": [load0, os.getloadavg()],
            **res,
            "meta": meta,
        }
        if "skipped" in res:
            print(f"  skipped: {res['skipped']}", flush=True)
        results[wid] = res
        (out_dir / f"{wid}.json").write_text(json.dumps(res, indent=1, default=jsonable) + "\n")
    meta["total_s"] = time.perf_counter() - t_start
    meta["gemm_peak_gflops_at_end"] = gemm_peak(1024 if args.quick else 2048)
    for wid, res in results.items():  # again, with the run's final metadata
        (out_dir / f"{wid}.json").write_text(json.dumps(res, indent=1, default=jsonable) + "\n")
    if write_docs_flag:
        command = " ".join(
            ["env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE"]
            * (not meta["blas"]["OPENBLAS_CORETYPE"])
            + ["python benchmarks/run.py", *sys.argv[1:]]
        )
        write_docs(results, meta, command, out_dir)
        print(f"wrote {DOCS} and {PLOT}")
    print(f"total {meta['total_s']:.0f} s; results in {out_dir}")
    if ctx.mismatches:
        print("MISMATCHES:\n  " + "\n  ".join(ctx.mismatches))
    assert not ctx.mismatches, f"{len(ctx.mismatches)} results differ from tenloom by > {RTOL}"
    return 0


if __name__ == "__main__":
    sys.exit(main())
