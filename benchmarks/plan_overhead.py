"""Overhead of calling a compiled plan over running the same kernels bare, on CPU.

    python benchmarks/plan_overhead.py [--min-time 0.1] [--rounds 7]

Plans of 1, 10, 100 and 1000 ops on tiny arrays (so the kernels take under a microsecond or
two each), fusion off so each op stays one node and one kernel call:

- ``elementwise``: sin and cos in turn on 8 float64 numbers (ops + 1 nodes);
- ``matmul``: a product with a constant 4x4 float64 matrix and tanh in turn (about 1.5 nodes per
  op: the constants are nodes too).

"Bare" is the plan's own compiled program (``Plan.program``, runtime/program.py): every
``Step.kernel`` called in a plain Python loop over preset slots, with no binding or checking of
the inputs, no freeing and no output copies. The same ops written by hand in NumPy are timed
too (``numpy us``): the difference to ``bare`` is what the kernel wrappers cost, which is not
plan overhead. Each figure is the best of ``--rounds`` rounds of about ``--min-time`` seconds,
the three variants timed in turn, the cyclic GC off while timing.

overhead = plan - bare is fitted as ``a + b * nodes`` (weighted least squares, weights 1 / plan
time; ``tenloom.cli.bench.fit_overhead``) and checked against the goal of <= 20 us + 3 us per node
(to resolve: <= 50 us + 10 us per node). Writes benchmarks/results/plan_overhead.json.
``tenloom bench`` runs the same measurement with shorter timings.
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

import numpy as np

import tenloom as tl
from tenloom.cli.bench import FAMILIES, GOAL, SIZES, TO_RESOLVE, run_overhead

RESULTS = pathlib.Path(__file__).resolve().parent / "results" / "plan_overhead.json"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--min-time", type=float, default=0.1, help="seconds per round and variant")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument(
        "--sizes", default=",".join(map(str, SIZES)), help="ops per plan, comma-separated"
    )
    p.add_argument("--out", default=str(RESULTS), help="results file")
    args = p.parse_args(argv)
    sizes = tuple(int(s) for s in args.sizes.split(","))
    t0 = time.perf_counter()
    res = run_overhead(FAMILIES, sizes, args.min_time, args.rounds)
    took = time.perf_counter() - t0
    doc = {
        "command": " ".join(
            ["python benchmarks/plan_overhead.py", *(argv if argv is not None else sys.argv[1:])]
        ),
        "bare": "the plan's compiled steps (Plan.program, Step.kernel) in a plain Python loop "
        "over preset slots: no binding, checking, freeing or output copies",
        "goal_us": {"a": GOAL[0], "b_per_node": GOAL[1]},
        "to_resolve_us": {"a": TO_RESOLVE[0], "b_per_node": TO_RESOLVE[1]},
        "min_time_s": args.min_time,
        "rounds": args.rounds,
        **res,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "numpy": np.__version__,
            "tenloom": tl.__version__,
        },
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "took_s": round(took, 1),
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out} ({took:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
