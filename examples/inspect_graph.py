"""Looking inside tenloom: ``tl.explain``, ``tl.dump``, ``tl.visualize`` and ``tl.to_networkx``.

The program is a small network with elementwise glue: y = tanh(A @ B @ C @ x) * 2 + sum(exp(x)),
traced from separate calls. The script prints

- ``tl.dump(y, optimized=False)``: the graph as traced, one line per node;
- ``tl.explain(y)``: what each pass did (nodes, flops, predicted peak bytes, copies) and the
  contraction network the order search saw;
- ``tl.dump(y)``: the optimized graph that ``evaluate`` runs (one merged, ordered network, a
  fused elementwise kernel);
- ``tl.to_networkx(y)`` and ``tl.to_networkx(y, optimized=True)``: the traced and optimized
  graphs as networkx MultiDiGraphs (node and edge counts, the ops, the longest path);

and writes ``tl.visualize`` drawings (the optimized graph, the traced and optimized graphs side
by side, the contraction tree) as SVG to ``--out`` when graphviz's Python package and its
``dot`` program are installed; with the package only it writes the DOT text (``.dot``), and
without it says so. The value is checked against NumPy.

    python examples/inspect_graph.py --n 64 --out graphs
    python examples/inspect_graph.py --small              # n = 8

Prints the four reports above (headed "== tl.dump (as traced) ==" and so on), the files
written, and "|y - NumPy| = ...".
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import numpy as np

import tenloom as tl


def build(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal((n, n)) / np.sqrt(n) for _ in range(3)] + [rng.standard_normal(n)]
    a, b, c, x = (tl.asarray(v) for v in arrays)
    y = tl.tanh(a @ b @ c @ x) * 2.0 + tl.sum(tl.exp(x))
    A, B, C, X = arrays  # noqa: N806
    return y, np.tanh(A @ B @ C @ X) * 2.0 + np.exp(X).sum()


def draw(y, out: Path) -> list[str]:
    """The drawings written (SVG when ``dot`` exists, DOT text when only the Python package
    does); a line saying why none were, otherwise."""
    try:
        import graphviz  # noqa: F401
    except ImportError:
        print("graphviz's Python package is missing: no drawings (pip install 'tenloom[viz]')")
        return []
    suffix = ".svg" if shutil.which("dot") else ".dot"
    if suffix == ".dot":
        print("graphviz's dot program is missing: writing DOT text instead of SVG")
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for name, kw in (
        ("optimized", {}),
        ("both", {"optimized": "both"}),
        ("tree", {"what": "tree"}),
    ):
        path = out / f"{name}{suffix}"
        tl.visualize(y, str(path), **kw)
        files.append(str(path))
    return files


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--out", default=None, help="folder for the drawings (default: a temp folder)")
    p.add_argument("--small", action="store_true", help="n = 8")
    args = p.parse_args(argv)
    n = 8 if args.small else args.n

    y, ref = build(n)
    print("== tl.dump (as traced) ==")
    print(tl.dump(y, optimized=False))
    print("== tl.explain ==")
    report = tl.explain(y)
    print(report)
    print("== tl.dump (optimized) ==")
    print(tl.dump(y))
    print("== tl.to_networkx ==")
    import networkx as nx

    graphs = {"traced": tl.to_networkx(y), "optimized": tl.to_networkx(y, optimized=True)}
    for name, g in graphs.items():
        ops = sorted({d["op"] for _, d in g.nodes(data=True)})
        depth = nx.dag_longest_path_length(g)
        print(f"{name}: {g.number_of_nodes()} nodes, {g.number_of_edges()} edges, longest path "
              f"{depth}; ops: {', '.join(ops)}")  # fmt: skip
    g = graphs["optimized"]
    print("== tl.visualize ==")
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="tenloom-graphs-"))
    files = draw(y, out)
    for f in files:
        print(f"wrote {f}")
    (value,) = tl.evaluate(y)
    err = float(np.max(np.abs(value - ref)))
    print(f"|y - NumPy| = {err:.2e}")
    return {
        "n": n,
        "traced_nodes": report.before.nodes,
        "optimized_nodes": report.after.nodes,
        "networkx_nodes": g.number_of_nodes(),
        "networkx_edges": g.number_of_edges(),
        "files": files,
        "error": err,
    }


if __name__ == "__main__":
    main()
