"""``tl.visualize``: draw a graph (or its contraction trees) with graphviz.

    tl.visualize(t, "g.svg")                     # the optimized graph, as SVG
    tl.visualize(t, "g.png", optimized="both")   # traced and optimized side by side
    tl.visualize(t, "tree.pdf", what="tree")     # the contraction trees of the optimized graph

One DOT node per graph node, numbered ``%k`` as ``tl.dump`` numbers them, filled by op kind and
bordered by device; each edge carries the bytes of the value it moves; a FUSED node is drawn
inside a cluster with the steps of its program. The drawing is built in Python (the ``graphviz``
package only writes DOT text); rendering to SVG/PNG/PDF runs graphviz's ``dot`` program, while
``.dot``/``.gv`` paths get the DOT text without needing it.

The contraction-tree view is our own DOT drawing rather than cotengra's plotting (which is
matplotlib-based): it shares the node numbering, colours and byte labels of the graph view and
renders to the same formats.

``graphviz`` is imported here, on first use (``pip install 'tenloom[viz]'``).
"""

from __future__ import annotations

import os
import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from tenloom.dump import _attrs_text, einsum_text, sweep_text
from tenloom.graph.errors import TenloomError
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node
from tenloom.graph.ops import OPS, Op, OpKind
from tenloom.graph.ops.fused import program_steps
from tenloom.graph.ops.sliced import inner_for, n_slices
from tenloom.passes.cost import node_flops
from tenloom.trees import contraction_trees as _trees_of
from tenloom.trees import is_pairwise, out_labels, slot_labels, tree_labels

# Drawings past this many DOT nodes are refused: dot's layout time grows fast and the picture
# stops being readable long before; tl.dump scales to any size.
MAX_NODES = 2000

# suffix -> graphviz output format (None: the DOT text itself, no `dot` program needed)
FORMATS: dict[str, str | None] = {
    ".svg": "svg",
    ".png": "png",
    ".pdf": "pdf",
    ".dot": None,
    ".gv": None,
}

KIND_COLORS: dict[OpKind, str] = {
    OpKind.LEAF: "#e0e0e0",
    OpKind.ELEMENTWISE: "#bbdefb",
    OpKind.REDUCE: "#fff59d",
    OpKind.MOVEMENT: "#e1bee7",
    OpKind.CONTRACTION: "#ffccbc",
    OpKind.LINALG: "#b2dfdb",
    OpKind.FUSED: "#c8e6c9",
}
# Border colours of devices: CPU is always grey; other devices take these in order of first
# appearance in a drawing.
CPU_COLOR = "#616161"
DEVICE_COLORS = ("#1565c0", "#2e7d32", "#c62828", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457")

_ATTR_WIDTH = 48  # attribute text longer than this is cut, with "..."
_FONT = "Helvetica"


class VisualizeError(TenloomError, ValueError):
    """A drawing that cannot be made as asked (unknown suffix or option, too many nodes)."""


class GraphvizMissingError(TenloomError, ImportError):
    """The ``graphviz`` Python package, or graphviz's ``dot`` program, is not installed."""


def _graphviz():
    try:
        import graphviz
    except ImportError as e:
        raise GraphvizMissingError(
            "visualize needs the graphviz Python package: pip install 'tenloom[viz]'"
        ) from e
    return graphviz


# ---- what to draw -----------------------------------------------------------------------------


def _graphs(obj: Any, optimized: bool | str, opts: dict[str, Any]) -> list[tuple[str, Graph]]:
    """(title, graph) pairs to draw for a Tensor, a sequence of them, or a Plan."""
    from tenloom.runtime.options import parse_options
    from tenloom.runtime.plan import Plan
    from tenloom.runtime.session import build_graph, optimize

    if optimized not in (True, False, "both"):
        raise VisualizeError(
            f"visualize: optimized={optimized!r} is not valid; valid values: True, False, 'both'"
        )
    if isinstance(obj, Plan):
        if opts:
            raise VisualizeError(
                f"visualize: a Plan is drawn as compiled; options {sorted(opts)} apply to "
                "tensors only"
            )
        traced, final = obj.graph, obj.optimized
    else:
        o = parse_options("visualize", opts)
        tensors = tuple(obj) if isinstance(obj, (list, tuple)) else (obj,)
        if not tensors:
            raise VisualizeError("visualize: nothing to draw (an empty list of tensors)")
        traced = build_graph(tensors, share=False)
        # evaluate's own (cached) optimization, so the drawing is the graph evaluate runs
        final = optimize(build_graph(tensors), o).graph if optimized is not False else traced
    if optimized == "both":
        return [("unoptimized", traced), ("optimized", final)]
    return [("optimized" if optimized else "unoptimized", final if optimized else traced)]


def _device_fn(obj: Any, device: Any) -> Callable[[Node], str]:
    """node -> device name. ``device`` is a name, a list of names (a plan spread over several
    devices), a function of the node, or None: the Plan's device, else "cpu"."""
    from tenloom.runtime.plan import Plan

    if device is None and isinstance(obj, Plan):
        device = obj.device
    if device is None:
        return lambda node: "cpu"
    if callable(device):
        return lambda node: str(device(node))
    name = device if isinstance(device, str) else ", ".join(map(str, device))
    return lambda node: name


# ---- text ----------------------------------------------------------------------------------


def fmt_bytes(n: int) -> str:
    """``96 B``, ``1.5 KiB``, ``12 MiB``: binary units, three significant digits."""
    if n < 1024:
        return f"{n} B"
    x = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        x /= 1024
        if x < 1024 or unit == "PiB":
            return f"{x:.3g} {unit}"
    raise AssertionError("unreachable")


def fmt_flops(n: float) -> str:
    """``512 flop``, ``2.1 Mflop``: decimal units, three significant digits."""
    if n < 1000:
        return f"{int(n)} flop"
    for unit in ("k", "M", "G", "T", "P", "E"):
        n /= 1000
        if n < 1000 or unit == "E":
            return f"{n:.3g} {unit}flop"
    raise AssertionError("unreachable")


def _esc(text: str) -> str:
    """Text as it must appear inside a DOT label: backslashes and quotes escaped (the graphviz
    package quotes the label but keeps backslashes, which DOT reads as escapes)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _label(*lines: str) -> str:
    return "\\n".join(_esc(line) for line in lines if line)


def _attrs(node: Any) -> str:
    at = node.attrs
    if node.op is Op.CONTRACT:
        text = f"[{einsum_text((at.a_labels, at.b_labels), at.out)}]"
    elif node.op is Op.FUSED:
        text = f"[{len(at.program)} ops]"
    elif node.op is Op.SLICED:
        text = f"[{n_slices(at)} slices{sweep_text(at.wrt)}]"
    else:
        text = _attrs_text(node)
    return text if len(text) <= _ATTR_WIDTH else text[: _ATTR_WIDTH - 4] + "...]"


def _where(node: Node) -> str:
    """The node's source line, relative to the working directory when it lies below it."""
    assert node.source is not None
    path = node.source[0]
    if os.path.isabs(path):
        try:
            rel = os.path.relpath(path)
        except ValueError:  # another drive (Windows)
            rel = os.pardir
        path = path if rel.startswith(os.pardir) else rel
    return f"{path}:{node.source[1]}"


def _typed(x: Any) -> str:
    return f"{x.dtype.name}{tuple(x.shape)}"


def _legend(kinds: Iterable[OpKind], devices: dict[str, str]) -> str:
    """An HTML-like label: one coloured cell per op kind drawn and one bordered cell per
    device."""
    cells = [f'<td bgcolor="{KIND_COLORS[k]}">{k.value}</td>' for k in OpKind if k in kinds]
    cells += [
        f'<td border="2" color="{color}">{_html(name)}</td>' for name, color in devices.items()
    ]
    return f'<<table border="0" cellspacing="4" cellborder="1"><tr>{"".join(cells)}</tr></table>>'


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class _Palette:
    """Device name -> border colour, stable within one drawing."""

    def __init__(self) -> None:
        self.colors: dict[str, str] = {}

    def __call__(self, device: str) -> str:
        color = self.colors.get(device)
        if color is None:
            others = sum(1 for d in self.colors if d != "cpu")
            color = CPU_COLOR if device == "cpu" else DEVICE_COLORS[others % len(DEVICE_COLORS)]
            self.colors[device] = color
        return color


# ---- the graph view ------------------------------------------------------------------------


def _count(graphs: list[tuple[str, Graph]]) -> int:
    """DOT nodes a graph view draws: one per graph node plus one per fused step."""
    return sum(
        len(g) + sum(len(n.attrs.program) for n in g.order if n.op is Op.FUSED) for _, g in graphs
    )


def _draw_graph(
    dot: Any, graph: Graph, prefix: str, device_of: Callable[[Node], str], palette: _Palette
) -> set[OpKind]:
    """Add ``graph`` to ``dot`` (a Digraph or a cluster); node ids are ``{prefix}n{k}`` with k
    the node's position in ``graph.order`` (tl.dump's %k). Returns the op kinds drawn."""
    order = graph.order
    index = {id(n): k for k, n in enumerate(order)}
    outputs = {id(o): j for j, o in enumerate(graph.outputs)}
    devices = [device_of(n) for n in order]
    show_device = any(d != "cpu" for d in devices)
    kinds: set[OpKind] = set()
    for k, node in enumerate(order):
        kind = OPS[node.op].kind
        kinds.add(kind)
        name = f"{prefix}n{k}"
        out = outputs.get(id(node))
        label = _label(
            f"%{k} {node.op.value}{_attrs(node)}",
            _typed(node),
            f"@ {devices[k]}" if show_device else "",
            f"output {out}" if out is not None else "",
        )
        style = dict(label=label, fillcolor=KIND_COLORS[kind], color=palette(devices[k]))
        if node.source is not None:  # hovering shows the user's line
            style["tooltip"] = _esc(_where(node))
        if out is not None:
            style["peripheries"] = "2"
        if node.op is Op.FUSED:
            _draw_fused(dot, node, name, k, index, prefix, style)
            continue
        dot.node(name, **style)
        for x in node.inputs:
            dot.edge(f"{prefix}n{index[id(x)]}", name, label=fmt_bytes(x.nbytes))
    return kinds


def _draw_fused(
    dot: Any, node: Node, name: str, k: int, index: dict, prefix: str, style: dict
) -> None:
    """A FUSED node as a cluster: one small node per program step, reading the region's inputs
    (edges from the producers) and earlier steps; the last step feeds the FUSED node itself."""
    steps = program_steps(node.attrs.program, node.inputs)
    outside: list[tuple[str, str, str]] = []
    with dot.subgraph(name=f"cluster_{prefix}fused{k}") as c:
        c.attr(
            label=_esc(f"fused region %{k}: {len(steps)} ops"),
            style="rounded,filled",
            labelloc="t",
            fillcolor="#f1f8e9",
            color="#558b2f",
        )
        for j, ((_, _, args), step) in enumerate(zip(node.attrs.program, steps)):
            sname = f"{name}_s{j}"
            c.node(
                sname,
                label=_label(f"{step.op.value}{_attrs(step)}", _typed(step)),
                shape="ellipse",
                style="filled",
                fillcolor=KIND_COLORS[OPS[step.op].kind],
                color=style["color"],
                fontsize="9",
            )
            for kind, i in args:
                if kind == "in":
                    # outside the cluster: a node named in a subgraph's edge joins the subgraph
                    x = node.inputs[i]
                    outside.append((f"{prefix}n{index[id(x)]}", sname, fmt_bytes(x.nbytes)))
                else:
                    c.edge(f"{name}_s{i}", sname, label=fmt_bytes(steps[i].nbytes))
        c.node(name, **style)
        c.edge(f"{name}_s{len(steps) - 1}", name, label=fmt_bytes(node.nbytes))
    for tail, head, label in outside:
        dot.edge(tail, head, label=label)


# ---- the contraction-tree view -------------------------------------------------------------


def contraction_trees(graph: Graph) -> list[list[Node]]:
    """The pairwise contractions of ``graph`` grouped into trees (tenloom/trees.py), each listed
    root first, the last root first."""
    return _trees_of(graph.order, graph.outputs)[::-1]


def _label_text(count: int) -> Callable[[Iterable[int]], str]:
    """Tree labels as letters when all ``count`` of them fit in 52, else as lists."""
    if count <= 52:
        return lambda t: "".join(string.ascii_letters[lab] for lab in t)
    return lambda t: str(list(t))


@dataclass
class _Tree:
    """One contraction tree to draw: its pairwise nodes (root first), how to name them, what
    leaves stand for (a sliced network's per-slice placeholders stand for the real operands),
    the cluster's title, and for a sliced network the SLICED node that runs the tree."""

    nodes: list[Node]
    name_of: Callable[[Node], str]
    leaf_of: dict[int, Node]
    title: str
    sliced: Node | None = None


def _trees(graph: Graph) -> list[_Tree]:
    """The contraction trees of the optimized graph: those of its pairwise contractions, then
    the per-slice tree of each SLICED network (``memory_limit``; derivative sweeps left out)."""
    index = {id(n): k for k, n in enumerate(graph.order)}
    main = lambda n: f"%{index[id(n)]}"
    out = []
    for tree in contraction_trees(graph):
        members = {id(n) for n in tree}
        leaves = sum(1 for n in tree for x in n.inputs if id(x) not in members)
        out.append(
            _Tree(
                tree,
                main,
                {},
                f"network -> %{index[id(tree[0])]}: {leaves} tensors, "
                f"{len(tree)} pairwise contractions, "
                f"{fmt_flops(sum(node_flops(n) for n in tree))}",
            )
        )
    for node in graph.order:
        if node.op is not Op.SLICED or node.attrs.wrt is not None:
            continue
        inner = inner_for(node)
        k = index[id(node)]
        steps = (n for n in inner.graph.order if is_pairwise(n))
        sub_index = {id(n): j for j, n in enumerate(steps)}  # %k.j: step j of network %k
        leaf_of = {id(ph): x for ph, x in zip(inner.leaves, node.inputs)}
        sizes = ", ".join(str(size) for _, size in node.attrs.sliced)
        for tree in contraction_trees(inner.graph):
            out.append(
                _Tree(
                    tree,
                    lambda n, k=k, sub_index=sub_index: f"%{k}.{sub_index[id(n)]}",
                    leaf_of,
                    f"sliced network %{k}: {len(node.attrs.terms)} tensors, "
                    f"{n_slices(node.attrs)} slices (indices of sizes {sizes}), "
                    f"{len(tree)} pairwise contractions per slice, "
                    f"{fmt_flops(node_flops(node))} in all",
                    node,
                )
            )
    return out


def _leaf(x: Node, leaf_of: dict[int, Node]) -> Node:
    """The graph node a tree leaf stands for (itself, outside sliced networks)."""
    if not leaf_of:
        return x
    y = x
    while id(y) not in leaf_of and len(y.inputs) == 1:  # size-1 axes reshaped away
        y = y.inputs[0]
    return leaf_of.get(id(y), x)


def _draw_tree(
    c: Any, t: int, tree: _Tree, index: dict[int, int], palette: _Palette, device_of
) -> set[OpKind]:
    """One tree into cluster ``c``: leaves (the network's input tensors, one per operand slot,
    named by their place ``index`` in the graph) on top, the root (the network's output) at the
    bottom."""
    maps = tree_labels(tree.nodes)
    text = _label_text(len({lab for m in maps.values() for lab in m.values()}))
    members = {id(n) for n in tree.nodes}
    root = tree.nodes[0]
    kinds = {OpKind.CONTRACTION}

    def labels(node: Node, slot: int) -> str:
        """Text of the labels of ``node``'s operand in ``slot`` (2: its output)."""
        m = maps[id(node)]
        own = out_labels(node) if slot == 2 else slot_labels(node, slot)
        return text(m[lab] for lab in own)

    n_leaf = 0
    per_slice = " per slice" if tree.sliced is not None else ""
    for node in tree.nodes:
        name = f"t{t}_c{tree.name_of(node)[1:]}".replace(".", "_")
        terms = f"{labels(node, 0)},{labels(node, 1)}->{labels(node, 2)}"
        c.node(
            name,
            label=_label(
                f"{tree.name_of(node)} {node.op.value}",
                terms,
                _typed(node) + per_slice,
                fmt_flops(node_flops(node)) + per_slice,
                "output" if node is root else "",
            ),
            fillcolor=KIND_COLORS[OpKind.CONTRACTION],
            color=palette(device_of(tree.sliced or node)),
            peripheries="2" if node is root else "1",
        )
        for slot, x in enumerate(node.inputs):
            if id(x) in members:
                child = f"t{t}_c{tree.name_of(x)[1:]}".replace(".", "_")
            else:
                child = f"t{t}_l{n_leaf}"
                n_leaf += 1
                real = _leaf(x, tree.leaf_of)
                kind = OPS[real.op].kind
                kinds.add(kind)
                c.node(
                    child,
                    label=_label(
                        f"%{index[id(real)]} {real.op.value}{_attrs(real)}",
                        labels(node, slot) or "(scalar)",
                        _typed(x) + per_slice,
                    ),
                    fillcolor=KIND_COLORS[kind],
                    color=palette(device_of(real)),
                )
            c.edge(child, name, label=fmt_bytes(x.nbytes))
    return kinds


# ---- entry points --------------------------------------------------------------------------


def visualize(
    t: Any,
    path: str | os.PathLike | None = None,
    optimized: bool | str = True,
    *,
    what: str = "graph",
    device: Any = None,
    max_nodes: int = MAX_NODES,
    **opts: Any,
):
    """Draw the graph of ``t`` with graphviz; write it to ``path`` if given.

    Args:
        t: a Tensor, a sequence of Tensors, or a ``tl.Plan``.
        path: where to write; the suffix picks the format: ``.svg``, ``.png``, ``.pdf``
            (rendered by graphviz's ``dot`` program) or ``.dot`` / ``.gv`` (the DOT text).
        optimized: True for the graph after the pass pipeline (what ``evaluate`` runs), False
            for the graph as traced, ``"both"`` for the two side by side as two clusters.
        what: ``"graph"`` (every node) or ``"tree"`` (the pairwise contraction trees of the
            optimized graph: leaves are the networks' input tensors with their labels and
            shapes, internal nodes the pairwise subscripts and flops, the root the output).
        device: device name(s) for the border colours, or a function ``node -> name``;
            default the Plan's device, else ``"cpu"``.
        max_nodes: refuse drawings of more DOT nodes than this (use ``tl.dump`` for those).
        **opts: ``passes=``, ``optimize=``, ... as for ``evaluate`` (tensors only).

    Returns:
        The ``graphviz.Digraph`` (its ``.source`` is the DOT text).

    Raises:
        VisualizeError: unknown suffix, ``optimized`` or ``what``; too many nodes; no
            contraction tree to draw.
        GraphvizMissingError: the graphviz package is missing, or ``dot`` is missing for a
            rendered format.
    """
    graphviz = _graphviz()
    fmt = None
    if path is not None:
        suffix = os.path.splitext(os.fspath(path))[1].lower()
        if suffix not in FORMATS:
            raise VisualizeError(
                f"visualize: cannot write {os.fspath(path)!r}: unknown suffix {suffix!r}; "
                f"valid suffixes: {', '.join(FORMATS)}"
            )
        fmt = FORMATS[suffix]
    if what not in ("graph", "tree"):
        raise VisualizeError(f"visualize: what={what!r} is not valid; valid: 'graph', 'tree'")
    if what == "tree":
        if optimized is not True:
            raise VisualizeError(
                "visualize: what='tree' draws the optimized graph's contraction trees; "
                "leave optimized=True"
            )
        dot = _tree_digraph(graphviz, t, device, max_nodes, opts)
    else:
        dot = _graph_digraph(graphviz, t, optimized, device, max_nodes, opts)
    if path is not None:
        _write(graphviz, dot, os.fspath(path), fmt)
    return dot


def _digraph(graphviz: Any, name: str) -> Any:
    return graphviz.Digraph(
        name=name,
        graph_attr={"fontname": _FONT, "fontsize": "11", "labelloc": "b", "newrank": "true"},
        node_attr={
            "shape": "box",
            "style": "rounded,filled",
            "fontname": _FONT,
            "fontsize": "10",
            "penwidth": "1.5",
        },
        edge_attr={"fontname": _FONT, "fontsize": "8", "color": "#757575"},
    )


def _check_size(n: int, max_nodes: int, hint: str) -> None:
    if n > max_nodes:
        raise VisualizeError(
            f"visualize: the drawing would have {n} nodes, more than max_nodes={max_nodes}; "
            f"{hint} (or pass a larger max_nodes=)"
        )


def _graph_digraph(graphviz, t, optimized, device, max_nodes, opts):
    graphs = _graphs(t, optimized, opts)
    _check_size(_count(graphs), max_nodes, "use tl.dump(t) for a text listing of any size")
    device_of = _device_fn(t, device)
    palette = _Palette()
    dot = _digraph(graphviz, "tenloom")
    kinds: set[OpKind] = set()
    if len(graphs) == 1:
        kinds = _draw_graph(dot, graphs[0][1], "", device_of, palette)
    else:
        for title, g in graphs:
            prefix = title[0] + "_"  # "u_" and "o_": the two graphs share nodes (hash-consing)
            with dot.subgraph(name=f"cluster_{title}") as c:
                c.attr(
                    label=_esc(f"{title}: {len(g)} nodes"),
                    style="rounded",
                    labelloc="t",
                    color="#9e9e9e",
                )
                kinds |= _draw_graph(c, g, prefix, device_of, palette)
    dot.attr(label=_legend(kinds, palette.colors))
    return dot


def _tree_digraph(graphviz, t, device, max_nodes, opts):
    ((_, graph),) = _graphs(t, True, opts)
    trees = _trees(graph)
    if not trees:
        raise VisualizeError(
            "visualize(what='tree'): the optimized graph has no pairwise contractions "
            "(is 'contraction_order' among the passes?)"
        )
    _check_size(
        sum(2 * len(tree.nodes) + 1 for tree in trees),
        max_nodes,
        "use tl.dump(t, optimized=True)",
    )
    palette = _Palette()
    device_of = _device_fn(t, device)
    dot = _digraph(graphviz, "tenloom_tree")
    index = {id(n): k for k, n in enumerate(graph.order)}
    kinds: set[OpKind] = set()
    for k, tree in enumerate(trees):
        with dot.subgraph(name=f"cluster_tree{k}") as c:
            c.attr(label=_esc(tree.title), style="rounded", labelloc="t", color="#9e9e9e")
            kinds |= _draw_tree(c, k, tree, index, palette, device_of)
    dot.attr(label=_legend(kinds, palette.colors))
    return dot


def _render(graphviz: Any, dot: Any, fmt: str) -> bytes:
    try:
        return dot.pipe(format=fmt)
    except graphviz.ExecutableNotFound as e:
        raise GraphvizMissingError(
            f"visualize: rendering {fmt.upper()} needs graphviz's 'dot' program "
            "(apt-get install graphviz, brew install graphviz or conda install graphviz); "
            "a .dot path writes the DOT text without it"
        ) from e


def _write(graphviz: Any, dot: Any, path: str, fmt: str | None) -> None:
    if fmt is None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(dot.source)
        return
    data = _render(graphviz, dot, fmt)
    with open(path, "wb") as f:
        f.write(data)


def repr_svg(obj: Any) -> str | None:
    """SVG text for Jupyter's ``_repr_svg_``: a Plan's compiled graph, a Tensor's graph as
    traced (showing a tensor runs no pass and no path search).

    Returns None — and Jupyter falls back to the text repr — when the graphviz package or its
    ``dot`` program is missing, or the graph is past ``MAX_NODES``.
    """
    from tenloom.runtime.plan import Plan

    try:
        graphviz = _graphviz()
        dot = _graph_digraph(graphviz, obj, isinstance(obj, Plan), None, MAX_NODES, {})
        return _render(graphviz, dot, "svg").decode("utf-8")
    except (GraphvizMissingError, VisualizeError):
        return None


__all__ = [
    "visualize",
    "contraction_trees",
    "repr_svg",
    "VisualizeError",
    "GraphvizMissingError",
    "MAX_NODES",
]
