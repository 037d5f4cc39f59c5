"""First evaluate of a state-vector circuit (tensordot + moveaxis per two-qubit gate), with the
copy-plan timing bounded as issue 22 has it, or unbounded as before (``--unbounded``: every
kernel with a choice times its candidates, nothing is reused between kernels or processes).

    TENLOOM_CACHE_DIR=/tmp/c python -P benchmarks/tuning_first_call.py 20 6 [--unbounded]

Run it twice with the same TENLOOM_CACHE_DIR to see a second process read the first's
timings. Prints the trace time, the first and second evaluate and the timing counts
(runtime/kernels/copy_plan.py STATS).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from tenloom.runtime.kernels import copy_plan

import tenloom as tl


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("qubits", type=int)
    ap.add_argument("depth", type=int)
    ap.add_argument("--unbounded", action="store_true")
    args = ap.parse_args()
    if args.unbounded:
        copy_plan.TUNE_MIN_S = 1e9
        copy_plan.cached_choice = lambda key, counts: None
        copy_plan.remember = lambda key, choice: None

    nq = args.qubits
    rng = np.random.default_rng(0)
    psi0 = np.zeros((2,) * nq, complex)
    psi0[(0,) * nq] = 1
    t0 = time.perf_counter()
    psi, ref = tl.asarray(psi0), psi0
    for d in range(args.depth):
        for q in range(d % 2, nq - 1, 2):
            m = rng.standard_normal((4, 4)) + 1j * rng.standard_normal((4, 4))
            g = np.linalg.qr(m)[0].reshape(2, 2, 2, 2)
            psi = tl.moveaxis(
                tl.tensordot(tl.asarray(g), psi, axes=([2, 3], [q, q + 1])), [0, 1], [q, q + 1]
            )
            ref = np.moveaxis(np.tensordot(g, ref, axes=([2, 3], [q, q + 1])), [0, 1], [q, q + 1])
    t1 = time.perf_counter()
    out = psi.evaluate()
    t2 = time.perf_counter()
    psi.evaluate()
    t3 = time.perf_counter()
    stats = {k: round(v, 3) for k, v in copy_plan.STATS.items()}
    print(
        f"{nq} qubits, depth {args.depth}, {'unbounded' if args.unbounded else 'bounded'}: "
        f"trace {t1 - t0:.2f} s, first evaluate {t2 - t1:.2f} s, second {t3 - t2:.3f} s, "
        f"max error {np.abs(out - ref).max():.1e}, timing {stats}"
    )


if __name__ == "__main__":
    main()
