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
from tenloom.graph.ops import Op, OpKind, as_array, register_op
from tenloom.graph.ops_elementwise import broadcast_shapes


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
    from tenloom.graph.ops_movement import diagonal_shape

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


COPY_ORDER_MIN = 4096  # elements: smaller operands are copied by reshape, in C order


def _copy_order(x, split: tuple[int, int]) -> tuple[int, ...] | None:
    """For an operand ``x`` laid out (batch, first group, second group) whose groups are split
    at ``split`` = (batch axes, first group's axes): the axis order (batch, second, first) when
    copying into it reads ``x`` with a shorter stride in the innermost loop (the copy's last
    axis), else None. The GEMM then reads the copy as a transposed matrix, which BLAS takes
    without a further copy; a transposing copy whose inner loop strides across memory runs
    several times slower."""
    nb, n1 = split
    big = [i for i in range(x.ndim) if x.shape[i] != 1]
    first = [i for i in big if nb <= i < nb + n1]
    second = [i for i in big if i >= nb + n1]
    if not first or not second or abs(x.strides[first[-1]]) >= abs(x.strides[second[-1]]):
        return None
    return (*range(nb), *range(nb + n1, x.ndim), *range(nb, nb + n1))


def _view_as(x, shape: tuple) -> np.ndarray:
    """``x`` reshaped without copying; ValueError (AttributeError before NumPy 2.1, which has
    no ``copy=``) when its memory does not allow it."""
    try:
        return x.reshape(shape, copy=False)
    except TypeError:
        v = x.view()
        v.shape = shape
        return v


def _as_matrix(x, shape: tuple, split: tuple[int, int], take):
    """x reshaped to the matrix (or stack of matrices) ``shape``: a view when its memory
    allows, else a copy into an array from ``take(n, dtype)`` (returned second, for the caller
    to hand back after the GEMM), in the order ``_copy_order`` picks. Arrays of other
    libraries (CuPy) are reshaped by their own library."""
    if not isinstance(x, np.ndarray):
        return x.reshape(shape), None
    try:
        return _view_as(x, shape), None
    except (ValueError, AttributeError):  # groups not contiguous in memory: one transposing copy
        buf = take(x.size, x.dtype)
        perm = _copy_order(x, split)
        if perm is None:
            np.copyto(buf.reshape(x.shape), x)
            return buf.reshape(shape), buf
        xt = x.transpose(perm)
        np.copyto(buf.reshape(xt.shape), xt)
        return buf.reshape(shape[:-2] + (shape[-1], shape[-2])).swapaxes(-1, -2), buf


def _empty(n: int, dtype) -> np.ndarray:
    return np.empty(n, dtype)


def contract_kernel(a_shape: tuple, b_shape: tuple, attrs: tuple, buffers=None, dtype=None):
    """A function ``(a, b) -> c`` for one CONTRACT, with every permutation and shape worked out
    once here rather than on each call. With ``buffers`` (an object with ``take(n, dtype)``
    and ``give(buf)``, see runtime/buffers.py) and the result's ``dtype``, the result and any
    operand copy are written into buffers taken from it rather than freshly allocated arrays."""
    a_labels, b_labels, out, batch, left, con, right = attrs
    a_only = tuple(i for i, lab in enumerate(a_labels) if lab not in b_labels and lab not in out)
    a_kept = tuple(lab for i, lab in enumerate(a_labels) if i not in a_only)
    b_only = tuple(i for i, lab in enumerate(b_labels) if lab not in a_kept and lab not in out)
    b_kept = tuple(lab for i, lab in enumerate(b_labels) if i not in b_only)
    sizes = dict(zip(a_labels, a_shape))
    sizes.update(zip(b_labels, b_shape))

    def prod(labels):
        n = 1
        for lab in labels:
            n *= sizes[lab]
        return n

    nb, nl, nk, nr = prod(batch), prod(left), prod(con), prod(right)
    pa = tuple(a_kept.index(lab) for lab in batch + left + con)
    pb = tuple(b_kept.index(lab) for lab in batch + con + right)
    pa = None if pa == tuple(range(len(pa))) else pa
    pb = None if pb == tuple(range(len(pb))) else pb
    natural = batch + left + right
    c_shape = tuple(sizes[lab] for lab in natural)
    pc = tuple(natural.index(lab) for lab in out)
    pc = None if pc == tuple(range(len(pc))) else pc
    # plain GEMM (np.dot takes transposed views straight to BLAS) or batched (np.matmul)
    gemm = np.dot if nb == 1 else np.matmul
    a_mat, b_mat = ((nl, nk), (nk, nr)) if nb == 1 else ((nb, nl, nk), (nb, nk, nr))
    c_mat = a_mat[:-1] + (nr,)

    def grouped(a, b):
        """The operands with lone labels summed and axes in GEMM order (views)."""
        if a_only:  # keep the dtype, as einsum does (NumPy's sum would promote ints)
            a = a.sum(axis=a_only, dtype=a.dtype)
        if b_only:
            b = b.sum(axis=b_only, dtype=b.dtype)
        return (a if pa is None else a.transpose(pa)), (b if pb is None else b.transpose(pb))

    split_a, split_b = (len(batch), len(left)), (len(batch), len(con))
    # small operands: NumPy's own reshape (a copy in C order where needed) costs least
    big_a, big_b = nb * nl * nk >= COPY_ORDER_MIN, nb * nk * nr >= COPY_ORDER_MIN

    def run(a, b):
        a, b = grouped(a, b)
        a = _as_matrix(a, a_mat, split_a, _empty)[0] if big_a else a.reshape(a_mat)
        b = _as_matrix(b, b_mat, split_b, _empty)[0] if big_b else b.reshape(b_mat)
        c = gemm(a, b).reshape(c_shape)
        return c if pc is None else c.transpose(pc)

    if buffers is None or dtype is None:
        return run
    take, give = buffers.take, buffers.give
    dt, n_out = np.dtype(dtype), nb * nl * nr

    def run_into(a, b):
        a, b = grouped(a, b)
        c = take(n_out, dt)
        a2, ta = _as_matrix(a, a_mat, split_a, take) if big_a else (a.reshape(a_mat), None)
        b2, tb = _as_matrix(b, b_mat, split_b, take) if big_b else (b.reshape(b_mat), None)
        gemm(a2, b2, out=c.reshape(c_mat))
        if ta is not None:
            give(ta)
        if tb is not None:
            give(tb)
        c = c.reshape(c_shape)
        return c if pc is None else c.transpose(pc)

    return run_into


def contract_ref(xs, attrs):
    a, b = xs
    return contract_kernel(a.shape, b.shape, attrs)(a, b)


register_op(Op.CONTRACT, OpKind.CONTRACTION, _contract_infer, contract_ref, 2)
