"""Time-evolving block decimation (TEBD) on an open spin chain, written with tenloom.

The chain Hamiltonian is a sum of two-site terms, H = sum_i h_i (examples/dmrg.py builds
them). One time step applies the gates exp(-tau h_i / 2) (imaginary time, tau = dt) or
exp(-i dt h_i / 2) (real time) in a sweep to the right and then in a sweep back, the middle
pair merged into one full step:

    U(dt) = g_0 g_1 ... g_{L-2} g_{L-2} ... g_1 g_0,     g_i = exp(-tau h_i / 2),

a symmetric product, hence a second-order Trotter-Suzuki splitting (error O(dt^2) in the
state, as the even/odd splitting, with a different constant). Sweeping in this order keeps
the MPS in mixed canonical form with the orthogonality center on the gate's two sites, so
every truncated SVD (``tl.linalg.tensor_svd``, at most ``chi`` singular values) is the optimal
truncation, also for the non-unitary gates of imaginary time. Each gate application (the
two-site tensor, the gate, the split) is one ``tl.function``, compiled once per shape; the
gates come from ``tl.linalg.expm``.

Imaginary time converges to the ground state up to the Trotter error: the converged state is
off by O(dt^2), so its energy, quadratic around the ground state, by O(dt^4). Real time
(``--real-time``) evolves the Neel state and prints the staggered magnetization.

    python examples/tebd.py --L 16 --chi 32 --dt 0.05
    python examples/tebd.py --L 12 --chi 32 --real-time --t-max 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from dmrg import Kernels, bond_term, expectation, make_mpo, random_mps, right_canonicalize

import tenloom as tl


def gates(terms: list[np.ndarray], step: complex) -> list[np.ndarray]:
    """exp(-step * h_i) for each two-site term (``tl.linalg.expm`` of the stack), as
    (out s, out t, in s, in t) tensors."""
    stack = np.stack(terms).astype(np.result_type(step, terms[0]))
    g = tl.linalg.expm(tl.asarray(-step * stack)).evaluate()
    return [x.reshape(2, 2, 2, 2) for x in g]


class TEBD:
    """An MPS of ``L`` sites evolved by the two-site terms ``terms`` (see the module doc).
    ``mps`` starts right-canonical with its center on site 0, where each step leaves it."""

    def __init__(
        self,
        terms: list[np.ndarray],
        mps: list[np.ndarray],
        chi: int,
        *,
        cutoff: float = 1e-12,
        device: str = "cpu",
    ):
        self.terms, self.chi, self.device = terms, chi, device
        self.mps = [np.asarray(a) for a in mps]
        self.L = len(self.mps)
        self.discarded = 0.0

        def apply(absorb: str):
            @tl.function(device=device)
            def apply_gate(a, b, g):
                theta = tl.tensordot(a, b, axes=1)  # (left, s, t, right)
                theta = tl.einsum("uvst,astb->auvb", g, theta)
                theta = theta / tl.sqrt(tl.sum(tl.real(tl.conj(theta) * theta)))
                return tl.linalg.tensor_svd(
                    theta, left=(0, 1), max_rank=chi, cutoff=cutoff, absorb=absorb
                )

            return apply_gate

        self._right, self._left = apply("right"), apply("left")
        # a Kernels only for right_canonicalize's LQ, on the device (its arrays there and back:
        # the gate plans take and return host arrays)
        kernels = Kernels(make_mpo("heisenberg"), chi, device)
        xp = getattr(kernels, "xp", np)
        mps = [xp.asarray(a) for a in self.mps]
        right_canonicalize(mps, kernels)
        self.mps = [a.get() if hasattr(a, "get") else a for a in mps]

    def _gate(self, i: int, g: np.ndarray, absorb: str) -> None:
        dtype = np.result_type(self.mps[i], g)
        a, b = self.mps[i].astype(dtype), self.mps[i + 1].astype(dtype)
        left, right, discarded = (self._right if absorb == "right" else self._left)(a, b, g)
        self.discarded = max(self.discarded, float(discarded))
        # drop the bond's zero padding (singular values the cutoff zeroed) and renormalize
        if absorb == "right":
            s = np.linalg.norm(right.reshape(right.shape[0], -1), axis=1)
        else:
            s = np.linalg.norm(left.reshape(-1, left.shape[-1]), axis=0)
        keep = max(1, int(np.count_nonzero(s)))
        left, right = left[..., :keep], right[:keep]
        if absorb == "right":
            right = right / np.linalg.norm(s[:keep])
        else:
            left = left / np.linalg.norm(s[:keep])
        self.mps[i], self.mps[i + 1] = left, right

    def step(self, half: list[np.ndarray], full_last: np.ndarray) -> None:
        """One symmetric step: ``half[i]`` = exp(-tau h_i / 2) to the right, the last bond's
        full gate ``full_last`` once, then ``half`` back to the left."""
        n = self.L - 1
        for i in range(n - 1):
            self._gate(i, half[i], "right")
        self._gate(n - 1, full_last, "left")
        for i in range(n - 2, -1, -1):
            self._gate(i, half[i], "left")

    def evolve(self, dt: float, steps: int, imaginary: bool = True) -> None:
        tau = dt if imaginary else 1j * dt
        half = gates(self.terms, tau / 2)
        full_last = gates(self.terms[-1:], tau)[0]
        for _ in range(steps):
            self.step(half, full_last)


def local_expectations(mps: list[np.ndarray], op: np.ndarray) -> np.ndarray:
    """<psi| op_i |psi> / <psi|psi> for every site i (NumPy; a check, not the hot path)."""
    L = len(mps)
    left = [np.ones((1, 1))]
    for a in mps:
        left.append(np.einsum("ac,asb,csd->bd", left[-1], a.conj(), a))
    right = [np.ones((1, 1))]
    for a in reversed(mps):
        right.append(np.einsum("bd,asb,csd->ac", right[-1], a.conj(), a))
    right = right[::-1]
    norm = np.trace(left[-1]).real
    out = [
        np.einsum("ac,asb,su,cud,bd->", left[i], mps[i].conj(), op, mps[i], right[i + 1])
        for i in range(L)
    ]
    return np.real(np.array(out)) / norm


def neel_state(L: int) -> list[np.ndarray]:  # noqa: N803
    """The product state up, down, up, ... as an MPS of bond dimension 1."""
    out = []
    for i in range(L):
        a = np.zeros((1, 2, 1))
        a[0, i % 2, 0] = 1.0
        out.append(a)
    return out


def ground_state(
    model: str,
    L: int,  # noqa: N803
    chi: int,
    dt: float,
    *,
    g: float = 1.0,
    tol: float = 1e-10,
    max_steps: int = 5000,
    check_every: int = 10,
    seed: int = 0,
    device: str = "cpu",
    verbose: bool = False,
) -> tuple[float, TEBD]:
    """Imaginary-time evolution at time step ``dt`` from a random MPS until the energy changes
    by less than ``tol`` between checks (every ``check_every`` steps)."""
    mpo = make_mpo(model, 1.0, g)
    tebd = TEBD(
        bond_term(model, 1.0, g, L), random_mps(L, 2, min(chi, 4), seed), chi, device=device
    )
    energy = np.inf
    for n in range(0, max_steps, check_every):
        tebd.evolve(dt, check_every)
        new = expectation(tebd.mps, mpo, device)
        if verbose and (n // check_every) % 10 == 0:
            print(f"  tau = {(n + check_every) * dt:.2f}: E = {new:.12f}")
        if abs(new - energy) < tol:
            return new, tebd
        energy = new
    return energy, tebd


def main(argv: list[str] | None = None) -> float:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("heisenberg", "tfi"), default="heisenberg")
    p.add_argument("--L", type=int, default=16)
    p.add_argument("--chi", type=int, default=32)
    p.add_argument("--dt", type=float, default=0.05)
    p.add_argument("--g", type=float, default=1.0, help="transverse field (tfi)")
    p.add_argument("--tol", type=float, default=1e-10, help="energy change to stop at")
    p.add_argument("--real-time", action="store_true", help="evolve the Neel state in real time")
    p.add_argument("--t-max", type=float, default=2.0, help="real-time: final time")
    p.add_argument("--device", default="cpu")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    if args.real_time:
        sz = np.diag([0.5, -0.5])
        tebd = TEBD(
            bond_term(args.model, 1.0, args.g, args.L),
            neel_state(args.L),
            args.chi,
            device=args.device,
        )
        steps = round(args.t_max / args.dt)
        signs = (-1.0) ** np.arange(args.L)
        for n in range(0, steps, 10):
            tebd.evolve(args.dt, min(10, steps - n), imaginary=False)
            m = float(np.mean(signs * local_expectations(tebd.mps, sz)))
            print(
                f"t = {min(n + 10, steps) * args.dt:.2f}: staggered Sz = {m:.6f}  "
                f"discarded <= {tebd.discarded:.1e}"
            )
        print(f"({time.perf_counter() - t0:.1f} s)")
        return m
    energy, tebd = ground_state(
        args.model,
        args.L,
        args.chi,
        args.dt,
        g=args.g,
        tol=args.tol,
        device=args.device,
        verbose=True,
    )
    print(f"E = {energy:.12f} at dt = {args.dt} ({time.perf_counter() - t0:.1f} s)")
    return energy


if __name__ == "__main__":
    main()
