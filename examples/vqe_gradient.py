"""A VQE-style gradient: the energy of a parametrized circuit, differentiated by ``tl.grad``.

The ansatz on n qubits has ``layers`` layers; each applies RY(theta) then RZ(phi) to every qubit
and a chain of CZ gates. The rotations are built inside the graph from the real parameters
(``tl.cos``, ``tl.sin``, ``tl.exp(1j * phi / 2)``, ``tl.stack``), so the state psi(theta) is
complex and lazy, and every gate is a ``tl.einsum`` on it. The energy of the transverse-field
Ising chain H = -sum_i Z_i Z_{i+1} - g sum_i X_i,

    E(theta) = Re <psi(theta)|H|psi(theta)>,

is real; ``tl.grad(E, [theta])`` is its gradient with respect to the real parameters, through
the complex intermediates. The value and the gradient are compiled into one plan
(``tl.compile``) that a few steps of gradient descent call.

Checked against NumPy: the same circuit simulated densely, the energy compared, and the
gradient compared with central finite differences of the NumPy energy.

    python examples/vqe_gradient.py --qubits 10 --layers 6 --steps 20
    python examples/vqe_gradient.py --small               # 4 qubits, 2 layers, 5 steps

Prints the energy (tenloom and NumPy), the largest gradient error against finite differences
("max |grad - finite differences| = ..."), the energy after each descent step and, for
reference, the exact ground energy.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tenloom as tl

X = np.array([[0.0, 1.0], [1.0, 0.0]])
CZ = np.diag([1.0, 1.0, 1.0, -1.0]).reshape(2, 2, 2, 2)


def _apply(psi, gate, qubits: tuple[int, ...], einsum):
    """Apply a (k-qubit) gate tensor (out..., in...) to the axes ``qubits`` of ``psi``."""
    n = len(psi.shape)
    k = len(qubits)
    out = list(range(n, n + k))
    labels = list(range(n))
    result = list(range(n))
    for q, o in zip(qubits, out):
        result[q] = o
    return einsum(gate, out + list(qubits), psi, labels, result)


def circuit_state(theta, n: int, layers: int, lib):
    """psi(theta) for parameters theta (layers, n, 2), with ``lib`` = tenloom or NumPy."""
    psi = lib.asarray(np.eye(1, 2**n, dtype=complex).reshape((2,) * n))  # |0...0>
    for layer in range(layers):
        for q in range(n):
            t, p = theta[layer, q, 0], theta[layer, q, 1]
            c, s = lib.cos(t / 2), lib.sin(t / 2)
            ry = lib.stack([lib.stack([c, -s]), lib.stack([s, c])])
            rz = lib.exp(lib.stack([-p, p]) * 0.5j)  # diag(e^{-i phi/2}, e^{i phi/2})
            psi = _apply(psi, ry, (q,), lib.einsum)
            labels = list(range(n))
            psi = lib.einsum(rz, [q], psi, labels, labels)
        for q in range(n - 1):
            psi = _apply(psi, lib.asarray(CZ), (q, q + 1), lib.einsum)
    return psi


def energy(psi, n: int, g: float, lib):
    """Re <psi|H|psi> for H = -sum Z_i Z_{i+1} - g sum X_i (open chain)."""
    prob = lib.real(lib.conj(psi) * psi)
    z = np.array([1.0, -1.0])
    zz = sum(
        np.einsum("a,b->ab", z, z).reshape((1,) * q + (2, 2) + (1,) * (n - q - 2))
        for q in range(n - 1)
    )
    e = -lib.sum(prob * lib.asarray(np.broadcast_to(zz, (2,) * n).copy()))
    for q in range(n):
        xpsi = _apply(psi, lib.asarray(X.astype(complex)), (q,), lib.einsum)
        e = e - g * lib.real(lib.sum(lib.conj(psi) * xpsi))
    return e


def dense_hamiltonian(n: int, g: float) -> np.ndarray:
    z, x, eye = np.diag([1.0, -1.0]), X, np.eye(2)

    def site(ops: dict) -> np.ndarray:
        m = np.ones((1, 1))
        for q in range(n):
            m = np.kron(m, ops.get(q, eye))
        return m

    h = -sum(site({q: z, q + 1: z}) for q in range(n - 1))
    return h - g * sum(site({q: x}) for q in range(n))


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--qubits", type=int, default=10)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--g", type=float, default=1.0)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--small", action="store_true", help="4 qubits, 2 layers, 5 steps")
    args = p.parse_args(argv)
    n, layers, steps = (4, 2, 5) if args.small else (args.qubits, args.layers, args.steps)

    theta = tl.placeholder((layers, n, 2), name="theta")
    e = energy(circuit_state(theta, n, layers, tl), n, args.g, tl)
    (grad,) = tl.grad(e, [theta])
    t0 = time.perf_counter()
    plan = tl.compile([e, grad], inputs=[theta])
    t_compile = time.perf_counter() - t0

    def numpy_energy(x: np.ndarray) -> float:
        return float(energy(circuit_state(x, n, layers, np), n, args.g, np))

    rng = np.random.default_rng(args.seed)
    x = rng.uniform(0, 2 * np.pi, (layers, n, 2))
    value, g = plan(x)
    ref = numpy_energy(x)
    h = 1e-6
    fd = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        dx = np.zeros_like(x)
        dx[idx] = h
        fd[idx] = (numpy_energy(x + dx) - numpy_energy(x - dx)) / (2 * h)
    grad_err = float(np.max(np.abs(g - fd)))
    print(f"ansatz: {n} qubits, {layers} layers, {x.size} parameters; TFI chain g = {args.g}")
    print(f"compiled energy + gradient in {t_compile:.3f} s")
    print(f"E(theta0): tenloom {float(value):+.12f}, NumPy {ref:+.12f}")
    print(f"max |grad - finite differences| = {grad_err:.2e}  (|grad|_max = {np.abs(g).max():.3f})")

    energies = [float(value)]
    t0 = time.perf_counter()
    for step in range(steps):
        x = x - args.lr * g
        value, g = plan(x)
        energies.append(float(value))
        print(f"step {step + 1:3d}: E = {float(value):+.10f}")
    t_steps = time.perf_counter() - t0
    exact = float(np.linalg.eigvalsh(dense_hamiltonian(n, args.g))[0]) if n <= 12 else None
    if exact is not None:
        print(f"exact ground energy {exact:+.10f}; {steps} steps in {t_steps:.3f} s")
    return {
        "energy0": energies[0],
        "energy0_ref": ref,
        "grad_error": grad_err,
        "grad_scale": float(np.abs(fd).max()),
        "energies": energies,
        "exact": exact,
    }


if __name__ == "__main__":
    main()
