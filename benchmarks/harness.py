"""The measurement harness shared by the benchmark scripts: the peers' imports, the machine's
BLAS and GEMM peak, timing (warm-up, quiescing background work, loops for short calls), peak
memory, the result check, and ``Case`` (one problem timed on tenloom and every peer) with the
run's context ``Ctx``.
"""

from __future__ import annotations

import gc
import os
import pathlib
import platform
import random
import statistics
import time
import traceback
import tracemalloc
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
RTOL = 1e-8
SAME_PATH_PEER = "opt_einsum on tenloom's path"

# NumPy-based peers (one family each for the tables); jax and torch are the others.
NUMPY_FAMILY = ("numpy", "opt_einsum", "cotengra", "numexpr")

warnings.filterwarnings("ignore", message=".*[Kk]ahypar.*")
warnings.filterwarnings("ignore", message=".*optuna.*")
warnings.filterwarnings("ignore", message=".*cmaes.*")


# ---------------------------------------------------------------------------------------------
# peers and machine


class Peers:
    """Imports of the optional peers; each missing one records why."""

    def __init__(self) -> None:
        self.errors: dict[str, str] = {}
        self.oe = self._imp("opt_einsum")
        self.ctg = self._imp("cotengra")
        self.ne = self._imp("numexpr")
        if self.ctg is not None:
            warm_cotengra_pool(self.ctg)
        self.jax = self._imp("jax")
        if self.jax is not None:
            self.jax.config.update("jax_enable_x64", True)
            import jax.numpy as jnp

            self.jnp = jnp
        self.torch = self._imp("torch")

    def _imp(self, name: str):
        try:
            return __import__(name)
        except Exception as e:  # noqa: BLE001 - any import failure disables the peer
            self.errors[name] = f"not installed: {type(e).__name__}: {e}"
            return None

    def versions(self) -> dict:
        import cotengra

        import tenloom

        out = {"python": platform.python_version(), "numpy": np.__version__}
        out["tenloom"] = tenloom.__version__
        out["cotengra"] = cotengra.__version__
        for name in ("oe", "ne", "jax", "torch"):
            mod = getattr(self, name)
            if mod is not None:
                out[mod.__name__] = getattr(mod, "__version__", "?")
        return out


def warm_cotengra_pool(ctg) -> None:
    """cotengra's "auto" preset (tenloom's default too) searches in a process pool that it
    forks on first use; fork it now, before JAX starts its threads (fork after JAX may
    deadlock)."""
    from cotengra.utils import randreg_equation

    inputs, output, _, sd = randreg_equation(60, 3, d_min=3, d_max=3, seed=99)
    ctg.array_contract_tree(inputs, output, sd, optimize=ctg.AutoOptimizer())


def blas_info() -> dict:
    info = {
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
        "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE"),
    }
    try:
        import threadpoolctl

        info["pools"] = [
            {k: d.get(k) for k in ("internal_api", "architecture", "num_threads", "version")}
            for d in threadpoolctl.threadpool_info()
        ]
    except ImportError:
        info["pools"] = "threadpoolctl not installed"
    return info


def gemm_peak(n: int) -> dict:
    """Best-of-5 GFLOP/s of an n x n matmul through numpy, float64 and float32."""
    out = {}
    rng = np.random.default_rng(0)
    for dt in ("float64", "float32"):
        a = rng.standard_normal((n, n)).astype(dt)
        b = rng.standard_normal((n, n)).astype(dt)
        best = best_time(lambda: a @ b, 5)
        out[dt] = 2 * n**3 / best / 1e9
    return out


def _wall(fn: Callable) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def best_time(fn: Callable, repeats: int) -> float:
    """One warm-up call, then the shortest of ``repeats`` timed calls (seconds)."""
    fn()
    return min(_wall(fn) for _ in range(repeats))


# ---------------------------------------------------------------------------------------------
# timing, checking


def rel_err(x, ref) -> float:
    x = np.asarray(x)
    ref = np.asarray(ref)
    if x.shape != ref.shape:
        return float("inf")
    denom = float(np.linalg.norm(ref.ravel()))
    num = float(np.linalg.norm((x - ref).ravel()))
    if denom == 0.0:
        return num
    return num / denom


def _children_cpu_s() -> float:
    """CPU seconds used so far by this process's descendants (Linux /proc; 0 elsewhere)."""
    me = os.getpid()
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12])) / tick
    total = 0.0
    for pid in cpu:
        p, depth = parent.get(pid), 0
        while p and p != me and depth < 8:
            p, depth = parent.get(p), depth + 1
        if p == me and pid != me:
            total += cpu[pid]
    return total


def quiesce(max_wait: float = 120.0) -> float:
    """Wait until this process's children are idle; returns the seconds waited.

    cotengra's "auto" preset (also tenloom's default) searches in a process pool and leaves
    up to a few already-started trials running in it when it returns; they would steal the
    2 cores from whatever is timed next (OpenMP peers like torch slow down 100x then)."""
    t0 = time.perf_counter()
    before = _children_cpu_s()
    while time.perf_counter() - t0 < max_wait:
        time.sleep(0.05)
        now = _children_cpu_s()
        if now - before < 0.005:
            break
        before = now
    return time.perf_counter() - t0


def time_calls(run: Callable, repeats: int) -> tuple[dict, Any]:
    """One warm-up call (timed as first_s), then ``repeats`` timed samples; before the timed
    samples, background work left by the first call (path-search trials) is waited for. A
    call under 10 ms is timed in loops of calls lasting about 20 ms each (as timeit does), so
    timer resolution and one-off interruptions do not decide sub-millisecond ratios."""
    gc.collect()
    t0 = time.perf_counter()
    out = run()
    first = time.perf_counter() - t0
    waited = quiesce()
    t0 = time.perf_counter()
    run()
    probe = time.perf_counter() - t0
    loop = 1 if probe >= 0.01 else max(1, min(10_000, int(0.02 / max(probe, 1e-7))))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(loop):
            run()
        times.append((time.perf_counter() - t0) / loop)
    med = statistics.median(times)
    stats = {
        "first_s": first,
        "median_s": med,
        "min_s": min(times),
        "times_s": times,
        "calls_per_sample": loop,
    }
    if waited > 0.06:
        stats["background_after_first_s"] = waited
    return stats, out


def peak_traced(run: Callable) -> int:
    """Peak bytes allocated through Python/NumPy allocators during one call (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


class Case:
    """One measured problem: tenloom and its peers, ratios, path costs."""

    def __init__(self, name: str, title: str, ctx: "Ctx", flops: float | None = None) -> None:
        self.name = name
        self.title = title
        self.ctx = ctx
        self.flops = flops  # real flops of tenloom's plan (2 per multiply-add), if known
        self.peers: dict[str, dict] = {}
        self.values: dict[str, Any] = {}
        self.path: dict[str, dict] = {}
        self.info: dict[str, Any] = {}

    def add(
        self,
        name: str,
        family: str,
        setup: Callable[[], Callable],
        to_numpy: Callable = np.asarray,
        memory: bool = False,
        compile_is_first: bool = False,
    ) -> dict | None:
        """Set up and time one peer; ``setup()`` returns the zero-argument call to time."""
        entry: dict[str, Any] = {"family": family}
        self.peers[name] = entry
        try:
            quiesce()
            t0 = time.perf_counter()
            run = setup()
            entry["setup_s"] = time.perf_counter() - t0
            waited = quiesce()
            if waited > 0.06:
                entry["background_after_setup_s"] = waited
            stats, out = time_calls(run, self.ctx.repeats)
            entry.update(stats)
            if compile_is_first:
                entry["compile_s"] = max(stats["first_s"] - stats["median_s"], 0.0)
            self.values[name] = to_numpy(out)
            if memory and self.ctx.memory:
                entry["peak_traced_bytes"] = peak_traced(run)
            print(
                f"    {name:<28} {stats['median_s'] * 1e3:10.3f} ms"
                + (f"  (compile {entry['compile_s'] * 1e3:.1f} ms)" if compile_is_first else ""),
                flush=True,
            )
        except Exception as e:  # noqa: BLE001 - a failing peer is recorded, the run goes on
            entry["error"] = f"{type(e).__name__}: {e}"[:500]
            if self.ctx.verbose:
                traceback.print_exc()
            print(f"    {name:<28} ERROR {entry['error'][:150]}", flush=True)
        return entry

    def skip(self, name: str, family: str, why: str) -> None:
        self.peers[name] = {"family": family, "skipped": why}
        print(f"    {name:<28} skipped: {why}", flush=True)

    def finish(self) -> dict:
        ours_val = self.values.get("tenloom")
        mismatches = []
        # an independent NumPy-based result decides who is wrong when a peer disagrees
        ref_name = next(
            (n for n in self.values if n != "tenloom" and self.peers[n]["family"] in NUMPY_FAMILY),
            None,
        )
        for name, entry in self.peers.items():
            if name == "tenloom" or name not in self.values or ours_val is None:
                continue
            err = rel_err(self.values[name], ours_val)
            entry["rel_err_vs_tenloom"] = err
            if err <= RTOL:
                continue
            ref_err = (
                None if ref_name is None else rel_err(self.values[name], self.values[ref_name])
            )
            if name == ref_name or (ref_err is not None and ref_err <= RTOL):
                mismatches.append(f"{self.name}: tenloom differs from {name} by {err:.3g}")
            else:
                shape = np.shape(self.values[name])
                entry["wrong_result"] = (
                    f"differs from tenloom by {err:.3g} and from {ref_name} by {ref_err:.3g} "
                    f"(shape {shape}, expected {np.shape(ours_val)}); excluded from the ratios"
                )
                print(f"    note: {name} {entry['wrong_result']}", flush=True)
        ours = self.peers.get("tenloom", {}).get("median_s")
        timed = {
            n: e["median_s"]
            for n, e in self.peers.items()
            if n != "tenloom" and "median_s" in e and "wrong_result" not in e
        }
        ratios: dict[str, Any] = {}
        if ours is not None and timed:
            ratios["per_peer"] = {n: ours / t for n, t in timed.items()}

            def best(names):
                names = [n for n in names if n in timed]
                if not names:
                    return None, None
                b = min(names, key=timed.__getitem__)
                return b, ours / timed[b]

            ratios["best_peer"], ratios["vs_best_peer"] = best(
                [n for n in timed if self.peers[n]["family"] != "same_path"]
            )
            ratios["best_numpy_peer"], ratios["vs_best_numpy"] = best(
                [n for n in timed if self.peers[n]["family"] in NUMPY_FAMILY]
            )
            ratios["best_jax_peer"], ratios["vs_jax"] = best(
                [n for n in timed if self.peers[n]["family"] == "jax"]
            )
            if SAME_PATH_PEER in timed:
                ratios["vs_same_path"] = ours / timed[SAME_PATH_PEER]
            ratios["best_torch_peer"], ratios["vs_torch"] = best(
                [n for n in timed if self.peers[n]["family"] == "torch"]
            )
        gflops = {}
        if self.flops:
            for n, e in self.peers.items():
                if "median_s" in e:
                    gflops[n] = self.flops / e["median_s"] / 1e9
        res = {
            "case": self.name,
            "title": self.title,
            "peers": self.peers,
            "ratios": ratios,
            "path": self.path,
            "flops": self.flops,
            "gflops": gflops,
            "gemm_peak_gflops": self.ctx.peak.get("float64"),
            "info": self.info,
            "mismatches": mismatches,
        }
        self.ctx.mismatches += mismatches
        for m in mismatches:
            print(f"    MISMATCH {m}", flush=True)
        r = ratios
        if r:
            print(
                f"    ratio tenloom/best peer {r['vs_best_peer']:.2f} ({r['best_peer']})"
                + (
                    f", /best numpy {r['vs_best_numpy']:.2f} ({r['best_numpy_peer']})"
                    if r.get("vs_best_numpy")
                    else ""
                )
                + (f", /jax {r['vs_jax']:.2f}" if r.get("vs_jax") else "")
                + (f", /same path {r['vs_same_path']:.2f}" if r.get("vs_same_path") else ""),
                flush=True,
            )
        return res


class Ctx:
    def __init__(self, args, peers: Peers) -> None:
        self.args = args
        self.quick = args.quick
        self.repeats = args.repeats
        self.memory = not args.no_memory
        self.verbose = args.verbose
        self.peers = peers
        self.networks = pathlib.Path(args.networks) if args.networks else None
        self.mismatches: list[str] = []
        self.peak: dict = {}


def seed_all(seed: int = 0) -> None:
    random.seed(seed)
    np.random.seed(seed)


def jsonable(v):
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return repr(v)
