"""Truncated SVD of N x N matrices cut to rank N/4 (issue 20): tenloom against NumPy and SciPy
on the CPU, or against CuPy and PyTorch on CUDA, in one process on the same matrices.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/svd.py        # CPU
    python benchmarks/svd.py --device cuda                                        # one GPU
    python benchmarks/svd.py --sizes 256 512 --repeat 2                           # smoke run

Every variant returns the rank-r factors U (N, r), S (r,), Vh (r, N) and the discarded weight
sum(s[r:]**2), r = N // 4:

- CPU: ``tl.linalg.tensor_svd(a, 0, max_rank=r)`` built and evaluated at every call (what user
  code writes; the graph is hash-consed, so later calls find the optimized graph cached), the
  same compiled once (``tl.compile`` on a placeholder), and ``tl.linalg.svd(a,
  full_matrices=False)`` sliced lazily (the cost of tensor_svd's wrapper); the peers are
  ``numpy.linalg.svd`` and ``scipy.linalg.svd`` with ``lapack_driver="gesdd"`` and
  ``"gesvd"`` (``check_finite=False``), then sliced, and ``torch.linalg.svd`` where torch is
  installed.
- CUDA (``--device cuda``): tenloom from a host array to host results (``device="cuda:0"``),
  and device-resident: tenloom's ``feed=`` takes host arrays only (it converts with
  ``numpy.asarray``, which CuPy refuses), so the resident variant is a plan compiled on a
  frozen (read-only) constant, whose device copy the CUDA backend keeps between calls, with
  ``to_host=False`` (the results stay CuPy arrays); a plan fed a CuPy array is tried too and
  records its error while tenloom refuses it. The peers take device arrays: ``cupy.linalg.svd``
  (cuSOLVER gesvd), ``cupyx.cusolver.gesvdj``, ``torch.linalg.svd`` with its default driver and
  ``driver="gesvd"``, ``"gesvdj"``, ``"gesvda"``, plus CuPy from host to host, the peer of
  tenloom's host variant. The device is synchronized before each timer starts and before it
  stops. A missing CuPy or torch, or one without a GPU, skips its variants with the reason.

Method: first every variant runs once on a 32 x 32 matrix of each dtype (what a process does
once: BLAS threads, CUDA contexts, cuSOLVER handles). Then, for each case, each variant is set
up (tenloom's caches cleared first, so that its first call is a cold one: tracing, passes,
program and run) and called once as a warm-up, whose time is recorded as ``first_s``; then
``--repeat`` rounds call every variant once each, in an order rotated by one every round, so
that all of them share the machine's slow and fast spells; medians are reported, with the
ratio to the fastest peer (below 1: faster than every peer) and, for tenloom, the ratio to the
peer making the same LAPACK/cuSOLVER call (``numpy.linalg.svd``: gesdd; ``cupy.linalg.svd``:
gesvd), the cost of tenloom around it. A variant whose first call takes longer than
``--max-call-s`` (60 s) is not repeated (its first call is its time), and one whose call,
scaled by N**3 from a smaller N of the same run (or of the ``--append`` file), would take
longer is skipped: on a 16-core Xeon SciPy's gesvd took 69 s at N=2048 (float64) and 138 s
(complex128), against 1.8 and 2.9 s for gesdd.

Every result (the warm-up's and the last round's) is checked against NumPy on the host: the
relative error of the rank-r approximation ||A - U S Vh|| / ||A|| must equal the optimal one,
sqrt(sum s[r:]**2) / ||A|| from ``numpy.linalg.svd(a, compute_uv=False)``, to 1e-8 relative;
the singular values must match to 1e-10 of the largest, the discarded weight to 1e-10 of
||A||**2, and U's columns and Vh's rows must be orthonormal to 1e-8. A variant failing a check
keeps its times but is marked ``wrong_result`` and left out of the fastest peer.

Output: a table per case and at the end, and JSON (``--out``, default
benchmarks/results/svd_<host>[_cuda].json; ``--append`` merges into an existing file,
replacing the cases run again; each case keeps its run's date, command line and GPU, the file's
``meta`` is the last run's), written after every case so that a run cut short keeps what
it finished. The matrices are seeded Gaussian (complex: real and imaginary parts each
Gaussian over sqrt 2).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import pathlib
import platform
import re
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from harness import HERE, blas_info, jsonable

RECON_RTOL = 1e-8  # |err - optimal err| / optimal err
SVAL_TOL = 1e-10  # max |S - s_ref| / s_max
DISCARDED_TOL = 1e-10  # |discarded - ref| / ||A||**2
ORTHO_TOL = 1e-8  # max |U^H U - I|, |Vh Vh^H - I|
DTYPES = ("float64", "complex128")


@dataclass
class Variant:
    """One way of computing the truncated SVD: ``setup(a, r)`` returns the call to time, whose
    result is (U, S, Vh, discarded) as arrays of its library."""

    name: str
    family: str  # "tenloom" or the peer's library; the fastest non-tenloom one is the baseline
    setup: Callable[[np.ndarray, int], Callable[[], Any]]
    same: str | None = None  # tenloom's: the peer making the same LAPACK/cuSOLVER call


# ---------------------------------------------------------------------------------------------
# the variants


def _tl():
    import tenloom as tl

    return tl


def tl_tensor_svd(device: str | None) -> Callable:
    """Built and evaluated at every call, on the host array (copied to ``device`` each time)."""

    def setup(a, r):
        tl = _tl()
        opts = {} if device is None else {"device": device}

        def call():
            return tl.evaluate(*tl.linalg.tensor_svd(a, 0, max_rank=r), **opts)

        return call

    return setup


def tl_plan_placeholder(device: str | None, feed: Callable | None = None) -> Callable:
    """Compiled once on a placeholder; each call binds ``feed(a)`` (the host array itself by
    default). With ``device``, the results stay on the device (``to_host=False``)."""

    def setup(a, r):
        tl = _tl()
        p = tl.placeholder(a.shape, a.dtype, name="a")
        opts = {} if device is None else {"device": device, "to_host": False}
        plan = tl.compile(tl.linalg.tensor_svd(p, 0, max_rank=r), inputs=[p], **opts)
        x = a if feed is None else feed(a)
        return lambda: plan(x)

    return setup


def tl_plan_resident(device: str) -> Callable:
    """Compiled once on a frozen constant: its device copy is made on the first call and kept
    by the backend; the results stay on the device."""

    def setup(a, r):
        tl = _tl()
        c = np.array(a, copy=True)
        c.flags.writeable = False
        plan = tl.compile(tl.linalg.tensor_svd(c, 0, max_rank=r), device=device, to_host=False)
        return lambda: plan()

    return setup


def tl_svd_slices(a, r):
    """``tl.linalg.svd`` sliced lazily, with the discarded weight: tensor_svd without its
    wrapper (the reshape/transpose of the axes and the truncation rule)."""
    tl = _tl()

    def call():
        u, s, vh = tl.linalg.svd(a, full_matrices=False)
        return tl.evaluate(u[:, :r], s[:r], vh[:r, :], tl.sum(s[r:] * s[r:]))

    return call


def _cut(u, s, vh, r, xp_sum):
    return u[:, :r], s[:r], vh[:r, :], xp_sum(s[r:] * s[r:])


def numpy_svd(a, r):
    def call():
        return _cut(*np.linalg.svd(a, full_matrices=False), r, np.sum)

    return call


def scipy_svd(driver: str) -> Callable:
    def setup(a, r):
        import scipy.linalg

        def call():
            usv = scipy.linalg.svd(a, full_matrices=False, lapack_driver=driver, check_finite=False)
            return _cut(*usv, r, np.sum)

        return call

    return setup


def torch_svd(device: str, driver: str | None = None) -> Callable:
    def setup(a, r):
        import torch

        t = torch.from_numpy(a).to(device)
        kw = {} if driver is None else {"driver": driver}

        def call():
            return _cut(*torch.linalg.svd(t, full_matrices=False, **kw), r, torch.sum)

        return call

    return setup


def cupy_svd(host: bool) -> Callable:
    """``cupy.linalg.svd`` on a device array; ``host``: from the host array to host results."""

    def setup(a, r):
        import cupy as cp

        if host:

            def call():
                out = _cut(*cp.linalg.svd(cp.asarray(a), full_matrices=False), r, cp.sum)
                return tuple(cp.asnumpy(x) for x in out)

            return call
        d = cp.asarray(a)
        return lambda: _cut(*cp.linalg.svd(d, full_matrices=False), r, cp.sum)

    return setup


def cupy_gesvdj(a, r):
    import cupy as cp
    import cupyx.cusolver

    if not cupyx.cusolver.check_availability("gesvdj"):
        raise RuntimeError("cupyx.cusolver.check_availability('gesvdj') is False")
    d = cp.asarray(a)

    def call():
        # returns (U, s, V) with a = U diag(s) V^H: V, not Vh
        u, s, v = cupyx.cusolver.gesvdj(d, full_matrices=False)
        return _cut(u, s, v.conj().T, r, cp.sum)

    return call


def _import(name: str, errors: dict) -> Any:
    try:
        return __import__(name)
    except Exception as e:  # noqa: BLE001 - any import failure skips the library's variants
        errors[name] = f"{type(e).__name__}: {e}"
        return None


# the peers that make the call tenloom's SVD node makes: LAPACK's gesdd through NumPy on the
# CPU, cuSOLVER's gesvd through CuPy on CUDA
NP, CP, CP_HOST = "numpy.linalg.svd", "cupy.linalg.svd", "cupy.linalg.svd, host in/out"


def variants(device: str, errors: dict) -> tuple[list[Variant], dict[str, str]]:
    """The variants for ``device`` ("cpu" or "cuda:N") and those skipped, with the reason."""
    skipped: dict[str, str] = {}
    torch = _import("torch", errors)
    if device == "cpu":
        vs = [
            Variant("tenloom tensor_svd", "tenloom", tl_tensor_svd(None), NP),
            Variant("tenloom tensor_svd, compiled", "tenloom", tl_plan_placeholder(None), NP),
            Variant("tenloom svd + slices", "tenloom", tl_svd_slices, NP),
            Variant(NP, "numpy", numpy_svd),
            Variant("scipy gesdd", "scipy", scipy_svd("gesdd")),
            Variant("scipy gesvd", "scipy", scipy_svd("gesvd")),
        ]
        if torch is not None:
            vs.append(Variant("torch.linalg.svd (cpu)", "torch", torch_svd("cpu")))
        else:
            skipped["torch.linalg.svd (cpu)"] = f"torch: {errors['torch']}"
        return vs, skipped
    cp = _import("cupy", errors)
    vs = [
        Variant("tenloom tensor_svd, host in/out", "tenloom", tl_tensor_svd(device), CP_HOST),
        Variant("tenloom tensor_svd, resident plan", "tenloom", tl_plan_resident(device), CP),
    ]
    torch_names = [
        ("torch.linalg.svd", None),
        ("torch.linalg.svd gesvd", "gesvd"),
        ("torch.linalg.svd gesvdj", "gesvdj"),
        ("torch.linalg.svd gesvda", "gesvda"),
    ]
    cupy_names = [CP, "cupyx.cusolver.gesvdj", CP_HOST]
    index = int(device.split(":")[1])
    if cp is None:
        why = f"cupy: {errors['cupy']}"
        skipped.update({n: why for n in cupy_names})
        skipped["tenloom plan fed a CuPy array"] = why
    else:
        try:
            cp.cuda.Device(index).use()
            cp.cuda.runtime.getDeviceProperties(index)
        except Exception as e:  # noqa: BLE001 - no GPU: skip CuPy's variants with the reason
            cp = None
            why = f"cupy has no device {index}: {type(e).__name__}: {e}"
            skipped.update({n: why for n in cupy_names})
            skipped["tenloom plan fed a CuPy array"] = why
    if cp is not None:
        vs.append(
            Variant(
                "tenloom plan fed a CuPy array",
                "tenloom",
                tl_plan_placeholder(device, feed=cp.asarray),
                CP,
            )
        )
        vs += [
            Variant(CP, "cupy", cupy_svd(host=False)),
            Variant("cupyx.cusolver.gesvdj", "cupy", cupy_gesvdj),
            Variant(CP_HOST, "cupy", cupy_svd(host=True)),
        ]
    if torch is None or not torch.cuda.is_available():
        why = f"torch: {errors['torch']}" if torch is None else "torch.cuda.is_available() False"
        skipped.update({n: why for n, _ in torch_names})
    else:
        vs += [Variant(n, "torch", torch_svd(f"cuda:{index}", d)) for n, d in torch_names]
    return vs, skipped


# ---------------------------------------------------------------------------------------------
# synchronizing, checking


def make_sync(device: str) -> Callable[[], None]:
    """Waits for everything queued on the GPU (CuPy and torch each, where loaded)."""
    if device == "cpu":
        return lambda: None
    fns = []
    if "cupy" in sys.modules:
        fns.append(sys.modules["cupy"].cuda.runtime.deviceSynchronize)
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        fns.append(torch.cuda.synchronize)

    def sync():
        for f in fns:
            f()

    return sync


def to_numpy(x: Any) -> np.ndarray:
    mod = type(x).__module__.split(".")[0]
    if mod == "cupy":
        return x.get()
    if mod == "torch":
        return x.detach().cpu().numpy()
    return np.asarray(x)


@dataclass
class Reference:
    a: np.ndarray
    r: int
    s: np.ndarray  # all N singular values, numpy.linalg.svd(a, compute_uv=False)
    norm: float  # ||A||_F
    seconds: float

    @property
    def recon(self) -> float:  # the optimal relative error of a rank-r approximation
        return math.sqrt(float(np.sum(self.s[self.r :] ** 2))) / self.norm


def check(out: Any, ref: Reference) -> dict:
    """The result's errors against ``ref`` and ``ok``; a wrong shape or count fails at once."""
    n, r = ref.a.shape[0], ref.r
    try:
        u, s, vh, d = (to_numpy(x) for x in out)
    except (TypeError, ValueError) as e:
        return {"ok": False, "why": f"not four results: {type(e).__name__}: {e}"}
    shapes = [np.shape(x) for x in (u, s, vh, d)]
    if shapes != [(n, r), (r,), (r, n), ()]:
        return {"ok": False, "why": f"shapes {shapes}, expected {[(n, r), (r,), (r, n), ()]}"}
    recon = float(np.linalg.norm(ref.a - (u * s) @ vh)) / ref.norm
    eye = np.eye(r)
    res = {
        "recon_rel_err": recon,
        "recon_dev": abs(recon - ref.recon) / ref.recon,
        "s_err": float(np.max(np.abs(s - ref.s[:r]))) / float(ref.s[0]),
        "discarded_err": abs(float(np.real(d)) - float(np.sum(ref.s[r:] ** 2))) / ref.norm**2,
        "ortho_err": max(
            float(np.max(np.abs(u.conj().T @ u - eye))),
            float(np.max(np.abs(vh @ vh.conj().T - eye))),
        ),
    }
    bad = [
        f"{k} {res[k]:.3g} > {tol:g}"
        for k, tol in (
            ("recon_dev", RECON_RTOL),
            ("s_err", SVAL_TOL),
            ("discarded_err", DISCARDED_TOL),
            ("ortho_err", ORTHO_TOL),
        )
        if not res[k] <= tol  # NaN fails too
    ]
    res["ok"] = not bad
    if bad:
        res["why"] = "; ".join(bad)
    return res


# ---------------------------------------------------------------------------------------------
# one case


def matrix(n: int, dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng([seed, n, DTYPES.index(dtype)])
    if dtype == "float64":
        return rng.standard_normal((n, n))
    return (rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))) / math.sqrt(2)


def warm_up(vs: list[Variant], dtypes: list[str], sync: Callable) -> float:
    """Every variant once on a 32 x 32 matrix of each dtype before anything is timed, so that
    what a process does once (BLAS threads, cuSOLVER handles, CUDA contexts, CuPy's kernels)
    is not charged to the first variant of the first case. Failures are left to the cases to
    report. Returns the seconds taken."""
    t0 = time.perf_counter()
    for dtype in dtypes:
        a = matrix(32, dtype, 1)
        for v in vs:
            try:
                v.setup(a, 8)()
                sync()
            except Exception:  # noqa: BLE001, S112 - the case records the error
                continue
    return time.perf_counter() - t0


def run_case(vs: list[Variant], dtype: str, n: int, args, sync: Callable, history: dict) -> dict:
    """Times every variant of ``vs`` on one matrix. ``history``: (variant, dtype) -> (N, first
    call s) of the cases run so far, to skip a variant whose call, scaled by N**3 from the
    largest smaller N, would exceed ``--max-call-s``; one whose first call exceeds it is not
    repeated (its first call is its one sample)."""
    a = matrix(n, dtype, args.seed)
    r = n // 4
    t0 = time.perf_counter()
    s_ref = np.linalg.svd(a, compute_uv=False)
    ref = Reference(a, r, s_ref, float(np.linalg.norm(a)), time.perf_counter() - t0)
    entries: dict[str, dict] = {}
    calls: dict[str, Callable] = {}
    for v in vs:  # set up and warm up, one after the other
        e = entries[v.name] = {"family": v.family}
        seen = history.get((v.name, dtype))
        if seen is not None and seen[1] * (n / seen[0]) ** 3 > args.max_call_s:
            e["skipped"] = (
                f"estimated {seen[1] * (n / seen[0]) ** 3:.3g} s a call ({seen[1]:.3g} s at "
                f"N={seen[0]}, times (N/{seen[0]})**3) > --max-call-s {args.max_call_s:g}"
            )
            print(f"  {v.name:<36} skipped: {e['skipped']}", flush=True)
            continue
        try:
            if v.family == "tenloom":
                _tl().clear_caches()  # the first call is a cold one
            gc.collect()
            sync()
            t0 = time.perf_counter()
            call = v.setup(a, r)
            sync()
            e["setup_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            out = call()
            sync()
            e["first_s"] = time.perf_counter() - t0
        except Exception as ex:  # noqa: BLE001 - a failing variant is recorded, the run goes on
            e["error"] = f"{type(ex).__name__}: {ex}"[:500]
            if args.verbose:
                traceback.print_exc()
            print(f"  {v.name:<36} ERROR {e['error'][:120]}", flush=True)
            continue
        e["check_first"] = check(out, ref)
        del out
        if n >= history.get((v.name, dtype), (0,))[0]:
            history[(v.name, dtype)] = (n, e["first_s"])
        print(f"  {v.name:<36} first call {e['first_s']:9.4f} s", flush=True)
        if e["first_s"] > args.max_call_s:
            e["timed_once"] = f"first call > --max-call-s {args.max_call_s:g}: not repeated"
            e.update(times_s=[e["first_s"]], median_s=e["first_s"], min_s=e["first_s"])
        else:
            calls[v.name] = call
    names = list(calls)
    times: dict[str, list[float]] = {k: [] for k in names}
    for rnd in range(args.repeat):
        shift = rnd % max(len(names), 1)
        for name in names[shift:] + names[:shift]:
            e = entries[name]
            if "error" in e:
                continue
            try:
                gc.collect()
                sync()
                t0 = time.perf_counter()
                out = calls[name]()
                sync()
                times[name].append(time.perf_counter() - t0)
            except Exception as ex:  # noqa: BLE001
                e["error"] = f"round {rnd}: {type(ex).__name__}: {ex}"[:500]
                continue
            if rnd == args.repeat - 1:
                e["check_last"] = check(out, ref)
            del out
    for name, e in entries.items():
        if times.get(name):
            e.update(times_s=times[name], median_s=statistics.median(times[name]))
            e["min_s"] = min(times[name])
        fails = [e[k]["why"] for k in ("check_first", "check_last") if k in e and not e[k]["ok"]]
        if fails:
            e["wrong_result"] = fails[0]
    del calls
    if "cupy" in sys.modules and args.device != "cpu":
        sys.modules["cupy"].get_default_memory_pool().free_all_blocks()
    if "torch" in sys.modules and args.device != "cpu":
        sys.modules["torch"].cuda.empty_cache()
    peers = {
        k: e["median_s"]
        for k, e in entries.items()
        if e["family"] != "tenloom" and "median_s" in e and "wrong_result" not in e
    }
    fastest = min(peers, key=peers.__getitem__) if peers else None
    for v in vs:
        e = entries[v.name]
        if fastest is not None and "median_s" in e:
            e["ratio_to_fastest_peer"] = e["median_s"] / peers[fastest]
        if v.same is not None and "median_s" in e and v.same in peers:
            e["same_call_peer"] = v.same
            e["ratio_to_same_call_peer"] = e["median_s"] / peers[v.same]
        if e["family"] == "tenloom" and "median_s" in e and "timed_once" not in e:
            e["first_minus_median_s"] = e["first_s"] - e["median_s"]
    return {
        "case": f"svd_{dtype}_N{n}_{args.device}",
        "dtype": dtype,
        "N": n,
        "rank": r,
        "device": args.device,
        "repeat": args.repeat,
        "reference": {
            "numpy_svdvals_s": ref.seconds,
            "optimal_recon_rel_err": ref.recon,
            "s_max": float(ref.s[0]),
            "s_r_minus_1": float(ref.s[r - 1]),
            "s_r": float(ref.s[r]),
        },
        "fastest_peer": fastest,
        "peers": entries,
    }


# ---------------------------------------------------------------------------------------------
# report


def table(cases: list[dict]) -> str:
    """framework, dtype, N, first call, median, ratio to the fastest peer and, for tenloom, to
    the peer making the same LAPACK/cuSOLVER call (its wrapper's cost)."""
    head = (
        f"{'framework':<36} {'dtype':<10} {'N':>5} {'first s':>9} {'median s':>9} "
        f"{'ratio':>6} {'vs same':>7}"
    )
    lines = [head, "-" * len(head)]
    for c in cases:
        for name, e in c["peers"].items():
            if "median_s" in e:
                cells = [
                    "-" if e.get(k) is None else f"{e[k]:.2f}"
                    for k in ("ratio_to_fastest_peer", "ratio_to_same_call_peer")
                ]
                mark = "  WRONG: " + e["wrong_result"] if "wrong_result" in e else ""
                mark += "  (timed once: first call)" if "timed_once" in e else ""
                mark += "  (fastest peer)" if name == c["fastest_peer"] else ""
                lines.append(
                    f"{name:<36} {c['dtype']:<10} {c['N']:>5} {e['first_s']:>9.4f} "
                    f"{e['median_s']:>9.4f} {cells[0]:>6} {cells[1]:>7}{mark}"
                )
            else:
                why = e.get("error") or e.get("skipped") or "not timed"
                lines.append(f"{name:<36} {c['dtype']:<10} {c['N']:>5} {why[:90]}")
    return "\n".join(lines)


def meta(args, errors: dict, skipped: dict) -> dict:
    versions = {"python": platform.python_version(), "numpy": np.__version__}
    for name in ("tenloom", "scipy", "torch", "cupy"):
        mod = sys.modules.get(name)
        if mod is not None:
            versions[name] = getattr(mod, "__version__", "?")
    out = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "versions": versions,
        "blas": blas_info(),
        "argv": sys.argv,
        "device": args.device,
        "import_errors": errors,
        "skipped": skipped,
        "tolerances": {
            "recon_rtol": RECON_RTOL,
            "sval_tol": SVAL_TOL,
            "discarded_tol": DISCARDED_TOL,
            "ortho_tol": ORTHO_TOL,
        },
    }
    if args.device != "cpu":
        cp = sys.modules.get("cupy")
        torch = sys.modules.get("torch")
        index = int(args.device.split(":")[1])
        try:
            if cp is not None:
                name = cp.cuda.runtime.getDeviceProperties(index)["name"]
                out["gpu"] = name.decode() if isinstance(name, bytes) else name
            elif torch is not None and torch.cuda.is_available():
                out["gpu"] = torch.cuda.get_device_name(index)
        except Exception as e:  # noqa: BLE001 - the name is information only
            out["gpu"] = f"unknown ({type(e).__name__})"
    return out


def default_out(device: str) -> pathlib.Path:
    host = re.sub(r"[^A-Za-z0-9._-]", "_", platform.node() or "host")
    return HERE / "results" / f"svd_{host}{'' if device == 'cpu' else '_cuda'}.json"


def first_calls(cases: list[dict], device: str, below: int) -> dict:
    """(variant, dtype) -> (N, first call s) at the largest N < ``below`` in ``cases`` (those
    of an ``--append`` file) on ``device``: a run split into commands by size still skips what
    the earlier command found too slow."""
    out: dict = {}
    for c in cases:
        if c.get("device") != device or not c.get("N", below) < below:
            continue
        for name, e in c.get("peers", {}).items():
            key = (name, c["dtype"])
            if "first_s" in e and c["N"] >= out.get(key, (0,))[0]:
                out[key] = (c["N"], e["first_s"])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", type=int, nargs="+", default=[2048, 4096], help="N (>= 4)")
    p.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=DTYPES)
    p.add_argument("--repeat", type=int, default=3, help="timed rounds after the warm-up")
    p.add_argument("--device", default="cpu", help="cpu, or cuda / cuda:N")
    p.add_argument("--only", help="comma-separated substrings: run only variants matching one")
    p.add_argument("--skip", help="comma-separated substrings: leave out variants matching one")
    p.add_argument("--out", help="JSON file (default benchmarks/results/svd_<host>[_cuda].json)")
    p.add_argument("--append", action="store_true", help="merge into an existing --out file")
    p.add_argument(
        "--max-call-s",
        type=float,
        default=60.0,
        help="a variant whose first call takes longer is not repeated, and one whose call "
        "scaled by N**3 from a smaller N would take longer is skipped (default 60)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--verbose", action="store_true", help="print failing variants' tracebacks")
    args = p.parse_args(argv)
    if args.device == "cuda":
        args.device = "cuda:0"
    if not (args.device == "cpu" or re.fullmatch(r"cuda:\d+", args.device)):
        p.error(f"--device {args.device!r}: give cpu, cuda or cuda:N")
    if min(args.sizes) < 4 or args.repeat < 1:
        p.error("--sizes must be >= 4 and --repeat >= 1")
    out_path = pathlib.Path(args.out) if args.out else default_out(args.device)

    errors: dict[str, str] = {}
    vs, skipped = variants(args.device, errors)
    for flag, keep in ((args.only, True), (args.skip, False)):
        if flag:
            subs = [s.strip() for s in flag.split(",") if s.strip()]
            vs = [v for v in vs if any(s in v.name for s in subs) == keep]
    if not vs:
        p.error("no variant left to run")
    sync = make_sync(args.device)
    print(
        f"device {args.device}; variants: {', '.join(v.name for v in vs)}"
        + "".join(f"\n  skipped {k}: {why}" for k, why in skipped.items()),
        flush=True,
    )
    cases: list[dict] = []
    previous: list[dict] = []
    if args.append and out_path.exists():
        previous = json.loads(out_path.read_text()).get("cases", [])
    t_start = time.perf_counter()
    warm_s = warm_up(vs, args.dtypes, sync)
    run_meta = meta(args, errors, skipped)  # after the warm-up: the GPU's name is known
    history = first_calls(previous, args.device, min(args.sizes))
    print(f"process warm-up (every variant on 32 x 32) {warm_s:.1f} s", flush=True)
    for dtype in args.dtypes:
        for n in sorted(args.sizes):
            print(f"== {dtype} N={n} rank {n // 4}", flush=True)
            t0 = time.perf_counter()
            case = run_case(vs, dtype, n, args, sync, history)
            case["elapsed_s"] = time.perf_counter() - t0
            case["run"] = {"date": run_meta["date"], "argv": sys.argv, "gpu": run_meta.get("gpu")}
            case["peers"].update({k: {"skipped": why} for k, why in skipped.items()})
            cases.append(case)
            print(table([case]), flush=True)
            done = {c["case"] for c in cases}
            doc = {
                "meta": run_meta,
                "cases": [c for c in previous if c["case"] not in done] + cases,
            }
            doc["meta"]["total_s"] = time.perf_counter() - t_start
            doc["meta"]["process_warm_up_s"] = warm_s
            out_path.parent.mkdir(parents=True, exist_ok=True)
            out_path.write_text(json.dumps(doc, indent=1, default=jsonable) + "\n")
    print("\n" + table(cases))
    print(f"total {time.perf_counter() - t_start:.1f} s; wrote {out_path}")
    wrong = [
        f"{c['case']}: {k}: {e['wrong_result']}"
        for c in cases
        for k, e in c["peers"].items()
        if "wrong_result" in e and e["family"] == "tenloom"
    ]
    if wrong:
        print("tenloom WRONG RESULTS:\n  " + "\n  ".join(wrong))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
