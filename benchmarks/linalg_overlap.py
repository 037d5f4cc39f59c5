"""Do independent decompositions gain from running at the same time?

k independent SVDs (or eigh) of N x N float64 matrices in one ``tl.evaluate``, run with
``threads=1`` (one after the other) and ``threads=k`` (runtime/scheduler.py: each on its own
worker; on CUDA each worker drives its own stream), against the same calls in NumPy/CuPy one
after the other. This measures what the default thread policy of ``evaluate`` (the
``threads=None`` rule in runtime/session.py) relies on.

    python benchmarks/linalg_overlap.py [--device cuda] [--sizes 256 512 1024] [--k 2 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

import tenloom as tl


def _median_time(fn, repeat: int) -> float:
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--sizes", type=int, nargs="+", default=[128, 256, 512, 1024])
    p.add_argument("--k", type=int, nargs="+", default=[2, 4])
    p.add_argument("--op", choices=["svd", "eigh", "qr"], default="svd")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    cuda = a.device.startswith("cuda")
    if cuda:
        import cupy as cp

        sync = cp.cuda.Device().synchronize
    else:
        sync = lambda: None  # noqa: E731
    for n in a.sizes:
        for k in a.k:
            mats = [rng.normal(size=(n, n)) for _ in range(k)]
            if a.op == "eigh":
                mats = [m + m.T for m in mats]
            ps = [tl.placeholder((n, n), "float64", name=f"a{i}") for i in range(k)]
            if a.op == "svd":
                outs = [tl.linalg.svdvals(x) for x in ps]
            elif a.op == "eigh":
                outs = [tl.linalg.eigvalsh(x) for x in ps]
            else:
                outs = [tl.linalg.qr(x, "r") for x in ps]
            feed = dict(zip(ps, mats))  # host arrays: the copies are timed on both sides

            def run(threads, feed=feed, outs=outs):
                tl.evaluate(*outs, feed=feed, device=a.device, threads=threads, to_host=False)
                sync()

            def peer(mats=mats, feed=feed):
                xp = cp if cuda else np
                for m in mats:
                    m = cp.asarray(m) if cuda else m
                    if a.op == "svd":
                        xp.linalg.svd(m, compute_uv=False)
                    elif a.op == "eigh":
                        xp.linalg.eigvalsh(m)
                    else:
                        xp.linalg.qr(m, mode="r")
                sync()

            row = {"device": a.device, "op": a.op, "n": n, "k": k}
            for _ in range(2):  # alternate to share the machine's noise
                row.setdefault("seq", []).append(_median_time(lambda: run(1), a.repeat))
                row.setdefault("par", []).append(_median_time(lambda: run(k), a.repeat))
                row.setdefault("peer", []).append(_median_time(peer, a.repeat))
            for key in ("seq", "par", "peer"):
                row[key] = min(row[key])
            row["speedup"] = row["seq"] / row["par"]
            rows.append(row)
            print(
                f"{a.device:6s} {a.op:4s} n={n:5d} k={k}: one after another {row['seq']:.4f} s, "
                f"threads={k} {row['par']:.4f} s (x{row['speedup']:.2f}), "
                f"peer sequential {row['peer']:.4f} s",
                flush=True,
            )
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"cpus": os.cpu_count(), "rows": rows}, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
