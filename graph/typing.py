"""Type aliases shared across the graph layer."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Union

import numpy as np

Shape = tuple[int, ...]
Labels = tuple[int, ...]
DTypeLike = Union[str, type, np.dtype]
ArrayLike = Any
Attrs = tuple[Hashable, ...]
AxisLike = Union[int, Sequence[int], None]
