"""FUSED: an elementwise region as one node (emitted by the fuse_elementwise pass).

attrs: :class:`FusedAttrs` (program, shape, dtype). The program is a tuple of steps
``(op, op_attrs, args)`` in evaluation order, each op elementwise; each arg is ``("in", k)`` for
the node's k-th input or ``("step", j)`` for an earlier step; the last step is the result. The
NumPy reference runs the steps one by one; backends compile the program into one kernel
(runtime/codegen). A step's attrs may be a plain tuple (a loaded file's) or its op's record.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
from tenloom.graph.autodiff import Tangent, tangent_of
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops.checks import (
    BadFormat,
    check_arity,
    check_dtype,
    check_inferred,
    check_shape,
    short,
)
from tenloom.graph.ops.registry import OPS, Op, OpKind, as_array, register_op, typed_attrs

# the ops of this family (Op.NEG, ...), defined before anything refers to them
Op.define_all("fused")

MAX_FUSED_STEPS = 4096  # of a program read from a file


class FusedAttrs(NamedTuple):
    program: tuple  # of steps (op, op_attrs, args)
    shape: tuple[int, ...]  # the result's
    dtype: str  # dtype.str of the result


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
        attrs = typed_attrs(op, attrs)
        shape, dtype = OPS[op].infer(xs, attrs)
        vals.append(StepValue(op, xs, attrs, shape, dtype))
    return vals


def run_program(program: tuple, arrays) -> np.ndarray:
    vals: list = []
    for op, attrs, args in program:
        xs = [arrays[i] if kind == "in" else vals[i] for kind, i in args]
        vals.append(OPS[op].ref(xs, attrs))
    return vals[-1]


def check_program(ins: Sequence, at: tuple, step_check: Callable | None = None) -> None:
    """A FUSED node's infer rule trusts its attrs, so a program read from a file is checked
    step by step: known elementwise ops, arguments that name an input or an earlier step,
    every input used, each step's attrs check and shape/dtype rule, ``step_check`` (the
    backend's: is the step fusable?) if given, and the last step giving the recorded result."""
    program, shape, dt = check_arity(at, FusedAttrs, Op.FUSED)
    check_shape(shape, "fused shape")
    dt = check_dtype(dt)
    if type(program) is not tuple or not program or len(program) > MAX_FUSED_STEPS:
        raise BadFormat(f"fused program must be a tuple of 1 to {MAX_FUSED_STEPS} steps")
    steps: list[StepValue] = []
    used: set[int] = set()
    for j, step in enumerate(program):
        if type(step) is not tuple or len(step) != 3:
            raise BadFormat(f"fused step {j} must be (op, attrs, args)")
        op, attrs, args = step
        if type(op) is not Op or op not in OPS or OPS[op].kind is not OpKind.ELEMENTWISE:
            raise BadFormat(f"fused step {j}: {short(op)} is not an elementwise op")
        if type(attrs) is not tuple or type(args) is not tuple or len(args) != OPS[op].arity:
            raise BadFormat(f"fused step {j} ({op.value}): needs attrs and {OPS[op].arity} args")
        operands = []
        for arg in args:
            if type(arg) is not tuple or len(arg) != 2 or type(arg[1]) is not int:
                raise BadFormat(
                    f"fused step {j}: argument {short(arg)} is not ('in', k) or ('step', k)"
                )
            kind, i = arg
            if kind == "in" and 0 <= i < len(ins):
                used.add(i)
                operands.append(ins[i])
            elif kind == "step" and 0 <= i < j:
                operands.append(steps[i])
            else:
                raise BadFormat(f"fused step {j}: argument {arg} names no input or earlier step")
        OPS[op].check_attrs(operands, attrs, op)
        attrs = typed_attrs(op, attrs)
        try:
            s_shape, s_dtype = OPS[op].infer(operands, attrs)
        except Exception as e:
            raise BadFormat(f"fused step {j} ({op.value}): {e}") from None
        check_inferred(s_shape, s_dtype, f"fused step {j} ({op.value})")
        view = StepValue(op, operands, attrs, s_shape, s_dtype)
        if step_check is not None and not step_check(view):
            raise BadFormat(
                f"fused step {j}: {op.value} on {[o.dtype.name for o in operands]} is not fusable"
            )
        steps.append(view)
    if used != set(range(len(ins))):
        raise BadFormat(f"fused inputs {sorted(set(range(len(ins))) - used)} are never read")
    last = steps[-1]
    if last.shape != shape or last.dtype != dt:
        raise BadFormat(
            f"fused program gives {last.dtype}{last.shape} but its attrs say {dt}{tuple(shape)}"
        )


def _cost(node) -> int:
    """One operation per element and step."""
    return node.size * max(1, len(node.attrs.program))


def _jvp(node, y, xs, ts):
    """Chain the steps' rules: each step is rebuilt as its own node (the primal values that
    the rules need; the passes fuse them again) and its tangent follows from its arguments'."""
    program = node.attrs.program
    vals: list[Node] = []
    tans: list[Tangent] = []
    for s, (op, attrs, args) in enumerate(program):
        ins = tuple(xs[i].node if kind == "in" else vals[i] for kind, i in args)
        arg_ts = tuple(ts[i] if kind == "in" else tans[i] for kind, i in args)
        step = make_node(op, ins, attrs)
        vals.append(step)
        # the last step's value is the region's: rules that read it (exp, tanh...) reuse it
        last = s == len(program) - 1
        tans.append(tangent_of(step, arg_ts, y if last else None))
    return tans[-1]


register_op(
    Op.FUSED,
    OpKind.FUSED,
    lambda inputs, attrs: (attrs.shape, np.dtype(attrs.dtype)),
    lambda xs, attrs: as_array(run_program(attrs.program, xs)),
    None,
    attrs=FusedAttrs,
    jvp=_jvp,
    cost=_cost,
    check_attrs=lambda ins, at, op: check_program(ins, at),
    fmt=lambda at: f"[{len(at.program)} ops]",
)
