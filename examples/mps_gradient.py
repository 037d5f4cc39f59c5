"""Ground state of a spin chain by gradient descent on an MPS, written with tenloom.

The parameters are the raw tensors M[i] of an open MPS (bond dimensions
min(chi, d**i, d**(L-i))). The energy is computed in a canonical form made from them inside
the graph: a QR sweep (``tl.linalg.qr``) turns M[0], ..., M[L-2] into left-orthonormal
tensors, carrying each R into the next site, so that the whole norm sits in the last tensor:

    <psi|psi> = |A[L-1]|^2,   E = <psi|H|psi> / <psi|psi>,

with <psi|H|psi> contracted site by site through the MPO environment. The state and E are
those of the raw tensors (the QR sweep changes only the gauge), but the norm is never a
product of L numbers that could overflow, and the environments stay well scaled.
``tl.value_and_grad`` differentiates E through the QRs and the contractions; the energy and
its gradient are compiled once into one plan (``tl.compile``), which SciPy's L-BFGS calls.

    python examples/mps_gradient.py --L 10 --chi 16
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.optimize
from dmrg import MPO, make_mpo, random_mps

import tenloom as tl


def bond_dims(L: int, d: int, chi: int) -> list[int]:  # noqa: N803
    return [min(chi, d**i, d ** (L - i)) for i in range(L + 1)]


def energy_graph(tensors: list, mpo: MPO):
    """E = <psi|H|psi> / <psi|psi> of the MPS ``tensors`` (lazy), through a QR sweep that
    makes every site but the last left-orthonormal."""
    W = tl.asarray(mpo.W)
    D = mpo.D
    env = tl.asarray(mpo.left.reshape(1, D, 1))
    carry = None
    for i, m in enumerate(tensors):
        if carry is not None:
            m = tl.tensordot(carry, m, axes=1)
        left, d, right = m.shape
        if i < len(tensors) - 1:
            q, carry = tl.linalg.qr(tl.reshape(m, (left * d, right)))
            a = tl.reshape(q, (left, d, q.shape[1]))
        else:
            a = m
        env = tl.einsum("awc,asb,wxsu,cue->bxe", env, tl.conj(a), W, a)
    numerator = tl.einsum("awc,w->", env, tl.asarray(mpo.right))
    norm = tl.sum(tl.real(tl.conj(a) * a))
    return tl.real(numerator) / norm


class GradientMPS:
    """Energy and gradient of an L-site MPS as one compiled plan, and the flat-vector view of
    the tensors that SciPy's optimizers work with."""

    def __init__(self, mpo: MPO, L: int, chi: int, device: str = "cpu"):  # noqa: N803
        self.mpo, self.L, self.chi = mpo, L, chi
        dims = bond_dims(L, mpo.d, chi)
        self.shapes = [(dims[i], mpo.d, dims[i + 1]) for i in range(L)]
        self.sizes = [int(np.prod(s)) for s in self.shapes]
        params = [tl.placeholder(s, "float64", name=f"M{i}") for i, s in enumerate(self.shapes)]
        energy, grads = tl.value_and_grad(energy_graph(params, mpo), params)
        self.plan = tl.compile([energy, *grads], inputs=params, device=device)
        self.calls = 0
        self.last = np.nan

    def unflatten(self, x: np.ndarray) -> list[np.ndarray]:
        out, start = [], 0
        for shape, size in zip(self.shapes, self.sizes):
            out.append(x[start : start + size].reshape(shape))
            start += size
        return out

    def __call__(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """(E, dE/dx) at the flat parameter vector ``x``."""
        self.calls += 1
        energy, *grads = self.plan(*self.unflatten(x))
        self.last = float(energy)
        return float(energy), np.concatenate([g.reshape(-1) for g in grads])

    def optimize(self, x0: np.ndarray, maxiter: int = 20000, gtol: float = 1e-12, callback=None):
        """Minimize E with L-BFGS from ``x0``; returns SciPy's OptimizeResult."""
        return scipy.optimize.minimize(
            self,
            x0,
            jac=True,
            method="L-BFGS-B",
            callback=callback,
            options={
                "maxiter": maxiter,
                "maxfun": 2 * maxiter,
                "gtol": gtol,
                "ftol": 1e-16,
                "maxcor": 30,
            },
        )


def ground_state(
    mpo: MPO,
    L: int,  # noqa: N803
    chi: int,
    *,
    seed: int = 0,
    maxiter: int = 20000,
    device: str = "cpu",
    exact: float | None = None,
    verbose: bool = False,
) -> tuple[float, GradientMPS, object, dict]:
    """The lowest energy L-BFGS reaches from a random MPS; returns (E, problem, result,
    reached): with ``exact`` given, ``reached`` maps each error 1e-3, 1e-4, ... it went below
    to the (iteration, seconds) at which it first did."""
    problem = GradientMPS(mpo, L, chi, device)
    x0 = np.concatenate([t.reshape(-1) for t in random_mps(L, mpo.d, chi, seed)])
    t0 = time.perf_counter()
    iterations, reached = [0], {}

    def report(xk: np.ndarray) -> None:
        iterations[0] += 1
        if exact is not None:
            for tol in (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8):
                if tol not in reached and problem.last - exact < tol:
                    reached[tol] = (iterations[0], time.perf_counter() - t0)
                    if verbose:
                        print(
                            f"  error < {tol:.0e} at iteration {iterations[0]} "
                            f"({reached[tol][1]:.1f} s)"
                        )
        elif verbose and iterations[0] % 1000 == 0:
            print(f"  iteration {iterations[0]}: E = {problem.last:.12f}")

    result = problem.optimize(x0, maxiter=maxiter, callback=report)
    return float(result.fun), problem, result, reached


def exact_energy(mpo: MPO, L: int) -> float:  # noqa: N803
    """The lowest eigenvalue of the MPO's Hamiltonian by sparse exact diagonalization
    (L <= ~20): H applied as a matrix-free product, the MPO contracted one site at a time."""
    import scipy.sparse.linalg as spla

    d, W = mpo.d, mpo.W
    n = d**L

    def matvec(v: np.ndarray) -> np.ndarray:
        # psi[w, s_0..s_{L-1}]: carry the MPO bond through the sites
        t = (mpo.left[:, None] * v[None, :]).reshape((mpo.D,) + (d,) * L)
        for i in range(L):
            # t[w, ..., u_i, ...] -> t[x, ..., s_i, ...] with W[w, x, s, u]
            t = np.tensordot(W, t, axes=([0, 3], [0, 1 + i]))  # x, s, rest
            t = np.moveaxis(t, 1, 1 + i)
        return np.tensordot(mpo.right, t, axes=1).reshape(n)

    op = spla.LinearOperator((n, n), matvec=matvec, dtype=float)
    return float(spla.eigsh(op, k=1, which="SA", tol=1e-12)[0][0])


def main(argv: list[str] | None = None) -> float:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("heisenberg", "tfi"), default="heisenberg")
    p.add_argument("--L", type=int, default=10)
    p.add_argument("--chi", type=int, default=16)
    p.add_argument("--g", type=float, default=1.0, help="transverse field (tfi)")
    p.add_argument("--maxiter", type=int, default=20000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    mpo = make_mpo(args.model, 1.0, args.g)
    exact = exact_energy(mpo, args.L) if args.L <= 16 else None
    t0 = time.perf_counter()
    energy, problem, result, _ = ground_state(
        mpo,
        args.L,
        args.chi,
        seed=args.seed,
        maxiter=args.maxiter,
        device=args.device,
        exact=exact,
        verbose=not args.quiet,
    )
    elapsed = time.perf_counter() - t0
    print(
        f"E = {energy:.12f} after {result.nit} L-BFGS iterations, {problem.calls} energy and "
        f"gradient evaluations ({elapsed:.1f} s, {sum(problem.sizes)} parameters): "
        f"{result.message}"
    )
    if exact is not None:
        print(f"exact E0 = {exact:.12f} (sparse exact diagonalization), error {energy - exact:.2e}")
    return energy


if __name__ == "__main__":
    main()
