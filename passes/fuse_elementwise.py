"""fuse_elementwise: maximal elementwise regions become one FUSED node.

    exp(a * b + c) > 0.5 -> fused[(exp((in0 * in1) + in2) > in3)](a, b, c, 0.5)

A region grows from each elementwise node into its elementwise inputs that have no other
consumer (so nothing is computed twice), broadcasting included. Regions hold only ops and dtypes
that the CPU kernel language (numexpr) computes exactly as NumPy does: one arithmetic dtype per
region (int32, int64, float32, float64 or complex128; int8, int16 and the unsigned integers,
which numexpr lacks, stay op by op) plus booleans from comparisons. Regions
are capped (MAX_OPS ops, MAX_INPUTS inputs, MAX_CHARS of expression), so a 100,000-node chain
becomes a chain of fused nodes. Scalars enter as 0-d inputs, never as literals, so numexpr
cannot promote them.

When the graph is to run on the CPU (option ``target``, set by evaluate and compile), a region
over BIG_REGION elements or more may take BIG_MAX_OPS ops with any number of inputs: the CPU
runs such regions chunk by chunk through NumPy's ufuncs (runtime/backends/cpu_fused.py),
which has none of numexpr's limits, and each region boundary saved is one pass over memory.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops import OPS, Op, OpKind
from tenloom.passes.registry import PassContext, register_pass
from tenloom.passes.rewrite import use_counts

MAX_OPS = 48
MAX_INPUTS = 24
MAX_CHARS = 4000
BIG_REGION = 2048  # elements (the CPU backend's chunked kernels start here)
BIG_MAX_OPS = 4096

# op -> numexpr template; {0}, {1}, {2} are the operands' expressions
TEMPLATES: dict[Op, str] = {
    Op.ADD: "({0} + {1})",
    Op.SUB: "({0} - {1})",
    Op.MUL: "({0} * {1})",
    Op.DIV: "({0} / {1})",
    Op.POW: "({0} ** {1})",
    Op.NEG: "(-{0})",
    Op.ABS: "abs({0})",
    Op.EXP: "exp({0})",
    Op.LOG: "log({0})",
    Op.SQRT: "sqrt({0})",
    Op.SIN: "sin({0})",
    Op.COS: "cos({0})",
    Op.TANH: "tanh({0})",
    Op.CONJ: "conj({0})",
    Op.EQ: "({0} == {1})",
    Op.NE: "({0} != {1})",
    Op.LT: "({0} < {1})",
    Op.LE: "({0} <= {1})",
    Op.GT: "({0} > {1})",
    Op.GE: "({0} >= {1})",
    Op.AND: "({0} & {1})",
    Op.OR: "({0} | {1})",
    Op.INVERT: "(~{0})",
    Op.WHERE: "where({0}, {1}, {2})",
    # NumPy's maximum/minimum propagate NaN from either side and, between equal operands
    # (0.0 and -0.0), give the second one (its float32/float64 loops)
    Op.MAXIMUM: "where(({0} > {1}) | ({0} != {0}), {0}, {1})",
    Op.MINIMUM: "where(({0} < {1}) | ({0} != {0}), {0}, {1})",
}
ARITH = frozenset(np.dtype(n) for n in ("int32", "int64", "float32", "float64", "complex128"))
BOOL = np.dtype(bool)
# numexpr computes these in floating point only (abs of an integer comes back as float64)
FLOAT_ONLY = frozenset({Op.DIV, Op.POW, Op.EXP, Op.LOG, Op.SQRT, Op.SIN, Op.COS, Op.TANH, Op.ABS})
NOT_COMPLEX = frozenset({Op.ABS, Op.LT, Op.LE, Op.GT, Op.GE, Op.MAXIMUM, Op.MINIMUM})
BOOL_ONLY = frozenset({Op.AND, Op.OR, Op.INVERT})


def region_dtype(node: Node) -> np.dtype | None:
    """The arithmetic dtype a fusable node works in (BOOL for purely boolean logic), or None
    when the node cannot be fused exactly."""
    op = node.op
    if op not in TEMPLATES:
        return None
    dts = {i.dtype for i in node.inputs} | {node.dtype}
    if op is Op.WHERE:
        dts = {node.inputs[1].dtype, node.inputs[2].dtype, node.dtype}
        if node.inputs[0].dtype != BOOL:
            return None
    arith = dts - {BOOL}
    if op in BOOL_ONLY:
        return BOOL if not arith else None
    if len(arith) != 1:
        return None
    (dt,) = arith
    if dt not in ARITH:
        return None
    if op in FLOAT_ONLY and dt.kind not in "fc":
        return None
    if op in NOT_COMPLEX and dt.kind == "c":
        return None
    if op is Op.CONJ and dt.kind != "c":
        return None
    # comparisons produce bool from dt inputs; everything else keeps dt
    if node.dtype != dt and not (
        node.dtype == BOOL and op in (Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE)
    ):
        return None
    return dt


def expression(program: tuple) -> str:
    """The numexpr expression of a FUSED program; inputs are named in0, in1, ..."""
    exprs: list[str] = []
    for op, _attrs, args in program:
        parts = [f"in{i}" if kind == "in" else exprs[i] for kind, i in args]
        if op is Op.MUL and args[0] == args[1] and args[0][0] == "step":
            exprs.append(f"({parts[0]} ** 2)")  # evaluates the shared operand once
        else:
            exprs.append(TEMPLATES[op].format(*parts))
    return exprs[-1]


def _joins(x_dt: np.dtype | None, dt: np.dtype) -> bool:
    # explicit None test: numpy compares dtypes with None as with float64
    return x_dt is not None and x_dt in (dt, BOOL)


def _grow(root: Node, uses: dict[int, int], taken: set[int], dt: np.dtype, big: bool = False):
    """Absorb fusable inputs that feed nothing else into root's region, breadth-first. A value
    read twice by one multiply (``y * y``) is absorbed too: it is written ``y**2``, which
    numexpr computes from one evaluation of ``y`` (numexpr has no common subexpressions, so
    any other repeated use would compute the whole subtree twice). When the region passes a cap,
    the members added last are given back until it fits. Returns (program, inputs, member
    ids), or None for a region of one op. ``big``: the CPU's chunked-kernel caps instead."""
    max_ops = BIG_MAX_OPS if big else MAX_OPS
    members = [root]
    member_ids = {id(root)}
    frontier = deque([root])
    while frontier and len(members) < max_ops:
        node = frontier.popleft()
        for x in dict.fromkeys(node.inputs):
            if (
                id(x) not in member_ids
                and id(x) not in taken
                and (uses.get(id(x), 0) == 1 or _square_of(node, x, uses))
                and OPS[x.op].kind is OpKind.ELEMENTWISE
                and _joins(region_dtype(x), dt)
                and len(members) < max_ops
            ):
                members.append(x)
                member_ids.add(id(x))
                frontier.append(x)
    while len(members) >= 2:
        program, inputs = _program(members, member_ids)
        if big or (len(inputs) <= MAX_INPUTS and len(expression(program)) <= MAX_CHARS):
            return program, inputs, member_ids
        member_ids.discard(id(members.pop()))  # BFS order: the last one feeds an earlier one
    return None


def _program(members: list[Node], member_ids: set[int]):
    # evaluation order: reversed BFS order puts every member after its member inputs
    step_of: dict[int, int] = {}
    inputs: list[Node] = []
    input_of: dict[int, int] = {}
    program = []
    for m in members[::-1]:
        args = []
        for x in m.inputs:
            if id(x) in member_ids:
                args.append(("step", step_of[id(x)]))
            else:
                if id(x) not in input_of:
                    input_of[id(x)] = len(inputs)
                    inputs.append(x)
                args.append(("in", input_of[id(x)]))
        step_of[id(m)] = len(program)
        program.append((m.op, m.attrs, tuple(args)))
    return tuple(program), inputs


def _square_of(node: Node, x: Node, uses: dict[int, int]) -> bool:
    return node.op is Op.MUL and node.inputs[0] is x and node.inputs[1] is x and uses[id(x)] == 2


@register_pass("fuse_elementwise")
def fuse_elementwise(graph: Graph, ctx: PassContext) -> Graph:
    """Replace elementwise regions by FUSED nodes (see the module docstring)."""
    uses = use_counts(graph)
    taken: set[int] = set()
    regions: dict[int, tuple] = {}  # id(root) -> (program, inputs)
    target = ctx.options.target
    cpu = isinstance(target, str) and target.split(":")[0] == "cpu"
    for node in reversed(graph.order):
        if id(node) in taken or OPS[node.op].kind is not OpKind.ELEMENTWISE:
            continue
        dt = region_dtype(node)
        if dt is None:
            continue
        grown = _grow(node, uses, taken, dt, cpu and node.size >= BIG_REGION)
        if grown is None:
            continue
        program, inputs, member_ids = grown
        taken |= member_ids
        regions[id(node)] = (program, inputs)
    if not regions:
        ctx.record("fuse_elementwise", regions=0, ops_fused=0)
        return graph
    new: dict[int, Node] = {}
    for node in graph.order:
        if id(node) in regions:
            program, inputs = regions[id(node)]
            res = make_node(
                Op.FUSED,
                tuple(new[id(i)] for i in inputs),
                (program, node.shape, node.dtype.str),
            )
        elif id(node) in taken:
            continue  # inside a region: computed by its FUSED node
        else:
            ins = tuple(new[id(i)] for i in node.inputs)
            same = all(a is b for a, b in zip(ins, node.inputs))
            res = node if same else make_node(node.op, ins, node.attrs)
        new[id(node)] = res
    ctx.record(
        "fuse_elementwise",
        regions=len(regions),
        ops_fused=sum(len(p) for p, _ in regions.values()),
    )
    return graph.with_outputs(tuple(new[id(o)] for o in graph.outputs))
