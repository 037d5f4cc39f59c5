"""W4 (Sycamore m10 amplitude, complex128) tree by tree, in one process: tenloom run along the
tree its "auto" search keeps and along cotengra's own trees, against cotengra's own contraction
(``tree.contract``) of its "auto" tree; with each tree's multiply-adds, elements written and
elements copied (passes/cost.py's walk) and its score under the current weights (issue 22).

    python -P benchmarks/w4_trees.py [--networks /work/shared/data/networks] [--repeats 3]

Each tree is forced on tenloom by standing in for the "auto" search (the rest of the pipeline
and the executor are tenloom's own); runs of one tree follow each other, so compare trees on
a quiet machine or alternate processes: a tree that writes 1.4e9 elements runs 3.9 s on a
quiet 2-core machine and 30-36 s while other processes use its memory bandwidth.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import statistics
import time

import numpy as np


def tree_parts(terms, out, sizes, ssa) -> tuple[int, int, int]:
    """(multiply-adds, elements written, elements copied) of contracting along ``ssa``, as
    passes/cost.py layout_cost walks it."""
    from tenloom.graph.ops.contract import pairwise_madds
    from tenloom.graph.ops.sliced import path_steps
    from tenloom.passes.eliminate_permutations import plan_contraction

    mem = [tuple(t) for t in terms]
    madds = written = copied = 0
    for i, j, ta, tb, keep in path_steps(terms, out, ssa):
        n_a, n_b = math.prod(sizes[x] for x in ta), math.prod(sizes[x] for x in tb)
        (batch, left, _, right), _, c = plan_contraction(
            ta, tb, keep, mem[i], mem[j], sizes, n_a, n_b
        )
        madds += pairwise_madds(ta, tb, keep, sizes)
        written += math.prod(sizes[x] for x in keep)
        copied += c
        mem.append(batch + left + right)
    return madds, written, copied


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", default="/work/shared/data/networks")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import cotengra as ctg
    import quimb.tensor as qtn
    from tenloom.passes import contraction_order as co
    from tenloom.passes import cost

    import tenloom as tl

    (qsim,) = sorted(pathlib.Path(args.networks).glob("circuit_n53_m10_*.qsim"))[:1]
    circ = qtn.Circuit.from_qsim_file(str(qsim))
    tn = circ.amplitude_tn("0" * circ.N)
    inputs, output, sd = tn.get_inputs_output_size_dict()
    arrays = [np.asarray(a, dtype=np.complex128) for a in tn.arrays]
    labels = {lab: i for i, lab in enumerate(sd)}
    operands = []
    for a, t in zip(arrays, inputs):
        operands += [tl.asarray(a), [labels[x] for x in t]]
    operands.append([labels[x] for x in output])

    # tenloom's own search, on the network as its passes hand it over
    seen: dict = {}
    search = co._auto_path

    def recording(terms, out, sizes, *a, **k):
        t0 = time.perf_counter()
        ssa, others = search(terms, out, sizes, *a, **k)
        seen.update(terms=terms, out=out, sizes=sizes, ssa=ssa, search_s=time.perf_counter() - t0)
        return ssa, others

    co._auto_path = recording
    try:
        tl.einsum(*operands).evaluate(cache_dir=False)
    finally:
        co._auto_path = search
    terms, out, sizes = seen["terms"], seen["out"], seen["sizes"]
    trees = {"tenloom auto": seen["ssa"]}
    for name, opt in (
        ("cotengra auto", "auto"),
        (
            "cotengra hyper combo",
            ctg.HyperOptimizer(max_repeats=32, minimize="combo", parallel=False, progbar=False),
        ),
    ):
        t = ctg.array_contract_tree(inputs, output, sd, optimize=opt)
        trees[name] = tuple(tuple(int(i) for i in p) for p in t.get_ssa_path())
    print(f"W4 {qsim.name}: tenloom's auto search {seen['search_s']:.1f} s")

    forced: dict = {}
    co_auto = co._auto_path
    co._auto_path = lambda *a, **k: (forced["ssa"], ())
    try:
        for name, ssa in trees.items():
            m, w, c = tree_parts(terms, out, sizes, ssa)
            score = {
                cx: cost.layout_cost(terms, out, sizes, ssa, complex_=cx) for cx in (False, True)
            }
            forced["ssa"] = ssa
            expr = tl.einsum(*operands)
            t0 = time.perf_counter()
            expr.evaluate(cache_dir=False)
            first = time.perf_counter() - t0
            ts = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                expr.evaluate(cache_dir=False)
                ts.append(time.perf_counter() - t0)
            print(
                f"  {name:22s} madds {m:.3g} written {w:.3g} copied {c:.3g} | score real "
                f"{score[False]:.3g} complex {score[True]:.3g} | tenloom first {first:.1f} s, "
                f"median {statistics.median(ts):.2f} s ({', '.join(f'{t:.2f}' for t in ts)})",
                flush=True,
            )
            tl.clear_caches()
    finally:
        co._auto_path = co_auto
    tree = ctg.ContractionTree.from_path(inputs, output, sd, ssa_path=trees["cotengra auto"])
    ts = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        tree.contract(arrays)
        ts.append(time.perf_counter() - t0)
    print(f"  cotengra tree.contract on its auto tree: median {statistics.median(ts):.2f} s")


if __name__ == "__main__":
    main()
