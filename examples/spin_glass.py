"""The ground state of a +-J spin glass on a random 3-regular graph, as one tropical network.

H(s) = sum over edges (i, j) of J_ij s_i s_j + sum over vertices of h_i s_i, s_i = +-1, on
``networkx.random_regular_graph(3, n, seed)`` with J_ij = +-1 drawn at random (``--couplings
gauss`` draws them from a normal distribution instead, which leaves no ties) and fields h_i
(zero unless ``--field`` is given). The network has one 2 x 2 tensor per edge,
E[a, b] = J_ij s(a) s(b) with s(0) = +1, s(1) = -1, and one length-2 tensor per vertex,
V[a] = h_i s(a); the label of vertex i is shared by its tensor and its three edges (a
hyperedge). Lazy ``tl.einsum`` calls on these tensors:

- ``semiring="min_plus"``: min over all 2^n configurations of the sum of the entries, the
  ground-state energy E0;
- ``semiring="count"`` on -H (max-plus with the number of configurations reaching the max):
  -E0 and the ground-state degeneracy;
- ``tl.grad`` of a min-plus value with respect to the vertex tensors: tropical
  back-propagation marks the entries an optimal configuration uses, so the gradient with
  respect to V_i is (1, 0) where the optimum has s_i = +1 and (0, 1) where it has s_i = -1.
  With tied ground states (+-J glasses have many; the global flip alone pairs them) it marks
  the union of them all, so the gradient is taken of the network with a small random field
  eps_i s_i added (sum |eps_i| < 1/4, below the gap of 1 between integer energies), whose
  optimum is one of the ground states (with real couplings and no fields, s_0 is clamped to
  +1 instead, against the global flip). That configuration's energy, computed directly from J
  and h, must equal E0.

Up to ``--max-brute`` spins (default 20) the 2^n energies are also enumerated with NumPy.

    python examples/spin_glass.py --n 100 --seed 0
    python examples/spin_glass.py --n 40 --memory-limit 1KiB    # the energy and count sliced
    python examples/spin_glass.py --small                       # n = 16, brute force too

``--memory-limit`` slices the energy and counting networks (not the gradient's).

Prints the network's size, contraction cost and slices (``tl.explain``), the ground-state
energy, the degeneracy, the optimal configuration read from the gradient and its energy
("energy of the configuration = ..."), and, at small n, the brute-force energy and degeneracy
("brute force: ...").
"""

from __future__ import annotations

import argparse
import time

import networkx as nx
import numpy as np

import tenloom as tl

SPIN = np.array([1.0, -1.0])  # s(a) for the index a = 0, 1


def random_glass(
    n: int, seed: int = 0, couplings: str = "pm1", field: float = 0.0, degree: int = 3
) -> tuple[list[tuple[int, int]], np.ndarray, np.ndarray]:
    """(edges, J, h): the edges of ``random_regular_graph(degree, n, seed)`` (sorted pairs),
    one coupling per edge (+-1, or standard normal for ``couplings="gauss"``) and one field
    per vertex (``field`` times a standard normal; zeros when ``field`` is 0)."""
    if couplings not in ("pm1", "gauss"):
        raise ValueError(f"couplings must be 'pm1' or 'gauss', got {couplings!r}")
    graph = nx.random_regular_graph(degree, n, seed=seed)
    edges = sorted(tuple(sorted(e)) for e in graph.edges())
    rng = np.random.default_rng(seed)
    if couplings == "pm1":
        J = rng.choice([-1.0, 1.0], size=len(edges))  # noqa: N806
    else:
        J = rng.standard_normal(len(edges))  # noqa: N806
    h = field * rng.standard_normal(n) if field else np.zeros(n)
    return edges, J, h


def network(edges, J, h, dtype="float64", sign: float = 1.0):  # noqa: N803
    """(vertex arrays, edge arrays, index lists): the tensors of ``sign * H``, the vertex
    tensors first (vertex i has label i), then one per edge (labels i, j)."""
    vertex = [(sign * hi * SPIN).astype(dtype) for hi in h]
    edge = [(sign * Jij * np.outer(SPIN, SPIN)).astype(dtype) for Jij in J]
    subs = [[i] for i in range(len(h))] + [[i, j] for i, j in edges]
    return vertex, edge, subs


def energy(spins: np.ndarray, edges, J, h) -> float:  # noqa: N803
    """H(s) for one configuration of +-1 spins."""
    e = np.asarray(edges)
    return float(np.sum(J * spins[e[:, 0]] * spins[e[:, 1]]) + np.dot(h, spins))


def brute_force(edges, J, h) -> tuple[float, int]:  # noqa: N803
    """(ground-state energy, degeneracy) by enumerating the 2^n configurations (NumPy, in
    blocks of 2^16): energies are compared exactly for integer couplings and fields, within
    1e-9 otherwise."""
    n = len(h)
    e = np.asarray(edges)
    exact = np.all(np.asarray(J) == np.round(J)) and np.all(np.asarray(h) == np.round(h))
    best, count = np.inf, 0
    block = 1 << min(n, 16)
    for start in range(0, 1 << n, block):
        codes = np.arange(start, start + block, dtype=np.int64)
        spins = 1.0 - 2.0 * ((codes[:, None] >> np.arange(n)) & 1)
        en = (spins[:, e[:, 0]] * spins[:, e[:, 1]]) @ J + spins @ h
        low = en.min()
        tol = 0.0 if exact else 1e-9
        if low < best - tol:
            best, count = low, int(np.sum(en <= low + tol))
        elif low <= best + tol:
            count += int(np.sum(en <= best + tol))
    return float(best), count


def tie_breaker(n: int, seed: int = 0) -> np.ndarray:
    """Random fields eps_i with sum |eps_i| < 1/4 (to single out one of tied ground states)."""
    return np.random.default_rng([seed, 1]).uniform(-1.0, 1.0, n) * (0.25 / n)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=100, help="number of spins (n * 3 even)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--couplings", choices=("pm1", "gauss"), default="pm1")
    p.add_argument("--field", type=float, default=0.0, help="standard deviation of h_i")
    p.add_argument("--dtype", default="float64")
    p.add_argument("--device", default="cpu", help='"cpu" or "cuda" (where the network runs)')
    p.add_argument("--memory-limit", default=None, help="bytes or '1MiB' (slices the network)")
    p.add_argument("--max-brute", type=int, default=20, help="brute force up to this many spins")
    p.add_argument("--small", action="store_true", help="n = 16")
    args = p.parse_args(argv)
    n = 16 if args.small else args.n
    opts = {"device": args.device}
    if args.memory_limit is not None:
        opts["memory_limit"] = args.memory_limit

    edges, J, h = random_glass(n, args.seed, args.couplings, args.field)  # noqa: N806
    vertex, edge, subs = network(edges, J, h, args.dtype)
    vs = [tl.asarray(v) for v in vertex]
    es = [tl.asarray(a) for a in edge]
    ops = [x for t, s in zip(vs + es, subs) for x in (t, s)]
    e0 = tl.einsum(*ops, [], semiring="min_plus")
    # the degeneracy: max-plus of -H with counting (the vertex and edge tensors negated)
    neg_v, neg_e, _ = network(edges, J, h, args.dtype, sign=-1.0)
    neg = [tl.asarray(a) for a in neg_v + neg_e]
    counted = tl.einsum(*[x for t, s in zip(neg, subs) for x in (t, s)], [], semiring="count")
    # one optimal configuration: the gradient of the minimum with respect to the vertex
    # tensors marks every entry some optimal configuration uses, so tied ground states are
    # told apart first. Integer couplings and fields (+-J glasses have many ties): a small
    # random field eps_i s_i, sum |eps_i| < 1/4; every excited state lies at least 1 above E0,
    # so the perturbed optimum is one of the ground states (and generically unique). Real
    # couplings without fields: the global flip pairs every state with its mirror, so s_0 is
    # clamped to +1 (V_0 = (0, +inf): the other value never optimal), which keeps E0.
    exact = bool(np.all(np.round(J) == J) and np.all(h == np.round(h)))
    eps = tie_breaker(n, args.seed) if exact else np.zeros(n)
    tb_vertex, tb_edge, _ = network(edges, J, h + eps, "float64")
    tie_break = "a random field eps_i s_i" if exact else "none needed"
    if not exact and not np.any(h):
        tb_vertex[0] = np.array([0.0, np.inf])
        tie_break = "s_0 clamped to +1"
    tb = [tl.asarray(v) for v in tb_vertex]
    tb_ops = [x for t, s in zip(tb + [tl.asarray(a) for a in tb_edge], subs) for x in (t, s)]
    e_tb = tl.einsum(*tb_ops, [], semiring="min_plus")
    grads = tl.grad(e_tb, tb)

    report = tl.explain(e0, **opts)
    slices = max((s["slices"] for s in report.slicing), default=1)
    print(f"spin glass: n = {n}, {len(edges)} edges ({args.couplings}), {args.dtype}")
    print(
        f"network: {len(subs)} tensors, {report.after.flops:.3g} flops, "
        f"predicted peak {report.after.peak_bytes} bytes, {slices} slice(s)"
    )
    # the energy and the count (sliced under --memory-limit), then the tie-broken optimum
    # and its gradient (never sliced: the gradients' arrays are what a limit would have to
    # hold, and at these sizes they outweigh every intermediate)
    t0 = time.perf_counter()
    energy0, count = tl.evaluate(e0, counted, **opts)
    perturbed, *g = tl.evaluate(e_tb, *grads, device=args.device)
    elapsed = time.perf_counter() - t0
    energy0 = float(energy0)
    degeneracy = float(count[1])
    spins = np.where(np.stack(g)[:, 0] > 0.5, 1.0, -1.0)
    one_hot = bool(np.all(np.sort(np.stack(g), axis=1) == [0.0, 1.0]))
    config_energy = energy(spins, edges, J, h)
    print(f"ground-state energy E0 = {energy0:.6f}  ({elapsed:.3f} s with counting and grad)")
    print(f"counting semiring: max(-H) = {float(count[0]):.6f}, degeneracy = {degeneracy:.0f}")
    print("optimal configuration from tl.grad: " + "".join("+" if s > 0 else "-" for s in spins))
    print(
        f"gradient one-hot per vertex: {one_hot}  (ties broken by {tie_break}: "
        f"minimum {float(perturbed):.6f})"
    )
    print(f"energy of the configuration = {config_energy:.6f}  (E0 = {energy0:.6f})")
    out = {"n": n, "energy": energy0, "degeneracy": degeneracy, "spins": spins}
    out.update(config_energy=config_energy, one_hot=one_hot, max_neg=float(count[0]))
    out.update(slices=slices)
    out.update(brute_energy=None, brute_degeneracy=None, time=elapsed)
    if n <= args.max_brute:
        ref, deg = brute_force(edges, J, h)
        print(f"brute force: E0 = {ref:.6f}, degeneracy = {deg}  (2^{n} configurations)")
        out.update(brute_energy=ref, brute_degeneracy=deg)
    return out


if __name__ == "__main__":
    main()
