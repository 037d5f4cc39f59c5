"""Steady state of a repeated ``tl.evaluate`` under ``optimize="auto"`` (issue 22, "not worse").

    PYTHONPATH=<a tenloom package> python -P benchmarks/steady_auto.py W1 W3 W7 tebd

For each of first_call.py's workloads named: 5 warm-up calls of ``evaluate`` on the same
tensors (the third is re-optimized with the compile effort), then the median of 30 calls, in
milliseconds, printed as one JSON line. Run it alternately with two packages on PYTHONPATH
(before and after) in fresh processes to compare.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import first_call as fc  # noqa: E402

import tenloom as tl  # noqa: E402


class Args:
    qubits, depth, L, chi = 20, 4, 16, 32


def lazy(name: str):
    kind, w = fc.workload(name, Args)
    if kind not in ("network", "networks"):
        raise SystemExit(f"{name}: not a network workload")
    return fc.lazy_workload(tl, kind, w)


def main() -> None:
    out = {}
    for name in sys.argv[1:]:
        t = lazy(name)
        for _ in range(5):
            t.evaluate()
        times = []
        for _ in range(30):
            t0 = time.perf_counter()
            t.evaluate()
            times.append(time.perf_counter() - t0)
        out[name] = statistics.median(times) * 1e3
    print(json.dumps(out))


if __name__ == "__main__":
    main()
