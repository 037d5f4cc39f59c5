"""cse: common subexpressions beyond hash-consing.

Hash-consing already makes structurally identical nodes one object. This pass also puts the
operands of commutative elementwise ops in one order, so that ``a + b`` and ``b + a`` (and
``a * b`` / ``b * a``, ``==``, ...) become one node:

    op(b, a) -> op(a, b)   for op in {add, mul, eq, ne, and, or, xor}
                           when a's fingerprint is smaller than b's

The fingerprint hashes a node's op, attributes and its inputs' fingerprints (sorted for the
commutative ops), so it does not depend on operand order and the pass is idempotent. It is a
stable digest (no identity, no per-process string hashing), so the same graph gets the same
operand order in every process and after ``tl.save``/``tl.load``: complex products and NaN
propagation are not bitwise symmetric, so the order must not vary.

It is two digests, compared in turn: the **structure** (ops, shapes, dtypes, attributes, but
not the values of constants and fills), then the **content** (those values too). Structure
first, so that the order does not change with the values: ``y * dt + c`` with a new ``dt``
every step of an eager loop keeps one operand order, one fused program and so one compiled
device kernel (ordered by content, each value gave the region's inputs another order and
another kernel). Content breaks the ties between operands of one structure (two constant
arrays of one shape), which keeps ``a + b`` and ``b + a`` one node; swapping such a pair
leaves a fused program as it was.

IEEE addition and multiplication are commutative, so results are bitwise unchanged, except
for complex products: NumPy's complex multiply fuses its multiply-adds where the CPU has FMA,
so ``b * a`` and ``a * b`` can differ in the last place, and complex MUL keeps its order.

It also shares decompositions: a values-only node (SVDVALS, EIGVALSH: graph/ops/spectra.py)
whose operand also has the full decomposition (SVD, EIGH with the same UPLO) in the graph
becomes a view of that one, so the matrix is decomposed once:

    svdvals(x), svd(x)  -> svd(x) and a view of its singular values

and a TRUNCATED_SVD (graph/ops/tensor_svd.py) likewise becomes the first r of the SVD's
triplets and the squared sum of its other singular values (a gradient of ``tensor_svd`` has
both).
"""

from __future__ import annotations

import hashlib

import numpy as np
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops import Op
from tenloom.passes import caches
from tenloom.passes.registry import PassContext, register_pass
from tenloom.passes.rewrite import map_graph

# maximum and minimum are left out: maximum(-0.0, 0.0) and maximum(0.0, -0.0) differ in sign
COMMUTATIVE = frozenset({Op.ADD, Op.MUL, Op.EQ, Op.NE, Op.AND, Op.OR, Op.XOR})


_SAMPLE = 1 << 16  # bytes of a big constant that go into its fingerprint
_ATTR_KEYS: dict = {}  # attrs -> stable int (a digest of their repr), shared across runs
caches.register("passes.cse_attr_keys", caches.Table(_ATTR_KEYS, 100_000))


def _stable(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def _plain(x):
    """``x`` with every tuple, attrs records (NamedTuples) included, a plain tuple: the digest
    reads the repr, which must not depend on whether attrs (or a fused step's) are a record."""
    if isinstance(x, tuple):
        return tuple(_plain(v) for v in x)
    return x


def _structure_key(node: Node) -> int:
    """The attributes' digest with the values of constants and fills left out."""
    if node.op in (Op.CONST, Op.FULL):  # shape and dtype are in the fingerprint already
        return 0
    return _attrs_key(node, {})


def _attrs_key(node: Node, consts: dict[int, int]) -> int:
    if node.op is Op.CONST:  # by content (a sample of it for big ones), not identity
        key = consts.get(id(node))
        if key is None:
            raw = np.ascontiguousarray(node.attrs.constant.value).view(np.uint8).reshape(-1)
            key = consts[id(node)] = _stable(raw[:_SAMPLE].tobytes() + raw[-_SAMPLE:].tobytes())
        return key
    attrs = node.attrs
    if node.op is Op.PLACEHOLDER:  # name, shape, dtype: a uid's session part is random
        attrs = (attrs.name, attrs.shape, attrs.dtype)
    if not attrs:
        return 0
    key = _ATTR_KEYS.get(attrs)
    if key is None:
        if len(_ATTR_KEYS) > 100_000:
            _ATTR_KEYS.clear()
        key = _ATTR_KEYS[attrs] = _stable(repr(_plain(attrs)).encode())
    return key


@register_pass("cse")
def cse(graph: Graph, ctx: PassContext) -> Graph:
    """Order commutative operands canonically so mirrored expressions share one node."""
    fp: dict[int, tuple[int, int]] = {}  # node -> (structure, content) digests
    consts: dict[int, int] = {}
    swapped = 0
    before = len(graph.order)

    def fn(node: Node) -> Node:
        nonlocal swapped
        kids = [fp[id(i)] for i in node.inputs]
        if node.op in COMMUTATIVE:
            a, b = node.inputs
            # a complex product is not symmetric to the bit (NumPy's uses fused multiply-adds:
            # b * a and a * b differ in the last place), so its operands keep their order
            if fp[id(b)] < fp[id(a)] and not (node.op is Op.MUL and node.dtype.kind == "c"):
                node = make_node(node.op, (b, a), node.attrs)
                swapped += 1
            kids.sort()
        # tuples of ints hash the same in every process (unlike strings)
        head = (node.op.code, node.shape, node.dtype.num)
        structure = hash((*head, _structure_key(node), *(k[0] for k in kids)))
        content = hash((*head, _attrs_key(node, consts), *(k[1] for k in kids)))
        fp[id(node)] = (structure, content)
        return node

    # the fingerprints only order commutative operands: a graph without such ops (a network of
    # contractions) keeps its nodes as they are, unfingerprinted
    has_commutative = any(n.op in COMMUTATIVE for n in graph.order)
    res = map_graph(graph, fn) if has_commutative else graph
    # until nothing changes: a substitution rebuilds the nodes above it, whose own values-only
    # decompositions are then matched on the next round
    while (shared := _share_decompositions(res)) is not res:
        res = shared
    ctx.record("cse", reordered=swapped, nodes_merged=before - len(res.order))
    return res


_PARTIAL = (Op.SVDVALS, Op.EIGVALSH, Op.TRUNCATED_SVD)


def _share_decompositions(graph: Graph) -> Graph:
    """Values-only and truncated decompositions of an operand that also has a full one: views
    of it."""
    wanted = {id(n.inputs[0]) for n in graph.order if n.op in _PARTIAL}
    if not wanted:
        return graph
    full: dict[int, list[Node]] = {}
    for n in graph.order:
        if n.op in (Op.SVD, Op.EIGH) and id(n.inputs[0]) in wanted:
            full.setdefault(id(n.inputs[0]), []).append(n)
    # truncated SVDs of an operand with no SVD: those of lower rank are views of the highest
    # (which is not itself replaced, so the views' node stays)
    top: dict[int, Node] = {}
    for n in graph.order:
        if n.op is Op.TRUNCATED_SVD and not any(
            f.op is Op.SVD for f in full.get(id(n.inputs[0]), ())
        ):
            t = top.get(id(n.inputs[0]))
            if t is None or n.attrs.rank > t.attrs.rank:
                top[id(n.inputs[0])] = n
    for key, n in top.items():
        full.setdefault(key, []).append(n)
    if not full:
        return graph
    from tenloom.graph.ops.spectra import values_of_full
    from tenloom.graph.ops.tensor_svd import head_of_full

    def fn(node: Node) -> Node:
        if node.op in _PARTIAL:
            view_of = head_of_full if node.op is Op.TRUNCATED_SVD else values_of_full
            for f in full.get(id(node.inputs[0]), ()):
                view = view_of(node, f)
                if view is not None:
                    return view
        return node

    return map_graph(graph, fn)
