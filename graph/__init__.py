"""The graph layer, the pure IR: what the computation is (nodes, ops and their rules, the node
builders, the Value algebra differentiation rules are written in)."""

from tenloom.graph import ops  # first: registers every op (its modules import node and value)
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops import Op, OpKind
from tenloom.graph.value import Value

__all__ = ["Graph", "Node", "Op", "OpKind", "Value", "make_node"]
