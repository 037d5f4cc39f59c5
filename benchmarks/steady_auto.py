#!/usr/bin/env python
"""Steady state of repeated tl.evaluate (optimize="auto") on first_call.py's W1, W3, W7, tebd:
median of 30 calls
after 5 warm-up calls, in this process (the package on PYTHONPATH decides before/after)."""
import sys, time, statistics, json
sys.path.insert(0, "benchmarks")
import numpy as np
import first_call as fc
import tenloom as tl
class A: qubits=20; depth=4; L=16; chi=32
out = {}
for name in sys.argv[1:]:
    kind, w = fc.workload(name, A)
    if kind == "networks":
        lazy = []
        for inputs, output, _, arrays in w:
            ops = []
            for a, t in zip(arrays, inputs): ops += [tl.asarray(a), list(t)]
            lazy.append(tl.einsum(*ops, list(output)))
        t = tl.stack(lazy)
    else:
        inputs, output, _, arrays = w; ops = []
        for a, tt in zip(arrays, inputs): ops += [tl.asarray(a), list(tt)]
        t = tl.einsum(*ops, list(output))
    for _ in range(5): t.evaluate()
    ts = []
    for _ in range(30):
        t0 = time.perf_counter(); t.evaluate(); ts.append(time.perf_counter() - t0)
    out[name] = statistics.median(ts) * 1e3
print(json.dumps(out))
