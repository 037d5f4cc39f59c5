"""``tl.linalg``: linear algebra with NumPy's names and semantics (``numpy.linalg``), batched
over leading axes, lazy and differentiable (forward and reverse mode, complex inputs
included). The ops and their rules live in graph/ops/linalg.py and
graph/ops/decompositions.py.

``inv``, ``solve``, ``det``, ``slogdet`` (a tuple ``(sign, logabsdet)`` of Tensors),
``cholesky`` (lower), ``eigh`` (a tuple ``(eigenvalues, eigenvectors)``; ``UPLO="L"``, and
``eps=`` the broadening of its derivatives), ``eigvalsh``, ``qr`` (``mode="reduced"``, or
``"r"``), ``svd`` (reduced: ``full_matrices=False``, or a square matrix), ``svdvals``, and,
built from matmul and trace, ``matrix_power`` and ``trace`` (over the last two axes, as the
array API).
"""

from __future__ import annotations

from tenloom.graph import build as _b
from tenloom.graph.value import lifted
from tenloom.tensor import Tensor

# public name -> builder (graph/ops/linalg.py, graph/ops/decompositions.py) and, for the
# builders returning several nodes, the annotation of the Tensors they return
_PUBLIC = {
    "cholesky": ("cholesky", None),
    "det": ("det", None),
    "eigh": ("eigh", "tuple[Tensor, Tensor]"),
    "eigvalsh": ("eigvalsh", None),
    "inv": ("inv", None),
    "matrix_power": ("matrix_power", None),
    "qr": ("qr", "tuple[Tensor, Tensor] | Tensor"),
    "slogdet": ("slogdet", "tuple[Tensor, Tensor]"),
    "solve": ("solve", None),
    "svd": ("svd", "tuple[Tensor, Tensor, Tensor] | Tensor"),
    "svdvals": ("svdvals", None),
    "trace": ("linalg_trace", None),
}
for _name, (_builder, _returns) in _PUBLIC.items():
    _fn = globals()[_name] = lifted(Tensor, _b.BUILDERS[_builder], _name, __name__)
    if _returns is not None:
        _fn.__annotations__["return"] = _returns

__all__ = list(_PUBLIC)
