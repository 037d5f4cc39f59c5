"""The node builders, collected: every op's user-facing function, returning graph nodes.

Each builder is defined in its op's family module (graph/ops/<family>.py, registered with
``@builder``): it lifts its operands (Nodes, Values such as the front end's Tensors, arrays,
Python scalars), normalizes arguments (axes, shapes, permutations) so equal computations
hash-cons to the same node, and lets the op's rule check shapes and dtypes now, at trace time.
This module gathers them by name (``build.exp``, ``build.reshape``, ...) with the lifting
helpers; tenloom/api.py wraps each public one as a Tensor-returning function and
``graph.value.V`` as a Value-returning one, for the differentiation rules.
"""

from __future__ import annotations

from tenloom.graph import ops
from tenloom.graph.ops.args import bool_arg, int_arg, normalize_axes
from tenloom.graph.ops.contract import einsum_spec, lift_operands
from tenloom.graph.ops.leaf import _const_node, full_node, lift, lift_with, scalar_node
from tenloom.graph.ops.registry import BUILDERS, PUBLIC_BUILDERS
from tenloom.graph.ops.semiring import semiring_spec

globals().update(BUILDERS)

__all__ = [
    "BUILDERS",
    "PUBLIC_BUILDERS",
    "_const_node",
    "bool_arg",
    "einsum_spec",
    "full_node",
    "int_arg",
    "lift",
    "lift_operands",
    "lift_with",
    "normalize_axes",
    "ops",
    "scalar_node",
    "semiring_spec",
    *BUILDERS,
]
