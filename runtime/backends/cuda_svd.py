"""SVD on CUDA (issue 20): the Gram route (runtime/kernels/gram_svd.py, with its column checks
as the CUDA kernels below), then cuSOLVER's polar-decomposition driver ``gesvdp``, then the
Gram route's levels, each checked, with CuPy's ``gesvd`` behind them.

**Why the Gram route first.** The eigendecomposition of A^H A took the time of torch's gesvda,
2.5x less than gesvdp (H200: 27 against 73 ms at N=2048 float64, 112 against 278 ms at 4096);
the route keeps what its checks find accurate and declines the rest (a spectrum that decays
fast, as DMRG's, is declined by a few power steps before any eigh).

**Why gesvdp.** ``cupy.linalg.svd`` calls cuSOLVER's ``gesvd`` (QR iteration), and torch's
default driver is ``gesvdj`` (Jacobi) falling back to ``gesvd``. ``cusolverDnXgesvdp`` computes
the SVD from a polar decomposition (QDWH: GEMM- and QR-rich iterations) and an eigensolver of
the Hermitian factor, which suits the GPU. Measured on an H200, float64 and complex128 Gaussian
matrices (benchmarks/results/svd_probe_session14_h200.jsonl): N=1024 0.031 s against gesvd's
0.158 s and torch's 0.089 s; N=2048 0.083 s against 0.429 s and 0.362 s; N=4096 0.280 s against
1.72 s and 1.60 s; U and V orthonormal to 1e-14 (gesvdj: 1e-12). CuPy has no binding for it, so
it is called through ctypes on the libcusolver CuPy loaded (the same library, no new
dependency); torch's ``gesvda`` is faster still but approximate (NaN columns on rank-deficient
inputs: docs/benchmarks.md).

**Why checked.** gesvdp is not uniformly accurate: on spectra that decay over many orders of
magnitude or are rank-deficient its singular values can be off by 1e-10 to 1e-4 of the largest
(it says so itself: ``h_err_sigma``, the size of the perturbation it committed; a DMRG split at
chi=512 whose smallest singular values are 1e-30 came back with 2e-9). Its U and V stay
orthonormal to 1e-14 even then: what is left undone is the diagonalization. A result is kept
where ``h_err_sigma <= TOL_ULPS * eps * s_max`` (about what gesvd commits); otherwise the
matrix goes on to the levels, then gesvd. Every result kept meets that tolerance. (Finishing
the diagonalization of U^H A V by Jacobi rotations instead was tried: cuSOLVER's gesvdj took
longer on it than gesvd on A, 111 ms against 84 ms at 1024 x 986.) A try costs about a
quarter of gesvd, so trying pays unless most tries fail: a kernel whose last
``FAILS_IN_A_ROW`` matrices gesvdp got wrong goes past gesvdp for its next ``RETRY_AFTER``
calls, then tries gesvdp again.

**What gesvdp leaves: the Gram route's levels** (``GRAM_LEVELS``, runtime/kernels/gram_svd.py
"Levels"), then gesvd. A spectrum that falls over many orders of magnitude, as DMRG's, is
declined by the one-level Gram route and often by gesvdp; the levels take it three orders of
magnitude of s at a time, each an eigendecomposition of what is left and a QR of its head.
Measured on an H100 on the splits of a DMRG of L=20, chi=512 (``python
benchmarks/dmrg_splits.py``, benchmarks/results/dmrg_splits_session17_h100.txt): a 1024 x 994
split in 39-51 ms where gesvd took 83-85 (and a failed gesvdp try 45 more), a 1024 x 512 one in
20 ms against gesvd's 39-40. Where gesvdp is accurate it is faster still (16 ms on a
512 x 1024 split), so it stays first; one failure sends a kernel past it (``FAILS_IN_A_ROW``):
DMRG calls each split kernel once a sweep, and a kernel whose matrix gesvdp got wrong gets the
same kind of matrix next time.

**Small matrices** (one matrix, a side below ``MIN_SIDE``, the other at most
``HOST_MAX_SIDE``) go to the host's LAPACK (``_host_svd``).

Where gesvd is used from the start: batches of matrices with a side below ``MIN_SIDE``,
``full_matrices=True`` on non-square matrices, empty or non-finite inputs (gesvd's own NaN
results or error stand), ROCm, and ``deterministic=True`` (every run must give the bits of the
first, whatever an earlier call's check decided). A libcusolver without gesvdp leaves the Gram
route and its levels before gesvd.
"""

from __future__ import annotations

import ctypes
import math
import threading
from typing import Any

import cupy as cp
import numpy as np
from tenloom.graph.ops.tensor_svd import cut_factors
from tenloom.passes.caches import counter
from tenloom.runtime.determinism import DETERMINISTIC
from tenloom.runtime.kernels.gram_svd import (  # noqa: F401  (the tests read the constants here)
    GRAM_FAILS_IN_A_ROW,
    RETRY_AFTER,
    TOL_ULPS,
    Checks,
    GramRoute,
    host_tail_svd,
    real_dtype,
    require_contiguous,
    tol,
)

# matrices done by gesvdp and kept; run by gesvdp and not accurate (then the levels or gesvd);
# done by gesvd without a gesvdp failure before it; a small single matrix done on the host;
# done through the Gram matrix (its head) and kept; tried through the Gram matrix and passed on;
# done by the levels and kept; tried by them and passed on to gesvd; the Gram path's tail
# factors by route
COUNTERS = counter(
    "runtime.cuda_svd",
    gram=0,
    gram_declined=0,
    gesvdp=0,
    redone=0,
    gesvd=0,
    host=0,
    levels=0,
    levels_declined=0,
    tail_host=0,
    tail_gesvdp=0,
    tail_gesvd=0,
)

MIN_SIDE = 128  # 64: gesvdp and gesvd even (2-4 ms); 128: 4.4 ms against 9.0 ms (H200)
HOST_MAX_SIDE = 1024  # a single matrix with a side below MIN_SIDE, the other at most this
FAILS_IN_A_ROW = 1
# the Gram route's levels after gesvdp (runtime/kernels/gram_svd.py): each takes about three
# orders of magnitude of s; four take a float64 spectrum down to its zeros
GRAM_LEVELS = 4

# cudaDataType (library_types.h)
_CUDA_TYPE = {
    np.dtype(np.float32): 0,
    np.dtype(np.float64): 1,
    np.dtype(np.complex64): 4,
    np.dtype(np.complex128): 5,
}
_EIG_MODE_VECTOR = 1  # CUSOLVER_EIG_MODE_VECTOR

_LIB: list = []  # [lib or None]
_LOCK = threading.Lock()
_FREE: dict[int, list] = {}  # device -> free (cuSOLVER handle, params) pairs


def _lib():
    """libcusolver with gesvdp's prototypes, or None (no such library or entry point)."""
    if _LIB:
        return _LIB[0]
    with _LOCK:
        if _LIB:
            return _LIB[0]
        lib = None
        try:
            from cupy_backends.cuda.libs import cusolver as _binding  # noqa: F401  (loads it)

            lib = _load()
        except (ImportError, OSError, AttributeError):
            lib = None
        _LIB.append(lib)
        return lib


def _load():
    from tenloom.runtime.backends.cuda_libs import cuda_library

    lib, _names = cuda_library(
        "libcusolver", ["libcusolver.so.12", "libcusolver.so.11", "libcusolver.so"]
    )
    if lib is None:
        return None
    p, i, i64, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_size_t
    lib.cusolverDnCreate.argtypes = [ctypes.POINTER(p)]
    lib.cusolverDnCreateParams.argtypes = [ctypes.POINTER(p)]
    lib.cusolverDnSetStream.argtypes = [p, p]
    common = [p, p, i, i, i64, i64, i, p, i64, i, p, i, p, i64, i, p, i64, i]
    lib.cusolverDnXgesvdp_bufferSize.argtypes = common + [
        ctypes.POINTER(sz),
        ctypes.POINTER(sz),
    ]
    lib.cusolverDnXgesvdp.argtypes = common + [
        p,
        sz,
        p,
        sz,
        p,
        ctypes.POINTER(ctypes.c_double),
    ]
    return lib


def _checkout(lib, device_id: int):
    """A (handle, params) pair for ``device_id`` from the process's pool (made when none is
    free), or None where cuSOLVER cannot make one. One caller uses a pair at a time; the pool
    outlives the scheduler's worker threads (a handle per thread would leak with each
    run's new threads)."""
    with _LOCK:
        free = _FREE.setdefault(device_id, [])
        if free:
            return free.pop()
    h, prm = ctypes.c_void_p(), ctypes.c_void_p()
    if lib.cusolverDnCreate(ctypes.byref(h)) or lib.cusolverDnCreateParams(ctypes.byref(prm)):
        return None
    return h, prm


def _checkin(device_id: int, hp) -> None:
    with _LOCK:
        _FREE[device_id].append(hp)


def gesvdp_tall(b, lib, hp) -> tuple | None:
    """gesvdp of the column-major m x n matrix stored in ``b`` (a C-ordered (n, m) CuPy array,
    overwritten), m >= n: ``(ut, s, vt)`` with ut the C-ordered (n, m) array of U^T, vt the
    (n, n) array of V^T (B = U diag(s) V^H), and whether its reported error is within the
    tolerance; None where gesvdp failed."""
    n, m = b.shape
    dt = b.dtype
    ct = _CUDA_TYPE[dt]
    real = real_dtype(dt)
    rt = _CUDA_TYPE[real]
    s = cp.empty(n, real)
    ut = cp.empty((n, m), dt)
    vt = cp.empty((n, n), dt)
    h, prm = hp
    stream = cp.cuda.get_current_stream()
    lib.cusolverDnSetStream(h, ctypes.c_void_p(stream.ptr))
    dev_b, host_b = ctypes.c_size_t(), ctypes.c_size_t()
    head = (h, prm, _EIG_MODE_VECTOR, 1, m, n, ct, b.data.ptr, m, rt, s.data.ptr)
    tail = (ct, ut.data.ptr, m, ct, vt.data.ptr, n, ct)
    if lib.cusolverDnXgesvdp_bufferSize(*head, *tail, ctypes.byref(dev_b), ctypes.byref(host_b)):
        return None
    work = cp.empty(max(dev_b.value, 1), np.uint8)
    host = ctypes.create_string_buffer(max(host_b.value, 1))
    info = cp.zeros(1, np.int32)
    err = ctypes.c_double()
    status = lib.cusolverDnXgesvdp(
        *head,
        *tail,
        work.data.ptr,
        dev_b.value,
        host,
        host_b.value,
        info.data.ptr,
        ctypes.byref(err),
    )
    if status:
        return None
    top, ok = float(s[0].get()), int(info.get()[0]) == 0
    if not ok or not np.isfinite(top):
        return None
    # h_err_sigma's scale is not documented: held to the tighter of absolute and relative
    return ut, s, vt, err.value <= tol(real) * min(top, 1.0)


def _host_svd(x, fallback_host):
    """A small matrix's SVD on the host's LAPACK (gesdd, gesvd where it fails), copied both
    ways: cuSOLVER's gesvd launches a kernel per Householder step, so below ``MIN_SIDE`` rows
    it takes 2-9 ms where LAPACK takes well under one (the same hybrid split as MAGMA's)."""
    from tenloom.runtime.kernels.blas_threads import one_thread

    h = cp.asnumpy(x)
    with one_thread():  # a small matrix's SVD is slower on many threads (blas_threads)
        u, s, vh = fallback_host(h)
    return cp.asarray(u), cp.asarray(s), cp.asarray(vh)


# The Gram path's column checks, one module per dtype (compiled once per machine: CuPy keeps
# it on disk). Written out rather than as CuPy expressions: those are a dozen kernels, each a
# compilation of about 1 s on a machine's first call (measured: 10.5 s on a fresh H200 for the
# path in CuPy expressions, 0.3 s once CuPy's cache held them).
_CHECKS_SRC = r"""
#include <cupy/complex.cuh>
typedef %(T)s T;
typedef %(R)s R;
#define TX 32
#define TY 8
#define CH 256
__device__ inline R mag(double x) { return fabs(x); }
__device__ inline R mag(float x) { return fabsf(x); }
__device__ inline R mag(complex<double> x) { return abs(x); }
__device__ inline R mag(complex<float> x) { return abs(x); }
// the max of non-negative values (and NaN, which compares above every one) by their bits
__device__ inline void amax(float* p, float v) {
    atomicMax((unsigned int*)p, __float_as_uint(v));
}
__device__ inline void amax(double* p, double v) {
    atomicMax((unsigned long long*)p, (unsigned long long)__double_as_longlong(v));
}
extern "C" {
// u[i, j] /= s[j], u row-major rows x cols
__global__ void scale_cols(T* u, const R* s, long long rows, long long cols) {
    long long n = rows * cols;
    for (long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x; k < n;
         k += (long long)gridDim.x * blockDim.x) {
        u[k] = u[k] / T(s[k %% cols]);
    }
}
// out[j] += |y[i, j] - s[j] v[i, j]|^2 over this block's rows (out zeroed; y, v row-major):
// blocks of TX columns by CH rows, TY threads down each column
__global__ void resid_sq(const T* y, const T* v, const R* s, long long rows, long long cols,
                         R* out) {
    __shared__ R part[TY][TX];
    long long j = blockIdx.x * (long long)TX + threadIdx.x;
    long long i0 = blockIdx.y * (long long)CH;
    long long i1 = i0 + CH < rows ? i0 + CH : rows;
    R acc = 0;
    if (j < cols) {
        T sj = T(s[j]);
        for (long long i = i0 + threadIdx.y; i < i1; i += TY) {
            R d = mag(y[i * cols + j] - sj * v[i * cols + j]);
            acc += d * d;
        }
    }
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < cols) {
        for (int k = 1; k < TY; k++) acc += part[k][threadIdx.x];
        atomicAdd(&out[j], acc);
    }
}
// out[j] = max of out[j] and |e[i, j] - (identity and i == j)| over this block's rows
// (i <= j where triangular; out zeroed)
__global__ void colmax(const T* e, long long rows, long long cols, int triangular,
                       int identity, R* out) {
    __shared__ R part[TY][TX];
    long long j = blockIdx.x * (long long)TX + threadIdx.x;
    long long i0 = blockIdx.y * (long long)CH;
    long long i1 = i0 + CH < rows ? i0 + CH : rows;
    if (triangular && i1 > j + 1) i1 = j + 1;
    R m = 0;
    if (j < cols) {
        for (long long i = i0 + threadIdx.y; i < i1; i += TY) {
            T x = e[i * cols + j];
            if (identity && i == j) x = x - T(1);
            R a = mag(x);
            m = (a > m || a != a) ? a : m;
        }
    }
    part[threadIdx.y][threadIdx.x] = m;
    __syncthreads();
    if (threadIdx.y == 0 && j < cols) {
        for (int k = 1; k < TY; k++) {
            R a = part[k][threadIdx.x];
            m = (a > m || a != a) ? a : m;
        }
        amax(&out[j], m);
    }
}
}
"""
_CHECKS: dict = {}
_CTYPES = {
    np.dtype(np.float32): ("float", "float"),
    np.dtype(np.float64): ("double", "double"),
    np.dtype(np.complex64): ("complex<float>", "float"),
    np.dtype(np.complex128): ("complex<double>", "double"),
}


def _checks(dtype):
    mod = _CHECKS.get(dtype)
    if mod is None:
        t, r = _CTYPES[dtype]
        mod = _CHECKS[dtype] = cp.RawModule(code=_CHECKS_SRC % {"T": t, "R": r})
    return mod


def _launch(fn, rows: int, cols: int, args) -> None:
    if rows > 65535 * 256:  # gridDim.y's bound (rows are at most a matrix's smaller side)
        raise ValueError(f"cuda_svd: {rows} rows is more than a check kernel's grid holds")
    fn(((cols + 31) // 32, (rows + 255) // 256), (32, 8), args)


def scale_cols(u, s) -> None:
    """u[:, j] /= s[j] in place (u C-contiguous)."""
    require_contiguous(u, s)
    rows, cols = u.shape
    fn = _checks(u.dtype).get_function("scale_cols")
    fn((min((u.size + 255) // 256, 4096),), (256,), (u, s, np.int64(rows), np.int64(cols)))


def resid_norms(y, v, s, fetch: bool = True):
    """|y[:, j] - s[j] v[:, j]| for every column j (y, v C-contiguous, of one shape), on the
    host (on the device, not waited for, with ``fetch=False``)."""
    require_contiguous(y, v, s)
    rows, cols = y.shape
    out = cp.zeros(cols, s.dtype)
    _launch(
        _checks(y.dtype).get_function("resid_sq"),
        rows,
        cols,
        (y, v, s, np.int64(rows), np.int64(cols), out),
    )
    out = cp.sqrt(out)
    return cp.asnumpy(out) if fetch else out


def colmax(e, triangular: bool, identity: bool, fetch: bool = True):
    """The largest |e[i, j] - (identity and i == j)| of each column j, over i <= j where
    ``triangular`` (e C-contiguous), on the host (on the device, not waited for, with
    ``fetch=False``); NaN where the column holds one."""
    require_contiguous(e)
    rows, cols = e.shape
    real = real_dtype(e.dtype)
    out = cp.zeros(cols, real)
    _launch(
        _checks(e.dtype).get_function("colmax"),
        rows,
        cols,
        (e, np.int64(rows), np.int64(cols), np.int32(triangular), np.int32(identity), out),
    )
    return cp.asnumpy(out) if fetch else out


# cuBLAS's enums (cublas_api.h)
_FILL_LOWER, _OP_N, _OP_T, _OP_C, _POINTER_HOST = 0, 0, 1, 2, 0
_RANK_K: list = []  # [{dtype: ctypes function} or None], made once
_ONE_ZERO = {np.dtype(r): (np.ones(1, r), np.zeros(1, r)) for r in (np.float32, np.float64)}


def _rank_k():
    """cuBLAS's Hermitian (real: symmetric) rank-k products, ``{dtype: function}``, through
    ctypes on the libcublas CuPy loaded (CuPy binds syrk but not herk); None where it cannot
    be loaded."""
    if _RANK_K:
        return _RANK_K[0]
    with _LOCK:
        if _RANK_K:
            return _RANK_K[0]
        fns: dict | None = None
        try:
            from tenloom.runtime.backends.cuda_libs import cublas_library

            lib, _names = cublas_library()
            if lib is not None:
                p, i = ctypes.c_void_p, ctypes.c_int
                fns = {}
                for dt, name in (
                    (np.float32, "cublasSsyrk_v2"),
                    (np.float64, "cublasDsyrk_v2"),
                    (np.complex64, "cublasCherk_v2"),
                    (np.complex128, "cublasZherk_v2"),
                ):
                    f = getattr(lib, name)
                    f.argtypes = [p, i, i, i, i, p, p, i, p, p, i]
                    f.restype = i
                    fns[np.dtype(dt)] = f
        except (ImportError, OSError, AttributeError):
            fns = None
        _RANK_K.append(fns)
        return fns


def _herk(x, rows: bool):
    """e = x^H x (x x^H for ``rows``) of the C-contiguous ``x``, of which only the upper
    triangle in C order is formed (the rest is left unset), by cuBLAS's herk (syrk where
    real): half a GEMM's flops. A full GEMM where cuBLAS cannot be reached."""
    require_contiguous(x)
    r, c = x.shape
    k, depth = (r, c) if rows else (c, r)  # e is k x k, a sum over depth
    fns = _rank_k()
    fn = fns.get(x.dtype) if fns is not None else None  # other dtypes: the GEMM below
    if fn is not None and k and depth and max(r, c) < 2**31:
        from cupy_backends.cuda.libs import cublas

        e = cp.empty((k, k), x.dtype)
        one, zero = _ONE_ZERO[real_dtype(x.dtype)]
        handle = cp.cuda.device.get_cublas_handle()
        cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
        cublas.setPointerMode(handle, _POINTER_HOST)
        # x in C order is x^T in cuBLAS's column order (leading dimension c). The columns'
        # product, op N, is x^T conj(x) = conj(x^H x); the rows', op C (T where real), is
        # conj(x) x^T = conj(x x^H). Read in C order, either is e itself (Hermitian), and
        # cuBLAS's lower triangle is C order's upper one.
        op = _OP_N if not rows else (_OP_C if x.dtype.kind == "c" else _OP_T)
        status = fn(
            handle, _FILL_LOWER, op, k, depth, one.ctypes.data, x.data.ptr, c,
            zero.ctypes.data, e.data.ptr, k,
        )  # fmt: skip
        if status == 0:
            return e
    return cp.ascontiguousarray(x @ x.conj().T if rows else x.conj().T @ x)


def offmax(x, rows: bool = False, fetch: bool = True):
    """How far ``x``'s columns (its rows, ``rows=True``) are from orthonormal: for each column
    j of e = x^H x (x x^H), the largest |e[i, j] - (i == j)| over i <= j (x C-contiguous).
    Only that triangle is formed (``_herk``: at N=2048 complex128 on an H100, 0.6 ms where the
    GEMM took 1.2)."""
    return colmax(_herk(x, rows), True, True, fetch)


def gram(x):
    """x^H x's upper triangle in C order (``_herk``; x of any layout, a wide matrix's
    transpose copied first), for eigh with UPLO="U"."""
    return _herk(cp.ascontiguousarray(x), False)


CUDA_CHECKS = Checks(cp.asnumpy, scale_cols, resid_norms, colmax, offmax, gram)


def svd_kernel(fallback, fallback_host) -> Any:
    """The SVD op's kernel on CUDA: ``run(x, full)`` -> ``(u, s, vh)``; ``fallback(x)`` is the
    reference on the device (CuPy's gesvd), ``fallback_host`` the same on host arrays."""
    state = {"skip": 0, "fails": 0}

    def scale_of(x) -> float | None:
        # scaled by a power of two (exact) to a Frobenius norm in (1/2, 1]: s_max is then within
        # a factor 2 sqrt(k) of 1, so the tolerance means the same whether h_err_sigma is an
        # absolute or a relative error; a zero or overflowing norm goes to gesvd
        norm = float(cp.linalg.norm(x))
        if not (0.0 < norm < math.inf):
            return None
        return 2.0 ** -math.ceil(math.log2(norm))

    def small_svd(b):
        """The SVD of the Gram route's p x p tail factor: the host's LAPACK below MIN_SIDE
        (``b`` may then be a host array), else gesvdp where it is accurate, else gesvd."""
        if b.shape[0] < MIN_SIDE:
            COUNTERS["tail_host"] += 1
            return _host_svd(b, lambda h: host_tail_svd(h, fallback_host))
        got = by_gesvdp(b)[0]
        if got is not None:
            COUNTERS["tail_gesvdp"] += 1
            return got
        COUNTERS["tail_gesvd"] += 1
        return fallback(b)

    # a tail below MIN_SIDE goes to the host's LAPACK, which then runs while the GPU checks
    # the head
    gram = GramRoute(cp, CUDA_CHECKS, small_svd, COUNTERS, host_small=MIN_SIDE)
    # the levels route: after gesvdp, for what it leaves (no rest: gesvd is dearer still)
    levels = GramRoute(
        cp,
        CUDA_CHECKS,
        small_svd,
        COUNTERS,
        history=False,
        levels=GRAM_LEVELS,
        names=("levels", "levels_declined"),
    )

    def one(x, polar: bool, rank: int | None = None):
        """The SVD by the first route that is accurate (None where every route declined:
        gesvd's turn), with whether gesvdp ran and was not accurate. With ``rank``, the Gram
        route's head alone is tried first (``(u, s, vh, rest)``), and where it declines the
        other routes give the whole SVD (the caller cuts it), not the Gram route again."""
        got = gram(x, rank)
        if got is not None:
            return got, False
        failed = False
        if polar:
            got, failed = by_gesvdp(x)
            if got is not None:
                COUNTERS["gesvdp"] += 1
                return got, False
        if GRAM_LEVELS > 1:
            got = levels(x)
        return got, failed

    def by_gesvdp(x):
        """``(factors, tried)``: gesvdp's SVD of ``x`` where it is accurate, else None, and
        whether gesvdp ran (it does not without the library or a handle, or for a matrix
        whose norm is 0 or overflows)."""
        lib = _lib()
        scale = scale_of(x) if lib is not None else None
        if scale is None:
            return None, False
        device = cp.cuda.Device().id
        hp = _checkout(lib, device)
        if hp is None:
            return None, False
        return polar_svd(x, lib, hp, scale, device), True

    def polar_svd(x, lib, hp, scale: float, device: int):
        m, n = x.shape
        try:
            if n >= m:  # B = x^T is n x m column-major, tall: x = conj(V) s U^T
                b = cp.empty((m, n), x.dtype)
                cp.multiply(x, scale, out=b)
                got = gesvdp_tall(b, lib, hp)
                if got is None:
                    return None
                ut, s, vt, within = got
                u, vh = vt.T.conj(), ut
            else:  # B = x, m x n, stored as its transpose
                b = cp.empty((n, m), x.dtype)
                cp.multiply(x.T, scale, out=b)
                got = gesvdp_tall(b, lib, hp)
                if got is None:
                    return None
                ut, s, vt, within = got
                u, vh = ut.T, vt.conj()
        finally:
            _checkin(device, hp)
        if not within:
            return None
        return u, s * (1.0 / scale), vh

    def run(x, full: bool, rank: int | None = None):
        """``(u, s, vh)`` of each matrix of ``x``; with ``rank`` (below min(m, n), not
        ``full``), ``(u_r, s_r, vh_r, rest)``: the first ``rank`` triplets and the squared sum
        of the other singular values (TRUNCATED_SVD)."""
        m, n = x.shape[-2:]
        usable = (
            min(m, n) >= MIN_SIDE
            and (not full or m == n)
            and x.dtype in _CUDA_TYPE
            and not DETERMINISTIC.get()
            and not cp.cuda.runtime.is_hip
        )
        polar = usable
        if usable and state["skip"] > 0:
            state["skip"] -= 1
            polar = False
        if (
            x.ndim == 2
            and 0 < min(m, n) < MIN_SIDE
            and max(m, n) <= HOST_MAX_SIDE
            and not full
            and x.dtype in _CUDA_TYPE
        ):
            COUNTERS["host"] += 1
            return cut_factors(_host_svd(x, fallback_host), rank)
        if not usable or x.size == 0 or not bool(cp.isfinite(x).all()):
            COUNTERS["gesvd"] += 1
            return cut_factors(fallback(x), rank)
        flat = x.reshape((-1, m, n))
        parts = []
        for a in flat:
            got, failed = one(a, polar, rank)
            if failed:  # gesvdp was tried and was not accurate
                COUNTERS["redone"] += 1
                state["fails"] += 1
                if state["fails"] >= FAILS_IN_A_ROW:
                    state["skip"], state["fails"] = RETRY_AFTER, 0
            elif polar:
                state["fails"] = 0
            if got is None:
                if not failed:  # (a failed gesvdp's redoing is counted as "redone")
                    COUNTERS["gesvd"] += 1
                got = fallback(a)
            if rank is not None and len(got) == 3:
                got = cut_factors(got, rank)
            parts.append(got)
        batch = x.shape[:-2]
        parts = [tuple(cp.asarray(f) for f in p) for p in parts]  # (a head's rest: a float)
        if len(parts) == 1:  # one matrix: its factors as they are (a stack copies them)
            return tuple(f.reshape(batch + f.shape) for f in parts[0])
        return tuple(
            cp.stack([p[i] for p in parts]).reshape(batch + parts[0][i].shape)
            for i in range(len(parts[0]))
        )

    return run
