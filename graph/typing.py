"""Type aliases shared across the graph layer."""

from __future__ import annotations

from typing import Any, Hashable, Sequence, Tuple, Union

import numpy as np

Shape = Tuple[int, ...]
Labels = Tuple[int, ...]
DTypeLike = Union[str, type, np.dtype]
ArrayLike = Any
Attrs = Tuple[Hashable, ...]
AxisLike = Union[int, Sequence[int], None]
