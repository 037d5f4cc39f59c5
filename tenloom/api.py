"""The public ops of tenloom: every public node builder (graph/ops/<family>.py, collected in
graph/build.py), each wrapped to return a ``Tensor``.

The semantics (NumPy's, checked at trace time) live with each op in its family module; this
module only wraps nodes as Tensors, and parses ``einsum``'s string and sublist forms
(tenloom/einsum.py). A builder registered with ``@builder`` appears here by itself.
"""

from __future__ import annotations

from typing import Any

from tenloom import einsum as _einsum
from tenloom.graph import build as _b
from tenloom.graph.value import lifted
from tenloom.tensor import Tensor

globals().update(
    {name: lifted(Tensor, _b.BUILDERS[name], name, __name__) for name in _b.PUBLIC_BUILDERS}
)


def einsum(*args: Any, semiring: str | None = None) -> Tensor:
    """Einstein summation, as ``numpy.einsum``, plus integer sublists with any number of labels.

    ``einsum("ij,jk->ik", a, b)`` or ``einsum(a, [0, 1], b, [1, 2], [0, 2])``.

    ``semiring=`` contracts over another semiring: ``"max_plus"``, ``"min_plus"``,
    ``"max_times"``, ``"log_sum_exp"`` or ``"count"`` (graph/ops/semiring.py; docs/semirings.md).
    """
    if semiring is not None:
        from tenloom.graph.ops.semiring import check_semiring

        check_semiring(semiring, "einsum")
    nodes, spec = _einsum.parse(args, _b.lift_operands)
    if semiring is not None:
        return Tensor(_b.semiring_spec(nodes, spec, semiring))
    return Tensor(_b.einsum_spec(nodes, spec))


__all__ = [*_b.PUBLIC_BUILDERS, "einsum"]
