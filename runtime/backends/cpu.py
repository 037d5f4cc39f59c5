"""The CPU backend: NumPy, running each op's registered NumPy reference.

Supported dtypes: all of tenloom's (bool, int32, int64, float16, float32, float64, complex64,
complex128).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tenloom.graph.dtypes import SUPPORTED
from tenloom.graph.node import Node
from tenloom.graph.ops import OPS


class Backend:
    kind = "cpu"
    dtypes = SUPPORTED

    def from_host(self, array: np.ndarray) -> np.ndarray:
        return array

    def to_host(self, array: np.ndarray) -> np.ndarray:
        return array

    def run(self, node: Node, args: Sequence[np.ndarray]) -> np.ndarray:
        """Compute ``node`` from its input arrays."""
        return OPS[node.op].ref(args, node.attrs)

    def synchronize(self) -> None:
        pass
