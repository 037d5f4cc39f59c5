"""Multilinear ops: einsum on integer labels, matmul, tensordot and trace.

EINSUM attrs = (in_labels: tuple of label tuples, out_labels), labels normalized to 0..k-1 and
every label of one size in all operands (the front end squeezes size-1 broadcast axes away).
MATMUL, TENSORDOT and TRACE keep what the user wrote; the canonicalize pass rewrites them to
EINSUM so the order search sees one network.
"""

from __future__ import annotations

import numpy as np
from tenloom.graph.dtypes import _SUPPORTED_SET
from tenloom.graph.einsum import einsum_ref
from tenloom.graph.errors import DTypeError, ShapeError, fmt_shape
from tenloom.graph.ops.elementwise import broadcast_shapes
from tenloom.graph.ops.registry import Op, OpKind, as_array, register_op


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
    return tuple(sizes[lab] for lab in attrs[1]), result_dtype("einsum", inputs)


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
    from tenloom.graph.ops.movement import diagonal_shape

    (x,), (offset, axis1, axis2) = inputs, attrs
    dt = _TRACE_DTYPES.get(x.dtype)
    if dt is None:
        dt = _TRACE_DTYPES[x.dtype] = np.trace(np.ones((1, 1), x.dtype)).dtype
    return diagonal_shape(x.shape, offset, axis1, axis2)[:-1], dt


register_op(
    Op.EINSUM,
    OpKind.CONTRACTION,
    _einsum_infer,
    lambda xs, at: as_array(einsum_ref(xs, at[0], at[1])),
)
register_op(
    Op.MATMUL, OpKind.CONTRACTION, _matmul_infer, lambda xs, at: as_array(np.matmul(*xs)), 2
)
register_op(
    Op.TENSORDOT,
    OpKind.CONTRACTION,
    _tensordot_infer,
    lambda xs, at: np.tensordot(xs[0], xs[1], axes=(list(at[0]), list(at[1]))),
    2,
)
register_op(
    Op.TRACE,
    OpKind.CONTRACTION,
    _trace_infer,
    lambda xs, at: as_array(np.trace(xs[0], at[0], at[1], at[2])),
    1,
)


# ---- CONTRACT: one pairwise contraction as a (batched) GEMM -----------------------------------
# attrs = (a_labels, b_labels, out_labels, batch, left, contracted, right): the operands' labels
# in their axis order, the output's, and the GEMM grouping the permutation pass chose. The
# operands are viewed as A[batch, left, contracted] and B[batch, contracted, right]; when each
# group lies contiguously (and in the same order on both sides) in an operand's memory, the
# transpose + reshape below are views and numpy.matmul runs on them without a copy.


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


def contract_ref(xs, attrs):
    """NumPy reference of one CONTRACT (constant folding, the reference interpreter): lone
    labels summed in the contraction's dtype, the operands grouped as A[batch, left, con] and
    B[batch, con, right], one matmul (a broadcast multiply when nothing is summed, as the CPU
    kernel does: BLAS shortcuts at k = 1 lose NaN and inf), the result in ``out``'s order.
    The tuned kernel is runtime/kernels/contract.py."""
    a, b = xs
    a_labels, b_labels, out, batch, left, con, right = attrs
    rdt = np.result_type(a.dtype, b.dtype)
    keep_a = set(b_labels) | set(out)
    keep_b = set(a_labels) | set(out)
    a_only = tuple(i for i, lab in enumerate(a_labels) if lab not in keep_a)
    b_only = tuple(i for i, lab in enumerate(b_labels) if lab not in keep_b)
    if a_only:
        a = a.sum(axis=a_only, dtype=rdt)
    if b_only:
        b = b.sum(axis=b_only, dtype=rdt)
    a_kept = tuple(lab for i, lab in enumerate(a_labels) if i not in a_only)
    b_kept = tuple(lab for i, lab in enumerate(b_labels) if i not in b_only)
    sizes = dict(zip(a_kept, a.shape))
    sizes.update(zip(b_kept, b.shape))

    def size(labels):
        n = 1
        for lab in labels:
            n *= sizes[lab]
        return n

    nb, nl, nk, nr = size(batch), size(left), size(con), size(right)
    a = a.transpose([a_kept.index(lab) for lab in batch + left + con]).reshape(nb, nl, nk)
    b = b.transpose([b_kept.index(lab) for lab in batch + con + right]).reshape(nb, nk, nr)
    c = np.multiply(a, b) if nk == 1 else np.matmul(a, b)
    natural = batch + left + right
    c = c.reshape(tuple(sizes[lab] for lab in natural))
    return as_array(c.transpose([natural.index(lab) for lab in out]))


register_op(Op.CONTRACT, OpKind.CONTRACTION, _contract_infer, contract_ref, 2)
