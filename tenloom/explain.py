"""``tl.explain``: what each pass did, as a table of nodes, flops, peak bytes and copies."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from tenloom.dump import einsum_text
from tenloom.graph.graph import Graph
from tenloom.graph.ops import Op
from tenloom.passes.cost import einsum_sizes, graph_flops, peak_bytes
from tenloom.passes.eliminate_permutations import count_copies
from tenloom.passes.options import Options
from tenloom.runtime.options import parse_options
from tenloom.runtime.session import (
    build_graph,
    check_limit_feasible,
    check_memory_limit,
    optimize,
)


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
    slicing: list[dict] = field(default_factory=list)
    sweeps: dict | None = None  # forward / backward split when gradients are explained
    # precision=: (precision, [(count, what, how)]) when the option was given
    precision: tuple | None = None
    # issue 23: the program's CUDA-graph segments (runtime/capture.py), on a CUDA device
    cuda_graphs: list | None = None

    @property
    def captured_segments(self) -> int:
        """issue 23: how many captured graphs a CUDA run of the program replays."""
        return sum(1 for x in self.cuda_graphs or () if x.startswith("captured"))

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
        lines += self._slicing_lines()
        lines += self._sweep_lines()
        if self.precision is not None:  # precision=: how each kind of contraction runs
            lines += ["", f"precision={self.precision[0]!r} (contractions):"]
            lines += [
                f"  {n} {what}{'s' if n > 1 else ''}: {how}" for n, what, how in self.precision[1]
            ]
        if self.cuda_graphs:  # issue 23
            lines += ["", "CUDA graphs (cuda_graphs=True; runtime/capture.py):"]
            lines += ["  " + x for x in self.cuda_graphs]
        return "\n".join(lines)

    def _sweep_lines(self) -> list[str]:
        s = self.sweeps
        if not s:
            return []
        f, b = s["forward"], s["backward"]
        lines = [
            "",
            "forward and backward (reverse sweep through the forward contraction trees):",
            f"  forward : {f['contractions']:>5} pairwise contractions, {_num(f['flops'])} flops",
            f"  backward: {b['contractions']:>5} pairwise contractions, {_num(b['flops'])} flops"
            f" ({b['flops'] / max(f['flops'], 1):.2f}x the forward)",
        ]
        for n in s["networks"]:
            eq = n["equation"] if len(n["equation"]) <= 160 else n["equation"][:157] + "..."
            lines.append(f"  forward network of {n['operands']} operands: {eq}")
        return lines

    def _slicing_lines(self) -> list[str]:
        if not self.slicing:
            return []
        lines = ["", "sliced networks (memory_limit):"]
        for s in self.slicing:
            inds = ", ".join(f"{lab}:{size}" for lab, size in s["indices"])
            ring = f" ({s['semiring']} semiring)" if s.get("semiring") else ""
            lines.append(
                f"  {s['operands']} operands{ring}, sliced over [{inds}]: {s['slices']} slices, "
                f"flops overhead {s['overhead']:.3f}x, predicted peak per slice "
                f"{_num(s['peak_per_slice'])} bytes"
            )
        return lines

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
    o = parse_options("explain", opts)  # checked as evaluate checks them, before any work
    graph = build_graph(tensors)
    if o.memory_limit is not None:  # a limit no slicing can meet: refused as evaluate does
        check_limit_feasible(graph, o.memory_limit, "explain")
    rows = [_row("traced", graph)]
    networks: list[Network] = []
    # evaluate's own optimization (cached), with the graph after each pass
    optimized = optimize(graph, o, stages=True)
    final = optimized.graph
    if o.memory_limit is not None:  # the predicted peak refused as evaluate refuses it
        check_memory_limit(final, o.memory_limit, "explain")
    captured = dict(optimized.stages or ())
    for name, g in captured.items():
        rows.append(_row(name, g, optimized.stats.get(name)))
    # networks: from the graph handed to contraction_order (or the last graph without it)
    names = list(captured)
    src = None
    if "contraction_order" in names:
        i = names.index("contraction_order")
        src = captured[names[i - 1]] if i > 0 else graph
    else:
        src = final
    for node in src.order:
        if node.op in (Op.EINSUM, Op.SEMIRING_EINSUM) and len(node.inputs) >= 2:
            from tenloom.passes.cost import network_madds

            terms, out = node.attrs[:2]
            madds = network_madds(terms, out, einsum_sizes(node))
            factor = 2 * (4 if node.dtype.kind == "c" else 1)
            ring = f" ({node.attrs.semiring})" if node.op is Op.SEMIRING_EINSUM else ""
            networks.append(
                Network(
                    einsum_text(terms, out) + ring,
                    len(terms),
                    [x.shape for x in node.inputs],
                    madds * factor,
                )
            )
    assert math.isfinite(rows[-1].flops)
    # the unsliced tree the slicing is measured against: the search the graph was made with
    searched = replace(o, search_effort=optimized.effort)
    slicing = [slicing_summary(n, searched) for n in final.order if n.op is Op.SLICED]
    from tenloom.runtime.precision import summary  # precision=

    precision = (o.precision, summary(final, o.precision)) if "precision" in o.given else None
    from tenloom.runtime.capture import explain_segments  # issue 23

    return Report(
        rows,
        networks,
        final,
        slicing,
        _sweeps(graph, final, o),
        precision,
        explain_segments(final, o),
    )


def _contractions(graph: Graph) -> tuple[int, int]:
    from tenloom.passes.cost import node_flops

    nodes = [
        n for n in graph.order if n.op in (Op.CONTRACT, Op.EINSUM, Op.SLICED, Op.SEMIRING_EINSUM)
    ]
    return len(nodes), sum(node_flops(n) for n in nodes)


def _sweeps(graph: Graph, final: Graph, options: Options) -> dict | None:
    """When some outputs are gradients (tl.grad / tl.vjp): the forward part (the
    differentiated outputs, optimized alone) and the rest of the graph, the reverse sweep."""
    from tenloom.autodiff import SWEEP_NETWORKS, SWEEPS

    forward_outs: dict[int, Any] = {}
    for o in graph.outputs:
        for f in SWEEPS.get(o, ()):
            forward_outs[id(f)] = f
    if not forward_outs:
        return None
    fwd_graph = Graph(tuple(forward_outs.values()))
    fwd_final = optimize(fwd_graph, options).graph
    n_f, flops_f = _contractions(fwd_final)
    n_all, flops_all = _contractions(final)
    networks = {}
    for o in graph.outputs:
        for net in SWEEP_NETWORKS.get(o, ()):
            networks[net["equation"]] = net
    return {
        "forward": {"contractions": n_f, "flops": flops_f},
        "backward": {"contractions": max(n_all - n_f, 0), "flops": max(flops_all - flops_f, 0)},
        "networks": list(networks.values()),
    }


def slicing_summary(node, o: Options) -> dict:
    """Indices sliced, number of slices, flops overhead against the unsliced tree that the order
    search chose (from its path cache), and the predicted peak bytes of one slice."""
    import cotengra as ctg

    from tenloom.graph.ops.sliced import label_sizes, n_slices, slice_itemsize, slice_peak_bytes
    from tenloom.passes.contraction_order import find_path, path_cost

    terms, out, sliced, path, wrt = node.attrs[:5]
    ops = node.inputs[: len(terms)]
    sizes = label_sizes([x.shape for x in ops], terms)
    complex_ = node.dtype.kind == "c"
    unsliced = path_cost(terms, out, sizes, find_path(terms, out, sizes, o, complex_))
    tree = ctg.ContractionTree.from_path(terms, out, sizes, ssa_path=path)
    for lab, _ in sliced:
        tree.remove_ind_(lab)
    total = float(tree.contraction_cost())  # cotengra counts every slice
    return {
        "operands": len(terms),
        "indices": list(sliced),
        "slices": n_slices(node.attrs),
        "overhead": total / max(unsliced, 1.0),
        "peak_per_slice": slice_peak_bytes(
            node.attrs, [x.shape for x in node.inputs], slice_itemsize(node)
        ),
        "semiring": node.attrs.semiring,
    }
