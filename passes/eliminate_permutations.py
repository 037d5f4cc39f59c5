"""eliminate_permutations: pairwise EINSUMs become CONTRACT (GEMM) nodes laid out copy-free.

    einsum(a, b)              -> contract(a, b) viewed as A[batch, left, k] @ B[batch, k, right]
    einsum(transpose(x), b)   -> contract(x, b) with x's labels permuted (the transpose folds away)

A GEMM needs each of its label groups (batch, left, contracted, right) to sit contiguously in
each operand's memory, in the same order on both sides, for the reshape to a 3-d view to be
free. Each contraction picks the group orders (from operand a's or b's memory order) that make
the fewest bytes of copies, and leaves its result in the GEMM's natural layout (batch, left,
right): consumers are told that layout and choose their own groups to match, so chains of
contractions run without transposing copies. Copies that remain are counted.
"""

from __future__ import annotations

from itertools import product

from tenloom.graph.graph import Graph
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops import Op
from tenloom.passes.registry import PassContext, register_pass


def memory_labels(labels: tuple, layout: tuple[int, ...] | None) -> tuple:
    """The operand's labels from outermost to innermost in memory."""
    if layout is None:
        return labels
    return tuple(labels[i] for i in layout)


def groups_are_views(mem: tuple, groups: list[tuple], sizes: dict, batch: tuple) -> bool:
    """True when every group occupies consecutive memory positions in its own order, and the
    batch group is not innermost (so BLAS gets a unit-stride matrix)."""
    mem = tuple(lab for lab in mem if sizes[lab] != 1)
    pos = {lab: i for i, lab in enumerate(mem)}
    for g in groups:
        g = tuple(lab for lab in g if sizes[lab] != 1)
        if len(g) > 1:
            p = [pos[lab] for lab in g]
            if p != list(range(p[0], p[0] + len(p))):
                return False
    b = tuple(lab for lab in batch if sizes[lab] != 1)
    return not (b and mem and mem[-1] in b)


def _ordered(labels: set, mem: tuple) -> tuple:
    return tuple(lab for lab in mem if lab in labels)


def plan_contraction(ta, tb, out, mem_a, mem_b, sizes, size_a: int, size_b: int):
    """Choose (batch, left, contracted, right) orders; returns (groups, copies, copied bytes)."""
    sa, sb, so = set(ta), set(tb), set(out)
    batch_set = sa & sb & so
    con_set = (sa & sb) - so
    left = _ordered((sa & so) - sb, mem_a)
    right = _ordered((sb & so) - sa, mem_b)
    # lone labels (in one operand only, not in the output) are summed first; ignore them here
    mem_a = tuple(lab for lab in mem_a if lab in sb or lab in so)
    mem_b = tuple(lab for lab in mem_b if lab in sa or lab in so)
    best = None
    for bmem, cmem in product((mem_a, mem_b), repeat=2):
        batch, con = _ordered(batch_set, bmem), _ordered(con_set, cmem)
        ok_a = groups_are_views(mem_a, [batch, left, con], sizes, batch)
        ok_b = groups_are_views(mem_b, [batch, con, right], sizes, batch)
        cost = (0 if ok_a else size_a) + (0 if ok_b else size_b)
        copies = (not ok_a) + (not ok_b)
        if best is None or cost < best[2]:
            best = ((batch, left, con, right), copies, cost)
    return best


def _fold_transpose(x: Node, labels: tuple) -> tuple[Node, tuple]:
    """See through a pure permutation of x: (its input, labels in the input's axis order)."""
    if x.op is Op.TRANSPOSE:
        perm = x.attrs[0]
        inner = [None] * len(perm)
        for pos, p in enumerate(perm):
            inner[p] = labels[pos]
        return x.inputs[0], tuple(inner)
    if x.op is Op.EINSUM and len(x.inputs) == 1:
        (t,), o = x.attrs
        if len(set(t)) == len(t) == len(o) and set(t) == set(o):
            m = dict(zip(o, labels))
            return x.inputs[0], tuple(m[lab] for lab in t)
    return x, labels


def _as_sum(node: Node, x: Node) -> Node | None:
    """A one-operand einsum that only sums axes away (no diagonal, no permutation) runs as a
    plain SUM: NumPy's reduction, and the CPU backend's parallel one for big arrays."""
    (t,), out = node.attrs
    if len(set(t)) != len(t) or tuple(lab for lab in t if lab in out) != tuple(out):
        return None
    axes = tuple(i for i, lab in enumerate(t) if lab not in out)
    # integer sums promote in NumPy (int32 -> int64) but not in einsum: floats only
    if not axes or node.dtype != x.dtype or node.dtype.kind not in "fc":
        return None
    return make_node(Op.SUM, (x,), (axes, False))


def natural_layout(node: Node) -> tuple[int, ...] | None:
    """Memory order of a CONTRACT result's axes (batch, left, right), or a LAYOUT's."""
    if node.op is Op.LAYOUT:
        return node.attrs[0]
    if node.op is not Op.CONTRACT:
        return None
    out, batch, left, right = node.attrs[2], node.attrs[3], node.attrs[4], node.attrs[6]
    return tuple(out.index(lab) for lab in batch + left + right)


def _lower(
    graph: Graph, flip: set[int], layouts: dict[int, tuple] | None = None
) -> tuple[dict[int, Node], dict]:
    """One lowering sweep; pairwise einsums whose id is in ``flip`` swap their operands, so
    that their result is laid out (batch, right, left) instead of (batch, left, right), and
    those in ``layouts`` copy their result once into the memory order given there."""
    layouts = layouts or {}
    new: dict[int, Node] = {}
    stats = {"contractions": 0, "permutation_copies": 0, "copied_bytes": 0, "layouts": 0}
    stats["transposes_folded"] = 0
    for node in graph.order:
        ins = tuple(new[id(i)] for i in node.inputs)
        res = None
        if node.op is Op.EINSUM and len(ins) == 2:
            (ta, tb), out = node.attrs
            if len(set(ta)) == len(ta) and len(set(tb)) == len(tb):
                if id(node) in flip:
                    ins, ta, tb = (ins[1], ins[0]), tb, ta
                (a, ta2), (b, tb2) = _fold_transpose(ins[0], ta), _fold_transpose(ins[1], tb)
                stats["transposes_folded"] += (a is not ins[0]) + (b is not ins[1])
                sizes = dict(zip(ta2, a.shape))
                sizes.update(zip(tb2, b.shape))
                mem_a = memory_labels(ta2, natural_layout(a))
                mem_b = memory_labels(tb2, natural_layout(b))
                groups, n_copies, n_bytes = plan_contraction(
                    ta2, tb2, out, mem_a, mem_b, sizes, a.nbytes, b.nbytes
                )
                res = make_node(Op.CONTRACT, (a, b), (ta2, tb2, tuple(out), *groups))
                stats["contractions"] += 1
                stats["permutation_copies"] += n_copies
                stats["copied_bytes"] += n_bytes
                if id(node) in layouts:
                    res = make_node(Op.LAYOUT, (res,), (layouts[id(node)],))
                    stats["layouts"] += 1
                    stats["copied_bytes"] += res.nbytes
        if res is None and node.op is Op.EINSUM and len(ins) == 1:
            res = _as_sum(node, ins[0])
            stats["contractions"] += res is not None
        if res is None:
            res = (
                node
                if all(x is y for x, y in zip(ins, node.inputs))
                else make_node(node.op, ins, node.attrs)
            )
        new[id(node)] = res
    return new, stats


def _copy_bytes(node: Node, layouts: dict[int, tuple]) -> int:
    """Bytes a CONTRACT would copy if its operands had the given memory layouts."""
    a, b = node.inputs
    ta, tb, out = node.attrs[0], node.attrs[1], node.attrs[2]
    sizes = dict(zip(ta, a.shape))
    sizes.update(zip(tb, b.shape))
    mem_a = memory_labels(ta, layouts.get(id(a), natural_layout(a)))
    mem_b = memory_labels(tb, layouts.get(id(b), natural_layout(b)))
    return plan_contraction(ta, tb, out, mem_a, mem_b, sizes, a.nbytes, b.nbytes)[2]


def _flipped_layout(node: Node) -> tuple[int, ...]:
    out, batch, left, right = node.attrs[2], node.attrs[3], node.attrs[4], node.attrs[6]
    return tuple(out.index(lab) for lab in batch + right + left)


def _choose_flips(graph: Graph, new: dict[int, Node]) -> set[int]:
    """Pick, producer by producer in order, the result layout (batch, left, right) or (batch,
    right, left) that makes its consuming contractions copy fewer bytes."""
    users: dict[int, list[Node]] = {}
    for node in graph.order:
        low = new[id(node)]
        if low.op is Op.CONTRACT:
            for x in low.inputs:
                users.setdefault(id(x), []).append(low)
    layouts: dict[int, tuple] = {}
    flip: set[int] = set()
    for node in graph.order:
        low = new[id(node)]
        consumers = users.get(id(low), [])
        if low.op is not Op.CONTRACT or not consumers:
            continue
        keep = sum(_copy_bytes(c, layouts) for c in consumers)
        layouts[id(low)] = _flipped_layout(low)
        swapped = sum(_copy_bytes(c, layouts) for c in consumers)
        if swapped < keep:
            flip.add(id(node))
        else:
            del layouts[id(low)]
    return flip


def _wanted_layout(consumer: Node, x: Node) -> tuple[int, ...] | None:
    """The memory order of ``x`` in which ``consumer`` (a CONTRACT) could read it as a view,
    for one operand slot that it reads ``x`` through; None when it reads ``x`` as a view."""
    ta, tb, out, batch, left, con, right = consumer.attrs
    for slot, (labels, groups) in enumerate(((ta, batch + left + con), (tb, batch + con + right))):
        if consumer.inputs[slot] is x:
            order = [labels.index(lab) for lab in groups if lab in labels]
            return tuple(order + [i for i in range(len(labels)) if i not in order])
    return None


def _choose_layouts(graph: Graph, new: dict[int, Node]) -> dict[int, tuple]:
    """Results that several contractions each copy (a forward intermediate read again by the
    reverse sweep, a cotangent read by two sibling contractions): copy once into the order
    they want, where one copy of the result costs fewer bytes than theirs."""
    users: dict[int, list[Node]] = {}
    for node in graph.order:
        low = new[id(node)]
        if low.op is Op.CONTRACT:
            for x in dict.fromkeys(low.inputs):
                users.setdefault(id(x), []).append(low)
    chosen: dict[int, tuple] = {}
    for node in graph.order:
        low = new[id(node)]
        consumers = users.get(id(low), [])
        if low.op is not Op.CONTRACT or len(consumers) < 2:
            continue
        now = sum(_copy_bytes(c, {}) for c in consumers)
        if now <= low.nbytes:
            continue
        best, best_cost = None, now
        for c in consumers:
            want = _wanted_layout(c, low)
            if want is None or want == natural_layout(low):
                continue
            cost = low.nbytes + sum(_copy_bytes(d, {id(low): want}) for d in consumers)
            if cost < best_cost:
                best, best_cost = want, cost
        if best is not None:
            chosen[id(node)] = best
    return chosen


@register_pass("eliminate_permutations")
def eliminate_permutations(graph: Graph, ctx: PassContext) -> Graph:
    """Lower pairwise EINSUMs to copy-free CONTRACTs (see the module docstring): one sweep,
    then each result's orientation is chosen for its consumers, and results that several
    consumers would each copy are copied once (LAYOUT); the graph is lowered again each time."""
    new, stats = _lower(graph, set())
    if not stats["contractions"]:
        ctx.record("eliminate_permutations", **stats)
        return graph
    flip = _choose_flips(graph, new)
    if flip:
        new, stats = _lower(graph, flip)
    layouts = _choose_layouts(graph, new)
    if layouts:
        new, stats = _lower(graph, flip, layouts)
    stats["results_flipped"] = len(flip)
    ctx.record("eliminate_permutations", **stats)
    return graph.with_outputs(tuple(new[id(o)] for o in graph.outputs))


def count_copies(graph: Graph) -> int:
    """Transposing copies the graph will make: CONTRACT operands whose groups are not views,
    and pairwise EINSUMs / TRANSPOSE nodes (which materialize a permutation when consumed)."""
    n = 0
    for node in graph.order:
        if node.op is Op.CONTRACT:
            a, b = node.inputs
            ta, tb, out, batch, left, con, right = node.attrs
            sizes = dict(zip(ta, a.shape))
            sizes.update(zip(tb, b.shape))
            mem_a = memory_labels(ta, natural_layout(a))
            mem_b = memory_labels(tb, natural_layout(b))
            mem_a = tuple(lab for lab in mem_a if lab in tb or lab in out)
            mem_b = tuple(lab for lab in mem_b if lab in ta or lab in out)
            n += not groups_are_views(mem_a, [batch, left, con], sizes, batch)
            n += not groups_are_views(mem_b, [batch, con, right], sizes, batch)
        elif node.op is Op.EINSUM and len(node.inputs) == 2:
            (ta, tb), out = node.attrs
            # what a tensordot-style evaluation copies: operands not already [free..., summed]
            shared = set(ta) & set(tb)
            n += (
                tuple(ta[-len(shared) :]) != tuple(lab for lab in ta if lab in shared)
                if shared
                else 0
            )
            n += (
                tuple(tb[: len(shared)]) != tuple(lab for lab in tb if lab in shared)
                if shared
                else 0
            )
        elif node.op in (Op.TRANSPOSE, Op.LAYOUT):
            n += 1
    return n
