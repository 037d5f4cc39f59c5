"""Readable text for a graph: one line per node, like a jaxpr.

    %2 = matmul(%0, %1) : float64(3, 5)              # example.py:12

Ops that carry structure (fused regions, contraction trees) add indented continuation lines
through :data:`DETAIL_FORMATTERS`, which later passes register into.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable

import numpy as np
from tenloom.graph.node import Node
from tenloom.graph.ops import Op
from tenloom.graph.ops_elementwise import SYMBOL
from tenloom.graph.ops_leaf import full_value
from tenloom.graph.traverse import toposort

# op -> fn(node, names) -> list of continuation lines
DETAIL_FORMATTERS: dict[Op, Callable[[Node, dict[int, str]], list[str]]] = {}
# op -> fn(node) -> attribute text shown in brackets
ATTR_FORMATTERS: dict[Op, Callable[[Node], str]] = {}


def einsum_text(inputs, output) -> str:
    """Integer labels as letters when they fit (``ab,bc->ac``), else as lists."""
    labels = sorted({x for t in (*inputs, output) for x in t})
    if len(labels) <= 52:
        letter = {lab: string.ascii_letters[i] for i, lab in enumerate(labels)}
        return (
            ",".join("".join(letter[x] for x in t) for t in inputs)
            + "->"
            + "".join(letter[x] for x in output)
        )
    return ",".join(str(list(t)) for t in inputs) + "->" + str(list(output))


def _attrs_text(node: Node) -> str:
    fmt = ATTR_FORMATTERS.get(node.op)
    if fmt is not None:
        return fmt(node)
    op, at = node.op, node.attrs
    if op is Op.CONST:
        v = at[0].value
        return f"[{v.item()!r}]" if v.size == 1 and v.ndim == 0 else ""
    if op is Op.PLACEHOLDER:
        return f"[{at[0]!r}]"
    if op is Op.FULL:
        return f"[{full_value(at).item()!r}]"
    if op is Op.EYE:
        return f"[k={at[2]}]" if at[2] else ""
    if op is Op.EINSUM:
        return f"[{einsum_text(*at)}]"
    if op in (Op.SUM, Op.PROD, Op.MAX, Op.MIN):
        return f"[axes={list(at[0])}{', keepdims' if at[1] else ''}]"
    if op is Op.CAST:
        return f"[{np.dtype(at[0]).name}]"
    if op in (Op.RESHAPE, Op.BROADCAST):
        return f"[{at[0]}]"
    if op is Op.TRANSPOSE:
        return f"[{list(at[0])}]"
    if op is Op.SLICE:
        return "[" + ", ".join(f"{a}:{b if b >= 0 else ''}:{c}" for a, b, c in at[0]) + "]"
    if op is Op.CONCAT:
        return f"[axis={at[0]}]"
    if op in (Op.DIAGONAL, Op.TRACE):
        return f"[offset={at[0]}, axes={at[1]},{at[2]}]"
    if op is Op.TENSORDOT:
        return f"[axes={list(at[0])},{list(at[1])}]"
    if op in SYMBOL:
        return ""
    return ""


def dump_nodes(outputs: Iterable[Node], title: str | None = None) -> str:
    order = toposort(outputs)
    outputs = list(outputs)
    names: dict[int, str] = {}
    lines = [title] if title else []
    for k, node in enumerate(order):
        name = f"%{k}"
        names[id(node)] = name
        args = ", ".join(names[id(i)] for i in node.inputs)
        dt = node.dtype.name
        head = f"{name} = {node.op.value}{_attrs_text(node)}({args}) : {dt}{node.shape}"
        lines.append(f"{head:<60}  # {node.where}" if node.source else head)
        detail = DETAIL_FORMATTERS.get(node.op)
        if detail is not None:
            lines.extend("    " + line for line in detail(node, names))
    lines.append("return " + ", ".join(names[id(o)] for o in outputs))
    return "\n".join(lines)
