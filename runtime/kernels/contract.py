"""The CPU kernel of CONTRACT: one pairwise contraction as a (batched) GEMM, every permutation
and shape worked out once per node, operand copies planned by ``copy_plan`` (timed on the first
call where ``tune`` allows) and written into pooled buffers where the backend gives them.

The op itself (attrs, shape rule, NumPy reference) is defined in graph/ops/contract.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
from tenloom.graph.ops.contract import contract_layout
from tenloom.runtime.kernels import copy_plan, inner

TUNE_MAX_MADDS = 1 << 24  # kernels up to this size time their copy plans on the first call
_PLANNING = threading.Lock()
POOLED_COPY = 4096  # elements: smaller operand copies are allocated by NumPy, not the arena


def contract_kernel(
    a_shape: tuple,
    b_shape: tuple,
    attrs: tuple,
    buffers=None,
    dtype=None,
    tune: Callable[[], bool] | None = None,
):
    """A function ``(a, b) -> c`` for one CONTRACT, with every permutation and shape worked out
    once here rather than on each call. With ``buffers`` (an object with ``take(n, dtype)``
    and ``give(buf)``, see runtime/buffers.py) and the result's ``dtype``, the result and any
    operand copy are written into buffers taken from it rather than freshly allocated arrays.

    How each operand becomes its GEMM matrix (runtime/kernels/copy_plan.py) is decided once per
    layout of the operands: by the copy cost model, or, when ``tune()`` answers True on that
    call and the kernel is small enough to run a few extra times, by timing the candidate
    plans, as far as the program's timing budget allows (``kernel.tuning``, bound by
    runtime/program.py; timings are remembered across processes, copy_plan.bounded)."""
    _, _, _, batch, left, con, _ = attrs  # a record, or a plain tuple from a test
    g = contract_layout(attrs, a_shape, b_shape)
    a_only, b_only, a_kept, b_kept = g.a_only, g.b_only, g.a_kept, g.b_kept
    nb, nl, nk, nr, c_shape = g.nb, g.nl, g.nk, g.nr, g.c_shape

    def moved(perm):  # None where the permutation keeps every axis
        return None if perm == tuple(range(len(perm))) else perm

    pa, pb, pc = moved(g.perm_a), moved(g.perm_b), moved(g.perm_c)
    # plain GEMM (np.dot takes transposed views straight to BLAS) or batched (np.matmul).
    # Nothing summed (nk == 1: an outer, Hadamard or scaling product) is a broadcast multiply:
    # BLAS takes shortcuts there that lose IEEE values (np.dot of an (n, 1) and a (1, 1) matrix
    # scales by the one element and a zero scale gives zeros, not NaN for NaN or inf; complex
    # infinities come out otherwise than NumPy's einsum multiplies them), and a GEMM with k = 1
    # gains nothing over the multiply.
    gemm = np.dot if nb == 1 else np.matmul
    if nk == 1:
        gemm = _broadcast_product
    a_mat, b_mat = ((nl, nk), (nk, nr)) if nb == 1 else ((nb, nl, nk), (nb, nk, nr))
    c_mat = a_mat[:-1] + (nr,)
    split_a, split_b = (len(batch), len(left)), (len(batch), len(con))
    tunable = tune is not None and nb * nl * nk * nr <= TUNE_MAX_MADDS
    # a full inner product of many elements: band by band where a copy is needed (inner.py)
    banded = nb == nl == nr == 1 and nk >= inner.INNER_MIN

    def grouped(a, b):
        """The operands with lone labels summed and axes in GEMM order (views)."""
        if a_only or b_only:
            # summed in the contraction's dtype, as einsum does: not the operand's own (a bool
            # operand of a float contraction is not summed as an OR, an int32 one of an int64
            # contraction does not wrap) and not NumPy's sum's default (it widens small ints)
            rdt = np.result_type(a.dtype, b.dtype)
            if a_only:
                a = a.sum(axis=a_only, dtype=rdt)
            if b_only:
                b = b.sum(axis=b_only, dtype=rdt)
        return (a if pa is None else a.transpose(pa)), (b if pb is None else b.transpose(pb))

    perm_a = copy_plan.swapped(split_a, len(a_kept))
    perm_b = copy_plan.swapped(split_b, len(b_kept))
    # copies of small operands are left to NumPy's reshape even with buffers: taking and giving
    # back a buffer costs more than the allocation it saves
    small_a, small_b = nb * nl * nk < POOLED_COPY, nb * nk * nr < POOLED_COPY

    view, copy = copy_plan.VIEW, copy_plan.COPY

    def product(a, b, how):
        """The GEMM of the grouped operands made into matrices as ``how`` says (to time it)."""
        a2 = copy_plan.as_matrix(a, a_mat, perm_a, how[0], None)[0]
        return gemm(a2, copy_plan.as_matrix(b, b_mat, perm_b, how[1], None)[0])

    # Plans by the operands' layout (their strides): [the model's plan, the timed plan (None:
    # not timed yet; the model's own object when timing agrees), the candidates until timed].
    # A plan is a function of the layout alone, so deterministic runs, which keep the model's,
    # give the same bits whatever layouts earlier calls had. ``last`` holds the last layout's
    # (strides, model, timed), which ``current`` reads without taking the lock.
    plans: dict[tuple, list] = {}
    last: list = [((), (), None, None)]

    def plan(a, b):
        key = (a.strides, b.strides)
        with _PLANNING:  # one thread plans (and times) a layout; the others wait and reuse
            entry = plans.get(key)
            if entry is None:
                ways_a = copy_plan.choices(a, a_mat, split_a)
                ways_b = copy_plan.choices(b, b_mat, split_b)
                model = (ways_a[0], ways_b[0])
                if (len(ways_a) == len(ways_b) == 1) or not tunable:
                    entry = plans[key] = [model, model, None]
                else:
                    entry = plans[key] = [model, None, (ways_a, ways_b)]
            if entry[1] is None and tune():
                timed = measured(a, b, *entry[2])
                if timed is not None:  # None: timed on a later run (copy_plan.bounded)
                    entry[1] = entry[0] if timed == entry[0] else timed
                    entry[2] = None  # the candidates' gather indices are not needed any more
            model, timed, _ = entry
            last[0] = (*key, model, timed)
        if timed is None or (timed is not model and not tune()):
            return model  # deterministic runs keep the model's plan
        return timed

    tuning: list = [None]  # the program's timing budget (copy_plan.bind_budget); None: no bound

    def measured(a, b, ways_a, ways_b):
        """The plan timing picks (``timed``), within the program's budget and remembered
        across processes (copy_plan.bounded); None where a later run of the program may time
        it."""
        dt = np.result_type(a.dtype, b.dtype)
        key = copy_plan.timing_key(
            "contract",
            (a.dtype.str, a.shape, a.strides, b.dtype.str, b.shape, b.strides),
            (a_mat, b_mat, gemm.__name__),
            [copy_plan.describe(w) for w in ways_a],
            [copy_plan.describe(w) for w in ways_b],
        )
        trial = copy_plan.kernel_seconds(nb * nl * nk * nr, nb * (nl * nk + nk * nr + nl * nr), dt)
        return copy_plan.bounded(
            key, (ways_a, ways_b), lambda: timed(a, b, ways_a, ways_b), trial, tuning, True
        )

    def timed(a, b, ways_a, ways_b):
        """The plan timing picks: operand a's ways with b's first, then b's with a's best."""
        ha = ways_a[0]
        if len(ways_a) > 1:
            ha = copy_plan.measure(ways_a, lambda h: product(a, b, (h, ways_b[0])))
        hb = ways_b[0]
        if len(ways_b) > 1:
            hb = copy_plan.measure(ways_b, lambda h: product(a, b, (ha, h)))
        return ha, hb

    def current(a, b):
        """The plan for this call: the last layout's without locking, else ``plan``'s."""
        sa, sb, model, timed = last[0]
        if timed is None or a.strides != sa or b.strides != sb:
            return plan(a, b)
        if timed is model or not tune():  # deterministic runs keep the model's plan
            return model
        return timed

    def run(a, b):
        return run_grouped(*grouped(a, b))

    def run_grouped(a, b):
        ha, hb = current(a, b)
        # a view or a C-order copy is one reshape (NumPy copies where memory needs it)
        if ha is view or ha is copy:
            a = a.reshape(a_mat)
        else:
            a = copy_plan.as_matrix(a, a_mat, perm_a, ha, None)[0]
        if hb is view or hb is copy:
            b = b.reshape(b_mat)
        else:
            b = copy_plan.as_matrix(b, b_mat, perm_b, hb, None)[0]
        c = gemm(a, b).reshape(c_shape)
        return c if pc is None else c.transpose(pc)

    if buffers is None or dtype is None:
        if banded:
            kernel = _banded(grouped, run_grouped, len(batch) + len(left), nk, c_shape, dtype, True)
        else:
            kernel = run
            run.fresh = True  # its result is new memory, never an input's or an arena's
        kernel.tuning = tuning
        return kernel
    take, give = buffers.take, buffers.give
    dt, n_out = np.dtype(dtype), nb * nl * nr
    take_a, take_b = (None if small_a else take), (None if small_b else take)

    def run_into(a, b):
        return into_grouped(*grouped(a, b))

    def into_grouped(a, b):
        ha, hb = current(a, b)
        c = take(n_out, dt)
        if ha is view:
            a, ta = a.reshape(a_mat), None
        else:
            a, ta = copy_plan.as_matrix(a, a_mat, perm_a, ha, take_a)
        if hb is view:
            b, tb = b.reshape(b_mat), None
        else:
            b, tb = copy_plan.as_matrix(b, b_mat, perm_b, hb, take_b)
        gemm(a, b, out=c.reshape(c_mat))
        if ta is not None:
            give(ta)
        if tb is not None:
            give(tb)
        c = c.reshape(c_shape)
        return c if pc is None else c.transpose(pc)

    # copies of big operands go into arena buffers: the program keeps an arena for them even
    # where no intermediate is big (runtime/program.py)
    kernel = (
        _banded(grouped, into_grouped, len(batch) + len(left), nk, c_shape, dtype)
        if banded
        else run_into
    )
    kernel.pools = not (small_a and small_b)
    kernel.tuning = tuning
    return kernel


def _banded(
    grouped: Callable, gemm_run: Callable, n_lead: int, nk: int, c_shape: tuple, dtype, fresh=False
):
    """The kernel of a full inner product (every index summed, a result of one element): band
    by band (runtime/kernels/inner.py) where the operands need a copy, else ``gemm_run`` (the
    GEMM kernel's body, taking the grouped operands). ``n_lead``: the grouped operand a's
    (size-1) batch and left axes before its summed ones. ``fresh``: ``gemm_run``'s results are
    new memory (the kernel without buffers)."""

    def run(a, b):
        a, b = grouped(a, b)
        rdt = np.result_type(a.dtype, b.dtype) if dtype is None else np.dtype(dtype)
        # host arrays only: CuPy's (the CUDA backend shares this kernel) go to the GEMM
        if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and inner.fits(rdt, nk):
            k_shape = a.shape[n_lead:]  # b's summed axes lie between size-1 ones: same sizes
            s = inner.inner_product(a.reshape(k_shape), b.reshape(k_shape), rdt)
            if s is not None:
                return s.reshape(c_shape)  # every axis of size 1: no transposing
        return gemm_run(a, b)

    run.fresh = fresh
    return run


def _broadcast_product(a, b, out=None):
    """``a @ b`` for matrices (or stacks) with a contracted size of 1, as an elementwise
    product: (..., l, 1) * (..., 1, r)."""
    return np.multiply(a, b, out=out)
