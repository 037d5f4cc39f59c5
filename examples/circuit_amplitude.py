"""The amplitude <0...0|C|0...0> of a random brickwork quantum circuit, as one tensor network.

The script builds the circuit itself: on n qubits, each of d layers applies a Haar-random
single-qubit gate (a 2x2 tensor) to every qubit, then Haar-random two-qubit gates (4x4 unitaries
reshaped to 2x2x2x2 tensors) on the pairs (0,1), (2,3), ... in even layers and (1,2), (3,4), ...
in odd ones. The |0> inputs, the gates and the <0| outputs become one lazy ``tl.einsum`` over
integer index labels (one new label per wire segment); tenloom's contraction-order search
(``optimize="auto"``: cotengra) picks the pairwise tree when it is evaluated. The same circuit
is then simulated as a dense 2**n state vector in NumPy (each gate a ``tensordot``), whose first
entry is the amplitude.

    python examples/circuit_amplitude.py --qubits 20 --depth 12
    python examples/circuit_amplitude.py --small          # 8 qubits, depth 6

Prints the network size, the flops of the tree tenloom chose, the amplitude from tenloom and
from the state vector, and their difference ("|difference| = ...").
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tenloom as tl


def haar_unitary(rng: np.random.Generator, n: int) -> np.ndarray:
    """A Haar-random n x n unitary (QR of a complex Gaussian, phases fixed)."""
    z = (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))) / np.sqrt(2)
    q, r = np.linalg.qr(z)
    return q * (np.diag(r) / np.abs(np.diag(r)))


def random_circuit(n: int, depth: int, seed: int = 0) -> list[tuple[tuple[int, ...], np.ndarray]]:
    """The gates, in order, as (qubits, tensor): 2x2 for one qubit, 2x2x2x2 (out, out, in, in)
    for two."""
    rng = np.random.default_rng(seed)
    gates = []
    for layer in range(depth):
        for q in range(n):
            gates.append(((q,), haar_unitary(rng, 2)))
        for q in range(layer % 2, n - 1, 2):
            gates.append(((q, q + 1), haar_unitary(rng, 4).reshape(2, 2, 2, 2)))
    return gates


def amplitude_network(n: int, gates) -> tl.Tensor:
    """<0...0|C|0...0> as one lazy einsum (integer sublist form: any number of indices)."""
    zero = np.array([1.0 + 0j, 0.0])
    wire = list(range(n))  # the current label on each qubit's wire
    fresh = n
    args: list = []
    for q in range(n):
        args += [tl.asarray(zero), [wire[q]]]
    for qubits, g in gates:
        new = list(range(fresh, fresh + len(qubits)))
        fresh += len(qubits)
        args += [tl.asarray(g), new + [wire[q] for q in qubits]]
        for q, label in zip(qubits, new):
            wire[q] = label
    for q in range(n):
        args += [tl.asarray(zero), [wire[q]]]
    return tl.einsum(*args, [])


def statevector_amplitude(n: int, gates) -> complex:
    """The same circuit on a dense 2**n state vector in NumPy; returns <0...0|C|0...0>."""
    psi = np.zeros((2,) * n, dtype=complex)
    psi[(0,) * n] = 1.0
    for qubits, g in gates:
        k = len(qubits)
        psi = np.tensordot(g, psi, axes=(list(range(k, 2 * k)), list(qubits)))
        psi = np.moveaxis(psi, list(range(k)), list(qubits))
    return complex(psi[(0,) * n])


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--qubits", type=int, default=20)
    p.add_argument("--depth", type=int, default=12)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--small", action="store_true", help="8 qubits, depth 6")
    p.add_argument("--max-dense", type=int, default=24, help="skip the state vector above this")
    args = p.parse_args(argv)
    n, depth = (8, 6) if args.small else (args.qubits, args.depth)

    gates = random_circuit(n, depth, args.seed)
    amp = amplitude_network(n, gates)
    t0 = time.perf_counter()
    report = tl.explain(amp)  # runs the passes and the order search; evaluate reuses them
    (value,) = tl.evaluate(amp)
    t_tl = time.perf_counter() - t0
    value = complex(value)
    net = report.networks[0]
    print(f"circuit: {n} qubits, depth {depth}, {len(gates)} gates")
    print(
        f"network: {net.operands} tensors; tree chosen by tenloom: "
        f"{report.after.flops:.3g} flops, peak {report.after.peak_bytes:.3g} bytes"
    )
    print(f"tenloom      amplitude = {value:.12e}  ({t_tl:.3f} s incl. path search)")
    out = {"qubits": n, "depth": depth, "amplitude": value, "reference": None, "error": None}
    if n <= args.max_dense:
        t0 = time.perf_counter()
        ref = statevector_amplitude(n, gates)
        t_ref = time.perf_counter() - t0
        err = abs(value - ref)
        print(f"state vector amplitude = {ref:.12e}  ({t_ref:.3f} s, NumPy)")
        print(f"|difference| = {err:.2e}")
        out.update(reference=ref, error=err)
    else:
        print(f"state vector skipped ({n} qubits > --max-dense {args.max_dense})")
    return out


if __name__ == "__main__":
    main()
