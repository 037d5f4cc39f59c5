"""tl.fft on the CPU: tenloom's compiled plan (scipy.fft kernel, ``threads=1`` and 2) against
numpy.fft and scipy.fft called directly, on a few batched transforms.

    python benchmarks/fft_cpu.py [--rounds 30]

Why the CPU kernel is scipy.fft (runtime/backends/cpu.py) and not the numpy.fft reference:
the same pocketfft, but ``workers=`` spreads a batch over the evaluation's threads, and
single precision stays single on every NumPy (numpy.fft before 2.0 computes in double).
The contenders are timed in turn within each round, in an order drawn afresh each round, after
a warm-up; each figure is the median over the rounds, in milliseconds.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import numpy as np
import scipy.fft

import tenloom as tl

CASES = {
    "rfft (256, 4096) float32": ("rfft", (256, 4096), "float32", {}),
    "fft (256, 4096) complex64": ("fft", (256, 4096), "complex64", {}),
    "fftn (512, 512) complex128": ("fftn", (512, 512), "complex128", {}),
    "irfftn (64, 64, 33) complex128": ("irfftn", (64, 64, 33), "complex128", {}),
}


def _data(shape, dtype, rng):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    for label, (name, shape, dtype, kw) in CASES.items():
        x = _data(shape, dtype, rng)
        p = tl.placeholder(shape, dtype)
        out = getattr(tl.fft, name)(p, **kw)
        plan1 = tl.compile(out, inputs=[p], threads=1)
        plan2 = tl.compile(out, inputs=[p], threads=2)
        contenders = {
            "numpy.fft": lambda: getattr(np.fft, name)(x, **kw),
            "scipy.fft": lambda: getattr(scipy.fft, name)(x, **kw),
            "scipy.fft workers=2": lambda: getattr(scipy.fft, name)(x, workers=2, **kw),
            "tenloom threads=1": lambda: plan1(x)[0],
            "tenloom threads=2": lambda: plan2(x)[0],
        }
        want = getattr(np.fft, name)(x, **kw)
        for fn in contenders.values():
            got = np.asarray(fn())
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
        times: dict[str, list[float]] = {k: [] for k in contenders}
        order = list(contenders)
        for _ in range(args.rounds):
            random.shuffle(order)
            for k in order:
                t0 = time.perf_counter()
                contenders[k]()
                times[k].append(time.perf_counter() - t0)
        print(label)
        for k, ts in times.items():
            print(f"  {k:22s} {1e3 * statistics.median(ts):8.2f} ms")


if __name__ == "__main__":
    main()
