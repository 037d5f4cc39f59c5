"""The benchmark runner: tenloom against its peers, in one process, on the same arrays.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \\
        python benchmarks/run.py --networks ../shared/data/networks        # full, < 15 min
    python benchmarks/run.py --quick --networks ../shared/data/networks    # smoke run, < 2 min
    python benchmarks/run.py --only W1,W3 --repeats 7

Workloads (see /work/shared/BENCHMARKS.md): W1 randreg n=60 D=4, W2 MPS/MPO expectation built
site by site, W3 lattice 6x6 D=6, W4 Sycamore m10 amplitude (quimb), W5 matrix chain and
batched matmul, W6 rtree_100, W7 random hyper network with self-loops and lone indices, W9
2000-op elementwise chain; REF runs the reference MPS overlap network; PATHS compares
contraction orders (no execution) on the reference networks too costly to run on a CPU.

For every workload tenloom and each peer (numpy, opt_einsum, cotengra, jax.jit, torch) run one
after the other on the same float64 arrays: one warm-up call (for tenloom and jax.jit it
includes compilation; reported separately as compile = first call - median), then --repeats
timed samples (a call under 10 ms is timed in loops of about 20 ms); medians and ratios
tenloom / peer are reported. Every peer's result is checked
against tenloom's (relative 2-norm error <= 1e-8); any mismatch fails the run after the results
are written. A peer that fails records its error string and the run goes on.

Output: benchmarks/results/<workload>.json (with --quick: benchmarks/results/quick/) and, for a
full run, a section of docs/benchmarks.md between the markers below plus
docs/benchmarks_ratios.png.

The OpenBLAS environment variables OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, set on these machines
for old OpenBLAS builds, make numpy's GEMM ~1.5x slower; unset them for the run (the kernel in
use is recorded in every result file).
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gc
import json
import math
import operator
import os
import pathlib
import platform
import random
import statistics
import sys
import time
import traceback
import tracemalloc
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
DOCS = ROOT / "docs" / "benchmarks.md"
PLOT = ROOT / "docs" / "benchmarks_ratios.png"
BEGIN, END = "<!-- run.py begin -->", "<!-- run.py end -->"
RTOL = 1e-8
SAME_PATH_PEER = "opt_einsum on tenloom's path"

# NumPy-based peers (one family each for the tables); jax and torch are the others.
NUMPY_FAMILY = ("numpy", "opt_einsum", "cotengra", "numexpr")

# Path search settings, identical on both sides (tenloom's optimize= and cotengra's optimizer):
# "auto" is cotengra's default preset (and tenloom's default), "greedy" its greedy, "hyper" a
# small fixed budget: 16 seeded random-greedy trials, no reconfiguration, no time limit.
HYPER = {
    "methods": ["random-greedy"],
    "max_repeats": 16,
    "max_time": None,
    "reconf_opts": None,
    "parallel": False,
    "seed": 0,
}

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
        a @ b
        best = min(_wall(lambda: a @ b) for _ in range(5))
        out[dt] = 2 * n**3 / best / 1e9
    return out


def _wall(fn: Callable) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


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


# ---------------------------------------------------------------------------------------------
# contraction networks


def seed_all(seed: int = 0) -> None:
    random.seed(seed)
    np.random.seed(seed)


def int_labels(inputs, output):
    """Map arbitrary labels to 0..k-1 in order of first appearance."""
    lab: dict = {}
    for t in (*inputs, output):
        for x in t:
            lab.setdefault(x, len(lab))
    ins = [tuple(lab[x] for x in t) for t in inputs]
    out = tuple(lab[x] for x in output)
    return ins, out, lab


def scaled_arrays(inputs, size_dict, seed: int, dtype=np.float64):
    """standard_normal arrays, each scaled so the contracted value is O(1): an index of size d
    occurring k times contributes d**(-1/(2k)) to every tensor it appears in."""
    rng = np.random.default_rng(seed)
    count = Counter(x for t in inputs for x in t)
    arrays = []
    for t in inputs:
        shape = tuple(size_dict[x] for x in t)
        scale = math.prod(size_dict[x] ** (-1.0 / (2 * count[x])) for x in t)
        arrays.append((rng.standard_normal(shape) * scale).astype(dtype))
    return arrays


def make_optimizer(ctg, setting):
    """A fresh cotengra optimizer for ``setting`` (never the shared preset instance, whose cache
    would let one side reuse the other's search)."""
    if setting == "greedy":
        return "greedy"
    if setting == "auto":
        return ctg.AutoOptimizer()
    if setting == "hyper":
        return ctg.HyperOptimizer(**HYPER)
    raise ValueError(setting)


def peer_tree(ctg, ins, out, sd, setting):
    """cotengra's tree for the peers, with the search budget tenloom's ``setting`` has. For
    "auto" that is cotengra's fast preset, greedy and, on networks small and cheap enough
    (tenloom's AUTO_HQ_* thresholds), its high-quality preset and the same seeded
    hyper-optimizer run tenloom's search makes: of those trees the peers get
    the one with the fewest multiply-adds (cotengra's own measure; tenloom's pass picks by
    multiply-adds plus GEMM operand copies)."""
    if setting != "auto":
        return ctg.array_contract_tree(ins, out, sd, optimize=make_optimizer(ctg, setting))
    from tenloom.passes.contraction_order import (
        AUTO_HQ_MADDS,
        AUTO_HQ_TENSORS,
        auto_hyper_optimizer,
    )

    trees = [ctg.array_contract_tree(ins, out, sd, optimize=ctg.AutoOptimizer())]
    trees.append(ctg.array_contract_tree(ins, out, sd, optimize="greedy"))
    cheap = min(t.contraction_cost() for t in trees) <= AUTO_HQ_MADDS  # as tenloom's pass
    if cheap and len(ins) <= AUTO_HQ_TENSORS:
        trees.append(ctg.array_contract_tree(ins, out, sd, optimize=ctg.AutoHQOptimizer()))
        trees.append(ctg.array_contract_tree(ins, out, sd, optimize=auto_hyper_optimizer()))
    return min(trees, key=lambda t: t.contraction_cost())


def tenloom_setting(setting):
    if setting == "hyper":
        return {"method": "hyper", **HYPER}
    return setting


def tree_stats(tree) -> dict:
    cost = tree.contraction_cost()
    return {
        "log10_cost": math.log10(max(cost, 1)),
        "log2_width": float(tree.contraction_width()),
        "madds": float(cost),
    }


def tenloom_plan(tensors, setting) -> tuple[dict, Any, Any]:
    """Cost of tenloom's plan: run the pipeline (cached paths are reused) and sum CONTRACT
    nodes' multiply-adds; the largest CONTRACT output is the width. Returns (stats, flops,
    optimized graph)."""
    from tenloom.graph.ops import Op
    from tenloom.passes import run_pipeline
    from tenloom.passes.cost import graph_flops, node_madds
    from tenloom.runtime.evaluate import build_graph

    t0 = time.perf_counter()
    og, pctx = run_pipeline(build_graph(tuple(tensors)), options={"optimize": setting})
    elapsed = time.perf_counter() - t0
    madds = 0
    width = 0
    n_contract = 0
    complex_ = False
    for n in og.order:
        if n.op is Op.CONTRACT:
            madds += node_madds(n)
            width = max(width, n.size)
            n_contract += 1
            complex_ = complex_ or n.dtype.kind == "c"
    stats = {
        "log10_cost": math.log10(max(madds, 1)),
        "log2_width": math.log2(max(width, 1)),
        "madds": float(madds),
        "contract_nodes": n_contract,
        "graph_flops": float(graph_flops(og)),
        "nodes_after_passes": len(og),
        "pipeline_s": elapsed,
        "pass_stats": {
            k: {kk: _jsonable(vv) for kk, vv in v.items()} for k, v in pctx.stats.items()
        },
    }
    flops = 2 * madds * (4 if complex_ else 1)
    return stats, flops, og


def tenloom_ssa_path(og, arrays) -> list[tuple[int, int]]:
    """The pairwise order of tenloom's plan as an SSA path over ``arrays`` (operand i is the
    i-th array; contractions get ids from len(arrays) up). Each CONTRACT operand is followed
    back through one-input nodes (pre-reductions, views) to a constant or a CONTRACT."""
    from tenloom.graph.ops import Op

    pos: dict[int, int] = {}
    for i, a in enumerate(arrays):
        if id(a) in pos:
            raise ValueError("the same array is used as two operands")
        pos[id(a)] = i
    ids: dict[int, int] = {}
    path: list[tuple[int, int]] = []

    def resolve(node) -> int:
        while id(node) not in ids:
            if node.op is Op.CONST:
                return pos[id(node.attrs[0].value)]
            if len(node.inputs) != 1:
                raise ValueError(f"operand comes from a {node.op.value} node")
            node = node.inputs[0]
        return ids[id(node)]

    for n in og.order:
        if n.op is Op.CONTRACT:
            path.append((resolve(n.inputs[0]), resolve(n.inputs[1])))
            ids[id(n)] = len(arrays) + len(path) - 1
    if len(path) != len(arrays) - 1:
        raise ValueError(f"{len(path)} pairwise contractions for {len(arrays)} operands")
    return path


def _jsonable(v):
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return repr(v)


def greedy_stats(ctx: Ctx, ins, out, sd) -> tuple[dict, list | None]:
    """opt_einsum's greedy path, costed by cotengra (same cost definition as the others)."""
    oe, ctg = ctx.peers.oe, ctx.peers.ctg
    if oe is None:
        return {"error": ctx.peers.errors.get("opt_einsum")}, None
    eq = oe_equation(oe, ins, out)
    shapes = [tuple(sd[x] for x in t) for t in ins]
    t0 = time.perf_counter()
    path, _ = oe.contract_path(eq, *shapes, shapes=True, optimize="greedy")
    el = time.perf_counter() - t0
    tree = ctg.ContractionTree.from_path(ins, out, sd, path=path)
    st = tree_stats(tree)
    st["search_s"] = el
    return st, path


def oe_equation(oe, ins, out) -> str:
    sym = oe.get_symbol
    return ",".join("".join(sym(x) for x in t) for t in ins) + "->" + "".join(sym(x) for x in out)


def letters_equation(ins, out) -> str | None:
    labels = sorted({x for t in ins for x in t} | set(out))
    if len(labels) > 52:
        return None
    abc = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    m = {x: abc[i] for i, x in enumerate(labels)}
    return ",".join("".join(m[x] for x in t) for t in ins) + "->" + "".join(m[x] for x in out)


def network_case(
    ctx: Ctx,
    name: str,
    title: str,
    inputs,
    output,
    size_dict,
    arrays,
    setting: str = "auto",
    build_tenloom: Callable | None = None,
    extra_peers: Callable[["Case"], None] | None = None,
) -> dict:
    """Time one contraction network on tenloom and every peer (all on ``arrays``)."""
    import tenloom as tl

    P = ctx.peers
    ins, out, lab = int_labels(inputs, output)
    sd = {lab[k]: int(v) for k, v in size_dict.items() if k in lab}
    print(
        f"  [{name}] {title}: {len(ins)} tensors, {len(sd)} labels, setting={setting!r}",
        flush=True,
    )
    case = Case(name, title, ctx)
    case.info.update(
        tensors=len(ins),
        labels=len(sd),
        dtype=str(arrays[0].dtype),
        optimize=setting,
        input_bytes=int(sum(a.nbytes for a in arrays)),
    )

    # -- tenloom: trace, first evaluate (compile incl. path search), repeated evaluate
    holder: dict = {}

    def tl_setup():
        t0 = time.perf_counter()
        if build_tenloom is None:
            argv: list = []
            for a, t in zip(arrays, ins):
                argv += [tl.asarray(a), list(t)]
            t_ = tl.einsum(*argv, list(out))
        else:
            t_ = build_tenloom()
        holder["trace_s"] = time.perf_counter() - t0
        holder["t"] = t_
        seed_all(0)
        return lambda: tl.evaluate(t_, optimize=tenloom_setting(setting))[0]

    entry = case.add("tenloom", "tenloom", tl_setup, memory=True, compile_is_first=True)
    tl_graph = None
    if "t" in holder:
        entry["trace_s"] = holder["trace_s"]
        st, flops, tl_graph = tenloom_plan([holder["t"]], tenloom_setting(setting))
        case.path["tenloom"] = st
        case.flops = flops
        entry["nodes_traced"] = _graph_len(holder["t"])

    # -- cotengra: path search with a fresh optimizer of the same setting, then tree.contract
    seed_all(0)
    tree_box: dict = {}

    def ctg_setup():
        t0 = time.perf_counter()
        tree = peer_tree(P.ctg, ins, out, sd, setting)
        tree_box["search_s"] = time.perf_counter() - t0
        tree_box["tree"] = tree
        return lambda: tree.contract(arrays)

    e = case.add("cotengra", "cotengra", ctg_setup, memory=True)
    tree = tree_box.get("tree")
    if tree is not None:
        e["search_s"] = tree_box["search_s"]
        st = tree_stats(tree)
        st["search_s"] = tree_box["search_s"]
        case.path["cotengra"] = st
        if case.flops is None:
            case.flops = 2 * st["madds"] * (4 if arrays[0].dtype.kind == "c" else 1)

    gst, gpath = greedy_stats(ctx, ins, out, sd)
    case.path["opt_einsum_greedy"] = gst

    # -- opt_einsum / jax / torch through one opt_einsum expression on cotengra's path
    expr = None
    if P.oe is not None and tree is not None:
        eq = oe_equation(P.oe, ins, out)
        expr = P.oe.contract_expression(
            eq, *[a.shape for a in arrays], optimize=[tuple(p) for p in tree.get_path()]
        )
        case.add("opt_einsum", "opt_einsum", lambda: lambda: expr(*arrays), memory=True)
    elif P.oe is None:
        case.skip("opt_einsum", "opt_einsum", P.errors["opt_einsum"])

    # -- execution alone: opt_einsum on tenloom's own pairwise order (the path searches are
    # random, so the two sides' orders differ by luck; this ratio leaves that out)
    same = SAME_PATH_PEER
    if P.oe is not None and tl_graph is not None:
        try:
            ssa = tenloom_ssa_path(tl_graph, arrays)
            tl_tree = P.ctg.ContractionTree.from_path(ins, out, sd, ssa_path=ssa)
            expr_tl = P.oe.contract_expression(
                oe_equation(P.oe, ins, out),
                *[a.shape for a in arrays],
                optimize=[tuple(p) for p in tl_tree.get_path()],
            )
            case.path["tenloom_path_recosted_by_cotengra"] = tree_stats(tl_tree)
            case.add(same, "same_path", lambda: lambda: expr_tl(*arrays))
        except Exception as e:  # noqa: BLE001
            case.skip(same, "same_path", f"tenloom's order not recoverable: {e}")

    leq = letters_equation(ins, out)
    if leq is None:
        case.skip("numpy.einsum", "numpy", f"{len(sd)} labels > 52")
    elif gpath is None:
        case.skip("numpy.einsum", "numpy", "no greedy path (opt_einsum missing)")
    else:
        npath = ["einsum_path", *[tuple(p) for p in gpath]]
        case.add(
            "numpy.einsum (greedy path)",
            "numpy",
            lambda: lambda: np.einsum(leq, *arrays, optimize=npath),
            memory=True,
        )

    if extra_peers is not None:
        extra_peers(case)

    if P.jax is not None and expr is not None:

        def jax_setup():
            js = [P.jnp.asarray(a) for a in arrays]
            f = P.jax.jit(lambda *xs: expr(*xs, backend="jax"))
            return lambda: f(*js).block_until_ready()

        case.add("jax.jit", "jax", jax_setup, compile_is_first=True)
    elif P.jax is None:
        case.skip("jax.jit", "jax", P.errors["jax"])

    if P.torch is not None and expr is not None:

        def torch_setup():
            ts = [P.torch.from_numpy(a) for a in arrays]

            def run():
                with P.torch.inference_mode():
                    return expr(*ts, backend="torch")

            return run

        case.add("torch", "torch", torch_setup, to_numpy=lambda x: x.numpy())
    elif P.torch is None:
        case.skip("torch", "torch", P.errors["torch"])
    return case.finish()


def _graph_len(t) -> int:
    from tenloom.runtime.evaluate import build_graph

    return len(build_graph((t,)))


# ---------------------------------------------------------------------------------------------
# workloads


def w1(ctx: Ctx) -> dict:
    from cotengra.utils import randreg_equation

    n, d = (60, 4) if not ctx.quick else (30, 4)
    inputs, output, shapes, sd = randreg_equation(n, 3, d_min=d, d_max=d, seed=1)
    arrays = scaled_arrays(inputs, sd, seed=1)
    return {
        "cases": [network_case(ctx, "W1", f"randreg n={n} deg 3 D={d}", inputs, output, sd, arrays)]
    }


def mps_mpo_arrays(L: int, chi: int, w: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    mps, mpo = [], []
    for i in range(L):
        left = 1 if i == 0 else chi
        right = 1 if i == L - 1 else chi
        mps.append(rng.standard_normal((left, d, right)) / np.sqrt(left * d))
        wl = 1 if i == 0 else w
        wr = 1 if i == L - 1 else w
        mpo.append(rng.standard_normal((wl, d, d, wr)) / np.sqrt(d * wl))
    return mps, mpo


def mps_mpo_expectation(mps: list, mpo: list):
    """<psi|H|psi> the way a user writes it: one einsum per site, the environment carried
    along, the bra and the ket the same tensors (also W8's W2, benchmarks/grad_ratio.py)."""
    import tenloom as tl

    env = tl.ones((1, 1, 1))
    for a, w in zip(mps, mpo):
        env = tl.einsum("abc,aid,bije,cjf->def", env, a, w, a)
    return tl.sum(env)


def mps_mpo_operands(L: int) -> list[tuple]:
    """The labels of <psi|H|psi> as one network, three operands per site: ket A[a_i p_i a_i+1],
    W[b_i p_i q_i b_i+1], bra A[c_i q_i c_i+1]; the size-1 boundary bonds are lone indices."""
    operands = []
    for i in range(L):
        operands += [
            (("a", i), ("p", i), ("a", i + 1)),
            (("b", i), ("p", i), ("q", i), ("b", i + 1)),
            (("c", i), ("q", i), ("c", i + 1)),
        ]
    return operands


def w2(ctx: Ctx) -> dict:
    import tenloom as tl

    L, chi = (100, 64) if not ctx.quick else (30, 32)
    mps, mpo = mps_mpo_arrays(L, chi, 5, 2, seed=2)

    def build():
        return mps_mpo_expectation([tl.asarray(a) for a in mps], [tl.asarray(w) for w in mpo])

    # the same value as one network for the peers
    inputs = mps_mpo_operands(L)
    arrays = [x for i in range(L) for x in (mps[i], mpo[i], mps[i])]
    sd = {}
    for t, a in zip(inputs, arrays):
        sd.update(zip(t, a.shape))

    def sweep():
        env = np.ones((1, 1, 1))
        for a, w in zip(mps, mpo):
            t1 = np.tensordot(env, a, ([0], [0]))  # b c i d
            t2 = np.tensordot(t1, w, ([0, 2], [0, 1]))  # c d j e
            env = np.tensordot(t2, a, ([0, 2], [0, 1]))  # d e f
        return env.sum()

    def extra(case: Case) -> None:
        case.add("numpy sweep (tensordot)", "numpy", lambda: sweep, memory=True)

    title = f"MPS/MPO <psi|H|psi> L={L} chi={chi} D=5, built site by site"
    res = network_case(
        ctx, "W2", title, inputs, (), sd, arrays, build_tenloom=build, extra_peers=extra
    )
    return {"cases": [res]}


def w3(ctx: Ctx) -> dict:
    from cotengra.utils import lattice_equation

    dims, d = ([6, 6], 6) if not ctx.quick else ([4, 4], 6)
    inputs, output, shapes, sd = lattice_equation(dims, d_min=d, d_max=d, seed=1)
    arrays = scaled_arrays(inputs, sd, seed=1)
    title = f"lattice {dims[0]}x{dims[1]} D={d}"
    return {"cases": [network_case(ctx, "W3", title, inputs, output, sd, arrays)]}


def w4(ctx: Ctx) -> dict:
    if ctx.quick:
        return {"skipped": "not run with --quick (a contraction takes seconds)"}
    if ctx.networks is None:
        return {"skipped": "needs --networks (circuit_n53_m10 qsim file)"}
    try:
        import quimb.tensor as qtn
    except ImportError:
        return {"skipped": "quimb not installed"}
    files = sorted(ctx.networks.glob("circuit_n53_m10_*.qsim"))
    if not files:
        return {"skipped": f"no circuit_n53_m10_*.qsim in {ctx.networks}"}
    t0 = time.perf_counter()
    circ = qtn.Circuit.from_qsim_file(str(files[0]))
    tn = circ.amplitude_tn("0" * circ.N)  # quimb's default simplification
    inputs, output, sd = tn.get_inputs_output_size_dict()
    arrays = [np.asarray(a, dtype=np.complex128) for a in tn.arrays]
    build_s = time.perf_counter() - t0
    res = network_case(
        ctx,
        "W4",
        f"Sycamore m10 amplitude <0|C|0> ({files[0].name}, quimb-simplified)",
        inputs,
        output,
        sd,
        arrays,
    )
    res["info"]["quimb_build_s"] = build_s
    return {"cases": [res]}


def w5(ctx: Ctx) -> dict:
    import tenloom as tl

    P = ctx.peers
    n_mats = 100 if not ctx.quick else 30
    rng = np.random.default_rng(5)
    sizes = rng.integers(10, 1000, size=n_mats + 1)
    mats = [
        rng.standard_normal((int(sizes[i]), int(sizes[i + 1]))) / np.sqrt(sizes[i])
        for i in range(n_mats)
    ]
    # --- chain
    ins = [(i, i + 1) for i in range(n_mats)]
    out = (0, n_mats)
    sd = {i: int(s) for i, s in enumerate(sizes)}
    print(f"  [W5 chain] {n_mats} matrices, sizes 10..999", flush=True)
    case = Case("W5-chain", f"chain of {n_mats} matrices a @ b @ ... (sizes rng(5) 10..999)", ctx)
    holder: dict = {}

    def tl_setup():
        t0 = time.perf_counter()
        ts = [tl.asarray(m) for m in mats]
        t_ = functools.reduce(operator.matmul, ts)
        holder["trace_s"] = time.perf_counter() - t0
        holder["t"] = t_
        return lambda: tl.evaluate(t_)[0]

    e = case.add("tenloom", "tenloom", tl_setup, memory=True, compile_is_first=True)
    if "t" in holder:
        e["trace_s"] = holder["trace_s"]
        st, flops, tl_graph = tenloom_plan([holder["t"]], "auto")
        case.path["tenloom"] = st
        case.flops = flops
    seed_all(0)
    box: dict = {}

    def ctg_setup():
        t0 = time.perf_counter()
        tree = peer_tree(P.ctg, ins, out, sd, "auto")
        box["search_s"] = time.perf_counter() - t0
        box["tree"] = tree
        return lambda: tree.contract(mats)

    e = case.add("cotengra", "cotengra", ctg_setup, memory=True)
    if "tree" in box:
        st = tree_stats(box["tree"])
        st["search_s"] = box["search_s"]
        case.path["cotengra"] = st
        e["search_s"] = box["search_s"]
        expr = P.oe.contract_expression(
            oe_equation(P.oe, ins, out),
            *[m.shape for m in mats],
            optimize=[tuple(p) for p in box["tree"].get_path()],
        )
        case.add("opt_einsum", "opt_einsum", lambda: lambda: expr(*mats), memory=True)
    case.path["opt_einsum_greedy"] = greedy_stats(ctx, ins, out, sd)[0]
    lr = float(sum(int(sizes[0]) * int(sizes[i]) * int(sizes[i + 1]) for i in range(1, n_mats)))
    case.path["left_to_right"] = {"log10_cost": math.log10(lr), "madds": lr}
    case.add(
        "numpy a @ b @ ... (left to right)",
        "numpy",
        lambda: lambda: functools.reduce(np.matmul, mats),
        memory=True,
    )
    case.add(
        "numpy.linalg.multi_dot", "numpy", lambda: lambda: np.linalg.multi_dot(mats), memory=True
    )
    if P.jax is not None:
        jnp = P.jnp

        def jsetup(fn):
            def setup():
                js = [jnp.asarray(m) for m in mats]
                f = P.jax.jit(fn)
                return lambda: f(js).block_until_ready()

            return setup

        case.add(
            "jax.jit a @ b @ ...",
            "jax",
            jsetup(lambda xs: functools.reduce(jnp.matmul, xs)),
            compile_is_first=True,
        )
        case.add("jax.jit multi_dot", "jax", jsetup(jnp.linalg.multi_dot), compile_is_first=True)
    if P.torch is not None:
        torch = P.torch
        ts = [torch.from_numpy(m) for m in mats]
        case.add(
            "torch a @ b @ ...",
            "torch",
            lambda: lambda: functools.reduce(torch.matmul, ts),
            to_numpy=lambda x: x.numpy(),
        )
        case.add(
            "torch.linalg.multi_dot",
            "torch",
            lambda: lambda: torch.linalg.multi_dot(ts),
            to_numpy=lambda x: x.numpy(),
        )
    chain = case.finish()

    # --- batched matmul
    print("  [W5 bmm] 64 x (32x32) @ (32x32)", flush=True)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 32, 32)) / np.sqrt(32)
    b = rng.standard_normal((64, 32, 32)) / np.sqrt(32)
    case = Case("W5-bmm", "batched matmul 64 x 32x32 @ 32x32", ctx, flops=2.0 * 64 * 32**3)

    def tl_bmm():
        x, y = tl.asarray(a), tl.asarray(b)
        t_ = x @ y
        return lambda: tl.evaluate(t_)[0]

    case.add("tenloom", "tenloom", tl_bmm, memory=True, compile_is_first=True)
    case.add("numpy.matmul", "numpy", lambda: lambda: np.matmul(a, b), memory=True)
    case.add(
        "numpy.einsum",
        "numpy",
        lambda: lambda: np.einsum("bij,bjk->bik", a, b, optimize=True),
        memory=True,
    )
    case.add(
        "opt_einsum", "opt_einsum", lambda: lambda: P.oe.contract("bij,bjk->bik", a, b), memory=True
    )
    case.add(
        "cotengra", "cotengra", lambda: lambda: P.ctg.einsum("bij,bjk->bik", a, b), memory=True
    )
    if P.jax is not None:

        def jbmm():
            ja, jb = P.jnp.asarray(a), P.jnp.asarray(b)
            f = P.jax.jit(P.jnp.matmul)
            return lambda: f(ja, jb).block_until_ready()

        case.add("jax.jit matmul", "jax", jbmm, compile_is_first=True)
    if P.torch is not None:
        ta, tb = P.torch.from_numpy(a), P.torch.from_numpy(b)
        case.add(
            "torch.bmm", "torch", lambda: lambda: P.torch.bmm(ta, tb), to_numpy=lambda x: x.numpy()
        )
    bmm = case.finish()
    return {"cases": [chain, bmm]}


def load_network(ctx: Ctx, stem: str):
    if ctx.networks is None:
        return None
    f = ctx.networks / f"{stem}.json"
    if not f.exists():
        return None
    d = json.loads(f.read_text())
    return d["inputs"], d["output"], {k: int(v) for k, v in d["size_dict"].items()}


def w6(ctx: Ctx) -> dict:
    net = load_network(ctx, "rtree_100_a")
    if net is None:
        return {"skipped": "needs --networks with rtree_100_a.json"}
    inputs, output, sd = net
    arrays = scaled_arrays(inputs, sd, seed=6)
    res = network_case(
        ctx, "W6", "rtree_100_a.json (99 tiny contractions)", inputs, output, sd, arrays
    )
    return {"cases": [res]}


def w7_network():
    from cotengra.utils import rand_equation

    inputs, output, shapes, sd = rand_equation(
        40, 3, n_out=2, n_hyper_in=2, n_hyper_out=1, d_min=2, d_max=4, seed=7
    )
    inputs = [list(t) for t in inputs]
    sd = dict(sd)
    # self-loops (diagonals): a label repeated within one tensor
    for i in (0, 5, 10, 15, 20):
        inputs[i].append(inputs[i][0])
    inputs[25] += [inputs[25][1], inputs[25][1]]  # a triple diagonal
    # lone summation indices: labels in one tensor only, not in the output
    for k, i in enumerate((2, 7, 12, 30, 30)):
        lab = f"lone{k}"
        inputs[i].append(lab)
        sd[lab] = 3
    return inputs, list(output), sd


def w7(ctx: Ctx) -> dict:
    inputs, output, sd = w7_network()
    arrays = scaled_arrays(inputs, sd, seed=7)
    title = "rand_equation(40, 3, hyper, seed 7) + 6 self-loops + 5 lone indices"
    return {"cases": [network_case(ctx, "W7", title, inputs, output, sd, arrays)]}


def chain_ops(xp, y, x, blocks: int):
    """The 2000-op elementwise chain (8 ops per block), bounded in [0, 1]."""
    for _ in range(blocks):
        y = y * 0.9
        y = y + x
        y = y * y
        y = y * 0.1
        y = y - 0.3
        y = xp.sin(y)
        y = y + 1.0
        y = y * 0.5
    return y


def numexpr_chain(ne, x, blocks: int, per_call: int = 6):
    """The same chain as numexpr expressions of 6 blocks (48 ops, tenloom's fused-region cap)
    each: numexpr's compile time doubles with every nested block (0.5 s at 10 blocks), so
    the 2000 ops cannot go into one expression."""
    block = "(sin(((({y} * 0.9) + x) ** 2) * 0.1 - 0.3) + 1.0) * 0.5"
    exprs = []
    done = 0
    while done < blocks:
        k = min(per_call, blocks - done)
        e = "y"
        for _ in range(k):
            e = block.format(y=f"({e})")
        exprs.append(e)
        done += k
    compiled = [ne.NumExpr(e, signature=[("x", np.float64), ("y", np.float64)]) for e in exprs]

    def run():
        y = x
        for c in compiled:
            y = c(x, y)
        return y

    return run


def w9(ctx: Ctx) -> dict:
    import tenloom as tl

    P = ctx.peers
    blocks = 250  # 2000 ops
    cases = []
    for n in (8, 10**6 if not ctx.quick else 10**5):
        x = np.random.default_rng(9).random(n)
        name = f"W9-{n}"
        print(f"  [{name}] 2000-op elementwise chain on {n} elements", flush=True)
        case = Case(name, f"2000-op elementwise chain, {n:g} elements", ctx, flops=2000.0 * n)
        holder: dict = {}

        def tl_setup(x=x):
            t0 = time.perf_counter()
            tx = tl.asarray(x)
            t_ = chain_ops(tl, tx, tx, blocks)
            holder["trace_s"] = time.perf_counter() - t0
            holder["t"] = t_
            return lambda: tl.evaluate(t_)[0]

        e = case.add("tenloom", "tenloom", tl_setup, memory=True, compile_is_first=True)
        if "t" in holder:
            e["trace_s"] = holder["trace_s"]
            e["trace_us_per_op"] = holder["trace_s"] / 2000 * 1e6
            st, _, _ = tenloom_plan([holder["t"]], "auto")
            case.info["tenloom_nodes_after_passes"] = st["nodes_after_passes"]
            case.info["tenloom_pipeline_s"] = st["pipeline_s"]
        case.add(
            "numpy (eager)", "numpy", lambda x=x: lambda: chain_ops(np, x, x, blocks), memory=True
        )
        if P.ne is not None:
            case.add(
                "numexpr (48 ops/call)",
                "numexpr",
                lambda x=x: numexpr_chain(P.ne, x, blocks),
                memory=True,
            )
        if P.jax is not None:

            def jsetup(x=x):
                jx = P.jnp.asarray(x)
                f = P.jax.jit(lambda v: chain_ops(P.jnp, v, v, blocks))
                return lambda: f(jx).block_until_ready()

            case.add("jax.jit", "jax", jsetup, compile_is_first=True)
        cases.append(case.finish())
    return {"cases": cases}


def ref_mps(ctx: Ctx) -> dict:
    net = load_network(ctx, "mps_mpo_L100_chi64_D5")
    if net is None:
        return {"skipped": "needs --networks with mps_mpo_L100_chi64_D5.json"}
    if ctx.quick:
        return {"skipped": "not run with --quick"}
    inputs, output, sd = net
    arrays = scaled_arrays(inputs, sd, seed=3)
    res = network_case(
        ctx, "REF-mps_mpo", "mps_mpo_L100_chi64_D5.json (MPS overlap)", inputs, output, sd, arrays
    )
    return {"cases": [res]}


PATH_ONLY = [
    # (file stem, settings in a full run, settings with --quick)
    ("peps_cluster_r2_D10_a", ("greedy", "auto", "hyper"), ("greedy", "auto")),
    ("rand_50_5_a", ("greedy", "auto", "hyper"), ("greedy",)),
    ("randreg_200_3_a", ("greedy", "auto", "hyper"), ("greedy",)),
    ("sycamore_n53_m20_s0_e0_pABCDCDAB", ("greedy", "auto", "hyper"), ("greedy",)),
    ("cubic_6x6x10", ("greedy", "auto", "hyper"), ("greedy",)),
    ("qucirc_rrzz_n56_d13", ("greedy", "auto", "hyper"), ("greedy",)),
]


def paths(ctx: Ctx) -> dict:
    """Path quality only (nothing runs): tenloom's plan vs cotengra with the same setting."""
    import tenloom as tl

    P = ctx.peers
    if ctx.networks is None:
        return {"skipped": "needs --networks"}
    rows = []
    for stem, full, quick in PATH_ONLY:
        net = load_network(ctx, stem)
        if net is None:
            rows.append({"network": stem, "skipped": "file not found"})
            continue
        inputs, output, sd0 = net
        ins, out, lab = int_labels(inputs, output)
        sd = {lab[k]: v for k, v in sd0.items() if k in lab}
        row: dict = {"network": stem, "tensors": len(ins), "labels": len(sd), "settings": {}}
        gst, _ = greedy_stats(ctx, ins, out, sd)
        row["opt_einsum_greedy"] = gst
        print(
            f"  [PATHS] {stem}: {len(ins)} tensors; opt_einsum greedy "
            f"{gst.get('log10_cost', float('nan')):.2f}",
            flush=True,
        )
        for setting in quick if ctx.quick else full:
            r: dict = {}
            try:
                quiesce()
                seed_all(0)
                t0 = time.perf_counter()
                tree = peer_tree(P.ctg, ins, out, sd, setting)
                el = time.perf_counter() - t0
                r["cotengra"] = tree_stats(tree) | {"search_s": el}
            except Exception as e:  # noqa: BLE001
                r["cotengra"] = {"error": f"{type(e).__name__}: {e}"[:300]}
            try:
                quiesce()
                seed_all(0)
                phs = [tl.placeholder(tuple(sd[x] for x in t)) for t in ins]
                argv: list = []
                for p, t in zip(phs, ins):
                    argv += [p, list(t)]
                t_ = tl.einsum(*argv, list(out))
                st, _, _ = tenloom_plan([t_], tenloom_setting(setting))
                st.pop("pass_stats", None)
                r["tenloom"] = st
            except Exception as e:  # noqa: BLE001
                r["tenloom"] = {"error": f"{type(e).__name__}: {e}"[:300]}
            row["settings"][setting] = r
            c, t = r["cotengra"], r["tenloom"]
            print(
                f"    {setting:<7} cotengra {c.get('log10_cost', float('nan')):6.2f} "
                f"(w {c.get('log2_width', float('nan')):.0f}, {c.get('search_s', 0):.1f} s)   "
                f"tenloom {t.get('log10_cost', float('nan')):6.2f} "
                f"(w {t.get('log2_width', float('nan')):.0f}, {t.get('pipeline_s', 0):.1f} s)"
                + (f"  {t.get('error', '')}" if "error" in t else ""),
                flush=True,
            )
        rows.append(row)
    return {"networks": rows, "hyper_setting": HYPER}


WORKLOADS: dict[str, tuple[str, Callable[[Ctx], dict]]] = {
    "W1": ("randreg n=60 D=4", w1),
    "W2": ("MPS/MPO expectation built site by site", w2),
    "W3": ("lattice 6x6 D=6", w3),
    "W4": ("Sycamore m10 amplitude", w4),
    "W5": ("matrix chain and batched matmul", w5),
    "W6": ("rtree_100", w6),
    "W7": ("hyper network with self-loops and lone indices", w7),
    "W9": ("2000-op elementwise chain", w9),
    "REF": ("reference network mps_mpo_L100 (run)", ref_mps),
    "PATHS": ("path quality on reference networks (no execution)", paths),
}


# ---------------------------------------------------------------------------------------------
# report


def fmt_ratio(x) -> str:
    if x is None:
        return "-"
    return f"{x:.2f}"


def fmt_ms(x) -> str:
    if x is None:
        return "-"
    ms = x * 1e3
    if ms >= 100:
        return f"{ms:.0f}"
    if ms >= 1:
        return f"{ms:.2f}"
    return f"{ms:.3f}"


def path_cell(path: dict, key: str) -> str:
    p = path.get(key) or {}
    if "log10_cost" not in p:
        return "-"
    w = p.get("log2_width")
    return f"{p['log10_cost']:.2f}" + (f" / {w:.0f}" if w is not None else "")


def markdown(results: dict, meta: dict, command: str, trace: dict | None) -> str:
    L: list[str] = []
    L.append("## Benchmarks: tenloom vs peers (generated by `benchmarks/run.py`)")
    L.append("")
    L.append("Command:")
    L.append("")
    L.append("```bash")
    L.append(command)
    L.append("```")
    L.append("")
    blas = meta["blas"]
    pools = blas.get("pools")
    kern = (
        ", ".join(f"{p['internal_api']} {p['architecture']} x{p['num_threads']}" for p in pools)
        if isinstance(pools, list)
        else str(pools)
    )
    v = meta["versions"]
    L.append(
        f"Machine: {meta['cpus']} CPUs, {meta['platform']}; BLAS: {kern}; measured GEMM peak "
        f"{meta['gemm_peak_gflops']['float64']:.0f} GFLOP/s float64, "
        f"{meta['gemm_peak_gflops']['float32']:.0f} float32 at the start, "
        f"{meta['gemm_peak_gflops_at_end']['float64']:.0f} float64 at the end (this shared "
        "machine's speed drifts by up to 2x over minutes; compare ratios, not times). "
        + ", ".join(f"{k} {val}" for k, val in v.items())
        + f". {meta['repeats']} timed samples after one warm-up (calls under 10 ms timed in "
        f"loops of about 20 ms); medians. Run at {meta['date']}, "
        f"took {meta['total_s'] / 60:.1f} min."
    )
    L.append("")
    L.append(
        "Ratios are tenloom's median run time / the peer's (below 1: tenloom is faster). "
        "*best peer* is the fastest of all peers, *best NumPy* the fastest NumPy-based one "
        "(numpy, opt_einsum, cotengra, numexpr), *jax* the fastest `jax.jit` variant; *vs same "
        "path* compares with opt_einsum running tenloom's own pairwise order, i.e. execution "
        "alone (cotengra's `auto` search is random: the same setting gives orders 0.5 apart in "
        "log10 cost on W1 from run to run, so the other ratios include search luck). Compile is "
        "the first call minus the median (tenloom: all passes incl. the path search; jax: "
        "tracing + XLA). Path cost: log10 multiply-adds / log2 largest intermediate, tenloom's "
        "plan vs cotengra with the same setting vs opt_einsum greedy. GFLOP/s from the plan's "
        "flops (2 per multiply-add, 8 per complex one)."
    )
    L.append("")
    L.append("![ratios](benchmarks_ratios.png)")
    L.append("")
    L.append("### Summary")
    L.append("")
    L.append(
        "| case | tenloom ms | compile ms | vs best peer | vs best NumPy | vs jax.jit | "
        "vs same path | path ours | path cotengra | path greedy | GFLOP/s (% peak) |"
    )
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    skipped = []
    for wid, res in results.items():
        if wid == "PATHS":
            continue
        if "skipped" in res or "error" in res:
            skipped.append((wid, res.get("skipped") or res.get("error")))
            continue
        for c in res["cases"]:
            r = c["ratios"]
            t = c["peers"].get("tenloom", {})
            g = c["gflops"].get("tenloom")
            peak = c.get("gemm_peak_gflops")
            gcell = (
                "-"
                if g is None
                else (f"{g:.1f} ({100 * g / peak:.0f}%)" if peak and c["path"] else f"{g:.2f}")
            )
            best = f"{fmt_ratio(r.get('vs_best_peer'))} ({r.get('best_peer')})" if r else "-"
            bnp = f"{fmt_ratio(r.get('vs_best_numpy'))} ({r.get('best_numpy_peer')})" if r else "-"
            L.append(
                f"| {c['case']}: {c['title']} | {fmt_ms(t.get('median_s'))} | "
                f"{fmt_ms(t.get('compile_s'))} | {best} | {bnp} | {fmt_ratio(r.get('vs_jax'))} | "
                f"{fmt_ratio(r.get('vs_same_path'))} | "
                f"{path_cell(c['path'], 'tenloom')} | {path_cell(c['path'], 'cotengra')} | "
                f"{path_cell(c['path'], 'opt_einsum_greedy')} | {gcell} |"
            )
    for wid, why in skipped:
        L.append(f"| {wid}: {WORKLOADS[wid][0]} | skipped: {why} | | | | | | | | | |")
    L.append("")
    for wid, res in results.items():
        if wid == "PATHS" or "cases" not in res:
            continue
        for c in res["cases"]:
            L.append(f"### {c['case']}: {c['title']}")
            L.append("")
            info = c.get("info") or {}
            bits = [f"{k}={val}" for k, val in info.items() if not isinstance(val, dict)]
            t = c["peers"].get("tenloom", {})
            if "trace_s" in t:
                bits.append(f"tenloom trace {fmt_ms(t['trace_s'])} ms")
            if bits:
                L.append(", ".join(bits))
                L.append("")
            L.append(
                "| peer | median ms | compile / search ms | tenloom / peer | GFLOP/s | "
                "peak MB (tracemalloc) | rel. err vs tenloom |"
            )
            L.append("|---|---|---|---|---|---|---|")
            for name, e in c["peers"].items():
                if "median_s" not in e:
                    why = e.get("skipped") or e.get("error")
                    L.append(
                        f"| {name} | {'skipped' if 'skipped' in e else 'error'}: "
                        f"{str(why)[:120]} | | | | | |"
                    )
                    continue
                comp = e.get("compile_s", e.get("search_s"))
                ratio = (c["ratios"].get("per_peer") or {}).get(name)
                gf = c["gflops"].get(name)
                pk = e.get("peak_traced_bytes")
                err = e.get("rel_err_vs_tenloom")
                L.append(
                    f"| {name} | {fmt_ms(e['median_s'])} | {fmt_ms(comp)} | {fmt_ratio(ratio)} | "
                    f"{'-' if gf is None else f'{gf:.2f}'} | "
                    f"{'-' if pk is None else f'{pk / 2**20:.1f}'} | "
                    f"{'-' if err is None else f'{err:.1e}'} |"
                )
            L.append("")
    pq = results.get("PATHS")
    if pq and "networks" in pq:
        L.append("### Path quality (no execution)")
        L.append("")
        L.append(
            "log10 multiply-adds / log2 largest intermediate, and search time, tenloom's plan "
            "vs cotengra with the same setting. *auto* is cotengra's default preset (and "
            "tenloom's default), *hyper* a small fixed budget: "
            f"`{json.dumps(pq['hyper_setting'])}`. Published figures from the networks' "
            "README in the last column."
        )
        L.append("")
        L.append(
            "| network | tensors | opt_einsum greedy | setting | tenloom | cotengra | "
            "tenloom s | cotengra s | published (greedy / hyper) |"
        )
        L.append("|---|---|---|---|---|---|---|---|---|")
        for row in pq["networks"]:
            if "skipped" in row:
                L.append(f"| {row['network']} | skipped: {row['skipped']} | | | | | | | |")
                continue
            pub = PUBLISHED.get(row["network"], "")
            first = True
            for setting, r in row["settings"].items():
                t, c = r["tenloom"], r["cotengra"]
                L.append(
                    f"| {row['network'] if first else ''} | {row['tensors'] if first else ''} | "
                    f"{path_cell(row, 'opt_einsum_greedy') if first else ''} | {setting} | "
                    f"{path_cell(r, 'tenloom') if 'error' not in t else t['error'][:80]} | "
                    f"{path_cell(r, 'cotengra') if 'error' not in c else c['error'][:80]} | "
                    f"{t.get('pipeline_s', float('nan')):.1f} | "
                    f"{c.get('search_s', float('nan')):.1f} | {pub if first else ''} |"
                )
                first = False
        L.append("")
    slower = []
    for res in results.values():
        for c in res.get("cases", []):
            r = c["ratios"]
            if r and r.get("vs_best_peer") and r["vs_best_peer"] > 1.05:
                slower.append((r["vs_best_peer"], c["case"], r["best_peer"]))
    if slower:
        L.append("### Where tenloom is slower than the best peer (ratio > 1.05)")
        L.append("")
        for ratio, case, peer in sorted(slower, reverse=True):
            L.append(f"- {case}: {ratio:.2f}x the time of {peer}")
        L.append("")
    if trace:
        L.append("### Per-node overheads (`benchmarks/trace_overhead.py`)")
        L.append("")
        L.append("| figure | value |")
        L.append("|---|---|")
        for k, val in trace.items():
            L.append(f"| {k} | {val:.2f} |" if isinstance(val, float) else f"| {k} | {val} |")
        L.append("")
    return "\n".join(L)


PUBLISHED = {
    "cubic_6x6x10": "26.85 / 15.93",
    "peps_cluster_r2_D10_a": "14.92 / 11.17",
    "randreg_200_3_a": "16.48 / 11.77",
    "rand_50_5_a": "21.66 / 16.05",
    "qucirc_rrzz_n56_d13": "35.22 / 20.64",
    "sycamore_n53_m20_s0_e0_pABCDCDAB": "21.78 / 18.56",
}


def plot(results: dict, path: pathlib.Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    series: dict[str, list] = {
        "vs best peer": [],
        "vs best NumPy peer": [],
        "vs jax.jit": [],
        "vs opt_einsum on tenloom's path": [],
    }
    labels = []
    for res in results.values():
        for c in res.get("cases", []):
            r = c["ratios"]
            if not r:
                continue
            labels.append(c["case"])
            series["vs best peer"].append(r.get("vs_best_peer") or np.nan)
            series["vs best NumPy peer"].append(r.get("vs_best_numpy") or np.nan)
            series["vs jax.jit"].append(r.get("vs_jax") or np.nan)
            series["vs opt_einsum on tenloom's path"].append(r.get("vs_same_path") or np.nan)
    if not labels:
        return False
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(labels) + 2), 4.8))
    x = np.arange(len(labels))
    wbar = 0.2
    for k, (name, vals) in enumerate(series.items()):
        bars = ax.bar(x + (k - 1.5) * wbar, vals, wbar, label=name)
        for rect, val in zip(bars, vals):
            if np.isfinite(val):
                ax.annotate(
                    f"{val:.2g}",
                    (rect.get_x() + rect.get_width() / 2, val),
                    ha="center",
                    va="bottom",
                    fontsize=6,
                    rotation=90,
                )
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=30, ha="right")
    ax.set_ylabel("run time tenloom / peer (log; < 1 = tenloom faster)")
    ax.set_title("tenloom run-time ratios (median of repeated calls, same arrays, CPU float64)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_docs(results: dict, meta: dict, command: str, out_dir: pathlib.Path) -> None:
    trace_file = out_dir / "trace_overhead.json"
    trace = json.loads(trace_file.read_text()) if trace_file.exists() else None
    section = markdown(results, meta, command, trace)
    plot(results, PLOT)
    block = f"{BEGIN}\n{section}\n{END}"
    if DOCS.exists():
        text = DOCS.read_text()
        if BEGIN in text and END in text:
            pre, rest = text.split(BEGIN, 1)
            _, post = rest.split(END, 1)
            text = pre + block + post
        else:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
    else:
        text = (
            "# Benchmarks\n\n"
            "What is measured and against whom: `/work/shared/BENCHMARKS.md` (workloads W1-W9, "
            "peers). The section below is regenerated by `benchmarks/run.py`; text outside the "
            "markers is kept.\n\n" + block + "\n"
        )
    DOCS.parent.mkdir(exist_ok=True)
    DOCS.write_text(text)


# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--networks", help="folder of reference networks (cotengra json, qsim)")
    p.add_argument("--quick", action="store_true", help="small sizes, 3 repeats, no docs")
    p.add_argument("--only", help="comma-separated workload ids: " + ",".join(WORKLOADS))
    p.add_argument("--repeats", type=int, default=None, help="timed calls (default 5; quick 3)")
    p.add_argument("--out", help="results folder (default benchmarks/results[/quick])")
    p.add_argument(
        "--docs",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write docs/benchmarks.md + plot (default: on unless --quick/--only)",
    )
    p.add_argument("--no-memory", action="store_true", help="skip the tracemalloc peak runs")
    p.add_argument("--verbose", action="store_true", help="print peers' tracebacks")
    args = p.parse_args(argv)
    if args.repeats is None:
        args.repeats = 3 if args.quick else 5
    only = [w.strip().upper() for w in args.only.split(",")] if args.only else list(WORKLOADS)
    for w in only:
        if w not in WORKLOADS:
            p.error(f"unknown workload {w!r}; valid: {', '.join(WORKLOADS)}")
    out_dir = (
        pathlib.Path(args.out)
        if args.out
        else (HERE / "results" / "quick" if args.quick else HERE / "results")
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    write_docs_flag = args.docs if args.docs is not None else (not args.quick and not args.only)

    t_start = time.perf_counter()
    peers = Peers()
    ctx = Ctx(args, peers)
    ctx.peak = gemm_peak(1024 if args.quick else 2048)
    meta = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "versions": peers.versions(),
        "blas": blas_info(),
        "gemm_peak_gflops": ctx.peak,
        "repeats": args.repeats,
        "quick": args.quick,
        "peer_import_errors": peers.errors,
        "argv": sys.argv,
    }
    if peers.torch is not None:
        meta["torch_threads"] = peers.torch.get_num_threads()
    if meta["blas"]["OPENBLAS_CORETYPE"]:
        print("note: OPENBLAS_CORETYPE is set; numpy's GEMM runs an older kernel (see --help)")
    print(
        f"GEMM peak: {ctx.peak['float64']:.1f} GFLOP/s float64, {ctx.peak['float32']:.1f} float32",
        flush=True,
    )
    results: dict[str, dict] = {}
    for wid in only:
        title, fn = WORKLOADS[wid]
        print(f"== {wid}: {title}", flush=True)
        t0 = time.perf_counter()
        load0 = os.getloadavg()
        try:
            res = fn(ctx)
        except Exception as e:  # noqa: BLE001 - a broken workload is reported, others run
            traceback.print_exc()
            res = {"error": f"{type(e).__name__}: {e}"[:500]}
        res = {
            "workload": wid,
            "title": title,
            "elapsed_s": time.perf_counter() - t0,
            "loadavg_before_after": [load0, os.getloadavg()],
            **res,
            "meta": meta,
        }
        if "skipped" in res:
            print(f"  skipped: {res['skipped']}", flush=True)
        results[wid] = res
        (out_dir / f"{wid}.json").write_text(json.dumps(res, indent=1, default=_jsonable) + "\n")
    meta["total_s"] = time.perf_counter() - t_start
    meta["gemm_peak_gflops_at_end"] = gemm_peak(1024 if args.quick else 2048)
    for wid, res in results.items():  # again, with the run's final metadata
        (out_dir / f"{wid}.json").write_text(json.dumps(res, indent=1, default=_jsonable) + "\n")
    if write_docs_flag:
        command = " ".join(
            ["env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE"]
            * (not meta["blas"]["OPENBLAS_CORETYPE"])
            + ["python benchmarks/run.py", *sys.argv[1:]]
        )
        write_docs(results, meta, command, out_dir)
        print(f"wrote {DOCS} and {PLOT}")
    print(f"total {meta['total_s']:.0f} s; results in {out_dir}")
    if ctx.mismatches:
        print("MISMATCHES:\n  " + "\n  ".join(ctx.mismatches))
    assert not ctx.mismatches, f"{len(ctx.mismatches)} results differ from tenloom by > {RTOL}"
    return 0


if __name__ == "__main__":
    sys.exit(main())
