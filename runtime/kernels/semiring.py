"""Kernels of SEMIRING_EINSUM: contractions over the max-plus, min-plus, max-times, log-sum-exp
and counting (max-plus with the number of optimal configurations) semirings, on NumPy and CuPy
arrays alike (the array's own module is used throughout).

For each output entry the semiring *adds*, over every value of the summed labels, the
semiring *product* of the operands' entries:

============  ==============  ===============  ==================================================
semiring      addition        product          zero (an empty sum)
============  ==============  ===============  ==================================================
max_plus      max             +                -inf (integers: the dtype's minimum)
min_plus      min             +                +inf (integers: the dtype's maximum)
max_times     max             *                0 (for nonnegative operands; with negative ones a
                                               non-empty sum is simply the max of the products)
log_sum_exp   log(e^x + e^y)  +                -inf
count         (max, counts)   (+, counts *)    (-inf, 0)
============  ==============  ===============  ==================================================

NaN propagates as through ``numpy.maximum``: a NaN term (NaN operand, inf - inf, 0 * inf) gives
a NaN result. Counting operands are *raw* (``ndim == len(labels)``: plain weights, each entry
counted once, an entry of -inf not at all) or *pairs* (one trailing axis of size 2: value,
count); results are pairs, float64; counts of configurations tie by exact float equality, and a
NaN value has count 0. max_times is a semiring over entries >= 0 only: with negative ones each
GEMM gives the max of its products, but reducing lone labels first (or any other contraction
order) is not the same as the brute-force max (max(x) * c is not max(x * c) for c < 0).

Layout (``pair_kernel``), worked out once per operand shapes as ``graph/ops/contract.py``
``contract_layout`` does for CONTRACT: labels of one operand only and not in the output are
reduced with the semiring's addition first, then the operands become (batch, left, contracted)
and (batch, contracted, right) stacks for one semiring GEMM (``gemm``), whose result is
reshaped and transposed to the output's order.

GEMM: on the CPU, max_plus/min_plus/max_times in float32/float64/int32/int64 go to the
``tropical-gemm`` package (SIMD, threaded) where its answer is the right one: it skips NaN
terms, starts integer maxima at a sentinel (-10**9 for int32, -2**60 for int64) and max-times at
0, so inputs that could meet those (NaN, inf - inf, 0 * inf, negative factors, sums past the
sentinel or overflowing) take the blocked NumPy kernel instead, as do the other dtypes and
tiny products and stacks of small integer matrices (a call per matrix costs more than it
saves). The checks read the operands' minima and maxima: O(mk + kn) against the product's
O(mnk). On CuPy arrays the tropical and counting GEMMs are the RawKernels of
runtime/backends/cuda_semiring.py. log_sum_exp is a max-shifted
exp-GEMM-log on the ordinary (BLAS / cuBLAS) matmul, with the entries whose shifted sum
underflowed recomputed exactly.
"""

from __future__ import annotations

import math
from contextlib import nullcontext

import numpy as np
from tenloom.graph.errors import DTypeError, ShapeError
from tenloom.graph.ops.semiring import (  # noqa: F401  (SEMIRINGS, one_of: re-exported)
    SEMIRINGS,
    check_semiring,
    is_pair,
    one_of,
    reduce_values,
    semiring_zeros,
    zero_of,
)

try:  # needs glibc 2.34; the NumPy kernel serves without it
    import tropical_gemm
except (ImportError, OSError):  # pragma: no cover - depends on the install
    tropical_gemm = None

TROPICAL = ("max_plus", "min_plus", "max_times")
USE_TROPICAL_GEMM = True  # tests switch it off to exercise the NumPy kernel on every case
USE_CUDA_KERNELS = True  # tests switch it off to compare the RawKernels with the CuPy path
TROPICAL_MIN_MADDS = 512  # smaller products (integers: matrices of a stack) run NumPy's kernel
BLOCK_BYTES = 1 << 20  # the NumPy kernels' temporaries, per block of rows and summed indices
K_CHUNK = 16  # summed indices per block of the NumPy kernels (fewer where rows are long)

# tropical-gemm's entry points by (semiring, dtype), and its integer sentinels (the value its
# maxima start from, minima from the negation): results cannot go past them
_TG_NAMES = {"max_plus": "maxplus", "min_plus": "minplus", "max_times": "maxmul"}
# (keyed by dtype objects: ``dtype.name`` costs a microsecond a call on small products)
_TG_SUFFIX = {
    np.dtype(k): v for k, v in [("f4", ""), ("f8", "_f64"), ("i4", "_i32"), ("i8", "_i64")]
}
_TG_SENTINEL = {np.dtype("i4"): 10**9, np.dtype("i8"): 2**60}
_LSE_DTYPES = (np.dtype("f4"), np.dtype("f8"))


def _module(x):
    """The array module of ``x``: NumPy, or CuPy for CuPy arrays."""
    if isinstance(x, np.ndarray | np.generic):
        return np
    import cupy

    return cupy.get_array_module(x)


def _quiet(xp):
    """NumPy's floating-point warnings off (inf - inf and log(0) are expected here)."""
    return np.errstate(all="ignore") if xp is np else nullcontext()


def _check(semiring: str, dtype) -> np.dtype:
    check_semiring(semiring, "semiring_einsum")
    dt = np.dtype(dtype)
    if semiring == "count":
        if dt.kind not in "biuf":
            raise DTypeError(f"semiring_einsum (count): operands must be real, got {dt}")
        return np.dtype(np.float64)
    ok = _LSE_DTYPES if semiring == "log_sum_exp" else tuple(_TG_SUFFIX)
    if dt not in ok:
        names = ", ".join(d.name for d in ok)
        raise DTypeError(f"semiring_einsum ({semiring}): dtype {dt} not supported; one of {names}")
    return dt


# ---- elementwise and reductions ------------------------------------------------------------


def _times(a, b, semiring: str, xp, out=None):
    """The semiring product, elementwise (values only)."""
    if semiring == "max_times":
        return xp.multiply(a, b, out=out)
    return xp.add(a, b, out=out)


def _count_add(v1, c1, v2, c2, xp):
    """Counting addition of (value, count) pairs: the larger value, counts of equal ones
    added (a NaN value counts 0)."""
    v = xp.maximum(v1, v2)
    return v, xp.where(v1 == v, c1, 0.0) + xp.where(v2 == v, c2, 0.0)


def semiring_add(a, b, semiring: str):
    """The semiring addition of two arrays of the same shape (count: two pair arrays), e.g. to
    accumulate the partial results of a sliced contraction."""
    xp = _module(a)
    if semiring == "count":
        v, c = _count_add(a[..., 0], a[..., 1], b[..., 0], b[..., 1], xp)
        return xp.stack([v, c], axis=-1)
    _check(semiring, np.result_type(a.dtype, b.dtype))
    if semiring == "min_plus":
        return xp.minimum(a, b)
    if semiring == "log_sum_exp":
        return xp.logaddexp(a, b)
    return xp.maximum(a, b)


def _reduce_vc(v, c, axes: tuple, semiring: str, xp):
    """Semiring sum of (values, counts or None) over ``axes`` (graph/ops/semiring.py's)."""
    if not axes:
        return v, c
    with _quiet(xp):
        return reduce_values(xp, v, c, axes, semiring)


def reduce(x, axes, semiring: str, raw: bool = False):
    """The semiring sum of ``x`` over ``axes`` (count: ``x`` a pair array, its trailing axis
    not counted in ``axes``, or with ``raw`` plain weights; the result is a pair array)."""
    xp = _module(x)
    nd = x.ndim - 1 if semiring == "count" and not raw else x.ndim
    axes = tuple(sorted({int(a) % max(1, nd) for a in axes}))
    v, c = _split(x, semiring, not raw)
    v, c = _reduce_vc(v, c, axes, semiring, xp)
    return _join(v, c, semiring, xp)


def _split(x, semiring: str, pair: bool):
    """(values, counts or None) of an operand; count operands as float64."""
    if semiring != "count":
        return x, None
    if pair:
        return x[..., 0].astype(np.float64, copy=False), x[..., 1].astype(np.float64, copy=False)
    # raw weights: each entry counted once, an entry of -inf not at all (counts only where
    # there is one: None reads as ones)
    v = x.astype(np.float64, copy=False)
    xp = _module(v)
    ninf = v == -np.inf
    return v, (xp.where(ninf, 0.0, 1.0) if bool(ninf.any()) else None)


def _join(v, c, semiring: str, xp):
    if semiring != "count":
        return v
    c = xp.ones_like(v) if c is None else c
    nan = xp.isnan(v)
    if bool(nan.any()):  # a NaN value counts no configuration (as the OpenCL kernel gives)
        c = xp.where(nan, 0.0, c)
    return xp.stack([v, c], axis=-1)


# ---- GEMM ------------------------------------------------------------------------------------


def gemm(a, b, semiring: str):
    """The semiring product of stacks of matrices, (nb, m, k) x (nb, k, n) -> (nb, m, n); for
    count, pair arrays (nb, m, k, 2) x (nb, k, n, 2) -> (nb, m, n, 2)."""
    xp = _module(a)
    if semiring == "count":
        v, c = _gemm_vc(a[..., 0], a[..., 1], b[..., 0], b[..., 1], semiring, xp)
    else:
        v, c = _gemm_vc(a, None, b, None, semiring, xp)
    return _join(v, c, semiring, xp)


def _gemm_vc(av, ac, bv, bc, semiring: str, xp):
    """(values, counts or None) of the semiring GEMM of (nb, m, k) and (nb, k, n) stacks."""
    nb, m, k = av.shape
    n = bv.shape[2]
    dt = np.result_type(av.dtype, bv.dtype)
    counting = semiring == "count"
    if nb * m * n == 0 or k == 0:
        v = xp.full((nb, m, n), zero_of(semiring, dt), dt)
        return v, (xp.zeros((nb, m, n), dt) if counting else None)
    if k == 1:  # nothing summed: the semiring product, exactly
        with _quiet(xp):
            v = _times(av, bv, semiring, xp)
        if not counting:
            return v, None
        c = xp.ones_like(v) if ac is None and bc is None else _count_w(ac, bc, v.shape, xp)
        return v, c
    if semiring == "log_sum_exp":
        return _lse_gemm(av, bv, xp), None
    if xp is not np and USE_CUDA_KERNELS:
        from tenloom.runtime.backends import cuda_semiring

        if counting:
            return cuda_semiring.count_gemm(av, ac, bv, bc)
        return cuda_semiring.gemm(av, bv, semiring), None
    if counting:
        return _count_blocked(av, ac, bv, bc, xp)
    if xp is np and _tropical_fits(av, bv, semiring):
        return _tropical(av, bv, semiring), None
    return _blocked(av, bv, semiring, xp), None


def _count_w(ac, bc, shape, xp):
    if ac is None:
        return xp.broadcast_to(bc, shape).astype(np.float64)
    if bc is None:
        return xp.broadcast_to(ac, shape).astype(np.float64)
    return ac * bc


def _tropical_fits(a, b, semiring: str) -> bool:
    """Whether tropical-gemm gives the right answer here (and is worth its calls)."""
    nb, m, k = a.shape
    n = b.shape[2]
    dt = np.result_type(a.dtype, b.dtype)
    if not (USE_TROPICAL_GEMM and tropical_gemm is not None and dt in _TG_SUFFIX):
        return False
    if a.dtype != dt or b.dtype != dt:
        return False
    if nb * m * n * k < TROPICAL_MIN_MADDS or (dt.kind == "i" and m * n * k < TROPICAL_MIN_MADDS):
        return False  # the checks and calls (integers: one per matrix) cost more than they save
    # its answer is ours where no term is NaN, nothing passes its start value and no sum
    # overflows: checked on the operands' ranges (O(mk + kn) against the O(mnk) product)
    lo_a, hi_a, lo_b, hi_b = (x.item() for x in (a.min(), a.max(), b.min(), b.max()))
    if dt.kind == "f":
        if math.isnan(lo_a) or math.isnan(lo_b) or math.isnan(hi_a) or math.isnan(hi_b):
            return False
        if semiring == "max_times":  # it starts at 0 and skips 0 * inf
            nonneg = lo_a >= 0 and lo_b >= 0
            return nonneg and not (
                (hi_a == math.inf and lo_b == 0) or (hi_b == math.inf and lo_a == 0)
            )
        # inf - inf is a NaN term, which it skips
        return not (
            (hi_a == math.inf and lo_b == -math.inf) or (lo_a == -math.inf and hi_b == math.inf)
        )
    info, sentinel = np.iinfo(dt), _TG_SENTINEL[dt]
    if semiring == "max_times":
        return lo_a >= 0 and lo_b >= 0 and hi_a * hi_b <= info.max
    lo, hi = lo_a + lo_b, hi_a + hi_b
    if lo < info.min or hi > info.max:  # a sum may wrap around
        return False
    return lo >= -sentinel if semiring == "max_plus" else hi <= sentinel


def _tropical(a, b, semiring: str):
    """tropical-gemm on C-contiguous stacks (it reads other layouts wrongly). Floats go to its
    batched entry point, whose argmax indices are dropped: it ran 1.4x faster than the 2-D one
    even for one 2048^3 float32 product (benchmarks/semiring_gemm.py), and takes a whole
    stack in one call; integers (no batched entry point) one 2-D call per batch entry."""
    name, dt = _TG_NAMES[semiring], a.dtype
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    nb, m, n = a.shape[0], a.shape[1], b.shape[2]
    if a.dtype.kind == "f":
        fn = getattr(tropical_gemm, f"{name}_matmul_batched_with_argmax{_TG_SUFFIX[dt]}")
        return fn(a, b)[0].reshape(nb, m, n)
    fn = getattr(tropical_gemm, f"{name}_matmul_2d{_TG_SUFFIX[dt]}")
    if nb == 1:
        return fn(a[0], b[0])[None]
    c = np.empty((nb, m, n), a.dtype)
    for i in range(nb):
        c[i] = fn(a[i], b[i])
    return c


def _blocks(nb: int, m: int, k: int, n: int, itemsize: int, per: int = 1):
    """(rows per block, summed indices per block) keeping a block's ``per`` temporaries of
    (nb, rows, ks, n) elements near BLOCK_BYTES."""
    budget = max(1, BLOCK_BYTES // (itemsize * per))
    row = nb * n
    kc = min(k, max(1, budget // (row * m)))
    if kc >= min(k, K_CHUNK):
        return m, kc
    kc = min(k, K_CHUNK, max(1, budget // row))
    return max(1, min(m, budget // (row * kc))), kc


def _blocked(a, b, semiring: str, xp):
    """The NumPy (or CuPy) semiring GEMM: blocks of rows by blocks of summed indices, each an
    elementwise product broadcast over (nb, rows, ks, n) and reduced over ks, merged into the
    result with ``maximum``/``minimum`` (which propagate NaN)."""
    nb, m, k = a.shape
    n = b.shape[2]
    dt = np.result_type(a.dtype, b.dtype)
    red, merge = (xp.min, xp.minimum) if semiring == "min_plus" else (xp.max, xp.maximum)
    mb, kc = _blocks(nb, m, k, n, dt.itemsize)
    c = xp.empty((nb, m, n), dt)
    tmp = xp.empty((nb, mb, kc, n), dt)
    part = xp.empty((nb, mb, n), dt)
    with _quiet(xp):
        for i0 in range(0, m, mb):
            i1 = min(m, i0 + mb)
            cb = c[:, i0:i1]
            for k0 in range(0, k, kc):
                k1 = min(k, k0 + kc)
                t = tmp[:, : i1 - i0, : k1 - k0]
                _times(a[:, i0:i1, k0:k1, None], b[:, None, k0:k1, :], semiring, xp, out=t)
                if k0 == 0:
                    _reduce_into(red, t, cb, xp)
                else:
                    p = part[:, : i1 - i0]
                    _reduce_into(red, t, p, xp)
                    merge(cb, p, out=cb)
    return c


def _reduce_into(red, t, out, xp) -> None:
    """``red`` over axis 2 of ``t`` into ``out``. CuPy's min with ``out=`` fails in its CUB
    path under NumPy 2 (a TypeError comparing dtype classes, measured on CuPy 14.2): CuPy
    writes a fresh result into ``out`` instead."""
    if xp is np:
        red(t, axis=2, out=out)
    else:
        out[...] = red(t, axis=2)


def _count_blocked(av, ac, bv, bc, xp):
    """The counting GEMM by blocks as ``_blocked``: per block the maximum over its summed
    indices and the counts reaching it, merged with the running (value, count)."""
    nb, m, k = av.shape
    n = bv.shape[2]
    mb, kc = _blocks(nb, m, k, n, 8, per=3)
    v = xp.empty((nb, m, n), np.float64)
    c = xp.empty((nb, m, n), np.float64)
    with _quiet(xp):
        for i0 in range(0, m, mb):
            i1 = min(m, i0 + mb)
            for k0 in range(0, k, kc):
                k1 = min(k, k0 + kc)
                t = av[:, i0:i1, k0:k1, None] + bv[:, None, k0:k1, :]
                tm = xp.max(t, axis=2, keepdims=True)
                eq = t == tm
                if ac is None and bc is None:
                    tc = xp.sum(eq, axis=2, dtype=np.float64)
                else:
                    wa = 1.0 if ac is None else ac[:, i0:i1, k0:k1, None]
                    wb = 1.0 if bc is None else bc[:, None, k0:k1, :]
                    tc = xp.sum(xp.where(eq, wa * wb, 0.0), axis=2)
                tm = tm[:, :, 0]
                if k0 == 0:
                    v[:, i0:i1], c[:, i0:i1] = tm, tc
                else:
                    vb, cb = _count_add(v[:, i0:i1], c[:, i0:i1], tm, tc, xp)
                    v[:, i0:i1], c[:, i0:i1] = vb, cb
    return v, c


def _lse_gemm(a, b, xp):
    """log sum_k exp(a[., i, k] + b[., k, j]) as log(exp(a - ma) @ exp(b - mb)) + ma + mb
    with ma the rows' maxima of a, mb the columns' maxima of b (0 where not finite).

    Where the shifted sum comes out below k * tiny / eps (the most that terms lost to the
    subnormal range, or flushed to 0, can weigh against one ulp) the entry is recomputed
    exactly, shifted by its own largest term; entries whose terms are all -inf (a row of a or
    a column of b all -inf, or no k where both are above -inf) are -inf without that."""
    nb, m, k = a.shape
    n = b.shape[2]
    dt = np.result_type(a.dtype, b.dtype)
    fi = np.finfo(dt)
    with _quiet(xp):
        ma = xp.max(a, axis=2, keepdims=True)
        mb = xp.max(b, axis=1, keepdims=True)
        ma = xp.where(xp.isfinite(ma), ma, 0).astype(dt, copy=False)
        mb = xp.where(xp.isfinite(mb), mb, 0).astype(dt, copy=False)
        s = xp.matmul(xp.exp(a - ma), xp.exp(b - mb))
        c = xp.log(s) + (ma + mb)  # the shifts first: log(s) is not absorbed into a large one
        low = s < dt.type(min(float(fi.max), k * float(fi.tiny) / float(fi.eps)))
        # rows (columns) with no term above -inf are -inf exactly: not recomputed
        low &= xp.any(a > -xp.inf, axis=2, keepdims=True) & xp.any(
            b > -xp.inf, axis=1, keepdims=True
        )
        bi, ii, jj = xp.nonzero(low)
        p = int(bi.shape[0])
        if p == 0:
            return c
        if p * k > nb * (m * k + k * n + m * n):
            # many entries: the entries with a finite term found first, by one more GEMM
            has = xp.matmul((a > -xp.inf).astype(dt), (b > -xp.inf).astype(dt))[bi, ii, jj] > 0
            c[bi[~has], ii[~has], jj[~has]] = -xp.inf
            bi, ii, jj = bi[has], ii[has], jj[has]
            p = int(bi.shape[0])
        step = max(1, (BLOCK_BYTES // dt.itemsize) // k)
        for q0 in range(0, p, step):
            q = slice(q0, min(p, q0 + step))
            t = a[bi[q], ii[q], :] + b[bi[q], :, jj[q]]  # (entries, k)
            top = xp.max(t, axis=1, keepdims=True)
            shift = xp.where(xp.isfinite(top), top, 0)
            c[bi[q], ii[q], jj[q]] = (
                xp.log(xp.sum(xp.exp(t - shift), axis=1)) + shift[:, 0]
            ).astype(dt)
    return c


# ---- pairwise and n-ary contractions ----------------------------------------------------------


def _diagonals(v, c, labels: tuple, xp):
    """Repeated labels of one operand replaced by their diagonal (the label's axis last)."""
    labels = list(labels)
    while len(set(labels)) < len(labels):
        seen: dict = {}
        for j, lab in enumerate(labels):
            if lab in seen:
                i = seen[lab]
                break
            seen[lab] = j
        v = xp.diagonal(v, axis1=i, axis2=j)
        c = None if c is None else xp.diagonal(c, axis1=i, axis2=j)
        labels = [x for t, x in enumerate(labels) if t not in (i, j)] + [labels[i]]
    return v, c, tuple(labels)


class PairLayout:
    """One pairwise contraction worked out for given operand shapes (labels distinct within
    each operand)."""

    def __init__(self, a_terms, b_terms, out, a_shape, b_shape, where="semiring_einsum"):
        a_terms, b_terms, out = tuple(a_terms), tuple(b_terms), tuple(out)
        sizes: dict = {}
        for terms, shape, name in ((a_terms, a_shape, "a"), (b_terms, b_shape, "b")):
            if len(shape) != len(terms):
                raise ShapeError(
                    f"{where}: operand {name} has shape {tuple(shape)} for {len(terms)} labels"
                )
            for lab, s in zip(terms, shape):
                if sizes.setdefault(lab, s) != s:
                    raise ShapeError(
                        f"{where}: label {lab} has size {sizes[lab]} and {s} (operand shapes "
                        f"{tuple(a_shape)} and {tuple(b_shape)})"
                    )
        missing = [lab for lab in out if lab not in sizes]
        if missing or len(set(out)) != len(out):
            raise ShapeError(f"{where}: output labels {out} not each in one operand once")
        self.a_only = tuple(
            i for i, lab in enumerate(a_terms) if lab not in b_terms and lab not in out
        )
        self.b_only = tuple(
            i for i, lab in enumerate(b_terms) if lab not in a_terms and lab not in out
        )
        a_kept = tuple(lab for i, lab in enumerate(a_terms) if i not in self.a_only)
        b_kept = tuple(lab for i, lab in enumerate(b_terms) if i not in self.b_only)
        batch = tuple(lab for lab in out if lab in a_kept and lab in b_kept)
        left = tuple(lab for lab in out if lab in a_kept and lab not in b_kept)
        right = tuple(lab for lab in out if lab in b_kept and lab not in a_kept)
        con = tuple(lab for lab in a_kept if lab in b_kept and lab not in out)
        self.nb, self.nl, self.nk, self.nr = (
            math.prod(sizes[lab] for lab in g) for g in (batch, left, con, right)
        )

        def moved(perm):
            return None if perm == tuple(range(len(perm))) else perm

        self.perm_a = moved(tuple(a_kept.index(lab) for lab in batch + left + con))
        self.perm_b = moved(tuple(b_kept.index(lab) for lab in batch + con + right))
        natural = batch + left + right
        self.c_shape = tuple(sizes[lab] for lab in natural)
        self.perm_c = moved(tuple(natural.index(lab) for lab in out))

    def run(self, av, ac, bv, bc, semiring: str, xp):
        if self.a_only:
            av, ac = _reduce_vc(av, ac, self.a_only, semiring, xp)
        if self.b_only:
            bv, bc = _reduce_vc(bv, bc, self.b_only, semiring, xp)
        a_mat, b_mat = (self.nb, self.nl, self.nk), (self.nb, self.nk, self.nr)

        def shaped(x, perm, mat):
            if x is None:
                return None
            return (x if perm is None else x.transpose(perm)).reshape(mat)

        av, ac = shaped(av, self.perm_a, a_mat), shaped(ac, self.perm_a, a_mat)
        bv, bc = shaped(bv, self.perm_b, b_mat), shaped(bc, self.perm_b, b_mat)
        v, c = _gemm_vc(av, ac, bv, bc, semiring, xp)

        def out(x):
            if x is None:
                return None
            x = x.reshape(self.c_shape)
            return x if self.perm_c is None else x.transpose(self.perm_c)

        return out(v), out(c)


def pair_kernel(a_terms, b_terms, out, semiring: str, shapes=None):
    """A function ``(a, b) -> c``: the semiring contraction of operands labelled ``a_terms``
    and ``b_terms`` into ``out`` (int labels, none repeated within an operand). The layout is
    worked out once per operand shapes (here, when ``shapes`` gives them)."""
    a_terms, b_terms, out = tuple(a_terms), tuple(b_terms), tuple(out)
    _check(semiring, np.float64 if semiring == "count" else np.float32)
    layouts: dict = {}
    if shapes is not None:
        sa, sb = (tuple(s[: len(t)]) for s, t in zip(shapes, (a_terms, b_terms)))
        layouts[sa, sb] = PairLayout(a_terms, b_terms, out, sa, sb)

    def run(a, b):
        xp = _module(a)
        counting = semiring == "count"
        dt = _check(semiring, np.result_type(a.dtype, b.dtype))
        pa = counting and is_pair(a.shape, a_terms)
        pb = counting and is_pair(b.shape, b_terms)
        sa = a.shape[: len(a_terms)] if pa else a.shape
        sb = b.shape[: len(b_terms)] if pb else b.shape
        lay = layouts.get((sa, sb))
        if lay is None:
            lay = layouts[sa, sb] = PairLayout(a_terms, b_terms, out, sa, sb)
        av, ac = _split(a, semiring, pa)
        bv, bc = _split(b, semiring, pb)
        if not counting:
            av, bv = av.astype(dt, copy=False), bv.astype(dt, copy=False)
        v, c = lay.run(av, ac, bv, bc, semiring, xp)
        return _join(v, c, semiring, xp)

    return run


def einsum_kernel(terms, out, semiring: str):
    """A function ``(*xs) -> y``: the semiring contraction of ``len(terms)`` operands into
    ``out``; one operand is a semiring reduction (and transpose), several are contracted
    pairwise left to right (what runs when the order pass did not split the network). Repeated
    labels within an operand take its diagonal first."""
    terms, out = tuple(tuple(t) for t in terms), tuple(out)
    _check(semiring, np.float64 if semiring == "count" else np.float32)
    if not terms:
        raise ShapeError("semiring_einsum: no operands")
    counting = semiring == "count"
    layouts: dict = {}

    def layout(ta, tb, keep, sa, sb):
        key = (ta, tb, keep, sa, sb)
        lay = layouts.get(key)
        if lay is None:
            lay = layouts[key] = PairLayout(ta, tb, keep, sa, sb)
        return lay

    def run(*xs):
        if len(xs) != len(terms):
            raise ShapeError(f"semiring_einsum: {len(xs)} operands for {len(terms)} terms")
        xp = _module(xs[0])
        dt = _check(semiring, np.result_type(*[x.dtype for x in xs]))
        ops = []
        for x, t in zip(xs, terms):
            v, c = _split(x, semiring, counting and is_pair(x.shape, t))
            if not counting:
                v = v.astype(dt, copy=False)
            if v.ndim != len(t):
                raise ShapeError(f"semiring_einsum: operand of shape {x.shape} for labels {t}")
            ops.append(_diagonals(v, c, t, xp))
        sizes = {lab: n for v_, _, t in ops for lab, n in zip(t, v_.shape)}
        if any(n == 0 for lab, n in sizes.items() if lab not in out):
            # every output entry is an empty sum: the zero (folding pairwise would add the
            # first pair's zero to the next operand: wrapping integers, -inf + inf)
            shape = tuple(sizes[lab] for lab in out) + ((2,) if counting else ())
            return semiring_zeros(xp, shape, np.float64 if counting else dt, semiring)
        v, c, cur = ops[0]
        for i, (bv, bc, t) in enumerate(ops[1:], start=1):
            later = {lab for _, _, u in ops[i + 1 :] for lab in u} | set(out)
            if i == len(ops) - 1:
                keep = out
            else:
                keep = tuple(dict.fromkeys(lab for lab in (*cur, *t) if lab in later))
            v, c = layout(cur, t, keep, v.shape, bv.shape).run(v, c, bv, bc, semiring, xp)
            cur = keep
        if cur != out:  # one operand: reduce what is not kept, then the output's order
            if any(lab not in cur for lab in out) or len(set(out)) != len(out):
                raise ShapeError(f"semiring_einsum: output labels {out} not in operand {cur}")
            axes = tuple(i for i, lab in enumerate(cur) if lab not in out)
            v, c = _reduce_vc(v, c, axes, semiring, xp)
            kept = tuple(lab for lab in cur if lab in out)
            perm = tuple(kept.index(lab) for lab in out)
            v = xp.asarray(v).transpose(perm)  # a full reduction gives NumPy a scalar
            c = None if c is None else xp.asarray(c).transpose(perm)
        return _join(v, c, semiring, xp)

    return run


def semiring_kernel(attrs, shapes=None):
    """The kernel of a SEMIRING_EINSUM node from its attrs (terms, out, semiring):
    ``pair_kernel`` for two operands, else ``einsum_kernel``; results are arrays (0-d ones
    included, not NumPy scalars)."""
    terms, out, semiring = attrs
    if len(terms) == 2:
        return pair_kernel(*terms, out, semiring, shapes)
    return einsum_kernel(terms, out, semiring)
