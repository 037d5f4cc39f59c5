"""Peer setup for a contraction network: labels and equations, the path search settings
shared by tenloom and cotengra, the costs of both sides' plans, and ``network_case`` (one network
timed on tenloom, cotengra, opt_einsum, numpy, jax and torch).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from harness import SAME_PATH_PEER, Case, Ctx, jsonable, seed_all

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


def int_labels(inputs, output):
    """Map arbitrary labels to 0..k-1 in order of first appearance."""
    lab: dict = {}
    for t in (*inputs, output):
        for x in t:
            lab.setdefault(x, len(lab))
    ins = [tuple(lab[x] for x in t) for t in inputs]
    out = tuple(lab[x] for x in output)
    return ins, out, lab


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


def fixed_path(path):
    """An ``optimize=`` callable (opt_einsum's path-optimizer protocol) that returns ``path``
    for the network it was made for: tenloom then runs the peers' tree."""

    def optimizer(inputs, output, size_dict, memory_limit=None):
        if len(inputs) != len(path) + 1:
            raise ValueError(f"fixed_path: {len(inputs)} inputs for a path of {len(path)} steps")
        return list(path)

    return optimizer


def peer_tree(ctg, ins, out, sd, setting):
    """cotengra's tree for the peers, with the search budget tenloom's ``setting`` has. For
    "auto" that is cotengra's own fast preset and the trees of tenloom's "auto" search at the
    effort a repeated evaluate (or a compiled plan) reaches (passes/contraction_order.py
    auto_trees): of those the peers get the one with the fewest multiply-adds (cotengra's own
    measure; tenloom's pass picks by multiply-adds plus GEMM operand copies)."""
    if setting != "auto":
        return ctg.array_contract_tree(ins, out, sd, optimize=make_optimizer(ctg, setting))
    from tenloom.passes.contraction_order import COMPILE_EFFORT, auto_trees

    trees = [ctg.array_contract_tree(ins, out, sd, optimize=ctg.AutoOptimizer())]
    trees += auto_trees(ins, out, sd, effort=COMPILE_EFFORT)
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
            k: {kk: jsonable(vv) for kk, vv in v.items()} for k, v in pctx.stats.items()
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
                return pos[id(node.attrs.constant.value)]
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
