"""The SVD routes on a DMRG's own splits, on CUDA (issue 20): which route each split takes and
what the others would take on it, and a per-sweep breakdown of a GPU sweep.

    python benchmarks/dmrg_splits.py [--L 20] [--chi 512] [--warm 3] [--sweeps 4]

A DMRG of the Heisenberg chain (examples/dmrg.py) runs ``--warm`` sweeps on the GPU. The next
sweep keeps every split matrix with both sides at least 128. Each is then timed (the median of
3 samples of ``harness.time_calls``, synchronized) through cuSOLVER's gesvd as tenloom's
fallback calls it, through the SVD kernel as it is (its route counted), and through the
kernel with the levels off (``GRAM_LEVELS = 1``), with the singular values' error against
NumPy's and U's and V's orthonormality. Then ``--sweeps`` more sweeps run with a
synchronization after every split: the split's share of each sweep, and any split over 1.4x
its fastest time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import dmrg as ex  # noqa: E402
from harness import time_calls  # noqa: E402


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--L", type=int, default=20)
    p.add_argument("--chi", type=int, default=512)
    p.add_argument("--warm", type=int, default=3)
    p.add_argument("--sweeps", type=int, default=4)
    args = p.parse_args(argv)

    import cupy as cp
    import cupyx
    from tenloom.graph.ops.decompositions import svd_arrays
    from tenloom.runtime.backends import cuda, cuda_svd

    sync = cp.cuda.Device().synchronize
    mps = ex.random_mps(args.L, 2, args.chi, seed=7)
    run = ex.DMRG(ex.heisenberg_mpo(), args.L, args.chi, cutoff=1e-14, device="cuda", mps=mps)
    for _ in range(args.warm):
        run.sweep()
    k = run.kernels
    seen: list = []
    orig = {n: getattr(k, n) for n in ("split_right", "split_left")}

    def keep(f):
        def g(theta):
            a, b, c, d = theta.shape
            if min(a * b, c * d) >= 128:
                seen.append(theta.reshape(a * b, c * d).copy())
            return f(theta)

        return g

    for n, f in orig.items():
        setattr(k, n, keep(f))
    run.sweep()
    for n, f in orig.items():
        setattr(k, n, f)

    def timed(f, reps=3):  # the median of the harness's samples, in ms, synchronized
        return time_calls(lambda: (f(), sync()), reps)[0]["median_s"] * 1e3

    def gesvd(x):  # tenloom's fallback (runtime/backends/cuda.py _svd), tall ones transposed
        with cupyx.errstate(linalg="raise"):
            m, n = x.shape
            if m < cuda.TALL_BY_TRANSPOSE * n:
                return svd_arrays(x, False)
            u, s, vh = svd_arrays(x.T.conj(), False)
            return vh.T.conj(), s, u.T.conj()

    def host(x):
        return svd_arrays(x, False)

    print(f"{len(seen)} splits of sweep {args.warm + 1}, L={args.L} chi={args.chi}")
    for x in seen:
        ref = np.linalg.svd(cp.asnumpy(x), compute_uv=False)
        line = [f"{x.shape[0]:5d} x {x.shape[1]:5d}: gesvd {timed(lambda: gesvd(x)):6.1f} ms"]
        for label, levels in (("kernel", cuda_svd.GRAM_LEVELS), ("levels off", 1)):
            saved = cuda_svd.GRAM_LEVELS
            cuda_svd.GRAM_LEVELS = levels
            try:
                kern = cuda_svd.svd_kernel(gesvd, host)
                before = dict(cuda_svd.COUNTERS)
                t = timed(lambda: kern(x, False))
                routes = {a: b - before[a] for a, b in cuda_svd.COUNTERS.items() if b != before[a]}
                u, s, vh = (cp.asnumpy(y) for y in kern(x, False))
            finally:
                cuda_svd.GRAM_LEVELS = saved
            err = np.abs(s - ref).max() / ref[0]
            orth = max(
                np.abs(u.conj().T @ u - np.eye(u.shape[1])).max(),
                np.abs(vh @ vh.conj().T - np.eye(vh.shape[0])).max(),
            )
            line.append(f"{label} {t:6.1f} ms (s err {err:.0e}, orth {orth:.0e}) {routes}")
        print(" | ".join(line), flush=True)

    rec: list = []

    def clocked(name, f):
        def g(theta):
            c0 = dict(cuda_svd.COUNTERS)
            t = time.perf_counter()
            out = f(theta)
            sync()
            routes = tuple(a for a in c0 if cuda_svd.COUNTERS[a] != c0[a])
            a, b, c, d = theta.shape
            rec.append((name, (a * b, c * d), time.perf_counter() - t, routes))
            return out

        return g

    for n, f in orig.items():
        setattr(k, n, clocked(n, f))
    fastest: dict = {}
    for i in range(args.sweeps):
        rec.clear()
        time.sleep(0.5)
        t = time.perf_counter()
        run.sweep()
        sync()
        total = time.perf_counter() - t
        split = sum(r[2] for r in rec)
        print(f"sweep {i + 1}: {total:.3f} s, splits {split:.3f} s, the rest {total - split:.3f} s")
        for name, shape, dt, routes in rec:
            key = (name, shape)
            if i and key in fastest and dt > 1.4 * fastest[key] + 0.003:
                ms = f"{dt * 1e3:.1f} ms (fastest {fastest[key] * 1e3:.1f})"
                print(f"   slow: {name} {shape[0]} x {shape[1]} {ms} {routes}")
            fastest[key] = min(fastest.get(key, 1e9), dt)


if __name__ == "__main__":
    main()
