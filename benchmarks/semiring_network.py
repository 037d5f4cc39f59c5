"""Max-plus contractions: tenloom against the bare ``tropical_gemm`` library, in one process
(issue 24).

1. The spin-glass network of examples/spin_glass.py (n = 100 spins on a random 3-regular graph,
   +-J couplings and random fields, float32): one 2 x 2 tensor per edge and one length-2 tensor
   per vertex, max-plus contracted to a scalar (minus the ground-state energy). The contraction
   tree is cotengra's (``HyperOptimizer`` with a fixed seed and trial count), found once; both
   sides contract over that same tree:

   - tenloom: the lazy ``tl.einsum(..., semiring="max_plus")`` compiled once with
     ``tl.compile(..., optimize=<the tree's path>)`` and called (steady state: no tracing,
     passes or search in the timed calls); ``--search`` lets tenloom search its own tree
     instead;
   - tropical_gemm pairwise, batched: the same path, each pairwise contraction as NumPy
     transposes/reshapes to (batch, M, K) x (batch, K, N) and one call of the library's
     batched entry point ``maxplus_matmul_batched_with_argmax`` (its fastest), labels no
     longer needed max-reduced first;
   - tropical_gemm pairwise, 2-D: the same with one ``maxplus_matmul_2d`` call per batch
     entry (the entry point its documentation lists);
   - tropical_gemm + NumPy small: the batched one, but the contractions with fewer than
     ``--small-gemm`` multiply-adds per batch entry, or with a batch, done by one NumPy
     broadcast-max.

   The four values must agree exactly (integer energies in float32), and tenloom's plan must
   cost the tree's flops (twice its multiply-adds) unless ``--search``.
2. The max-plus GEMM C[i, j] = max_k A[i, k] + B[k, j], 2048^3 float32: ``tl.matmul(a, b,
   semiring="max_plus")`` (compiled plan) against ``tropical_gemm``'s batched entry point
   (one matrix) and its ``maxplus_matmul_2d``; with ``--numpy-gemm`` also a NumPy
   broadcast-max loop over blocks of k (timed once: about 7 s here).

Rounds are interleaved (the order turns each round) after a warm-up; medians and minima are
printed with the ratio tenloom / peer (goal <= 1.1 against the fastest peer). The machine is
shared: read the medians.

    python -P benchmarks/semiring_network.py [--n 100] [--rounds 9] [--gemm 2048] [--json out]
    python -P benchmarks/semiring_network.py --n 160 --gemm 0     # a bigger network only
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import spin_glass  # noqa: E402
from peers import fixed_path  # noqa: E402

import tenloom as tl  # noqa: E402


def clock(f) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def contraction_path(inputs, output, sizes, seed: int = 0, repeats: int = 8):
    """A linear path (pairs of positions in the shrinking list, opt_einsum's format) from one
    cotengra hyper-optimizer run with fixed seed and trial count, and its tree: the same in
    every run (trials in one process, ``parallel=False``: in parallel they finish in any
    order, and the seeded search with them)."""
    import random

    import cotengra as ctg

    random.seed(seed)
    np.random.seed(seed)
    opt = ctg.HyperOptimizer(
        max_repeats=repeats, seed=seed, methods=["greedy"], progbar=False, parallel=False
    )
    tree = ctg.array_contract_tree(inputs, output, sizes, optimize=opt)
    return [tuple(int(x) for x in pair) for pair in tree.get_path()], tree


def _maxplus_batched(a: np.ndarray, b: np.ndarray, gemm) -> np.ndarray:
    """(batch, M, K) x (batch, K, N) -> (batch, M, N) by one ``gemm`` call per batch entry (the
    library reads C-contiguous arrays only: a Fortran-ordered one gives wrong numbers)."""
    out = np.empty((a.shape[0], a.shape[1], b.shape[2]), dtype=a.dtype)
    for t in range(a.shape[0]):
        out[t] = gemm(np.ascontiguousarray(a[t]), np.ascontiguousarray(b[t]))
    return out


def maxplus_stack(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(batch, M, K) x (batch, K, N) -> (batch, M, N) by one call of the library's batched
    entry point (``maxplus_matmul_batched_with_argmax``, float32 or its ``_f64``; the argmax
    indices dropped),
    its fastest: 0.28 s against the 2-D entry point's 0.36 s for one 2048^3 product here."""
    import tropical_gemm

    fn = tropical_gemm.maxplus_matmul_batched_with_argmax
    if a.dtype == np.float64:
        fn = tropical_gemm.maxplus_matmul_batched_with_argmax_f64
    c = fn(np.ascontiguousarray(a), np.ascontiguousarray(b))[0]
    return c.reshape(a.shape[0], a.shape[1], b.shape[2])


def _maxplus_numpy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(batch, M, K) x (batch, K, N) -> (batch, M, N) by one broadcast sum and max over K."""
    return np.max(a[:, :, :, None] + b[:, None, :, :], axis=2)


def pairwise(arrays, inputs, output, path, gemm=None, small_gemm: int = 0):
    """Max-plus contraction of the network over ``path``: labels on one operand only and
    needed nowhere else max-reduced, then each pair as a batched max-plus GEMM over
    (shared and still needed: batch; one side only: M or N; shared and done: K).
    ``gemm`` is a 2-D entry point called per batch entry, or None for the batched one
    (``maxplus_stack``); ``small_gemm`` > 0 sends contractions with a batch or with fewer
    multiply-adds per batch entry to NumPy instead."""
    tensors = [(np.asarray(a), list(s)) for a, s in zip(arrays, inputs)]
    count = Counter(label for _, s in tensors for label in s)
    count.update(output)

    def drop(a, s, labels):
        if not labels:
            return a, s
        return np.max(a, axis=tuple(s.index(x) for x in labels)), [x for x in s if x not in labels]

    def squeeze(a, s):  # the labels no other operand (nor the output) has
        lone = [x for x in s if count[x] == 1]
        for x in lone:
            count[x] -= 1
        return drop(a, s, lone)

    tensors = [squeeze(a, s) for a, s in tensors]
    for i, j in path:
        (a, la), (b, lb) = tensors[i], tensors[j]
        for k in sorted((i, j), reverse=True):
            tensors.pop(k)
        for label in la + lb:
            count[label] -= 1
        shared = [x for x in la if x in lb]
        batch = [x for x in shared if count[x] > 0]
        con = [x for x in shared if count[x] == 0]
        # labels of one side only and needed nowhere else: max-reduced before the GEMM
        a, la = drop(a, la, [x for x in la if x not in lb and count[x] == 0])
        b, lb = drop(b, lb, [x for x in lb if x not in la and count[x] == 0])
        left = [x for x in la if x not in lb]
        right = [x for x in lb if x not in la]
        dims = dict(zip(la, a.shape)) | dict(zip(lb, b.shape))

        def size(labels, dims=dims):
            return int(np.prod([dims[x] for x in labels], dtype=np.int64))

        nb, m, k, n = size(batch), size(left), size(con), size(right)
        am = a.transpose([la.index(x) for x in batch + left + con]).reshape(nb, m, k)
        bm = b.transpose([lb.index(x) for x in batch + con + right]).reshape(nb, k, n)
        if small_gemm and (nb > 1 or m * n * k < small_gemm):
            c = _maxplus_numpy(am, bm)
        elif gemm is None:
            c = maxplus_stack(am, bm)
        else:
            c = _maxplus_batched(am, bm, gemm)
        out_labels = batch + left + right
        for label in out_labels:
            count[label] += 1
        tensors.append((c.reshape([dims[x] for x in out_labels]), out_labels))
    (c, lc), *rest = tensors
    assert not rest, "the path left more than one tensor"
    return c.transpose([lc.index(x) for x in output])


def interleaved(cases: dict, rounds: int) -> dict[str, list[float]]:
    """Times of each case, one warm-up call each, then ``rounds`` rounds in an order that turns
    every round."""
    for f in cases.values():
        f()
    times: dict[str, list[float]] = {k: [] for k in cases}
    names = list(cases)
    for r in range(rounds):
        for k in names[r % len(names) :] + names[: r % len(names)]:
            times[k].append(clock(cases[k]))
    return times


def summarize(title: str, times: dict[str, list[float]], base: str) -> dict:
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n{title} (median / min of {len(times[base])} rounds, ms; ratio = tenloom / peer)")
    for k, v in times.items():
        ratio = med[base] / med[k]
        print(f"  {k:32s} {1e3 * med[k]:10.3f} {1e3 * min(v):10.3f}   ratio {ratio:6.3f}")
    return {k: {"median_s": med[k], "min_s": min(v), "times_s": v} for k, v in times.items()}


def network_benchmark(args) -> dict:
    import tropical_gemm

    edges, J, h = spin_glass.random_glass(args.n, args.seed, field=1.0)  # noqa: N806
    h = np.round(h)  # integer fields: every sum exact in float32, the results comparable bit
    vertex, edge, subs = spin_glass.network(edges, J, h, "float32", sign=-1.0)  # max of -H
    arrays = vertex + edge
    inputs = [tuple(s) for s in subs]
    sizes = {label: 2 for s in subs for label in s}
    t0 = time.perf_counter()
    path, tree = contraction_path(inputs, (), sizes, args.seed)
    t_search = time.perf_counter() - t0
    print(
        f"spin glass n = {args.n}: {len(arrays)} tensors, cotengra tree in {t_search:.1f} s: "
        f"{tree.contraction_cost():.4g} multiply-adds, width {tree.contraction_width():.0f}"
    )

    xs = [tl.placeholder(a.shape, a.dtype, name=f"t{k}") for k, a in enumerate(arrays)]
    value = tl.einsum(*[x for t, s in zip(xs, subs) for x in (t, s)], [], semiring="max_plus")
    opts = {"threads": args.threads}
    if not args.search:
        opts["optimize"] = fixed_path(path)
    t0 = time.perf_counter()
    plan = tl.compile(value, xs, **opts)
    t_compile = time.perf_counter() - t0
    report = tl.explain(value, **opts)
    print(f"tenloom: compiled in {t_compile:.2f} s; its plan: {report.after.flops:.4g} flops")
    if not args.search:  # the plan contracts over the given path
        assert report.after.flops == 2 * tree.contraction_cost(), report.after.flops

    gemm = tropical_gemm.maxplus_matmul_2d
    cases = {
        "tenloom": lambda: plan(*arrays)[0],
        "tropical_gemm pairwise, batched": lambda: pairwise(arrays, inputs, (), path),
        "tropical_gemm pairwise, 2-D": lambda: pairwise(arrays, inputs, (), path, gemm),
        "tropical_gemm + NumPy small": lambda: pairwise(
            arrays, inputs, (), path, small_gemm=args.small_gemm
        ),
    }
    results = {k: float(np.asarray(f())) for k, f in cases.items()}
    ground = -results["tenloom"]
    print(f"ground-state energy: {', '.join(f'{k} {-v:g}' for k, v in results.items())}")
    assert len(set(results.values())) == 1, results
    if args.n <= 20:
        assert ground == spin_glass.brute_force(edges, J, h)[0]
    times = interleaved(cases, args.rounds)
    out = summarize(f"spin-glass network n = {args.n}, float32", times, "tenloom")
    return {
        "n": args.n,
        "energy": ground,
        "compile_s": t_compile,
        "search_s": t_search,
        "multiply_adds": float(tree.contraction_cost()),
        "times": out,
    }


def numpy_maxplus_gemm(a: np.ndarray, b: np.ndarray, block: int = 8) -> np.ndarray:
    """max_k a[i, k] + b[k, j] by NumPy broadcasts over blocks of k (a reference, slow)."""
    c = np.full((a.shape[0], b.shape[1]), -np.inf, dtype=a.dtype)
    for k0 in range(0, a.shape[1], block):
        blk = a[:, k0 : k0 + block, None] + b[None, k0 : k0 + block, :]
        np.maximum(c, blk.max(axis=1), out=c)
    return c


def gemm_benchmark(args) -> dict:
    import tropical_gemm

    n = args.gemm
    rng = np.random.default_rng(args.seed)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    xa, xb = tl.placeholder(a.shape, a.dtype, name="a"), tl.placeholder(b.shape, b.dtype, name="b")
    plan = tl.compile(tl.matmul(xa, xb, semiring="max_plus"), [xa, xb], threads=args.threads)
    cases = {
        "tenloom": lambda: plan(a, b)[0],
        "tropical_gemm batched": lambda: maxplus_stack(a[None], b[None])[0],
        "tropical_gemm 2-D": lambda: tropical_gemm.maxplus_matmul_2d(a, b),
    }
    ref = cases["tropical_gemm 2-D"]()
    np.testing.assert_array_equal(cases["tropical_gemm batched"](), ref)
    np.testing.assert_array_equal(np.asarray(cases["tenloom"]()), ref)
    times = interleaved(cases, args.rounds)
    out = summarize(f"max-plus GEMM {n}^3, float32", times, "tenloom")
    if args.numpy_gemm:
        t = clock(lambda: np.testing.assert_array_equal(numpy_maxplus_gemm(a, b), ref))
        print(f"  {'NumPy broadcast-max loop (once)':32s} {1e3 * t:10.3f}")
        out["numpy"] = {"median_s": t, "min_s": t, "times_s": [t]}
    return {"n": n, "times": out}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100, help="spins (n * 3 even); 0 skips the network")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--gemm", type=int, default=2048, help="GEMM size; 0 skips the GEMM")
    p.add_argument("--threads", type=int, default=1, help="tenloom's threads=")
    p.add_argument("--small-gemm", type=int, default=4096)
    p.add_argument("--search", action="store_true", help="tenloom searches its own tree")
    p.add_argument("--numpy-gemm", action="store_true", help="also the NumPy GEMM reference")
    p.add_argument("--json", default=None, help="write the times here")
    args = p.parse_args(argv)
    out = {"args": vars(args)}
    if args.n:
        out["network"] = network_benchmark(args)
    if args.gemm:
        out["gemm"] = gemm_benchmark(args)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
