"""Values-only decompositions: SVDVALS (the singular values) and EIGVALSH (the eigenvalues of a
Hermitian matrix), for ``svdvals``, ``svd(compute_uv=False)``, ``eigvalsh`` and the norms.

LAPACK computes the values alone two to three times faster than with the vectors (gesdd with
jobz='N', syevd with jobz='N'), so these are their own ops rather than views of SVD/EIGH.
Their derivatives need the vectors: the rules build the full decomposition of the same operand
in the derivative graph (ds = Re diag(U^H dA V), dw = Re diag(V^H dA V), and their adjoints),
so a forward pass pays the values alone and a gradient pays the full decomposition once.
When a graph has both the values-only and the full decomposition of one operand, the ``cse``
pass (passes/cse.py) replaces the values-only node with a view of the full one
(``values_of_full``), so nothing is decomposed twice.

The values are real, in the operand's real dtype (float32 for complex64): ascending for
EIGVALSH, descending for SVDVALS, as NumPy. EIGVALSH reads the ``UPLO`` triangle only.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from tenloom.graph.errors import ShapeError, fmt_shape
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.checks import BadFormat, check_arity, check_no_attrs, short
from tenloom.graph.ops.decompositions import DEFAULT_EPS, eigh, svd
from tenloom.graph.ops.linalg import _batch, _hermitian_part, _result_dtype, check_square, mH
from tenloom.graph.ops.registry import Op, OpKind, register_op
from tenloom.graph.value import V as T
from tenloom.graph.value import Value

Op.define_all("svdvals eigvalsh")


class EigvalshAttrs(NamedTuple):
    uplo: str  # "L" or "U": the triangle LAPACK reads


def _real_of(op: Op, dtype) -> np.dtype:
    return np.empty(0, _result_dtype(op, dtype)).real.dtype


def _svdvals_infer(inputs, attrs):
    (x,) = inputs
    if x.ndim < 2:
        raise ShapeError(
            f"svdvals: operand 0 of shape {fmt_shape(x.shape)} has {x.ndim} axes; it must be "
            "a (stack of) matrices, with at least 2 axes"
        )
    return x.shape[:-2] + (min(x.shape[-2:]),), _real_of(Op.SVD, x.dtype)


def _svdvals_ref(xs, at):
    try:
        return np.linalg.svd(xs[0], compute_uv=False)
    except np.linalg.LinAlgError:  # gesdd did not converge: the full SVD has the fallback
        from tenloom.graph.ops.decompositions import svd_arrays

        return svd_arrays(xs[0], False)[1]


def _eigvalsh_infer(inputs, attrs):
    (x,) = inputs
    check_square("eigvalsh", x)
    return x.shape[:-1], _real_of(Op.EIGH, x.dtype)


def _eigvalsh_ref(xs, at):
    return np.linalg.eigvalsh(xs[0], UPLO=at.uplo)


def _svdvals_cost(node) -> int:
    m, n = node.inputs[0].shape[-2:]
    return _batch(node.inputs[0].shape) * 4 * m * n * min(m, n)


def _eigvalsh_cost(node) -> int:
    x = node.inputs[0]
    return _batch(x.shape) * 4 * x.shape[-1] ** 3


def _check_eigvalsh(ins, at, op):
    at = check_arity(at, EigvalshAttrs, op)
    if at.uplo not in ("L", "U"):
        raise BadFormat(f"eigvalsh: UPLO must be 'L' or 'U', got {short(at.uplo)}")


def _diag(x: Value) -> Value:
    return T.diagonal(x, 0, x.ndim - 2, x.ndim - 1)


def _full_svd(x: Value):
    u, _, vh = (Value(n) for n in svd(x, False, True, eps=DEFAULT_EPS))
    return u, mH(vh)


def _svdvals_jvp(node, y, xs, ts):
    u, v = _full_svd(xs[0])
    return T.real(_diag(mH(u) @ ts[0] @ v))


def _svdvals_vjp(node, y, xs, g):
    u, v = _full_svd(xs[0])
    return ((u * T.expand_dims(T.astype(g, u.dtype), -2)) @ mH(v),)


def _uplo_masks(n: int, dtype, uplo: str):
    rd = np.empty(0, dtype).real.dtype
    lower = np.tril(np.ones((n, n), rd), -1)
    return T.asarray(lower if uplo == "L" else lower.T.copy()), T.asarray(np.eye(n, dtype=rd))


def _eigvalsh_jvp(node, y, xs, ts):
    (x,), (t,) = xs, ts
    v = Value(eigh(x, node.attrs.uplo, eps=DEFAULT_EPS)[1])
    mask, eye = _uplo_masks(x.shape[-1], v.dtype, node.attrs.uplo)
    return T.real(_diag(mH(v) @ _hermitian_part(t, mask, eye) @ v))


def _eigvalsh_vjp(node, y, xs, g):
    (x,) = xs
    v = Value(eigh(x, node.attrs.uplo, eps=DEFAULT_EPS)[1])
    mask, eye = _uplo_masks(x.shape[-1], v.dtype, node.attrs.uplo)
    gh = (v * T.expand_dims(T.astype(g, v.dtype), -2)) @ mH(v)
    return ((gh + mH(gh)) * mask + T.real(gh) * eye,)


register_op(
    Op.SVDVALS,
    OpKind.LINALG,
    _svdvals_infer,
    _svdvals_ref,
    1,
    vjp=_svdvals_vjp,
    jvp=_svdvals_jvp,
    cost=_svdvals_cost,
    check_attrs=check_no_attrs,
)
register_op(
    Op.EIGVALSH,
    OpKind.LINALG,
    _eigvalsh_infer,
    _eigvalsh_ref,
    1,
    attrs=EigvalshAttrs,
    vjp=_eigvalsh_vjp,
    jvp=_eigvalsh_jvp,
    cost=_eigvalsh_cost,
    check_attrs=_check_eigvalsh,
    fmt=lambda at: f"[UPLO={at.uplo}]",
)


def svdvals_node(n: Node) -> Node:
    """The SVDVALS node of a lifted operand (the builders of decompositions.py call this)."""
    return make_node(Op.SVDVALS, (n,))


def eigvalsh_node(n: Node, uplo: str) -> Node:
    return make_node(Op.EIGVALSH, (n,), (uplo,))


def values_of_full(node: Node, full: Node) -> Node | None:
    """``node`` (SVDVALS or EIGVALSH) as a view of ``full``, the SVD or EIGH node of the same
    operand (same UPLO for EIGH), else None: what the cse pass substitutes."""
    from tenloom.graph.ops.decompositions import _eigh_views, _svd_views

    x = node.inputs[0]
    if full.inputs[0] is not x:
        return None
    if node.op is Op.SVDVALS and full.op is Op.SVD:
        return _svd_views(full, x.shape, full.attrs.full)[1]
    if node.op is Op.EIGVALSH and full.op is Op.EIGH and full.attrs.uplo == node.attrs.uplo:
        return _eigh_views(full, x.shape)[0]
    return None
