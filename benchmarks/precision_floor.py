"""The error floor of a lowered precision on a workload of benchmarks/precision.py (issue 23):
its input tensors rounded to TF32, bfloat16 or float16 (round to nearest) and everything else
contracted exactly, in float64. Any execution at that precision rounds its inputs at least
that much, so no TF32 GEMM can be more accurate than the "tf32" row.

    python -P benchmarks/precision_floor.py [--dims 8 8] [--D 8]

Runs on the CPU (about 40 s for lattice 8x8 D=8 on 2 cores). The arrays are precision.py's:
``workloads.scaled_arrays`` of ``cotengra.utils.lattice_equation(dims, D, seed=1)``, seed 1.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


def _round_bits(x: np.ndarray, drop: int) -> np.ndarray:
    """float32 ``x`` to the nearest value with its ``drop`` low mantissa bits zero (ties to
    even): 13 bits is TF32 (a 10-bit mantissa), 16 bfloat16."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    lsb = (b >> drop) & 1
    b = ((b + (1 << (drop - 1)) - 1 + lsb) >> drop) << drop
    return b.astype(np.uint32).view(np.float32)


ROUNDINGS = {
    "float32": lambda x: x,
    "tf32": lambda x: _round_bits(x, 13),
    "bf16": lambda x: _round_bits(x, 16),
    "fp16": lambda x: x.astype(np.float16).astype(np.float32),
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dims", type=int, nargs=2, default=[8, 8])
    p.add_argument("--D", type=int, default=8)
    args = p.parse_args(argv)
    from cotengra.utils import lattice_equation
    from workloads import scaled_arrays

    import tenloom as tl

    inputs, _, _, sizes = lattice_equation(list(args.dims), d_min=args.D, d_max=args.D, seed=1)
    arrays = scaled_arrays(inputs, sizes, 1)
    labels: dict = {}

    def value(arrs) -> float:
        ops = []
        for a, term in zip(arrs, inputs):
            ops += [tl.asarray(a), [labels.setdefault(x, len(labels)) for x in term]]
        return float(tl.einsum(*ops, []).evaluate())

    t0 = time.perf_counter()
    ref = value(arrays)
    print(
        f"lattice {args.dims[0]}x{args.dims[1]} D={args.D}: float64 value {ref:.6g} "
        f"({time.perf_counter() - t0:.1f} s)"
    )
    f32 = [a.astype(np.float32) for a in arrays]
    for name, rnd in ROUNDINGS.items():
        v = value([rnd(a).astype(np.float64) for a in f32])
        err = abs(v - ref) / abs(ref)
        print(f"inputs rounded to {name:8s} the rest exact: relative error {err:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
