"""How each graph op runs on the OpenCL backend, from the backend's kernel factories
(``ew_kernel``, ``gather_kernel``, ``reduce_kernel``, ``gemm_kernel``, ...): contractions,
movement, leaves, and the ops that only appear with passes off or under ``memory_limit``.
Elementwise ops and reductions are the backend's own (runtime/backends/opencl/__init__.py)."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import numpy as np
from tenloom.graph.errors import DeviceError
from tenloom.graph.node import Node
from tenloom.graph.ops import Op
from tenloom.graph.ops.leaf import full_value
from tenloom.graph.ops.movement import diagonal_len
from tenloom.passes import LOWERING_PIPELINE
from tenloom.runtime.backends.opencl import source as src
from tenloom.runtime.program import compile_program, run

if TYPE_CHECKING:
    from tenloom.runtime.backends.opencl import Backend

# passes that turn a many-operand einsum into pairwise CONTRACTs and one-operand einsums
LOWERING = LOWERING_PIPELINE  # declared with the other pipelines in passes/__init__.py


def _prepare_operand(be: Backend, x: Node, labels, drop, dtype, *layouts):
    """Steps making a CONTRACT operand GEMM-ready: sum its own labels out, cast to the result
    dtype, and bring it to one of ``layouts`` (label orders; the first one is copied to when
    none fits). Returns (run, index of the layout used)."""
    steps: list = []
    kept = tuple(lab for i, lab in enumerate(labels) if i not in drop)
    st = src.c_strides(x.shape)
    shape = tuple(s for i, s in enumerate(x.shape) if i not in drop)
    if drop:
        # summed in the result dtype, as NumPy's einsum does (a bool operand of a float
        # contraction is counted, not ORed; int32 sums in an int64 contraction do not wrap)
        out_dims = [(x.shape[i], st[i]) for i in range(x.ndim) if i not in drop]
        red_dims = [(x.shape[i], st[i]) for i in drop]
        steps.append(be.reduce_kernel(x.dtype, dtype, "add", out_dims, red_dims, shape))
    elif x.dtype != dtype:
        steps.append(be.cast_kernel(shape, x.dtype, dtype))
    layouts = tuple(tuple(layout) for layout in layouts)
    if kept in layouts:
        return _chain(steps), layouts.index(kept)
    steps.append(be.permute_kernel(shape, dtype, [kept.index(lab) for lab in layouts[0]]))
    return _chain(steps), 0


def _chain(steps: list) -> Any:
    """One function running ``steps`` (functions of one array; None for none) in turn."""
    steps = [step for step in steps if step is not None]

    def run(v):
        for step in steps:
            v = step(v)
        return v

    return run


def _contract(be: Backend, node: Node):
    a, b = node.inputs
    a_labels, b_labels, out, batch, left, con, right = node.attrs
    sizes = dict(zip(a_labels, a.shape))
    sizes.update(zip(b_labels, b.shape))
    a_drop = tuple(i for i, lab in enumerate(a_labels) if lab not in b_labels and lab not in out)
    a_kept = {lab for i, lab in enumerate(a_labels) if i not in a_drop}
    b_drop = tuple(i for i, lab in enumerate(b_labels) if lab not in a_kept and lab not in out)
    dt = node.dtype
    prep_a, ta = _prepare_operand(
        be, a, a_labels, a_drop, dt, batch + left + con, batch + con + left
    )
    prep_b, tb = _prepare_operand(
        be, b, b_labels, b_drop, dt, batch + con + right, batch + right + con
    )
    nb, nl, nk, nr = (math.prod(sizes[lab] for lab in g) for g in (batch, left, con, right))
    natural = batch + left + right
    if tuple(out) == batch + right + left and tuple(out) != natural:
        # C^T = op(B)^T op(A)^T: the output comes out in its own order, no copy
        prod = be.product_kernel(dt, nb, nr, nl, nk, not tb, not ta, node.shape)

        def run_swapped(x, y):
            return prod(prep_b(y), prep_a(x))

        return run_swapped
    c_shape = tuple(sizes[lab] for lab in natural)
    prod = be.product_kernel(dt, nb, nl, nr, nk, bool(ta), bool(tb), c_shape)
    post = be.permute_kernel(c_shape, dt, [natural.index(lab) for lab in out])

    def run(x, y):
        c = prod(prep_a(x), prep_b(y))
        return c.reshape(node.shape) if post is None else post(c)

    return run


def _matmul(be: Backend, node: Node):
    """MATMUL as left unrewritten (no passes): broadcast the batch axes, one batched GEMM."""
    a, b = node.inputs
    dt = node.dtype
    ash = (1,) + a.shape if a.ndim == 1 else a.shape
    bsh = b.shape + (1,) if b.ndim == 1 else b.shape
    m, k, n = ash[-2], ash[-1], bsh[-1]
    batch = tuple(np.broadcast_shapes(ash[:-2], bsh[:-2]))
    nb = math.prod(batch)

    def operand(x: Node, shape):
        full = batch + shape[-2:]
        return _chain(
            [
                lambda v: v.reshape(shape),
                None if x.dtype == dt else be.cast_kernel(shape, x.dtype, dt),
                None
                if shape == full
                else be.gather_kernel(full, dt, src.broadcast_strides(shape, full)),
            ]
        )

    pa, pb = operand(a, ash), operand(b, bsh)
    prod = be.product_kernel(dt, nb, m, n, k, False, False, node.shape)
    return lambda x, y: prod(pa(x), pb(y))


def _tensordot(be: Backend, node: Node):
    """TENSORDOT as left unrewritten (no passes): free axes against paired axes, one GEMM."""
    a, b = node.inputs
    axes_a, axes_b = node.attrs
    dt = node.dtype
    free_a = [i for i in range(a.ndim) if i not in axes_a]
    free_b = [i for i in range(b.ndim) if i not in axes_b]
    m = math.prod(a.shape[i] for i in free_a)
    n = math.prod(b.shape[i] for i in free_b)
    k = math.prod(a.shape[i] for i in axes_a)

    def operand(x: Node, perm):
        cast = None if x.dtype == dt else be.cast_kernel(x.shape, x.dtype, dt)
        return _chain([cast, be.permute_kernel(x.shape, dt, perm)])

    pa = operand(a, free_a + list(axes_a))
    pb = operand(b, list(axes_b) + free_b)
    prod = be.product_kernel(dt, 1, m, n, k, False, False, node.shape)
    return lambda x, y: prod(pa(x), pb(y))


def _einsum(be: Backend, node: Node):
    if len(node.inputs) > 1:
        return _lowered(be, node)
    (x,) = node.inputs
    (labels,), out = node.attrs
    st = src.c_strides(x.shape)
    size, stride = {}, {}
    for lab, n, s in zip(labels, x.shape, st):
        size[lab] = n
        stride[lab] = stride.get(lab, 0) + s  # a repeated label walks the diagonal
    out_dims = [(size[lab], stride[lab]) for lab in out]
    summed = [lab for lab in dict.fromkeys(labels) if lab not in out]
    if not summed:
        return be.gather_kernel(node.shape, x.dtype, [s for _, s in out_dims])
    red_dims = [(size[lab], stride[lab]) for lab in summed]
    return be.reduce_kernel(x.dtype, node.dtype, "add", out_dims, red_dims, node.shape)


def _lowered(be: Backend, node: Node):
    """A many-operand EINSUM (only seen with passes off): the lowering passes turn it into
    pairwise CONTRACTs and one-operand einsums, run here as a small program."""
    from tenloom.graph.graph import Graph
    from tenloom.graph.node import make_node
    from tenloom.graph.ops.leaf import next_placeholder_id
    from tenloom.passes import run_pipeline

    phs = [
        make_node(Op.PLACEHOLDER, (), (f"in{k}", next_placeholder_id(), x.shape, x.dtype.str))
        for k, x in enumerate(node.inputs)
    ]
    graph, _ = run_pipeline(
        Graph((make_node(node.op, tuple(phs), node.attrs),)), LOWERING, {"optimize": "greedy"}
    )
    for n in graph.order:
        if n.op is Op.EINSUM and len(n.inputs) > 1:
            raise DeviceError(f"{be.kind}: einsum {n.attrs} was not lowered to pairwise GEMMs")
    prog = compile_program(graph, be)
    return lambda *xs: _run_program(prog, be, {id(p): x for p, x in zip(phs, xs)})[0]


def _run_program(prog: Any, be: Backend, feed: dict[int, Any]) -> list:
    """One run of a compiled sub-program (the step loop of runtime/program.py); placeholders
    read ``feed`` (id -> device array)."""
    return run(prog, feed, be, None, upload=False, pool=False)


def _sliced(be: Backend, node: Node):
    """SLICED (a network cut into slices to fit ``memory_limit``): the per-slice network is
    compiled once for this device; each slice gathers its operands' slices, runs it, and adds
    its part into the result in place. Slices run one after another on the device, in order
    (deterministic); spreading them over threads, several devices or Dask is what the CPU and
    CUDA backends do through runtime/sliced.py, whose runner works on array views."""
    from tenloom.graph.ops.sliced import n_slices, slice_values
    from tenloom.runtime.sliced import LAST_RUN, optimized_inner

    terms, out, sliced, _path, wrt = node.attrs[:5]
    if node.attrs.semiring is not None:  # its parts would need the semiring's accumulation
        raise DeviceError(
            f"{be.kind}: a sliced {node.attrs.semiring} network (memory_limit=) runs on the cpu "
            "and cuda devices only; evaluate it there, or without memory_limit on OpenCL"
        )
    fixed = {lab for lab, _ in sliced}
    shapes = tuple(x.shape for x in node.inputs)
    graph, leaves = optimized_inner(node.attrs, shapes, tuple(x.dtype.str for x in node.inputs))
    prog = compile_program(graph, be)

    def cut(shape, term):
        """(kept sizes, kept strides, base(values)) of the slice of a C-ordered array."""
        st = src.c_strides(tuple(shape))
        keep = [i for i, lab in enumerate(term) if lab not in fixed]
        pinned = [(term[i], st[i]) for i in range(len(term)) if term[i] in fixed]
        return (
            tuple(shape[i] for i in keep),
            [st[i] for i in keep],
            lambda values: sum(values[lab] * s for lab, s in pinned),
        )

    takes = []
    for x, term in zip(node.inputs, [*terms, out] if wrt is not None else terms):
        shape, strides, base = cut(x.shape, term)
        gather = be.gather_kernel(shape, x.dtype, strides) if len(shape) < x.ndim else None
        takes.append((gather, base))
    targets = [(node.shape, out, 0)]
    if wrt is not None:
        offsets = np.cumsum([0] + [math.prod(shapes[k]) for k in wrt])
        targets = [(shapes[k], terms[k], int(off)) for k, off in zip(wrt, offsets)]
    puts = []
    for (shape, term, offset), part in zip(targets, graph.outputs):
        part_shape, strides, base = cut(shape, term)
        add = be.accumulate_kernel(part_shape, part.dtype, node.dtype, strides)
        puts.append((add, base, offset))
    n = n_slices(node.attrs)

    def run(*xs):
        t0 = time.perf_counter()
        acc = be.zeros(node.shape, node.dtype)
        for k in range(n):
            values = slice_values(node.attrs, k)
            feed = {
                id(leaf): x if gather is None else gather(x, base(values))
                for leaf, (gather, base), x in zip(leaves, takes, xs)
            }
            for (add, base, offset), part in zip(puts, _run_program(prog, be, feed)):
                add(acc, part, offset + base(values))
        LAST_RUN.workers[:], LAST_RUN.slices[:] = [be.kind], [n]
        LAST_RUN.seconds[:] = [time.perf_counter() - t0]
        return acc

    return run


def _trace(be: Backend, node: Node):
    (x,) = node.inputs
    offset, a1, a2 = node.attrs
    st = src.c_strides(x.shape)
    n = diagonal_len(x.shape[a1], x.shape[a2], offset)
    base = offset * st[a2] if offset >= 0 else -offset * st[a1]
    out_dims = [(s, st[i]) for i, s in enumerate(x.shape) if i not in (a1, a2)]
    red = [(n, st[a1] + st[a2])]
    return be.reduce_kernel(x.dtype, node.dtype, "add", out_dims, red, node.shape, base)


def _diagonal(be: Backend, node: Node):
    (x,) = node.inputs
    offset, a1, a2 = node.attrs
    st = src.c_strides(x.shape)
    base = offset * st[a2] if offset >= 0 else -offset * st[a1]
    strides = [st[i] for i in range(x.ndim) if i not in (a1, a2)] + [st[a1] + st[a2]]
    return be.gather_kernel(node.shape, x.dtype, strides, base)


def _transpose(be: Backend, node: Node):
    (x,) = node.inputs
    run = be.permute_kernel(x.shape, x.dtype, node.attrs.perm)
    return run if run is not None else (lambda v: v)


def _broadcast(be: Backend, node: Node):
    (x,) = node.inputs
    return be.gather_kernel(node.shape, x.dtype, src.broadcast_strides(x.shape, node.shape))


def _slice(be: Backend, node: Node):
    (x,) = node.inputs
    st = src.c_strides(x.shape)
    # an empty result launches nothing, so an out-of-range start never gets read
    spec = node.attrs.spec
    base = sum(start * s for (start, _, _), s in zip(spec, st))
    strides = [step * s for (_, _, step), s in zip(spec, st)]
    return be.gather_kernel(node.shape, x.dtype, strides, base)


def _slice_scatter(be: Backend, node: Node):
    """Zeros of the node's shape with the operand copied to its basic-index positions."""
    (x,) = node.inputs
    spec = node.attrs.spec
    st = src.c_strides(node.shape)
    base = sum(start * s for (start, _, _), s in zip(spec, st))
    strides = [step * s for (_, _, step), s in zip(spec, st)]
    copy = be.copier(node.dtype.itemsize, x.shape, src.c_strides(x.shape), 0, strides, base)

    def run(x):
        out = be.zeros(node.shape, node.dtype)
        copy(out, x)
        return out

    return run


def _concat(be: Backend, node: Node):
    (axis,) = node.attrs
    out_st = src.c_strides(node.shape)
    pieces, offset = [], 0
    for x in node.inputs:
        cast = None if x.dtype == node.dtype else be.cast_kernel(x.shape, x.dtype, node.dtype)
        copy = be.copier(
            node.dtype.itemsize, x.shape, src.c_strides(x.shape), 0, out_st, offset * out_st[axis]
        )
        pieces.append((cast, copy))
        offset += x.shape[axis]

    def run(*xs):
        out = be.empty(node.shape, node.dtype)
        for (cast, copy), x in zip(pieces, xs):
            copy(out, x if cast is None else cast(x))
        return out

    return run


def _reshape(be: Backend, node: Node):
    shape = node.attrs.shape
    return lambda x: x.reshape(shape)


def _layout(be: Backend, node: Node):
    """LAYOUT asks for a memory order that several contractions share; arrays here are always
    C-ordered in their logical axis order, so the values pass unchanged (and each CONTRACT
    copies into the order its GEMM reads, where it differs)."""
    return lambda x: x


def _full(be: Backend, node: Node):
    shape, dt = node.attrs.shape, node.dtype
    value = full_value(node.attrs)

    def run():
        out = be.empty(shape, dt)
        be.fill(out, value)
        return out

    return run


def _eye(be: Backend, node: Node):
    n, m, k, _ = node.attrs
    knl = be.kernel_from_source(src.eye_source(node.dtype, be.fp64), "eye")
    size = n * m

    def run():
        out = be.empty((n, m), node.dtype)
        if size:
            be.launch(knl, (size,), None, out.data, np.int64(m), np.int64(k), np.int64(size))
        return out

    return run


def _semiring(be: Backend, node: Node):  # semiring: runtime/backends/opencl/semiring.py
    from tenloom.runtime.backends.opencl.semiring import semiring_kernel

    return semiring_kernel(be, node)


HANDLERS = {
    Op.CONTRACT: _contract,
    Op.MATMUL: _matmul,
    Op.TENSORDOT: _tensordot,
    Op.EINSUM: _einsum,
    Op.SEMIRING_EINSUM: _semiring,  # semiring
    Op.TRACE: _trace,
    Op.DIAGONAL: _diagonal,
    Op.TRANSPOSE: _transpose,
    Op.BROADCAST: _broadcast,
    Op.SLICE: _slice,
    Op.SLICE_SCATTER: _slice_scatter,
    Op.CONCAT: _concat,
    Op.RESHAPE: _reshape,
    Op.LAYOUT: _layout,
    Op.SLICED: _sliced,
    Op.FULL: _full,
    Op.EYE: _eye,
}
