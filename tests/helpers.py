"""Numerical helpers shared by the test-suite.

``assert_close`` compares a tenloom result with a NumPy reference using tolerances
chosen from the dtype, and always checks shape and dtype exactly.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np

#: The dtypes the op corpus (test_ops.py) runs on every pipeline variant, in NumPy's promotion
#: order; the small and unsigned integers are covered pair by pair in
#: test_reliability_dtypes.py (tenloom.graph.dtypes.SUPPORTED lists them all).
ALL_DTYPES = (
    "bool",
    "int32",
    "int64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
)

# (rtol, atol); atol is multiplied by the magnitude scale of the data.
_TOLERANCES = {
    np.dtype(np.float16): (2e-2, 2e-2),
    np.dtype(np.float32): (1e-4, 1e-5),
    np.dtype(np.complex64): (1e-4, 1e-5),
    np.dtype(np.float64): (1e-10, 1e-10),
    np.dtype(np.complex128): (1e-10, 1e-10),
}


def tolerances(dtype) -> tuple[float, float] | None:
    """(rtol, atol) for an inexact dtype, ``None`` for exact (integer/bool) ones."""
    dtype = np.dtype(dtype)
    if dtype.kind in "biu":
        return None
    if dtype in _TOLERANCES:
        return _TOLERANCES[dtype]
    # long double & co.: as float64.
    return _TOLERANCES[np.dtype(np.float64)]


def assert_close(actual, expected, dtype=None, *, scale=None):
    """Assert ``actual`` (a tenloom result) matches the NumPy reference ``expected``.

    Args:
        actual: must be a ``numpy.ndarray`` (0-d for scalars).
        expected: NumPy result (array or NumPy scalar).
        dtype: dtype whose tolerances apply; defaults to ``expected``'s dtype.
        scale: magnitude the absolute tolerance is scaled with; defaults to
            ``max(1, max|expected|)``. Pass e.g. ``sum|x|`` for reductions whose
            result may cancel.
    """
    assert isinstance(actual, np.ndarray), f"expected numpy.ndarray, got {type(actual)!r}"
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"shape {actual.shape} != expected {expected.shape}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != expected {expected.dtype}"
    tol = tolerances(expected.dtype if dtype is None else dtype)
    if tol is None or expected.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected)
        return
    rtol, atol = tol
    if scale is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            finite = np.abs(expected[np.isfinite(expected)]) if expected.size else np.zeros(0)
            scale = float(np.max(finite)) if finite.size else 1.0
    scale = max(1.0, float(scale))
    np.testing.assert_allclose(
        actual.astype(np.complex128 if actual.dtype.kind == "c" else np.float64),
        expected.astype(np.complex128 if expected.dtype.kind == "c" else np.float64),
        rtol=rtol,
        atol=atol * scale,
        equal_nan=True,
    )


def random_array(rng: np.random.Generator, shape, dtype, kind: str = "normal") -> np.ndarray:
    """A random array of ``dtype``.

    kind:
        ``normal``   -- signed values (ints in [-3, 3], floats ~ N(0, 1)).
        ``positive`` -- strictly positive values (ints in [1, 4], floats in [0.5, 2]).
        ``small``    -- non-negative small ints [0, 3] / floats in [0, 2) (for exponents).
    """
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    if dtype.kind == "b":
        if kind == "positive":
            return np.ones(shape, dtype=bool)
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        lo, hi = {"normal": (-3, 4), "positive": (1, 5), "small": (0, 4)}[kind]
        return rng.integers(lo, hi, size=shape).astype(dtype)

    def real():
        if kind == "positive":
            return rng.uniform(0.5, 2.0, size=shape)
        if kind == "small":
            return rng.uniform(0.0, 2.0, size=shape)
        return rng.standard_normal(shape)

    if dtype.kind == "c":
        return (real() + 1j * real()).astype(dtype)
    return np.asarray(real()).astype(dtype)


def numpy_or_skip(fn, *args, **kwargs):
    """Run the NumPy reference; skip the test when NumPy itself rejects the combination."""
    import pytest

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            try:
                result = fn(*args, **kwargs)
            except (TypeError, ValueError) as exc:  # UFuncTypeError is a TypeError
                pytest.skip(f"numpy rejects this combination: {type(exc).__name__}: {exc}")
    from tenloom.graph.dtypes import SUPPORTED

    if np.asarray(result).dtype not in SUPPORTED:
        pytest.skip(f"numpy's result dtype {np.asarray(result).dtype} is not a tenloom dtype")
    return result


def graph_strategy(ops):
    """A hypothesis strategy for random two-input graphs: up to 6 steps, each applying one of
    ``ops`` (functions of two tensors) to two earlier values."""
    from hypothesis import strategies as st

    @st.composite
    def graphs(draw):
        steps = draw(
            st.lists(
                st.tuples(st.integers(0, len(ops) - 1), st.integers(0, 9), st.integers(0, 9)),
                min_size=1,
                max_size=6,
            )
        )

        def f(a, b):
            pool = [a, b]
            for op, i, j in steps:
                pool.append(ops[op](pool[i % len(pool)], pool[j % len(pool)]))
            return pool[-1]

        return f

    return graphs()


def run_in_threads(work, n: int) -> None:
    """Call ``work(k)`` for k in range(n), each on its own thread, and wait for all of them;
    the first exception any of them raised is raised again here, in the test's thread."""
    errors: list = []

    def run(k):
        try:
            work(k)
        except BaseException as e:  # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]


def device_params(include_cpu: bool = True) -> list:
    """pytest parameters for the devices a test runs on: the CPU, OpenCL where a device is
    present (always under CI, where a missing one must fail) and CUDA where a GPU is."""
    import os

    import pytest

    import tenloom as tl

    try:
        kinds = {d.kind for d in tl.devices()}
    except Exception:  # pragma: no cover - discovery itself is tested elsewhere
        kinds = set()
    out: list = ["cpu"] if include_cpu else []
    if "opencl" in kinds or os.environ.get("CI") == "true":
        out.append(pytest.param("opencl:0", marks=pytest.mark.opencl))
    if "cuda" in kinds:
        out.append(pytest.param("cuda:0", marks=pytest.mark.cuda))
    return out


def on_cpu() -> bool:
    """Whether the corpus runs on the CPU (TENLOOM_TEST_DEVICE unset): where decompositions
    are LAPACK's, with NumPy's exact signs and phases."""
    from tenloom.runtime import session

    return session.DEFAULT_DEVICE == "cpu"


def assert_same_vectors(actual, expected, dtype=None, *, rows: bool = False):
    """Decomposition factors against NumPy's: exactly on the CPU (the same LAPACK call gives
    the same phases); elsewhere (cuSOLVER) up to the phase (sign) of each column (``rows``:
    each row), which only the gauge fixes."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if not on_cpu():
        vec_axis = -1 if rows else -2
        dot = np.sum(np.conj(actual) * expected, axis=vec_axis, keepdims=True)
        phase = np.where(np.abs(dot) > 0, dot / np.where(dot == 0, 1, np.abs(dot)), 1)
        if actual.dtype.kind != "c":
            phase = np.sign(np.real(phase)) + (np.real(phase) == 0)
        actual = (actual * phase).astype(actual.dtype)
    assert_close(actual, expected, dtype)


def opencl_device() -> str | None:
    """The OpenCL device the OpenCL tests use (tests/test_opencl.py ``DEVICE``), or None
    without pyopencl (test_opencl then skips itself)."""
    try:
        from test_opencl import DEVICE
    except Exception:  # no pyopencl
        return None
    return DEVICE


def require_cuda():
    """CuPy, or skip the test: no CuPy, no CUDA driver, or no GPU."""
    import pytest

    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("no CUDA GPU")
    except Exception:
        pytest.skip("no CUDA driver")
    return cp


def gpu_count(cp) -> int:
    """CUDA GPUs CuPy sees (0: no CuPy, or no driver)."""
    if cp is None:
        return 0
    try:
        return cp.cuda.runtime.getDeviceCount()
    except Exception:  # no driver
        return 0


def cuda_marks(cp) -> list:
    """The marks of a module of CUDA tests: ``cuda``, and skipped where no GPU is present."""
    import pytest

    return [pytest.mark.cuda, pytest.mark.skipif(gpu_count(cp) == 0, reason="no CUDA GPU present")]


#: the SVD tests' tolerances (test_cuda_svd.py, test_gram_svd.py): 1024-ulp routes and LAPACK
SVD_TOL = {"float32": 2e-5, "complex64": 2e-5, "float64": 1e-12, "complex128": 1e-12}


def matrix_with_spectrum(shape, dtype, spectrum, seed=0):
    """A matrix of ``shape`` (leading batch axes allowed) with singular values ``spectrum``
    ("gauss": a Gaussian matrix; else an array of k values)."""
    rng = np.random.default_rng(seed)
    cplx = np.dtype(dtype).kind == "c"

    def g(*s):
        x = rng.standard_normal(s)
        return x + 1j * rng.standard_normal(s) if cplx else x

    if isinstance(spectrum, str):
        return g(*shape).astype(dtype)
    *batch, m, n = shape
    k = min(m, n)
    out = []
    for _ in range(int(np.prod(batch, dtype=int))):
        q1, _ = np.linalg.qr(g(m, k))
        q2, _ = np.linalg.qr(g(n, k))
        out.append((q1 * spectrum) @ q2.conj().T)
    return np.stack(out).reshape(shape).astype(dtype)


def check_svd(x, u, s, vh, dtype):
    """``(u, s, vh)`` is an SVD of ``x`` to ``SVD_TOL``: dtypes, singular values against
    NumPy's in double precision, descending, U and V orthonormal, x rebuilt."""
    tol = SVD_TOL[dtype]
    wide = np.complex128 if x.dtype.kind == "c" else np.float64
    ref = np.linalg.svd(x.astype(wide), compute_uv=False)
    assert u.dtype == np.dtype(dtype) and vh.dtype == np.dtype(dtype)
    real = dtype.replace("complex64", "float32").replace("complex128", "float64")
    assert s.dtype == np.dtype(real)
    top = ref[..., :1]
    np.testing.assert_allclose(s / top, ref / top, atol=10 * tol)
    assert np.all(np.diff(s, axis=-1) <= 0)  # descending
    k = s.shape[-1]
    eye = np.broadcast_to(np.eye(k), u.shape[:-2] + (k, k))
    np.testing.assert_allclose(np.swapaxes(u.conj(), -1, -2) @ u, eye, atol=100 * tol)
    np.testing.assert_allclose(vh @ np.swapaxes(vh.conj(), -1, -2), eye, atol=100 * tol)
    rec = (u * s[..., None, :]) @ vh
    scale = np.linalg.norm(x, axis=(-2, -1), keepdims=True)
    assert np.max(np.abs(rec - x) / scale) < 100 * tol


def truncated_reference(x, r):
    """NumPy's first r triplets of x (in double precision), the squared sum of its other
    singular values, and all of them."""
    wide = np.complex128 if x.dtype.kind == "c" else np.float64
    u, s, vh = np.linalg.svd(x.astype(wide), full_matrices=False)
    return u[..., :r], s[..., :r], vh[..., :r, :], (s[..., r:] ** 2).sum(-1), s


def check_truncated_svd(x, r, u, s, vh, rest, dtype):
    """The first r triplets of x to SVD_TOL (U S Vh and the projectors: the phases are the
    route's), and rest against NumPy's sum of the other s_i^2."""
    tol = SVD_TOL[dtype]
    ur, sr, vhr, rest_ref, sall = truncated_reference(x, r)
    real = dtype.replace("complex64", "float32").replace("complex128", "float64")
    assert u.dtype == np.dtype(dtype) and vh.dtype == np.dtype(dtype)
    assert s.dtype == np.dtype(real) and np.asarray(rest).dtype == np.dtype(real)
    assert u.shape == x.shape[:-1] + (r,) and vh.shape == x.shape[:-2] + (r, x.shape[-1])
    top = sall[..., :1]
    np.testing.assert_allclose(s / top, sr / top, atol=10 * tol)
    eye = np.broadcast_to(np.eye(r), u.shape[:-2] + (r, r))
    np.testing.assert_allclose(np.swapaxes(u.conj(), -1, -2) @ u, eye, atol=100 * tol)
    np.testing.assert_allclose(vh @ np.swapaxes(vh.conj(), -1, -2), eye, atol=100 * tol)
    rec = (u * s[..., None, :]) @ vh
    want = (ur * sr[..., None, :]) @ vhr
    scale = np.linalg.norm(x, axis=(-2, -1), keepdims=True)
    assert np.max(np.abs(rec - want) / scale) < 100 * tol
    np.testing.assert_allclose(
        rest, rest_ref, rtol=100 * tol, atol=10 * tol * float(top.max()) ** 2
    )


def numpy_with_eigh(after):
    """NumPy as the route's array module, with each eigh's ``(w, v)`` passed through
    ``after(g, w, v)``."""

    class LA:
        def __getattr__(self, k):
            return getattr(np.linalg, k)

        def eigh(self, g, **kw):
            w, v = np.linalg.eigh(g, **kw)
            return after(g, w, v)

    class XP:
        linalg = LA()

        def __getattr__(self, k):
            return getattr(np, k)

    return XP()


def upper_gram_checks():
    """The Gram route's NumPy checks with NaN below the Gram matrix's diagonal: CUDA's herk
    sets only the upper triangle, so a route must read only that one."""
    from tenloom.runtime.kernels import gram_svd as gs

    def upper_only(x):
        g = gs._np_gram(x)
        g[np.tril_indices(g.shape[0], -1)] = np.nan
        return g

    return gs.NUMPY_CHECKS._replace(gram=upper_only)


def random_spectrum_matrix(m, n, dtype, decay, zeros, seed):
    """``(x, spectrum)``: an m x n matrix whose singular values fall as logspace(0, -decay)
    (uniform in [0, 1) for decay 0), sorted, the last ``zeros`` of them exactly 0 (at most all
    but one)."""
    k = min(m, n)
    rng = np.random.default_rng(seed)
    spectrum = np.logspace(0, -decay, k) if decay else rng.random(k)
    spectrum = np.sort(spectrum)[::-1].copy()
    zeros = min(zeros, k - 1)
    if zeros:
        spectrum[-zeros:] = 0
    return matrix_with_spectrum((m, n), dtype, spectrum, seed=seed), spectrum


def spectrum_cases(**more):
    """hypothesis strategies for ``random_spectrum_matrix`` of sides 256 to 300 (the CPU's Gram
    route's sizes), every SVD dtype, and ``more``."""
    from hypothesis import strategies as st

    return dict(
        m=st.integers(256, 300),
        n=st.integers(256, 300),
        dtype=st.sampled_from(["float32", "float64", "complex64", "complex128"]),
        decay=st.sampled_from([0.0, 1.0, 3.0, 8.0]),
        zeros=st.integers(0, 40),
        seed=st.integers(0, 2**16),
        **more,
    )
