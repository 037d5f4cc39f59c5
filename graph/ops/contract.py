"""Multilinear ops: einsum on integer labels, matmul, tensordot and trace, and CONTRACT, one
pairwise contraction as a (batched) GEMM, emitted by the passes.

EINSUM labels are normalized to 0..k-1, every label of one size in all operands (the front end
squeezes size-1 broadcast axes away). MATMUL, TENSORDOT and TRACE keep what the user wrote; the
canonicalize pass rewrites them to EINSUM so the order search sees one network, which is why
only EINSUM and TRACE have VJP rules. Every multilinear op's JVP has one term per operand with
a tangent: the same op with that operand replaced by its tangent.

Cost is counted in multiply-adds (passes/cost.py turns them into flops).
"""

from __future__ import annotations

import builtins
import math
import operator
import string
from collections import Counter
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from tenloom.graph import einsum as _einsum
from tenloom.graph.autodiff import add_all, linear_jvp
from tenloom.graph.dtypes import _SUPPORTED_SET
from tenloom.graph.einsum import einsum_ref
from tenloom.graph.errors import (
    DTypeError,
    OptionTypeError,
    ShapeError,
    fmt_shape,
)
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.args import _axis_pair, _offset, int_arg, normalize_axes
from tenloom.graph.ops.checks import BadFormat, check_arity, check_ints, check_no_attrs
from tenloom.graph.ops.elementwise import broadcast_shapes, multiply
from tenloom.graph.ops.leaf import lift
from tenloom.graph.ops.movement import (
    DiagonalAttrs,
    check_diagonal,
    diagonal_shape,
    diagonal_text,
    reshape,
    squeeze,
)
from tenloom.graph.ops.registry import Op, OpKind, as_array, builder, register_op
from tenloom.graph.value import V as T
from tenloom.graph.value import Value

# the ops of this family (Op.NEG, ...), defined before anything refers to them
Op.define_all("einsum matmul tensordot trace contract")


class EinsumAttrs(NamedTuple):
    terms: tuple[tuple[int, ...], ...]  # each operand's labels
    out: tuple[int, ...]  # the output's labels


class TensordotAttrs(NamedTuple):
    axes_a: tuple[int, ...]  # contracted axes of operand 0
    axes_b: tuple[int, ...]  # and the matching axes of operand 1


class ContractAttrs(NamedTuple):
    """CONTRACT: the operands' labels in their axis order, the output's, and the GEMM grouping
    the permutation pass chose (see below)."""

    a_labels: tuple[int, ...]
    b_labels: tuple[int, ...]
    out: tuple[int, ...]
    batch: tuple[int, ...]
    left: tuple[int, ...]  # labels of operand 0 only, kept
    con: tuple[int, ...]  # contracted
    right: tuple[int, ...]  # labels of operand 1 only, kept


def result_dtype(op: str, inputs) -> np.dtype:
    dt = np.result_type(*[i.dtype for i in inputs])
    if dt not in _SUPPORTED_SET:
        raise DTypeError(f"{op}: result dtype {dt} is not supported")
    return dt


def einsum_sizes(inputs, attrs) -> dict[int, int]:
    ins, out = attrs
    sizes: dict[int, int] = {}
    if len(ins) != len(inputs):
        raise ShapeError(f"einsum: {len(ins)} label tuples for {len(inputs)} operands")
    for k, (labels, x) in enumerate(zip(ins, inputs)):
        if len(labels) != x.ndim:
            raise ShapeError(
                f"einsum: operand {k} of shape {fmt_shape(x.shape)} has {len(labels)} labels"
            )
        for lab, n in zip(labels, x.shape):
            if sizes.setdefault(lab, n) != n:
                raise ShapeError(
                    f"einsum: size of label {lab} for operand {k} ({n}) does not match "
                    f"the other operands ({sizes[lab]})"
                )
    for lab in out:
        if lab not in sizes:
            raise ShapeError(f"einsum: output label {lab} does not appear in any input")
    return sizes


def _einsum_infer(inputs, attrs):
    sizes = einsum_sizes(inputs, attrs)
    return tuple(sizes[lab] for lab in attrs.out), result_dtype("einsum", inputs)


def matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    if len(a) == 0 or len(b) == 0:
        raise ShapeError(
            f"matmul: operands must have at least one axis, got shapes {fmt_shape(a)} and "
            f"{fmt_shape(b)}"
        )
    a2 = (1,) + a if len(a) == 1 else a
    b2 = b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ShapeError(
            f"matmul: contracted axis of operand 0 (size {a2[-1]}) does not match operand 1 "
            f"(size {b2[-2]}); shapes {fmt_shape(a)} and {fmt_shape(b)}"
        )
    try:
        batch = broadcast_shapes("matmul", (a2[:-2], b2[:-2]))
    except ShapeError:
        raise ShapeError(
            f"matmul: batch axes of operand 0 {fmt_shape(a2[:-2])} and operand 1 "
            f"{fmt_shape(b2[:-2])} do not broadcast; shapes {fmt_shape(a)} and {fmt_shape(b)}"
        ) from None
    out = batch + ((a2[-2],) if len(a) > 1 else ()) + ((b2[-1],) if len(b) > 1 else ())
    return out


def _matmul_infer(inputs, attrs):
    a, b = inputs
    return matmul_shape(a.shape, b.shape), result_dtype("matmul", inputs)


def _tensordot_infer(inputs, attrs):
    a, b = inputs
    axes_a, axes_b = attrs
    for x, y in zip(axes_a, axes_b):
        if a.shape[x] != b.shape[y]:
            raise ShapeError(
                f"tensordot: axis {x} of operand 0 (size {a.shape[x]}) does not match axis {y} "
                f"of operand 1 (size {b.shape[y]}); shapes {fmt_shape(a.shape)} and "
                f"{fmt_shape(b.shape)}"
            )
    shape = tuple(s for i, s in enumerate(a.shape) if i not in axes_a) + tuple(
        s for i, s in enumerate(b.shape) if i not in axes_b
    )
    return shape, result_dtype("tensordot", inputs)


_TRACE_DTYPES: dict[np.dtype, np.dtype] = {}


def _trace_infer(inputs, attrs):
    (x,), (offset, axis1, axis2) = inputs, attrs
    dt = _TRACE_DTYPES.get(x.dtype)
    if dt is None:
        dt = _TRACE_DTYPES[x.dtype] = np.trace(np.ones((1, 1), x.dtype)).dtype
    return diagonal_shape(x.shape, offset, axis1, axis2)[:-1], dt


# ---- CONTRACT: one pairwise contraction as a (batched) GEMM -----------------------------------
# ContractAttrs: the operands' labels in their axis order, the output's, and the GEMM grouping
# the permutation pass chose. The operands are viewed as A[batch, left, contracted] and
# B[batch, contracted, right]; when each group lies contiguously (and in the same order on both
# sides) in an operand's memory, the transpose + reshape below are views and numpy.matmul runs
# on them without a copy.


def _contract_infer(inputs, attrs):
    a, b = inputs
    a_labels, b_labels, out, batch, left, con, right = attrs
    if len(set(a_labels)) != len(a_labels) or len(set(b_labels)) != len(b_labels):
        raise ShapeError("contract: repeated label within one operand")
    sizes = dict(zip(a_labels, a.shape))
    for lab, n in zip(b_labels, b.shape):
        if sizes.setdefault(lab, n) != n:
            raise ShapeError(f"contract: label {lab} has sizes {sizes[lab]} and {n}")
    if len(a.shape) != len(a_labels) or len(b.shape) != len(b_labels):
        raise ShapeError(
            f"contract: labels {a_labels} and {b_labels} for operands of shapes "
            f"{fmt_shape(a.shape)} and {fmt_shape(b.shape)}"
        )
    if sorted(batch + left + right) != sorted(out):
        raise ShapeError("contract: grouping does not match the labels")
    return tuple(sizes[lab] for lab in out), result_dtype("contract", inputs)


class ContractLayout(NamedTuple):
    """How one CONTRACT runs as a GEMM, worked out from its attrs and operand shapes: the axes
    of labels found in one operand only (summed first), the kept labels of each operand, the
    group sizes (batch, left, contracted, right), the permutations that put the kept axes in
    GEMM order, and the natural result (batch + left + right) with the permutation to ``out``.
    Shared by the reference below and the tuned kernel (runtime/kernels/contract.py)."""

    a_only: tuple
    b_only: tuple
    a_kept: tuple
    b_kept: tuple
    sizes: dict
    nb: int
    nl: int
    nk: int
    nr: int
    perm_a: tuple  # kept axes of a -> (batch, left, con)
    perm_b: tuple  # kept axes of b -> (batch, con, right)
    c_shape: tuple  # the natural result's shape, (batch, left, right)
    perm_c: tuple  # natural result -> out


def contract_layout(attrs, a_shape: tuple, b_shape: tuple) -> ContractLayout:
    a_labels, b_labels, out, batch, left, con, right = attrs
    a_only = tuple(i for i, lab in enumerate(a_labels) if lab not in b_labels and lab not in out)
    a_kept = tuple(lab for i, lab in enumerate(a_labels) if i not in a_only)
    b_only = tuple(i for i, lab in enumerate(b_labels) if lab not in a_kept and lab not in out)
    b_kept = tuple(lab for i, lab in enumerate(b_labels) if i not in b_only)
    sizes = dict(zip(a_labels, a_shape))
    sizes.update(zip(b_labels, b_shape))
    nb, nl, nk, nr = (math.prod(sizes[lab] for lab in g) for g in (batch, left, con, right))
    natural = batch + left + right
    return ContractLayout(
        a_only,
        b_only,
        a_kept,
        b_kept,
        sizes,
        nb,
        nl,
        nk,
        nr,
        tuple(a_kept.index(lab) for lab in batch + left + con),
        tuple(b_kept.index(lab) for lab in batch + con + right),
        tuple(sizes[lab] for lab in natural),
        tuple(natural.index(lab) for lab in out),
    )


def gemm_operands(g: ContractLayout, a, b, dtype):
    """The operands of one CONTRACT (NumPy or CuPy arrays) in ``dtype`` with their lone labels
    summed and their axes in GEMM order, (batch, left, con) and (batch, con, right): views
    where the transposes allow. The reference here and the CUDA kernels start from them."""
    if g.a_only:
        a = a.sum(axis=g.a_only, dtype=dtype)
    if g.b_only:
        b = b.sum(axis=g.b_only, dtype=dtype)
    return (
        a.astype(dtype, copy=False).transpose(g.perm_a),
        b.astype(dtype, copy=False).transpose(g.perm_b),
    )


def contract_ref(xs, attrs):
    """NumPy reference of one CONTRACT (constant folding, the reference interpreter): lone
    labels summed in the contraction's dtype, the operands grouped as A[batch, left, con] and
    B[batch, con, right], one matmul (a broadcast multiply when nothing is summed, as the CPU
    kernel does: BLAS shortcuts at k = 1 lose NaN and inf), the result in ``out``'s order.
    The tuned kernel is runtime/kernels/contract.py."""
    a, b = xs
    g = contract_layout(attrs, a.shape, b.shape)
    a, b = gemm_operands(g, a, b, np.result_type(a.dtype, b.dtype))
    a = a.reshape(g.nb, g.nl, g.nk)
    b = b.reshape(g.nb, g.nk, g.nr)
    c = np.multiply(a, b) if g.nk == 1 else np.matmul(a, b)
    return as_array(c.reshape(g.c_shape).transpose(g.perm_c))


# ---- cost ------------------------------------------------------------------------------------


def pairwise_madds(ta, tb, keep, sizes) -> int:
    """Multiply-adds of contracting two terms into ``keep``: the product of all label sizes."""
    return math.prod(sizes[lab] for lab in set(ta) | set(tb))


def network_madds(terms, out, sizes) -> int:
    """Multiply-adds of a network contracted left to right (what runs when the order search
    is off)."""
    if len(terms) == 1:
        return math.prod(sizes[lab] for lab in set(terms[0]))
    total = 0
    cur = tuple(terms[0])
    remaining = Counter(lab for t in terms[1:] for lab in t) + Counter(out)
    for t in terms[1:]:
        remaining -= Counter(t)
        keep = tuple(dict.fromkeys(lab for lab in (*cur, *t) if remaining[lab] or lab in out))
        total += pairwise_madds(cur, t, keep, sizes)
        cur = keep
    return total


def _einsum_cost(node) -> int:
    sizes: dict = {}
    for x, t in zip(node.inputs, node.attrs.terms):
        sizes.update(zip(t, x.shape))
    return network_madds(node.attrs.terms, node.attrs.out, sizes)


def _contract_cost(node) -> int:
    at = node.attrs
    sizes = dict(zip(at.a_labels, node.inputs[0].shape))
    sizes.update(zip(at.b_labels, node.inputs[1].shape))
    return math.prod(sizes.values())


def _matmul_cost(node) -> int:
    a = node.inputs[0]
    return node.size * (a.shape[-1] if a.ndim else 1)


def _tensordot_cost(node) -> int:
    a = node.inputs[0]
    return node.size * math.prod(a.shape[i] for i in node.attrs.axes_a)


def _trace_cost(node) -> int:
    return node.inputs[0].size


# ---- attribute checks and dump text ----------------------------------------------------------


def _check_einsum(ins, at, op):
    at = check_arity(at, EinsumAttrs, op)
    terms, out = at
    if type(terms) is not tuple or not ins:
        raise BadFormat("einsum needs a tuple of label tuples and at least one operand")
    for t in terms:
        check_ints(t, "einsum labels", 0)
    check_ints(out, "einsum output labels", 0)
    if len(set(out)) != len(out):
        raise BadFormat(f"einsum output labels {out} repeat a label")


def _check_tensordot(ins, at, op):
    at = check_arity(at, TensordotAttrs, op)
    axa = check_ints(at.axes_a, "axes of operand 0", 0, ins[0].ndim)
    axb = check_ints(at.axes_b, "axes of operand 1", 0, ins[1].ndim)
    if len(axa) != len(axb) or len(set(axa)) != len(axa) or len(set(axb)) != len(axb):
        raise BadFormat("tensordot axes must be two equally long lists of distinct axes")


def _check_contract(ins, at, op):
    at = check_arity(at, ContractAttrs, op)
    a, b, out, batch, left, con, right = (check_ints(x, "contract labels") for x in at)
    if len(a) != ins[0].ndim or len(b) != ins[1].ndim:  # the rule checks operand 0 only
        raise BadFormat(
            f"contract: labels {a} and {b} for operands of {ins[0].ndim} and {ins[1].ndim} axes"
        )
    for labels in (a, b, out, batch + left + con + right):
        if len(set(labels)) != len(labels):
            raise BadFormat(f"contract: labels {labels} repeat")
    sa, sb, so = set(a), set(b), set(out)
    a_kept = {x for x in a if x in sb or x in so}
    b_kept = {x for x in b if x in a_kept or x in so}
    ok = (
        set(batch) <= sa & sb & so
        and set(left) <= (sa - sb) & so
        and set(right) <= (sb - sa) & so
        and set(con) <= (sa & sb) - so
        and a_kept == set(batch + left + con)
        and b_kept == set(batch + con + right)
    )
    if not ok:
        raise BadFormat(
            f"contract: the GEMM grouping {at[3:]} does not fit labels {a}, {b} -> {out}"
        )


def einsum_text(inputs, output) -> str:
    """Integer labels as letters when they fit (``ab,bc->ac``), else as lists."""
    labels = sorted({x for t in (*inputs, output) for x in t})
    if len(labels) <= 52:
        letter = {lab: string.ascii_letters[i] for i, lab in enumerate(labels)}
        return (
            ",".join("".join(letter[x] for x in t) for t in inputs)
            + "->"
            + "".join(letter[x] for x in output)
        )
    return ",".join(str(list(t)) for t in inputs) + "->" + str(list(output))


# ---- differentiation -------------------------------------------------------------------------


def cj(x):
    return T.conj(x)


def _trace_vjp(node, y, xs, g):
    (x,) = xs
    offset, a1, a2 = node.attrs
    eye = T.eye(x.shape[a1], x.shape[a2], offset, dtype=g.dtype)
    nd = x.ndim
    rest = [i for i in range(nd) if i not in (a1, a2)]
    return (T.einsum([g, eye], [rest, [a1, a2]], list(range(nd))),)


def _einsum_vjp(node, y, xs, g):
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
        # labels of operand k found nowhere else: the cotangent is constant along them, so it
        # is the contraction without them broadcast along them (a view), not a contraction
        # with ones vectors (an outer product the size of x, and a network that passes would
        # merge into the next GEMM); a lone label repeated in x (a diagonal) keeps its ones
        lone = [lab for lab in unique if lab not in present]
        spread = [lab for lab in lone if t.count(lab) == 1]
        for lab in lone:
            if lab not in spread:
                args += [T.ones((sizes[lab],), dtype=g.dtype), [lab]]
        if not spread:
            cts.append(T.einsum(args[0::2], args[1::2], term_k))
            continue
        kept = [lab for lab in term_k if lab not in spread]
        only_g = len(args) == 2 and kept == list(out)  # the VJP of a sum: g itself, spread
        small = g if only_g else T.einsum(args[0::2], args[1::2], kept)
        ones_shape = tuple(1 if lab in spread else n for lab, n in zip(term_k, x.shape))
        cts.append(T.broadcast_to(T.reshape(small, ones_shape), x.shape))
    return tuple(cts)


def multilinear_jvp(node, y, xs, ts):
    """One term per operand with a tangent: the op with that operand replaced by it. Holds for
    einsum (repeated labels, hyper-indices and an operand used twice included), matmul,
    tensordot and CONTRACT; for a pairwise contraction tree (after the order pass) that is two
    pairwise contractions per tree node."""
    ins = [x.node for x in xs]
    terms = []
    for k, t in enumerate(ts):
        if t is None:
            continue
        replaced = ins[:k] + [t.node] + ins[k + 1 :]
        terms.append(Value(make_node(node.op, tuple(replaced), node.attrs)))
    return add_all(terms)


# ---- registration ----------------------------------------------------------------------------

register_op(
    Op.EINSUM,
    OpKind.CONTRACTION,
    _einsum_infer,
    lambda xs, at: as_array(einsum_ref(xs, at.terms, at.out)),
    attrs=EinsumAttrs,
    vjp=_einsum_vjp,
    jvp=multilinear_jvp,
    cost=_einsum_cost,
    check_attrs=_check_einsum,
    fmt=lambda at: f"[{einsum_text(at.terms, at.out)}]",
)
register_op(
    Op.MATMUL,
    OpKind.CONTRACTION,
    _matmul_infer,
    lambda xs, at: as_array(np.matmul(*xs)),
    2,
    jvp=multilinear_jvp,
    cost=_matmul_cost,
    check_attrs=check_no_attrs,
)
register_op(
    Op.TENSORDOT,
    OpKind.CONTRACTION,
    _tensordot_infer,
    lambda xs, at: np.tensordot(xs[0], xs[1], axes=(list(at.axes_a), list(at.axes_b))),
    2,
    attrs=TensordotAttrs,
    jvp=multilinear_jvp,
    cost=_tensordot_cost,
    check_attrs=_check_tensordot,
    fmt=lambda at: f"[axes={list(at.axes_a)},{list(at.axes_b)}]",
)
register_op(
    Op.TRACE,
    OpKind.CONTRACTION,
    _trace_infer,
    lambda xs, at: as_array(np.trace(xs[0], at.offset, at.axis1, at.axis2)),
    1,
    attrs=DiagonalAttrs,
    vjp=_trace_vjp,
    jvp=linear_jvp,
    cost=_trace_cost,
    check_attrs=check_diagonal,
    fmt=diagonal_text,
)
register_op(
    Op.CONTRACT,
    OpKind.CONTRACTION,
    _contract_infer,
    contract_ref,
    2,
    attrs=ContractAttrs,
    jvp=multilinear_jvp,
    cost=_contract_cost,
    check_attrs=_check_contract,
    fmt=lambda at: f"[{einsum_text((at.a_labels, at.b_labels), at.out)}]",
)


# ---- builders ---------------------------------------------------------------------------


def lift_operands(operands) -> tuple[list[Node], list[tuple[int, ...]]]:
    """einsum's operands as nodes, and their shapes (what ``parse`` needs)."""
    # Python scalars are operands like any other, as numpy.einsum makes them arrays first
    # (np.asarray(3) is int64): not weak scalars, so einsum("i,->i", int8, 3) is int64 there
    nodes = [lift(o, "einsum") for o in operands]
    return nodes, [nd.shape for nd in nodes]


def einsum_spec(nodes: Sequence[Node], spec: _einsum.EinsumSpec) -> Node:
    """The EINSUM node of lifted operands and a parsed specification (tenloom/einsum.py parses
    the string and sublist forms): labels renumbered, size-1 broadcast axes squeezed away."""
    nodes = list(nodes)
    in_labels, out, squeeze_axes, _ = _einsum.normalize(spec, [n.shape for n in nodes])
    for k, drop in enumerate(squeeze_axes):
        if drop:
            nodes[k] = squeeze(nodes[k], drop)
    return make_node(Op.EINSUM, tuple(nodes), (in_labels, out))


@builder(public=False)
def einsum(operands: Sequence[Any], terms: Sequence[Sequence], output: Sequence) -> Node:
    """Einstein summation of ``operands`` over hashable labels: ``terms[k]`` labels operand k's
    axes (a label repeated within one term takes a diagonal), ``output`` the result's."""
    nodes, _ = lift_operands(operands)
    spec = _einsum.EinsumSpec(tuple(tuple(t) for t in terms), tuple(output), "<einsum>")
    return einsum_spec(nodes, spec)


@builder
def trace(x, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Node:
    n = lift(x, "trace")
    a1, a2 = _axis_pair(n, axis1, axis2, "trace")
    return make_node(Op.TRACE, (n,), (_offset(offset, n, a1, a2, "trace"), a1, a2))


@builder
def matmul(a, b, semiring: str | None = None) -> Node:
    """``numpy.matmul``; with ``semiring=`` a semiring product (graph/ops/semiring.py)."""
    an, bn = lift(a, "matmul"), lift(b, "matmul")
    if semiring is not None:
        return _semiring_matmul(an, bn, semiring)
    return make_node(Op.MATMUL, (an, bn))


def _semiring_matmul(an: Node, bn: Node, semiring) -> Node:
    """matmul as a semiring network: batch axes broadcast first (each label has one size)."""
    from tenloom.graph.ops.movement import broadcast_to
    from tenloom.graph.ops.semiring import network

    shape = matmul_shape(an.shape, bn.shape)
    a2 = an.shape if an.ndim > 1 else (1,) + an.shape
    b2 = bn.shape if bn.ndim > 1 else bn.shape + (1,)
    batch = broadcast_shapes("matmul", (a2[:-2], b2[:-2]))
    if an.ndim > 1 and a2[:-2] != batch:
        an = broadcast_to(an, batch + a2[-2:])
    if bn.ndim > 1 and b2[:-2] != batch:
        bn = broadcast_to(bn, batch + b2[-2:])
    nb = len(batch)
    m, k, n = nb, nb + 1, nb + 2  # labels: batch 0..nb-1, rows, contracted, columns
    ta = (*range(nb), m, k) if an.ndim > 1 else (k,)
    tb = (*range(nb), k, n) if bn.ndim > 1 else (k,)
    out = (*range(nb), *((m,) if an.ndim > 1 else ()), *((n,) if bn.ndim > 1 else ()))
    res = network([an, bn], [ta, tb], out, semiring, "matmul")
    assert res.shape[: len(shape)] == shape
    return res


@builder
def tensordot(a, b, axes: Any = 2, semiring: str | None = None) -> Node:
    """``numpy.tensordot``; with ``semiring=`` a semiring product (graph/ops/semiring.py)."""
    an, bn = lift(a, "tensordot"), lift(b, "tensordot")
    if isinstance(axes, (float, np.floating)):  # NumPy: TypeError
        raise OptionTypeError(f"tensordot: axes {axes!r} is not an int or a pair")
    if isinstance(axes, (int, np.integer)):
        k = operator.index(axes)
        if k < 0 or k > an.ndim or k > bn.ndim:
            raise ShapeError(
                f"tensordot: cannot contract {k} axes of shapes {fmt_shape(an.shape)} and "
                f"{fmt_shape(bn.shape)}"
            )
        axa, axb = tuple(range(an.ndim - k, an.ndim)), tuple(range(k))
    else:
        try:
            xa, xb = axes
        except (TypeError, ValueError):
            raise ShapeError(f"tensordot: axes {axes!r} must be an int or a pair") from None
        xa = [xa] if not isinstance(xa, (list, tuple, range, np.ndarray)) else list(xa)
        xb = [xb] if not isinstance(xb, (list, tuple, range, np.ndarray)) else list(xb)
        xa = [int_arg(x, "tensordot", "axis") for x in xa]
        xb = [int_arg(x, "tensordot", "axis") for x in xb]
        if len(xa) != len(xb):
            raise ShapeError(f"tensordot: axes {axes!r} pair lists of different lengths")
        axa = tuple(normalize_axes([a], an.ndim, "tensordot", an.shape)[0] for a in xa)
        axb = tuple(normalize_axes([b], bn.ndim, "tensordot", bn.shape)[0] for b in xb)
        if len(set(axa)) != len(axa) or len(set(axb)) != len(axb):
            raise ShapeError(f"tensordot: repeated axis in {axes!r}")
    if semiring is not None:
        from tenloom.graph.ops.semiring import network

        for x, y in zip(axa, axb):
            if an.shape[x] != bn.shape[y]:
                _tensordot_infer((an, bn), (axa, axb))  # raises the ShapeError naming them
        ta = tuple(range(an.ndim))
        fresh = iter(range(an.ndim, an.ndim + bn.ndim))
        tb = tuple(ta[axa[axb.index(i)]] if i in axb else next(fresh) for i in range(bn.ndim))
        out = tuple(lab for i, lab in enumerate(ta) if i not in axa) + tuple(
            lab for i, lab in enumerate(tb) if i not in axb
        )
        return network([an, bn], [ta, tb], out, semiring, "tensordot")
    return make_node(Op.TENSORDOT, (an, bn), (axa, axb))


@builder
def dot(a, b) -> Node:
    """``numpy.dot``: a product for scalars, matmul up to 2-D, tensordot over (-1, -2) beyond."""
    an, bn = lift(a, "dot"), lift(b, "dot")
    if an.ndim == 0 or bn.ndim == 0:
        return multiply(an, bn)
    if an.ndim <= 2 and bn.ndim <= 2:
        return matmul(an, bn)
    return tensordot(an, bn, ([an.ndim - 1], [builtins.max(bn.ndim - 2, 0)]))


@builder
def outer(a, b) -> Node:
    return einsum([reshape(a, (-1,)), reshape(b, (-1,))], [[0], [1]], [0, 1])


@builder
def inner(a, b) -> Node:
    an, bn = lift(a, "inner"), lift(b, "inner")
    if an.ndim == 0 or bn.ndim == 0:
        return multiply(an, bn)
    return tensordot(an, bn, ([an.ndim - 1], [bn.ndim - 1]))
