"""The graph layer: what the computation is (IR nodes, op rules, the Tensor front end)."""

from tenloom.graph import (  # noqa: F401  (register ops)
    autodiff_rules,  # registers the VJP rules
    jvp_rules,  # registers the JVP rules
    ops_contract,
    ops_elementwise,
    ops_fused,
    ops_leaf,
    ops_movement,
    ops_reduce,
    ops_scatter,
    ops_sliced,
)
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops import Op, OpKind
from tenloom.graph.tensor import Tensor

__all__ = ["Graph", "Node", "Op", "OpKind", "Tensor", "make_node"]
