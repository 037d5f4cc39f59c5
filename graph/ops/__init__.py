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

# The families, each registering its ops when imported. After the names above are bound, since
# node, value and build import them from here; and after value: it loads build, which loads the
# leaf and movement families, whose rules import the helpers of graph/autodiff.py, which imports
# value's names (bound before value loads build).
from tenloom.graph import value  # noqa: E402, F401, I001
from tenloom.graph.ops import (  # noqa: E402, F401
    contract,
    elementwise,
    fused,
    leaf,
    movement,
    reduce,
    sliced,
)
