"""Validation of loaded node attributes, beyond each op's shape/dtype rule.

Each op's ``check_attrs`` rule, registered beside the op (graph/ops/), checks what its shape
rule takes on trust: the Python types of attributes, the normal forms the front end produces
and, for FUSED nodes, the whole program (:func:`check_fused`, with the backend's test of which
steps it can fuse). The helpers those rules share, and the caps on shapes, are in
graph/ops/checks.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tenloom.graph.node import Node
from tenloom.graph.ops import OPS
from tenloom.graph.ops.checks import (  # noqa: F401  (re-exported for the loader)
    MAX_ELEMENTS,
    MAX_NDIM,
    check_inferred,
    check_shape,
)
from tenloom.graph.ops.fused import MAX_FUSED_STEPS, check_program  # noqa: F401

# op -> check_attrs(inputs, attrs, op): every op but CONST (its array comes from the .npz)
CHECKS: dict = {op: d.check_attrs for op, d in OPS.items() if d.check_attrs is not None}


def check_fused(ins: Sequence[Node], at: tuple, fused_check: Callable | None) -> None:
    """A FUSED node's program, step by step (graph/ops/fused.py ``check_program``), each step
    also passing ``fused_check`` (the backend's: can it fuse this step?) when given."""
    check_program(ins, at, fused_check)
