"""Two-site DMRG for open spin chains, written with tenloom.

The Hamiltonian is a matrix product operator (MPO) W of bond dimension D (5 for the S=1/2
Heisenberg chain H = sum_i S_i . S_{i+1}, 3 for the transverse-field Ising chain
H = -J sum_i Z_i Z_{i+1} - g sum_i X_i), the same tensor on every site, with boundary vectors
that select the first and last rows. The state is an MPS of tensors A[i] with axes
(left bond, physical, right bond). A sweep optimizes two neighbouring sites at a time:

1. the two-site tensor theta = A[i] A[i+1] (a contraction);
2. the lowest eigenvector of the effective Hamiltonian L[i] W W R[i+1] acting on theta, found
   by Lanczos; its action (a five-tensor network) is compiled once per shape with tenloom,
   so that the Lanczos iterations only bind arrays and run the plan;
3. a truncated SVD of theta split into A[i] A[i+1] (``tl.linalg.tensor_svd``: at most ``chi``
   singular values, and those above ``cutoff`` relative to the largest), the singular values
   absorbed into the site the sweep moves to;
4. the environment L[i+1] (or R[i]) grown by one site (a contraction, compiled per shape).

Every contraction and the SVD are tenloom ops inside ``tl.function`` (one ``tl.compile`` per
shape signature); vectors, scalars and bookkeeping are NumPy. ``--device cuda`` runs the
compiled plans on the GPU with no other change.

    python examples/dmrg.py --L 20 --chi 64 --sweeps 6
    python examples/dmrg.py --model tfi --g 1.0 --L 32 --chi 32
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse.linalg as spla

import tenloom as tl

# ---- models ------------------------------------------------------------------------------


@dataclass
class MPO:
    """A translation-invariant MPO: ``W`` with axes (left, right, out, in) and the boundary
    vectors ``left`` and ``right`` that close the chain."""

    W: np.ndarray
    left: np.ndarray
    right: np.ndarray

    @property
    def d(self) -> int:
        return self.W.shape[2]

    @property
    def D(self) -> int:  # noqa: N802
        return self.W.shape[0]


def spin_operators() -> dict[str, np.ndarray]:
    """S=1/2 operators: Sz, S+, S-, Sx and the identity (and Pauli X, Z)."""
    sz = np.diag([0.5, -0.5])
    sp = np.array([[0.0, 1.0], [0.0, 0.0]])
    return {
        "I": np.eye(2),
        "Sz": sz,
        "Sp": sp,
        "Sm": sp.T.copy(),
        "X": np.array([[0.0, 1.0], [1.0, 0.0]]),
        "Z": np.diag([1.0, -1.0]),
    }


def heisenberg_mpo(J: float = 1.0) -> MPO:  # noqa: N803
    """H = J sum_i (Sx Sx + Sy Sy + Sz Sz)_{i,i+1} = J sum_i (S+S-/2 + S-S+/2 + Sz Sz), D = 5."""
    o = spin_operators()
    W = np.zeros((5, 5, 2, 2))
    W[0, 0] = o["I"]
    W[1, 0] = o["Sp"]
    W[2, 0] = o["Sm"]
    W[3, 0] = o["Sz"]
    W[4, 1] = 0.5 * J * o["Sm"]
    W[4, 2] = 0.5 * J * o["Sp"]
    W[4, 3] = J * o["Sz"]
    W[4, 4] = o["I"]
    return MPO(W, np.eye(5)[4], np.eye(5)[0])


def tfi_mpo(J: float = 1.0, g: float = 1.0) -> MPO:  # noqa: N803
    """H = -J sum_i Z_i Z_{i+1} - g sum_i X_i (Pauli matrices), D = 3."""
    o = spin_operators()
    W = np.zeros((3, 3, 2, 2))
    W[0, 0] = o["I"]
    W[1, 0] = o["Z"]
    W[2, 0] = -g * o["X"]
    W[2, 1] = -J * o["Z"]
    W[2, 2] = o["I"]
    return MPO(W, np.eye(3)[2], np.eye(3)[0])


def bond_term(model: str, J: float = 1.0, g: float = 1.0, L: int = 2) -> list[np.ndarray]:  # noqa: N803
    """The two-site terms h_i (4 x 4, on sites i, i+1) with sum_i h_i = H on an open chain of L
    sites: for the Ising chain each field -g X is split between the bonds that touch its site."""
    o = spin_operators()
    if model == "heisenberg":
        h = J * (np.kron(o["Sz"], o["Sz"]) + 0.5 * np.kron(o["Sp"], o["Sm"]))
        h = h + 0.5 * J * np.kron(o["Sm"], o["Sp"])
        return [h] * (L - 1)
    terms = []
    for i in range(L - 1):
        wl = 1.0 if i == 0 else 0.5
        wr = 1.0 if i == L - 2 else 0.5
        h = -J * np.kron(o["Z"], o["Z"]) - g * (
            wl * np.kron(o["X"], o["I"]) + wr * np.kron(o["I"], o["X"])
        )
        terms.append(h)
    return terms


def make_mpo(model: str, J: float = 1.0, g: float = 1.0) -> MPO:  # noqa: N803
    if model == "heisenberg":
        return heisenberg_mpo(J)
    if model == "tfi":
        return tfi_mpo(J, g)
    raise ValueError(f"unknown model {model!r}; use 'heisenberg' or 'tfi'")


# ---- compiled kernels --------------------------------------------------------------------


class Kernels:
    """The tenloom pieces of a sweep, each a ``tl.function``: traced and compiled once per
    (shape, dtype) of its arguments, then run as a plan on ``device``.

    Environments have axes (bra bond, MPO bond, ket bond); two-site tensors
    (left bond, s, t, right bond)."""

    def __init__(self, mpo: MPO, chi: int, device: str = "cpu", cutoff: float = 0.0):
        self.mpo = mpo
        self.chi = chi
        self.device = device
        # on a GPU everything stays there: the plans take and return CuPy arrays (to_host=False),
        # and the sweep's own arithmetic (Lanczos, norms) runs in CuPy (``xp``)
        on_gpu = device.startswith("cuda")
        if on_gpu:
            import cupy

            self.xp = cupy
        else:
            self.xp = np
        opts = {"device": device, "to_host": not on_gpu}
        W = tl.asarray(mpo.W)  # a constant captured by each plan

        @tl.function(**opts)
        def heff(L, R, x):  # noqa: N803
            # the effective Hamiltonian on two sites; tenloom picks the contraction order
            return tl.einsum("awc,wxsu,xyvt,byd,cutd->asvb", L, W, W, R, x)

        @tl.function(**opts)
        def grow_left(L, A):  # noqa: N803
            return tl.einsum("awc,asb,wxsu,cue->bxe", L, tl.conj(A), W, A)

        @tl.function(**opts)
        def grow_right(R, B):  # noqa: N803
            return tl.einsum("bxe,asb,wxsu,cue->awc", R, tl.conj(B), W, B)

        @tl.function(**opts)
        def grow_norm(N, A):  # noqa: N803
            return tl.einsum("ac,asb,csd->bd", N, tl.conj(A), A)

        @tl.function(**opts)
        def two_site(A, B):  # noqa: N803
            return tl.tensordot(A, B, axes=1)

        def split(absorb: str):
            @tl.function(**opts)
            def split_theta(theta):
                # theta (left bond, s, t, right bond) = U S Vh, at most chi singular values
                # (a bound fixed at trace time: those the cutoff drops are zeroed), S absorbed
                # into the side the sweep moves to
                return tl.linalg.tensor_svd(
                    theta,
                    left=(0, 1),
                    max_rank=chi,
                    cutoff=cutoff,
                    absorb=absorb,
                    return_rank=True,
                )

            return split_theta

        @tl.function(**opts)
        def lq(M):  # noqa: N803
            # M = L Q, Q with orthonormal rows: the right-canonical step
            return tl.linalg.lq(M)

        self.heff, self.grow_left, self.grow_right = heff, grow_left, grow_right
        self.two_site, self.lq = two_site, lq
        self.split_right, self.split_left = split("right"), split("left")
        self.grow_norm = grow_norm

    def plans(self) -> int:
        """How many plans were compiled (one per shape signature and kernel)."""
        fns = (self.heff, self.grow_left, self.grow_right, self.two_site, self.lq)
        fns += (self.split_right, self.split_left, self.grow_norm)
        return sum(len(f.plans) for f in fns)


# ---- eigensolvers ------------------------------------------------------------------------


def lanczos(matvec, x0, krylov: int = 24, tol: float = 1e-10, restarts: int = 20, xp=np):
    """The lowest eigenpair of the Hermitian operator ``matvec`` by restarted Lanczos with full
    reorthogonalization, starting from ``x0``. Each cycle builds at most ``krylov`` vectors and
    restarts from the Ritz vector; it stops when the Ritz residual ||H x - E x|| <= tol (the
    energy is then exact to about tol**2 / gap) or the Krylov space is invariant. The vectors
    are ``xp`` arrays (NumPy, or CuPy on a GPU); the small tridiagonal problem runs in NumPy."""
    x = x0 / xp.linalg.norm(x0)
    energy = np.inf
    for _ in range(restarts):
        V = xp.empty((krylov, x.size), dtype=x.dtype)
        alpha, beta = [], []
        V[0] = x
        converged = False
        for j in range(krylov):
            w = matvec(V[j])
            alpha.append(float(xp.vdot(V[j], w).real))
            # full reorthogonalization (twice is enough) against the basis so far
            basis = V[: j + 1]
            w = w - basis.T @ (basis.conj() @ w)
            w = w - basis.T @ (basis.conj() @ w)
            b = float(xp.linalg.norm(w))
            T = np.diag(alpha) + np.diag(beta, 1) + np.diag(beta, -1)
            evals, evecs = np.linalg.eigh(T)
            energy, c = evals[0], evecs[:, 0]
            if abs(b * c[-1]) <= tol or b <= 1e-14 * max(1.0, abs(energy)):
                converged = True
                break
            if j + 1 < krylov:
                beta.append(b)
                V[j + 1] = w / b
        x = xp.asarray(c.astype(V.dtype)) @ V[: len(c)]
        x /= xp.linalg.norm(x)
        if converged:
            break
    return energy, x


def eigsh_lowest(matvec, x0: np.ndarray, tol: float = 1e-10):
    """The lowest eigenpair by ARPACK (scipy.sparse.linalg.eigsh) on a LinearOperator."""
    n = x0.size
    if n <= 4:  # ARPACK needs k < n - 1: solve tiny problems densely
        H = np.stack([matvec(e) for e in np.eye(n, dtype=x0.dtype)], axis=1)
        w, v = np.linalg.eigh(H)
        return w[0], v[:, 0]
    op = spla.LinearOperator((n, n), matvec=matvec, dtype=x0.dtype)
    w, v = spla.eigsh(op, k=1, which="SA", v0=x0, tol=tol, ncv=min(n, 20))
    return w[0], v[:, 0]


# ---- the MPS and the sweep ---------------------------------------------------------------


def random_mps(L: int, d: int, chi: int, seed: int = 0, dtype=np.float64) -> list[np.ndarray]:  # noqa: N803
    """A random MPS with bond dimensions min(chi, d**i, d**(L-i))."""
    rng = np.random.default_rng(seed)
    dims = [min(chi, d**i, d ** (L - i)) for i in range(L + 1)]
    mps = []
    for i in range(L):
        shape = (dims[i], d, dims[i + 1])
        a = rng.standard_normal(shape)
        if np.dtype(dtype).kind == "c":
            a = a + 1j * rng.standard_normal(shape)
        mps.append(a.astype(dtype))
    return mps


def right_canonicalize(mps: list[np.ndarray], kernels: Kernels) -> None:
    """Make every site but the first right-orthonormal, in place, by LQ decompositions from the
    right; the first site is normalized (the state then has norm 1)."""
    xp = getattr(kernels, "xp", np)
    for i in range(len(mps) - 1, 0, -1):
        a, d, b = mps[i].shape
        r, q = kernels.lq(mps[i].reshape(a, d * b))
        mps[i] = q.reshape(-1, d, b)
        mps[i - 1] = xp.tensordot(mps[i - 1], r, axes=1)
    mps[0] = mps[0] / xp.linalg.norm(mps[0])


class DMRG:
    """Two-site DMRG of ``mpo`` on an open chain of ``L`` sites, bond dimension ``chi``.

    ``run(sweeps)`` returns the energy after each sweep (one sweep: left to right and back);
    ``kernels`` replaces the tenloom kernels by others of the same interface (the benchmark's
    NumPy ones);
    ``energies`` holds the Lanczos energy of every two-site step, ``discarded`` the largest
    discarded weight of the last sweep."""

    def __init__(
        self,
        mpo: MPO,
        L: int,  # noqa: N803
        chi: int,
        *,
        cutoff: float = 1e-14,
        device: str = "cpu",
        dtype=np.float64,
        seed: int = 0,
        eigensolver: str = "lanczos",
        tol: float = 1e-10,
        krylov: int = 24,
        mps: list[np.ndarray] | None = None,
        kernels: Kernels | None = None,
    ):
        if L < 2:
            raise ValueError(f"DMRG needs L >= 2 sites, got {L}")
        if eigensolver not in ("lanczos", "eigsh"):
            raise ValueError(f"eigensolver {eigensolver!r}: use 'lanczos' or 'eigsh'")
        self.mpo, self.L, self.chi, self.cutoff = mpo, L, chi, cutoff
        self.eigensolver, self.tol, self.krylov = eigensolver, tol, krylov
        self.kernels = kernels if kernels is not None else Kernels(mpo, chi, device, cutoff)
        self.xp = xp = getattr(self.kernels, "xp", np)  # where the arrays live
        mps = mps if mps is not None else random_mps(L, mpo.d, chi, seed, dtype)
        self.mps = [xp.asarray(a) for a in mps]
        self.dtype = self.mps[0].dtype
        self.energies: list[float] = []
        self.discarded = 0.0
        self.matvecs = 0
        right_canonicalize(self.mps, self.kernels)
        D = mpo.D
        self.left_env: list[np.ndarray | None] = [None] * L
        self.right_env: list[np.ndarray | None] = [None] * L
        self.left_env[0] = xp.asarray(mpo.left.reshape(1, D, 1).astype(self.dtype))
        self.right_env[L - 1] = xp.asarray(mpo.right.reshape(1, D, 1).astype(self.dtype))
        for i in range(L - 1, 0, -1):
            self.right_env[i - 1] = self.kernels.grow_right(self.right_env[i], self.mps[i])

    def _solve(self, i: int) -> tuple[float, np.ndarray]:
        k = self.kernels
        L, R = self.left_env[i], self.right_env[i + 1]
        theta = k.two_site(self.mps[i], self.mps[i + 1])
        shape = theta.shape

        def matvec(v: np.ndarray) -> np.ndarray:
            self.matvecs += 1
            return k.heff(L, R, v.reshape(shape)).reshape(-1)

        if self.eigensolver == "lanczos":
            e, v = lanczos(matvec, theta.reshape(-1), self.krylov, self.tol, xp=self.xp)
        elif self.xp is np:
            e, v = eigsh_lowest(matvec, theta.reshape(-1), self.tol)
        else:  # ARPACK runs on the host: its vectors are copied to the device and back
            xp = self.xp
            host = lambda v: xp.asnumpy(matvec(xp.asarray(v)))  # noqa: E731
            e, v = eigsh_lowest(host, xp.asnumpy(theta.reshape(-1)), self.tol)
            v = xp.asarray(v)
        return float(e), v.reshape(shape)

    def _split(self, theta: np.ndarray, absorb: str) -> tuple[np.ndarray, np.ndarray]:
        """theta = left @ right truncated, the singular values in ``absorb``'s factor, which is
        renormalized (theta has norm 1); the bond trimmed to the singular values kept (the
        plan's rank is the bound min(chi, K), padded with zeros where the cutoff cut more)."""
        k = self.kernels
        split = k.split_right if absorb == "right" else k.split_left
        left, right, discarded, rank = split(theta)
        self.discarded = max(self.discarded, float(discarded))
        xp = self.xp
        keep = max(1, int(rank))  # the singular values the cutoff kept, at most chi
        left, right = left[..., :keep], right[:keep]
        # renormalize (theta has norm 1): by the kept singular values, i.e. the norm of the
        # factor that absorbed them
        if absorb == "right":
            right = right / xp.linalg.norm(right)
        else:
            left = left / xp.linalg.norm(left)
        return left, right

    def sweep(self) -> float:
        """One sweep, left to right then right to left; returns the last Lanczos energy."""
        k, L = self.kernels, self.L
        self.discarded = 0.0
        for i in range(L - 1):  # the center moves right: A[i] left-orthonormal
            e, theta = self._solve(i)
            self.mps[i], self.mps[i + 1] = self._split(theta, "right")
            self.left_env[i + 1] = k.grow_left(self.left_env[i], self.mps[i])
            self.energies.append(e)
        for i in range(L - 2, -1, -1):  # back: A[i+1] right-orthonormal
            e, theta = self._solve(i)
            self.mps[i], self.mps[i + 1] = self._split(theta, "left")
            self.right_env[i] = k.grow_right(self.right_env[i + 1], self.mps[i + 1])
            self.energies.append(e)
        return self.energies[-1]

    def run(self, sweeps: int, verbose: bool = False) -> list[float]:
        out = []
        for n in range(sweeps):
            t0 = time.perf_counter()
            e = self.sweep()
            out.append(e)
            if verbose:
                print(
                    f"sweep {n + 1}: E = {e:.15f}  discarded <= {self.discarded:.2e}  "
                    f"({time.perf_counter() - t0:.2f} s, {self.kernels.plans()} plans)"
                )
        return out


def expectation(mps: list[np.ndarray], mpo: MPO, device: str = "cpu") -> float:
    """<psi|H|psi> / <psi|psi> by contracting the MPO environment through the chain."""
    D = mpo.D
    k = Kernels(mpo, 1, device)
    xp = k.xp
    env = xp.asarray(mpo.left.reshape(1, D, 1).astype(mps[0].dtype))
    norm = xp.ones((1, 1), dtype=mps[0].dtype)
    for a in mps:
        env = k.grow_left(env, xp.asarray(a))
        norm = k.grow_norm(norm, xp.asarray(a))
    e = xp.einsum("awc,w->", env, xp.asarray(mpo.right.astype(env.dtype)))
    return float(xp.real(e / xp.trace(norm)))


# ---- command line ------------------------------------------------------------------------

EXACT_HEISENBERG_L20 = -8.682473334398969  # open S=1/2 Heisenberg chain, L = 20


def main(argv: list[str] | None = None) -> list[float]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("heisenberg", "tfi"), default="heisenberg")
    p.add_argument("--L", type=int, default=20, help="number of sites")
    p.add_argument("--chi", type=int, default=64, help="maximal bond dimension")
    p.add_argument("--sweeps", type=int, default=6)
    p.add_argument("--cutoff", type=float, default=1e-14, help="relative singular value cutoff")
    p.add_argument("--J", type=float, default=1.0)
    p.add_argument("--g", type=float, default=1.0, help="transverse field (tfi)")
    p.add_argument("--device", default="cpu", help='"cpu" or "cuda" (the plans run there)')
    p.add_argument("--dtype", choices=("float64", "complex128"), default="float64")
    p.add_argument("--eigensolver", choices=("lanczos", "eigsh"), default="lanczos")
    p.add_argument("--tol", type=float, default=1e-10, help="Lanczos residual tolerance")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    mpo = make_mpo(args.model, args.J, args.g)
    t0 = time.perf_counter()
    dmrg = DMRG(
        mpo,
        args.L,
        args.chi,
        cutoff=args.cutoff,
        device=args.device,
        dtype=np.dtype(args.dtype),
        seed=args.seed,
        eigensolver=args.eigensolver,
        tol=args.tol,
    )
    energies = dmrg.run(args.sweeps, verbose=True)
    elapsed = time.perf_counter() - t0
    print(
        f"E0 = {energies[-1]:.15f}  E0/L = {energies[-1] / args.L:.15f}  "
        f"({elapsed:.2f} s, {dmrg.matvecs} matvecs, {dmrg.kernels.plans()} plans)"
    )
    if args.model == "heisenberg" and args.L == 20 and args.J == 1.0:
        print(
            f"error against E0(L=20) = {EXACT_HEISENBERG_L20}: "
            f"{energies[-1] - EXACT_HEISENBERG_L20:.2e}"
        )
    return energies


if __name__ == "__main__":
    main()
