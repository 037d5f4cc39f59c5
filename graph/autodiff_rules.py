"""VJP rules of every differentiable op, registered onto the op registry.

Each rule is ``rule(node, y, xs, g) -> tuple of input cotangents`` (Values or None), with ``y``
the node's output, ``xs`` its inputs and ``g`` the output cotangent, all lazy Values. Rules
compute J^H g (PyTorch's convention for complex values). Subgradients: ``abs`` and ``sign`` use
sign(0) = 0; ``maximum``/``minimum`` send the whole cotangent to the first operand on ties;
reductions ``max``/``min`` share it evenly among tied elements; ``where`` sends nothing to its
condition; ``prod`` gives the product of the other elements, exact at zeros.
"""

from __future__ import annotations

import math

from tenloom.graph import ops  # noqa: F401  (the ops must be defined before rules attach)
from tenloom.graph.node import make_node
from tenloom.graph.ops import Op, register_vjp
from tenloom.graph.value import V as T
from tenloom.graph.value import Value


def cj(x):
    return T.conj(x)


def unbroadcast(g: Value, shape: tuple[int, ...]) -> Value:
    """Sum ``g`` over the axes that broadcasting added to an operand of ``shape``."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1
    )
    out = T.sum(g, axes) if axes else g
    return T.reshape(out, shape)


def _binary(rule):
    def wrapped(node, y, xs, g):
        ga, gb = rule(node, y, xs, g)
        a, b = xs
        return (
            None if ga is None else unbroadcast(ga, a.shape),
            None if gb is None else unbroadcast(gb, b.shape),
        )

    return wrapped


def _abs(node, y, xs, g):
    (x,) = xs
    if x.dtype.kind == "c":
        safe = T.where(y == 0, 1.0, y)
        return (T.where(y == 0, 0.0, g * (x / safe)),)
    return (g * T.sign(x),)


UNARY_RULES = {
    Op.NEG: lambda n, y, xs, g: (-g,),
    Op.ABS: _abs,
    Op.EXP: lambda n, y, xs, g: (g * cj(y),),
    Op.LOG: lambda n, y, xs, g: (g / cj(xs[0]),),
    Op.SQRT: lambda n, y, xs, g: (g / (2.0 * cj(y)),),
    Op.SIN: lambda n, y, xs, g: (g * cj(T.cos(xs[0])),),
    Op.COS: lambda n, y, xs, g: (-g * cj(T.sin(xs[0])),),
    Op.TANH: lambda n, y, xs, g: (g * cj(1.0 - y * y),),
    Op.SIGN: lambda n, y, xs, g: (None,),
    Op.CONJ: lambda n, y, xs, g: (cj(g),),
    Op.REAL: lambda n, y, xs, g: (T.astype(g, xs[0].dtype),),
    Op.IMAG: lambda n, y, xs, g: (
        (T.astype(g, xs[0].dtype) * 1j,) if xs[0].dtype.kind == "c" else (None,)
    ),
    Op.CAST: lambda n, y, xs, g: (g,),
}


def _pow(node, y, xs, g):
    a, b = xs
    ga = g * cj(b * a ** (b - 1.0))
    gb = g * cj(T.where(a == 0, 0.0, T.log(T.where(a == 0, 1.0, a)) * y))
    return ga, gb


BINARY_RULES = {
    Op.ADD: lambda n, y, xs, g: (g, g),
    Op.SUB: lambda n, y, xs, g: (g, -g),
    Op.MUL: lambda n, y, xs, g: (g * cj(xs[1]), g * cj(xs[0])),
    Op.DIV: lambda n, y, xs, g: (g / cj(xs[1]), -g * cj(y / xs[1])),
    Op.POW: _pow,
    Op.MAXIMUM: lambda n, y, xs, g: (
        T.where(xs[0] >= xs[1], g, 0.0),
        T.where(xs[0] >= xs[1], 0.0, g),
    ),
    Op.MINIMUM: lambda n, y, xs, g: (
        T.where(xs[0] <= xs[1], g, 0.0),
        T.where(xs[0] <= xs[1], 0.0, g),
    ),
    Op.MOD: lambda n, y, xs, g: (g, -g * T.floor_divide(xs[0], xs[1])),
    Op.FLOORDIV: lambda n, y, xs, g: (None, None),
}


def _where(node, y, xs, g):
    c, a, b = xs
    return (
        None,
        unbroadcast(T.where(c, g, 0.0), a.shape),
        unbroadcast(T.where(c, 0.0, g), b.shape),
    )


def expand_reduced(g: Value, node) -> Value:
    """``g`` with the reduced axes put back (size 1), ready to broadcast to the input."""
    axes, keepdims = node.attrs
    if keepdims:
        return g
    shape = list(node.inputs[0].shape)
    for a in axes:
        shape[a] = 1
    return T.reshape(g, tuple(shape))


def _sum(node, y, xs, g):
    return (T.broadcast_to(expand_reduced(g, node), xs[0].shape),)


def prod_others(node, x: Value) -> Value:
    """d prod / d x: for each element the product of the other elements of its reduced group
    (the input's shape), exact at zeros as JAX and PyTorch. A pairwise product tree over the
    group (padded with ones to even lengths) and its reverse sweep, which multiplies only: no
    division by x, memory O(x.size) over log2(group size) levels, and a graph that can be
    differentiated again to any order (a ``where`` on the zeros would lose the second
    derivatives through the zeros)."""
    axes = node.attrs[0]
    keep = [a for a in range(x.ndim) if a not in axes]
    lead = tuple(x.shape[a] for a in keep)
    group = tuple(x.shape[a] for a in axes)
    m = math.prod(group)
    if m == 0:
        return T.zeros(x.shape, x.dtype)
    perm = keep + list(axes)
    p = T.reshape(T.transpose(x, perm), lead + (m,))
    levels = []
    while p.shape[-1] > 1:
        n = p.shape[-1]
        if n % 2:
            p = T.concatenate([p, T.ones(lead + (1,), x.dtype)], axis=-1)
        pairs = T.reshape(p, lead + ((n + 1) // 2, 2))
        a, b = pairs[..., 0], pairs[..., 1]
        levels.append((a, b, n))
        p = a * b
    others = T.ones(lead + (1,), x.dtype)  # of the group's product: the empty product
    for a, b, n in reversed(levels):
        both = T.stack([others * b, others * a], axis=-1)
        others = T.reshape(both, lead + (2 * b.shape[-1],))[..., :n]
    inv = [0] * x.ndim
    for i, ax in enumerate(perm):
        inv[ax] = i
    return T.transpose(T.reshape(others, lead + group), inv)


def _prod(node, y, xs, g):
    (x,) = xs
    return (expand_reduced(g, node) * cj(prod_others(node, x)),)


def _extreme(node, y, xs, g):
    (x,) = xs
    yb = expand_reduced(y, node)
    mask = T.astype(x == yb, g.dtype)
    count = T.sum(mask, node.attrs[0], keepdims=True)
    return (mask * expand_reduced(g, node) / count,)


def _reshape(node, y, xs, g):
    return (T.reshape(g, xs[0].shape),)


def _transpose(node, y, xs, g):
    perm = node.attrs[0]
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return (T.transpose(g, inv),)


def _broadcast(node, y, xs, g):
    return (unbroadcast(g, xs[0].shape),)


def _scatter(g: Value, spec: tuple, shape: tuple) -> Value:
    """``g`` written into zeros of ``shape`` at the basic index ``spec`` (SLICE_SCATTER)."""
    if all(s == (0, n, 1) for s, n in zip(spec, shape)):  # every axis whole, in order
        return g
    return Value(make_node(Op.SLICE_SCATTER, (g.node,), (spec, tuple(shape))))


def _slice(node, y, xs, g):
    """Scatter the cotangent back into zeros of the input's shape (memory of the input's
    size, whatever the steps)."""
    return (_scatter(g, node.attrs[0], xs[0].shape),)


def _slice_scatter(node, y, xs, g):
    spec = node.attrs[0]
    return (Value(make_node(Op.SLICE, (g.node,), (spec,))),)


def _concat(node, y, xs, g):
    (ax,) = node.attrs
    out, start = [], 0
    for x in xs:
        key = [slice(None)] * g.ndim
        key[ax] = slice(start, start + x.shape[ax])
        out.append(g[tuple(key)])
        start += x.shape[ax]
    return tuple(out)


def _diagonal(node, y, xs, g):
    """The diagonal's entry d sits at row d (offset >= 0) or column d (offset < 0): g padded
    with zeros to that axis's length, times the offset identity (memory of the input's size;
    a dense (n1, n2, length) selection tensor was cubic)."""
    (x,) = xs
    offset, a1, a2 = node.attrs
    n1, n2 = x.shape[a1], x.shape[a2]
    along, n = (a1, n1) if offset >= 0 else (a2, n2)
    length = y.shape[-1]
    whole = tuple((0, s, 1) for s in g.shape[:-1])
    spec = whole + (((0, length, 1),) if length else ((0, 0, 1),))
    padded = _scatter(g, spec, g.shape[:-1] + (n,))
    nd = x.ndim
    rest = [i for i in range(nd) if i not in (a1, a2)]
    eye = T.eye(n1, n2, offset, dtype=g.dtype)
    return (T.einsum([padded, eye], [rest + [along], [a1, a2]], list(range(nd))),)


def _trace(node, y, xs, g):
    (x,) = xs
    offset, a1, a2 = node.attrs
    eye = T.eye(x.shape[a1], x.shape[a2], offset, dtype=g.dtype)
    nd = x.ndim
    rest = [i for i in range(nd) if i not in (a1, a2)]
    return (T.einsum([g, eye], [rest, [a1, a2]], list(range(nd))),)


def _einsum(node, y, xs, g):
    terms, out = node.attrs
    sizes = {}
    for x, t in zip(xs, terms):
        sizes.update(zip(t, x.shape))
    fresh = max(sizes, default=-1) + 1
    cts = []
    for k, (x, t) in enumerate(zip(xs, terms)):
        if x.dtype.kind not in "fc":
            cts.append(None)
            continue
        others = [lab for j, tj in enumerate(terms) if j != k for lab in tj]
        present = set(others) | set(out)
        unique = list(dict.fromkeys(t))
        args: list = [g, list(out)]
        for j, (xj, tj) in enumerate(zip(xs, terms)):
            if j != k:
                args += [cj(xj), list(tj)]
        # labels repeated in operand k: couple fresh copies through a delta tensor
        term_k: list = []
        seen: dict = {}
        for lab in t:
            if lab in seen:
                new = fresh
                fresh += 1
                eye = T.eye(sizes[lab], dtype=g.dtype)
                args += [eye, [lab, new]]
                term_k.append(new)
            else:
                seen[lab] = True
                term_k.append(lab)
        # labels of operand k found nowhere else: the cotangent is constant along them
        lone = [lab for lab in unique if lab not in present]
        for lab in lone:
            args += [T.ones((sizes[lab],), dtype=g.dtype), [lab]]
        cts.append(T.einsum(args[0::2], args[1::2], term_k))
    return tuple(cts)


for _op, _rule in UNARY_RULES.items():
    register_vjp(_op, _rule)
for _op, _rule in BINARY_RULES.items():
    register_vjp(_op, _binary(_rule))
for _op in (Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.AND, Op.OR, Op.XOR, Op.INVERT):
    register_vjp(_op, lambda n, y, xs, g: tuple(None for _ in xs))
register_vjp(Op.WHERE, _where)
register_vjp(Op.SUM, _sum)
register_vjp(Op.PROD, _prod)
register_vjp(Op.MAX, _extreme)
register_vjp(Op.MIN, _extreme)
register_vjp(Op.RESHAPE, _reshape)
register_vjp(Op.TRANSPOSE, _transpose)
register_vjp(Op.LAYOUT, lambda node, y, xs, g: (g,))  # values unchanged: so is the cotangent
register_vjp(Op.BROADCAST, _broadcast)
register_vjp(Op.SLICE, _slice)
register_vjp(Op.SLICE_SCATTER, _slice_scatter)
register_vjp(Op.CONCAT, _concat)
register_vjp(Op.DIAGONAL, _diagonal)
register_vjp(Op.TRACE, _trace)
register_vjp(Op.EINSUM, _einsum)
