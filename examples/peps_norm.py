"""The norm <psi|psi> of a random PEPS, contracted whole and sliced under ``memory_limit=``.

A random complex PEPS on an Lx x Ly open lattice (bond dimension D, physical dimension 2; the
tensors on the edges have no leg outside the lattice) is doubled into the norm network
<psi|psi>: the ket tensors, their conjugates, shared physical indices. It is one lazy
``tl.einsum`` (integer index labels). Evaluated once without a limit, then with
``memory_limit=`` set below the unsliced tree's predicted peak, so that tenloom slices it:
``tl.explain`` shows the indices sliced, the number of slices, the flops overhead and the
predicted peak per slice. The two values must agree; at small sizes the PEPS contracted to a
dense vector in NumPy (site after site) gives a third, |psi|^2.

    python examples/peps_norm.py --Lx 4 --Ly 4 --D 4
    python examples/peps_norm.py --small                  # 3 x 3, D = 3

Prints the explain report of the sliced run (its "sliced networks" section gives "N slices"),
the unsliced and sliced norms, their relative difference and the NumPy reference
("dense |psi|^2 = ...").
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tenloom as tl


def random_peps(Lx: int, Ly: int, D: int, seed: int = 0):  # noqa: N803
    """{(i, j): (array, bond keys)}: the array's axes are (physical, *bonds), each bond a
    key ((i, j), (i', j')) shared by the two neighbours."""
    rng = np.random.default_rng(seed)
    sites = {}
    for i in range(Lx):
        for j in range(Ly):
            bonds = []
            for ni, nj in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)):
                if 0 <= ni < Lx and 0 <= nj < Ly:
                    bonds.append(tuple(sorted([(i, j), (ni, nj)])))
            shape = (2,) + (D,) * len(bonds)
            a = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) / np.sqrt(2 * D)
            sites[i, j] = (a, bonds)
    return sites


def norm_network(sites) -> tuple[list, list]:
    """The operands and integer index lists of <psi|psi> (ket, then bra)."""
    labels: dict = {}

    def label(key):
        return labels.setdefault(key, len(labels))

    arrays, subs = [], []
    for layer in ("ket", "bra"):
        for site, (a, bonds) in sites.items():
            arrays.append(a if layer == "ket" else a.conj())
            subs.append([label(("phys", site))] + [label((layer, b)) for b in bonds])
    return arrays, subs


def dense_state(sites) -> np.ndarray:
    """The PEPS as a dense vector of 2**(Lx*Ly) amplitudes: the ket tensors contracted one
    after another in NumPy (pairwise ``einsum``, row-major order, so at most Ly + 1 bonds are
    open), independent of any path search."""
    labels: dict = {}

    def label(key):
        return labels.setdefault(key, len(labels))

    cur, cur_labels = np.ones(()), []
    for site, (a, bonds) in sites.items():
        a_labels = [label(("phys", site))] + [label(b) for b in bonds]
        shared = set(cur_labels) & set(a_labels)
        out = [x for x in cur_labels + a_labels if x not in shared]
        cur, cur_labels = np.einsum(cur, cur_labels, a, a_labels, out), out
    return cur.reshape(-1)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--Lx", type=int, default=4)
    p.add_argument("--Ly", type=int, default=4)
    p.add_argument("--D", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--small", action="store_true", help="3 x 3, D = 3")
    p.add_argument(
        "--memory-limit", default=None, help="bytes or '1MiB'; default: 1/16 of the unsliced peak"
    )
    p.add_argument(
        "--max-dense", type=int, default=16, help="dense NumPy reference up to this many sites"
    )
    args = p.parse_args(argv)
    Lx, Ly, D = (3, 3, 3) if args.small else (args.Lx, args.Ly, args.D)  # noqa: N806

    sites = random_peps(Lx, Ly, D, args.seed)
    arrays, subs = norm_network(sites)
    ops = [x for a, s in zip(arrays, subs) for x in (tl.asarray(a), s)]
    norm = tl.real(tl.einsum(*ops, []))

    t0 = time.perf_counter()
    whole = tl.explain(norm)
    (unsliced,) = tl.evaluate(norm)
    t_whole = time.perf_counter() - t0
    limit = args.memory_limit or max(whole.after.peak_bytes // 16, 1)
    t0 = time.perf_counter()
    report = tl.explain(norm, memory_limit=limit)
    (sliced,) = tl.evaluate(norm, memory_limit=limit)
    t_sliced = time.perf_counter() - t0
    unsliced, sliced = float(unsliced), float(sliced)
    slices = report.slicing[0]["slices"] if report.slicing else 1

    print(f"PEPS {Lx} x {Ly}, D = {D}: norm network of {len(arrays)} tensors")
    print(f"unsliced tree: predicted peak {whole.after.peak_bytes} bytes")
    print(f"tl.explain(norm, memory_limit={limit!r}):")
    print(report)
    print(f"unsliced <psi|psi> = {unsliced:.15e}  ({t_whole:.3f} s)")
    print(f"sliced   <psi|psi> = {sliced:.15e}  ({t_sliced:.3f} s, {slices} slices)")
    rel = abs(sliced - unsliced) / abs(unsliced)
    print(f"relative difference = {rel:.2e}")
    out = {"Lx": Lx, "Ly": Ly, "D": D, "unsliced": unsliced, "sliced": sliced}
    out.update(slices=slices, memory_limit=limit, reference=None)
    if Lx * Ly <= args.max_dense:
        psi = dense_state(sites)
        ref = float(np.vdot(psi, psi).real)
        print(f"dense |psi|^2      = {ref:.15e}  (NumPy, {psi.size} amplitudes)")
        out["reference"] = ref
    return out


if __name__ == "__main__":
    main()
