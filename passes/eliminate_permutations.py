"""eliminate_permutations: pairwise EINSUMs become CONTRACT (GEMM) nodes laid out copy-free.

    einsum(a, b)              -> contract(a, b) viewed as A[batch, left, k] @ B[batch, k, right]
    einsum(transpose(x), b)   -> contract(x, b) with x's labels permuted (the transpose folds away)

A GEMM needs each of its label groups (batch, left, contracted, right) to sit contiguously in
each operand's memory, in the same order on both sides, for the reshape to a 3-d view to be
free. Each contraction picks the group orders (from operand a's or b's memory order) that make
the fewest bytes of copies, and leaves its result in the GEMM's natural layout (batch, left,
right): consumers are told that layout and choose their own groups to match, so chains of
contractions run without transposing copies. Copies that remain are counted.

The reverse sweep mirrors the forward one. A pairwise einsum (g, x) -> y where x is an operand
of a forward contraction f, g has f's shape and y the shape of f's other operand (the
cotangent of that operand: dA = dC . B) keeps f's groups, and writes its result in the memory
order of the primal it differentiates. Its cotangent operand then arrives in the order of f's
result, so it reads both operands through the same views f did: the backward copies only what
the forward copied, and its GEMMs have the forward's shapes.
"""

from __future__ import annotations

from typing import Any

from tenloom.graph.graph import Graph
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops import Op
from tenloom.passes.caches import LRUCache
from tenloom.passes.registry import PassContext, register_pass


def memory_labels(labels: tuple, layout: tuple[int, ...] | None) -> tuple:
    """The operand's labels from outermost to innermost in memory."""
    if layout is None:
        return labels
    return tuple(map(labels.__getitem__, layout))


def groups_are_views(mem: tuple, groups: list[tuple], sizes: dict, batch: tuple) -> bool:
    """True when every group occupies consecutive memory positions in its own order, and the
    batch group is not innermost (so BLAS gets a unit-stride matrix)."""
    return _views_of(mem, sizes)(groups, batch)


def _ordered(labels: set, mem: tuple) -> tuple:
    return tuple(lab for lab in mem if lab in labels)


# plan_contraction's answers: the lowering sweeps, the flips, the layouts and layout_cost ask
# the same questions of the same contractions (a TEBD energy's 480: 1230 calls)
_PLANS: LRUCache[tuple, tuple] = LRUCache("passes.gemm_plans", 16384)


def plan_contraction(ta, tb, out, mem_a, mem_b, sizes, size_a: int, size_b: int, dims=None):
    """Choose (batch, left, contracted, right) orders; returns (groups, copies, copied bytes).
    ``dims``: the sizes of ``ta`` + ``tb``'s labels (the operands' shapes), where the caller
    has them already; ``sizes`` (label -> size) may then be None, worked out on a miss."""
    if dims is None:
        dims = tuple(sizes[lab] for lab in (*ta, *tb))
    key = (ta, tb, out, mem_a, mem_b, dims, size_a, size_b)
    hit = _PLANS.get(key)
    if hit is None:
        if sizes is None:
            sizes = dict(zip((*ta, *tb), dims))
        hit = _plan_contraction(ta, tb, out, mem_a, mem_b, sizes, size_a, size_b)
        _PLANS.put(key, hit)
    return hit


def _plan_contraction(ta, tb, out, mem_a, mem_b, sizes, size_a: int, size_b: int):
    sa, sb, so = set(ta), set(tb), set(out)
    # lone labels (in one operand only, not in the output) are summed first; ignore them here
    mem_a = tuple(lab for lab in mem_a if lab in sb or lab in so)
    mem_b = tuple(lab for lab in mem_b if lab in sa or lab in so)
    left = tuple(lab for lab in mem_a if lab not in sb)
    right = tuple(lab for lab in mem_b if lab not in sa)
    # the batch and contracted labels in either operand's memory order: up to four candidates,
    # tried (a, a), (a, b), (b, a), (b, b); the first of the fewest copied bytes is kept
    batches = (
        tuple(lab for lab in mem_a if lab in sb and lab in so),
        tuple(lab for lab in mem_b if lab in sa and lab in so),
    )
    cons = (
        tuple(lab for lab in mem_a if lab in sb and lab not in so),
        tuple(lab for lab in mem_b if lab in sa and lab not in so),
    )
    pos_a, last_a = _positions(mem_a, sizes)
    pos_b, last_b = _positions(mem_b, sizes)
    best = None
    tried = set()
    for batch in batches:
        for con in cons:
            if (batch, con) in tried:  # the same candidate (no batch, or both orders agree)
                continue
            tried.add((batch, con))
            ok_a = last_a not in batch and _runs(pos_a, sizes, (batch, left, con))
            ok_b = last_b not in batch and _runs(pos_b, sizes, (batch, con, right))
            cost = (0 if ok_a else size_a) + (0 if ok_b else size_b)
            if best is None or cost < best[2]:
                best = ((batch, left, con, right), (not ok_a) + (not ok_b), cost)
    return best


def _positions(mem: tuple, sizes: dict) -> tuple[dict, Any]:
    """An operand's labels of size other than 1 -> their memory positions, and its innermost
    such label (None if none)."""
    pos: dict = {}
    for lab in mem:
        if sizes[lab] != 1:
            pos[lab] = len(pos)
    return pos, next(reversed(pos), None)


def _runs(pos: dict, sizes: dict, groups) -> bool:
    """Whether every group's labels of size other than 1 occupy consecutive memory positions
    in the group's order."""
    for g in groups:
        first = None
        for lab in g:
            if sizes[lab] == 1:
                continue
            p = pos[lab]
            if first is None:
                first = prev = p
            elif p != prev + 1:
                return False
            else:
                prev = p
    return True


def _views_of(mem: tuple, sizes: dict):
    """``groups_are_views`` for one operand's memory order, its positions worked out once
    (plan_contraction asks up to four times per contraction, on every tree the order pass
    costs)."""
    mem = tuple(lab for lab in mem if sizes[lab] != 1)
    pos = {lab: i for i, lab in enumerate(mem)}
    last = mem[-1] if mem else None

    def views(groups, batch) -> bool:
        for g in groups:
            p = [pos[lab] for lab in g if sizes[lab] != 1]
            if len(p) > 1 and p != list(range(p[0], p[0] + len(p))):
                return False
        return not (last is not None and last in batch and sizes[last] != 1)

    return views


def _fold_transpose(x: Node, labels: tuple) -> tuple[Node, tuple]:
    """See through a pure permutation of x: (its input, labels in the input's axis order)."""
    if x.op is Op.TRANSPOSE:
        perm = x.attrs.perm
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
        return node.attrs.perm
    if node.op is not Op.CONTRACT:
        return None
    at = node.attrs
    return tuple(map(at.out.index, at.batch + at.left + at.right))


def _mirror(
    g: Node, tg: tuple, x: Node, tx: tuple, out: tuple, forwards: dict, shape: tuple
) -> tuple | None:
    """When the pairwise einsum (g, x) -> out is a reverse-sweep partner of a lowered forward
    CONTRACT f that reads x (see the module docstring), its groups (batch, left, contracted,
    right) for operands (g, x), in its own labels, and the memory order of the primal it
    differentiates (f's other operand); else None. Labels match f's positionally: g's with
    f's result, x's with f's operand, out's with f's other operand."""
    # the forwards reading x, of g's shape, whose other operand has the result's ``shape``
    # (a partner maps that operand's labels onto the result's: same sizes; see _lower)
    candidates = forwards.get((id(x), g.shape, shape))
    if not candidates:
        return None
    so, sg, sx = set(out), set(tg), set(tx)
    actual = (sg & sx & so, (sg & so) - sx, (sg & sx) - so, (sx & so) - sg)
    for f in candidates:
        ta, tb, f_out, batch, left, con, right = f.attrs
        for j, (fx, t_fx) in enumerate(zip(f.inputs, (ta, tb))):
            other, t_other = (f.inputs[1], tb) if j == 0 else (f.inputs[0], ta)
            if fx is not x or len(t_fx) != len(tx) or len(t_other) != len(out):
                continue
            m: dict = {}
            pairs = zip(f_out + t_fx + t_other, tg + tx + out)
            if any(m.setdefault(fl, el) != el for fl, el in pairs):
                continue
            if len(set(m.values())) != len(m):
                continue
            groups = tuple(
                tuple(m[lab] for lab in grp)
                for grp in ((batch, left, right, con) if j == 1 else (batch, right, left, con))
            )
            if [set(grp) for grp in groups] != list(actual):
                continue
            return groups, tuple(m[lab] for lab in memory_labels(t_other, natural_layout(other)))
    return None


def _lower(
    graph: Graph,
    flip: set[int],
    layouts: dict[int, tuple] | None = None,
    mirrored: set[int] | None = None,
    memo: dict | None = None,
) -> tuple[dict[int, Node], dict]:
    """One lowering sweep; pairwise einsums whose id is in ``flip`` swap their operands, so
    that their result is laid out (batch, right, left) instead of (batch, left, right), and
    those in ``layouts`` copy their result once into the memory order given there. Reverse
    sweep partners of forward contractions mirror them (``_mirror``; ``flip`` does not apply);
    their ids (of the original nodes) are added to ``mirrored``. ``memo``, shared by the sweeps
    of one pass: a pairwise einsum whose lowered operands, flip and the forward contractions
    its mirror test reads are those of an earlier sweep is lowered as it was then (the second
    and third sweeps of a TEBD energy re-lower a third and four fifths of theirs)."""
    layouts = layouts or {}
    mirrored = set() if mirrored is None else mirrored
    memo = {} if memo is None else memo
    new: dict[int, Node] = {}
    # (id(lowered operand), shape, shape of the other operand) -> the CONTRACTs of that shape
    # reading it: _mirror's candidates for a cotangent of that shape and a result of the other
    # operand's shape (an accepted partner maps each label of that operand onto one of the
    # result's, which has its size: one of f's result's, of g's shape, or one it contracts, of
    # x's; a lone label maps outside every group and is refused)
    forwards: dict[tuple, list[Node]] = {}
    # the stats, counted in locals (one sweep updates them per node)
    n_contractions = n_copies_all = n_bytes_all = n_layouts = n_folded_all = n_mirrored = 0
    for node in graph.order:
        ins = tuple([new[id(i)] for i in node.inputs])
        res = None
        pair = node.op is Op.EINSUM and len(ins) == 2
        if pair and (0 in ins[0].shape or 0 in ins[1].shape):
            # a zero-size label: exactly zero (or empty). A CONTRACT would sum a zero-size lone
            # label first, and 0 * NaN is NaN where NumPy's empty sum gives 0
            from tenloom.passes.contraction_order import empty_network

            res = empty_network(node)
        elif pair:
            (ta, tb), out = node.attrs
            if len(set(ta)) == len(ta) and len(set(tb)) == len(tb):
                folded = (_fold_transpose(ins[0], ta), _fold_transpose(ins[1], tb))
                key = (
                    node,
                    ins,
                    id(node) in flip,
                    tuple(forwards.get((id(folded[0][0]), folded[1][0].shape, node.shape), ())),
                    tuple(forwards.get((id(folded[1][0]), folded[0][0].shape, node.shape), ())),
                )
                done = memo.get(key)
                if done is None:
                    mirrors = forwards if key[3] or key[4] else None  # else none to mirror
                    done = memo[key] = _lower_pair(node, ins, folded, key[2], mirrors)
                res, n_copies, n_bytes, mirror, n_folded = done
                if mirror:
                    mirrored.add(id(node))
                    n_mirrored += 1
                n_folded_all += n_folded
                a, b = res.inputs
                k1, k2 = (id(a), res.shape, b.shape), (id(b), res.shape, a.shape)
                forwards.setdefault(k1, []).append(res)
                if k2 != k1:
                    forwards.setdefault(k2, []).append(res)
                n_contractions += 1
                n_copies_all += n_copies
                n_bytes_all += n_bytes
                if id(node) in layouts:
                    res = make_node(Op.LAYOUT, (res,), (layouts[id(node)],))
                    n_layouts += 1
                    n_bytes_all += res.nbytes
        if res is None and node.op is Op.EINSUM and len(ins) == 1:
            res = _as_sum(node, ins[0])
            n_contractions += res is not None
        if res is None:
            res = (
                node
                if all(x is y for x, y in zip(ins, node.inputs))
                else make_node(node.op, ins, node.attrs)
            )
        new[id(node)] = res
    stats = {
        "contractions": n_contractions,
        "permutation_copies": n_copies_all,
        "copied_bytes": n_bytes_all,
        "layouts": n_layouts,
        "transposes_folded": n_folded_all,
        "mirrored": n_mirrored,
    }
    return new, stats


def _lower_pair(
    node: Node, ins: tuple, folded: tuple, flipped: bool, forwards: dict | None
) -> tuple:
    """``_lower``'s CONTRACT for a pairwise einsum with distinct labels per operand, whose
    lowered operands are ``ins`` (``folded``: each seen through a transpose, _fold_transpose):
    (the node, copies, copied bytes, whether it mirrors a forward contraction, transposes
    folded). ``forwards``: _mirror's candidates, None where neither operand has any."""
    (ta, tb), out = node.attrs
    mirror = None
    for s in (0, 1) if forwards is not None else ():  # either operand may be the cotangent
        (g, tg), (x, tx) = folded[s], folded[1 - s]
        mirror = _mirror(g, tg, x, tx, tuple(out), forwards, node.shape)
        if mirror is not None:
            break
    if mirror is not None:
        known = (node.shape, node.dtype)
        res, n_copies, n_bytes = _mirrored(g, tg, x, tx, tuple(out), *mirror, known)
        return res, n_copies, n_bytes, True, 0
    if flipped:
        ins, ta, tb = (ins[1], ins[0]), tb, ta
        (a, ta2), (b, tb2) = folded[1], folded[0]
    else:
        (a, ta2), (b, tb2) = folded
    n_folded = (a is not ins[0]) + (b is not ins[1])
    mem_a = memory_labels(ta2, natural_layout(a))
    mem_b = memory_labels(tb2, natural_layout(b))
    groups, n_copies, n_bytes = plan_contraction(
        ta2, tb2, out, mem_a, mem_b, None, a.nbytes, b.nbytes, a.shape + b.shape
    )
    # the einsum's own shape and dtype: the same labels and operands' dtypes, seen through
    # transposes at most
    known = (node.shape, node.dtype)
    res = make_node(Op.CONTRACT, (a, b), (ta2, tb2, tuple(out), *groups), known=known)
    return res, n_copies, n_bytes, False, n_folded


def _mirrored(g, tg, x, tx, out, groups, target, known=None) -> tuple[Node, int, int]:
    """The CONTRACT of a reverse-sweep partner with the forward's groups; of its two
    orientations, (g, x) -> (batch, left, right) or (x, g) -> (batch, right, left), the one
    whose result lies in the primal's memory order ``target`` (else the first). ``known``: its
    shape and dtype (the einsum's), where the caller has them."""
    batch, left, con, right = groups
    sizes = dict(zip(tg, g.shape))
    sizes.update(zip(tx, x.shape))

    def big(labels):
        return tuple(lab for lab in labels if sizes.get(lab, 1) != 1)

    if big(batch + right + left) == big(target) != big(batch + left + right):
        a, ta, b, tb, groups = x, tx, g, tg, (batch, right, con, left)
    else:
        a, ta, b, tb = g, tg, x, tx
    res = make_node(Op.CONTRACT, (a, b), (ta, tb, out, *groups), known=known)
    ok_a, ok_b = _operand_views(res)
    return res, (not ok_a) + (not ok_b), (0 if ok_a else a.nbytes) + (0 if ok_b else b.nbytes)


def _operand_views(node: Node, layouts: dict[int, tuple] | None = None) -> tuple[bool, bool]:
    """Whether a CONTRACT reads each operand as a view with the groups it has, its operands
    laid out as ``layouts`` says (else as they are)."""
    layouts = layouts or {}
    a, b = node.inputs
    ta, tb, out, batch, left, con, right = node.attrs
    sizes = dict(zip(ta, a.shape))
    sizes.update(zip(tb, b.shape))
    mem_a = memory_labels(ta, layouts.get(id(a), natural_layout(a)))
    mem_b = memory_labels(tb, layouts.get(id(b), natural_layout(b)))
    mem_a = tuple(lab for lab in mem_a if lab in tb or lab in out)
    mem_b = tuple(lab for lab in mem_b if lab in ta or lab in out)
    return (
        groups_are_views(mem_a, [batch, left, con], sizes, batch),
        groups_are_views(mem_b, [batch, con, right], sizes, batch),
    )


def _copy_bytes(node: Node, layouts: dict[int, tuple], fixed: bool = False) -> int:
    """Bytes a CONTRACT would copy if its operands had the given memory layouts: with its
    groups chosen again, or (``fixed``, a reverse-sweep mirror) with the groups it has."""
    a, b = node.inputs
    if fixed:
        ok_a, ok_b = _operand_views(node, layouts)
        return (0 if ok_a else a.nbytes) + (0 if ok_b else b.nbytes)
    ta, tb, out = node.attrs.a_labels, node.attrs.b_labels, node.attrs.out
    sizes = dict(zip(ta, a.shape))
    sizes.update(zip(tb, b.shape))
    mem_a = memory_labels(ta, layouts.get(id(a), natural_layout(a)))
    mem_b = memory_labels(tb, layouts.get(id(b), natural_layout(b)))
    return plan_contraction(ta, tb, out, mem_a, mem_b, sizes, a.nbytes, b.nbytes)[2]


class _CopyBytes:
    """``_copy_bytes`` for the choices below, which ask it of the same consumers again and
    again under other layouts (a TEBD energy: 700 times for 180 contractions): each
    consumer's labels, shapes and operands' natural layouts worked out once, and each answer
    kept by the consumer and the two layouts it depends on (its operands')."""

    __slots__ = ("prep", "seen")

    def __init__(self) -> None:
        self.prep: dict[int, tuple] = {}
        self.seen: dict[tuple, int] = {}  # (id(node), layout of a, layout of b, fixed) -> bytes

    def __call__(self, node: Node, layouts: dict[int, tuple], fixed: bool = False) -> int:
        p = self.prep.get(id(node))
        if p is None:
            a, b = node.inputs
            ta, tb, out = node.attrs.a_labels, node.attrs.b_labels, node.attrs.out
            dims = a.shape + b.shape  # the sizes of ta's and tb's labels
            nat_a, nat_b = natural_layout(a), natural_layout(b)
            p = (node, ta, tb, out, None, dims, id(a), id(b), nat_a, nat_b, a.nbytes, b.nbytes)
            self.prep[id(node)] = p  # the node is kept in the entry: its id stays its own
        _, ta, tb, out, sizes, dims, ida, idb, nat_a, nat_b, size_a, size_b = p
        lay_a, lay_b = layouts.get(ida, nat_a), layouts.get(idb, nat_b)
        key = (id(node), lay_a, lay_b, fixed)
        hit = self.seen.get(key)
        if hit is not None:
            return hit
        if fixed:
            hit = _copy_bytes(node, layouts, True)
        else:
            mem_a, mem_b = memory_labels(ta, lay_a), memory_labels(tb, lay_b)
            hit = plan_contraction(ta, tb, out, mem_a, mem_b, sizes, size_a, size_b, dims)[2]
        self.seen[key] = hit
        return hit


def _flipped_layout(node: Node) -> tuple[int, ...]:
    at = node.attrs
    return tuple(map(at.out.index, at.batch + at.right + at.left))


def _choose_flips(graph: Graph, new: dict[int, Node], mirrored: set[int]) -> set[int]:
    """Pick, producer by producer in order, the result layout (batch, left, right) or (batch,
    right, left) that makes its consuming contractions copy fewer bytes. Reverse-sweep mirrors
    (ids in ``mirrored``) follow their forward contractions and are left out on both sides."""
    users: dict[int, list[Node]] = {}
    for node in graph.order:
        low = new[id(node)]
        if low.op is Op.CONTRACT and id(node) not in mirrored:
            for x in low.inputs:
                users.setdefault(id(x), []).append(low)
    layouts: dict[int, tuple] = {}
    flip: set[int] = set()
    copy_bytes = _CopyBytes()
    for node in graph.order:
        low = new[id(node)]
        consumers = users.get(id(low), [])
        if low.op is not Op.CONTRACT or not consumers or id(node) in mirrored:
            continue
        keep = sum(copy_bytes(c, layouts) for c in consumers)
        layouts[id(low)] = _flipped_layout(low)
        swapped = sum(copy_bytes(c, layouts) for c in consumers)
        if swapped < keep:
            flip.add(id(node))
        else:
            del layouts[id(low)]
    return flip


def _wanted_layout(consumer: Node, x: Node) -> tuple[int, ...] | None:
    """The memory order of ``x`` in which ``consumer`` (a CONTRACT) could read it as a view,
    for one operand slot that it reads ``x`` through. Of the two orders that are views, (batch,
    first, second) and (batch, second, first), the one whose innermost label lies innermost
    in ``x``'s memory now: the copy's inner loop then reads with the shorter stride."""
    ta, tb, out, batch, left, con, right = consumer.attrs
    for slot, (labels, g1, g2) in enumerate(((ta, left, con), (tb, con, right))):
        if consumer.inputs[slot] is x:
            sizes = dict(zip(labels, x.shape))
            pos = {lab: i for i, lab in enumerate(memory_labels(labels, natural_layout(x)))}

            def inner(group):
                big = [pos[lab] for lab in group if lab in pos and sizes[lab] != 1]
                return big[-1] if big else -1

            groups = batch + (g2 + g1 if inner(g1) > inner(g2) >= 0 else g1 + g2)
            order = [labels.index(lab) for lab in groups if lab in labels]
            return tuple(order + [i for i in range(len(labels)) if i not in order])
    return None


def _choose_layouts(graph: Graph, new: dict[int, Node], mirrored: set[int]) -> dict[int, tuple]:
    """Results that several contractions each copy (a forward intermediate read again by the
    reverse sweep, a cotangent read by two sibling contractions): copy once into the order
    they want, where one copy of the result costs fewer bytes than theirs."""
    users: dict[int, list[Node]] = {}
    fixed: set[int] = set()  # lowered mirrors: their groups stay
    for node in graph.order:
        low = new[id(node)]
        if low.op is Op.CONTRACT:
            if id(node) in mirrored:
                fixed.add(id(low))
            for x in dict.fromkeys(low.inputs):
                users.setdefault(id(x), []).append(low)
    chosen: dict[int, tuple] = {}
    copy_bytes = _CopyBytes()
    for node in graph.order:
        low = new[id(node)]
        consumers = users.get(id(low), [])
        if low.op is not Op.CONTRACT or len(consumers) < 2:
            continue
        now = sum(copy_bytes(c, {}, id(c) in fixed) for c in consumers)
        if now <= low.nbytes:
            continue
        best, best_cost = None, now
        for c in consumers:
            want = _wanted_layout(c, low)
            if want is None or want == natural_layout(low):
                continue
            cost = low.nbytes + sum(
                copy_bytes(d, {id(low): want}, id(d) in fixed) for d in consumers
            )
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
    mirrored: set[int] = set()
    memo: dict = {}  # the sweeps' pairwise lowerings (_lower)
    new, stats = _lower(graph, set(), mirrored=mirrored, memo=memo)
    if not stats["contractions"]:
        ctx.record("eliminate_permutations", **stats)
        return graph
    flip = _choose_flips(graph, new, mirrored)
    if flip:
        new, stats = _lower(graph, flip, memo=memo)
    layouts = _choose_layouts(graph, new, mirrored)
    if layouts:
        new, stats = _lower(graph, flip, layouts, memo=memo)
    stats["results_flipped"] = len(flip)
    ctx.record("eliminate_permutations", **stats)
    return graph.with_outputs(tuple(new[id(o)] for o in graph.outputs))


def count_copies(graph: Graph) -> int:
    """Transposing copies the graph will make: CONTRACT operands whose groups are not views,
    and pairwise EINSUMs / TRANSPOSE nodes (which materialize a permutation when consumed)."""
    n = 0
    for node in graph.order:
        if node.op is Op.CONTRACT:
            n += 2 - sum(_operand_views(node))
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
