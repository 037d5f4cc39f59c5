"""Reverse mode (VJP) built as graphs: each op's rule (registered with ``register_vjp`` beside
its definition in ``autodiff_rules``) maps the output cotangent to input cotangents using the
same lazy ops, so gradients are ordinary graphs that the passes optimize, and can be
differentiated again.

Conventions: the cotangent of a complex value follows PyTorch (for a real loss L the gradient
is dL/dRe + i dL/dIm), which makes every rule compute J^H c; inputs that do not influence the
outputs get a symbolic zero (a ``full`` node); integer and boolean values carry no gradient.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tenloom.graph.errors import DTypeError, ShapeError, fmt_shape
from tenloom.graph.node import Node
from tenloom.graph.ops import OPS, OpKind
from tenloom.graph.traverse import toposort


def differentiable(dt: np.dtype) -> bool:
    return dt.kind in "fc"


def fit_cotangent(ct, x: Node):
    """Bring a cotangent to the input's dtype: the real part for a real input, cast otherwise."""
    from tenloom.graph import api

    if ct.dtype.kind == "c" and x.dtype.kind != "c":
        ct = api.real(ct)
    if ct.dtype != x.dtype:
        ct = api.astype(ct, x.dtype)
    if ct.shape != x.shape:  # pragma: no cover - rules unbroadcast; a mismatch is a rule bug
        raise AssertionError(f"cotangent shape {ct.shape} for input of shape {x.shape}")
    return ct


def vjp_nodes(
    outputs: Sequence[Node], inputs: Sequence[Node], cotangents: Sequence[Node]
) -> list[Node | None]:
    """Cotangents of ``inputs`` given ``cotangents`` of ``outputs`` (None: no dependence)."""
    from tenloom.graph import api
    from tenloom.graph.tensor import Tensor

    for o, c in zip(outputs, cotangents):
        if c.shape != o.shape:
            raise ShapeError(
                f"vjp: cotangent of shape {fmt_shape(c.shape)} for an output of shape "
                f"{fmt_shape(o.shape)}"
            )
    wanted = {id(x) for x in inputs}
    order = toposort(outputs)
    # only nodes on a path from an input to an output need cotangents
    reaches = set(wanted)
    for node in order:
        if any(id(i) in reaches for i in node.inputs):
            reaches.add(id(node))
    acc: dict[int, list] = {}
    for o, c in zip(outputs, cotangents):
        if id(o) in reaches and differentiable(o.dtype):
            acc.setdefault(id(o), []).append(Tensor(c))
    result: dict[int, Node] = {}
    for node in reversed(order):
        parts = acc.pop(id(node), None)
        if not parts:
            continue
        g = parts[0]
        for p in parts[1:]:
            g = api.add(g, p)
        if id(node) in wanted:
            result[id(node)] = g.node
        if OPS[node.op].kind is OpKind.LEAF:
            continue
        rule = OPS[node.op].vjp
        if rule is None:
            raise DTypeError(f"vjp: op {node.op.value} has no reverse-mode rule")
        xs = tuple(Tensor(i) for i in node.inputs)
        cts = rule(node, Tensor(node), xs, g)
        for x, ct in zip(node.inputs, cts):
            if ct is None or id(x) not in reaches or not differentiable(x.dtype):
                continue
            acc.setdefault(id(x), []).append(fit_cotangent(ct, x))
    return [result.get(id(x)) for x in inputs]
