"""canonicalize: multilinear ops become EINSUM nodes on integer labels.

    matmul(a, b)                 -> einsum('...ik,...kj->...ij')  (1-D and batch broadcasting)
    tensordot(a, b, (xa, xb))    -> einsum with the paired axes sharing labels
    trace(x, 0, i, j)            -> einsum with axes i and j sharing a label, summed
    diagonal(x, 0, i, j)         -> einsum with axes i and j sharing a label, moved last
    transpose(x, p)              -> einsum('ab->ba')
    sum(x, axes)                 -> einsum('abc->b')                  (float and complex only)
    x * y, one side an einsum    -> einsum('ab,b->ab')  (Hadamard and scalar factors)

Only rewrites that keep NumPy's dtype are made: sums and traces of integers and booleans
promote in NumPy (int32 -> int64) but not in einsum, so they stay as they are; so do products
whose operands would be promoted.
"""

from __future__ import annotations

from tenloom.graph.einsum import einsum_node
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops import Op
from tenloom.passes.registry import PassContext, register_pass
from tenloom.passes.rewrite import apply_rules, map_graph

MULTILINEAR = (Op.EINSUM,)


def _axes(tag: str, n: int) -> list:
    return [(tag, i) for i in range(n)]


def matmul_to_einsum(node: Node) -> Node:
    a, b = node.inputs
    ta = ["m", "k"] if a.ndim >= 2 else ["k"]
    tb = ["k", "n"] if b.ndim >= 2 else ["k"]
    nb = max(a.ndim - 2, b.ndim - 2, 0)
    batch = _axes("b", nb)
    ba = batch[nb - max(a.ndim - 2, 0) :]
    bb = batch[nb - max(b.ndim - 2, 0) :]
    out = batch + (["m"] if a.ndim >= 2 else []) + (["n"] if b.ndim >= 2 else [])
    # batch axes that broadcast against size 1 are handled by einsum_node's squeezing; an axis
    # that is 1 on both sides stays
    return _with_broadcast_batch(node, [a, b], [ba + ta, bb + tb], out)


def _with_broadcast_batch(node, nodes, terms, out):
    res = einsum_node(nodes, terms, out)
    return res if res.shape == node.shape else None


def tensordot_to_einsum(node: Node) -> Node:
    a, b = node.inputs
    xa, xb = node.attrs
    ta = [("a", i) for i in range(a.ndim)]
    tb = [("b", i) for i in range(b.ndim)]
    for i, j in zip(xa, xb):
        tb[j] = ta[i]
    out = [ta[i] for i in range(a.ndim) if i not in xa] + [
        tb[j] for j in range(b.ndim) if j not in xb
    ]
    return einsum_node([a, b], [ta, tb], out)


def _diag_terms(node: Node):
    (x,) = node.inputs
    offset, a1, a2 = node.attrs
    if offset != 0 or x.shape[a1] != x.shape[a2]:
        return None
    t = [("x", i) for i in range(x.ndim)]
    t[a2] = t[a1]
    rest = [t[i] for i in range(x.ndim) if i not in (a1, a2)]
    return x, t, rest, t[a1]


def trace_to_einsum(node: Node) -> Node | None:
    if node.dtype.kind not in "fc" or node.dtype != node.inputs[0].dtype:
        return None
    d = _diag_terms(node)
    if d is None:
        return None
    x, t, rest, _ = d
    return einsum_node([x], [t], rest)


def diagonal_to_einsum(node: Node) -> Node | None:
    d = _diag_terms(node)
    if d is None:
        return None
    x, t, rest, diag = d
    return einsum_node([x], [t], rest + [diag])


def transpose_to_einsum(node: Node) -> Node:
    (x,) = node.inputs
    t = list(range(x.ndim))
    return einsum_node([x], [t], [t[p] for p in node.attrs.perm])


def sum_to_einsum(node: Node) -> Node | None:
    (x,) = node.inputs
    axes, keepdims = node.attrs
    if node.dtype.kind not in "fc" or node.dtype != x.dtype:
        return None
    t = list(range(x.ndim))
    res = einsum_node([x], [t], [i for i in t if i not in axes])
    if keepdims:
        res = make_node(Op.RESHAPE, (res,), (node.shape,))
    return res


def product_to_einsum(node: Node) -> Node | None:
    a, b = node.inputs
    if node.dtype.kind not in "fc" or a.dtype != node.dtype or b.dtype != node.dtype:
        return None
    if a.op not in MULTILINEAR and b.op not in MULTILINEAR:
        return None
    n = node.ndim
    out = list(range(n))
    return einsum_node([a, b], [out[n - a.ndim :], out[n - b.ndim :]], out)


RULES: dict = {
    Op.MATMUL: [matmul_to_einsum],
    Op.TENSORDOT: [tensordot_to_einsum],
    Op.TRACE: [trace_to_einsum],
    Op.DIAGONAL: [diagonal_to_einsum],
    Op.TRANSPOSE: [transpose_to_einsum],
    Op.SUM: [sum_to_einsum],
    Op.MUL: [product_to_einsum],
}


@register_pass("canonicalize")
def canonicalize(graph: Graph, ctx: PassContext) -> Graph:
    """Rewrite multilinear ops to EINSUM (rules in the module docstring)."""
    fired: dict[str, int] = {}
    out = map_graph(graph, apply_rules(RULES, fired))
    ctx.record("canonicalize", rewrites=sum(fired.values()), **fired)
    return out
