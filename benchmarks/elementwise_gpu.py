"""issue 23: the 2000-op elementwise chain (W9's, benchmarks/workloads.py ``chain_ops``) on one
GPU at 1e8 float32 elements, tenloom against jax.jit and torch.compile in one process.

    python benchmarks/elementwise_gpu.py [--n 100000000] [--repeats 5] [--json F] [--no-torch]

- tenloom ``tl.compile`` of the chain with its input a placeholder, called with a CuPy array
  (to_host=False; captured as a CUDA graph from its second call);
- tenloom ``evaluate`` of the lazy chain on a host constant: a writeable NumPy array, which
  every call copies in again (tenloom reads in-place changes; a read-only array is copied once);
- jax.jit of the same function on a device array;
- torch.compile (inductor) of the same function on a CUDA tensor, where it works here.

Every result is compared with tenloom's (max abs difference; the chain stays in [0, 1]). Times
are the median of --repeats calls after a warm-up, each call waited for; "first" is the first
call in this process, compilation included (``tl.compile`` and CuPy's kernel compilation, with
CuPy's on-disk kernel cache pointed at a fresh folder unless CUPY_CACHE_DIR is set, so no
earlier run's kernels are reused). Prints a table and writes --json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from workloads import chain_ops  # noqa: E402

BLOCKS = 250  # 2000 ops


def timed(fn, sync, repeats: int, what: str = "") -> dict:
    print(f"[{time.strftime('%H:%M:%S')}] {what} ...", flush=True)
    t0 = time.perf_counter()
    out = fn()
    sync()
    first = time.perf_counter() - t0
    for _ in range(2):
        fn()
        sync()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append(time.perf_counter() - t0)
    med = statistics.median(ts)
    print(
        f"[{time.strftime('%H:%M:%S')}] {what}: first {first:.2f} s, {med * 1e3:.2f} ms", flush=True
    )
    return {"first_s": first, "median_s": med, "out": out}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000_000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", default=None)
    p.add_argument("--no-torch", action="store_true", help="leave out torch.compile (slow)")
    args = p.parse_args(argv)
    import os
    import tempfile

    os.environ.setdefault("CUPY_CACHE_DIR", tempfile.mkdtemp(prefix="cupy_cache_"))
    import cupy as cp

    import tenloom as tl

    sync = cp.cuda.Device().synchronize
    x = np.random.default_rng(9).random(args.n, dtype=np.float32)
    dx = cp.asarray(x)
    res: dict = {}

    ph = tl.placeholder((args.n,), "float32", name="x")
    t0 = time.perf_counter()
    plan = tl.compile([chain_ops(tl, ph, ph, BLOCKS)], [ph], device="cuda:0", to_host=False)
    compile_s = time.perf_counter() - t0
    print(f"tl.compile: {compile_s:.2f} s", flush=True)
    r = timed(lambda: plan(dx)[0], sync, args.repeats, "tenloom compile")
    r["first_s"] += compile_s
    ref = r.pop("out")
    res["tenloom compile (captured)"] = r
    res["tenloom compile: kernels"] = sum(1 for n in plan.optimized.order if n.op.value == "fused")
    lazy = chain_ops(tl, tl.asarray(x), tl.asarray(x), BLOCKS)
    r = timed(
        lambda: tl.evaluate(lazy, device="cuda:0", to_host=False)[0], sync, args.repeats, "evaluate"
    )
    res["tenloom evaluate"] = r
    res["tenloom evaluate"]["max_abs_diff"] = float(cp.abs(r.pop("out") - ref).max())

    try:
        import jax
        import jax.numpy as jnp

        jx = jax.device_put(jnp.asarray(x))
        f = jax.jit(lambda v: chain_ops(jnp, v, v, BLOCKS))
        r = timed(lambda: f(jx).block_until_ready(), sync, args.repeats, "jax.jit")
        out = cp.asarray(np.asarray(r.pop("out")))
        r["max_abs_diff"] = float(cp.abs(out - ref).max())
        res["jax.jit"] = r
    except Exception as e:  # noqa: BLE001  (a peer that does not run is reported, not fatal)
        res["jax.jit"] = {"error": f"{type(e).__name__}: {e}"[:300]}

    try:
        if args.no_torch:
            raise RuntimeError("left out (--no-torch)")
        import torch

        tx = torch.from_dlpack(dx)
        g = torch.compile(lambda v: chain_ops(torch, v, v, BLOCKS))
        r = timed(lambda: g(tx), torch.cuda.synchronize, args.repeats, "torch.compile")
        r["max_abs_diff"] = float(cp.abs(cp.from_dlpack(r.pop("out")) - ref).max())
        res["torch.compile"] = r
    except Exception as e:  # noqa: BLE001
        res["torch.compile"] = {"error": f"{type(e).__name__}: {e}"[:300]}

    best = min(
        (v["median_s"] for k, v in res.items() if not k.startswith("tenloom") and "median_s" in v),
        default=None,
    )
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"2000-op chain, {args.n:g} float32 elements, {name}")
    print("| runner | first s | median ms | ratio to best peer | max abs diff |")
    print("|---|---|---|---|---|")
    for k, v in res.items():
        if not isinstance(v, dict):
            continue
        if "error" in v:
            print(f"| {k} | {v['error']} | | | |")
            continue
        ratio = f"{v['median_s'] / best:.2f}" if best else "-"
        diff = f"{v['max_abs_diff']:.1e}" if "max_abs_diff" in v else "-"
        print(f"| {k} | {v['first_s']:.2f} | {v['median_s'] * 1e3:.2f} | {ratio} | {diff} |")
    print(f"tenloom's compiled program: {res['tenloom compile: kernels']} fused kernel(s)")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
