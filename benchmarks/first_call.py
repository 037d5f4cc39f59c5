"""Time to first result: each measurement in a fresh Python process (issue 22).

    python benchmarks/first_call.py [--workloads W1,W3,W4,W7,circuit,tebd] [--repeats 3]
                                    [--json results/first_call.json]

For every workload, fresh processes time one call from operands in memory to the result as a
NumPy array (the imports, cotengra's too for tenloom, and the workload's construction are done
before the clock starts; tenloom's CPU backend, which its first ``evaluate`` imports, is
imported before it too, as the peers' modules are, unless ``--lazy-imports``: this machine runs
with PYTHONDONTWRITEBYTECODE=1, so tenloom's lazily imported modules are compiled from source
inside the clock there, where the peers' come from their installed bytecode):

- ``tenloom``:        ``evaluate`` with an empty path cache (a new ``TENLOOM_CACHE_DIR``);
- ``tenloom_cached``: a second process with the cache the first one left (the program a
  user runs a second time);
- ``cotengra_auto``:  ``cotengra.array_contract(..., optimize="auto")`` (search + contract);
- ``oe_greedy``:      ``opt_einsum.contract(..., optimize="greedy")``;
- ``numpy``:          NumPy eager: ``np.einsum(..., optimize="greedy")`` for networks, and
  the program itself written with ``np.tensordot``/``np.moveaxis`` for the circuit.

The circuit and the TEBD energy are written the way the field writes them, gate by gate and
bond by bond; the peers other than NumPy get the same program as one network per call
(cotengra and opt_einsum see the circuit as one einsum of all gates). Medians over
``--repeats`` process pairs; the ratio column is tenloom / the best peer.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NETWORKS = HERE.parent.parent / "shared" / "data" / "networks"
if not NETWORKS.exists():
    NETWORKS = Path("/work/shared/data/networks")

RUNNERS = ("tenloom", "tenloom_cached", "cotengra_auto", "oe_greedy", "numpy")


# ---- workloads: (inputs, output, size_dict, arrays) networks, or programs -------------------


def _scaled(inputs, sd, seed, dtype="float64"):
    sys.path.insert(0, str(HERE))
    import numpy as np
    from workloads import scaled_arrays

    return scaled_arrays(inputs, sd, seed=seed, dtype=np.dtype(dtype))


def net_w1():
    from cotengra.utils import randreg_equation

    inputs, output, _, sd = randreg_equation(60, 3, d_min=4, d_max=4, seed=1)
    return inputs, output, sd, _scaled(inputs, sd, 1)


def net_w3():
    from cotengra.utils import lattice_equation

    inputs, output, _, sd = lattice_equation([6, 6], d_min=6, d_max=6, seed=1)
    return inputs, output, sd, _scaled(inputs, sd, 1)


def net_w4():
    import numpy as np
    import quimb.tensor as qtn

    f = sorted(NETWORKS.glob("circuit_n53_m10_*.qsim"))[0]
    circ = qtn.Circuit.from_qsim_file(str(f))
    tn = circ.amplitude_tn("0" * circ.N)
    inputs, output, sd = tn.get_inputs_output_size_dict()
    return inputs, output, sd, [np.asarray(a, dtype=np.complex128) for a in tn.arrays]


def net_w7():
    sys.path.insert(0, str(HERE))
    from workloads import w7_network

    inputs, output, sd = w7_network()
    return inputs, output, sd, _scaled(inputs, sd, 7)


def circuit_gates(n: int, depth: int, seed: int = 0):
    """A random circuit: per layer a random single-qubit unitary on every qubit, then CZs on
    neighbouring pairs (alternating offsets). Returns [(qubits, gate array)]."""
    import numpy as np

    rng = np.random.default_rng(seed)
    cz = np.diag([1, 1, 1, -1]).astype(np.complex128).reshape(2, 2, 2, 2)
    gates = []
    for layer in range(depth):
        for q in range(n):
            m = rng.standard_normal((2, 2)) + 1j * rng.standard_normal((2, 2))
            u, _ = np.linalg.qr(m)
            gates.append(((q,), u))
        for q in range(layer % 2, n - 1, 2):
            gates.append(((q, q + 1), cz))
    return gates


def apply_gates(xp, state, gates):
    """The state-vector program as the field writes it: tensordot, then moveaxis back."""
    for qs, g in gates:
        k = len(qs)
        state = xp.tensordot(g, state, axes=(tuple(range(k, 2 * k)), qs))
        state = xp.moveaxis(state, tuple(range(k)), qs)
    return state


def circuit_network(n, gates):
    """The same circuit as one network (for cotengra and opt_einsum), from the same dense
    initial state."""
    import numpy as np

    cur = list(range(n))
    nxt = n
    state = np.zeros((2,) * n, np.complex128)  # the same dense state the program starts from
    state[(0,) * n] = 1
    inputs, arrays = [tuple(cur)], [state]
    for qs, g in gates:
        new = list(range(nxt, nxt + len(qs)))
        nxt += len(qs)
        inputs.append((*new, *(cur[q] for q in qs)))
        arrays.append(g)
        for q, lab in zip(qs, new):
            cur[q] = lab
    sd = {lab: 2 for t in inputs for lab in t}
    return inputs, tuple(cur), sd, arrays


def tebd_mps(L: int, chi: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    mps = []
    for i in range(L):
        left = min(chi, 2**i, 2 ** (L - i))
        right = min(chi, 2 ** (i + 1), 2 ** (L - i - 1))
        mps.append((rng.standard_normal((left, 2, right)) / np.sqrt(2 * left)).astype(float))
    sx = np.array([[0, 1], [1, 0]], float)
    sz = np.diag([1.0, -1.0])
    h = (np.kron(sx, sx) + np.kron(sz, sz)).reshape(2, 2, 2, 2)
    return mps, h


def tebd_networks(mps, h):
    """<psi| h_{i,i+1} |psi> for every bond, each as one network over the whole chain."""
    L = len(mps)
    nets = []
    for b in range(L - 1):
        inputs, arrays = [], []
        for i, a in enumerate(mps):
            ket = (f"k{i}", f"p{i}", f"k{i + 1}")
            phys = f"q{i}" if i in (b, b + 1) else f"p{i}"
            bra = (f"b{i}", phys, f"b{i + 1}")
            inputs += [ket, bra]
            arrays += [a, a.conj()]
        inputs.append((f"q{b}", f"q{b + 1}", f"p{b}", f"p{b + 1}"))
        arrays.append(h)
        # the chain's open ends have size 1 on both sides: close them
        sd = {}
        for t, x in zip(inputs, arrays):
            sd.update(zip(t, x.shape))
        nets.append((inputs, (), sd, arrays))
    return nets


def int_network(net):
    """Labels renumbered 0..k-1 (the interleaved einsum form takes ints)."""
    inputs, output, sd, arrays = net
    ids: dict = {}
    ins = [tuple(ids.setdefault(x, len(ids)) for x in t) for t in inputs]
    out = tuple(ids.setdefault(x, len(ids)) for x in output)
    return ins, out, {ids[k]: v for k, v in sd.items() if k in ids}, arrays


def workload(name: str, args):
    kind, w = _workload(name, args)
    if kind == "network":
        w = int_network(w)
    elif kind == "networks":
        w = [int_network(x) for x in w]
    return kind, w


def _workload(name: str, args):
    if name == "W1":
        return "network", net_w1()
    if name == "W3":
        return "network", net_w3()
    if name == "W4":
        return "network", net_w4()
    if name == "W7":
        return "network", net_w7()
    if name == "circuit":
        gates = circuit_gates(args.qubits, args.depth)
        return "circuit", (args.qubits, gates)
    if name == "tebd":
        mps, h = tebd_mps(args.L, args.chi)
        return "networks", tebd_networks(mps, h)
    raise SystemExit(f"unknown workload {name!r}")


# ---- one fresh process: one runner on one workload ------------------------------------------


def interleaved(arrays, inputs, wrap=None) -> list:
    """einsum's interleaved operands: array, labels, array, labels, ..."""
    ops: list = []
    for a, t in zip(arrays, inputs):
        ops += [a if wrap is None else wrap(a), list(t)]
    return ops


def lazy_network(tl, net):
    """One network as a lazy tenloom einsum."""
    inputs, output, _, arrays = net
    return tl.einsum(*interleaved(arrays, inputs, tl.asarray), list(output))


def lazy_workload(tl, kind: str, w):
    """A network workload as one lazy tensor (several networks: stacked)."""
    if kind == "networks":
        return tl.stack([lazy_network(tl, net) for net in w])
    return lazy_network(tl, w)


def peer_contract(runner: str, net):
    """One network contracted by a peer: cotengra "auto", opt_einsum greedy or NumPy."""
    import numpy as np

    inputs, output, sd, arrays = net
    if runner == "cotengra_auto":
        import cotengra as ctg

        return ctg.array_contract(arrays, inputs, output, optimize="auto")
    if runner == "oe_greedy":
        import opt_einsum as oe

        return oe.contract(*interleaved(arrays, inputs), list(output), optimize="greedy")
    if len(sd) > 52:
        raise SystemExit("numpy: np.einsum takes at most 52 labels")
    return np.einsum(*interleaved(arrays, inputs), list(output), optimize="greedy")


def child(name: str, runner: str, args) -> dict:
    import numpy as np

    kind, w = workload(name, args)
    if runner.startswith("tenloom"):
        import cotengra  # noqa: F401  (a dependency tenloom imports on its first search)

        import tenloom as tl

        if not args.lazy_imports:  # the modules tenloom's first evaluate imports on the CPU
            import tenloom.passes.chain_path  # noqa: F401
            import tenloom.runtime.backends.cpu  # noqa: F401

            try:
                import numexpr  # noqa: F401  (optional: the CPU backend's fused kernels)
            except ImportError:
                pass
    elif runner == "cotengra_auto":
        import cotengra  # noqa: F401
    elif runner == "oe_greedy":
        import opt_einsum  # noqa: F401

    if kind == "circuit":
        n, gates = w
        state0 = np.zeros((2,) * n, np.complex128)
        state0[(0,) * n] = 1
    t0 = time.perf_counter()
    if kind == "circuit":
        if runner.startswith("tenloom"):
            value = apply_gates(tl, tl.asarray(state0), gates).evaluate()
        elif runner == "numpy":
            value = apply_gates(np, state0, gates)
        else:
            value = peer_contract(runner, circuit_network(n, gates))
    elif runner.startswith("tenloom"):
        value = lazy_workload(tl, kind, w).evaluate()
    elif kind == "networks":
        value = np.stack([peer_contract(runner, net) for net in w])
    else:
        value = peer_contract(runner, w)
    value = np.asarray(value)
    seconds = time.perf_counter() - t0
    flat = value.ravel()
    return {
        "seconds": seconds,
        "checksum": [complex(flat[: min(8, flat.size)].sum()).real, float(np.abs(flat).sum())],
    }


def run_child(name, runner, args, cache: str) -> dict:
    env = dict(os.environ, TENLOOM_CACHE_DIR=cache)
    cmd = [sys.executable, __file__, "--child", name, runner, *args.passthrough]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    if out.returncode != 0:
        err = (out.stderr.strip() or "failed").splitlines()[-1]
        return {"error": err}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="W1,W3,W4,W7,circuit,tebd")
    p.add_argument("--runners", default=",".join(RUNNERS))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--qubits", type=int, default=20)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--L", type=int, default=16)
    p.add_argument("--chi", type=int, default=32)
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--json", default=None)
    p.add_argument(
        "--lazy-imports",
        action="store_true",
        help="leave tenloom's CPU backend to be imported inside the clock, by the first evaluate",
    )
    p.add_argument("--child", nargs=2, default=None)
    args = p.parse_args(argv)
    args.passthrough = [
        f"--qubits={args.qubits}",
        f"--depth={args.depth}",
        f"--L={args.L}",
        f"--chi={args.chi}",
        *(["--lazy-imports"] if args.lazy_imports else []),
    ]
    if args.child:
        print(json.dumps(child(*args.child, args)))
        return None
    runners = args.runners.split(",")
    results: dict = {}
    for name in args.workloads.split(","):
        times: dict = {r: [] for r in runners}
        checks: dict = {}
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory() as cache:
                for r in runners:
                    res = run_child(name, r, args, cache)
                    if "error" in res:
                        times[r].append(float("nan"))
                        checks[r] = res["error"]
                        continue
                    times[r].append(res["seconds"])
                    checks[r] = res["checksum"]
        med = {r: statistics.median(v) for r, v in times.items() if v}
        peers = [med[r] for r in ("cotengra_auto", "oe_greedy", "numpy") if r in med]
        best = min((x for x in peers if x == x), default=float("nan"))
        row = {"median_s": med, "all_s": times, "checksums": checks, "best_peer_s": best}
        for r in ("tenloom", "tenloom_cached"):
            if r in med:
                row[f"{r}_ratio"] = med[r] / best
        results[name] = row
        cells = "  ".join(f"{r} {med[r]:8.3f}s" for r in runners if r in med)
        ratio = row.get("tenloom_ratio", float("nan"))
        cached = row.get("tenloom_cached_ratio", float("nan"))
        print(f"{name:8s} {cells}  ratio {ratio:.2f}x (cached {cached:.2f}x)", flush=True)
        bad = {r: c for r, c in checks.items() if isinstance(c, str)}
        if bad:
            print(f"         errors: {bad}", flush=True)
        # every runner's result against the others (sum of |entries|): the same numbers
        sums = {r: c[1] for r, c in checks.items() if not isinstance(c, str)}
        ref = next(iter(sums.values()), None)
        off = {r: v for r, v in sums.items() if abs(v - ref) > 1e-6 * max(abs(ref), 1e-300)}
        row["results_agree"] = not off
        if off:
            print(f"         RESULTS DIFFER: {sums}", flush=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
