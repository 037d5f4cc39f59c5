"""``tensor_svd``: the truncated SVD of a tensor split into a left and a right group of axes,
the decomposition tensor-network codes reach for first (MPS/DMRG/TEBD bond splits, PEPS
updates). No new op: one SVD node of the matricized tensor (graph/ops/decompositions.py) and
ordinary ops (slices, comparisons, products) on its views.

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

**Derivatives.** The node holds the full reduced SVD and the truncated factors are slices of
it, so reverse and forward mode are exact for the truncated factors, the truncation term
included: the coupling of kept and discarded singular pairs goes through F_ij =
1 / (s_j^2 - s_i^2) of the SVD rule (broadened by ``eps``), and the cotangent of a discarded
pair is zero. A kept and a discarded singular value that coincide make the truncation itself
ambiguous; ``eps`` keeps the derivatives finite there.

**Discarded weight.** The fourth (or third) result is sum(s_i^2) over the discarded singular
values (the cut ones and those the cutoff zeroed), a 0-d real Tensor, differentiable.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from tenloom.graph.errors import DataDependentShapeError, OptionError, OptionTypeError, fmt_shape
from tenloom.graph.node import Node
from tenloom.graph.ops.args import normalize_axes
from tenloom.graph.ops.decompositions import DEFAULT_EPS, svd
from tenloom.graph.ops.leaf import lift
from tenloom.graph.ops.registry import builder
from tenloom.graph.value import V as T
from tenloom.graph.value import Value

CUTOFF_MODES = ("rel", "abs", "discarded")
ABSORB = (None, "left", "right", "both")


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


def _keep(s, cutoff: float, mode: str, xp):
    """The keep mask of descending singular values ``s`` (NumPy arrays or Values: ``xp`` is
    numpy or ``V``), before the first value is forced in (see ``tensor_svd``)."""
    if mode == "abs":
        return s > cutoff
    if mode == "rel":
        return s > cutoff * s[..., :1]
    # "discarded": the tail sums of s^2 from the end, drop while <= cutoff * total
    s2 = s * s
    k = s.shape[-1]
    upper = np.triu(np.ones((k, k), dtype=np.dtype(s.dtype).type(0).real.dtype))
    tail = s2 @ xp.asarray(upper.T.copy())  # tail[i] = sum_{j >= i} s2[j]
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
) -> tuple[Node, ...]:
    """The truncated SVD of ``t`` with the axes ``left`` as rows and the others as columns (see
    the module docstring for the rank rule, the cutoffs and the derivatives).

    ``absorb=None`` returns ``(U, S, Vh, discarded)``: U of shape ``t``'s left axes + (r,),
    S (r,) descending and real, Vh (r,) + the right axes, ``discarded`` the squared sum of the
    discarded singular values. ``absorb="left"`` returns ``(U S, Vh, discarded)``,
    ``"right"`` ``(U, S Vh, discarded)``, ``"both"`` ``(U sqrt(S), sqrt(S) Vh, discarded)``.
    ``return_rank=True`` appends the number of singular values kept, a 0-d int64 Tensor (at
    most r; fewer where the cutoff zeroed some): a traced function, whose shapes are the
    bound, reads from it how far to trim the bond."""
    n = lift(t, "tensor_svd")
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
    u, s, vh = (Value(x) for x in svd(a, False, True, eps=eps))
    if cutoff == 0:  # a plain cut at r
        su, ss, svh = u[:, :r], s[:r], vh[:r, :]
        discarded = T.sum(s[r:] * s[r:]) if r < k else T.zeros((), dtype=s.dtype)
        rank = T.asarray(np.array(r, dtype=np.int64))
    else:  # the cutoff's keep mask, over all K singular values, and the cut at r
        keep = T.astype(_keep(s, cutoff, cutoff_mode, T), s.dtype)
        # the largest singular value always stays (as quimb and ITensor): a cutoff that cuts
        # everything leaves a bond of one, not a zero tensor
        keep = T.maximum(keep, T.asarray((np.arange(k) == 0).astype(s.dtype)))
        if r < k:
            keep = keep * T.asarray((np.arange(k) < r).astype(s.dtype))
        discarded = T.sum(s * s * (1 - keep))
        kr = keep[:r]
        rank = T.astype(T.sum(kr), "int64")
        su, ss, svh = u[:, :r] * kr, s[:r] * kr, vh[:r, :] * T.expand_dims(kr, -1)
    su = T.reshape(su, lshape + (r,))
    svh = T.reshape(svh, (r,) + rshape)
    out: tuple[Value, ...]
    if absorb is None:
        out = (su, ss, svh, discarded)
    else:
        root = T.sqrt(ss) if absorb == "both" else ss
        lf = su * T.astype(root, su.dtype) if absorb in ("left", "both") else su
        rroot = T.reshape(T.astype(root, svh.dtype), (r,) + (1,) * len(rshape))
        rf = svh * rroot if absorb in ("right", "both") else svh
        out = (lf, rf, discarded)
    if return_rank:
        out = (*out, rank)
    return tuple(v.node for v in out)
