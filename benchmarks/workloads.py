"""The workloads of ``run.py``: W1 - W9, REF and PATHS (see /work/shared/BENCHMARKS.md), and
the network builders other scripts share (the MPS/MPO expectation of W2, W7's network, W9's
chain).
"""

from __future__ import annotations

import functools
import json
import math
import operator
import time
from collections import Counter

import numpy as np
from harness import Case, Ctx, quiesce, seed_all
from peers import (
    HYPER,
    greedy_stats,
    int_labels,
    network_case,
    oe_equation,
    peer_tree,
    tenloom_plan,
    tenloom_setting,
    tree_stats,
)


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
