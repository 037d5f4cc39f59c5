"""fuse_elementwise: maximal elementwise regions become one FUSED node.

    exp(a * b + c) > 0.5 -> fused[(exp((in0 * in1) + in2) > in3)](a, b, c, 0.5)

A region grows from each elementwise node into its elementwise inputs that have no other
consumer (so nothing is computed twice), broadcasting included. What a region may hold is the
backend's to say, not this pass's: a ``FusionLimits`` record (ops, the arithmetic dtypes a
region computes in, per-op dtype restrictions, caps) tells it, so the pass owns no kernel
templates and knows no device. Within those limits a region computes in one arithmetic dtype
plus booleans from comparisons, and is capped (``max_ops`` ops, ``max_inputs`` inputs,
``max_size`` of generated source), so a 100,000-node chain becomes a chain of fused nodes.
Where the limits allow it (``big_elements``), a region over that many elements may take
``big_max_ops`` ops with any number of inputs (the CPU's chunked ufunc kernels have none of
numexpr's limits, and each region boundary saved is one pass over memory). Scalars enter as
0-d inputs, never as literals, so no kernel language can promote them.

The limits come in the options: ``fusion`` (a FusionLimits: the target backend's), else the
limits the runtime registered for the device kind of ``target`` (``register_fusion_limits``;
runtime/codegen registers every backend's at import), else those registered for no target.
With none registered (the runtime not imported) the pass fuses nothing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node, make_node
from tenloom.graph.ops import OPS, Op, OpKind
from tenloom.passes.options import Options
from tenloom.passes.registry import PassContext, register_pass
from tenloom.passes.rewrite import use_counts

BOOL = np.dtype(bool)
_COMPARISONS = frozenset({Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE})


@dataclass(frozen=True)
class FusionLimits:
    """What fused regions a backend's kernels take: the data this pass decides with."""

    ops: frozenset[Op]  # ops a region may hold
    dtypes: frozenset[np.dtype]  # the arithmetic dtypes a region may compute in (bool besides)
    float_only: frozenset[Op] = frozenset()  # ops taken in floating and complex dtypes only
    not_complex: frozenset[Op] = frozenset()  # ops not taken in complex dtypes
    complex_only: frozenset[Op] = frozenset()  # ops taken in complex dtypes only
    bool_only: frozenset[Op] = frozenset()  # ops taken on booleans only (logic)
    max_ops: int = 48
    max_inputs: int = 24
    max_size: int = 4000  # of a region's generated source, as ``source_size`` measures it
    source_size: Callable[[tuple], int] | None = None  # program -> size (None: not capped)
    big_elements: int | None = None  # regions this big may take big_max_ops ops, any inputs
    big_max_ops: int = 4096
    big_max_inputs: int | None = None  # a big region's inputs (None: any; issue 23: CUDA's
    # generated kernels take their inputs as kernel parameters, which are bounded)


LIMITS: dict[str | None, FusionLimits] = {}  # device kind (None: no target) -> limits


def register_fusion_limits(kind: str | None, limits: FusionLimits) -> None:
    """The limits for graphs whose ``target`` is a device of ``kind`` (the runtime registers
    every backend's at import; this pass imports no runtime)."""
    LIMITS[kind] = limits


def limits_for(options: Options) -> FusionLimits | None:
    """The limits a run of the pass works with (see the module docstring)."""
    if options.fusion is not None:
        return options.fusion
    target = options.target
    kind = target.split(":")[0] if isinstance(target, str) else None
    return LIMITS.get(kind, LIMITS.get(None))


def region_dtype(node: Node, limits: FusionLimits) -> np.dtype | None:
    """The arithmetic dtype a fusable node works in (BOOL for purely boolean logic), or None
    when ``limits`` say no kernel computes it exactly in a region."""
    op = node.op
    if op not in limits.ops:
        return None
    dts = {i.dtype for i in node.inputs} | {node.dtype}
    if op is Op.WHERE:
        dts = {node.inputs[1].dtype, node.inputs[2].dtype, node.dtype}
        if node.inputs[0].dtype != BOOL:
            return None
    arith = dts - {BOOL}
    if op in limits.bool_only:
        return BOOL if not arith else None
    if len(arith) != 1:
        return None
    (dt,) = arith
    if dt not in limits.dtypes:
        return None
    if op in limits.float_only and dt.kind not in "fc":
        return None
    if op in limits.not_complex and dt.kind == "c":
        return None
    if op in limits.complex_only and dt.kind != "c":
        return None
    # comparisons produce bool from dt inputs; everything else keeps dt
    if node.dtype != dt and not (node.dtype == BOOL and op in _COMPARISONS):
        return None
    return dt


def _joins(x_dt: np.dtype | None, dt: np.dtype) -> bool:
    # explicit None test: numpy compares dtypes with None as with float64
    return x_dt is not None and x_dt in (dt, BOOL)


def _grow(
    root: Node,
    uses: dict[int, int],
    taken: set[int],
    dt: np.dtype,
    limits: FusionLimits,
    big: bool = False,
):
    """Absorb fusable inputs that feed nothing else into root's region, breadth-first. A value
    read twice by one multiply (``y * y``) is absorbed too: code generators write it as a
    square of one evaluation of ``y`` (numexpr has no common subexpressions, so any other
    repeated use would compute the whole subtree twice). When the region passes a cap, the
    members added last are given back until it fits. Returns (program, inputs, member ids), or
    None for a region of one op. ``big``: the limits' caps for big regions instead."""
    max_ops = limits.big_max_ops if big else limits.max_ops
    size = limits.source_size
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
                and _joins(region_dtype(x, limits), dt)
                and len(members) < max_ops
            ):
                members.append(x)
                member_ids.add(id(x))
                frontier.append(x)
    cap = limits.big_max_inputs
    if big and cap is not None:  # big_max_inputs: the longest BFS prefix within the cap
        members = members[: _prefix_within(members, cap)]
        member_ids = {id(m) for m in members}
    while len(members) >= 2:
        program, inputs = _program(members, member_ids)
        if big and (limits.big_max_inputs is None or len(inputs) <= limits.big_max_inputs):
            return program, inputs, member_ids
        if not big and (
            len(inputs) <= limits.max_inputs and (size is None or size(program) <= limits.max_size)
        ):
            return program, inputs, member_ids
        member_ids.discard(id(members.pop()))  # BFS order: the last one feeds an earlier one
    return None


def _prefix_within(members: list[Node], cap: int) -> int:
    """The length of the longest prefix of ``members`` (BFS order: each member an input of an
    earlier one) whose region has at most ``cap`` inputs, counted in one pass (rebuilding the
    program per length, as the loop after it does, costs O(n^2) per region, cubic per graph,
    at big regions' 4096 ops). At least 1."""
    inside: set[int] = set()
    outside: set[int] = set()
    best = 1
    for k, m in enumerate(members):
        inside.add(id(m))
        outside.discard(id(m))
        outside.update(id(x) for x in m.inputs if id(x) not in inside)
        if len(outside) <= cap:
            best = k + 1
    return best


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
    limits = limits_for(ctx.options)
    if limits is None:  # no backend has said what its kernels take
        ctx.record("fuse_elementwise", regions=0, ops_fused=0)
        return graph
    uses = use_counts(graph)
    taken: set[int] = set()
    regions: dict[int, tuple] = {}  # id(root) -> (program, inputs)
    big_elements = limits.big_elements
    for node in reversed(graph.order):
        if id(node) in taken or OPS[node.op].kind is not OpKind.ELEMENTWISE:
            continue
        dt = region_dtype(node, limits)
        if dt is None:
            continue
        big = big_elements is not None and node.size >= big_elements
        grown = _grow(node, uses, taken, dt, limits, big)
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
