"""``tl.explain``: what each pass did, as a table of nodes, flops, peak bytes and copies."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tenloom.graph.dump import einsum_text
from tenloom.graph.graph import Graph
from tenloom.graph.ops import Op
from tenloom.passes import run_pipeline
from tenloom.passes.cost import einsum_sizes, graph_flops, peak_bytes
from tenloom.passes.eliminate_permutations import count_copies


@dataclass
class Row:
    stage: str
    nodes: int
    flops: int
    peak_bytes: int
    copies: int
    stats: dict = field(default_factory=dict)


@dataclass
class Network:
    """An n-ary contraction as the order search saw it."""

    equation: str
    operands: int
    shapes: list
    flops_left_to_right: int


@dataclass
class Report:
    rows: list[Row]
    networks: list[Network]
    graph: Graph

    @property
    def before(self) -> Row:
        return self.rows[0]

    @property
    def after(self) -> Row:
        return self.rows[-1]

    def __str__(self) -> str:
        head = f"{'stage':<24}{'nodes':>8}{'flops':>14}{'peak bytes':>14}{'copies':>8}  changes"
        lines = [head, "-" * len(head)]
        for r in self.rows:
            changes = ", ".join(f"{k}={v}" for k, v in r.stats.items() if v)
            lines.append(
                f"{r.stage:<24}{r.nodes:>8}{_num(r.flops):>14}{_num(r.peak_bytes):>14}"
                f"{r.copies:>8}  {changes}"
            )
        if self.networks:
            lines.append("")
            lines.append("contraction networks seen by the order search:")
            for n in self.networks:
                eq = n.equation if len(n.equation) <= 200 else n.equation[:197] + "..."
                lines.append(
                    f"  {n.operands} operands, {_num(n.flops_left_to_right)} flops left to right:"
                    f" {eq}"
                )
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle) -> None:  # IPython
        p.text(str(self))


def _num(x: float) -> str:
    if x < 1e5:
        return str(int(x))
    return f"{x:.3g}"


def _row(stage: str, graph: Graph, stats: dict | None = None) -> Row:
    return Row(
        stage,
        len(graph),
        graph_flops(graph),
        peak_bytes(graph),
        count_copies(graph),
        dict(stats or {}),
    )


def explain(*tensors: Any, **opts: Any) -> Report:
    """Run the pass pipeline on the graph of ``tensors`` and report each pass's effect.

    ``str(report)`` is the per-pass table; ``report.networks`` lists the n-ary contraction
    networks the order search received (after merging and pre-reduction).
    """
    from tenloom.runtime.evaluate import build_graph

    graph = build_graph(tensors)
    rows = [_row("traced", graph)]
    networks: list[Network] = []
    captured: dict = {}

    def on_pass(name: str, g: Graph) -> None:
        captured[name] = g

    final, ctx = run_pipeline(graph, opts.get("passes"), opts, on_pass=on_pass)
    for name, g in captured.items():
        rows.append(_row(name, g, ctx.stats.get(name)))
    # networks: from the graph handed to contraction_order (or the last graph without it)
    names = list(captured)
    src = None
    if "contraction_order" in names:
        i = names.index("contraction_order")
        src = captured[names[i - 1]] if i > 0 else graph
    else:
        src = final
    for node in src.order:
        if node.op is Op.EINSUM and len(node.inputs) >= 2:
            from tenloom.passes.cost import network_madds

            terms, out = node.attrs
            madds = network_madds(terms, out, einsum_sizes(node))
            factor = 2 * (4 if node.dtype.kind == "c" else 1)
            networks.append(
                Network(
                    einsum_text(terms, out),
                    len(terms),
                    [x.shape for x in node.inputs],
                    madds * factor,
                )
            )
    assert math.isfinite(rows[-1].flops)
    return Report(rows, networks, final)
