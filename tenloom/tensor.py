"""The lazy ``Tensor``: a graph ``Value`` that can be evaluated.

Operators build nodes; nothing runs until ``evaluate``. ``==`` and ``<`` are elementwise and lazy,
so ``bool(t)`` raises instead of guessing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tenloom.graph.value import Value


class Tensor(Value):
    """A lazy array. Build with the ``tenloom`` functions and operators; run with ``evaluate``."""

    __slots__ = ()

    def evaluate(self, **opts: Any) -> np.ndarray:
        """Run the graph and return this tensor's value (a 0-d ndarray for scalars)."""
        from tenloom.runtime.evaluate import evaluate

        return evaluate(self, **opts)[0]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        out = self.evaluate()
        return out if dtype is None else out.astype(dtype)

    def _repr_svg_(self) -> str | None:
        """Jupyter: the graph as traced, as SVG (no pass runs). None, so that Jupyter shows the
        text repr, when graphviz or its ``dot`` program is missing or the graph is too big to
        draw; ``tl.visualize`` draws the optimized graph."""
        from tenloom.visualize import repr_svg

        return repr_svg(self)
