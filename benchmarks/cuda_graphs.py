"""issue 23: CUDA-graph capture and replay against step-by-step runs, jax.jit and torch.

    python benchmarks/cuda_graphs.py [--repeats 7] [--out benchmarks/results/cuda_graphs.json]

On one GPU, in one process: the closed lattice 8x8, D=6, float32 (cotengra's
``lattice_equation``, seed 1; 64 tensors), its value alone ("forward") and its value with the
gradient with respect to all 64 tensors ("value+grad"):

- tenloom ``evaluate`` of the lazy tensors (the tensors are constants, bound once), to_host=False,
  with cuda_graphs=True (captured on the second run, replayed after) and False;
- tenloom ``tl.compile`` with the 64 tensors as placeholders, called with CuPy arrays (each call
  copies them into the captured input buffers), to_host=False, captured and not;
- jax.jit of cotengra's tree (tenloom's "auto" search budget: benchmarks/peers.py
  ``peer_tree``) and ``jax.value_and_grad`` of it, on device arrays, at matmul precision
  "highest" (float32, as tenloom and torch compute; ``--jax-default`` adds JAX's default, which
  lets the GPU use TF32);
- torch on CUDA along the same tree, autograd for the gradient.

and a sliced run: the lattice 8x8 D=6 float32 forward under a memory limit, captured slices
against step-by-step ones. Each timing is the median of --repeats loops of about 50 ms after a
warm-up of three calls, each call waited for (the device synchronized). Writes a JSON of the
figures and prints a table.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

import numpy as np

import tenloom as tl

sys.path.insert(0, str(pathlib.Path(__file__).parent))


def lattice(n=8, d=6, dtype="float32", seed=1):
    import cotengra as ctg

    inputs, output, shapes, _ = ctg.utils.lattice_equation([n, n], d_min=d, d_max=d, seed=seed)
    rng = np.random.default_rng(seed)
    arrays = [(rng.standard_normal(s) / np.prod(s) ** 0.25).astype(dtype) for s in shapes]
    return inputs, output, arrays


def log(*args) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]", *args, flush=True)


def timed(what: str, fn, sync, repeats: int) -> float:
    """Median seconds per call (loops of about 50 ms, each call synchronized)."""
    for _ in range(3):
        fn()
        sync()
    t0 = time.perf_counter()
    fn()
    sync()
    n = max(1, int(0.05 / max(time.perf_counter() - t0, 1e-6)))
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
            sync()
        ts.append((time.perf_counter() - t0) / n)
    log(f"{what}: {statistics.median(ts) * 1e3:.3f} ms")
    return statistics.median(ts)


def graph_gpu_ms(plan, repeats: int = 10) -> float:
    """GPU time of one replay's graphs alone (their inputs as the last call left them)."""
    import cupy as cp

    st = plan.program.captured
    stream = st.dev.stream
    ts = []
    for _ in range(repeats):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(stream)
        for g in st.graphs:
            if g is not None:
                g.launch(stream)
        b.record(stream)
        b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b) / 1e3)
    return statistics.median(ts)


def network(inputs, output, ts):
    labels: dict = {}
    args: list = []
    for t, term in zip(ts, inputs):
        args += [t, [labels.setdefault(x, len(labels)) for x in term]]
    return tl.einsum(*args, [labels[x] for x in output])


def bench_tenloom(inputs, output, arrays, repeats, sync):
    import cupy as cp
    from peers import fixed_path

    out = {}
    # the peers' tree (jax.jit and torch contract along it) for the compiled rows: tenloom's
    # forward and the gradient's pre-pass take it, so those rows run the peers' path. The
    # evaluate rows run tenloom's own trees (labelled so): evaluate never caches an optimizer
    # object, and would run the passes on every call
    path = fixed_path(_tree(inputs, output, arrays).get_path())
    ts = [tl.asarray(a) for a in arrays]
    value = network(inputs, output, ts)
    # evaluate's rows: tenloom's own trees (an optimizer object such as ``path`` is never
    # cached by evaluate, whose every call would then run the passes again); compile's rows
    # run the peers' path
    grads = tl.grad(value, ts)
    for on in (True, False):
        tag = "captured" if on else "uncaptured"
        out[f"evaluate_forward_{tag}"] = timed(
            f"evaluate_forward_{tag}",
            lambda: tl.evaluate(value, device="cuda:0", to_host=False, cuda_graphs=on),
            sync,
            repeats,
        )
        out[f"evaluate_value_grad_{tag}"] = timed(
            f"evaluate_value_grad_{tag}",
            lambda: tl.evaluate(value, *grads, device="cuda:0", to_host=False, cuda_graphs=on),
            sync,
            repeats,
        )
    phs = [tl.placeholder(a.shape, "float32", name=f"t{k}") for k, a in enumerate(arrays)]
    pv = network(inputs, output, phs)
    pg = tl.grad(pv, phs, optimize=path)
    dev = [cp.asarray(a) for a in arrays]
    for on in (True, False):
        tag = "captured" if on else "uncaptured"
        opts = dict(device="cuda:0", to_host=False, cuda_graphs=on, optimize=path)
        fwd = tl.compile([pv], phs, **opts)
        both = tl.compile([pv, *pg], phs, **opts)
        out[f"compile_forward_{tag}"] = timed(
            f"compile_forward_{tag}", lambda: fwd(*dev), sync, repeats
        )
        out[f"compile_value_grad_{tag}"] = timed(
            f"compile_value_grad_{tag}", lambda: both(*dev), sync, repeats
        )
        if on:
            out["compile_forward_graph_gpu"] = graph_gpu_ms(fwd)
            out["compile_value_grad_graph_gpu"] = graph_gpu_ms(both)
            out["compile_value_grad_segments"] = both.cuda_graphs
            v = both(*dev)
            out["value"] = float(cp.asnumpy(v[0]))
            out["grad_norm"] = float(np.sqrt(sum(float(cp.vdot(g, g).real) for g in v[1:])))
    # the compiled program's figures (the peers' path)
    report = tl.explain(value, *tl.grad(value, ts, optimize=path), device="cuda:0", optimize=path)
    out["explain_captured_segments"] = report.captured_segments
    out["explain_lines"] = report.cuda_graphs
    out["flops_value_grad"] = report.after.flops
    out["flops_forward"] = tl.explain(value, device="cuda:0", optimize=path).after.flops
    return out


def _tree(inputs, output, arrays):
    import cotengra as ctg
    from peers import peer_tree

    sizes = {}
    for t, a in zip(inputs, arrays):
        sizes.update(zip(t, a.shape))
    return peer_tree(ctg, inputs, output, sizes, "auto")


def bench_jax(inputs, output, arrays, repeats, precision: str = "highest"):
    """jax.jit at JAX's matmul ``precision``: "highest" is float32 throughout (tenloom's and
    torch's arithmetic here), "default" lets XLA use TF32 on the GPU."""
    import jax
    import jax.numpy as jnp

    tree = _tree(inputs, output, arrays)

    def f(*xs):
        with jax.default_matmul_precision(precision):
            return tree.contract(list(xs), backend="jax")

    fj = jax.jit(f)
    gj = jax.jit(jax.value_and_grad(f, argnums=tuple(range(len(arrays)))))
    xs = [jnp.asarray(a) for a in arrays]
    out = {
        "forward": timed("jax forward", lambda: fj(*xs).block_until_ready(), lambda: None, repeats),
        "value_grad": timed(
            "jax value+grad", lambda: jax.block_until_ready(gj(*xs)), lambda: None, repeats
        ),
    }
    v, g = gj(*xs)
    out["value"] = float(v)
    out["grad_norm"] = float(np.sqrt(sum(float(jnp.vdot(x, x)) for x in g)))
    out["flops_tree"] = float(tree.contraction_cost()) * 2
    return out


def bench_torch(inputs, output, arrays, repeats):
    import torch

    tree = _tree(inputs, output, arrays)
    xs = [torch.tensor(a, device="cuda", requires_grad=True) for a in arrays]

    def fwd():
        with torch.no_grad():
            return tree.contract(xs, backend="torch")

    def both():
        for x in xs:
            x.grad = None
        v = tree.contract(xs, backend="torch")
        v.backward()
        return v

    sync = torch.cuda.synchronize
    out = {
        "forward": timed("torch forward", fwd, sync, repeats),
        "value_grad": timed("torch value+grad", both, sync, repeats),
    }
    out["value"] = float(both().detach().cpu())
    out["grad_norm"] = float(np.sqrt(sum(float((x.grad * x.grad).sum().cpu()) for x in xs)))
    return out


def bench_sliced(repeats, sync, limit: str):
    from tenloom.runtime.sliced import LAST_RUN

    inputs, output, arrays = lattice(8, 6, "float32", seed=1)
    value = network(inputs, output, [tl.asarray(a) for a in arrays])
    out = {"limit": limit}
    for on in (True, False):
        tag = "captured" if on else "uncaptured"
        out[tag] = timed(
            f"sliced {tag}",
            lambda: tl.evaluate(
                value, device="cuda:0", to_host=False, memory_limit=limit, cuda_graphs=on
            ),
            sync,
            max(3, repeats // 2),
        )
        out[f"slices_{tag}"] = LAST_RUN.slices[0]
    a = tl.evaluate(value, device="cuda:0", memory_limit=limit)[0]
    b = tl.evaluate(value, device="cuda:0", memory_limit=limit, cuda_graphs=False)[0]
    out["rel_diff"] = float(abs(a - b) / max(abs(b), 1e-30))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default="benchmarks/results/cuda_graphs.json")
    ap.add_argument("--limit", default="1 MB")
    ap.add_argument(
        "--jax-default", action="store_true", help="also jax.jit at its default (TF32) precision"
    )
    args = ap.parse_args()
    import cupy as cp

    sync = cp.cuda.Device(0).synchronize
    inputs, output, arrays = lattice()
    res = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}
    log("start")
    res["tenloom"] = bench_tenloom(inputs, output, arrays, args.repeats, sync)
    try:
        res["jax"] = bench_jax(inputs, output, arrays, args.repeats, "highest")
        if args.jax_default:
            res["jax_default"] = bench_jax(inputs, output, arrays, args.repeats, "default")
    except Exception as e:  # noqa: BLE001 - reported, the rest still runs
        res["jax"] = {"error": f"{type(e).__name__}: {e}"}
    try:
        res["torch"] = bench_torch(inputs, output, arrays, args.repeats)
    except Exception as e:  # noqa: BLE001
        res["torch"] = {"error": f"{type(e).__name__}: {e}"}
    t, j, p = res["tenloom"], res["jax"], res["torch"]
    print(f"device: {res['device']}")
    print("lattice 8x8 D=6 float32 (64 tensors), ms per call:")
    print(f"{'':34}{'forward':>10}{'value+grad':>12}{'vs jax f':>10}{'vs jax vg':>10}")
    rows = [
        (
            "evaluate (own trees), captured",
            "evaluate_forward_captured",
            "evaluate_value_grad_captured",
        ),
        (
            "evaluate (own trees), step by step",
            "evaluate_forward_uncaptured",
            "evaluate_value_grad_uncaptured",
        ),
        (
            "compile (peers' path), captured",
            "compile_forward_captured",
            "compile_value_grad_captured",
        ),
        (
            "compile (peers' path), step by step",
            "compile_forward_uncaptured",
            "compile_value_grad_uncaptured",
        ),
    ]
    jf, jg = j.get("forward"), j.get("value_grad")
    for name, f, g in rows:
        rf = f"{t[f] / jf:.2f}x" if jf else "-"
        rg = f"{t[g] / jg:.2f}x" if jg else "-"
        print(f"{name:34}{t[f] * 1e3:>10.3f}{t[g] * 1e3:>12.3f}{rf:>10}{rg:>10}")
    print(
        f"{'  of which GPU time in the graphs':34}{t['compile_forward_graph_gpu'] * 1e3:>10.3f}"
        f"{t['compile_value_grad_graph_gpu'] * 1e3:>12.3f}"
    )
    peers = [("jax.jit (highest)", j), ("torch", p)]
    if "jax_default" in res:
        peers.insert(1, ("jax.jit (default, TF32)", res["jax_default"]))
    for name, r in peers:
        if "error" in r:
            print(f"{name:34}{r['error']}")
        else:
            print(f"{name:34}{r['forward'] * 1e3:>10.3f}{r['value_grad'] * 1e3:>12.3f}")
    print(f"values: tenloom {t['value']:.6g} jax {j.get('value')} torch {p.get('value')}")
    print(
        f"grad norms: tenloom {t['grad_norm']:.6g} jax {j.get('grad_norm')} "
        f"torch {p.get('grad_norm')}"
    )
    print(f"explain: {t['explain_captured_segments']} captured segment(s): {t['explain_lines']}")
    # the sliced part last, after the table is out (it is the slowest; a run cut at its time
    # limit keeps the rest)
    pathlib.Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    res["sliced"] = bench_sliced(args.repeats, sync, args.limit)
    pathlib.Path(args.out).write_text(json.dumps(res, indent=1, default=str))
    s = res["sliced"]
    print(
        f"sliced forward, memory_limit={s['limit']!r} ({s['slices_captured']} slices): captured "
        f"{s['captured'] * 1e3:.2f} ms, step by step {s['uncaptured'] * 1e3:.2f} ms "
        f"({s['uncaptured'] / s['captured']:.2f}x), rel diff {s['rel_diff']:.2g}"
    )


if __name__ == "__main__":
    main()
