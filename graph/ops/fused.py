"""FUSED: an elementwise region as one node (emitted by the fuse_elementwise pass).

attrs = (program, shape, dtype_str). The program is a tuple of steps ``(op, op_attrs, args)``
in evaluation order; each arg is ``("in", k)`` for the node's k-th input or ``("step", j)``
for an earlier step; the last step is the result. The NumPy reference runs the steps one by
one; backends compile the program into one kernel (numexpr on CPU).
"""

from __future__ import annotations

import math

import numpy as np
from tenloom.graph.ops.registry import OPS, Op, OpKind, as_array, register_op


class StepValue:
    """One value inside a fused program: the step's op, operands and attrs, and the shape and
    dtype its op's inference rule gives (what rules, dump and drawings read of a node)."""

    __slots__ = ("op", "inputs", "attrs", "shape", "dtype")

    def __init__(self, op: Op, inputs, attrs: tuple, shape: tuple, dtype) -> None:
        self.op, self.inputs, self.attrs = op, inputs, attrs
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize


def program_steps(program: tuple, inputs) -> list[StepValue]:
    """Each step of ``program`` run through its op's shape/dtype rule, on ``inputs`` (nodes or
    anything with ``shape`` and ``dtype``)."""
    vals: list[StepValue] = []
    for op, attrs, args in program:
        xs = [inputs[i] if kind == "in" else vals[i] for kind, i in args]
        shape, dtype = OPS[op].infer(xs, attrs)
        vals.append(StepValue(op, xs, attrs, shape, dtype))
    return vals


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
