"""The CPU kernel of a CONTRACT that sums every index (an inner product, ``ij,ji->``) over
operands too big for a transposing copy to be cheap: band by band, each band's operands laid
out in a small buffer tile by tile, the band's products summed by NumPy's einsum.

``tl.trace(A @ B)`` becomes ``ab,ba->``, one 1 x n^2 "GEMM". Run as a GEMM it first copies B
transposed into fresh memory: at n = 3000 a 72 MB strided copy, 89% of the time (112 ms against
76 ms for ``np.einsum("ij,ji->", A, B)`` where this was profiled). Here A is walked in memory
order in bands of rows; B's matching columns are copied into a buffer of about ``BAND_BYTES``
in tiles of ``TILE_BYTES`` (a tile's rows and columns both stay in cache, where the strided copy
of the whole matrix touches a new cache line for each element it writes), and each band is one
contiguous dot product (einsum's SIMD sum of products). NumPy's einsum does the same sum with a
strided inner loop over the whole of B. Bands run on the evaluation's worker threads
(``threads=``); their partial sums are added in band order, so the bits do not depend on the
thread count or timing.

The plain GEMM kernel (runtime/kernels/contract.py) stays in charge where both operands lie in
one memory order already (BLAS's dot product reads them in place) and for small products.
"""

from __future__ import annotations

import concurrent.futures as cf
import math

import numpy as np
from tenloom.runtime.determinism import THREADS

INNER_MIN = 1 << 16  # summed elements from which a product runs band by band
BAND_BYTES = 1 << 22  # bytes of one operand a band covers (a band is whole outer rows)
TILE_BYTES = 1 << 18  # bytes of one tile of a band's copy
PARALLEL_MIN = 1 << 20  # summed elements from which bands are spread over worker threads
# dtypes the band kernel sums (einsum sums them as np.dot does: in the dtype, wrapping for
# integers); bool (a logical or) and float16 (np.dot and einsum accumulate it differently)
# stay with the GEMM kernel
KINDS = frozenset("fciu")


def fits(dtype: np.dtype, n: int) -> bool:
    """Whether a full inner product of ``n`` elements of ``dtype`` runs band by band."""
    dtype = np.dtype(dtype)
    return n >= INNER_MIN and dtype.kind in KINDS and dtype != np.float16


def memory_order(x: np.ndarray) -> tuple[int, ...]:
    """``x``'s axes outermost first as they lie in memory (largest stride first; ties, as size-1
    axes give, keep their order)."""
    return tuple(sorted(range(x.ndim), key=lambda i: -abs(x.strides[i])))


def _contiguous(x: np.ndarray) -> bool:
    return x.flags.c_contiguous


def _tiled_copy(dst: np.ndarray, src: np.ndarray) -> None:
    """Copy ``src`` into ``dst`` (C-contiguous, the same shape) in tiles along its second axis
    of about TILE_BYTES: each tile's source rows and destination rows stay in cache."""
    if src.ndim < 2:
        np.copyto(dst, src, casting="unsafe")
        return
    per_col = dst.itemsize * src.shape[0] * math.prod(src.shape[2:])
    t = max(1, TILE_BYTES // max(per_col, 1))
    n = src.shape[1]
    if t >= n:
        np.copyto(dst, src, casting="unsafe")
        return
    for j in range(0, n, t):
        np.copyto(dst[:, j : j + t], src[:, j : j + t], casting="unsafe")


def inner_product(x: np.ndarray, y: np.ndarray, dtype: np.dtype, threads: int | None = None):
    """``sum(x * y)`` over every element of two arrays of one shape, in ``dtype`` (the
    contraction's), as a 0-d array; None where both lie in one memory order (the caller's
    BLAS dot product reads them in place, which is faster).

    The axes go in ``x``'s memory order (``y``'s where only ``y`` is contiguous); the outermost
    axis is cut into bands of about BAND_BYTES, each band's operand that is not contiguous is
    copied into a buffer tile by tile (``_tiled_copy``), and each band is one einsum dot
    product. The bands' sums are added in band order."""
    if x.shape != y.shape:
        raise ValueError(f"inner_product: shapes {x.shape} and {y.shape} differ")
    dtype = np.dtype(dtype)
    keep = [i for i, n in enumerate(x.shape) if n != 1]
    shape = tuple(x.shape[i] for i in keep)
    x, y = x.reshape(shape), y.reshape(shape)  # dropping size-1 axes never copies
    order = memory_order(x)
    xo, yo = x.transpose(order), y.transpose(order)
    if not _contiguous(xo):
        order_y = memory_order(y)
        if _contiguous(y.transpose(order_y)):  # y lies in order: walk its memory instead
            xo, yo = x.transpose(order_y), y.transpose(order_y)
    if xo.size == 0:
        return np.zeros((), dtype)
    if _contiguous(xo) and _contiguous(yo) and xo.dtype == yo.dtype == dtype:
        return None
    if xo.ndim == 0:  # one element
        return np.asarray(np.multiply(xo, yo, dtype=dtype))
    rows = xo.shape[0]
    row_bytes = (xo.size // rows) * dtype.itemsize
    band = max(1, min(rows, BAND_BYTES // max(row_bytes, 1)))
    bounds = list(range(0, rows, band)) + [rows]
    n_bands = len(bounds) - 1
    parts = np.empty(n_bands, dtype)

    def flat(v: np.ndarray, scratch: list) -> np.ndarray:
        """``v`` (one band) as a contiguous vector of ``dtype``: itself, or a tiled copy."""
        if _contiguous(v) and v.dtype == dtype:
            return v.reshape(-1)
        if not scratch or scratch[0].size < v.size:
            scratch[:] = [np.empty(max(v.size, band * (v.size // max(v.shape[0], 1))), dtype)]
        buf = scratch[0][: v.size]
        _tiled_copy(buf.reshape(v.shape), v)
        return buf

    def run_bands(first: int, last: int) -> None:
        sx: list = []  # one buffer per operand for these bands, reused band to band
        sy: list = []
        for k in range(first, last):
            lo, hi = bounds[k], bounds[k + 1]
            parts[k] = np.einsum("i,i->", flat(xo[lo:hi], sx), flat(yo[lo:hi], sy))

    threads = THREADS.get() if threads is None else threads
    workers = min(threads, n_bands)
    if workers < 2 or xo.size < PARALLEL_MIN:
        run_bands(0, n_bands)
    else:
        cuts = [(n_bands * w) // workers for w in range(workers + 1)]
        with cf.ThreadPoolExecutor(workers, thread_name_prefix="tenloom-inner") as pool:
            for f in [pool.submit(run_bands, cuts[w], cuts[w + 1]) for w in range(workers)]:
                f.result()
    # added in band order (bitwise the same whatever the threads did); integers wrap as
    # einsum's and np.dot's sums do
    return np.asarray(np.add.reduce(parts, dtype=dtype))
