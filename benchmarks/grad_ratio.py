"""W8: the cost of a gradient relative to the forward pass, against JAX and torch.

    python benchmarks/grad_ratio.py [--repeats 5] [--quick] [--separate-bra]

For W3 (closed lattice 6x6, D=6, seed 1) and W2 as BENCHMARKS.md defines it (the MPS/MPO
expectation <psi|H|psi>, L=100, chi=64, MPO bond 5, seed 2, built site by site from separate
``tl.einsum`` calls, the bra and the ket the same tensors: 200 tensors, each MPS tensor read
twice; --quick uses L=40, chi=32), each framework evaluates the network value alone and then
the value with its gradient with respect to every tensor; reported is time(value_and_grad) /
time(forward) per framework (medians of --repeats runs after a warm-up, forward and value+grad
timed alternately, in one process on the same arrays), plus our backward flops from the cost
model. JAX and torch contract the same network along cotengra's tree, the shared MPS tensors
passed twice. --separate-bra adds the variant sessions 5 - 7 measured as "W2": one einsum,
with a copy of each MPS tensor as the bra (301 variables with the environment's ones). The
frameworks' values and the norms of their gradients are checked against each other. Writes
benchmarks/results/grad_ratio.json.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import time

import numpy as np

import tenloom as tl


def lattice():
    import cotengra as ctg

    inputs, output, shapes, sizes = ctg.utils.lattice_equation([6, 6], d_min=6, d_max=6, seed=1)
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(s) / np.sqrt(np.prod(s)) ** 0.5 for s in shapes]
    return inputs, output, arrays


def mps(L: int, chi: int):
    rng = np.random.default_rng(2)
    inputs, arrays = [], []
    left = ("l0a", "l0b", "l0c")
    arrays.append(np.ones((1, 1, 1)))
    inputs.append(left)
    for i in range(L):
        cl = 1 if i == 0 else chi
        cr = 1 if i == L - 1 else chi
        wl = 1 if i == 0 else 5
        wr = 1 if i == L - 1 else 5
        a = rng.standard_normal((cl, 2, cr)) / np.sqrt(cl * 2)
        w = rng.standard_normal((wl, 2, 2, wr)) / np.sqrt(2 * wl)
        d, e, f, p, q = (f"{x}{i}" for x in "defpq")
        arrays += [a, w, a.copy()]
        inputs += [(left[0], p, d), (left[1], p, q, e), (left[2], q, f)]
        left = (d, e, f)
    return inputs, (), arrays


class Workload:
    """A network to differentiate: ``operands`` (labels per operand), ``output`` and
    ``variables`` (the distinct arrays), ``uses[k]`` the variable operand k reads, and
    ``build()`` -> (tenloom value, its gradients with respect to every variable)."""

    def __init__(self, operands, output, variables, uses, build=None) -> None:
        self.operands, self.output, self.variables, self.uses = operands, output, variables, uses
        self.build = build or (lambda: value_and_grads(operands, output, variables))

    def arrays(self, xs):
        """The operands' arrays from the variables' (any framework's)."""
        return [xs[k] for k in self.uses]


def network(inputs, output, arrays) -> Workload:
    """A network whose every operand is a variable of its own."""
    return Workload(inputs, output, arrays, list(range(len(arrays))))


def mps_sites(L: int, chi: int) -> Workload:
    """W2 as BENCHMARKS.md defines it: <psi|H|psi> built site by site, one ``tl.einsum`` per
    site carrying the environment, the bra and the ket the same MPS tensors."""
    from workloads import mps_mpo_arrays, mps_mpo_expectation, mps_mpo_operands

    mps_t, mpo_t = mps_mpo_arrays(L, chi, 5, 2, seed=2)

    def build():
        ts = [tl.asarray(a) for a in mps_t]
        ws = [tl.asarray(w) for w in mpo_t]
        value = mps_mpo_expectation(ts, ws)
        return value, tl.grad(value, ts + ws)

    uses = [k for i in range(L) for k in (i, L + i, i)]  # ket, MPO, bra of site i
    return Workload(mps_mpo_operands(L), (), mps_t + mpo_t, uses, build)


def paired_times(fwd, both, repeats: int) -> tuple[float, float]:
    """Medians of ``fwd`` and ``both`` timed alternately (forward, value+grad, forward, ...)
    after a warm-up of each: a slow spell of the shared machine then hits both sides of the
    ratio rather than one. Calls under 10 ms are timed in loops of about 20 ms."""
    fwd(), both()

    def loops(fn):
        t0 = time.perf_counter()
        fn()
        return max(1, int(0.02 / max(time.perf_counter() - t0, 1e-6)))

    n_f, n_b = loops(fwd), loops(both)
    tf, tb = [], []
    for _ in range(repeats):
        for fn, n, ts in ((fwd, n_f, tf), (both, n_b, tb)):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            ts.append((time.perf_counter() - t0) / n)
    return statistics.median(tf), statistics.median(tb)


def value_and_grads(inputs, output, arrays):
    """The network's value as one lazy einsum and its gradient with respect to every tensor."""
    labels: dict = {}
    ts = [tl.asarray(a) for a in arrays]
    args: list = []
    for t, term in zip(ts, inputs):
        args += [t, [labels.setdefault(x, len(labels)) for x in term]]
    value = tl.einsum(*args, [labels[x] for x in output])
    return value, tl.grad(value, ts)


def bench_tenloom(work: Workload, repeats):
    value, grads = work.build()
    fwd, both = paired_times(lambda: value.evaluate(), lambda: tl.evaluate(value, *grads), repeats)
    f_fwd = tl.explain(value).after.flops
    f_both = tl.explain(value, *grads).after.flops
    return {
        "forward_s": fwd,
        "value_and_grad_s": both,
        "ratio": both / fwd,
        "forward_flops": f_fwd,
        "backward_flops": f_both - f_fwd,
        "value": float(value.evaluate()),
        "grad_norm": _norm(tl.evaluate(*grads)),
    }


def _norm(grads) -> float:
    """The 2-norm of all gradients together (to check the frameworks against each other)."""
    return float(np.sqrt(sum(float(np.vdot(g, g).real) for g in grads)))


def _path(work: Workload):
    import cotengra as ctg

    sizes = {}
    for t, a in zip(work.operands, work.arrays(work.variables)):
        sizes.update(zip(t, a.shape))
    from peers import peer_tree  # the search budget tenloom's "auto" has

    return peer_tree(ctg, work.operands, work.output, sizes, "auto")


def bench_jax(work: Workload, repeats):
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    tree = _path(work)

    def f(*xs):
        return tree.contract(work.arrays(xs), backend="jax")

    fj = jax.jit(f)
    gj = jax.jit(jax.value_and_grad(f, argnums=tuple(range(len(work.variables)))))
    xs = [jnp.asarray(a) for a in work.variables]
    fwd, both = paired_times(
        lambda: fj(*xs).block_until_ready(), lambda: jax.block_until_ready(gj(*xs)), repeats
    )
    return {
        "forward_s": fwd,
        "value_and_grad_s": both,
        "ratio": both / fwd,
        "value": float(fj(*xs)),
        "grad_norm": _norm([np.asarray(g) for g in gj(*xs)[1]]),
    }


def bench_torch(work: Workload, repeats):
    import torch

    tree = _path(work)
    xs = [torch.tensor(a, requires_grad=True) for a in work.variables]

    def fwd_fn():
        with torch.no_grad():
            return tree.contract(work.arrays(xs), backend="torch")

    def both_fn():
        for x in xs:
            x.grad = None
        v = tree.contract(work.arrays(xs), backend="torch")
        v.backward()
        return v

    fwd, both = paired_times(fwd_fn, both_fn, repeats)
    return {
        "forward_s": fwd,
        "value_and_grad_s": both,
        "ratio": both / fwd,
        "value": float(both_fn().detach()),  # leaves every variable's gradient in .grad
        "grad_norm": _norm([x.grad.numpy() for x in xs]),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--separate-bra", action="store_true")
    args = p.parse_args()
    L, chi = (40, 32) if args.quick else (100, 64)
    workloads = {
        "W3 lattice 6x6 D=6": network(*lattice()),
        "W2 MPS/MPO site by site": mps_sites(L, chi),
    }
    if args.separate_bra:
        workloads["W2 one einsum, separate bra"] = network(*mps(L, chi))
    # Framework by framework (all of tenloom's runs first, then JAX's, then torch's): their
    # thread pools spin for a while after work and would slow whoever runs next.
    results: dict = {name: {} for name in workloads}
    for fw, fn in (("tenloom", bench_tenloom), ("jax", bench_jax), ("torch", bench_torch)):
        for name, work in workloads.items():
            try:
                results[name][fw] = fn(work, args.repeats)
            except Exception as e:  # a missing or failing peer is recorded, not fatal
                if fw == "tenloom":
                    raise
                results[name][fw] = {"error": f"{type(e).__name__}: {e}"}
        time.sleep(1.0)
    for name, row in results.items():
        for key in ("value", "grad_norm"):
            ref = row["tenloom"][key]
            for peer in ("jax", "torch"):
                v = row[peer].get(key)
                if v is not None:
                    assert abs(v - ref) <= 1e-8 * max(1.0, abs(ref)), (name, peer, key, v, ref)
        print(f"{name}")
        for fw, r in row.items():
            if "error" in r:
                print(f"  {fw:8s} error: {r['error']}")
            else:
                print(
                    f"  {fw:8s} forward {r['forward_s'] * 1e3:9.2f} ms  value+grad "
                    f"{r['value_and_grad_s'] * 1e3:9.2f} ms  ratio {r['ratio']:.2f}"
                )
        t = row["tenloom"]
        print(
            f"  tenloom flops: forward {t['forward_flops']:.3g}, backward "
            f"{t['backward_flops']:.3g} ({t['backward_flops'] / t['forward_flops']:.2f}x)"
        )
    out = pathlib.Path(__file__).parent / "results" / "grad_ratio.json"
    out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
