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

__all__ = [
    "cholesky",
    "det",
    "eigh",
    "eigvalsh",
    "inv",
    "matrix_power",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "trace",
]

cholesky = lifted(Tensor, _b.BUILDERS["cholesky"], "cholesky", __name__)
det = lifted(Tensor, _b.BUILDERS["det"], "det", __name__)
inv = lifted(Tensor, _b.BUILDERS["inv"], "inv", __name__)
slogdet = lifted(Tensor, _b.BUILDERS["slogdet"], "slogdet", __name__)
slogdet.__annotations__["return"] = "tuple[Tensor, Tensor]"
eigh = lifted(Tensor, _b.BUILDERS["eigh"], "eigh", __name__)
eigh.__annotations__["return"] = "tuple[Tensor, Tensor]"
eigvalsh = lifted(Tensor, _b.BUILDERS["eigvalsh"], "eigvalsh", __name__)
matrix_power = lifted(Tensor, _b.BUILDERS["matrix_power"], "matrix_power", __name__)
trace = lifted(Tensor, _b.BUILDERS["linalg_trace"], "trace", __name__)
qr = lifted(Tensor, _b.BUILDERS["qr"], "qr", __name__)
qr.__annotations__["return"] = "tuple[Tensor, Tensor] | Tensor"
solve = lifted(Tensor, _b.BUILDERS["solve"], "solve", __name__)
svd = lifted(Tensor, _b.BUILDERS["svd"], "svd", __name__)
svd.__annotations__["return"] = "tuple[Tensor, Tensor, Tensor] | Tensor"
svdvals = lifted(Tensor, _b.BUILDERS["svdvals"], "svdvals", __name__)
