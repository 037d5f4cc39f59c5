"""The general (non-Hermitian) eigendecomposition of ``tl.linalg``: ``eig`` and ``eigvals``,
batched over leading axes with ``numpy.linalg.eig``'s values.

One node, EIG, whose value packs the eigenvalues w (..., M) and the eigenvectors V (..., M, M)
into one flat array, as EIGH does (graph/ops/decompositions.py); the builders return views of
it. The results are always complex, as in the array API and PyTorch (NumPy returns real arrays
when every eigenvalue happens to be real; the values are the same): complex64 for float32 and
complex64 inputs, complex128 otherwise (integers promoted to float64 first). The eigenvectors
are LAPACK's: the columns of V, each of unit 2-norm, in LAPACK's order and phases.

Derivatives, for a diagonalizable A = V diag(w) V^-1 (PyTorch's linalg_eig rules): with
P = V^-1 dA V (the perturbation in the eigenbasis),

    dw = diag(P),    dV = V X - V diag(Re diag(V^H V X)),    X = F * P,

F_ij = 1 / (w_j - w_i) off the diagonal and 0 on it. V X is the first-order change of the
eigenvectors when each keeps its component along itself (X_ii = 0); the second term is the gauge:
it removes the real part of v_i^H dv_i, so that the columns keep their unit norm, and leaves
the imaginary part (the phase drift) as X gives it. Eigenvectors are defined up to a phase
(LAPACK fixes it by making the largest component real, a choice this rule does not follow), so
only gauge-invariant functions of V differentiate against finite differences: anything of w,
V f(w) V^-1, |V_ij|^2 (the norm is fixed, the phase drops out); and, for a real matrix with real
simple eigenvalues, V itself (its columns are real and their sign is locally constant).

Reverse mode (the adjoint of the map above under Re<., .>; VJP rules compute J^H g):

    gA = V^-H (diag(gw) + conj(F) * (V^H gV - V^H V diag(Re diag(V^H gV)))) V^H,

and for a real A its real part (the real input's cotangent). Near-degenerate eigenvalues are
handled as for eigh: 1 / d_ij, d_ij = w_j - w_i complex, is broadened to
conj(d_ij) / (|d_ij|^2 + eps) (``eps``, default 1e-12, in units of the eigenvalues squared), so
a pair closer than about sqrt(eps) contributes nothing through F and gradients stay finite;
that is exact when the loss does not depend on how such a pair mixes (functions of the
eigenvalues, eigenvectors of simple eigenvalues). ``eps=0`` gives the unbroadened rule. A
defective matrix (not diagonalizable: V singular) has no derivative; the rules' solves with V
then fail or give inf, as PyTorch's do.

The reference calls ``numpy.linalg.eig``, which on CUDA dispatches to ``cupy.linalg.eig``
(CuPy 14 and later, cuSOLVER's geev: values, residuals and gradients matched the CPU's on an
H200; older CuPy has no general eigensolver). OpenCL has no kernel for it (a DeviceError naming
``eig``).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from tenloom.graph.errors import OptionError, OptionTypeError
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.checks import BadFormat, check_arity, short
from tenloom.graph.ops.decompositions import DEFAULT_EPS, _batch_of, _pack
from tenloom.graph.ops.leaf import lift
from tenloom.graph.ops.linalg import _PROBES, _batch, _result_dtype, check_square, mH
from tenloom.graph.ops.movement import getitem, reshape
from tenloom.graph.ops.registry import Op, OpKind, builder, register_op
from tenloom.graph.value import V as T
from tenloom.graph.value import Value

# the op of this family, defined before anything refers to it
Op.define_all("eig")

# always complex: NumPy's eigenvalue dtype promoted to complex (float32 -> complex64,
# integers -> float64 -> complex128); float16 raises there, which _result_dtype reports
_PROBES[Op.EIG] = lambda dt: np.result_type(
    np.linalg.eigvals(np.eye(1, dtype=dt)).dtype, np.complex64
)


class EigAttrs(NamedTuple):
    eps: float  # the Lorentzian broadening of 1 / (w_j - w_i) in the derivatives (>= 0)


def _eig_infer(inputs, attrs):
    (x,) = inputs
    check_square("eig", x)
    n = x.shape[-1]
    return (math.prod(x.shape[:-2]) * (n + n * n),), _result_dtype(Op.EIG, x.dtype)


def _eig_ref(xs, at):
    w, v = np.linalg.eig(xs[0])
    dt = np.result_type(v.dtype, np.complex64)
    return np.concatenate([w.reshape(-1).astype(dt), v.reshape(-1).astype(dt)])


def _eig_cost(node) -> int:
    # LAPACK's geev with right eigenvectors: about 26 n^3 (Hessenberg, QR sweeps, back-solves)
    x = node.inputs[0]
    return _batch(x.shape) * 26 * x.shape[-1] ** 3


def _check_eig(ins, at, op):
    at = check_arity(at, EigAttrs, op)
    if type(at.eps) is not float or not at.eps >= 0 or at.eps == math.inf:
        raise BadFormat(f"eig: eps must be a finite float >= 0, got {short(at.eps)}")


def _eig_views(p, shape):
    """(w, V) of the packed EIG value ``p`` of an operand of ``shape``, as lazy views; works on
    nodes and on Values alike."""
    batch, n = _batch_of(shape), shape[-1]
    cut = math.prod(batch) * n
    return reshape(getitem(p, slice(0, cut)), batch + (n,)), reshape(
        getitem(p, slice(cut, None)), batch + (n, n)
    )


def _broadened_complex(w: Value, eps: float) -> Value:
    """F_ij = conj(d) / (|d|^2 + eps), d = w_j - w_i, 0 on the diagonal: 1 / (w_j - w_i)
    broadened by a Lorentzian of width sqrt(eps)."""
    n = w.shape[-1]
    d = T.expand_dims(w, -2) - T.expand_dims(w, -1)
    eye = T.eye(n, dtype=np.empty(0, w.dtype).real.dtype)
    # (the diagonal masked to 0, as decompositions._broadened, for second derivatives)
    return T.conj(d) / (T.real(d * T.conj(d)) + (eye + eps)) * (1 - eye)


def _diag(x: Value) -> Value:
    return T.diagonal(x, 0, x.ndim - 2, x.ndim - 1)


def _parts(node, y, x):
    w, v = (Value(n) for n in _eig_views(y.node, x.shape))
    return w, v, _broadened_complex(w, node.attrs.eps)


def _eig_jvp(node, y, xs, ts):
    (x,), (t,) = xs, ts
    w, v, f = _parts(node, y, x)
    p = T.solve(v, T.astype(t, v.dtype) @ v)  # V^-1 dA V
    vx = v @ (f * p)
    gauge = T.real(_diag(mH(v) @ vx))  # Re(v_i^H dv_i), removed to keep |v_i| = 1
    tv = vx - v * T.expand_dims(gauge, -2)
    return _pack(_diag(p), tv, dtype=y.dtype)


def _eig_vjp(node, y, xs, g):
    (x,) = xs
    w, v, f = _parts(node, y, x)
    gw, gv = (Value(n) for n in _eig_views(g.node, x.shape))
    vh = mH(v)
    vhgv = vh @ gv
    c = T.real(_diag(vhgv))
    inner = vhgv - vh @ (v * T.expand_dims(c, -2))  # V^H gV - V^H V diag(c)
    eye = T.eye(x.shape[-1], dtype=np.empty(0, y.dtype).real.dtype)
    m = T.conj(f) * inner + T.expand_dims(gw, -1) * eye
    ga = T.solve(vh, m @ vh)  # V^-H M V^H
    return (T.real(ga) if x.dtype.kind != "c" else ga,)


register_op(
    Op.EIG,
    OpKind.LINALG,
    _eig_infer,
    _eig_ref,
    1,
    attrs=EigAttrs,
    vjp=_eig_vjp,
    jvp=_eig_jvp,
    cost=_eig_cost,
    check_attrs=_check_eig,
    fmt=lambda at: f"[eps={at.eps!r}]",
)


# ---- builders (tenloom/linalg.py exposes them as tl.linalg.*) --------------------------------


@builder(public=False)
def eig(a: Any, *, eps: float = DEFAULT_EPS) -> tuple[Node, Node]:
    """``(eigenvalues, eigenvectors)`` of each square matrix of ``a`` (..., M, M), as
    ``numpy.linalg.eig``: eigenvalues (..., M) and eigenvectors, the columns of (..., M, M) of
    unit 2-norm, in LAPACK's order and phases; always complex (complex64 for float32 and
    complex64 inputs, complex128 otherwise). ``eps`` (>= 0) broadens 1 / (w_j - w_i) in the
    derivatives to conj(w_j - w_i) / (|w_j - w_i|^2 + eps); see graph/ops/eig.py."""
    n = lift(a, "eig")
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)):
        raise OptionTypeError(f"eig: eps {eps!r} is not a number")
    if not 0 <= float(eps) < math.inf:
        raise OptionError(f"eig: eps must be finite and >= 0, got {eps!r}")
    return _eig_views(make_node(Op.EIG, (n,), (float(eps),)), n.shape)


@builder(public=False)
def eigvals(a: Any, *, eps: float = DEFAULT_EPS) -> Node:
    """The eigenvalues of each square matrix of ``a``, as ``numpy.linalg.eigvals`` (always
    complex): the first result of :func:`eig` (one EIG node serves both)."""
    return eig(a, eps=eps)[0]
