"""Execution time of two versions of tenloom, in alternated fresh processes ("not worse").

    python benchmarks/ab_execution.py BEFORE_ROOT AFTER_ROOT [--rounds 5]

Each ROOT is a source tree of tenloom (for example ``git archive d8c6160 | tar -x -C /tmp/a``):
a package folder is made for it (its ``tenloom/`` files plus ``graph``, ``passes`` and
``runtime`` linked in, as the installed package maps them) and put first on ``PYTHONPATH``.
Every round runs one fresh process per tree, in turn, each timing workloads whose contraction
order does not depend on the process (greedy order, a chain's exact order, a compiled plan),
so the figures compare execution rather than the luck of a random order search:

- randreg n=40 deg 3 D=4, ``optimize="greedy"``, ``tl.evaluate`` (median of 200 calls);
- lattice 5x5 D=6, ``optimize="greedy"``, ``tl.evaluate`` (100 calls);
- an MPS norm L=40 chi=32 built site by site, ``tl.evaluate`` (100 calls);
- a compiled 30-layer ``tanh(y @ x) * 0.5 + 0.1`` on 64x64, one plan call (300 calls).

Prints each process's medians and, per workload, the median over rounds and after / before.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

NAMES = (
    "randreg n=40 D=4 greedy",
    "lattice 5x5 D=6 greedy",
    "MPS norm L=40 chi=32",
    "compiled 30-layer plan",
)


def measure() -> list[float]:
    """The four medians (ms) in this process."""
    import networkx as nx
    import numpy as np

    import tenloom as tl

    def network(g, d, seed):
        edges = {frozenset(e): i for i, e in enumerate(g.edges())}
        rng = np.random.default_rng(seed)
        argv: list = []
        for v in g.nodes():
            labels = [edges[frozenset(e)] for e in g.edges(v)]
            argv += [tl.asarray(rng.random((d,) * len(labels)) * 0.5), labels]
        return tl.einsum(*argv, [])

    def mps_norm(length, chi, d=2, seed=0):
        rng = np.random.default_rng(seed)
        env = tl.ones((1, 1))
        for i in range(length):
            a = tl.asarray(rng.random((1 if i == 0 else chi, d, 1 if i == length - 1 else chi)))
            env = tl.einsum("ab,aic,bid->cd", env, a, a)
        return env

    def median_ms(call, n):
        call()
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1e3

    out = []
    t = network(nx.random_regular_graph(3, 40, seed=1), 4, 0)
    out.append(median_ms(lambda: tl.evaluate(t, optimize="greedy"), 200))
    u = network(nx.grid_2d_graph(5, 5), 6, 1)
    out.append(median_ms(lambda: tl.evaluate(u, optimize="greedy"), 100))
    m = mps_norm(40, 32)
    out.append(median_ms(lambda: tl.evaluate(m), 100))
    x = tl.placeholder((64, 64))
    y = x
    for _ in range(30):
        y = tl.tanh(y @ x) * 0.5 + 0.1
    plan = tl.compile(y, inputs=[x])
    a = np.random.default_rng(2).random((64, 64)) * 0.1
    out.append(median_ms(lambda: plan(a), 300))
    return out


def package_folder(root: pathlib.Path, into: pathlib.Path) -> pathlib.Path:
    """A folder holding ``tenloom`` as the installed package lays it out, linked to ``root``."""
    pkg = into / "tenloom"
    pkg.mkdir(parents=True)
    for f in (root / "tenloom").iterdir():
        (pkg / f.name).symlink_to(f.resolve())
    for sub in ("graph", "passes", "runtime"):
        (pkg / sub).symlink_to((root / sub).resolve())
    return into


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("before", type=pathlib.Path)
    p.add_argument("after", type=pathlib.Path)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(" ".join(f"{v:.4f}" for v in measure()))
        return 0
    results: dict[str, list[list[float]]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {
            label: package_folder(root, pathlib.Path(tmp) / label)
            for label, root in (("before", args.before), ("after", args.after))
        }
        for r in range(args.rounds):
            for label, path in paths.items():
                # the farm first; what PYTHONPATH held already (dependencies) after it
                extra = os.environ.get("PYTHONPATH")
                env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(path), extra])))
                cmd = [sys.executable, "-P", __file__, "--child", "x", "x"]
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
                values = [float(v) for v in out.stdout.split()]
                results[label].append(values)
                print(f"round {r + 1} {label:6s} " + "  ".join(f"{v:.3f}" for v in values))
    for k, name in enumerate(NAMES):
        b = statistics.median(v[k] for v in results["before"])
        a = statistics.median(v[k] for v in results["after"])
        print(f"{name}: before {b:.3f} ms, after {a:.3f} ms, after / before {a / b:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
