"""Validation of loaded node attributes, beyond each op's shape/dtype rule.

Each op's infer rule checks shapes; these check what it takes on trust: the Python types of
attributes (an axis that is a float would pass ``0.0 == 0`` and fail at run time), the normal
forms the front end produces (non-negative sorted axes, canonical slices, consistent GEMM
groups) and, for FUSED nodes, whose rule trusts its attrs entirely, the whole program.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from tenloom.graph.node import Node
from tenloom.graph.ops import OPS, Op, OpKind
from tenloom.graph.ops.fused import StepValue
from tenloom.graph.ops.movement import as_slice
from tenloom.runtime.serialize_values import DTYPE_STRS, NODE_DTYPES, BadFormat, short

MAX_ELEMENTS = 2**48  # per array
MAX_NDIM = 64
MAX_FUSED_STEPS = 4096


def check_shape(x: Any, what: str = "shape") -> tuple[int, ...]:
    if type(x) not in (list, tuple) or len(x) > MAX_NDIM:
        raise BadFormat(f"{what} must be an array of at most {MAX_NDIM} ints, got {short(x)}")
    n = 1
    for d in x:
        if type(d) is not int or d < 0:
            raise BadFormat(f"{what} {short(x)} has a dimension that is not a non-negative int")
        n *= d
        if n > MAX_ELEMENTS:
            raise BadFormat(f"{what} {short(x)} has more than {MAX_ELEMENTS} elements")
    return tuple(x)


def _ints(x: Any, what: str, lo: int | None = None, hi: int | None = None) -> tuple[int, ...]:
    if type(x) is not tuple or any(type(v) is not int for v in x):
        raise BadFormat(f"{what} must be a tuple of ints, got {short(x)}")
    if any((lo is not None and v < lo) or (hi is not None and v >= hi) for v in x):
        raise BadFormat(f"{what} {x} out of range [{lo}, {hi})")
    return x


def _int(x: Any, what: str) -> int:
    if type(x) is not int:
        raise BadFormat(f"{what} must be an int, got {short(x)}")
    return x


def _dtype_str(x: Any, what: str = "dtype") -> np.dtype:
    dt = DTYPE_STRS.get(x) if isinstance(x, str) else None
    if dt is None:
        raise BadFormat(f"{what} {short(x)} is not one of {', '.join(DTYPE_STRS)}")
    return dt


def _arity(attrs: tuple, n: int, op: Op) -> None:
    if len(attrs) != n:
        raise BadFormat(f"{op.value} takes {n} attributes, got {len(attrs)}")


def _check_placeholder(ins, at, op):
    _arity(at, 4, op)
    if type(at[0]) is not str:
        raise BadFormat("placeholder name must be a string")
    if _int(at[1], "placeholder uid") < 0:
        raise BadFormat("placeholder uid must be non-negative")
    check_shape(at[2], "placeholder shape")
    _dtype_str(at[3])


def _check_full(ins, at, op):
    _arity(at, 3, op)
    check_shape(at[0], "full shape")
    dt = _dtype_str(at[1])
    if type(at[2]) is not bytes or len(at[2]) != dt.itemsize:
        raise BadFormat(f"full value must be {dt.itemsize} bytes of {dt}")


def _check_eye(ins, at, op):
    _arity(at, 4, op)
    for v, name in zip(at[:3], ("n", "m", "k")):
        _int(v, f"eye {name}")
    _dtype_str(at[3])


def _check_none(ins, at, op):
    _arity(at, 0, op)


def _check_cast(ins, at, op):
    _arity(at, 1, op)
    _dtype_str(at[0], "cast dtype")


def _check_reduce(ins, at, op):
    _arity(at, 2, op)
    axes = _ints(at[0], "axes", 0, ins[0].ndim)
    if list(axes) != sorted(set(axes)):
        raise BadFormat(f"axes {axes} must be sorted and distinct")
    if type(at[1]) is not bool:
        raise BadFormat("keepdims must be a bool")


def _check_shape_attr(ins, at, op):
    _arity(at, 1, op)
    check_shape(at[0], f"{op.value} shape")


def _check_transpose(ins, at, op):
    _arity(at, 1, op)
    _ints(at[0], "permutation")


def _check_slice(ins, at, op):
    _arity(at, 1, op)
    spec = at[0]
    if type(spec) is not tuple or len(spec) != ins[0].ndim:
        raise BadFormat(
            f"slice needs one (start, stop, step) per axis of its input ({ins[0].ndim})"
        )
    for s, n in zip(spec, ins[0].shape):
        _ints(s, "slice")
        if len(s) != 3 or s[2] == 0 or as_slice(*s).indices(n) != s:
            raise BadFormat(
                f"slice {s} is not a normalized (start, stop, step) for an axis of size {n}"
            )


def _check_slice_scatter(ins, at, op):
    _arity(at, 2, op)
    spec, shape = at
    check_shape(shape, "slice_scatter shape")
    if type(spec) is not tuple or len(spec) != len(shape):
        raise BadFormat(f"slice_scatter needs one (start, stop, step) per axis of {shape}")
    for s, n in zip(spec, shape):
        _ints(s, "slice")
        if len(s) != 3 or s[2] == 0 or as_slice(*s).indices(n) != s:
            raise BadFormat(
                f"slice {s} is not a normalized (start, stop, step) for an axis of size {n}"
            )


def _check_concat(ins, at, op):
    _arity(at, 1, op)
    if not ins or not 0 <= _int(at[0], "axis") < ins[0].ndim:
        raise BadFormat(
            f"concatenate axis {at[0]!r} out of range for {ins[0].ndim if ins else 0} axes"
        )


def _check_diagonal(ins, at, op):
    _arity(at, 3, op)
    _int(at[0], "offset")
    a1, a2 = _ints(at[1:], "axes", 0, ins[0].ndim)
    if a1 == a2:
        raise BadFormat("the two axes must differ")


def _check_einsum(ins, at, op):
    _arity(at, 2, op)
    terms, out = at
    if type(terms) is not tuple or not ins:
        raise BadFormat("einsum needs a tuple of label tuples and at least one operand")
    for t in terms:
        _ints(t, "einsum labels", 0)
    _ints(out, "einsum output labels", 0)
    if len(set(out)) != len(out):
        raise BadFormat(f"einsum output labels {out} repeat a label")


def _check_tensordot(ins, at, op):
    _arity(at, 2, op)
    axa = _ints(at[0], "axes of operand 0", 0, ins[0].ndim)
    axb = _ints(at[1], "axes of operand 1", 0, ins[1].ndim)
    if len(axa) != len(axb) or len(set(axa)) != len(axa) or len(set(axb)) != len(axb):
        raise BadFormat("tensordot axes must be two equally long lists of distinct axes")


def _check_contract(ins, at, op):
    _arity(at, 7, op)
    a, b, out, batch, left, con, right = (_ints(x, "contract labels") for x in at)
    if len(a) != ins[0].ndim or len(b) != ins[1].ndim:  # the rule checks operand 0 only
        raise BadFormat(
            f"contract: labels {a} and {b} for operands of {ins[0].ndim} and {ins[1].ndim} axes"
        )
    for labels in (a, b, out, batch + left + con + right):
        if len(set(labels)) != len(labels):
            raise BadFormat(f"contract: labels {labels} repeat")
    sa, sb, so = set(a), set(b), set(out)
    a_kept = {x for x in a if x in sb or x in so}
    b_kept = {x for x in b if x in a_kept or x in so}
    ok = (
        set(batch) <= sa & sb & so
        and set(left) <= (sa - sb) & so
        and set(right) <= (sb - sa) & so
        and set(con) <= (sa & sb) - so
        and a_kept == set(batch + left + con)
        and b_kept == set(batch + con + right)
    )
    if not ok:
        raise BadFormat(
            f"contract: the GEMM grouping {at[3:]} does not fit labels {a}, {b} -> {out}"
        )


def _check_sliced(ins, at, op):
    """SLICED attrs (terms, out, sliced, path, wrt): its rule checks the sizes and the path's
    range; here the types, and that the path is a proper tree (each operand and intermediate
    read exactly once, never paired with itself)."""
    _arity(at, 5, op)
    terms, out, sliced, path, wrt = at
    if type(terms) is not tuple or type(sliced) is not tuple or type(path) is not tuple:
        raise BadFormat("sliced: terms, sliced indices and path must be tuples")
    for t in terms:
        _ints(t, "sliced: labels", 0)
    _ints(out, "sliced: output labels", 0)
    labels = [_ints(p, "sliced: (label, size)", 0) for p in sliced]
    if any(len(p) != 2 or p[1] < 1 for p in labels) or len({p[0] for p in labels}) != len(labels):
        raise BadFormat(f"sliced: sliced indices {sliced} must be distinct (label, size >= 1)")
    n, read = len(terms), set()
    for s, pair in enumerate(path):
        pair = _ints(pair, "sliced: path step", 0, n + s)
        if len(pair) != 2 or pair[0] == pair[1] or read & set(pair):
            raise BadFormat(f"sliced: path {path} is not a contraction tree over {n} operands")
        read |= set(pair)
    if n and read != set(range(n + len(path) - 1)):
        raise BadFormat(f"sliced: path {path} leaves operands uncontracted")
    if wrt is not None:  # operand positions (reverse sweep), or -1 - position (forward mode)
        k = _ints(wrt, "sliced: wrt", -n, n)
        if len(set(k)) != len(k) or not k or (min(k) < 0 <= max(k)):
            raise BadFormat(f"sliced: wrt {wrt} repeats an operand or mixes the two modes")


CHECKS: dict[Op, Callable] = {
    Op.PLACEHOLDER: _check_placeholder,
    Op.FULL: _check_full,
    Op.EYE: _check_eye,
    Op.CAST: _check_cast,
    Op.WHERE: _check_none,
    Op.MATMUL: _check_none,
    Op.RESHAPE: _check_shape_attr,
    Op.BROADCAST: _check_shape_attr,
    Op.TRANSPOSE: _check_transpose,
    Op.LAYOUT: _check_transpose,
    Op.SLICE: _check_slice,
    Op.SLICE_SCATTER: _check_slice_scatter,
    Op.CONCAT: _check_concat,
    Op.DIAGONAL: _check_diagonal,
    Op.TRACE: _check_diagonal,
    Op.EINSUM: _check_einsum,
    Op.TENSORDOT: _check_tensordot,
    Op.CONTRACT: _check_contract,
    Op.SLICED: _check_sliced,
}
for _op in (Op.SUM, Op.PROD, Op.MAX, Op.MIN):
    CHECKS[_op] = _check_reduce
for _op, _d in OPS.items():
    if _d.kind is OpKind.ELEMENTWISE and _op not in CHECKS:
        CHECKS[_op] = _check_none


def check_inferred(shape: Any, dtype: Any, what: str) -> None:
    if type(shape) is not tuple or any(type(d) is not int or d < 0 for d in shape):
        raise BadFormat(
            f"{what}: the op's rule gives the shape {short(shape)}, not a tuple of ints"
        )
    if (
        not isinstance(dtype, np.dtype)
        or dtype.name not in NODE_DTYPES
        or dtype != NODE_DTYPES[dtype.name]
    ):
        raise BadFormat(f"{what}: the op's rule gives the unsupported dtype {dtype}")


def check_fused(ins: Sequence[Node], at: tuple, fused_check: Callable | None) -> None:
    """A FUSED node's infer rule trusts its attrs, so the program is checked step by step:
    known elementwise ops, arguments that name an input or an earlier step, every input used,
    each step's shape/dtype rule, and the last step giving the recorded result."""
    _arity(at, 3, Op.FUSED)
    program, shape, dt = at
    check_shape(shape, "fused shape")
    dt = _dtype_str(dt)
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
        CHECKS[op](operands, attrs, op)
        try:
            s_shape, s_dtype = OPS[op].infer(operands, attrs)
        except Exception as e:
            raise BadFormat(f"fused step {j} ({op.value}): {e}") from None
        check_inferred(s_shape, s_dtype, f"fused step {j} ({op.value})")
        view = StepValue(op, operands, attrs, s_shape, s_dtype)
        if fused_check is not None and not fused_check(view):
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
