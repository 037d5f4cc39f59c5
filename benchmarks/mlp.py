"""One MLP training step on CPU: tenloom's compiled plan against the same step written by hand in
NumPy, and against jax.jit when jax imports.

    python benchmarks/mlp.py [--rounds 60] [--batch 256] [--threads N] [--json PATH]

The step: 784-256-10, batch 256, float32; ``relu(x @ w1 + b1) @ w2 + b2``, softmax
cross-entropy against one-hot labels (mean over the batch), and one SGD update (lr 0.1) of
both layers' weights and biases. Each contender returns the loss and the four updated
parameters:

- ``tenloom``: the step traced once with ``tl.log_softmax`` and ``tl.grad``, compiled with
  ``tl.compile`` into one plan (forward, backward and update), called on NumPy arrays;
- ``tenloom (max by hand)``: the same with the log-softmax written out as users write it
  without ``tl.log_softmax`` (``z - m - log(sum(exp(z - m)))``, ``m`` the row max, which the
  backward graph then differentiates: tie masks and counts whose contributions cancel);
- ``numpy``: forward and hand-derived backward in NumPy (in-place where NumPy code would be);
- ``jax.jit``: ``jax.value_and_grad`` of the same loss and the update, jitted (CPU).

The contenders are timed in turn within each round, in an order drawn afresh each round
(so a loaded machine, warm caches and BLAS threads left spinning favour none of them;
``--blocks`` times each contender's rounds in one block instead),
after a warm-up; each figure is the median over ``--rounds`` rounds, and the ratios are
medians over NumPy's. The results are checked against NumPy's before timing. ``--threads``
sets the BLAS threads (OPENBLAS/OMP/MKL_NUM_THREADS, set before NumPy loads); the default
leaves BLAS as it is. On a small shared machine, multi-threaded BLAS thrashes whenever
another process holds a core (10 ms steps for everyone): measure there with ``--threads 1``.
The goal (issue 21): tenloom within 1.2x of NumPy.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time


def _parse(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=60, help="timed rounds (medians over them)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--threads", type=int, default=None, help="BLAS threads (default: as is)")
    p.add_argument("--no-jax", action="store_true", help="skip jax even if it imports")
    p.add_argument(
        "--blocks",
        action="store_true",
        help="time each contender's rounds in one block (multi-threaded BLAS on a shared "
        "machine: interleaving leaves the last GEMM's threads spinning against the next)",
    )
    p.add_argument("--json", default=None, help="write the figures to this file")
    return p.parse_args(argv)


ARGS = _parse(sys.argv[1:]) if __name__ == "__main__" else None
if ARGS is not None and ARGS.threads is not None:  # before NumPy loads its BLAS
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402

import tenloom as tl  # noqa: E402

D_IN, N_CLASSES, LR = 784, 10, 0.1


def data(batch: int, hidden: int, seed: int = 0) -> list[np.ndarray]:
    """x, one-hot y, w1, b1, w2, b2 (float32), drawn with ``tl.random``."""
    rng = tl.random.default_rng(seed)
    f32 = np.float32
    x = rng.standard_normal((batch, D_IN), dtype=f32).evaluate()
    labels = rng.integers(0, N_CLASSES, batch).evaluate()
    y = tl.one_hot(labels, N_CLASSES, dtype=f32).evaluate()
    w1 = rng.normal(0.0, (2.0 / D_IN) ** 0.5, (D_IN, hidden), dtype=f32).evaluate()
    w2 = rng.normal(0.0, (2.0 / hidden) ** 0.5, (hidden, N_CLASSES), dtype=f32).evaluate()
    return [x, y, w1, np.zeros(hidden, f32), w2, np.zeros(N_CLASSES, f32)]


def tenloom_step(batch: int, hidden: int, by_hand: bool = False) -> tl.Plan:
    """The step as one plan: (x, y, w1, b1, w2, b2) -> (loss, w1', b1', w2', b2')."""
    f32 = np.float32
    x = tl.placeholder((batch, D_IN), f32, name="x")
    y = tl.placeholder((batch, N_CLASSES), f32, name="y")
    w1 = tl.placeholder((D_IN, hidden), f32, name="w1")
    b1 = tl.placeholder((hidden,), f32, name="b1")
    w2 = tl.placeholder((hidden, N_CLASSES), f32, name="w2")
    b2 = tl.placeholder((N_CLASSES,), f32, name="b2")
    params = [w1, b1, w2, b2]
    z = tl.relu(x @ w1 + b1) @ w2 + b2
    if by_hand:
        m = tl.max(z, axis=1, keepdims=True)
        logp = z - m - tl.log(tl.sum(tl.exp(z - m), axis=1, keepdims=True))
    else:
        logp = tl.log_softmax(z, axis=1)
    loss = -tl.sum(y * logp) / batch
    grads = tl.grad(loss, params)
    new = [p - f32(LR) * g for p, g in zip(params, grads)]
    return tl.compile([loss, *new], [x, y, *params])


def numpy_step(x, y, w1, b1, w2, b2):
    """The step by hand: forward, then the backward derived on paper."""
    n = x.shape[0]
    a = x @ w1
    a += b1
    h = np.maximum(a, 0)
    z = h @ w2
    z += b2
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    loss = -(y * (z - np.log(s))).sum() / n
    dz = e / s
    dz -= y
    dz /= n
    dw2 = h.T @ dz
    db2 = dz.sum(axis=0)
    dh = dz @ w2.T
    dh *= a > 0
    dw1 = x.T @ dh
    db1 = dh.sum(axis=0)
    lr = np.float32(LR)
    return loss, w1 - lr * dw1, b1 - lr * db1, w2 - lr * dw2, b2 - lr * db2


def jax_step():
    """The jitted step, or None when jax does not import."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_platform_name", "cpu")

    def loss_fn(params, x, y):
        w1, b1, w2, b2 = params
        z = jax.nn.relu(x @ w1 + b1) @ w2 + b2
        return -jnp.sum(y * jax.nn.log_softmax(z, axis=1)) / x.shape[0]

    @jax.jit
    def step(x, y, w1, b1, w2, b2):
        params = (w1, b1, w2, b2)
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        return (loss, *(p - LR * g for p, g in zip(params, grads)))

    cpu = jax.devices("cpu")[0]

    def run(*arrays):
        outs = step(*arrays)
        jax.block_until_ready(outs)
        return outs

    def prepare(arrays):
        return [jax.device_put(a, cpu) for a in arrays]

    run.prepare = prepare
    return run


def check(name, got, want) -> None:
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(
            np.asarray(g), w, rtol=2e-4, atol=2e-6, err_msg=f"{name}: output {k}"
        )


def main(args) -> dict:
    batch, hidden = args.batch, args.hidden
    arrays = data(batch, hidden)
    t0 = time.perf_counter()
    plan = tenloom_step(batch, hidden)
    trace_s = time.perf_counter() - t0
    plan_hand = tenloom_step(batch, hidden, by_hand=True)
    want = numpy_step(*arrays)
    steps = {
        "numpy": (lambda: numpy_step(*arrays)),
        "tenloom": (lambda: plan(*arrays)),
        "tenloom (max by hand)": (lambda: plan_hand(*arrays)),
    }
    check("tenloom", plan(*arrays), want)
    check("tenloom (max by hand)", plan_hand(*arrays), want)
    jstep = None if args.no_jax else jax_step()
    if jstep is not None:
        jarrays = jstep.prepare(arrays)
        check("jax.jit", jstep(*jarrays), want)
        steps["jax.jit"] = lambda: jstep(*jarrays)
    for _ in range(args.warmup):
        for fn in steps.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in steps}
    names = list(steps)
    if args.blocks:
        order = [[name] * args.rounds for name in names]
    else:
        # a fresh order each round (seeded): whoever runs after whom (caches, BLAS threads
        # still spinning from the last GEMM) is the same for everyone on average
        shuffle = np.random.default_rng(0)
        order = [list(shuffle.permutation(names)) for _ in range(args.rounds)]
    for group in order:
        for name in group:
            fn = steps[name]
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["numpy"]
    print(
        f"MLP step {D_IN}-{hidden}-{N_CLASSES}, batch {batch}, float32, "
        f"{args.rounds} rounds, {platform.machine()} with {os.cpu_count()} CPUs"
    )
    print(f"{'':24s} {'median ms':>10s} {'/ numpy':>8s}")
    for name, m in med.items():
        print(f"{name:24s} {m * 1e3:10.3f} {m / base:8.2f}")
    if "jax.jit" not in med:
        print("(jax.jit: skipped, " + ("--no-jax)" if args.no_jax else "jax does not import)"))
    print(f"(tracing, differentiating and compiling the plan took {trace_s:.2f} s, once)")
    result = {
        "command": " ".join(["python benchmarks/mlp.py", *sys.argv[1:]]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "shape": [D_IN, hidden, N_CLASSES],
        "batch": batch,
        "rounds": args.rounds,
        "threads": args.threads,
        "blocks": args.blocks,
        "cpus": os.cpu_count(),
        "median_ms": {k: m * 1e3 for k, m in med.items()},
        "ratio_to_numpy": {k: m / base for k, m in med.items()},
        "goal": "tenloom <= 1.2 x numpy",
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main(ARGS)
