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

**Levels** (``levels`` > 1; CUDA uses them after gesvdp, runtime/backends/cuda_svd.py). One
level resolves the singular values within about 32x of s_max: below that U's columns are not
orthonormal to the tolerance. A spectrum that falls over many orders of magnitude, as a DMRG
split's (1e-14 within 512 values, then exact zeros), is then left to the tail, and the tail's
p x p factor to ``small_svd`` at the cost of a whole SVD. With levels (``_levels``):
- A level's head is orthonormalized by a QR, in order from the largest singular value (whose
  columns are the most accurate), and both residuals of each column, |A v_j - s_j u_j| and
  |A^H u_j - s_j v_j|, are checked again. The head then reaches the values whose residual
  eps s_max^2 / s_j is within the tolerance: about 1000x below s_max, not 32x. (The first
  level keeps its head as it is where its columns are orthonormal already, as a Gaussian
  matrix's are; a deeper level's head is always made orthogonal to the earlier heads first.)
- What is left, W (m x p, with its right basis), goes to the next level, held to the same
  absolute tolerance (1024 ulp of the whole matrix's s_max, not of W's own). W's norm is about
  s_max / 1000, so the next level resolves the values down to about eps s_max^2 / 1000^2 /
  tol: 1e-9 of s_max in float64, and the one after that the rest. Three to four levels take a
  float64 spectrum to its exact zeros; each costs an eigendecomposition of W^H W and a QR of
  its head.
- A W whose Frobenius norm is within the tolerance has singular values within the tolerance
  of 0: they are returned as 0, with an orthonormal basis of the heads' complement (a fixed
  random matrix made orthogonal to the heads, by a QR) as their U. Where LAPACK gives 1e-17
  there, this route gives 0; values above the tolerance come out more accurate than LAPACK's,
  as each level measures them against a smaller norm.
- A W narrower than ``LEVEL_MIN_SIDE``, or the last level's, goes to ``small_svd`` through an
  orthonormal basis of its columns (``_tail_basis``: a QR, made orthogonal to the heads again
  where W's rank deficiency or condition left the QR's columns short of it).

**V is checked too.** Both routes check V's rows orthonormal to the tolerance (``offmax``, a
Hermitian product): the eigendecomposition's V is not to be trusted (multithreaded OpenBLAS's
syevd gave one 27x the tolerance from orthonormal), nor a tail factor from LAPACK's gesdd. The
levels check all of V at the end; one level checks it in parts, the head's rows while the
host computes the tail's SVD, then the tail's rows against the head's and among themselves.

**Truncated** (``gram_head``, TRUNCATED_SVD's kernel on CUDA and the CPU: tensor_svd with a
rank r below min(m, n)). Only the first r triplets and rest = sum(s_i^2, i >= r) are wanted,
so the head is all there is: its r columns are formed and checked as above (each residual,
U's and V's columns orthonormal, one product of r columns each rather than of n), and nothing
of the tail is made. rest is the sum of the other eigenvalues of G, each within about
eps s_max^2 of its own: kept where ``REST_ERROR`` n eps s_max^2 is within ``TOL_ULPS`` ulp of
rest (a Gaussian matrix's rest is hundreds of s_max^2; measured in float32 against float64,
within 1 ulp). A spectrum whose rest is smaller, a head predicted shorter than r, or a check
that fails, goes to the full SVD, cut. At N=2048, r=N/4 this leaves the eigendecomposition
and about a quarter of the full route's products.

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
# levels (the module docstring): columns predicted within this factor of the tolerance are tried;
# a tail at least this wide goes through a further level rather than ``small_svd``
LEVEL_MARGIN = 8.0
LEVEL_MIN_SIDE = 128
# a tail factor narrower than this runs on one BLAS thread, by gesdd where its factors are
# orthonormal to HOST_TAIL_ULPS, else by gesvd (host_tail_svd)
GESVD_BELOW = 128
HOST_TAIL_ULPS = TOL_ULPS // 8
# gram_head: rest is taken from the eigenvalues where REST_ERROR n eps s_max^2 is within
# TOL_ULPS ulp of it
REST_ERROR = 4.0
GRAM_FAILS_IN_A_ROW = 2
RETRY_AFTER = 8


class Checks(NamedTuple):
    """The column checks on the array module's arrays; each result comes back as a NumPy
    array (``to_host``: an array to NumPy)."""

    to_host: Callable
    scale_cols: Callable  # (u, s): u[:, j] /= s[j] in place, u C-contiguous
    # (y, v, s) -> |y[:, j] - s[j] v[:, j]| per column, on the host
    resid_norms: Callable
    # (e, triangular, identity) -> max |e[i, j] - (identity, i == j)| per column j
    colmax: Callable
    # (x, rows) -> max |e[i, j] - (i == j)| over i <= j per column j of e = x^H x (x's
    # columns), or e = x x^H (its rows, ``rows=True``): how far from orthonormal. CUDA forms
    # only that triangle (a Hermitian rank-k product, half a GEMM's flops)
    offmax: Callable
    # x -> x^H x (x of any layout), of which only the upper triangle (i <= j) is promised:
    # eigh reads that one (UPLO="U"); CUDA forms only it (herk)
    gram: Callable
    # resid_norms, colmax and offmax take ``fetch=False``: the result left on the device, not
    # waited for (to_host later)


def require_contiguous(*arrays) -> None:
    """The column checks' contract: C-contiguous arrays (NumPy's or CuPy's). The CUDA kernels
    index raw pointers (a RawKernel gets no strides); NumPy's checks hold it too, so that the
    CPU's tests catch a strided argument."""
    for a in arrays:
        if not a.flags.c_contiguous:
            raise ValueError("gram_svd: the column checks take C-contiguous arrays")


def _np_scale_cols(u, s) -> None:
    require_contiguous(u, s)
    u /= s


def _np_resid_norms(y, v, s, fetch: bool = True) -> np.ndarray:
    require_contiguous(y, v, s)
    d = y - v * s
    if d.dtype.kind == "c":  # |d|^2 without a square root per element
        return np.sqrt((d.real * d.real + d.imag * d.imag).sum(axis=0))
    return np.sqrt((d * d).sum(axis=0))


def _np_colmax(e, triangular: bool, identity: bool, fetch: bool = True) -> np.ndarray:
    require_contiguous(e)
    if identity:
        e = e - np.eye(*e.shape, dtype=e.dtype)
    a = np.abs(np.triu(e) if triangular else e)
    # NaN is reported (np.max propagates it)
    return a.max(axis=0) if a.shape[0] else np.zeros(a.shape[1], a.real.dtype)


def _np_offmax(x, rows: bool = False, fetch: bool = True) -> np.ndarray:
    require_contiguous(x)
    return _np_colmax(x @ x.conj().T if rows else x.conj().T @ x, True, True)


def _np_gram(x) -> np.ndarray:
    return x.conj().T @ x


NUMPY_CHECKS = Checks(np.asarray, _np_scale_cols, _np_resid_norms, _np_colmax, _np_offmax, _np_gram)


def host_tail_svd(b: np.ndarray, fallback: Callable) -> tuple:
    """A tail factor's SVD on the host: ``fallback`` (gesdd) where ``b`` is at least
    ``GESVD_BELOW`` wide; a narrower one on one BLAS thread (``blas_threads``), by gesdd with
    its U and V checked orthonormal to ``HOST_TAIL_ULPS`` on the host, else LAPACK's gesvd.
    On the narrow tails of clustered spectra gesdd's U and V came out 900 ulp from orthonormal
    where gesvd's were 16, and the route then declined the whole matrix; but gesvd is 2-3x
    slower at these sizes (80 x 80 complex128: 2.7 ms against 0.9 ms on one thread), so it is
    only the second try. (The check is two p x p products: 0.1 ms at p = 80.)"""
    if min(b.shape) >= GESVD_BELOW:
        return fallback(b)
    from tenloom.runtime.kernels.blas_threads import one_thread

    with one_thread():
        got = fallback(b)
        u, vh = got[0], got[2]
        lim = HOST_TAIL_ULPS * float(np.finfo(real_dtype(b.dtype)).eps)
        # written so that NaN is not within it
        if (
            _np_offmax(np.ascontiguousarray(u)).max(initial=0.0) <= lim
            and _np_offmax(np.ascontiguousarray(vh), True).max(initial=0.0) <= lim
        ):
            return got
        import scipy.linalg

        try:
            return scipy.linalg.svd(
                b, full_matrices=False, lapack_driver="gesvd", check_finite=False
            )
        except (np.linalg.LinAlgError, ValueError):
            return got  # the route's own checks decide


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


def _probe_matrix(m: int, p: int, real) -> np.ndarray:
    """A fixed Gaussian m x p matrix (the same for the same shape: the route depends on the
    matrix alone). Those of up to 2^21 values are kept (at most 16 MiB each): drawing one took
    3 ms at 957 x 510, as long as a level's QR on a GPU; a bigger one is drawn each time, which
    is small against an SVD of its size."""
    if m * p <= 1 << 21:
        return _kept_probe_matrix(m, p, np.dtype(real))
    return _draw_probe_matrix(m, p, real)


def _draw_probe_matrix(m: int, p: int, real) -> np.ndarray:
    return np.random.default_rng(m * 7919 + p).standard_normal((m, p)).astype(real)


@functools.lru_cache(maxsize=8)
def _kept_probe_matrix(m: int, p: int, real) -> np.ndarray:
    z = _draw_probe_matrix(m, p, real)
    z.flags.writeable = False
    return z


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
    xp,
    a,
    small_svd: Callable,
    frob: float,
    checks: Checks,
    precheck: bool = True,
    levels: int = 1,
    host_small: int = 0,
) -> tuple | None:
    """The reduced SVD ``(u, s, vh)`` of the tall (m >= n) matrix ``a`` (Frobenius norm
    ``frob``, in (1/2, 1]) through the Gram matrix, or None where that would not be accurate or
    would not pay (the module docstring). ``precheck``: run ``head_unlikely`` first (one level
    only); ``small_svd`` does the last tail's p x p factor; ``levels``: how many Gram levels
    the tail may go through (the module docstring's "Levels"); ``host_small``: one level gives
    ``small_svd`` a tail narrower than this as a host array (``_one_level``)."""
    if precheck and levels == 1 and head_unlikely(xp, a, frob, checks.to_host):
        return None
    if levels > 1:
        got = _levels(xp, a, small_svd, checks, levels)
    else:
        got = _one_level(xp, a, small_svd, checks, host_small)
    if got is None:
        return None
    uu, ss, vv = got
    if bool((ss[1:] > ss[:-1]).any()):  # a tail value above a head's last
        order = np.argsort(-ss, kind="stable")
        ss = ss[order]
        order = xp.asarray(order)
        uu, vv = uu[:, order], vv[order]
    return uu, xp.asarray(ss), vv


def gram_head(xp, a, rank: int, checks: Checks, precheck: bool = True, frob: float = 1.0):
    """``(u, s, vh, rest)``: the first ``rank`` singular triplets of the tall (m >= n > rank)
    matrix ``a`` (Frobenius norm ``frob``, in (1/2, 1]) and rest, the squared sum of its other
    singular values, through the Gram matrix; or None where that would not be accurate (the
    module docstring's "Truncated"); ``rest`` a float."""
    if precheck and head_unlikely(xp, a, frob, checks.to_host):
        return None
    m, n = a.shape
    real = real_dtype(a.dtype)
    tl_ = tol(real)
    w, v = xp.linalg.eigh(checks.gram(a), UPLO="U")
    lam = np.asarray(checks.to_host(w), dtype=np.float64)[::-1]  # descending
    top2 = float(lam[0])
    if not 0.0 < top2 < math.inf:
        return None
    # each eigenvalue is within about eps top^2: rest, summed from them, within
    # REST_ERROR n eps top^2, which must be within the tolerance of rest itself (written so
    # that NaN is declined); a spectrum whose rest is that small goes to the full SVD
    rest = float(np.maximum(lam[rank:], 0.0).sum())
    if not REST_ERROR * n * top2 <= TOL_ULPS * rest:
        return None
    s_host = np.sqrt(np.maximum(lam[:rank], 0.0)).astype(real)
    top = float(s_host[0])
    # U's columns i, j are orthogonal to about eps s_max^2 / (s_i s_j): a cut column below
    # this is predicted to fail
    if not s_host[-1] >= top / math.sqrt(TOL_ULPS):
        return None
    vr = xp.ascontiguousarray(v[:, n - rank :][:, ::-1])
    s_dev = xp.asarray(s_host)
    u = xp.ascontiguousarray(a @ vr)  # A V = U S
    checks.scale_cols(u, s_dev)
    # each column's residual, U's and V's columns orthonormal: launched together, waited for
    # once
    parts = (
        checks.resid_norms(xp.ascontiguousarray(a.conj().T @ u), vr, s_dev, fetch=False),
        checks.offmax(u, fetch=False),
        checks.offmax(vr, fetch=False),
    )
    res, off, voff = (np.asarray(checks.to_host(p)) for p in parts)
    if not (
        res.max(initial=0.0) <= tl_ * top
        and off.max(initial=0.0) <= tl_
        and voff.max(initial=0.0) <= tl_
    ):
        return None
    return u, s_dev, xp.ascontiguousarray(vr.conj().T), rest


def _first_bad(good: np.ndarray) -> int:
    """The index of the first False in ``good`` (its length where there is none)."""
    bad = np.flatnonzero(~good)
    return int(bad[0]) if bad.size else int(good.size)


def _head_qr(xp, u):
    """Q of ``u``'s QR with the phases QR chose taken back (q_j ~ u_j; by where: a masked
    store would wait for the device)."""
    q, r = xp.linalg.qr(u)
    d = xp.diagonal(r)
    mag = xp.abs(d)
    return q * xp.where(mag == 0, 1, d / xp.where(mag == 0, 1, mag))


def _unitary(xp, checks: Checks, vh, tl_: float) -> bool:
    """Whether the rows of ``vh`` (k x n) are orthonormal to the tolerance. V is the
    eigendecomposition's, times the tails' factors from ``small_svd``, and neither is to be
    trusted: with several threads, OpenBLAS's syevd gave a 300 x 300 V 27x the tolerance from
    orthonormal (eigenvalues clustered at eps s_max^2 and at 0), and LAPACK's gesdd a tail
    factor 900 ulp from it where gesvd gave 16. One Hermitian k x k product (``offmax``)."""
    if not vh.shape[0]:
        return True
    return bool(checks.offmax(xp.ascontiguousarray(vh), True).max() <= tl_)


def _tail_basis(xp, checks: Checks, u, w, tl_: float):
    """An orthonormal basis of ``w``'s columns (m x p), orthogonal to ``u``'s (orthonormal)."""
    p = w.shape[1]
    q = xp.linalg.qr(w)[0]
    if u.shape[1] == 0:
        return q
    # the tail's U is Q times a unitary factor, which may add up a column's p entries against
    # the head: hence sqrt(p)
    near = checks.colmax(xp.ascontiguousarray(u.conj().T @ q), False, False).max()
    if not near <= tl_ / math.sqrt(p):
        # Q spans W; where W is rank-deficient its other columns must still be orthogonal to
        # the head, and where W is ill-conditioned its QR magnifies what is left of the head
        # in it
        for _ in range(2):
            q -= u @ (u.conj().T @ q)
        q = xp.linalg.qr(q)[0]
    return q


def _one_level(xp, a, small_svd: Callable, checks: Checks, host_small: int = 0):
    """One Gram level of the tall matrix ``a`` (the module docstring): ``(uu, ss, vv)`` with
    ss on the host, not sorted across the head and the tail, or None (declined).

    A tail narrower than ``host_small`` is given to ``small_svd`` as a host array, and before
    the head's checks are waited for: the host's LAPACK then runs while the device checks the
    head (on an H100, 1.5 ms of float64 and 3.4 ms of complex128 at N=2048 saved). The tail is
    made for the predicted head, which the checks keep on Gaussian matrices; where they cut it
    shorter, it is made again."""
    m, n = a.shape
    real = real_dtype(a.dtype)
    tl_ = tol(real)
    ah = a.conj().T
    w, v = xp.linalg.eigh(checks.gram(a), UPLO="U")
    w_host = np.asarray(checks.to_host(w))[::-1]  # descending
    s_host = np.sqrt(np.maximum(w_host, 0)).astype(real, copy=False)
    top = float(s_host[0])
    if not 0.0 < top < math.inf:
        return None
    atol = tl_ * top
    # U's columns i, j are orthogonal to about eps s_max^2 / (s_i s_j)
    h = int(np.count_nonzero(s_host >= top / math.sqrt(TOL_ULPS)))
    if h < GRAM_HEAD_MIN * n:
        return None
    v = v[:, ::-1]
    vh_ = xp.ascontiguousarray(v[:, :h])
    s_dev = xp.asarray(s_host[:h])
    u = xp.ascontiguousarray(a @ vh_)  # A V = U S
    checks.scale_cols(u, s_dev)

    def tail(h: int):
        """The tail after a head of h columns: its basis q and its factor b = q^H W."""
        uh = u[:, :h]
        wt = a @ v[:, h:]
        for _ in range(2):  # twice: once loses orthogonality where W is small
            wt -= uh @ (uh.conj().T @ wt)
        q = _tail_basis(xp, checks, uh, wt, tl_)
        return q, q.conj().T @ wt

    early = None
    if h < n and n - h < host_small:
        q, b = tail(h)
        early = (h, q, checks.to_host(b))
    res = checks.resid_norms(xp.ascontiguousarray(ah @ u), vh_, s_dev, fetch=False)
    off = checks.offmax(u, fetch=False)
    # V's head rows, checked and copied while the host works too: per column, so that a head
    # the checks cut shorter reads its own part
    v_off = checks.offmax(vh_, fetch=False)
    uu = xp.empty((m, n), a.dtype)
    vv = xp.empty((n, n), a.dtype)
    uu[:, :h] = u
    vv[:h] = vh_.conj().T
    factors = small_svd(early[2]) if early is not None else None  # while the device checks
    # column j is good where its residual is small and it is orthonormal to columns 0..j
    # (written so that NaN is bad)
    res, off = checks.to_host(res), checks.to_host(off)
    h = min(_first_bad(res <= atol), _first_bad(off <= tl_))
    if h < GRAM_HEAD_MIN * n:
        return None
    # V's rows orthonormal (``_unitary``, by parts): the head's among themselves here, the
    # tail's against the head and among themselves below
    if not np.asarray(checks.to_host(v_off))[:h].max(initial=0.0) <= tl_:
        return None
    ss = s_host.copy()
    if h < n:
        if early is not None and early[0] == h:
            q = early[1]
        else:  # the checks cut the head shorter than predicted
            q, b = tail(h)
            factors = small_svd(b)
        ub, sb, vbh = factors
        ut = xp.ascontiguousarray(q @ xp.asarray(ub))
        vt = xp.ascontiguousarray(xp.asarray(vbh) @ v[:, h:].conj().T)
        # the tail's U and V rows against the head's and among themselves, launched together
        # and waited for once
        parts = [
            checks.colmax(xp.ascontiguousarray(uu[:, :h].conj().T @ ut), False, False, False),
            checks.offmax(ut, fetch=False),
            checks.colmax(xp.ascontiguousarray(vv[:h] @ vt.conj().T), False, False, False),
            checks.offmax(vt, True, fetch=False),
        ]
        if not all(np.asarray(checks.to_host(e)).max(initial=0.0) <= tl_ for e in parts):
            return None
        uu[:, h:] = ut
        vv[h:] = vt
        ss[h:] = checks.to_host(sb)
    return uu, ss, vv


def _levels(xp, a, small_svd: Callable, checks: Checks, levels: int):
    """Up to ``levels`` Gram levels of the tall matrix ``a`` (the module docstring's "Levels"):
    ``(uu, ss, vv)`` with ss on the host, not sorted, or None (declined).

    Each level works on W, what is left of A: m x p, orthogonal to the heads found so far,
    with its right basis B (n x p, orthonormal: W = A B less the heads). Its head's U is made
    orthogonal to the earlier heads and orthonormalized by a QR (the first level's only where
    its columns are not orthonormal to the tolerance already), and both residuals,
    |W z_j - s_j u_j| and |W^H u_j - s_j z_j|, are checked against the absolute tolerance of A.
    What is left goes on to the next level. The only QRs of a tail's size are the last:
    the complement of exact zeros, or the basis of a tail given to ``small_svd``."""
    m, n = a.shape
    real = real_dtype(a.dtype)
    tl_ = tol(real)
    eps = float(np.finfo(real).eps)
    us: list = []  # the heads' U, V (n x h) and s (host), level by level
    vs: list = []
    ss: list = []
    w, basis = a, None  # what is left, and its right basis (None: the identity)
    atol = None
    tail = None  # the last part: (u, v, s)
    for level in range(levels):
        p = w.shape[1]
        wh = w.conj().T
        lam, z = xp.linalg.eigh(checks.gram(w), UPLO="U")
        s_host = np.sqrt(np.maximum(np.asarray(checks.to_host(lam))[::-1], 0))
        s_host = s_host.astype(real, copy=False)
        top = float(s_host[0])
        if not top < math.inf:
            return None
        if atol is None:
            if not top > 0.0:
                return None
            atol = tl_ * top
        z = z[:, ::-1]
        # eigh's error in s_i^2 is about eps top^2, so column i's residual is about
        # eps top^2 / s_i: those within LEVEL_MARGIN of the tolerance are tried
        h = int(np.count_nonzero(s_host >= LEVEL_MARGIN * eps * top * top / atol))
        h = min(h, int(np.count_nonzero(s_host > 0)))
        u_prev = xp.concatenate(us, axis=1) if us else None
        if h:
            zh = xp.ascontiguousarray(z[:, :h])
            sd = xp.asarray(s_host[:h])
            y = xp.ascontiguousarray(w @ zh)  # W Z = U S
            u = y.copy()
            checks.scale_cols(u, sd)
            if u_prev is None:
                res = checks.resid_norms(xp.ascontiguousarray(wh @ u), zh, sd)
                off = checks.offmax(u)
                h_res, h_off = _first_bad(res <= atol), _first_bad(off <= tl_)
                qr = h_off < h_res and h_off < GRAM_HEAD_MIN * p
                h = h_res if qr else min(h_res, h_off)
            else:
                # W is orthogonal to the earlier heads only to about eps |W|, which dividing
                # by s_j magnifies
                for _ in range(2):
                    u = u - u_prev @ (u_prev.conj().T @ u)
                qr = True
            if qr and h:
                # in order, the largest singular values first (their columns are the most
                # accurate): each column moves by about eps top^2 / s_j, which the residuals
                # of both sides, checked again, hold within the tolerance
                u = _head_qr(xp, u[:, :h])
                zc, yc = xp.ascontiguousarray(zh[:, :h]), xp.ascontiguousarray(y[:, :h])
                res1 = checks.resid_norms(xp.ascontiguousarray(wh @ u), zc, sd[:h])
                res2 = checks.resid_norms(yc, xp.ascontiguousarray(u), sd[:h])
                h = _first_bad((res1 <= atol) & (res2 <= atol))
                if h and u_prev is not None:
                    cross = checks.colmax(
                        xp.ascontiguousarray(u_prev.conj().T @ u[:, :h]), False, False
                    )
                    h = min(h, _first_bad(cross <= tl_))
            if level == 0 and h == 0:
                return None
        if h:
            us.append(u[:, :h])
            vs.append(zh[:, :h] if basis is None else basis @ zh[:, :h])
            ss.append(s_host[:h])
        if h == p:
            break
        zt = z[:, h:]
        w = w @ zt
        if h:
            uh = us[-1]
            for _ in range(2):  # twice: once loses orthogonality where W is small
                w -= uh @ (uh.conj().T @ w)
        basis = zt if basis is None else basis @ zt
        p = w.shape[1]
        u_all = xp.concatenate(us, axis=1)
        with np.errstate(over="ignore", invalid="ignore"):
            rest = float(xp.linalg.norm(w))
        if rest <= atol:
            # every singular value left within the tolerance of 0: they are 0, with the
            # heads' complement as their U (from a fixed random matrix: of full rank, unlike W)
            # (its QR again where the random matrix's condition, as a square one's can be,
            # magnified what was left of the heads in it)
            q = xp.asarray(_probe_matrix(m, p, real)).astype(a.dtype, copy=False)
            for _ in range(2):
                q = q - u_all @ (u_all.conj().T @ q)
            tail = (_tail_basis(xp, checks, u_all, q, tl_), basis, np.zeros(p, real))
            break
        if level == levels - 1 or p < LEVEL_MIN_SIDE or h == 0:
            q = _tail_basis(xp, checks, u_all, w, tl_)
            ub, sb, vbh = small_svd(q.conj().T @ w)
            tail = (q @ ub, basis @ vbh.conj().T, np.asarray(checks.to_host(sb)))
            break
    if tail is not None:  # (u_all: the heads, as the tail was made against them)
        ut = tail[0]
        cross = checks.colmax(xp.ascontiguousarray(u_all.conj().T @ ut), False, False).max()
        own = checks.offmax(xp.ascontiguousarray(ut)).max()
        if not (cross <= tl_ and own <= tl_):
            return None
        us.append(ut)
        vs.append(tail[1])
        ss.append(tail[2])
    uu = xp.concatenate(us, axis=1)
    vv = xp.ascontiguousarray(xp.concatenate(vs, axis=1).conj().T)
    if not _unitary(xp, checks, vv, tl_):
        return None
    return uu, np.concatenate(ss), vv


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
        self,
        xp,
        checks: Checks,
        small_svd: Callable,
        counters: dict,
        history: bool = True,
        levels: int = 1,
        names: tuple[str, str] = ("gram", "gram_declined"),
        host_small: int = 0,
    ) -> None:
        self.xp, self.checks, self.small_svd, self.counters = xp, checks, small_svd, counters
        self.history, self.levels, self.names = history, levels, names
        self.host_small = host_small
        self.skip = self.fails = 0
        self.ok = False

    def __call__(self, x, rank: int | None = None) -> Any:
        """The reduced SVD of ``x``, or with ``rank`` (below min(m, n); one level only) its
        first ``rank`` triplets and the squared sum of the other singular values,
        ``(u, s, vh, rest)`` (``gram_head``); None where declined."""
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
            precheck = not (self.ok and self.history)
            if rank is not None:
                got = gram_head(
                    self.xp, a if m >= n else a.T, rank, self.checks, precheck, norm * scale
                )
            else:
                got = gram_svd(
                    self.xp,
                    a if m >= n else a.T,
                    self.small_svd,
                    norm * scale,
                    self.checks,
                    precheck=precheck,
                    levels=self.levels,
                    host_small=self.host_small,
                )
        self.ok = got is not None
        if got is None:
            self.counters[self.names[1]] += 1
            self.fails += 1
            if self.fails >= GRAM_FAILS_IN_A_ROW and self.history:
                self.skip, self.fails = RETRY_AFTER, 0
            return None
        self.fails = 0
        self.counters[self.names[0]] += 1
        ua, s, vha = got[:3]  # x^T = U S V^H for a wide x: x = conj(V) S U^T
        u, vh = (ua, vha) if m >= n else (vha.T, ua.T)
        if rank is not None:
            return u, s * (1.0 / scale), vh, got[3] / (scale * scale)
        return u, s * (1.0 / scale), vh
