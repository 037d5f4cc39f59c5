"""Reverse mode (VJP) and forward mode (JVP) built as graphs: each op's rules (registered with
the op in its family module of ``graph/ops/``) map cotangents to cotangents and tangents to
tangents using the same lazy ops, so derivatives are ordinary graphs that the passes optimize,
and can be differentiated again.

A VJP rule is ``rule(node, y, xs, g) -> tuple of input cotangents`` (Values or None), with ``y``
the node's output, ``xs`` its inputs and ``g`` the output cotangent, all lazy Values (computed
with ``Value``'s operators and the builders of ``graph.value.V``). A JVP rule is
``rule(node, y, xs, ts) -> Value | None``: ``ts`` are the inputs' tangents (None: a symbolic
zero) and the result is the output tangent J t (None: zero). :func:`tangent_of` only calls a
JVP rule when at least one input has a tangent and the output is floating, and brings the
result to the node's dtype and shape (a tangent of one broadcast operand is broadcast there).

Conventions: the cotangent of a complex value follows PyTorch (for a real loss L the gradient
is dL/dRe + i dL/dIm), which makes every VJP rule compute J^H c; JVP rules compute J t, so that
Re<J t, c> = Re<t, J^H c>. Holomorphic ops take the plain complex derivative (f'(x) t); the
others are chosen so that this identity holds against their VJP rules: ``conj`` -> conj(t),
``real``/``imag`` -> real(t)/imag(t), complex ``abs`` -> Re(conj(x) t) / |x|. Subgradients:
``abs`` and ``sign`` use sign(0) = 0 (so ``sign``, ``floordiv`` and comparisons have zero
derivative); ``maximum``/``minimum`` follow the first operand on ties; reductions
``max``/``min`` share the derivative evenly among tied elements; ``where`` sends nothing to
its condition; ``prod`` takes the product of the other elements, exact at zeros.

Inputs that do not influence the outputs get a symbolic zero (a ``full`` node) and nodes that
do not depend on the inputs get no tangent at all; integer and boolean intermediate values
carry no derivative, and differentiating with respect to an integer or boolean input is a
DTypeError (``check_differentiable``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tenloom.graph.errors import DTypeError, ShapeError, fmt_shape
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops import OPS, OpKind
from tenloom.graph.traverse import toposort
from tenloom.graph.value import V, Value


def differentiable(dt: np.dtype) -> bool:
    return dt.kind in "fc"


# ---- helpers the op modules' rules share ------------------------------------------------------

Tangent = Value | None


def unbroadcast(g: Value, shape: tuple[int, ...]) -> Value:
    """Sum ``g`` over the axes that broadcasting added to an operand of ``shape``."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1
    )
    out = V.sum(g, axes) if axes else g
    return V.reshape(out, shape)


def add_all(terms: Sequence[Tangent]) -> Tangent:
    """Sum of the non-zero terms (None when all are symbolic zeros)."""
    out = None
    for term in terms:
        if term is not None:
            out = term if out is None else out + term
    return out


def linear_jvp(node: Node, y: Value, xs: Sequence[Value], ts: Sequence[Tangent]) -> Value:
    """The JVP rule of an op linear in its single input: the op itself applied to the tangent."""
    (t,) = ts
    return Value(make_node(node.op, (t.node,), node.attrs))


def describe_input(x: Node) -> str:
    """How an error names an input: a placeholder by its name, anything else by its op and
    the line that made it."""
    from tenloom.graph.ops import Op

    if x.op is Op.PLACEHOLDER:
        return f"placeholder {x.attrs.name!r}"
    if x.op is Op.CONST:
        return f"a constant made at {x.where}"
    return f"a {x.op.value} node made at {x.where}"


def check_differentiable(fn: str, inputs: Sequence[Node]) -> None:
    """DTypeError naming the first of ``inputs`` (the tensors differentiated with respect to)
    that is neither floating point nor complex: its derivative does not exist, and a zero
    gradient would be a silent wrong answer."""
    for k, x in enumerate(inputs):
        if not differentiable(x.dtype):
            raise DTypeError(
                f"{fn}: cannot differentiate with respect to input {k} ({describe_input(x)}, "
                f"dtype {x.dtype}, shape {fmt_shape(x.shape)}): only floating point and "
                "complex tensors have derivatives; build the function from a floating point "
                "version of it (x.astype('float64')) and differentiate with respect to that"
            )


def fit_cotangent(ct, x: Node):
    """Bring a cotangent to the input's dtype: the real part for a real input, cast otherwise."""
    from tenloom.graph.value import V as api

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
    from tenloom.graph.value import V as api
    from tenloom.graph.value import Value

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
            acc.setdefault(id(o), []).append(Value(c))
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
        xs = tuple(Value(i) for i in node.inputs)
        cts = rule(node, Value(node), xs, g)
        for x, ct in zip(node.inputs, cts):
            if ct is None or id(x) not in reaches or not differentiable(x.dtype):
                continue
            acc.setdefault(id(x), []).append(fit_cotangent(ct, x))
    return [result.get(id(x)) for x in inputs]


def fit_tangent(t: Value, node: Node) -> Value:
    """Bring a tangent to ``node``'s dtype and shape: the real part for a real node, a cast
    otherwise, and a broadcast where only a smaller (broadcast) operand had a tangent."""
    from tenloom.graph.value import V as api

    if t.dtype.kind == "c" and node.dtype.kind != "c":
        t = api.real(t)
    if t.dtype != node.dtype:
        t = api.astype(t, node.dtype)
    if t.shape != node.shape:
        t = api.broadcast_to(t, node.shape)
    return t


def tangent_of(
    node: Node, tangents: Sequence[Value | None], y: Value | None = None
) -> Value | None:
    """The tangent of ``node`` from its inputs' tangents (None: a symbolic zero) by the op's JVP
    rule; None when it is zero. ``y`` stands for the node's value (default: the node)."""
    if not differentiable(node.dtype):
        return None
    ts = tuple(
        t if t is not None and differentiable(x.dtype) else None
        for x, t in zip(node.inputs, tangents)
    )
    if all(t is None for t in ts):
        return None
    rule = OPS[node.op].jvp
    if rule is None:
        raise DTypeError(f"jvp: op {node.op.value} has no forward-mode rule")
    xs = tuple(Value(i) for i in node.inputs)
    out = rule(node, Value(node) if y is None else y, xs, ts)
    return None if out is None else fit_tangent(out, node)


def jvp_nodes(
    outputs: Sequence[Node], inputs: Sequence[Node], tangents: Sequence[Node]
) -> list[Node | None]:
    """Tangents J t of ``outputs`` given ``tangents`` of ``inputs`` (None: no dependence).

    One forward sweep in topological order: a node gets a tangent only when one of its inputs
    has one, so branches that do not depend on the inputs emit nothing. An input that is not a
    leaf is treated as independent (its own inputs' tangents are ignored)."""
    seeds: dict[int, Value] = {}
    for x, t in zip(inputs, tangents):
        if t.shape != x.shape:
            raise ShapeError(
                f"jvp: tangent of shape {fmt_shape(t.shape)} for an input of shape "
                f"{fmt_shape(x.shape)}"
            )
        if t.dtype.kind == "c" and x.dtype.kind != "c":
            raise DTypeError(f"jvp: complex tangent ({t.dtype}) for a real input ({x.dtype})")
        if not differentiable(x.dtype):
            continue
        tx = fit_tangent(Value(t), x)
        prev = seeds.get(id(x))
        seeds[id(x)] = tx if prev is None else prev + tx
    tan: dict[int, Value] = {}
    for node in toposort(outputs):
        seed = seeds.get(id(node))
        if seed is not None:
            tan[id(node)] = seed
            continue
        if not node.inputs:
            continue
        ts = [tan.get(id(i)) for i in node.inputs]
        if all(t is None for t in ts):
            continue
        t = tangent_of(node, ts)
        if t is not None:
            tan[id(node)] = t
    return [tan[id(o)].node if id(o) in tan else None for o in outputs]
