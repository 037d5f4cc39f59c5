"""FUSED: an elementwise region as one node (emitted by the fuse_elementwise pass).

attrs = (program, shape, dtype_str). The program is a tuple of steps ``(op, op_attrs, args)``
in evaluation order; each arg is ``("in", k)`` for the node's k-th input or ``("step", j)``
for an earlier step; the last step is the result. The NumPy reference runs the steps one by
one; backends compile the program into one kernel (numexpr on CPU).
"""

from __future__ import annotations

import numpy as np
from tenloom.graph.ops import OPS, Op, OpKind, as_array, register_op


def run_program(program: tuple, arrays) -> np.ndarray:
    vals: list = []
    for op, attrs, args in program:
        xs = [arrays[i] if kind == "in" else vals[i] for kind, i in args]
        vals.append(OPS[op].ref(xs, attrs))
    return vals[-1]


register_op(
    Op.FUSED,
    OpKind.FUSED,
    lambda inputs, attrs: (attrs[1], np.dtype(attrs[2])),
    lambda xs, attrs: as_array(run_program(attrs[0], xs)),
    None,
)
