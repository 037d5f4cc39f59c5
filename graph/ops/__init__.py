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

# The families, each registering its ops when imported; after the names above are bound, since
# modules the families import (node, value, build) import them from this package.
from tenloom.graph.ops import (  # noqa: E402, F401
    contract,
    elementwise,
    fused,
    leaf,
    movement,
    reduce,
    sliced,
)
