"""SLICED: a contraction network run one slice at a time (emitted by contraction_order when a
``memory_limit`` calls for it).

attrs: :class:`SlicedAttrs` (terms, out, sliced, path, wrt, semiring)

- ``terms``: one tuple of int labels per operand; ``out``: the output labels.
- ``sliced``: ``((label, size), ...)``, the indices fixed in each slice. The network runs once
  per combination of their values on views of the operands; each slice's part is added into
  the output (at its position, for sliced indices that the output keeps).
- ``path``: the SSA path of pairwise contractions that each slice runs (cotengra's sliced tree).
- ``wrt``: ``None`` for the network's value. A tuple of operand positions for its reverse
  sweep: the node then has one more input, the cotangent of the output, and its value is the
  flat concatenation of the cotangents of those operands. Each slice runs the forward tree and
  its reverse sweep (two pairwise contractions per tree node, reusing the slice's forward
  intermediates), so the backward pass stays within the slice's memory too.
  A tuple of negative numbers ``-1 - k`` is forward mode (``forward_positions``): the node has
  one more input per such operand ``k``, its tangent (same shape), and its value is the
  output's tangent. Each slice runs the forward tree with the tangents alongside (two pairwise
  contractions more per tree node), so one sliced network gives the whole directional
  derivative, not one network per operand.
- ``semiring``: ``None`` for an ordinary network; else the semiring of a SEMIRING_EINSUM network
  (graph/ops/semiring.py): each slice runs pairwise SEMIRING_EINSUM nodes and the slices'
  parts combine with the semiring's addition (``semiring_add``) into a result that starts as
  the semiring's zero. Value only (``wrt`` None): semiring networks are differentiated before
  they are ordered and sliced.

Everything here is pure graph-level: the per-slice network (``inner_network``) is a small graph
of pairwise EINSUM nodes on placeholders; the NumPy reference interprets it slice by slice, and
the runtime (runtime/sliced.py) optimizes and compiles it once per backend and spreads slices
over threads, devices or a Dask cluster.

The helpers below that take ``attrs`` also take a plain tuple (the order and slicing searches
cost candidate attrs before any node exists).
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from tenloom.graph.autodiff import differentiable, jvp_nodes, vjp_nodes
from tenloom.graph.errors import DTypeError, ShapeError, fmt_shape
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.checks import BadFormat, check_arity, check_ints
from tenloom.graph.ops.registry import OPS, Op, OpKind, as_array, register_op
from tenloom.graph.value import V as T
from tenloom.graph.value import Value

# the ops of this family (Op.NEG, ...), defined before anything refers to them
Op.define_all("sliced")


class SlicedAttrs(NamedTuple):
    terms: tuple[tuple[int, ...], ...]  # each operand's labels
    out: tuple[int, ...]  # the output's labels
    sliced: tuple[tuple[int, int], ...]  # (label, size) of each sliced index
    path: tuple[tuple[int, int], ...]  # the SSA path each slice runs
    wrt: tuple[int, ...] | None  # None: the value; else a derivative sweep (see above)
    semiring: str | None  # None: ordinary arithmetic; else graph/ops/semiring.py's


def forward_positions(wrt) -> tuple[int, ...] | None:
    """The operands with tangents when ``wrt`` is forward mode, else None."""
    if wrt and wrt[0] < 0:
        return tuple(-1 - k for k in wrt)
    return None


def path_steps(terms, out, path) -> list[tuple]:
    """Each pairwise step of an SSA ``path`` over operands labelled ``terms``: (i, j, labels of
    i, labels of j, labels kept). A step keeps only the labels still needed later or in
    ``out``; the last step keeps ``out``'s order when it holds exactly those labels."""
    live = [tuple(t) for t in terms]
    # how many live terms (and the output) still hold each label, updated in place
    needed = Counter(lab for t in live for lab in t) + Counter(out)
    outs = set(out)
    steps = []
    for step, (i, j) in enumerate(path):
        ta, tb = live[i], live[j]
        for lab in ta:
            needed[lab] -= 1
        for lab in tb:
            needed[lab] -= 1
        keep = tuple(dict.fromkeys(lab for lab in (*ta, *tb) if needed[lab] > 0 or lab in outs))
        if step == len(path) - 1 and set(keep) == outs:
            keep = tuple(out)
        for lab in keep:
            needed[lab] += 1
        live.append(keep)
        steps.append((i, j, ta, tb, keep))
    return steps


def pairwise_network(nodes, terms, out, path, semiring: str | None = None):
    """Pairwise EINSUM nodes contracting ``nodes`` (labelled ``terms``) along the SSA ``path``
    into ``out``; each intermediate keeps only the labels still needed later. Returns the
    result node (already in ``out``'s label order). With ``semiring``, pairwise
    SEMIRING_EINSUM nodes of that semiring (graph/ops/semiring.py)."""
    from tenloom.graph.einsum import einsum_node

    if semiring is not None:
        from tenloom.graph.ops.semiring import semiring_node

        def einsum_node(ns, ts, o):  # noqa: F811  (the semiring's pairwise node)
            return semiring_node(ns, ts, o, semiring)

    live = [(x, tuple(t)) for x, t in zip(nodes, terms)]
    for i, j, ta, tb, keep in path_steps(terms, out, path):
        live.append((einsum_node([live[i][0], live[j][0]], [ta, tb], keep), keep))
    res, t = live[-1]
    if t != tuple(out):
        res = einsum_node([res], [t], out)
    return res


def n_slices(attrs: tuple) -> int:
    terms, out, sliced, path, wrt = attrs[:5]
    return math.prod(size for _, size in sliced)


def slice_values(attrs: tuple, k: int) -> dict:
    """label -> value of the sliced indices in slice ``k`` (mixed radix, last index fastest)."""
    terms, out, sliced, path, wrt = attrs[:5]
    vals = {}
    for lab, size in reversed(sliced):
        k, vals[lab] = divmod(k, size)
    return vals


def slice_index(term, values: dict) -> tuple:
    """Basic index selecting one slice of an array labelled ``term`` (a view: sliced axes go)."""
    return tuple(values[lab] if lab in values else slice(None) for lab in term)


def label_sizes(shapes, terms) -> dict:
    sizes: dict = {}
    for shape, t in zip(shapes, terms):
        sizes.update(zip(t, shape))
    return sizes


@dataclass(frozen=True)
class InnerNetwork:
    """The network of one slice: ``graph`` maps the ``leaves`` (one placeholder per operand,
    sliced axes removed; then the cotangent's, for a reverse sweep) to its outputs (the slice's
    value, or one cotangent per ``wrt`` operand)."""

    graph: Graph
    leaves: tuple[Node, ...]


@functools.lru_cache(maxsize=128)
def inner_network(attrs: tuple, shapes: tuple, dtypes: tuple) -> InnerNetwork:
    from tenloom.graph.ops.leaf import placeholder, zeros

    terms, out, sliced, path, wrt = attrs[:5]
    cut = {lab for lab, _ in sliced}
    sizes = label_sizes(shapes, terms)
    inner_terms = [tuple(lab for lab in t if lab not in cut) for t in terms]
    inner_out = tuple(lab for lab in out if lab not in cut)
    # (a count network's operand may carry a trailing (value, count) axis past its labels)
    leaves = [
        placeholder(
            tuple(sizes[lab] for lab in t) + tuple(shapes[k][len(terms[k]) :]),
            dt,
            name=f"slice_operand{k}",
        )
        for k, (t, dt) in enumerate(zip(inner_terms, dtypes))
    ]
    semiring = attrs[5] if len(attrs) > 5 else None
    res = pairwise_network(leaves, inner_terms, inner_out, path, semiring)
    if wrt is None:
        return InnerNetwork(Graph((res,)), tuple(leaves))
    fwd = forward_positions(wrt)
    if fwd is not None:
        tangents = [
            placeholder(leaves[k].shape, dtypes[len(terms) + j], name=f"slice_tangent{k}")
            for j, k in enumerate(fwd)
        ]
        (tan,) = jvp_nodes([res], [leaves[k] for k in fwd], tangents)
        if tan is None:
            tan = zeros(res.shape, res.dtype)
        return InnerNetwork(Graph((tan,)), (*leaves, *tangents))
    ct = placeholder(res.shape, dtypes[len(terms)], name="slice_cotangent")
    grads = vjp_nodes([res], [leaves[k] for k in wrt], [ct])
    outs = tuple(
        g if g is not None else zeros(leaves[k].shape, leaves[k].dtype) for k, g in zip(wrt, grads)
    )
    return InnerNetwork(Graph(outs), (*leaves, ct))


def inner_for(node: Node) -> InnerNetwork:
    return inner_network(
        node.attrs, tuple(x.shape for x in node.inputs), tuple(x.dtype.str for x in node.inputs)
    )


def slice_itemsize(node: Node) -> int:
    """Bytes per entry of a SLICED node's partial results: a count network's are pairs."""
    return node.dtype.itemsize * (2 if node.attrs.semiring == "count" else 1)


def slice_peak_bytes(attrs: tuple, shapes, itemsize: int, reverse: bool | str | None = None) -> int:
    """Predicted peak bytes of one slice: its live intermediates, plus room at each step for
    contiguous copies of both operands and of the result (a GEMM on views or in another index
    order copies). For a reverse sweep (``reverse``, default: the node is one) every forward
    intermediate stays alive, with cotangents and their copies on top; in forward mode each
    intermediate's tangent lives beside it."""
    terms, out, sliced, path, wrt = attrs[:5]
    if reverse is None:
        forward = forward_positions(wrt) is not None
        reverse = wrt is not None and not forward
    else:  # the slicing pass asks for a sweep to come: True (reverse) or "forward"
        forward, reverse = reverse == "forward", reverse is True
    cut = {lab for lab, _ in sliced}
    sizes = label_sizes(shapes, terms)
    inner = [tuple(lab for lab in t if lab not in cut) for t in terms]
    inner_out = tuple(lab for lab in out if lab not in cut)
    size = lambda t: math.prod(sizes[lab] for lab in t)
    n = len(inner)
    kept: list[tuple] = []  # the intermediates' labels, by SSA id - n
    live = peak = total = biggest = 0
    for i, j, ta, tb, keep in path_steps(inner, inner_out, path):
        new = size(keep)
        peak = max(peak, live + 2 * new + size(ta) + size(tb))
        total += new
        biggest = max(biggest, new, size(ta), size(tb))
        live += new
        for k in (i, j):
            if k >= n:  # an intermediate, freed once consumed
                live -= size(kept[k - n])
        kept.append(keep)
    if reverse:
        peak = max(peak, total + 4 * biggest)
    elif forward:  # each intermediate's tangent lives beside it, plus the two terms of the next
        peak = 3 * peak
    return peak * itemsize


def _infer(inputs, attrs):
    terms, out, sliced, path, wrt = attrs[:5]
    n = len(terms)
    fwd = forward_positions(wrt)
    expected = n + (0 if wrt is None else len(fwd) if fwd is not None else 1)
    if len(inputs) != expected:
        raise ShapeError(f"sliced: {len(inputs)} operands for a network of {expected}")
    sizes: dict = {}
    semiring = attrs[5] if len(attrs) > 5 else None
    for k, (x, t) in enumerate(zip(inputs, terms)):
        pair = semiring == "count" and len(x.shape) == len(t) + 1 and x.shape[-1] == 2
        if len(t) != len(x.shape) - pair:
            raise ShapeError(
                f"sliced: operand {k} has shape {fmt_shape(x.shape)} but {len(t)} labels"
            )
        for lab, s in zip(t, x.shape):
            if sizes.setdefault(lab, s) != s:
                raise ShapeError(
                    f"sliced: label {lab} has size {sizes[lab]} and {s} (operand {k}, "
                    f"shape {fmt_shape(x.shape)})"
                )
    for lab, s in sliced:
        if sizes.get(lab) != s:
            raise ShapeError(f"sliced: sliced label {lab} of size {s} is not in the network")
    if any(lab not in sizes for lab in out) or len(set(out)) != len(out):
        raise ShapeError(f"sliced: output labels {out} do not match the operands")
    if len(path) != max(n - 1, 0) or any(
        not (0 <= i < n + s and 0 <= j < n + s) for s, (i, j) in enumerate(path)
    ):
        raise ShapeError(f"sliced: path {path} is not a pairwise path over {n} operands")
    dtype = np.result_type(*[x.dtype for x in inputs])
    if semiring is not None and wrt is not None:
        raise ShapeError(f"sliced: a {semiring} network has no derivative sweep")
    if wrt is None:
        return tuple(sizes[lab] for lab in out) + ((2,) if semiring == "count" else ()), dtype
    if fwd is not None:
        if any(not 0 <= k < n for k in fwd) or len(set(fwd)) != len(fwd):
            raise ShapeError(f"sliced: tangents of operands {fwd} outside 0..{n - 1} or repeated")
        for j, k in enumerate(fwd):
            if inputs[n + j].shape != inputs[k].shape:
                raise ShapeError(
                    f"sliced: tangent {fmt_shape(inputs[n + j].shape)} of operand {k} of shape "
                    f"{fmt_shape(inputs[k].shape)}"
                )
        return tuple(sizes[lab] for lab in out), dtype
    ct = inputs[n]
    if ct.shape != tuple(sizes[lab] for lab in out):
        raise ShapeError(f"sliced: cotangent shape {fmt_shape(ct.shape)} does not match output")
    if any(not 0 <= k < n for k in wrt):
        raise ShapeError(f"sliced: wrt {wrt} names operands outside 0..{n - 1}")
    return (sum(math.prod(inputs[k].shape) for k in wrt),), dtype


def interpret(graph: Graph, feed: dict) -> list:
    """Run a small graph with each op's NumPy reference (the reference of SLICED)."""
    vals: dict = {}
    for node in graph.order:
        if node.op is Op.PLACEHOLDER:
            vals[id(node)] = feed[id(node)]
        else:
            args = [vals[id(i)] for i in node.inputs]
            vals[id(node)] = as_array(OPS[node.op].ref(args, node.attrs))
    return [vals[id(o)] for o in graph.outputs]


def output_views(attrs: tuple, acc, shapes) -> list:
    """Where each inner output accumulates, as views of the result buffer ``acc`` (with the
    term that labels it)."""
    terms, out, sliced, path, wrt = attrs[:5]
    if wrt is None or forward_positions(wrt) is not None:
        return [(acc, out)]
    views, off = [], 0
    for k in wrt:
        size = math.prod(shapes[k])
        views.append((acc[off : off + size].reshape(shapes[k]), terms[k]))
        off += size
    return views


def slice_feed(attrs: tuple, arrays, values: dict) -> list:
    """The operands of one slice (views), and the cotangent's slice for a reverse sweep or the
    tangents' slices in forward mode."""
    terms, out, sliced, path, wrt = attrs[:5]
    feed = [a[slice_index(t, values)] for a, t in zip(arrays, terms)]
    fwd = None if wrt is None else forward_positions(wrt)
    if fwd is not None:  # each tangent sliced as its operand
        n = len(terms)
        feed += [arrays[n + j][slice_index(terms[k], values)] for j, k in enumerate(fwd)]
    elif wrt is not None:
        feed.append(arrays[len(terms)][slice_index(out, values)])
    return feed


def _ref(xs, attrs):
    shapes = tuple(np.shape(x) for x in xs)
    inner = inner_network(attrs, shapes, tuple(np.asarray(x).dtype.str for x in xs))
    shape, dtype = _infer([np.asarray(x) for x in xs], attrs)
    semiring = attrs[5] if len(attrs) > 5 else None
    if semiring is None:
        acc = np.zeros(shape, dtype)
    else:
        from tenloom.graph.ops.semiring import semiring_add, semiring_zeros

        acc = semiring_zeros(np, shape, dtype, semiring)
    views = output_views(attrs, acc, shapes)
    for k in range(n_slices(attrs)):
        values = slice_values(attrs, k)
        feed = slice_feed(attrs, xs, values)
        parts = interpret(inner.graph, {id(p): a for p, a in zip(inner.leaves, feed)})
        for (view, term), part in zip(views, parts):
            idx = slice_index(term, values)
            if semiring is None:
                view[idx] += part
            else:
                view[idx] = semiring_add(view[idx], part, semiring)
    return acc


# ---- cost, attribute check, dump text -------------------------------------------------------


def _cost(node) -> int:
    """The multiply-adds of one slice's network, times the number of slices."""
    inner = inner_for(node).graph
    return n_slices(node.attrs) * sum(OPS[n.op].cost(n) for n in inner.order)


def _check(ins, at, op):
    """SLICED attrs (terms, out, sliced, path, wrt): its rule checks the sizes and the path's
    range; here the types, and that the path is a proper tree (each operand and intermediate
    read exactly once, never paired with itself)."""
    from tenloom.graph.ops.semiring import SEMIRINGS

    terms, out, sliced, path, wrt, semiring = check_arity(at, SlicedAttrs, op)
    if semiring is not None and semiring not in SEMIRINGS:
        raise BadFormat(f"sliced: unknown semiring {semiring!r}")
    if type(terms) is not tuple or type(sliced) is not tuple or type(path) is not tuple:
        raise BadFormat("sliced: terms, sliced indices and path must be tuples")
    for t in terms:
        check_ints(t, "sliced: labels", 0)
    check_ints(out, "sliced: output labels", 0)
    labels = [check_ints(p, "sliced: (label, size)", 0) for p in sliced]
    if any(len(p) != 2 or p[1] < 1 for p in labels) or len({p[0] for p in labels}) != len(labels):
        raise BadFormat(f"sliced: sliced indices {sliced} must be distinct (label, size >= 1)")
    n, read = len(terms), set()
    for s, pair in enumerate(path):
        pair = check_ints(pair, "sliced: path step", 0, n + s)
        if len(pair) != 2 or pair[0] == pair[1] or read & set(pair):
            raise BadFormat(f"sliced: path {path} is not a contraction tree over {n} operands")
        read |= set(pair)
    if n and read != set(range(n + len(path) - 1)):
        raise BadFormat(f"sliced: path {path} leaves operands uncontracted")
    if wrt is not None:  # operand positions (reverse sweep), or -1 - position (forward mode)
        k = check_ints(wrt, "sliced: wrt", -n, n)
        if len(set(k)) != len(k) or not k or (min(k) < 0 <= max(k)):
            raise BadFormat(f"sliced: wrt {wrt} repeats an operand or mixes the two modes")


def sweep_text(wrt) -> str:
    """How a SLICED node's attrs name its derivative sweep, if it runs one."""
    if wrt is None:
        return ""
    return ", forward mode" if forward_positions(wrt) is not None else ", reverse sweep"


def _fmt(at: SlicedAttrs) -> str:
    ring = f", {at.semiring}" if at.semiring is not None else ""
    return f"[{n_slices(at)} slices{sweep_text(at.wrt)}{ring}]"


# ---- differentiation -------------------------------------------------------------------------


def _vjp(node, y, xs, g):
    """The reverse sweep, sliced the same way: one SLICED node with ``wrt`` = the floating
    operands, whose flat value is split back into one cotangent per operand."""
    terms, out, sliced, path, wrt = node.attrs[:5]
    if wrt is not None:
        raise DTypeError("vjp: a sliced network's derivative sweep cannot be differentiated again")
    if node.attrs.semiring is not None:
        raise DTypeError(
            f"vjp: a sliced {node.attrs.semiring} network is differentiated before it is sliced"
        )
    pos = tuple(k for k, x in enumerate(xs) if differentiable(x.dtype))
    if not pos:
        return tuple(None for _ in xs)
    flat = Value(
        make_node(Op.SLICED, (*(x.node for x in xs), g.node), (terms, out, sliced, path, pos, None))
    )
    cts: list = [None] * len(xs)
    off = 0
    for k in pos:
        size = xs[k].size
        cts[k] = T.reshape(flat[off : off + size], xs[k].shape)
        off += size
    return tuple(cts)


def _jvp(node, y, xs, ts):
    """Forward mode, sliced the same way: one SLICED node carrying the tangents through each
    slice's tree (not one network per operand with a tangent)."""
    terms, out, sliced, path, wrt = node.attrs[:5]
    if wrt is not None:
        raise DTypeError("jvp: a sliced network's derivative sweep cannot be differentiated")
    if node.attrs.semiring is not None:
        raise DTypeError(f"jvp: a sliced {node.attrs.semiring} network has no forward mode")
    pos = tuple(k for k, t in enumerate(ts) if t is not None)
    if not pos:
        return None
    ins = tuple(x.node for x in xs) + tuple(ts[k].node for k in pos)
    attrs = (terms, out, sliced, path, tuple(-1 - k for k in pos), None)
    return Value(make_node(Op.SLICED, ins, attrs))


register_op(
    Op.SLICED,
    OpKind.CONTRACTION,
    _infer,
    _ref,
    None,
    attrs=SlicedAttrs,
    vjp=_vjp,
    jvp=_jvp,
    cost=_cost,
    check_attrs=_check,
    fmt=_fmt,
)
