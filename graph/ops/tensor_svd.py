"""``tensor_svd``: the truncated SVD of a tensor split into a left and a right group of axes,
the decomposition tensor-network codes reach for first (MPS/DMRG/TEBD bond splits, PEPS
updates): one decomposition node of the matricized tensor and ordinary ops (comparisons,
products) on its views. A rank below K = min(M, N) makes it a TRUNCATED_SVD node (defined
here): the first r singular triplets and the squared sum of the other singular values, so a
kernel may compute only those (the Gram route's head on CUDA and the CPU, checked as the full
SVD's, runtime/kernels/gram_svd.py), else the reduced SVD node (graph/ops/decompositions.py).

**Shapes.** A lazy graph needs every shape at trace time, but a rank chosen by a cutoff depends
on the values. The rule (reused for every data-dependent shape, see docs/linalg.md):

- with ``max_rank`` given, the rank is ``r = min(max_rank, K)`` (K = min(M, N)), a bound fixed
  at trace time: a ``cutoff`` that cuts more zeroes the extra singular values and their
  vectors (the results keep r columns, zero-padded), inside the graph; the largest singular
  value is always kept;
- without ``max_rank`` and with ``cutoff == 0``, r = K;
- without ``max_rank`` and with ``cutoff > 0``, the rank depends on the values: the builder
  here refuses (``DataDependentShapeError``), and the front end (``tl.linalg.tensor_svd``)
  evaluates this graph's own kept count (``return_rank`` at the bound K, so the comparison is
  the graph's, in its dtype) and builds the graph with that rank as the bound. A traced
  function (placeholders) has no values: there the front end raises the same error, asking
  for ``max_rank``.

**Cutoffs** (``cutoff_mode``): ``"rel"`` keeps s_i > cutoff * s_0 (quimb's default), ``"abs"``
keeps s_i > cutoff, ``"discarded"`` drops the smallest singular values as long as their
squared sum stays <= cutoff * sum(s^2) (the truncation error of ITensor and TeNPy).

**Derivatives.** TRUNCATED_SVD's rules go through the reduced SVD of the same operand (its
results are the first r of that one's, and rest a sum of its s_i^2), built in the derivative
graph; the cse pass then makes the truncated node a view of it (``head_of_full``), so a
gradient decomposes the matrix once, fully. Reverse and forward mode are exact for the
truncated factors, the truncation term included: the coupling of kept and discarded singular
pairs goes through F_ij = 1 / (s_j^2 - s_i^2) of the SVD rule (broadened by ``eps``), and the
cotangent of a discarded pair is zero. A kept and a discarded singular value that coincide
make the truncation itself ambiguous; ``eps`` keeps the derivatives finite there.

**Discarded weight.** The fourth (or third) result is sum(s_i^2) over the discarded singular
values (the cut ones and those the cutoff zeroed), a 0-d real Tensor, differentiable.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np
from tenloom.graph.errors import (
    DataDependentShapeError,
    OptionError,
    OptionTypeError,
    ShapeError,
    fmt_shape,
)
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.args import normalize_axes
from tenloom.graph.ops.checks import BadFormat, check_arity, short
from tenloom.graph.ops.decompositions import (
    DEFAULT_EPS,
    _pack,
    _svd_jvp,
    _svd_views,
    _svd_vjp,
    check_eps,
    svd,
    svd_arrays,
)
from tenloom.graph.ops.elementwise import real
from tenloom.graph.ops.leaf import lift
from tenloom.graph.ops.linalg import _batch, _result_dtype
from tenloom.graph.ops.movement import getitem, reshape
from tenloom.graph.ops.registry import Op, OpKind, builder, register_op
from tenloom.graph.value import V as T
from tenloom.graph.value import Value

CUTOFF_MODES = ("rel", "abs", "discarded")
ABSORB = (None, "left", "right", "both")

Op.define_all("truncated_svd")


class TruncatedSvdAttrs(NamedTuple):
    eps: float  # the derivatives' broadening, as SvdAttrs.eps
    rank: int  # r >= 1: the leading singular triplets kept (at most K)


def _truncated_infer(inputs, attrs):
    (x,) = inputs
    if x.ndim < 2:
        raise ShapeError(
            f"truncated_svd: operand 0 of shape {fmt_shape(x.shape)} has {x.ndim} axes; it "
            "must be a (stack of) matrices, with at least 2 axes"
        )
    m, n = x.shape[-2:]
    r = attrs[1]
    if type(r) is not int or r < 1:
        raise OptionError(f"truncated_svd: rank must be an int >= 1, got {short(r)}")
    if type(attrs[0]) is not float or not 0 <= attrs[0] < math.inf:
        raise OptionError(f"truncated_svd: eps must be a finite float >= 0, got {short(attrs[0])}")
    if r > min(m, n):
        raise ShapeError(
            f"truncated_svd: rank {r} is above min(M, N) = {min(m, n)} of operand 0 of shape "
            f"{fmt_shape(x.shape)}"
        )
    size = math.prod(x.shape[:-2]) * (m * r + r + r * n + 1)
    return (size,), _result_dtype(Op.SVD, x.dtype)


def truncated_arrays(x, r: int):
    """``(U_r, s_r, Vh_r, rest)`` of an array of matrices from its reduced SVD
    (``svd_arrays``): the first r singular triplets and rest = sum(s_i^2, i >= r) per matrix."""
    return cut_factors(svd_arrays(x, False), r)


def cut_factors(factors, rank: int | None):
    """Reduced-SVD ``factors`` (u, s, vh: arrays of matrices, NumPy's or CuPy's) as they are,
    or with ``rank`` their first ``rank`` triplets and the squared sum of the other singular
    values."""
    if rank is None:
        return factors
    u, s, vh = factors
    tail = s[..., rank:]
    return u[..., :rank], s[..., :rank], vh[..., :rank, :], (tail * tail).sum(axis=-1)


def pack_truncated(xp, u, s, vh, rest):
    """The node's layout: every U_r, then every s_r, every Vh_r and every rest, flat, in U's
    dtype (as the SVD's reference packs its factors)."""
    rest = rest if hasattr(rest, "reshape") else xp.asarray(rest)  # (a float from a route)
    return xp.concatenate(
        [u.reshape(-1), s.reshape(-1).astype(u.dtype), vh.reshape(-1)]
        + [rest.reshape(-1).astype(u.dtype)]
    )


def _truncated_ref(xs, at):
    return pack_truncated(np, *truncated_arrays(xs[0], at.rank))


def _truncated_cost(node) -> int:
    m, n = node.inputs[0].shape[-2:]
    return _batch(node.inputs[0].shape) * 12 * m * n * min(m, n)


def _check_truncated(ins, at, op):
    at = check_arity(at, TruncatedSvdAttrs, op)
    if type(at.eps) is not float or not at.eps >= 0 or at.eps == math.inf:
        raise BadFormat(f"truncated_svd: eps must be a finite float >= 0, got {short(at.eps)}")
    if type(at.rank) is not int or at.rank < 1:
        raise BadFormat(f"truncated_svd: rank must be an int >= 1, got {short(at.rank)}")


def _truncated_views(p, shape, r: int):
    """``(U_r, s_r, Vh_r, rest)`` of the node ``p`` of an operand of ``shape``."""
    batch = tuple(shape[:-2])
    m, n = shape[-2:]
    b = math.prod(batch)
    c1 = b * m * r
    c2 = c1 + b * r
    c3 = c2 + b * r * n
    return (
        reshape(getitem(p, slice(0, c1)), batch + (m, r)),
        real(reshape(getitem(p, slice(c1, c2)), batch + (r,))),
        reshape(getitem(p, slice(c2, c3)), batch + (r, n)),
        real(reshape(getitem(p, slice(c3, None)), batch)),
    )


def _reduced_svd(x: Value, eps: float) -> Node:
    """The reduced SVD node of ``x`` that the derivatives go through (the cse pass makes the
    truncated node a view of it: ``head_of_full``)."""
    return make_node(Op.SVD, (lift(x, "truncated_svd"),), (eps, False))


def _completed(node, y, x: Value):
    """``(full, whole, s)``: the reduced SVD node of ``x`` for the derivative rules, the packed
    SVD they read, and its singular values. The first r triplets of ``whole`` are the truncated
    node's own (``y``), the others the reduced SVD's: the rules then read the cotangents' U and
    V, whatever signs the two kernels chose (the cse pass makes the two one node, but a graph
    run without it has both)."""
    r = node.attrs.rank
    full = _reduced_svd(x, node.attrs.eps)
    u, s, vh = (Value(v) for v in _svd_views(full, x.shape, False))
    ur, sr, vhr, _ = (Value(v) for v in _truncated_views(y.node, x.shape, r))
    s = T.concatenate([sr, s[..., r:]], axis=-1)
    whole = _pack(
        T.concatenate([ur, u[..., r:]], axis=-1),
        s,
        T.concatenate([vhr, vh[..., r:, :]], axis=-2),
        dtype=y.dtype,
    )
    return full, whole, s


def _truncated_vjp(node, y, xs, g):
    # the truncated results are the first r of the reduced SVD's and a sum of its s_i^2: the
    # SVD's rule with the cotangents of the cut pairs zero and d rest / d s_i = 2 s_i
    (x,) = xs
    r = node.attrs.rank
    full, whole, s = _completed(node, y, x)
    gu, gs, gvh, grest = (Value(v) for v in _truncated_views(g.node, x.shape, r))
    batch, (m, n), k = tuple(x.shape[:-2]), x.shape[-2:], s.shape[-1]
    gu = T.concatenate([gu, T.zeros(batch + (m, k - r), dtype=gu.dtype)], axis=-1)
    gvh = T.concatenate([gvh, T.zeros(batch + (k - r, n), dtype=gvh.dtype)], axis=-2)
    gs = T.concatenate([gs, 2 * s[..., r:] * T.expand_dims(grest, -1)], axis=-1)
    return _svd_vjp(full, whole, xs, _pack(gu, gs, gvh, dtype=y.dtype))


def _truncated_jvp(node, y, xs, ts):
    (x,) = xs
    r = node.attrs.rank
    full, whole, s = _completed(node, y, x)
    t = _svd_jvp(full, whole, xs, ts)
    du, ds, dvh = (Value(v) for v in _svd_views(t.node, x.shape, False))
    drest = T.sum(2 * s[..., r:] * ds[..., r:], axis=-1)
    return _pack(du[..., :r], ds[..., :r], dvh[..., :r, :], drest, dtype=y.dtype)


register_op(
    Op.TRUNCATED_SVD,
    OpKind.LINALG,
    _truncated_infer,
    _truncated_ref,
    1,
    attrs=TruncatedSvdAttrs,
    vjp=_truncated_vjp,
    jvp=_truncated_jvp,
    cost=_truncated_cost,
    check_attrs=_check_truncated,
    fmt=lambda at: f"[rank={at.rank}, eps={at.eps!r}]",
)


def head_of_full(node: Node, full: Node) -> Node | None:
    """The TRUNCATED_SVD ``node`` as a view of ``full``, an SVD node of the same operand (any
    ``eps``, reduced or full) or a TRUNCATED_SVD of it with a higher rank, else None: what the
    cse pass substitutes, so a graph with both (a gradient's, or two ranks of one split)
    decomposes the matrix once."""
    x = node.inputs[0]
    if full.inputs[0] is not x or full is node:
        return None
    r = node.attrs.rank
    if full.op is Op.SVD:
        u, s, vh = (Value(v) for v in _svd_views(full, x.shape, full.attrs.full))
        tail = s[..., r:]
        rest = T.sum(tail * tail, axis=-1)
    elif full.op is Op.TRUNCATED_SVD and full.attrs.rank > r:
        views = _truncated_views(full, x.shape, full.attrs.rank)
        u, s, vh, more = (Value(v) for v in views)
        tail = s[..., r:]
        rest = more + T.sum(tail * tail, axis=-1)
    else:
        return None
    return _pack(u[..., :r], s[..., :r], vh[..., :r, :], rest, dtype=node.dtype).node


def split_axes(shape: tuple[int, ...], left: Any, op: str = "tensor_svd"):
    """``(left, right)`` axis tuples of a tensor of ``shape`` split by ``left`` (an int or a
    sequence of ints, negative allowed; right: the other axes in order)."""
    if isinstance(left, (int, np.integer)) and not isinstance(left, bool):
        left = (left,)
    try:
        left = tuple(left)
    except TypeError as e:
        raise OptionTypeError(f"{op}: left={left!r} is not an axis or a sequence of axes") from e
    # each axis checked and made non-negative, in the order given (U's axes keep that order)
    axes = tuple(normalize_axes(a, len(shape), op, shape)[0] for a in left)
    if len(set(axes)) != len(axes):
        raise OptionError(f"{op}: left={left!r} repeats an axis")
    right = tuple(i for i in range(len(shape)) if i not in axes)
    if not axes or not right:
        raise OptionError(
            f"{op}: left={left!r} must leave at least one axis on each side of the "
            f"operand of shape {fmt_shape(shape)}"
        )
    return tuple(axes), right


def check_truncation(max_rank: Any, cutoff: Any, cutoff_mode: Any, op: str = "tensor_svd"):
    """``(max_rank, cutoff)`` checked: max_rank None or an int >= 1, cutoff a float >= 0."""
    if max_rank is not None:
        if isinstance(max_rank, bool) or not isinstance(max_rank, (int, np.integer)):
            raise OptionTypeError(f"{op}: max_rank {max_rank!r} is not an int")
        if max_rank < 1:
            raise OptionError(f"{op}: max_rank must be >= 1, got {max_rank}")
        max_rank = int(max_rank)
    if isinstance(cutoff, bool) or not isinstance(cutoff, (int, float, np.integer, np.floating)):
        raise OptionTypeError(f"{op}: cutoff {cutoff!r} is not a number")
    if not 0 <= float(cutoff) < math.inf:
        raise OptionError(f"{op}: cutoff must be finite and >= 0, got {cutoff!r}")
    if cutoff_mode not in CUTOFF_MODES:
        raise OptionError(f"{op}: cutoff_mode must be one of {CUTOFF_MODES}, got {cutoff_mode!r}")
    return max_rank, float(cutoff)


def _keep(s, cutoff: float, mode: str, xp, rest=None):
    """The keep mask of descending singular values ``s`` (NumPy arrays or Values: ``xp`` is
    numpy or ``V``), before the first value is forced in (see ``tensor_svd``). ``rest``: the
    squared sum of the singular values after ``s`` (those a rank bound cut), if any."""
    if mode == "abs":
        return s > cutoff
    if mode == "rel":
        return s > cutoff * s[..., :1]
    # "discarded": the tail sums of s^2 from the end, drop while <= cutoff * total
    s2 = s * s
    k = s.shape[-1]
    upper = np.triu(np.ones((k, k), dtype=np.dtype(s.dtype).type(0).real.dtype))
    tail = s2 @ xp.asarray(upper.T.copy())  # tail[i] = sum_{j >= i} s2[j]
    if rest is not None:
        tail = tail + xp.expand_dims(rest, -1)
    return tail > cutoff * tail[..., :1]


@builder(public=False)
def tensor_svd(
    t: Any,
    left: Any,
    *,
    max_rank: int | None = None,
    cutoff: float = 0.0,
    cutoff_mode: str = "rel",
    absorb: str | None = None,
    eps: float = DEFAULT_EPS,
    return_rank: bool = False,
    truncate: bool = True,
) -> tuple[Node, ...]:
    """The truncated SVD of ``t`` with the axes ``left`` as rows and the others as columns (see
    the module docstring for the rank rule, the cutoffs and the derivatives).

    ``absorb=None`` returns ``(U, S, Vh, discarded)``: U of shape ``t``'s left axes + (r,),
    S (r,) descending and real, Vh (r,) + the right axes, ``discarded`` the squared sum of the
    discarded singular values. ``absorb="left"`` returns ``(U S, Vh, discarded)``,
    ``"right"`` ``(U, S Vh, discarded)``, ``"both"`` ``(U sqrt(S), sqrt(S) Vh, discarded)``.
    ``return_rank=True`` appends the number of singular values kept, a 0-d int64 Tensor (at
    most r; fewer where the cutoff zeroed some): a traced function, whose shapes are the
    bound, reads from it how far to trim the bond. ``truncate=False`` (the front end's, where a
    cutoff chose the rank from the reduced SVD) takes the reduced SVD node below K too, so the
    cutoff compares the same bits again."""
    n = lift(t, "tensor_svd")
    eps = check_eps(eps, "tensor_svd")
    lax, rax = split_axes(n.shape, left)
    max_rank, cutoff = check_truncation(max_rank, cutoff, cutoff_mode)
    if absorb not in ABSORB:
        raise OptionError(f"tensor_svd: absorb must be one of {ABSORB}, got {absorb!r}")
    if not isinstance(return_rank, (bool, np.bool_)):
        raise OptionTypeError(f"tensor_svd: return_rank {return_rank!r} is not a bool")
    if max_rank is None and cutoff > 0:
        raise DataDependentShapeError(
            "tensor_svd: a cutoff without max_rank makes the rank depend on the values; pass "
            "max_rank= (a bound fixed now; the cutoff zeroes what it cuts below it), or call "
            "tl.linalg.tensor_svd on concrete operands, which evaluates the spectrum first"
        )
    lshape = tuple(n.shape[i] for i in lax)
    rshape = tuple(n.shape[i] for i in rax)
    m, k_cols = math.prod(lshape), math.prod(rshape)
    k = min(m, k_cols)
    r = k if max_rank is None else min(max_rank, k)
    a = T.reshape(T.transpose(Value(n), lax + rax), (m, k_cols))
    if r < k and truncate:  # the first r triplets and the rest's squared sum: one node
        node = make_node(Op.TRUNCATED_SVD, (a.node,), (eps, r))
        u, s, vh, rest = (Value(x) for x in _truncated_views(node, (m, k_cols), r))
    elif r < k:
        u, s, vh = (Value(x) for x in svd(a, False, True, eps=eps))
        tail = s[r:]
        u, s, vh, rest = u[:, :r], s[:r], vh[:r, :], T.sum(tail * tail)
    else:
        u, s, vh = (Value(x) for x in svd(a, False, True, eps=eps))
        rest = T.zeros((), dtype=s.dtype)
    if cutoff == 0:  # a plain cut at r
        su, ss, svh, discarded = u, s, vh, rest
        rank = T.asarray(np.array(r, dtype=np.int64))
    else:  # the cutoff's keep mask over the first r, and what the rank bound cut
        keep = T.astype(_keep(s, cutoff, cutoff_mode, T, rest if r < k else None), s.dtype)
        # the largest singular value always stays (as quimb and ITensor): a cutoff that cuts
        # everything leaves a bond of one, not a zero tensor
        keep = T.maximum(keep, T.asarray((np.arange(r) == 0).astype(s.dtype)))
        discarded = rest + T.sum(s * s * (1 - keep))
        rank = T.astype(T.sum(keep), "int64")
        su, ss, svh = u * keep, s * keep, vh * T.expand_dims(keep, -1)
    su = T.reshape(su, lshape + (r,))
    svh = T.reshape(svh, (r,) + rshape)
    out: tuple[Value, ...]
    if absorb is None:
        out = (su, ss, svh, discarded)
    else:
        # sqrt(s) masked, not sqrt(s * keep): sqrt's derivative at a zeroed value is infinite,
        # and times the mask's 0 it made the gradient NaN
        root = (T.sqrt(s) * keep if cutoff else T.sqrt(s)) if absorb == "both" else ss
        lf = su * T.astype(root, su.dtype) if absorb in ("left", "both") else su
        rroot = T.reshape(T.astype(root, svh.dtype), (r,) + (1,) * len(rshape))
        rf = svh * rroot if absorb in ("right", "both") else svh
        out = (lf, rf, discarded)
    if return_rank:
        out = (*out, rank)
    return tuple(v.node for v in out)
