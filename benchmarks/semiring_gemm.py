"""The max-plus GEMM kernel of semiring einsums (runtime/kernels/semiring.py), C[i, j] =
max_k A[i, k] + B[k, j], against its peers in one process (issue 24).

CPU (float32 by default, ``--n`` cubed):

- ``tenloom pair_kernel``: ``pair_kernel((0, 1), (1, 2), (0, 2), "max_plus")`` as the CPU
  backend runs it for a SEMIRING_EINSUM node (layout, the operand range checks that decide
  whether tropical-gemm's answer is right, the GEMM);
- ``tenloom gemm``: the GEMM core ``gemm(a[None], b[None], "max_plus")``;
- ``tropical_gemm 2d``: the bare library's 2-D call, ``tropical_gemm.maxplus_matmul_2d(a, b)``;
- ``tropical_gemm batched``: its batched call on the (1, n, n) stacks,
  ``maxplus_matmul_batched_with_argmax`` (values and argmax indices), which tenloom calls for
  floats: it ran faster than the 2-D one here;
- ``tenloom blocked NumPy``: the fallback kernel (``USE_TROPICAL_GEMM = False``: blocks of rows
  by blocks of k, broadcast sums reduced with ``max``);
- ``NumPy broadcast-max loop``: one rank-1 update per k, ``np.maximum(c, a[:, k, None] + b[k],
  out=c)`` (``--numpy-rounds`` of it only: seconds per call at 2048).

GPU (when CuPy finds one): the RawKernel (runtime/backends/cuda_semiring.py) against a CuPy
reference (the same blocked kernel on CuPy arrays: broadcast sums and ``cupy.max``), float32
and float64, timed with CUDA events after a warm-up.

Rounds are interleaved (the order turns each round) after a warm-up; medians and minima, and
each runner's median over the faster bare tropical_gemm call's (GPU: over the RawKernel's). All
results are checked equal to tropical_gemm's (GPU: to each other).

    python -P benchmarks/semiring_gemm.py [--n 2048] [--rounds 7] [--json out.json]
    python -P benchmarks/semiring_gemm.py --quick          # n = 256, a few seconds
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np
from tenloom.runtime.kernels import semiring as S


def clock(f) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def numpy_loop(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The plain NumPy broadcast-max loop: one rank-1 max-plus update per k."""
    c = a[:, 0, None] + b[0]
    for k in range(1, a.shape[1]):
        np.maximum(c, a[:, k, None] + b[k], out=c)
    return c


def blocked(a, b):
    S.USE_TROPICAL_GEMM = False
    try:
        return S.gemm(a[None], b[None], "max_plus")[0]
    finally:
        S.USE_TROPICAL_GEMM = True


def interleaved(runners: dict, rounds: int, counts: dict | None = None) -> dict:
    """name -> list of seconds; the order turns each round (a warm-up call first)."""
    names = list(runners)
    for name in names:
        runners[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            if counts and len(times[name]) >= counts.get(name, rounds):
                continue
            times[name].append(clock(runners[name]))
    return times


def table(times: dict, base: str, title: str) -> list[dict]:
    ref = statistics.median(times[base])
    print(f"\n{title}")
    print(f"{'runner':34} {'median s':>10} {'min s':>10} {'calls':>6} {'/ ' + base:>22}")
    rows = []
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append({"runner": name, "median_s": med, "min_s": min(ts), "calls": len(ts)})
        print(f"{name:34} {med:10.4f} {min(ts):10.4f} {len(ts):6d} {med / ref:22.3f}")
    return rows


def cpu(n: int, dtype: str, rounds: int, numpy_rounds: int) -> list[dict]:
    import tropical_gemm

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(dtype)
    b = rng.standard_normal((n, n)).astype(dtype)
    suffix = "" if dtype == "float32" else "_f64"
    bare = getattr(tropical_gemm, f"maxplus_matmul_2d{suffix}")
    batched = getattr(tropical_gemm, f"maxplus_matmul_batched_with_argmax{suffix}")
    a3, b3 = a[None], b[None]
    pair = S.pair_kernel((0, 1), (1, 2), (0, 2), "max_plus", (a.shape, b.shape))
    want = bare(a, b)
    runners = {
        "tropical_gemm 2d": lambda: bare(a, b),
        "tropical_gemm batched": lambda: batched(a3, b3)[0],
        "tenloom pair_kernel": lambda: pair(a, b),
        "tenloom gemm": lambda: S.gemm(a3, b3, "max_plus"),
        "tenloom blocked NumPy": lambda: blocked(a, b),
        "NumPy broadcast-max loop": lambda: numpy_loop(a, b),
    }
    for name, f in runners.items():
        got = np.asarray(f()).reshape(n, n)
        assert np.array_equal(got, want), f"{name} disagrees with tropical_gemm"
    del runners["NumPy broadcast-max loop"]  # checked above; timed below for fewer rounds
    times = interleaved(runners, rounds)
    times["NumPy broadcast-max loop"] = [
        clock(lambda: numpy_loop(a, b)) for _ in range(numpy_rounds)
    ]
    meds = {k: statistics.median(times[k]) for k in ("tropical_gemm 2d", "tropical_gemm batched")}
    return table(times, min(meds, key=meds.get), f"CPU max-plus GEMM {n}^3 {dtype}")


def gpu(n: int, rounds: int) -> list[dict]:
    try:
        import cupy as cp

        if cp.cuda.runtime.getDeviceCount() == 0:
            return []
    except Exception:
        return []
    from tenloom.runtime.backends import cuda_semiring

    rows = []
    for dtype in ("float32", "float64"):
        rng = np.random.default_rng(1)
        a = cp.asarray(rng.standard_normal((1, n, n)).astype(dtype))
        b = cp.asarray(rng.standard_normal((1, n, n)).astype(dtype))

        def raw():
            return cuda_semiring.gemm(a, b, "max_plus")

        def ref():
            return S._blocked(a, b, "max_plus", cp)

        assert bool((raw() == ref()).all()), "the RawKernel disagrees with the CuPy reference"

        def timed(f):
            def run():
                start, stop = cp.cuda.Event(), cp.cuda.Event()
                start.record()
                f()
                stop.record()
                stop.synchronize()
                return cp.cuda.get_elapsed_time(start, stop) / 1e3

            return run

        runners = {"RawKernel": timed(raw), "CuPy broadcast reference": timed(ref)}
        for f in runners.values():
            f()
        times: dict[str, list[float]] = {k: [] for k in runners}
        for r in range(rounds):
            for name in list(runners)[r % 2 :] + list(runners)[: r % 2]:
                times[name].append(runners[name]())
        name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
        rows += table(times, "RawKernel", f"GPU ({name}) max-plus GEMM {n}^3 {dtype}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--numpy-rounds", type=int, default=1)
    ap.add_argument("--gpu-n", type=int, default=None, help="GPU size (default: --n)")
    ap.add_argument("--quick", action="store_true", help="n = 256")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    n = 256 if args.quick else args.n
    print(f"machine: {platform.processor() or platform.machine()}, {platform.node()}")
    rows = cpu(n, args.dtype, args.rounds, max(1, args.numpy_rounds))
    rows_gpu = gpu(args.gpu_n or n, args.rounds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"n": n, "dtype": args.dtype, "cpu": rows, "gpu": rows_gpu}, f, indent=1)


if __name__ == "__main__":
    main()
