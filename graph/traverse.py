"""Iterative graph traversals (no recursion: a 100,000-node chain must work)."""

from __future__ import annotations

from collections.abc import Iterable

from tenloom.graph.node import Node


def toposort(outputs: Iterable[Node]) -> list[Node]:
    """All nodes reachable from ``outputs``, each after its inputs, in depth-first post-order.

    Depth-first post-order keeps a branch's nodes together, which keeps few intermediates alive
    when the list is executed in order (and reads well in a dump). The runtime executes
    ``schedule(order)``, which also helps outputs that share a long branch.
    """
    return _postorder(outputs)


def schedule(order: list[Node]) -> list[Node]:
    """The execution order of a graph whose nodes are ``order``: of the two orders ``_eager``
    makes, the one whose values take the fewer bytes at their peak (``_peak``), the one that
    goes by ``order`` on a tie. Depth-first order alone does not serve outputs that share a
    long branch: a gradient's first output pulls in the whole reverse sweep, and every other
    gradient then reads a cotangent computed long before (kept alive meanwhile, and read back
    from memory): W2's value and gradient (one einsum, separate bra tensors) peak at 161 MB in
    depth-first order, 81 MB eagerly."""
    links = _links(order)
    by_order, ties = _eager(order, nearest_first=False, links=links)
    if not ties:  # no node ever enabled two others at once: one order only
        return by_order
    nearest, _ = _eager(order, nearest_first=True, links=links)
    return nearest if _peak(nearest) < _peak(by_order) else by_order


def _links(order: list[Node]) -> tuple[dict, dict, dict]:
    """For ``_eager``: each node's position in ``order``, how many distinct inputs it waits for,
    and the nodes reading each node (each reader once, in ``order``'s order)."""
    pos: dict[int, int] = {}
    waiting: dict[int, int] = {}
    users: dict[int, list[Node]] = {}
    for k, n in enumerate(order):
        pos[id(n)] = k
        ins = n.inputs
        if len(ins) > 1:
            ins = tuple({id(x): x for x in ins}.values())
        waiting[id(n)] = len(ins)
        for x in ins:
            got = users.get(id(x))
            if got is None:
                users[id(x)] = [n]
            else:
                got.append(n)
    return pos, waiting, users


def _eager(
    order: list[Node], nearest_first: bool, links: tuple[dict, dict, dict] | None = None
) -> tuple[list[Node], bool]:
    """``order`` rescheduled: a node runs as soon as all its inputs have run, the most recently
    enabled first; and whether some node enabled several at once (only then can the tie-break
    matter). Among nodes enabled together, results nothing else reads (outputs) run first,
    then

    - by default, in ``order``'s order (so a single chain keeps its order);
    - with ``nearest_first``, the one with the shortest longest way to a result nothing reads
      first, then in ``order``'s order. A short branch that ends in an output is then finished
      before the long one beside it goes on: W2's gradient (the bra and the ket the same
      tensors) sums two sink contractions per MPS tensor, which run as soon as the reverse
      sweep has made their cotangent rather than after the whole sweep, every cotangent kept
      alive meanwhile (peak 97 -> 81 MB). A short branch that joins a long one later would be
      held meanwhile instead, which ``schedule`` catches by comparing the two orders' peaks.

    A value is read while it is fresh and freed early either way. ``links``: ``_links(order)``,
    where the caller has it."""
    pos, waiting, users = _links(order) if links is None else links
    waiting = dict(waiting)  # counted down below
    height: dict[int, int] = {}
    if nearest_first:
        # the longest way (in nodes) from each node to a result nothing reads: ``order`` has
        # every node after its inputs, so walking it backwards sees a node's users first
        for n in reversed(order):
            height[id(n)] = 1 + max((height[id(u)] for u in users.get(id(n), ())), default=-1)

        def key(u):
            return (-height[id(u)], -pos[id(u)])
    else:

        def key(u):
            return (id(u) not in users, -pos[id(u)])

    # nodes without inputs (leaves, fills) are ready from the start: none is waited for, and
    # each is placed just before the first node that reads it
    sources = [n for n in order if not waiting[id(n)]]
    for n in sources:
        for u in users.get(id(n), ()):
            waiting[id(u)] -= 1
    placed: set[int] = set()
    out: list[Node] = []
    ties = False
    ready = [n for n in reversed(order) if n.inputs and not waiting[id(n)]]
    while ready:
        n = ready.pop()
        for x in n.inputs:
            if not x.inputs and id(x) not in placed:
                placed.add(id(x))
                out.append(x)
        out.append(n)
        enabled = []
        for u in users.get(id(n), ()):
            waiting[id(u)] -= 1
            if not waiting[id(u)]:
                enabled.append(u)
        if len(enabled) > 1:
            ties = True
            enabled.sort(key=key)  # popped from the end: the first to run last in the list
        ready.extend(enabled)
    out += [n for n in sources if id(n) not in placed]  # read by no one: outputs
    return out, ties


def _peak(order: list[Node]) -> int:
    """Bytes of computed values alive at once at most when ``order`` runs: each from the node
    that makes it to its last reader (results to the end); leaves and fills, made before the
    run, not counted. The runtime's cost model (passes/cost.py) refines this with views and
    buffer reuse; to compare two orders of one graph this is enough."""
    last: dict[int, int] = {}
    for k, n in enumerate(order):
        for x in n.inputs:
            last[id(x)] = k
    ends = [0] * len(order)
    live = peak = 0
    for k, n in enumerate(order):
        if n.inputs:
            live += n.nbytes
            if id(n) in last:
                ends[last[id(n)]] += n.nbytes
        peak = max(peak, live)
        live -= ends[k]
    return peak


def _postorder(outputs: Iterable[Node]) -> list[Node]:
    order: list[Node] = []
    done: set[int] = set()
    for out in outputs:
        if id(out) in done:
            continue
        stack: list[tuple[Node, int]] = [(out, 0)]
        entered = {id(out)}
        while stack:
            node, i = stack[-1]
            ins = node.inputs
            while i < len(ins) and (id(ins[i]) in done or id(ins[i]) in entered):
                i += 1
            if i < len(ins):
                stack[-1] = (node, i + 1)
                child = ins[i]
                entered.add(id(child))
                stack.append((child, 0))
            else:
                stack.pop()
                done.add(id(node))
                order.append(node)
    return order


def consumers(order: list[Node]) -> dict[int, int]:
    """id(node) -> how many input slots of nodes in ``order`` read it."""
    counts: dict[int, int] = {}
    for node in order:
        for i in node.inputs:
            counts[id(i)] = counts.get(id(i), 0) + 1
    return counts
