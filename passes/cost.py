"""The cost model: flops per node and the predicted peak memory of a graph's schedule.

Each op's cost rule (``OpDef.cost``, beside the op in graph/ops/) counts its multiply-adds, or
element operations for the rest; flops are real floating-point operations: 2 per multiply-add
of a contraction, a complex multiply-add counted as 4 real ones (8 flops). An n-ary einsum that
has no order yet is costed as contracted left to right, which is what runs when the order
search is off.
"""

from __future__ import annotations

import math

from tenloom.graph.graph import Graph
from tenloom.graph.node import Node
from tenloom.graph.ops import OPS, Op, OpKind
from tenloom.graph.ops.contract import network_madds, pairwise_madds  # noqa: F401  (re-exported)
from tenloom.graph.ops.sliced import path_steps, slice_itemsize, slice_peak_bytes
from tenloom.passes.eliminate_permutations import plan_contraction


def _complex_factor(node: Node) -> int:
    return 4 if node.dtype.kind == "c" else 1


def einsum_sizes(node: Node) -> dict:
    sizes = {}
    for x, t in zip(node.inputs, node.attrs.terms):
        sizes.update(zip(t, x.shape))
    return sizes


def node_madds(node: Node) -> int:
    """Multiply-adds (or plain ops, for elementwise work) of one node: its op's cost rule."""
    return OPS[node.op].cost(node)


def node_flops(node: Node) -> int:
    factor = 2 if OPS[node.op].kind is OpKind.CONTRACTION else 1
    return node_madds(node) * factor * _complex_factor(node)


def graph_flops(graph: Graph) -> int:
    return sum(node_flops(n) for n in graph.order)


# leaves whose memory exists before evaluation (full and eye are allocated when they run)
PREEXISTING = frozenset({Op.CONST, Op.PLACEHOLDER})


def transient_bytes(node: Node) -> int:
    """Memory a node needs only while it runs: one slice of a SLICED network."""
    if node.op is not Op.SLICED:
        return 0
    return slice_peak_bytes(node.attrs, [x.shape for x in node.inputs], slice_itemsize(node))


def peak_bytes(graph: Graph, order: list[Node] | None = None) -> int:
    """Predicted peak bytes of intermediates and outputs when run in ``order`` (default
    ``graph.schedule``, the order the runtime executes).

    Leaves (constants and bound inputs) are not counted: they exist before evaluation. Views
    (movement ops) are counted as new buffers, which over-estimates slightly.
    """
    order = graph.schedule if order is None else order
    remaining: dict[int, int] = {}
    for node in order:
        for i in node.inputs:
            remaining[id(i)] = remaining.get(id(i), 0) + 1
    outputs = {id(o) for o in graph.outputs}
    live = peak = 0
    for node in order:
        if node.op not in PREEXISTING:
            live += node.nbytes
            peak = max(peak, live + transient_bytes(node))
        for i in node.inputs:
            remaining[id(i)] -= 1
            if remaining[id(i)] == 0 and id(i) not in outputs and i.op not in PREEXISTING:
                live -= i.nbytes
    return peak


# What a copied element, a written element and a contraction call cost, in multiply-adds of
# the contraction's own dtype, for choosing between contraction trees on the CPU.
# Real (float64): fitted on 24 trees of W1 and 13 of W3, 2-core AVX-512 machine: a GEMM
# multiply-add ~0.01 ns, a transposing copy ~1 ns an element, a call ~3 us; the results
# written did not add to that fit (WRITE_MADDS 0).
# Complex (complex128): fitted on three trees of W4 (Sycamore m10, 163 skinny zgemms), time ~
# 7.2e-11 s a multiply-add + 2.5e-8 s an element written, i.e. ~340 complex multiply-adds an
# element written; in those trees every written element is about one copied element too (the
# next GEMM lays it out), so the fit cannot tell the two apart and they share it (issue 22;
# measured again on 35 W4 trees here: the fit predicts 36.9 s for the tree that ran in 36.5 s).
COPY_MADDS = 100
WRITE_MADDS = 0
COPY_MADDS_COMPLEX = 170
WRITE_MADDS_COMPLEX = 170
CALL_MADDS = 300_000


def element_weights(complex_: bool = False) -> tuple[int, int]:
    """(copied, written): what an element costs in multiply-adds of the dtype (see above)."""
    if complex_:
        return COPY_MADDS_COMPLEX, WRITE_MADDS_COMPLEX
    return COPY_MADDS, WRITE_MADDS


def layout_cost(terms, out, sizes, ssa, complex_: bool = False) -> float:
    """The run time of contracting a network along the SSA path ``ssa``, in multiply-adds:
    its multiply-adds, plus the elements its GEMMs would copy to lay operands out (each
    intermediate laid out as the permutation pass leaves a GEMM result: batch, left, right)
    and the elements they write, each weighed by its measured cost for real or complex
    (``complex_``) dtypes, plus a fixed cost per contraction. Trees with equal flops differ up
    to 2x in run time on many-index networks by what they copy; the flops alone do not see
    it, and skinny complex GEMMs (W4) spend most of their time writing results."""
    copy_w, write_w = element_weights(complex_)
    mem = [tuple(t) for t in terms]  # each operand's labels in memory order
    total = 0.0
    for i, j, ta, tb, keep in path_steps(terms, out, ssa):
        n_a, n_b = math.prod(sizes[lab] for lab in ta), math.prod(sizes[lab] for lab in tb)
        (batch, left, _, right), _, copied = plan_contraction(
            ta, tb, keep, mem[i], mem[j], sizes, n_a, n_b
        )
        written = math.prod(sizes[lab] for lab in keep)
        total += pairwise_madds(ta, tb, keep, sizes) + copy_w * copied + write_w * written
        total += CALL_MADDS
        mem.append(batch + left + right)
    return total
