"""precision= on CUDA (issue 23): the relative error of each precision against float64 per
workload, and the rate (TFLOP/s) of "highest", "tf32", "bf16" and "fp16" on lattice 8x8 D=8
float32 (goal: tf32 >= 4x the float32 rate, to resolve >= 3x, at relative error <= 1e-3).

    python benchmarks/precision.py [--device cuda:0] [--repeats 5] [--quick] [--out FILE]

Workloads (arrays from numpy.random.default_rng(seed).standard_normal, scaled so the value is
O(1): benchmarks/workloads.py ``scaled_arrays``), each a scalar:

- lattice 8x8 D=8: ``cotengra.utils.lattice_equation([8, 8], d_min=8, d_max=8, seed=1)``;
- MPS/MPO <psi|H|psi>: L=40, chi=256, MPO bond 5, built site by site (workloads.py, seed 2);
- random 3-regular: ``cotengra.utils.randreg_equation(60, 3, d_min=4, d_max=4, seed=1)``.

The float64 reference is the same network in float64 on the same device (same path); each
precision's value is the float32 network's. The rate is the plan's flops (``plan.cost.flops``:
the contractions' multiply-adds x 2) over the median of ``--repeats`` timed calls after one
warm-up, every precision on the same compiled graph (one path search: precision= changes no
pass), in one process, one after the other. Raw cuBLAS rates of an 8192^3 GEMM at each
precision (runtime/backends/cuda_precision.py ``gemm``) are printed beside them for scale.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import statistics
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
PRECISIONS = ("highest", "tf32", "bf16", "fp16")
# one bounded path search for every run (the "auto" search's budget follows the predicted run
# time, minutes on a lattice): the float32 runs of all precisions share its graph
OPTIMIZE = {"method": "hyper", "max_repeats": 16}


def lattice(quick: bool):
    from cotengra.utils import lattice_equation
    from workloads import scaled_arrays

    dims, d = ([6, 6], 6) if quick else ([8, 8], 8)
    inputs, output, _, sd = lattice_equation(dims, d_min=d, d_max=d, seed=1)
    return f"lattice {dims[0]}x{dims[1]} D={d}", inputs, output, scaled_arrays(inputs, sd, 1)


def randreg(quick: bool):
    from cotengra.utils import randreg_equation
    from workloads import scaled_arrays

    n = 30 if quick else 60
    inputs, output, _, sd = randreg_equation(n, 3, d_min=4, d_max=4, seed=1)
    return f"random 3-regular n={n} D=4", inputs, output, scaled_arrays(inputs, sd, 1)


def network(inputs, output, arrays, dtype):
    """The network as one tenloom einsum over integer labels (the order pass splits it)."""
    import tenloom as tl

    labels = {x: i for i, x in enumerate(sorted({x for t in inputs for x in t}, key=str))}
    args = []
    for t, a in zip(inputs, arrays):
        args += [tl.asarray(a.astype(dtype)), [labels[x] for x in t]]
    return tl.einsum(*args, [labels[x] for x in output])


def mps_mpo(quick: bool, dtype):
    from workloads import mps_mpo_arrays, mps_mpo_expectation

    import tenloom as tl

    L, chi = (12, 64) if quick else (40, 256)
    mps, mpo = mps_mpo_arrays(L, chi, 5, 2, seed=2)
    t = mps_mpo_expectation(
        [tl.asarray(a.astype(dtype)) for a in mps], [tl.asarray(w.astype(dtype)) for w in mpo]
    )
    return f"MPS/MPO <psi|H|psi> L={L} chi={chi} D=5", t


def errors(device: str, quick: bool) -> list[dict]:
    """Relative error |value - float64| / |float64| of each precision, per workload."""
    import tenloom as tl

    rows = []
    cases = []
    for make in (lattice, randreg):
        title, inputs, output, arrays = make(quick)
        cases.append(
            (
                title,
                network(inputs, output, arrays, "float32"),
                network(inputs, output, arrays, "float64"),
            )
        )
    title, t32 = mps_mpo(quick, "float32")
    cases.append((title, t32, mps_mpo(quick, "float64")[1]))
    for title, t32, t64 in cases:
        (ref,) = tl.evaluate(t64, device=device, optimize=OPTIMIZE)
        row = {"workload": title, "float64": float(ref)}
        for p in PRECISIONS:
            (v,) = tl.evaluate(t32, device=device, precision=p, optimize=OPTIMIZE)
            row[p] = abs(float(v) - float(ref)) / abs(float(ref))
        rows.append(row)
        print(
            f"{title:<40} "
            + " ".join(f"{p}={row[p]:.2e}" for p in PRECISIONS)
            + f"  (float64 value {float(ref):.6g})",
            flush=True,
        )
    return rows


def rates(device: str, quick: bool, repeats: int) -> dict:
    """TFLOP/s of each precision on the lattice, one compiled graph."""
    import cupy as cp

    import tenloom as tl

    title, inputs, output, arrays = lattice(quick)
    t = network(inputs, output, arrays, "float32")
    t0 = time.perf_counter()
    plans = {
        p: tl.compile([t], [], device=device, precision=p, optimize=OPTIMIZE) for p in PRECISIONS
    }
    compile_s = time.perf_counter() - t0
    flops = plans["highest"].cost.flops
    assert all(pl.cost.flops == flops for pl in plans.values())  # one graph
    out = {"workload": title, "flops": flops, "compile_s": compile_s, "seconds": {}}
    times: dict[str, list[float]] = {p: [] for p in PRECISIONS}
    for p in PRECISIONS:  # warm-up
        plans[p]()
    for _ in range(repeats):  # interleaved
        for p in PRECISIONS:
            cp.cuda.Device().synchronize()
            s = time.perf_counter()
            plans[p]()  # to_host: waits for the value
            times[p].append(time.perf_counter() - s)
    base = statistics.median(times["highest"])
    for p in PRECISIONS:
        med = statistics.median(times[p])
        out["seconds"][p] = med
        print(
            f"{title} {p:<8} {med * 1e3:9.2f} ms  {flops / med / 1e12:7.2f} TFLOP/s  "
            f"{base / med:5.2f}x highest",
            flush=True,
        )
    out["tflops"] = {p: flops / s / 1e12 for p, s in out["seconds"].items()}
    return out


def gemm_rates(n: int = 8192, repeats: int = 5) -> dict:
    """cuBLAS's rate of one n^3 float32 GEMM at each precision (cupy.matmul for highest)."""
    import cupy as cp
    from tenloom.runtime.backends.cuda_precision import gemm

    rng = cp.random.default_rng(0)
    a = rng.standard_normal((1, n, n), dtype=cp.float32)
    b = rng.standard_normal((1, n, n), dtype=cp.float32)
    out = {}
    for p in PRECISIONS:

        def run(p=p):
            return cp.matmul(a, b) if p == "highest" else gemm(a, b, p, np.dtype(np.float32))

        run()
        ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
        ts = []
        for _ in range(repeats):
            ev0.record()
            run()
            ev1.record()
            ev1.synchronize()
            ts.append(cp.cuda.get_elapsed_time(ev0, ev1) / 1e3)
        out[p] = 2 * n**3 / statistics.median(ts) / 1e12
        print(f"cuBLAS {n}^3 GEMM {p:<8} {out[p]:7.1f} TFLOP/s", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="smaller networks (a smoke run)")
    ap.add_argument("--out", default=None, help="a JSON file for the results")
    args = ap.parse_args()
    import cupy as cp

    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    print(f"device {args.device}: {name}; {platform.python_version()}", flush=True)
    result = {"device": name, "gemm": gemm_rates()}
    result["errors"] = errors(args.device, args.quick)
    result["rates"] = rates(args.device, args.quick, args.repeats)
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
