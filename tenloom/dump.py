"""Readable text for a graph: one line per node, like a jaxpr.

    %2 = matmul(%0, %1) : float64(3, 5)              # example.py:12

Nodes that carry structure add indented continuation lines under their own line, each starting
with ``|``:

- a FUSED node (an elementwise region compiled to one kernel) lists its program, one step a
  line, reading the node's inputs ``in0, in1, ...`` (its arguments in order) and earlier steps
  ``v0, v1, ...``::

      %7 = fused[4 ops](%4, %5, %6) : float64(4, 4)
          | v0 = sin in0 : float64(4, 4)
          | v1 = mul in1 v0 : float64(4, 4)
          ...

- pairwise contractions (CONTRACT, and two-operand EINSUM) that feed one another form a
  contraction tree; each shows its subscripts with letters shared across the whole tree, so an
  index keeps its letter from the leaves to the root, and the root adds the network the tree
  computes (its operands listed up to ``MAX_NETWORK_TENSORS``, else counted)::

      %3 = contract[bc,cd->bd](%1, %2) : float64(5, 4)
      %4 = contract[ab,bd->ad](%0, %3) : float64(4, 4)
          | network ab,bc,cd->ad over %0, %1, %2: 2 pairwise contractions

- a SLICED node (a contraction network run slice by slice under ``memory_limit``) shows its
  network, the sliced indices and the pairwise tree each slice runs.

The bracketed attribute text of a node is its op's ``fmt`` rule (graph/ops/), unless
:data:`ATTR_FORMATTERS` overrides it; other ops can add lines through :data:`DETAIL_FORMATTERS`.
Every traversal here is iterative.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tenloom.graph.node import Node
from tenloom.graph.ops import OPS, Op
from tenloom.graph.ops.contract import einsum_text  # noqa: F401  (re-exported)
from tenloom.graph.ops.fused import program_steps
from tenloom.graph.ops.registry import typed_attrs
from tenloom.graph.ops.sliced import forward_positions, path_steps, sweep_text  # noqa: F401
from tenloom.graph.traverse import toposort
from tenloom.trees import (
    contraction_trees,
    is_pairwise,
    out_labels,
    slot_labels,
    tree_labels,
)

# op -> fn(node, names) -> list of continuation lines (without the "    | " gutter)
DETAIL_FORMATTERS: dict[Op, Callable[[Node, dict[int, str]], list[str]]] = {}
# op -> fn(node) -> attribute text shown in brackets
ATTR_FORMATTERS: dict[Op, Callable[[Node], str]] = {}

GUTTER = "    | "
# A network line spells out its subscripts and operands up to this many tensors; bigger
# networks get a count (each pairwise contraction still shows its own subscripts).
MAX_NETWORK_TENSORS = 64


def _attrs_text(node: Any) -> str:
    """The bracketed attribute text of ``node`` (anything with ``op`` and ``attrs``: a Node,
    or a step of a fused program), e.g. ``[axes=[0], keepdims]``; empty when there is none.
    Each op's text is its ``fmt`` rule, beside the op in graph/ops/."""
    fmt = ATTR_FORMATTERS.get(node.op)
    if fmt is not None:
        return fmt(node)
    text = OPS[node.op].fmt
    return "" if text is None else text(typed_attrs(node.op, node.attrs))


def _typed(x: Any) -> str:
    return f"{x.dtype.name}{tuple(x.shape)}"


# ---- fused regions ---------------------------------------------------------------------------


def fused_lines(node: Node, names: dict[int, str]) -> list[str]:
    """``v{j} = op[attrs] args : dtype(shape)`` for each step of a FUSED node's program."""
    lines: list[str] = []
    program = node.attrs.program
    steps = program_steps(program, node.inputs)
    for j, ((op, _, args), step) in enumerate(zip(program, steps)):
        text = " ".join(f"in{i}" if kind == "in" else f"v{i}" for kind, i in args)
        lines.append(f"v{j} = {op.value}{_attrs_text(step)} {text} : {_typed(step)}")
    return lines


# ---- sliced networks -------------------------------------------------------------------------


def _lettering(labels: Iterable[int]) -> Callable[[Sequence[int]], str]:
    """Text of label tuples: letters in order of first appearance in ``labels`` when at most 52
    distinct labels appear, else lists of those positions."""
    pos: dict[int, int] = {}
    for lab in labels:
        if lab not in pos:
            pos[lab] = len(pos)
    if len(pos) <= 52:
        letters = {lab: string.ascii_letters[k] for lab, k in pos.items()}
        return lambda t: "".join(letters[lab] for lab in t)
    return lambda t: str([pos[lab] for lab in t])


def _subscripts(text: Callable[[Sequence[int]], str], terms: Sequence, out: Sequence) -> str:
    return ",".join(text(t) for t in terms) + "->" + text(out)


def sliced_lines(node: Node, names: dict[int, str]) -> list[str]:
    """The network of a SLICED node, its slicing and the pairwise tree each slice runs.

    Operands are ``in0, in1, ...`` (the node's arguments in order); step ``s{j}`` is the j-th
    pairwise contraction of a slice, on the operands' slices (the sliced indices dropped) and
    keeping only the indices that later steps or the output still need, as the runtime does.
    """
    terms, out, sliced, path, wrt = node.attrs[:5]
    text = _lettering(lab for t in (*terms, out) for lab in t)
    cut = {lab for lab, _ in sliced}
    count = math.prod(size for _, size in sliced)
    if len(terms) <= MAX_NETWORK_TENSORS:
        lines = [f"network {_subscripts(text, terms, out)} ({len(terms)} tensors)"]
    else:
        lines = [f"network of {len(terms)} tensors -> {text(out)}"]
    which = ", ".join(f"{text((lab,))} ({size})" for lab, size in sliced) or "no index"
    steps = f"{len(path)} pairwise contraction{'s' if len(path) != 1 else ''}"
    ring = node.attrs.semiring  # a semiring network's steps and slices combine in it
    combine = f", combined by {ring}" if ring else ""
    lines.append(f"sliced over {which}: {count} slices{combine}, each running {steps}")
    inner = [tuple(lab for lab in t if lab not in cut) for t in terms]
    inner_out = tuple(lab for lab in out if lab not in cut)
    names = [f"in{k}" for k in range(len(terms))]
    for j, (a, b, ta, tb, keep) in enumerate(path_steps(inner, inner_out, path)):
        subscripts = _subscripts(text, (ta, tb), keep)
        lines.append(f"  s{j} = {ring or 'contract'}[{subscripts}] {names[a]} {names[b]}")
        names.append(f"s{j}")
    fwd = None if wrt is None else forward_positions(wrt)
    if fwd is not None:
        pairs = ", ".join(f"in{len(terms) + j} of in{k}" for j, k in enumerate(fwd))
        lines.append(f"forward mode: the output's tangent from the tangents {pairs}")
    elif wrt is not None:
        ops = ", ".join(f"in{k}" for k in wrt)
        lines.append(
            f"reverse sweep: cotangents of {ops} (flattened, concatenated) from the output's "
            f"cotangent in{len(terms)}"
        )
    return lines


# ---- contraction trees -----------------------------------------------------------------------


def _tree_text(
    tree: list[Node], index: dict[int, int], names: dict[int, str]
) -> tuple[dict[int, str], list[str]]:
    """(id(node) -> bracketed subscripts, continuation lines for the root) of one tree.

    Each node numbers its labels on its own, so the tree's labels are worked out from the
    root: a child's output indices are the ones its parent reads in that slot, and indices met
    for the first time (those a contraction sums over) are new. Letters then go by first
    appearance reading the nodes in dump order, operands before outputs."""
    members = {id(n) for n in tree}
    maps = tree_labels(tree)
    root = tree[0]
    by_order = sorted(tree, key=lambda n: index[id(n)])

    def terms(node: Node) -> tuple[tuple, tuple, tuple]:
        m = maps[id(node)]
        a, b = (tuple(m[lab] for lab in slot_labels(node, s)) for s in (0, 1))
        return a, b, tuple(m[lab] for lab in out_labels(node))

    leaves = [
        (x, t)
        for node in by_order
        for x, t in zip(node.inputs, terms(node)[:2])
        if id(x) not in members
    ]
    leaves.sort(key=lambda leaf: index[id(leaf[0])])  # stable: a leaf read twice keeps its slots
    out = terms(root)[2]
    # letters as the network line reads: operands in graph order, then the output
    text = _lettering(
        lab
        for t in (*(t for _, t in leaves), out, *(t for n in by_order for t in terms(n)))
        for lab in t
    )
    attrs = {}
    for node in by_order:
        a, b, o = terms(node)
        attrs[id(node)] = f"[{_subscripts(text, (a, b), o)}]"
    if len(tree) == 1:
        return attrs, []
    count = f"{len(tree)} pairwise contractions"
    if len(leaves) > MAX_NETWORK_TENSORS:
        return attrs, [f"network of {len(leaves)} tensors -> {text(out)}: {count}"]
    network = _subscripts(text, [t for _, t in leaves], out)
    over = ", ".join(names[id(x)] for x, _ in leaves)
    return attrs, [f"network {network} over {over}: {count}"]


# ---- the dump --------------------------------------------------------------------------------


def dump_nodes(outputs: Iterable[Node], title: str | None = None, sources: bool = True) -> str:
    """The text of the graph of ``outputs``: ``%k = op[attrs](inputs) : dtype(shape)`` per node
    in execution order, continuation lines under structured nodes, and a ``return`` line.
    With ``sources`` (the default) each node line ends with the user's source line."""
    outputs = list(outputs)
    order = toposort(outputs)
    names = {id(node): f"%{k}" for k, node in enumerate(order)}
    tree_attrs: dict[int, str] = {}
    tree_lines: dict[int, list[str]] = {}
    if any(is_pairwise(n) for n in order):
        index = {id(node): k for k, node in enumerate(order)}
        for tree in contraction_trees(order, outputs):
            attrs, extra = _tree_text(tree, index, names)
            tree_attrs.update(attrs)
            if extra:
                tree_lines[id(tree[0])] = extra
    lines = [title] if title else []
    for node in order:
        name = names[id(node)]
        args = ", ".join(names[id(i)] for i in node.inputs)
        attrs = tree_attrs.get(id(node))
        if attrs is None:
            attrs = _attrs_text(node)
        head = f"{name} = {node.op.value}{attrs}({args}) : {node.dtype.name}{node.shape}"
        lines.append(f"{head:<60}  # {node.where}" if sources and node.source else head)
        detail = DETAIL_FORMATTERS.get(node.op)
        if detail is not None:
            lines.extend(GUTTER + line for line in detail(node, names))
        extra = tree_lines.get(id(node))
        if extra:
            lines.extend(GUTTER + line for line in extra)
    lines.append("return " + ", ".join(names[id(o)] for o in outputs))
    return "\n".join(lines)


DETAIL_FORMATTERS[Op.FUSED] = fused_lines
DETAIL_FORMATTERS[Op.SLICED] = sliced_lines
