"""The CPU backend: NumPy for each op's registered reference; big fused regions chunk by chunk
through NumPy's ufuncs (cpu_fused.py), small ones of several ops and those that cannot be
chunked through one compiled numexpr call (whose transcendental functions may round a few ulps
differently from NumPy's; complex regions only when numexpr computes them as NumPy does, see
NUMEXPR_COMPLEX_EXACT), the smallest through NumPy's ufuncs one by one.

Supported dtypes: all of tenloom's (bool, int8 to int64, uint8 to uint64, float16, float32,
float64, complex64, complex128). numexpr takes only regions in int32, int64, float32, float64 or
complex128 (see passes/fuse_elementwise.py); the small and unsigned integers run through NumPy's
ufuncs, so their results, wraparound included, are NumPy's bit for bit.
"""

from __future__ import annotations

import numpy as np
from tenloom.graph.dtypes import SUPPORTED
from tenloom.graph.node import Node
from tenloom.graph.ops import OPS, Op, as_array
from tenloom.graph.ops.elementwise import BINARY, UNARY
from tenloom.runtime import buffers
from tenloom.runtime.backends.base import BackendBase
from tenloom.runtime.backends.cpu_fused import chunked_kernel
from tenloom.runtime.determinism import DETERMINISTIC
from tenloom.runtime.kernels import copy_plan
from tenloom.runtime.kernels.contract import contract_kernel
from tenloom.runtime.kernels.einsum import einsum_kernel

SMALL = 2048  # elements; smaller fused regions run step by step in NumPy or through numexpr
# numexpr's names for our dtypes in a compiled signature (its "float" is float32)
NUMEXPR_TYPES = {"|b1": bool, "<i4": np.int32, "<i8": np.int64, "<f4": float, "<f8": np.float64}
NUMEXPR_TYPES["<c16"] = complex
NUMEXPR_MIN_OPS = 6  # ops in a small region from which one numexpr call beats the ufunc calls
# What numexpr runs, and why its results are NumPy's. Real dtypes: every op of the fusion
# pass's templates (passes/fuse_elementwise.TEMPLATES). Integer arithmetic wraps as NumPy's;
# float + - * / and comparisons are single IEEE operations, bit for bit NumPy's; maximum/minimum
# are spelt out with NumPy's NaN and signed-zero rules; exp, log, sin, cos, tanh, sqrt and **
# come from the C library, within an ulp or two of NumPy's loops (x ** -1 and x ** 0.5 may
# become 1/x and sqrt(x), correctly rounded) with the same overflow, underflow and special
# values. Complex dtypes: only the ops below, which act on real and imaginary parts separately
# (or compare them). numexpr's complex * / exp log sqrt sin cos tanh ** use textbook formulas:
# division through (a*conj(b)) / (c*c + d*d) and sqrt through |z| overflow for finite inputs
# ((1e300+1e300j) / (3e10+4e10j) gave nan+nanj, sqrt(1.8e308+0j) inf), non-finite inputs give
# NaN where NumPy's C99 functions give inf or an exact 0, and NumPy's complex * fuses its
# multiply-adds where the CPU has FMA; complex regions holding them run through NumPy's ufuncs.
NUMEXPR_COMPLEX_EXACT = frozenset(
    {Op.ADD, Op.SUB, Op.NEG, Op.CONJ, Op.EQ, Op.NE, Op.WHERE, Op.AND, Op.OR, Op.INVERT}
)


def may_time() -> bool:
    """Whether a kernel may choose how to run by timing its candidates on this call: not under
    ``deterministic=True``, whose runs must give the same bits whatever the timings say."""
    return not DETERMINISTIC.get()


def compile_steps(program: tuple):
    """Generate ``def fused(in0, in1, ...)`` running the program's ops through NumPy.

    The source is built from our own op table (never from user strings); each step's function
    is bound by name in the namespace, so the body is a straight line of calls.
    """
    n_inputs = 1 + max(
        (i for _, _, args in program for kind, i in args if kind == "in"), default=-1
    )
    namespace: dict = {}
    lines = [f"def fused({', '.join(f'in{i}' for i in range(n_inputs))}):"]
    for j, (op, attrs, args) in enumerate(program):
        argv = ", ".join(f"in{i}" if kind == "in" else f"v{i}" for kind, i in args)
        ufunc = UNARY.get(op) or BINARY.get(op) or (np.where if op is Op.WHERE else None)
        if ufunc is not None and not attrs:
            namespace[f"f{j}"] = ufunc
            lines.append(f"    v{j} = f{j}({argv})")
        else:
            namespace[f"f{j}"] = OPS[op].ref
            namespace[f"a{j}"] = attrs
            lines.append(f"    v{j} = f{j}(({argv},), a{j})")
    lines.append(f"    return v{len(program) - 1}")
    exec("\n".join(lines), namespace)  # noqa: S102 - our own generated code
    return namespace["fused"]


def layout_kernel(perm: tuple):
    """LAYOUT: the operand copied into a buffer whose memory order is ``perm``.

    The copy is a strided copy (by runs where the source keeps a few elements contiguous), one
    copy per index of a short, strided last axis, or a gather (runtime/kernels/copy_plan.py),
    chosen on
    the first call by timing those that apply (they give the same bits, so
    ``deterministic=True`` does not care). Later calls copy the same way (each checks the
    strides, and copies others the plain strided way)."""
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    inv = tuple(inv)
    chosen: list = []

    def decide(xt):
        by_runs = copy_plan.RunCopy(xt) if copy_plan.RunCopy.fits(xt) else None
        strided = np.copyto if by_runs is None else by_runs.into
        ways = [strided]
        if copy_plan.Gather.fits(xt):
            gather = copy_plan.Gather(xt)  # falls back to a strided copy for other strides

            def gathered(out, xt):
                gather.matrix(xt, out.shape, lambda n, dt: out.reshape(-1))

            model = copy_plan.copy_cost(xt) if by_runs is None else by_runs.cost(xt)
            ways.append(gathered)
            if copy_plan.gather_cost(xt) < model:
                ways.reverse()  # ties keep the model's choice
        if by_runs is None and copy_plan.SplitCopy.fits(xt):
            ways.append(copy_plan.SplitCopy(xt).into)  # timed, never the model's pick
        if len(ways) == 1:
            return strided
        scratch = np.empty(xt.shape, xt.dtype)
        return copy_plan.measure(ways, lambda f: f(scratch, xt))

    def run(x):
        xt = x.transpose(perm)
        out = buffers.take(x.size, x.dtype).reshape(xt.shape)
        if not chosen:
            chosen.append(decide(xt))
        chosen[0](out, xt)
        return out.transpose(inv)

    return run


PARALLEL_SUM = 1 << 20  # elements; bigger sums split over the worker threads


def parallel_sum_kernel(node: Node, ref):
    """A sum over a large array, split into chunks along its first reduced axis and summed on
    the evaluation's worker threads. Partial sums are added as they finish, which is fastest
    but makes the rounding depend on timing; under ``deterministic=True`` they are added in
    chunk order, so the result is bitwise the same on every run."""
    import concurrent.futures as cf

    from tenloom.runtime.determinism import DETERMINISTIC, THREADS

    axes, keepdims = node.attrs
    ax = axes[0]
    n = node.inputs[0].shape[ax]

    def run(x):
        threads = THREADS.get()
        if threads < 2 or n < 2:
            return ref((x,), node.attrs)
        chunks = min(n, 16 * threads)
        bounds = [(n * c) // chunks for c in range(chunks + 1)]
        index = [slice(None)] * x.ndim

        def part(c):
            index_c = list(index)
            index_c[ax] = slice(bounds[c], bounds[c + 1])
            return np.sum(x[tuple(index_c)], axis=axes, keepdims=True)

        with cf.ThreadPoolExecutor(threads, thread_name_prefix="tenloom-sum") as pool:
            futures = [pool.submit(part, c) for c in range(chunks)]
            order = futures if DETERMINISTIC.get() else cf.as_completed(futures)
            total = None
            for f in order:
                total = f.result() if total is None else total + f.result()
        return total if keepdims else total.reshape(node.shape)

    return run


def _contract(be: Backend, node: Node):
    a, b = node.inputs
    if node.nbytes < buffers.POOL_MIN_BYTES:  # small: the plain kernel has less to do
        return contract_kernel(a.shape, b.shape, node.attrs, tune=may_time)
    dtype = np.result_type(a.dtype, b.dtype)
    return contract_kernel(a.shape, b.shape, node.attrs, buffers, dtype, may_time)


def _layout(be: Backend, node: Node):
    return layout_kernel(node.attrs[0])


def _einsum(be: Backend, node: Node):
    run = einsum_kernel(*node.attrs)
    return (lambda *xs: as_array(run(*xs))) if node.shape == () else run


def _sliced(be: Backend, node: Node):
    from tenloom.runtime.sliced import sliced_kernel

    return sliced_kernel(node, be)


def _fused(be: Backend, node: Node):
    return be._fused_kernel(node)


def _sum(be: Backend, node: Node):
    if node.attrs[0] and node.inputs[0].size >= PARALLEL_SUM:
        return parallel_sum_kernel(node, OPS[node.op].ref)
    return None  # the reference


class Backend(BackendBase):
    """NumPy on the host (see the module docstring); ``KERNELS`` below, every other op its
    registered NumPy reference."""

    kind = "cpu"
    dtypes = SUPPORTED
    shares_host_memory = True  # from_host is the host array itself: constants are read in place
    KERNELS = {
        Op.CONTRACT: _contract,
        Op.LAYOUT: _layout,
        Op.EINSUM: _einsum,
        Op.SLICED: _sliced,
        Op.FUSED: _fused,
        Op.SUM: _sum,  # big sums over the worker threads
    }

    def from_host(self, array: np.ndarray, constant: bool = False) -> np.ndarray:
        return array

    def to_host(self, array: np.ndarray) -> np.ndarray:
        return array

    def zeros(self, shape: tuple, dtype) -> np.ndarray:
        return np.zeros(shape, dtype)

    def __init__(self) -> None:
        try:
            import numexpr
        except ImportError:  # fused regions then run step by step through NumPy
            numexpr = None
        self._ne = numexpr
        self._small: dict[tuple, object] = {}
        self._compiled: dict[tuple, object] = {}  # numexpr programs (called from any thread)

    def default_kernel(self, node: Node):
        ref, attrs = OPS[node.op].ref, node.attrs
        return lambda *xs: ref(xs, attrs)

    def _small_fused(self, program: tuple):
        """A Python function calling the steps' ufuncs in a row (generated once per program):
        for small arrays the per-call cost is what matters, and this has the least."""
        fn = self._small.get(program)
        if fn is None:
            fn = self._small[program] = compile_steps(program)
        return fn

    def _fused_kernel(self, node: Node):
        """Big regions chunk by chunk through NumPy (cpu_fused.py); the rest through one
        compiled numexpr call when that beats calling the ufuncs one by one (a region of
        several ops: numexpr's call costs about 1.5 us, a ufunc call about 0.3 us)."""
        program = node.attrs[0]
        if node.size >= SMALL:
            shapes = [x.shape for x in node.inputs]
            dtypes = [x.dtype for x in node.inputs]
            fused = chunked_kernel(program, node.shape, node.dtype, shapes, dtypes)
            if fused is not None:
                return fused
        from tenloom.passes import fuse_elementwise as fe

        # numexpr takes regions within the portable caps (on the CPU bigger ones are made for
        # the chunked kernel; one it cannot cut runs ufunc by ufunc below)
        fits = len(program) <= fe.MAX_OPS and len(node.inputs) <= fe.MAX_INPUTS
        if (
            self._ne is not None
            and fits
            and (node.size >= SMALL or len(program) >= NUMEXPR_MIN_OPS)
        ):
            compiled = self._numexpr(node)
            if compiled is not None:
                return compiled
        return self._small_fused(program)

    def _numexpr(self, node: Node):
        from tenloom.passes.fuse_elementwise import expression

        program = node.attrs[0]
        kinds = [NUMEXPR_TYPES.get(x.dtype.str) for x in node.inputs]
        if None in kinds:  # a dtype numexpr lacks (float16, complex64): NumPy's ufuncs instead
            return None
        if any(x.dtype.kind == "c" for x in node.inputs) and not all(
            op in NUMEXPR_COMPLEX_EXACT for op, _, _ in program
        ):
            return None  # complex arithmetic numexpr does its own way: NumPy's ufuncs instead
        # numexpr's optimizer rewrites x**2 as x*x and then hashes the expression tree without
        # memo: nested squares double the work each time (a 48-op W9 region with six takes
        # 25 ms to compile, 3 ms without). On small arrays the rewrite gains nothing (0.4 us a
        # call), so small floating regions skip it (integers keep it: pow does not wrap around
        # on overflow as NumPy's product does).
        small = node.size < SMALL and all(x.dtype.kind in "fc" for x in node.inputs)
        key = (program, tuple(x.dtype.str for x in node.inputs), small)
        compiled = self._compiled.get(key)
        if compiled is None:  # compiling takes milliseconds: once per program and dtypes
            signature = [(f"in{i}", k) for i, k in enumerate(kinds)]
            try:
                compiled = self._ne.NumExpr(
                    expression(program),
                    signature=signature,
                    optimization="none" if small else "aggressive",
                )
            except Exception:  # an expression numexpr refuses: NumPy's ufuncs instead
                return None
            self._compiled[key] = compiled
        exact = self._small_fused(program)
        shape, dtype = node.shape, node.dtype

        def run(*xs):
            out = compiled(*xs)
            if out.dtype != dtype:  # numexpr typed it differently: take the exact path
                return exact(*xs)
            if out.shape != shape:  # numexpr keeps 0-d results 0-d; broadcasting is exact
                out = np.broadcast_to(out, shape)
            return out

        return run
