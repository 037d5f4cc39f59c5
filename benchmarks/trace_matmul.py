"""trace(A @ B) at n = 3000, float64: tenloom against ``np.einsum("ij,ji->", A, B)`` and
``np.trace(A @ B)``, in one process on the same arrays, rounds interleaved (issue 22).

    python -P benchmarks/trace_matmul.py [--n 3000] [--rounds 15] [--threads 1] [--dtype float64]

Prints the median and minimum of each, tenloom's ratio to np.einsum, and the first call
(compile + run) separately. Rounds are interleaved, in an order that turns each round;
``np.trace(A @ B)`` (a whole GEMM) is timed 3 times after them.
``--sweep`` also times the band kernel (runtime/kernels/inner.py)
at other band and tile sizes, to choose them.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from tenloom.runtime.determinism import deterministic_mode

import tenloom as tl


def clock(f) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--sweep", action="store_true")
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    dt = np.dtype(args.dtype)
    A = rng.standard_normal((args.n, args.n)).astype(dt)
    B = rng.standard_normal((args.n, args.n)).astype(dt)
    if dt.kind == "c":
        A = A + 1j * rng.standard_normal(A.shape).astype(dt)
        B = B + 1j * rng.standard_normal(B.shape).astype(dt)
    expr = tl.trace(tl.asarray(A) @ tl.asarray(B))
    threads = args.threads
    first = clock(lambda: expr.evaluate(threads=threads))

    cases = {
        "tenloom": lambda: expr.evaluate(threads=threads),
        "np.einsum": lambda: np.einsum("ij,ji->", A, B),
    }
    if args.sweep:
        from tenloom.runtime.kernels import inner

        for band in (1 << 20, 1 << 22, 1 << 24):
            for tile in (1 << 17, 1 << 19):

                def banded(band=band, tile=tile):
                    keep = inner.BAND_BYTES, inner.TILE_BYTES
                    inner.BAND_BYTES, inner.TILE_BYTES = band, tile
                    try:
                        with deterministic_mode(False, threads):
                            inner.inner_product(A, B.T, dt)
                    finally:
                        inner.BAND_BYTES, inner.TILE_BYTES = keep

                cases[f"band {band >> 10} KiB tile {tile >> 10} KiB"] = banded
    times: dict[str, list[float]] = {k: [] for k in cases}
    for f in cases.values():  # warm-up
        f()
    names = list(cases)
    for r in range(args.rounds):  # the order turns round by round
        for k in names[r % len(names) :] + names[: r % len(names)]:
            times[k].append(clock(cases[k]))
    # np.trace(A @ B) runs a whole GEMM (about a second here) on every BLAS thread, whose
    # threads keep spinning a while after: timed last, on its own
    times["np.trace(A@B)"] = [clock(lambda: np.trace(A @ B)) for _ in range(3)]
    ref = np.einsum("ij,ji->", A, B)
    got = expr.evaluate(threads=threads)
    print(
        f"trace(A @ B), n={args.n}, {dt}, threads={threads}, {args.rounds} rounds interleaved; "
        f"tenloom first call (compile + run) {first * 1e3:.1f} ms; "
        f"|tenloom - einsum| / |einsum| = {abs(got - ref) / abs(ref):.1e}"
    )
    base = statistics.median(times["np.einsum"])
    for k, ts in times.items():
        med = statistics.median(ts)
        print(
            f"  {k:34s} median {med * 1e3:8.2f} ms  min {min(ts) * 1e3:8.2f} ms  "
            f"{med / base:5.2f}x np.einsum"
        )


if __name__ == "__main__":
    main()
