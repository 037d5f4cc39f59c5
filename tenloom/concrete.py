"""Values needed at trace time: the one rule for shapes that depend on data.

A lazy graph fixes every shape when it is built. Where a shape depends on values (a rank cut
by a singular-value cutoff; later boolean masks, ``nonzero``, ``unique``), tenloom either takes
a bound from the user (``max_rank=``: the shape is the bound, the values beyond what the data
keep are zeros) or, without one, **evaluates up to that point**: the operand's graph runs
once, on concrete inputs, and the shape read from its values is fixed in the graph built
next (dask.array's ``compute_chunk_sizes`` makes the same trade). Inside a traced function
(``@tl.function``, ``tl.compile``: the inputs are placeholders) there are no values, so it
raises ``DataDependentShapeError`` naming the op and the bound to pass. docs/linalg.md
describes the rule; every op with a data-dependent shape uses :func:`concrete`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tenloom.graph.errors import DataDependentShapeError
from tenloom.graph.ops import Op
from tenloom.graph.traverse import toposort
from tenloom.tensor import Tensor


def concrete(t: Tensor, op: str, remedy: str, **opts: Any) -> np.ndarray:
    """The value of ``t``, evaluated now (with ``opts``, such as ``device=``) because ``op``
    needs it for a shape; ``DataDependentShapeError`` naming ``op`` and ``remedy`` when ``t``
    depends on a placeholder."""
    from tenloom.runtime.executor import device_leaf

    for n in toposort([t.node]):
        # a placeholder that is a device-resident leaf (tl.from_dlpack of a CUDA array) has
        # its value: only a traced function's inputs have none
        if n.op is Op.PLACEHOLDER and device_leaf(n) is None:
            raise DataDependentShapeError(
                f"{op}: the result's shape depends on the values of its operand, which "
                f"depends on the placeholder {n.attrs.name!r} of a traced function; {remedy}"
            )
    return t.evaluate(**opts)
