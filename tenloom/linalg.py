"""``tl.linalg``: linear algebra with NumPy's names and semantics (``numpy.linalg``), batched
over leading axes, lazy and differentiable (forward and reverse mode, complex inputs
included). The ops and their rules live in graph/ops/linalg.py and
graph/ops/decompositions.py.

``inv``, ``solve``, ``det``, ``slogdet`` (a tuple ``(sign, logabsdet)`` of Tensors),
``cholesky`` (lower), ``eigh`` (a tuple ``(eigenvalues, eigenvectors)``; ``UPLO="L"``, and
``eps=`` the broadening of its derivatives), ``eigvalsh``, ``qr`` (``mode=`` "reduced",
"complete", "r" or "raw"), ``svd`` (``full_matrices=True`` or False), ``svdvals``, and,
built from matmul and trace, ``matrix_power`` and ``trace`` (over the last two axes, as the
array API).

``qr_positive`` (R's diagonal >= 0), ``ql``, ``lq``, ``rq`` (``positive=``), ``polar``
(``side="right"`` or "left") and ``expm`` (the matrix exponential), in
graph/ops/factorizations.py.

``eig`` (a tuple ``(eigenvalues, eigenvectors)`` of a general square matrix, always complex;
``eps=`` the broadening of its derivatives) and ``eigvals``, in graph/ops/eig.py.
``pinv`` (``rtol=`` or NumPy's ``rcond=``, ``hermitian=``), from svd or eigh, in
graph/ops/norms.py.
``vector_norm``, ``matrix_norm`` (the array API's) and ``norm`` (``numpy.linalg.norm``'s),
composites of abs, sum, max, sqrt and svdvals, in graph/ops/norms.py.

``tensor_svd`` (below): the truncated SVD of a tensor split into two groups of axes, with
``max_rank``, ``cutoff`` and ``absorb``, in graph/ops/tensor_svd.py.
"""

from __future__ import annotations

import math
from typing import Any

from tenloom.concrete import concrete
from tenloom.graph import build as _b
from tenloom.graph.ops.decompositions import DEFAULT_EPS
from tenloom.graph.value import lifted
from tenloom.tensor import Tensor

# public name -> builder (graph/ops/linalg.py, graph/ops/decompositions.py) and, for the
# builders returning several nodes, the annotation of the Tensors they return
_PUBLIC = {
    "cholesky": ("cholesky", None),
    "det": ("det", None),
    "eig": ("eig", "tuple[Tensor, Tensor]"),
    "eigvals": ("eigvals", None),
    "eigh": ("eigh", "tuple[Tensor, Tensor]"),
    "eigvalsh": ("eigvalsh", None),
    "expm": ("expm", None),
    "inv": ("inv", None),
    "lq": ("lq", "tuple[Tensor, Tensor]"),
    "matrix_norm": ("matrix_norm", None),
    "matrix_power": ("matrix_power", None),
    "norm": ("norm", None),
    "pinv": ("pinv", None),
    "polar": ("polar", "tuple[Tensor, Tensor]"),
    "qr": ("qr", "tuple[Tensor, Tensor] | Tensor"),
    "ql": ("ql", "tuple[Tensor, Tensor]"),
    "qr_positive": ("qr_positive", "tuple[Tensor, Tensor]"),
    "rq": ("rq", "tuple[Tensor, Tensor]"),
    "slogdet": ("slogdet", "tuple[Tensor, Tensor]"),
    "solve": ("solve", None),
    "svd": ("svd", "tuple[Tensor, Tensor, Tensor] | Tensor"),
    "svdvals": ("svdvals", None),
    "trace": ("linalg_trace", None),
    "vector_norm": ("vector_norm", None),
}
for _name, (_builder, _returns) in _PUBLIC.items():
    _fn = globals()[_name] = lifted(Tensor, _b.BUILDERS[_builder], _name, __name__)
    if _returns is not None:
        _fn.__annotations__["return"] = _returns


def tensor_svd(
    t: Any,
    left: Any,
    *,
    max_rank: int | None = None,
    cutoff: float = 0.0,
    cutoff_mode: str = "rel",
    absorb: str | None = None,
    eps: float = DEFAULT_EPS,
    device: Any = None,
    return_rank: bool = False,
) -> tuple[Tensor, ...]:
    """The truncated SVD of ``t`` split into the axes ``left`` (rows) and the others
    (columns): ``(U, S, Vh, discarded)``, or ``(left, right, discarded)`` with ``absorb=``
    "left", "right" or "both" (graph/ops/tensor_svd.py has the details and the derivatives).

    The rank is ``min(max_rank, K)`` when ``max_rank`` is given, a bound fixed now (a
    ``cutoff`` that cuts more zeroes the rest). With a ``cutoff`` and no ``max_rank`` it depends
    on the values: the singular values are evaluated now (on ``device``), once, and the rank
    they keep is fixed in the graph (docs/linalg.md; in a traced function this raises
    DataDependentShapeError: pass ``max_rank``). The SVD then runs again when the result is
    evaluated; pass ``max_rank`` to build without running anything. ``return_rank=True``
    appends the number of singular values kept (a 0-d int64 Tensor)."""
    from tenloom.graph.ops import tensor_svd as _ts

    max_rank, cutoff = _ts.check_truncation(max_rank, cutoff, cutoff_mode)
    if max_rank is None and cutoff > 0:
        t = Tensor(_b.lift(t, "tensor_svd"))
        # every option checked before anything runs: a traced graph at the bound K, whose own
        # kept count (the graph's comparison, in its dtype) is then evaluated
        lax, rax = _ts.split_axes(t.shape, left)
        k = min(math.prod(t.shape[i] for i in lax), math.prod(t.shape[i] for i in rax))
        probe = _b.tensor_svd(
            t,
            left,
            max_rank=max(k, 1),
            cutoff=cutoff,
            cutoff_mode=cutoff_mode,
            absorb=absorb,
            eps=eps,
            return_rank=True,
        )
        if device is not None:
            from tenloom.runtime.options import parse_device_name

            parse_device_name("tensor_svd", device)
        kept = concrete(
            Tensor(probe[-1]),
            "tensor_svd",
            "pass max_rank= (a bound; the cutoff zeroes what it cuts below it)",
            **({} if device is None else {"device": device}),
        )
        max_rank = max(1, int(kept))
        # the reduced SVD node, as the probe's: its cutoff compares the same bits again (a
        # truncated node's kernel may differ from it in the last place)
        truncate = False
    else:
        truncate = True
    out = _b.tensor_svd(
        t,
        left,
        max_rank=max_rank,
        cutoff=cutoff,
        cutoff_mode=cutoff_mode,
        absorb=absorb,
        eps=eps,
        return_rank=return_rank,
        truncate=truncate,
    )
    return tuple(Tensor(n) for n in out)


__all__ = [*_PUBLIC, "tensor_svd"]
