"""The ops: the registry (``registry.py``) and one module per op family, each holding
everything about its ops, registered once beside the op.

Importing this package registers every op."""

from tenloom.graph.ops.registry import (
    OPS,
    Op,
    OpDef,
    OpKind,
    as_array,
    op_def,
    register_jvp,
    register_op,
    register_vjp,
)

__all__ = [
    "OPS",
    "Op",
    "OpDef",
    "OpKind",
    "as_array",
    "op_def",
    "register_jvp",
    "register_op",
    "register_vjp",
]

# The families, each defining its ops and registering their rules and builders when imported,
# in this order (an op's code is its position in it, the same in every process): each family
# may use the ones above it at import time. After the names above are bound, since node, value
# and the families import them from here.
from tenloom.graph.ops import leaf  # noqa: E402, F401, I001
from tenloom.graph.ops import elementwise  # noqa: E402, F401
from tenloom.graph.ops import reduce  # noqa: E402, F401
from tenloom.graph.ops import movement  # noqa: E402, F401
from tenloom.graph.ops import contract  # noqa: E402, F401
from tenloom.graph.ops import linalg  # noqa: E402, F401
from tenloom.graph.ops import decompositions  # noqa: E402, F401
from tenloom.graph.ops import spectra  # noqa: E402, F401
from tenloom.graph.ops import factorizations  # noqa: E402, F401
from tenloom.graph.ops import tensor_svd  # noqa: E402, F401
from tenloom.graph.ops import eig  # noqa: E402, F401
from tenloom.graph.ops import norms  # noqa: E402, F401
from tenloom.graph.ops import fused  # noqa: E402, F401
from tenloom.graph.ops import sliced  # noqa: E402, F401
from tenloom.graph.ops import nn  # noqa: E402, F401  (composites only: defines no op)
from tenloom.graph.ops import gather  # noqa: E402, F401  (advanced indexing)
from tenloom.graph.ops import fft  # noqa: E402, F401  (tl.fft)
from tenloom.graph.ops import complex_parts  # noqa: E402, F401  (complex(real, imag))
from tenloom.graph.ops import semiring  # noqa: E402, F401  (einsum(semiring=...))
from tenloom.graph import build, value  # noqa: E402

value.bind(build)
