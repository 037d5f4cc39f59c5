"""CuPy RawKernels for the semiring GEMMs of runtime/kernels/semiring.py on CuPy arrays: a
tiled, batched tropical GEMM (max_plus, min_plus, max_times in float32, float64, int32, int64)
and a counting one ((value, count) pairs, float64).

Both tile the output in 64 x 64 blocks of 16 x 16 threads, each thread 4 x 4 outputs, with
16-deep slices of A and B staged in shared memory; the batch is the grid's third dimension
(grid-stride loops over batches and row tiles, so any size fits the grid's limits). Every
output combines its terms in order of k, so results do not depend on scheduling. Integer sums
and products wrap around as NumPy's do (computed unsigned); NaN terms stick as in
``numpy.maximum``; a counting NaN value has count 0.
"""

from __future__ import annotations

import math

import numpy as np

try:  # the sources are plain text, readable (and checked by the tests) without CuPy
    import cupy as cp
except ImportError:  # pragma: no cover - depends on the install
    cp = None

BM = BN = 64  # output rows / columns per thread block
BK = 16  # summed indices per shared-memory slice
THREADS = 16  # per block side: each thread computes (BM / 16) x (BN / 16) outputs
_C_TYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "long long"}
_U_TYPES = {"int32": "unsigned int", "int64": "unsigned long long"}
_LOWEST = {
    "float32": "(-INFINITY)",
    "float64": "(-INFINITY)",
    "int32": "(-2147483647 - 1)",
    "int64": "(-9223372036854775807LL - 1)",
}
_HIGHEST = {
    "float32": "INFINITY",
    "float64": "INFINITY",
    "int32": "2147483647",
    "int64": "9223372036854775807LL",
}
_KERNELS: dict[tuple, object] = {}

_PREAMBLE = """
#ifndef INFINITY  // NVRTC compiles without the C headers that define it
#define INFINITY __int_as_float(0x7f800000)
#endif
#define TM {tm}
#define TN {tn}
#define BM {bm}
#define BN {bn}
#define BK {bk}
#define NT {nt}
"""


def _tropical_source(semiring: str, dt: str) -> str:
    """``semiring_gemm(A, B, C, nb, M, N, K)`` for one semiring and dtype."""
    t = _C_TYPES[dt]
    if dt in _U_TYPES:  # wrapping arithmetic, as NumPy's
        u = _U_TYPES[dt]
        op = "*" if semiring == "max_times" else "+"
        times = f"(({t})(({u})(x) {op} ({u})(y)))"
    else:
        times = "((x) * (y))" if semiring == "max_times" else "((x) + (y))"
    better = "<" if semiring == "min_plus" else ">"
    nan = "(v != v) || " if dt.startswith("float") else ""
    init = _HIGHEST[dt] if semiring == "min_plus" else _LOWEST[dt]
    return (
        _PREAMBLE.format(tm=BM // THREADS, tn=BN // THREADS, bm=BM, bn=BN, bk=BK, nt=THREADS)
        + f"""
typedef {t} T;
__device__ __forceinline__ T times(T x, T y) {{ return {times}; }}
// NaN sticks: a NaN term replaces the accumulator, and nothing replaces a NaN one
__device__ __forceinline__ T combine(T acc, T v) {{ return ({nan}v {better} acc) ? v : acc; }}

extern "C" __global__ void semiring_gemm(const T* __restrict__ A, const T* __restrict__ B,
    T* __restrict__ C, const long long nb, const long long M, const long long N,
    const long long K) {{
  __shared__ T As[BK][BM];
  __shared__ T Bs[BK][BN];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * NT + tx;
  const long long col0 = (long long)blockIdx.x * BN;
  const long long row_tiles = (M + BM - 1) / BM;
  for (long long b = blockIdx.z; b < nb; b += gridDim.z) {{
    const T* Ab = A + b * M * K;
    const T* Bb = B + b * K * N;
    T* Cb = C + b * M * N;
    for (long long rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {{
      const long long row0 = rt * BM;
      T acc[TM][TN];
      for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) acc[i][j] = {init};
      for (long long k0 = 0; k0 < K; k0 += BK) {{
        for (int l = tid; l < BM * BK; l += NT * NT) {{
          const int r = l / BK, kk = l % BK;
          const long long gr = row0 + r, gk = k0 + kk;
          As[kk][r] = (gr < M && gk < K) ? Ab[gr * K + gk] : (T)0;
        }}
        for (int l = tid; l < BK * BN; l += NT * NT) {{
          const int kk = l / BN, c = l % BN;
          const long long gk = k0 + kk, gc = col0 + c;
          Bs[kk][c] = (gk < K && gc < N) ? Bb[gk * N + gc] : (T)0;
        }}
        __syncthreads();
        const int kmax = (K - k0 < BK) ? (int)(K - k0) : BK;
        for (int kk = 0; kk < kmax; ++kk) {{
          T ra[TM], rb[TN];
          for (int i = 0; i < TM; ++i) ra[i] = As[kk][ty + NT * i];
          for (int j = 0; j < TN; ++j) rb[j] = Bs[kk][tx + NT * j];
          for (int i = 0; i < TM; ++i)
            for (int j = 0; j < TN; ++j) acc[i][j] = combine(acc[i][j], times(ra[i], rb[j]));
        }}
        __syncthreads();
      }}
      for (int i = 0; i < TM; ++i) {{
        const long long r = row0 + ty + NT * i;
        for (int j = 0; j < TN; ++j) {{
          const long long c = col0 + tx + NT * j;
          if (r < M && c < N) Cb[r * N + c] = acc[i][j];
        }}
      }}
    }}
  }}
}}
"""
    )


def _count_source() -> str:
    """``count_gemm(Av, Ac, Bv, Bc, Cv, Cc, has_ac, has_bc, nb, M, N, K)``: counting GEMM of
    float64 values and counts (without a count array, raw weights: each entry counts 1, an
    entry of -inf 0)."""
    return (
        _PREAMBLE.format(tm=BM // THREADS, tn=BN // THREADS, bm=BM, bn=BN, bk=BK // 2, nt=THREADS)
        + """
extern "C" __global__ void count_gemm(const double* __restrict__ Av,
    const double* __restrict__ Ac, const double* __restrict__ Bv,
    const double* __restrict__ Bc, double* __restrict__ Cv, double* __restrict__ Cc,
    const int has_ac, const int has_bc, const long long nb, const long long M,
    const long long N, const long long K) {
  __shared__ double Asv[BK][BM], Asc[BK][BM];
  __shared__ double Bsv[BK][BN], Bsc[BK][BN];
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * NT + tx;
  const long long col0 = (long long)blockIdx.x * BN;
  const long long row_tiles = (M + BM - 1) / BM;
  for (long long b = blockIdx.z; b < nb; b += gridDim.z) {
    for (long long rt = blockIdx.y; rt < row_tiles; rt += gridDim.y) {
      const long long row0 = rt * BM;
      double v[TM][TN], c[TM][TN];
      for (int i = 0; i < TM; ++i)
        for (int j = 0; j < TN; ++j) { v[i][j] = -INFINITY; c[i][j] = 0.0; }
      for (long long k0 = 0; k0 < K; k0 += BK) {
        for (int l = tid; l < BM * BK; l += NT * NT) {
          const int r = l / BK, kk = l % BK;
          const long long gr = row0 + r, gk = k0 + kk, at = b * M * K + gr * K + gk;
          const bool in = gr < M && gk < K;
          const double x = in ? Av[at] : 0.0;
          Asv[kk][r] = x;
          Asc[kk][r] = (in && has_ac) ? Ac[at] : (x == -INFINITY ? 0.0 : 1.0);
        }
        for (int l = tid; l < BK * BN; l += NT * NT) {
          const int kk = l / BN, cc = l % BN;
          const long long gk = k0 + kk, gc = col0 + cc, at = b * K * N + gk * N + gc;
          const bool in = gk < K && gc < N;
          const double x = in ? Bv[at] : 0.0;
          Bsv[kk][cc] = x;
          Bsc[kk][cc] = (in && has_bc) ? Bc[at] : (x == -INFINITY ? 0.0 : 1.0);
        }
        __syncthreads();
        const int kmax = (K - k0 < BK) ? (int)(K - k0) : BK;
        for (int kk = 0; kk < kmax; ++kk) {
          for (int i = 0; i < TM; ++i) {
            const double av = Asv[kk][ty + NT * i], ac = Asc[kk][ty + NT * i];
            for (int j = 0; j < TN; ++j) {
              const double t = av + Bsv[kk][tx + NT * j];
              const double w = ac * Bsc[kk][tx + NT * j];
              double vv = v[i][j];
              if (vv == vv) {  // a NaN value stays, with count 0
                if (t != t) { v[i][j] = t; c[i][j] = 0.0; }
                else if (t > vv) { v[i][j] = t; c[i][j] = w; }
                else if (t == vv) { c[i][j] += w; }
              }
            }
          }
        }
        __syncthreads();
      }
      for (int i = 0; i < TM; ++i) {
        const long long r = row0 + ty + NT * i;
        for (int j = 0; j < TN; ++j) {
          const long long cc = col0 + tx + NT * j;
          if (r < M && cc < N) {
            Cv[b * M * N + r * N + cc] = v[i][j];
            Cc[b * M * N + r * N + cc] = c[i][j];
          }
        }
      }
    }
  }
}
"""
    )


def _kernel(semiring: str, dt: str):
    key = (semiring, dt)
    k = _KERNELS.get(key)
    if k is None:
        if semiring == "count":
            k = cp.RawKernel(_count_source(), "count_gemm")
        else:
            k = cp.RawKernel(_tropical_source(semiring, dt), "semiring_gemm")
        _KERNELS[key] = k
    return k


def _grid(nb: int, m: int, n: int) -> tuple[int, int, int]:
    return (math.ceil(n / BN), min(math.ceil(m / BM), 65535), min(nb, 65535))


def gemm(a, b, semiring: str):
    """The tropical GEMM of CuPy stacks (nb, m, k) x (nb, k, n) -> (nb, m, n)."""
    dt = np.result_type(a.dtype, b.dtype)
    if dt.name not in _C_TYPES or semiring not in ("max_plus", "min_plus", "max_times"):
        raise TypeError(f"cuda_semiring.gemm: {semiring} in {dt} has no kernel")
    a = cp.ascontiguousarray(a, dtype=dt)
    b = cp.ascontiguousarray(b, dtype=dt)
    nb, m, k = a.shape
    n = b.shape[2]
    if k == 0:
        from tenloom.graph.ops.semiring import zero_of

        return cp.full((nb, m, n), zero_of(semiring, dt), dt)
    c = cp.empty((nb, m, n), dt)
    if c.size:
        args = (a, b, c, np.int64(nb), np.int64(m), np.int64(n), np.int64(k))
        _kernel(semiring, dt.name)(_grid(nb, m, n), (THREADS, THREADS, 1), args)
    return c


def count_gemm(av, ac, bv, bc):
    """The counting GEMM of CuPy stacks of values (and counts; None: raw weights, counting 1
    per entry and 0 for -inf), (nb, m, k) x (nb, k, n) -> (values, counts), float64."""
    f8 = np.float64
    av, bv = cp.ascontiguousarray(av, dtype=f8), cp.ascontiguousarray(bv, dtype=f8)
    nb, m, k = av.shape
    n = bv.shape[2]
    has = (np.int32(ac is not None), np.int32(bc is not None))
    cv = cp.full((nb, m, n), -np.inf, f8)
    cc = cp.zeros((nb, m, n), f8)
    if cv.size == 0 or k == 0:
        return cv, cc
    ac = av if ac is None else cp.ascontiguousarray(ac, dtype=f8)  # not read without counts
    bc = bv if bc is None else cp.ascontiguousarray(bc, dtype=f8)
    args = (av, ac, bv, bc, cv, cc, *has, np.int64(nb), np.int64(m), np.int64(n), np.int64(k))
    _kernel("count", "float64")(_grid(nb, m, n), (THREADS, THREADS, 1), args)
    return cv, cc
