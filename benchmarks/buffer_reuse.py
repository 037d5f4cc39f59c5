"""Buffer reuse between runs (runtime/buffers.py): run time and page faults with and without.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/buffer_reuse.py

For W3 (lattice 6x6 D=6) and W2 (MPS/MPO, L=100, chi=64), the value alone and the value with
its gradient, each in a fresh process with the arena on (the default) and off
(TENLOOM_POOL_BYTES=0): median time of --repeats calls after a warm-up, and the minor page
faults of one call. Writes benchmarks/results/buffer_reuse.json.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

CHILD = r"""
import json, resource, statistics, sys, time
sys.path.insert(0, {bench!r})
from grad_ratio import lattice, mps
import tenloom as tl

repeats = {repeats}
out = {{}}
for name, (inputs, output, arrays) in (("W3", lattice()), ("W2", mps(100, 64))):
    labels = {{}}
    ts = [tl.asarray(a) for a in arrays]
    args = []
    for t, term in zip(ts, inputs):
        args += [t, [labels.setdefault(x, len(labels)) for x in term]]
    value = tl.einsum(*args, [labels[x] for x in output])
    grads = tl.grad(value, ts)
    for what, call in (("forward", lambda: tl.evaluate(value)),
                       ("value_and_grad", lambda: tl.evaluate(value, *grads))):
        call()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        call()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
        out[f"{{name}} {{what}}"] = {{"median_s": statistics.median(times), "faults": faults}}
print(json.dumps(out))
"""


def run(pool: bool, repeats: int) -> dict:
    env = dict(os.environ)
    if not pool:
        env["TENLOOM_POOL_BYTES"] = "0"
    bench = str(pathlib.Path(__file__).parent)
    code = CHILD.format(bench=bench, repeats=repeats)
    res = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args()
    on, off = run(True, args.repeats), run(False, args.repeats)
    print(f"{'':28s} {'arena off':>22s} {'arena on':>22s} {'on/off':>7s}")
    for key in on:
        a, b = off[key], on[key]
        ratio = b["median_s"] / a["median_s"]
        print(
            f"{key:28s} {a['median_s'] * 1e3:9.2f} ms {a['faults']:6d} flt "
            f"{b['median_s'] * 1e3:9.2f} ms {b['faults']:6d} flt {ratio:7.2f}"
        )
    out = pathlib.Path(__file__).parent / "results" / "buffer_reuse.json"
    out.write_text(json.dumps({"arena_off": off, "arena_on": on}, indent=2) + "\n")


if __name__ == "__main__":
    main()
