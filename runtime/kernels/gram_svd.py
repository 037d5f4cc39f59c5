"""The SVD through the eigendecomposition of the Gram matrix, kept only where it is checked to
be accurate to 1024 ulp (issue 20): one implementation for NumPy (the CPU backend) and CuPy
(runtime/backends/cuda_svd.py, with its checks as CUDA kernels).

**The route.** G = A^H A is Hermitian; ``eigh`` (LAPACK/cuSOLVER syevd, heevd) gives its
eigenvalues s_i^2 to eps * s_max^2 and an orthonormal V, and U = A V / s. That is torch's
``gesvda``, and it is fast: at N=2048 float64 the eigendecomposition took 0.77 s where NumPy's
SVD (gesdd) took 2.0 s on 2 cores, and on an H200 27 ms against gesvdp's 73 ms. But its small
singular values and their U columns are wrong: s_i loses s_max / s_i of its digits, and U's
columns i and j stay orthogonal only to about eps * s_max^2 / (s_i s_j).

**The head.** So only the head is kept from it: the longest run of leading columns checked to
1024 ulp (``TOL_ULPS``), the tolerance gesvdp's results are held to on CUDA. LAPACK's own
factors are typically nearer 10-100 ulp: U from this route was orthonormal to 1e-13 in float64
where gesdd's was 2e-15, and to 1.7e-5 in float32 where gesdd's was 6e-7.
- Each column's residual |A^H u_i - s_i v_i| must be within ``TOL_ULPS * eps * s_max``.
  (A v_i - s_i u_i is zero by construction, up to rounding, and the pair of residuals puts a
  true singular value within that of s_i.)
- U's columns must be orthonormal to ``TOL_ULPS * eps`` among themselves.

**The tail**, the rest, is solved apart. V's remaining columns span the rest of the row space
exactly (V is orthonormal), so W = (I - U_h U_h^H) A V_t holds what is left of A. An SVD of W
(a QR of it, kept orthogonal to U_h, and ``small_svd`` of its p x p factor) gives the tail's
singular triplets as accurately as that SVD does. What this leaves out is U_h R^H V_t, where R
is the head's residual matrix. That is within ||R||_2 <= sqrt(h) * TOL_ULPS * eps * s_max in
the worst case, since each column is checked but not their sum. Measured, A was rebuilt to
about 1e-17 of its norm in float64.

**When it is tried.** Only where the head is most of the matrix. A Gaussian matrix's head is
96% of its columns; a spectrum that falls over many orders of magnitude, as DMRG's, has a head
of a few.
- ``head_unlikely`` sends the second kind on before any decomposition.
- A head predicted from the eigenvalues (s_i >= s_max / sqrt(TOL_ULPS)) below
  ``GRAM_HEAD_MIN`` of the columns stops the try there.
- On CUDA, a kernel whose tries were declined ``GRAM_FAILS_IN_A_ROW`` times in a row rests
  for ``RETRY_AFTER`` calls (``GramRoute`` with ``history``).

**Signs.** The route and LAPACK choose different signs (phases) for the singular vectors, and
different bases for a repeated singular value. Functions that are invariant under those
choices (U diag(s) V^H, projectors, s) agree to the tolerance; U and V themselves may not.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

TOL_ULPS = 1024
GRAM_HEAD_MIN = 0.5
GRAM_FAILS_IN_A_ROW = 2
RETRY_AFTER = 8


class Checks(NamedTuple):
    """The column checks on the array module's arrays; each result comes back as a NumPy
    array (``to_host``: an array to NumPy)."""

    to_host: Callable
    scale_cols: Callable  # (u, s): u[:, j] /= s[j] in place, u C-contiguous
    resid_norms: Callable  # (y, v, s) -> |y[:, j] - s[j] v[:, j]| per column, on the host
    colmax: Callable  # (e, triangular, identity) -> max |e[i, j] - (identity, i == j)| per j


def _np_scale_cols(u, s) -> None:
    u /= s


def _np_resid_norms(y, v, s) -> np.ndarray:
    d = y - v * s
    if d.dtype.kind == "c":  # |d|^2 without a square root per element
        return np.sqrt((d.real * d.real + d.imag * d.imag).sum(axis=0))
    return np.sqrt((d * d).sum(axis=0))


def _np_colmax(e, triangular: bool, identity: bool) -> np.ndarray:
    if identity:
        e = e - np.eye(*e.shape, dtype=e.dtype)
    a = np.abs(np.triu(e) if triangular else e)
    # NaN is reported (np.max propagates it)
    return a.max(axis=0) if a.shape[0] else np.zeros(a.shape[1], a.real.dtype)


NUMPY_CHECKS = Checks(np.asarray, _np_scale_cols, _np_resid_norms, _np_colmax)


def real_dtype(dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    return np.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype


def tol(real) -> float:
    return TOL_ULPS * float(np.finfo(real).eps)


@functools.lru_cache(maxsize=64)
def _probe_vector(n: int, real) -> np.ndarray:
    v = np.random.default_rng(n).standard_normal(n).astype(real)
    v.flags.writeable = False
    return v


def head_unlikely(xp, a, frob: float, to_host: Callable) -> bool:
    """Whether ``a``'s energy is so concentrated in its top singular values that the head is
    unlikely to be most of its columns: ||A||_F^2 below n s^2 / 16, with s a lower bound of
    s_max from three power steps of A^H A (a few matrix-vector products).

    A Gaussian matrix has ||A||_F^2 about n s_max^2 / 4. Every DMRG split of L=20, chi=512
    (n = 128 to 1022) has 1.2 to 2 s_max^2. The first goes to the Gram route, the other on
    without the eigendecomposition. A heuristic only: it decides which route runs first, never
    what is accepted."""
    m, n = a.shape
    x = xp.asarray(_probe_vector(n, real_dtype(a.dtype))).astype(a.dtype)
    ah = a.conj().T
    for _ in range(3):  # a has norm <= 1: nothing grows
        x = ah @ (a @ x)
    z = to_host(a @ x)
    xh = to_host(x)
    nx = float(np.vdot(xh, xh).real)
    if not nx > 0:
        return True
    s2 = float(np.vdot(z, z).real) / nx
    return frob * frob < n * s2 / 16


def gram_svd(
    xp, a, small_svd: Callable, frob: float, checks: Checks, precheck: bool = True
) -> tuple | None:
    """The reduced SVD ``(u, s, vh)`` of the tall (m >= n) matrix ``a`` (Frobenius norm
    ``frob``, in (1/2, 1]) through the Gram matrix, or None where that would not be accurate or
    would not pay (the module docstring). ``precheck``: run ``head_unlikely`` first;
    ``small_svd`` does the tail's p x p factor."""
    m, n = a.shape
    real = real_dtype(a.dtype)
    tl_ = tol(real)
    if precheck and head_unlikely(xp, a, frob, checks.to_host):
        return None
    ah = a.conj().T
    w, v = xp.linalg.eigh(ah @ a)
    w_host = np.asarray(checks.to_host(w))[::-1]  # descending
    s_host = np.sqrt(np.maximum(w_host, 0)).astype(real, copy=False)
    top = float(s_host[0])
    if not 0.0 < top < math.inf:
        return None
    h = int(np.count_nonzero(s_host >= top / math.sqrt(TOL_ULPS)))
    if h < GRAM_HEAD_MIN * n:
        return None
    v = v[:, ::-1]
    vh_ = xp.ascontiguousarray(v[:, :h])
    s_dev = xp.asarray(s_host[:h])
    u = xp.ascontiguousarray(a @ vh_)
    checks.scale_cols(u, s_dev)
    res = checks.resid_norms(xp.ascontiguousarray(ah @ u), vh_, s_dev)
    off = checks.colmax(xp.ascontiguousarray(u.conj().T @ u), True, True)
    # column j is good where its residual is small and it is orthonormal to columns 0..j
    # (written so that NaN is bad)
    bad = np.flatnonzero(~((res <= tl_ * top) & (off <= tl_)))
    if bad.size:
        h = int(bad[0])
        if h < GRAM_HEAD_MIN * n:
            return None
    uu = xp.empty((m, n), a.dtype)
    vv = xp.empty((n, n), a.dtype)
    uu[:, :h] = u[:, :h]
    vv[:h] = vh_[:, :h].conj().T
    ss = s_host.copy()
    if h < n:
        u = uu[:, :h]
        vt = v[:, h:]
        wt = a @ vt
        for _ in range(2):  # twice: once loses orthogonality where W is small
            wt -= u @ (u.conj().T @ wt)
        q = xp.linalg.qr(wt)[0]
        if not checks.colmax(xp.ascontiguousarray(u.conj().T @ q), False, False).max() <= tl_:
            # Q spans W; where W is rank-deficient its other columns must still be
            # orthogonal to the head
            for _ in range(2):
                q -= u @ (u.conj().T @ q)
            q = xp.linalg.qr(q)[0]
        ub, sb, vbh = small_svd(q.conj().T @ wt)
        ut = q @ ub
        cross = checks.colmax(xp.ascontiguousarray(u.conj().T @ ut), False, False).max()
        own = checks.colmax(xp.ascontiguousarray(ut.conj().T @ ut), True, True).max()
        if not (cross <= tl_ and own <= tl_):
            return None
        uu[:, h:] = ut
        vv[h:] = vbh @ vt.conj().T
        ss[h:] = checks.to_host(sb)
    if h < n and bool((ss[1:] > ss[:-1]).any()):  # a tail value above the head's last
        order = np.argsort(-ss, kind="stable")
        ss = ss[order]
        order = xp.asarray(order)
        uu, vv = uu[:, order], vv[order]
    return uu, xp.asarray(ss), vv


class GramRoute:
    """One kernel's Gram route: ``route(x)`` -> ``(u, s, vh)`` of a matrix of either
    orientation, or None (declined: the caller goes on to its next route). It scales by a power
    of two (exact) to a Frobenius norm in (1/2, 1] and counts into ``counters`` (``gram``,
    ``gram_declined``).

    With ``history`` (CUDA), it also rests after ``GRAM_FAILS_IN_A_ROW`` declines and skips the
    pre-check while its last try was kept. Then the route a matrix takes depends on the
    kernel's recent calls, and with it the signs (phases) of the singular vectors and the basis
    of a repeated singular value. Without ``history`` (the CPU), the route depends on the
    matrix alone, so the same input gives the same factors."""

    def __init__(
        self, xp, checks: Checks, small_svd: Callable, counters: dict, history: bool = True
    ) -> None:
        self.xp, self.checks, self.small_svd, self.counters = xp, checks, small_svd, counters
        self.history = history
        self.skip = self.fails = 0
        self.ok = False

    def __call__(self, x) -> Any:
        if self.skip > 0:
            self.skip -= 1
            return None
        m, n = x.shape
        with np.errstate(over="ignore", invalid="ignore"):  # a norm past the range: declined
            norm = float(self.xp.linalg.norm(x))
        got = None
        if 0.0 < norm < math.inf:
            scale = 2.0 ** -math.ceil(math.log2(norm))
            a = x * scale
            got = gram_svd(
                self.xp,
                a if m >= n else a.T,
                self.small_svd,
                norm * scale,
                self.checks,
                precheck=not (self.ok and self.history),
            )
        self.ok = got is not None
        if got is None:
            self.counters["gram_declined"] += 1
            self.fails += 1
            if self.fails >= GRAM_FAILS_IN_A_ROW and self.history:
                self.skip, self.fails = RETRY_AFTER, 0
            return None
        self.fails = 0
        self.counters["gram"] += 1
        ua, s, vha = got  # x^T = U S V^H for a wide x: x = conj(V) S U^T
        u, vh = (ua, vha) if m >= n else (vha.T, ua.T)
        return u, s * (1.0 / scale), vh
