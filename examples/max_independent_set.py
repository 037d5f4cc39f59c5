"""The maximum independent set of a random graph, its size and how many there are, by tropical
tensor networks.

An independent set takes no two ends of an edge. With x_i = 0, 1 (vertex i out or in), the
size of a set is sum_i x_i, and the constraint is a factor that is -inf for x_i = x_j = 1 on an
edge. In max-plus algebra the network of one vertex tensor V = (0, 1) per vertex and one edge
tensor E = [[0, 0], [0, -inf]] per edge (vertex i's label shared by its tensor and its edges)
contracts to the maximum independent set size; ``semiring="count"`` gives it with the number
of maximum independent sets. ``tl.grad`` of the size with respect to the vertex tensors marks
the vertices of the maximum sets (the gradient with respect to V_i is (0, 1) where vertex i is
in one); as there are usually many, tied, one is singled out by taking the gradient of the
network with vertex tensors (0, 1 + eps_i), small random eps_i > 0 with sum < 1/2 (below the gap
of 1 between set sizes), whose optimum is one of the maximum sets (generically unique).

The graph is ``networkx.random_regular_graph(3, n, seed)`` (``--graph regular``, the default)
or ``networkx.gnp_random_graph(n, p, seed)`` (``--graph gnp``). At up to ``--max-check``
vertices (default 40) the size and the count are checked with networkx: a maximum independent
set is a maximum clique of the complement graph (``networkx.find_cliques``).

    python examples/max_independent_set.py --n 60 --seed 0
    python examples/max_independent_set.py --graph gnp --n 40 --p 0.2
    python examples/max_independent_set.py --n 40 --memory-limit 1KiB    # sliced
    python examples/max_independent_set.py --small              # n = 20

Prints the graph, the maximum independent set size, the number of maximum independent sets,
the set read from the gradient (and whether it is independent and of maximum size) and, at
small n, networkx's size and count ("networkx: ...").
"""

from __future__ import annotations

import argparse
import time

import networkx as nx
import numpy as np

import tenloom as tl

VERTEX = np.array([0.0, 1.0])
EDGE = np.array([[0.0, 0.0], [0.0, -np.inf]])


def random_graph(n: int, seed: int = 0, kind: str = "regular", p: float = 0.2) -> nx.Graph:
    """A random 3-regular graph on n vertices, or G(n, p)."""
    if kind == "regular":
        return nx.random_regular_graph(3, n, seed=seed)
    if kind == "gnp":
        return nx.gnp_random_graph(n, p, seed=seed)
    raise ValueError(f"graph must be 'regular' or 'gnp', got {kind!r}")


def network(graph: nx.Graph, dtype="float64"):
    """(vertex arrays, edge arrays, index lists): vertex i has label i, edge (i, j) labels
    (i, j); the vertex tensors come first."""
    nodes = sorted(graph.nodes())
    vertex = [VERTEX.astype(dtype) for _ in nodes]
    edges = sorted(tuple(sorted(e)) for e in graph.edges())
    edge = [EDGE.astype(dtype) for _ in edges]
    subs = [[i] for i in nodes] + [[i, j] for i, j in edges]
    return vertex, edge, subs


def networkx_mis(graph: nx.Graph) -> tuple[int, int]:
    """(maximum independent set size, number of maximum independent sets): the maximum
    cliques of the complement, from networkx's maximal-clique enumeration."""
    sizes = [len(c) for c in nx.find_cliques(nx.complement(graph))]
    best = max(sizes, default=0)
    return best, sum(s == best for s in sizes)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=60)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--graph", choices=("regular", "gnp"), default="regular")
    p.add_argument("--p", type=float, default=0.2, help="edge probability of --graph gnp")
    p.add_argument("--dtype", default="float64")
    p.add_argument("--device", default="cpu", help='"cpu" or "cuda" (where the network runs)')
    p.add_argument("--memory-limit", default=None, help="bytes or '1MiB' (slices the network)")
    p.add_argument("--max-check", type=int, default=40, help="networkx check up to this n")
    p.add_argument("--small", action="store_true", help="n = 20")
    args = p.parse_args(argv)
    n = 20 if args.small else args.n
    opts = {"device": args.device}
    if args.memory_limit is not None:
        opts["memory_limit"] = args.memory_limit

    graph = random_graph(n, args.seed, args.graph, args.p)
    vertex, edge, subs = network(graph, args.dtype)
    vs = [tl.asarray(v) for v in vertex]
    ops = [x for t, s in zip(vs + [tl.asarray(e) for e in edge], subs) for x in (t, s)]
    size = tl.einsum(*ops, [], semiring="max_plus")
    counted = tl.einsum(*ops, [], semiring="count")
    # one maximum set: the gradient of the perturbed network (ties broken by eps_i)
    eps = np.random.default_rng([args.seed, 1]).uniform(0.0, 0.5 / n, n)
    tb = [tl.asarray(v + np.array([0.0, e]).astype(args.dtype)) for v, e in zip(vertex, eps)]
    tb_ops = [x for t, s in zip(tb + [tl.asarray(e) for e in edge], subs) for x in (t, s)]
    grads = tl.grad(tl.einsum(*tb_ops, [], semiring="max_plus"), tb)

    report = tl.explain(size, **opts)
    slices = max((s["slices"] for s in report.slicing), default=1)
    print(f"graph: {args.graph}, n = {n}, {graph.number_of_edges()} edges, seed {args.seed}")
    print(f"network: {len(subs)} tensors, {report.after.flops:.3g} flops, {slices} slice(s)")
    t0 = time.perf_counter()
    mis, count = tl.evaluate(size, counted, **opts)  # sliced under --memory-limit
    g = tl.evaluate(*grads, device=args.device)
    elapsed = time.perf_counter() - t0
    mis, number = float(mis), float(count[1])
    chosen = [i for i, gi in zip(sorted(graph.nodes()), g) if gi[1] > 0.5]
    independent = not any(graph.has_edge(i, j) for i in chosen for j in chosen if i < j)
    print(f"maximum independent set size = {mis:.0f}  ({elapsed:.3f} s with counting and grad)")
    print(f"number of maximum independent sets = {number:.0f}  (count: {float(count[0]):.0f})")
    print(f"one maximum set from tl.grad: {chosen}")
    print(f"  {len(chosen)} vertices, independent: {independent}")
    out = {"n": n, "size": mis, "count": number, "set": chosen, "independent": independent}
    out.update(reference=None, time=elapsed, slices=slices)
    if n <= args.max_check:
        ref = networkx_mis(graph)
        print(f"networkx: size = {ref[0]}, number of maximum sets = {ref[1]}")
        out["reference"] = ref
    return out


if __name__ == "__main__":
    main()
