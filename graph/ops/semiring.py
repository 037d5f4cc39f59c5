"""Semiring contraction networks: SEMIRING_EINSUM, an einsum whose "multiply" and "sum" are a
semiring's (issue 24).

attrs: :class:`SemiringAttrs` (terms, out, semiring) with EINSUM's int labels (no label repeated
within one operand: the builder takes diagonals first, an ordinary one-operand EINSUM). Per
output entry, over every value of the labels not in ``out``:

- ``"max_plus"``: the max of the sum of the operands' entries (tropical; MAP inference,
  spin-glass ground states), ``"min_plus"`` the min of the sum (shortest paths);
- ``"max_times"``: the max of the product (Viterbi over probabilities). It is a semiring only
  over nonnegative numbers: with a negative entry the max of products depends on the order
  the network contracts in (max(x) * c is not max(x * c) for c < 0), so results are defined
  for entries >= 0 only;
- ``"log_sum_exp"``: log of the sum of exp of the sum (log-domain partition functions),
  computed stably;
- ``"count"``: max_plus carrying the number of configurations that reach the max (counting
  tropical numbers): the result has a trailing axis of size 2, ``[..., 0]`` the value and
  ``[..., 1]`` the count (float64, exact up to 2**53). An operand is *raw* (plain weights, each
  entry counted once, an entry of -inf not at all) or a *pair* (a trailing axis of 2, as partial
  results are). Ties are exact float equality: use integer-valued weights for exact counts.

An empty sum is the semiring's zero: -inf (max_plus, log_sum_exp, count with count 0), +inf
(min_plus), 0 (max_times); the iinfo extremes for integer tropical networks. NaN propagates.

The semiring is part of the node, so no pass ever merges networks of different semirings or an
ordinary EINSUM with a semiring one. The passes that assume ordinary arithmetic (prereduce,
simplify's unit folding, canonicalize's products, the permutation pass's GEMM grouping) leave
this op alone; lone labels are reduced with the semiring's addition inside the kernel. The order
pass (passes/contraction_order.py) orders an n-ary network into pairwise SEMIRING_EINSUM nodes
with the same search as ordinary networks, and slices it under ``memory_limit`` (SLICED with a
semiring: slices combine with the semiring's addition).

The reference below broadcasts each pair of operands over their labels (fine for the small
networks of constant folding and tests); the backends' kernels are runtime/kernels/semiring.py.

Gradients (reverse mode; ``tl.grad``):

- log_sum_exp: the ordinary gradient (the marginals), as log_sum_exp networks themselves, so it
  is stable: d/dx_k = exp(x_k + LSE(others, log(g) - y)), the cotangent split into its positive
  and negative parts.
- max_plus / min_plus: argmax back-propagation. For operand k, the network of the other operands
  over k's labels and the output's (the max-marginal "environment") gives, added to x_k, the
  best total of every configuration through each entry of x_k; per output entry, the finite
  entries whose best total is the best of x_k's entries (one array's max: exact, whatever
  order the forward tree summed in) are the optimal configuration's, and the cotangent of the
  output flows to them. With a unique optimum that is the argmax configuration (a one-hot
  vector per variable tensor); with ties, every entry used by some optimal configuration is
  marked per operand (a set, not one configuration; summed over the uses of a tensor that
  appears twice): break ties with a small random term below the energy gap to read one
  configuration. The environment spans k's labels and the output's, so this suits scalar or
  small outputs (energies, MAP values). Forward mode sums over the same set.
- max_times: as max_plus, the indicator times the environment (the product of the others).
- count: no gradient (it counts configurations).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from tenloom.graph.errors import DTypeError, OptionError, ShapeError, fmt_shape
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.checks import BadFormat, check_arity, check_ints
from tenloom.graph.ops.registry import Op, OpKind, as_array, builder, register_op
from tenloom.graph.value import V as T
from tenloom.graph.value import Value

# the ops of this family, defined before anything refers to them
Op.define_all("semiring_einsum")

SEMIRINGS = ("max_plus", "min_plus", "max_times", "log_sum_exp", "count")
_TROPICAL = ("max_plus", "min_plus", "max_times")


class SemiringAttrs(NamedTuple):
    terms: tuple[tuple[int, ...], ...]  # each operand's labels (none repeated within one)
    out: tuple[int, ...]  # the output's labels
    semiring: str  # one of SEMIRINGS


def check_semiring(semiring: Any, where: str) -> str:
    if not isinstance(semiring, str) or semiring not in SEMIRINGS:
        raise OptionError(
            f"{where}: unknown semiring {semiring!r}; expected one of "
            + ", ".join(repr(s) for s in SEMIRINGS)
        )
    return semiring


def semiring_dtype(semiring: str, dtypes: Sequence, where: str) -> np.dtype:
    """The dtype a semiring network computes in, from its operands' dtypes: tropical networks
    in float32/float64 (float16 widened) or int32/int64 (small integers widened to int32, as the
    kernels take), log_sum_exp in float32 or float64 (integers: float64), count in float64."""
    dt = np.result_type(*dtypes) if dtypes else np.dtype(np.float64)
    kinds = [np.dtype(d).kind for d in dtypes]
    if any(k not in "iuf" for k in kinds) or dt.kind not in "iuf":
        bad = next(k for k, d in enumerate(dtypes) if np.dtype(d).kind not in "iuf")
        raise DTypeError(
            f"{where}: semiring {semiring!r} takes real numbers; operand {bad} is "
            f"{np.dtype(dtypes[bad])} (operands: {', '.join(str(np.dtype(d)) for d in dtypes)})"
        )
    if semiring == "count":
        return np.dtype(np.float64)
    if semiring == "log_sum_exp":
        return np.dtype(np.float32 if dt.kind == "f" and dt.itemsize <= 4 else np.float64)
    if dt.kind == "f":
        return np.dtype(np.float32 if dt.itemsize <= 4 else np.float64)
    if dt == np.uint64:
        raise DTypeError(
            f"{where}: semiring {semiring!r} has no uint64 kernel (values above 2**63 do not "
            "fit int64); cast the operands to int64 or float64"
        )
    return np.dtype(np.int32 if dt.itemsize < 4 or dt == np.int32 else np.int64)


def zero_of(semiring: str, dtype) -> Any:
    """The semiring's zero (the value of an empty sum; the count part is 0) in ``dtype``."""
    dt = np.dtype(dtype)
    if semiring == "max_times":
        return dt.type(0)
    low = semiring != "min_plus"
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return dt.type(info.min if low else info.max)
    return dt.type(-np.inf if low else np.inf)


def one_of(semiring: str, dtype) -> Any:
    """The semiring's one (the unit of its product)."""
    return np.dtype(dtype).type(1 if semiring == "max_times" else 0)


def is_pair(shape: tuple, term: tuple) -> bool:
    """Whether an operand of a count network is a (value, count) pair rather than raw weights."""
    return len(shape) == len(term) + 1 and shape[-1] == 2


def label_sizes(inputs, terms, semiring: str, where: str = "einsum") -> dict[int, int]:
    sizes: dict[int, int] = {}
    for k, (labels, x) in enumerate(zip(terms, inputs)):
        shape = tuple(x.shape)
        extra = semiring == "count" and is_pair(shape, labels)
        if len(labels) != len(shape) - extra:
            raise ShapeError(
                f"{where}: operand {k} of shape {fmt_shape(shape)} has {len(labels)} labels"
            )
        if len(set(labels)) != len(labels):
            raise ShapeError(f"{where}: operand {k} repeats a label of a semiring network")
        for lab, n in zip(labels, shape):
            if sizes.setdefault(lab, n) != n:
                raise ShapeError(
                    f"{where}: size of label {lab} for operand {k} ({n}) does not match the "
                    f"other operands ({sizes[lab]})"
                )
    return sizes


def _infer(inputs, attrs):
    terms, out, semiring = attrs
    where = f"einsum(semiring={semiring!r})"
    check_semiring(semiring, where)
    if len(terms) != len(inputs) or not inputs:
        raise ShapeError(f"{where}: {len(terms)} label tuples for {len(inputs)} operands")
    sizes = label_sizes(inputs, terms, semiring, where)
    if len(set(out)) != len(out):
        raise ShapeError(f"{where}: output labels {out} repeat a label")
    for lab in out:
        if lab not in sizes:
            raise ShapeError(f"{where}: output label {lab} does not appear in any input")
    dt = semiring_dtype(semiring, [x.dtype for x in inputs], where)
    for k, x in enumerate(inputs):
        if x.dtype != dt:
            raise DTypeError(f"{where}: operand {k} is {x.dtype}, the network computes in {dt}")
    shape = tuple(sizes[lab] for lab in out)
    return (shape + (2,) if semiring == "count" else shape), dt


# ---- the NumPy reference ---------------------------------------------------------------------


def _xp(x):
    """The array module of ``x`` (NumPy, or CuPy when the CUDA backend runs the reference)."""
    mod = type(x).__module__.split(".")[0]
    if mod == "cupy":
        import cupy

        return cupy
    return np


def reduce_values(xp, v, c, axes: tuple, semiring: str):
    """Semiring addition of ``v`` (and counts ``c``; None: each entry counted once) over
    ``axes``: the reference's and the kernels' (runtime/kernels/semiring.py) reduction."""
    if not axes:
        return v, c
    if any(v.shape[a] == 0 for a in axes):  # an empty sum: the zero
        shape = tuple(n for i, n in enumerate(v.shape) if i not in axes)
        zero = xp.full(shape, zero_of(semiring, v.dtype), v.dtype)
        counts = xp.zeros(shape, v.dtype if c is None else c.dtype)
        return zero, (counts if semiring == "count" else None)
    if semiring == "min_plus":
        return xp.min(v, axis=axes), None
    if semiring in ("max_plus", "max_times"):
        return xp.max(v, axis=axes), None
    m = xp.max(v, axis=axes, keepdims=True)
    if semiring == "count":
        hit = v == m
        n = (
            xp.sum(hit, axis=axes, dtype=v.dtype)
            if c is None
            else xp.sum(xp.where(hit, c, 0), axes)
        )
        return xp.squeeze(m, axis=axes), n
    shift = xp.where(xp.isfinite(m), m, 0)  # log_sum_exp, shifted by the max
    with np.errstate(divide="ignore", invalid="ignore"):
        s = xp.log(xp.sum(xp.exp(v - shift), axis=axes, keepdims=True)) + shift
    s = xp.where(m == np.inf, m, s)  # +inf terms: +inf (exp(inf - 0) is inf - inf there)
    return xp.squeeze(s, axis=axes), None


def _aligned(xp, x, term, labels):
    """``x`` (axes labelled ``term``) transposed to ``labels``' order with size-1 axes for the
    labels it lacks, broadcastable against the others."""
    order = sorted(range(len(term)), key=lambda i: labels.index(term[i]))
    y = xp.transpose(x, order) if order != list(range(len(term))) else x
    have = {term[i] for i in order}
    shape = []
    it = iter(y.shape)
    for lab in labels:
        shape.append(next(it) if lab in have else 1)
    return y.reshape(tuple(shape))


def semiring_ref(xs, terms, out, semiring):
    """NumPy (or CuPy) reference: the operands folded left to right, each pair broadcast over
    the union of their labels, labels reduced with the semiring's addition once nothing later
    needs them; for count, values and counts carried side by side."""
    xp = _xp(xs[0])
    dt = np.dtype(xs[0].dtype)
    sizes: dict = {}
    for x, t in zip(xs, terms):
        sizes.update(zip(t, x.shape))
    if any(sizes[lab] == 0 for lab in sizes if lab not in out):  # every entry an empty sum
        shape = tuple(sizes[lab] for lab in out) + ((2,) if semiring == "count" else ())
        return semiring_zeros(xp, shape, dt, semiring)
    items = []
    for x, t in zip(xs, terms):
        if semiring == "count":
            if is_pair(x.shape, t):
                items.append((x[..., 0], x[..., 1], tuple(t)))
            else:
                items.append((x, xp.where(x == -np.inf, 0.0, 1.0).astype(dt), tuple(t)))
        else:
            items.append((x, None, tuple(t)))
    later = [set(out)]
    for _, _, t in reversed(items[1:]):
        later.append(later[-1] | set(t))
    later.reverse()  # later[k]: the labels needed after operand k is folded in
    v, c, labels = items[0]
    with np.errstate(invalid="ignore", over="ignore"):
        for k in range(len(items)):
            if k:
                w, d, t = items[k]
                union = list(dict.fromkeys((*labels, *t)))
                a, b = _aligned(xp, v, labels, union), _aligned(xp, w, t, union)
                v = a * b if semiring == "max_times" else a + b
                if semiring == "count":
                    c = _aligned(xp, c, labels, union) * _aligned(xp, d, t, union)
                    c = xp.broadcast_to(c, v.shape)
                labels = tuple(union)
            keep = later[k]
            axes = tuple(i for i, lab in enumerate(labels) if lab not in keep)
            v, c = reduce_values(xp, v, c, axes, semiring)
            labels = tuple(lab for lab in labels if lab in keep)
    perm = tuple(labels.index(lab) for lab in out)
    v = xp.transpose(v, perm) if perm != tuple(range(len(perm))) else v
    if semiring == "count":
        c = xp.transpose(c, perm) if perm != tuple(range(len(perm))) else c
        c = xp.where(xp.isnan(v), 0, c)  # a NaN value counts no configuration
        return xp.stack([v, c.astype(v.dtype)], axis=-1)
    return as_array(xp.asarray(v, dtype=dt))


def semiring_zeros(xp, shape: tuple, dtype, semiring: str):
    """An array of the semiring's zero (count: pairs (-inf, 0); ``shape`` includes their axis)."""
    if semiring == "count":
        acc = xp.zeros(shape, dtype)
        acc[..., 0] = -np.inf
        return acc
    return xp.full(shape, zero_of(semiring, dtype), dtype)


def semiring_add(a, b, semiring: str):
    """Elementwise semiring addition of two partial results (slices' parts combine with it)."""
    xp = _xp(a)
    if semiring == "min_plus":
        return xp.minimum(a, b)
    if semiring in ("max_plus", "max_times"):
        return xp.maximum(a, b)
    if semiring == "log_sum_exp":
        return xp.logaddexp(a, b)
    va, vb = a[..., 0], b[..., 0]
    v = xp.maximum(va, vb)
    c = xp.where(va == v, a[..., 1], 0) + xp.where(vb == v, b[..., 1], 0)
    return xp.stack([v, c.astype(v.dtype)], axis=-1)


def _ref(xs, attrs):
    return semiring_ref(xs, attrs.terms, attrs.out, attrs.semiring)


def _cost(node) -> int:
    from tenloom.graph.ops.contract import network_madds

    sizes: dict = {}
    for x, t in zip(node.inputs, node.attrs.terms):
        sizes.update(zip(t, x.shape))
    return network_madds(node.attrs.terms, node.attrs.out, sizes)


def _check(ins, at, op):
    terms, out, semiring = check_arity(at, SemiringAttrs, op)
    if not isinstance(terms, tuple) or not all(isinstance(t, tuple) for t in terms):
        raise BadFormat(f"{op}: terms must be tuples of labels")
    for t in (*terms, out):
        check_ints(t, f"{op}: labels", 0)
    if semiring not in SEMIRINGS:
        raise BadFormat(f"{op}: unknown semiring {semiring!r}")


def _fmt(at: SemiringAttrs) -> str:
    from tenloom.graph.ops.contract import einsum_text

    return f"[{einsum_text(at.terms, at.out)}, {at.semiring}]"


# ---- node construction -------------------------------------------------------------------


def semiring_node(nodes: Sequence[Node], terms, out, semiring: str) -> Node:
    """The SEMIRING_EINSUM node of ``nodes`` (already in the network's dtype) labelled by any
    hashable labels, renumbered in order of first appearance (equal networks are one node).
    A one-operand network that only restates its operand returns the operand (not for count,
    whose result is always a pair)."""
    number: dict = {}
    ins = tuple(tuple(number.setdefault(lab, len(number)) for lab in t) for t in terms)
    o = tuple(number.setdefault(lab, len(number)) for lab in out)
    nodes = tuple(nodes)
    if len(nodes) == 1 and ins[0] == o and semiring != "count":
        return nodes[0]
    return make_node(Op.SEMIRING_EINSUM, nodes, (ins, o, semiring))


def _diagonals(node: Node, term: tuple) -> tuple[Node, tuple]:
    """An operand whose labels repeat, as its diagonal (an ordinary one-operand EINSUM: a pure
    selection, the same in every semiring) and the labels left."""
    if len(set(term)) == len(term):
        return node, term
    from tenloom.graph.einsum import einsum_node

    unique = tuple(dict.fromkeys(term))
    return einsum_node([node], [term], unique), unique


def network(nodes: Sequence[Node], terms, out, semiring: str, where: str = "einsum") -> Node:
    """The semiring network of lifted operands with int labels (after the front end's parsing
    and squeezing): diagonals taken, operands cast to the network's dtype."""
    check_semiring(semiring, where)
    if not nodes:
        raise ShapeError(f"{where}: a semiring network needs at least one operand")
    dt = semiring_dtype(semiring, [n.dtype for n in nodes], f"{where}(semiring={semiring!r})")
    pairs = [_diagonals(n, tuple(t)) for n, t in zip(nodes, terms)]
    ins = [make_node(Op.CAST, (n,), (dt.str,)) if n.dtype != dt else n for n, _ in pairs]
    return semiring_node(ins, [t for _, t in pairs], tuple(out), semiring)


def semiring_spec(nodes: Sequence[Node], spec, semiring: str) -> Node:
    """The semiring network of lifted operands and a parsed einsum specification (the front
    end's string and sublist forms): labels renumbered, size-1 broadcast axes squeezed away as
    for ordinary einsum (a broadcast term is the same in every semiring)."""
    from tenloom.graph import einsum as _einsum
    from tenloom.graph.ops.movement import squeeze

    check_semiring(semiring, "einsum")
    nodes = list(nodes)
    in_labels, out, squeeze_axes, _ = _einsum.normalize(spec, [n.shape for n in nodes])
    for k, drop in enumerate(squeeze_axes):
        if drop:
            nodes[k] = squeeze(nodes[k], drop)
    return network(nodes, in_labels, out, semiring)


@builder(public=False)
def semiring_einsum(operands: Sequence[Any], terms: Sequence[Sequence], output, semiring) -> Node:
    """A semiring network of ``operands`` labelled by hashable labels (the rules' algebra)."""
    from tenloom.graph.ops.leaf import lift

    nodes = [lift(o, "einsum") for o in operands]
    return network(nodes, terms, output, semiring)


# ---- reverse mode ------------------------------------------------------------------------


def _broadcast(v: Value, labels: Sequence, union: Sequence) -> Value:
    """``v`` (axes labelled ``labels``) transposed to ``union``'s order, with size-1 axes for
    the labels it lacks."""
    labels = tuple(labels)
    ordered = tuple(lab for lab in union if lab in labels)
    if ordered != labels:
        v = T.einsum([v], [list(labels)], list(ordered))
    it = iter(v.shape)
    shape = tuple(next(it) if lab in labels else 1 for lab in union)
    return T.reshape(v, shape) if shape != v.shape else v


def _nonnegative_constant(g: Value) -> bool:
    """Whether the cotangent is a constant filled with a value >= 0 (``tl.grad`` of the
    network's value itself): its negative part is then zero."""
    from tenloom.graph.ops.leaf import full_value

    node = g.node
    while node.op in (Op.BROADCAST, Op.RESHAPE, Op.CAST):
        node = node.inputs[0]
    if node.op is not Op.FULL:
        return False
    value = full_value(node.attrs)
    return bool(np.real(value) >= 0)


def _others(xs, terms, k: int) -> tuple[list, set]:
    """The operands other than ``k`` with their labels, and the set of those labels."""
    others = [(xs[j], terms[j]) for j in range(len(xs)) if j != k]
    return others, {lab for _, tj in others for lab in tj}


def _vjp(node, y, xs, g):
    terms, out, semiring = node.attrs
    if semiring == "count":
        raise DTypeError(
            "vjp: einsum(semiring='count') has no gradient (its results count configurations); "
            "differentiate the max_plus network instead"
        )
    cts: list = []
    for k, (x, t) in enumerate(zip(xs, terms)):
        if x.dtype.kind != "f":
            cts.append(None)
            continue
        others, other_labels = _others(xs, terms, k)
        if semiring == "log_sum_exp":
            cts.append(_lse_cotangent(x, t, others, other_labels, out, y, g))
        else:
            cts.append(_tropical_cotangent(x, t, others, other_labels, out, y, g, semiring))
    return tuple(cts)


def _lse_cotangent(x, t, others, other_labels, out, y, g):
    kept = [lab for lab in t if lab in other_labels or lab in out]
    ny = T.where(T.greater(y, -np.inf), T.negative(y), -np.inf)  # no inf - inf where y = -inf
    parts = []
    signs = (1,) if _nonnegative_constant(g) else (1, -1)
    for sign in signs:
        gs = g if sign > 0 else T.negative(g)
        pos = T.greater(gs, 0)
        # log of the positive part; -inf (the semiring's zero) elsewhere, without log(0)
        w = T.where(pos, T.add(ny, T.log(T.where(pos, gs, 1))), -np.inf)
        ops = [x_ for x_, _ in others] + [w]
        env = T.semiring_einsum(ops, [tj for _, tj in others] + [out], kept, "log_sum_exp")
        part = T.exp(T.add(x, _broadcast(env, kept, t)))
        parts.append(part)
    return parts[0] if len(parts) == 1 else T.subtract(parts[0], parts[1])


def _weights(x, t, others, other_labels, out, y, semiring):
    """How the output moves with operand ``x`` (labels ``t``), over the union of ``t`` and the
    output's labels: d y[out] / d x[t] = W[t + out]. For the tropical semirings the indicator
    of the optimum's entries (times the product of the others for max_times); for log_sum_exp
    the configurations' weights exp(x + env - y) (each <= 1)."""
    union = list(t) + [lab for lab in out if lab not in t]
    env_labels = [lab for lab in union if lab in other_labels]
    xk = _broadcast(x, t, union)
    yb = _broadcast(y, out, union)
    env_b = None
    if others:
        env = T.semiring_einsum(
            [x_ for x_, _ in others], [tj for _, tj in others], env_labels, semiring
        )
        env_b = _broadcast(env, env_labels, union)
    if semiring == "log_sum_exp":
        total = xk if env_b is None else T.add(xk, env_b)
        live = T.greater(yb, -np.inf)  # y = -inf: no configuration counts (no inf - inf)
        return T.where(live, T.exp(T.subtract(total, T.where(live, yb, 0))), 0), union
    if env_b is None:
        total = xk
    else:
        total = T.multiply(xk, env_b) if semiring == "max_times" else T.add(xk, env_b)
    # the optimum's entries: for each output entry, the entries of x whose best total is the
    # best of x's entries (compared within one array, so the optimum's own entry is equal
    # exactly, however the forward tree ordered its sums; a tolerance scaled by the operands'
    # magnitudes marked entries a big penalty elsewhere put within rounding); never an
    # infeasible entry (an infinite total)
    own = tuple(i for i, lab in enumerate(union) if lab not in out)
    pick = T.min if semiring == "min_plus" else T.max
    best = pick(total, axis=own, keepdims=True) if own else total
    hit = T.bitwise_and(T.equal(total, best), T.less(T.abs(total), np.inf))
    mask = T.astype(hit, x.dtype)
    if semiring == "max_times" and env_b is not None:
        mask = T.multiply(mask, env_b)  # d(x * env)/dx at the optimum
    return mask, union


def _tropical_cotangent(x, t, others, other_labels, out, y, g, semiring):
    w, union = _weights(x, t, others, other_labels, out, y, semiring)
    # the cotangent of each output entry flows to the entries of x on its optimum
    return T.einsum([g, w], [list(out), union], list(t))


def _jvp(node, y, xs, ts):
    terms, out, semiring = node.attrs
    if semiring == "count":
        raise DTypeError(
            "jvp: einsum(semiring='count') has no derivative (its results count "
            "configurations); differentiate the max_plus network instead"
        )
    parts = []
    for k, (x, t, tan) in enumerate(zip(xs, terms, ts)):
        if tan is None:
            continue
        others, other_labels = _others(xs, terms, k)
        w, union = _weights(x, t, others, other_labels, out, y, semiring)
        parts.append(T.einsum([w, tan], [union, list(t)], list(out)))
    if not parts:
        return None
    return sum(parts[1:], parts[0])


register_op(
    Op.SEMIRING_EINSUM,
    OpKind.CONTRACTION,
    _infer,
    _ref,
    attrs=SemiringAttrs,
    vjp=_vjp,
    jvp=_jvp,
    cost=_cost,
    check_attrs=_check,
    fmt=_fmt,
)
