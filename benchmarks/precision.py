"""precision= on CUDA (issue 23): the relative error of each precision against float64 per
workload, and the rate (TFLOP/s) of "highest", "tf32", "bf16" and "fp16" on lattice 8x8 D=8
float32 (goal: tf32 >= 4x the float32 rate, to resolve >= 3x, at relative error <= 1e-3) and
on lattice 6x6 D=16 float32, whose contractions are compute-bound.

    python benchmarks/precision.py [--device cuda:0] [--repeats 5] [--quick] [--out FILE]

Workloads (arrays from numpy.random.default_rng(seed).standard_normal, scaled so the value is
O(1): benchmarks/workloads.py ``scaled_arrays``), each a scalar:

- lattice 8x8 D=8 and 6x6 D=16: ``cotengra.utils.lattice_equation(dims, d_min=D, d_max=D,
  seed=1)``;
- MPS/MPO <psi|H|psi>: L=40, chi=256, MPO bond 5, built site by site (workloads.py's arrays,
  seed 2);
- random 3-regular: ``cotengra.utils.randreg_equation(60, 3, d_min=4, d_max=4, seed=1)``.

The float64 reference is the same network in float64 on the same device; each precision's
value is the float32 network's ("tf32-rn": TF32 with the operands rounded to nearest TF32
first). The rate is the plan's flops (``plan.cost.flops``: the contractions'
multiply-adds x 2) over the median of ``--repeats`` timed calls after one warm-up, every
precision on the same compiled graph (one path search: precision= changes no pass), in one
process, interleaved. Beside it: the rate of an 8192^3 cuBLAS GEMM at each precision
(runtime/backends/cuda_precision.py ``gemm``), the copy bandwidth, and the roofline of the
plan's contractions at those rates (``roofline``): what the precision alone could give.
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
# tenloom's default "auto" path search: the same path in every process (cotengra's hyper search
# is not seeded: two runs of one script found lattice 8x8 D=8 paths 2x apart in time). The
# float32 runs of all precisions share one graph. The device run carries the disk cache of
# these searches (TENLOOM_CACHE_DIR), made beforehand on another machine with the same code.
OPTIMIZE = None
TF32_RN = "tf32-rn"


def lattice(quick: bool, dims=(8, 8), d=8):
    from cotengra.utils import lattice_equation
    from workloads import scaled_arrays

    dims, d = ([6, 6], 6) if quick else (list(dims), d)
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
    """W2's <psi|H|psi>, site by site (workloads.py ``mps_mpo_expectation``, whose float64
    environment would make every contraction float64), in ``dtype`` throughout."""
    from workloads import mps_mpo_arrays

    import tenloom as tl

    L, chi = (12, 64) if quick else (40, 256)
    mps, mpo = mps_mpo_arrays(L, chi, 5, 2, seed=2)
    env = tl.ones((1, 1, 1), dtype=dtype)
    for a, w in zip(mps, mpo):
        a = tl.asarray(a.astype(dtype))
        env = tl.einsum("abc,aid,bije,cjf->def", env, a, tl.asarray(w.astype(dtype)), a)
    return f"MPS/MPO <psi|H|psi> L={L} chi={chi} D=5", tl.sum(env)


def errors(device: str, quick: bool) -> list[dict]:
    """Relative error |value - float64| / |float64| of each precision, per workload; "tf32-rn"
    rounds the operands to the nearest TF32 value before cuBLAS's TF32 GEMM
    (cuda_precision.py ``TF32_ROUNDING``)."""
    from tenloom.runtime.backends import cuda_precision

    import tenloom as tl

    rows = []
    cases = []
    makers = [lattice, randreg, lambda q: lattice(q, (6, 6), 16)]
    for make in makers[:2] if quick else makers:
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
        for p in (*PRECISIONS, TF32_RN):
            cuda_precision.TF32_ROUNDING = "nearest" if p == TF32_RN else "hardware"
            q = "tf32" if p == TF32_RN else p
            (v,) = tl.evaluate(t32, device=device, precision=q, optimize=OPTIMIZE)
            row[p] = abs(float(v) - float(ref)) / abs(float(ref))
        cuda_precision.TF32_ROUNDING = "hardware"
        rows.append(row)
        print(
            f"{title:<40} "
            + " ".join(f"{p}={row[p]:.2e}" for p in (*PRECISIONS, TF32_RN))
            + f"  (float64 value {float(ref):.6g})",
            flush=True,
        )
    return rows


def roofline(graph, peaks: dict, bandwidth: float) -> dict:
    """Seconds each precision would take if every CONTRACT ran at the GEMM rate measured for
    it or at the copy bandwidth, whichever binds (operands and result read or written once, in
    float32; copies and other ops not counted): how far the precision alone can go."""
    from tenloom.graph.ops import Op
    from tenloom.graph.ops.contract import contract_layout

    out = {}
    for p, peak in peaks.items():
        total = 0.0
        for n in graph.order:
            if n.op is Op.CONTRACT:
                a, b = n.inputs
                g = contract_layout(n.attrs, a.shape, b.shape)
                flops = 2 * g.nb * g.nl * g.nk * g.nr
                nbytes = n.dtype.itemsize * g.nb * (g.nl * g.nk + g.nk * g.nr + g.nl * g.nr)
                total += max(flops / (peak * 1e12), nbytes / bandwidth)
        out[p] = total
    return out


def rates(device: str, quick: bool, repeats: int, peaks: dict, bandwidth: float, shape) -> dict:
    """TFLOP/s of each precision on a lattice, one compiled graph."""
    import cupy as cp
    from tenloom.runtime.backends import cuda_precision

    import tenloom as tl

    title, inputs, output, arrays = lattice(quick, *shape)
    t = network(inputs, output, arrays, "float32")
    t0 = time.perf_counter()
    plans = {
        p: tl.compile([t], [], device=device, precision=p, optimize=OPTIMIZE) for p in PRECISIONS
    }
    compile_s = time.perf_counter() - t0
    flops = plans["highest"].cost.flops
    assert all(pl.cost.flops == flops for pl in plans.values())  # one graph
    bound = roofline(plans["highest"].optimized, peaks, bandwidth)
    bound[TF32_RN] = bound["tf32"]
    plans[TF32_RN] = plans["tf32"]  # with TF32_ROUNDING = "nearest"
    names = (*PRECISIONS, TF32_RN)
    out = {"workload": title, "flops": flops, "compile_s": compile_s, "seconds": {}}
    out["roofline_s"] = bound
    times: dict[str, list[float]] = {p: [] for p in names}
    for _ in range(repeats + 1):  # interleaved; the first round warms up
        for p in names:
            cuda_precision.TF32_ROUNDING = "nearest" if p == TF32_RN else "hardware"
            cp.cuda.Device().synchronize()
            s = time.perf_counter()
            plans[p]()  # to_host: waits for the value
            times[p].append(time.perf_counter() - s)
    cuda_precision.TF32_ROUNDING = "hardware"
    base = statistics.median(times["highest"][1:])
    for p in names:
        med = statistics.median(times[p][1:])
        out["seconds"][p] = med
        print(
            f"{title} {p:<8} {med * 1e3:9.2f} ms  {flops / med / 1e12:7.2f} TFLOP/s  "
            f"{base / med:5.2f}x highest  (roofline {bound[p] * 1e3:7.2f} ms, "
            f"{bound['highest'] / bound[p]:.2f}x)",
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


def copy_bandwidth(n: int = 1 << 28) -> float:
    """Bytes read and written per second by a device-to-device copy of n float32s."""
    import cupy as cp

    x = cp.ones(n, cp.float32)
    y = cp.empty_like(x)
    ts = []
    for _ in range(5):
        ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
        ev0.record()
        y[...] = x
        ev1.record()
        ev1.synchronize()
        ts.append(cp.cuda.get_elapsed_time(ev0, ev1) / 1e3)
    bw = 2 * 4 * n / statistics.median(ts)
    print(f"copy {bw / 1e12:.2f} TB/s (read + write)", flush=True)
    return bw


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
    result = {"device": name, "gemm": gemm_rates(), "copy_bytes_per_s": copy_bandwidth()}
    result["errors"] = errors(args.device, args.quick)
    result["rates"] = [
        rates(args.device, args.quick, args.repeats, result["gemm"], result["copy_bytes_per_s"], s)
        for s in (((8, 8), 8), ((6, 6), 16))[: 1 if args.quick else 2]
    ]
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
