"""Expectation values of a random MPS, built site by site: <Sz_i> and the Heisenberg energy.

A random complex MPS of L sites (bond dimension chi, tensors (left, physical, right)) is built
one ``tl.asarray`` per site and normalized lazily (divided by sqrt(<psi|psi>), itself a
contraction). Two expectation values follow, each written as separate per-site
``tl.einsum`` calls that tenloom merges into one network and orders as a whole:

- <psi|Sz_i|psi> for a site i in the middle (a local operator: identity elsewhere);
- <psi|H|psi> for the open S=1/2 Heisenberg chain H = sum_i S_i . S_{i+1}, through its MPO
  (bond dimension 5), swept site by site through the environment.

Against NumPy: the MPS contracted to its dense 2**L vector, Sz applied on one axis and H applied
bond by bond (S^x S^x + S^y S^y + S^z S^z on axes i, i+1), with no MPO involved.

    python examples/mps_expectation.py --L 16 --chi 32
    python examples/mps_expectation.py --small            # L = 8, chi = 4

Prints <psi|psi> after normalizing, <Sz_i> and E from tenloom and from the dense vector, and the
differences ("|dE| = ...").
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tenloom as tl

SX = np.array([[0.0, 0.5], [0.5, 0.0]], dtype=complex)
SY = np.array([[0.0, -0.5j], [0.5j, 0.0]])
SZ = np.array([[0.5, 0.0], [0.0, -0.5]], dtype=complex)


def random_mps(L: int, chi: int, seed: int = 0) -> list[np.ndarray]:  # noqa: N803
    """Random complex tensors (left, 2, right), bond dimensions min(chi, 2**i, 2**(L-i))."""
    rng = np.random.default_rng(seed)
    dims = [min(chi, 2**i, 2 ** (L - i)) for i in range(L + 1)]
    return [
        (rng.standard_normal(s) + 1j * rng.standard_normal(s)) / np.sqrt(2 * dims[i])
        for i, s in enumerate((dims[i], 2, dims[i + 1]) for i in range(L))
    ]


def heisenberg_mpo() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """W (5, 5, 2, 2) (left, right, out, in) with boundary vectors: H = sum_i S_i . S_{i+1}."""
    W = np.zeros((5, 5, 2, 2), dtype=complex)  # noqa: N806
    eye = np.eye(2)
    W[0, 0] = W[4, 4] = eye
    for k, s in enumerate((SX, SY, SZ), start=1):
        W[0, k] = s  # start a term on this site
        W[k, 4] = s  # finish it on the next one
    left, right = np.eye(5)[0], np.eye(5)[4]
    return W, left, right


def norm_sq(mps: list) -> tl.Tensor:
    env = tl.ones((1, 1), dtype="complex128")
    for a in mps:
        env = tl.einsum("ab,asc,bsd->cd", env, tl.conj(a), a)
    return tl.real(tl.einsum("aa->", env))


def local_expectation(mps: list, op: np.ndarray, site: int) -> tl.Tensor:
    """<psi|op_site|psi> (psi normalized): identity on every other site."""
    env = tl.ones((1, 1), dtype="complex128")
    o = tl.asarray(op)
    for i, a in enumerate(mps):
        if i == site:
            env = tl.einsum("ab,asc,st,btd->cd", env, tl.conj(a), o, a)
        else:
            env = tl.einsum("ab,asc,bsd->cd", env, tl.conj(a), a)
    return tl.real(tl.einsum("aa->", env))


def mpo_expectation(mps: list, W: np.ndarray, left: np.ndarray, right: np.ndarray):  # noqa: N803
    w = tl.asarray(W)
    env = tl.asarray(left.reshape(1, -1, 1).astype(complex))
    for a in mps:
        env = tl.einsum("awc,asb,wxst,ctd->bxd", env, tl.conj(a), w, a)
    return tl.real(tl.einsum("awa,w->", env, tl.asarray(right.astype(complex))))


def dense_vector(tensors: list[np.ndarray]) -> np.ndarray:
    psi = tensors[0]
    for a in tensors[1:]:
        psi = np.tensordot(psi, a, axes=1)
    return psi.reshape((2,) * len(tensors))  # both boundary bonds have size 1


def dense_heisenberg_energy(psi: np.ndarray) -> float:
    L = psi.ndim  # noqa: N806
    h_psi = np.zeros_like(psi)
    for i in range(L - 1):
        for s in (SX, SY, SZ):
            t = np.tensordot(s, psi, axes=(1, i))
            t = np.moveaxis(t, 0, i)
            t = np.tensordot(s, t, axes=(1, i + 1))
            h_psi += np.moveaxis(t, 0, i + 1)
    return float(np.vdot(psi, h_psi).real)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--L", type=int, default=16)
    p.add_argument("--chi", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--small", action="store_true", help="L = 8, chi = 4")
    p.add_argument("--max-dense", type=int, default=20, help="skip the dense check above this L")
    args = p.parse_args(argv)
    L, chi = (8, 4) if args.small else (args.L, args.chi)  # noqa: N806

    arrays = random_mps(L, chi, args.seed)
    raw = [tl.asarray(a) for a in arrays]  # site by site
    scale = tl.sqrt(norm_sq(raw)) ** (1.0 / L)  # spread 1/|psi| over the sites
    mps = [a / scale for a in raw]
    site = L // 2
    t0 = time.perf_counter()
    nrm, sz, energy = (float(v) for v in tl.evaluate(norm_sq(mps), *_observables(mps, site)))
    t_tl = time.perf_counter() - t0
    print(f"MPS: L = {L}, chi = {chi}, complex128")
    print(f"<psi|psi> = {nrm:.15f}  (normalized lazily)")
    print(f"tenloom: <Sz_{site}> = {sz:+.12f}, E = {energy:+.12f}  ({t_tl:.3f} s)")
    out = {"L": L, "chi": chi, "norm": nrm, "sz": sz, "energy": energy}
    if L <= args.max_dense:  # noqa: SIM300 (L is a length, not a constant)
        t0 = time.perf_counter()
        psi = dense_vector(arrays)
        psi = psi / np.linalg.norm(psi)
        sz_ref = float(np.vdot(psi, np.moveaxis(np.tensordot(SZ, psi, (1, site)), 0, site)).real)
        e_ref = dense_heisenberg_energy(psi)
        t_ref = time.perf_counter() - t0
        print(f"dense:   <Sz_{site}> = {sz_ref:+.12f}, E = {e_ref:+.12f}  ({t_ref:.3f} s, NumPy)")
        print(f"|dSz| = {abs(sz - sz_ref):.2e}, |dE| = {abs(energy - e_ref):.2e}")
        out.update(sz_ref=sz_ref, energy_ref=e_ref)
    else:
        print(f"dense check skipped (L = {L} > --max-dense {args.max_dense})")
    return out


def _observables(mps: list, site: int) -> tuple[tl.Tensor, tl.Tensor]:
    W, left, right = heisenberg_mpo()  # noqa: N806
    return local_expectation(mps, SZ, site), mpo_expectation(mps, W, left, right)


if __name__ == "__main__":
    main()
