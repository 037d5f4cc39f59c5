"""A two-layer perceptron trained with ``tl.value_and_grad`` and a compiled step.

The network is 784-256-10 (ReLU hidden layer) on synthetic data: inputs drawn from ten Gaussian
clusters in 784 dimensions, the label of each sample its cluster. The loss is the mean softmax
cross-entropy written with tenloom ops (tenloom has no ``tl.nn`` or ``tl.softmax``): the
log-softmax as ``logits - max - log(sum(exp(logits - max)))`` with ``tl.max(..., keepdims=True)``,
picked out by a one-hot matrix. ``tl.value_and_grad`` gives the loss and its gradients with
respect to the four parameters; ``tl.compile`` turns them into one plan, called once per step
with the parameters and a mini-batch; the update (plain SGD) runs in NumPy.

Checked against NumPy: the first loss and the gradients from a hand-written forward and backward
pass (the usual softmax - one-hot rule), and the loss must fall over the steps.

    python examples/mlp.py --steps 50 --batch 128
    python examples/mlp.py --small                        # 64-32-10, 10 steps of 32

Prints the loss and gradient errors against NumPy ("max |dW| = ..."), the mini-batch loss every
few steps, the loss on all samples before and after training, and the training accuracy.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tenloom as tl


def loss_graph(params: list, x, onehot):
    """Mean softmax cross-entropy of the MLP on (x, onehot), lazily."""
    w1, b1, w2, b2 = params
    hidden = tl.maximum(x @ w1 + b1, 0.0)
    logits = hidden @ w2 + b2
    shifted = logits - tl.max(logits, axis=1, keepdims=True)
    log_softmax = shifted - tl.log(tl.sum(tl.exp(shifted), axis=1, keepdims=True))
    return -tl.sum(onehot * log_softmax) / x.shape[0]


def numpy_loss_and_grads(params: list[np.ndarray], x: np.ndarray, onehot: np.ndarray):
    w1, b1, w2, b2 = params
    pre = x @ w1 + b1
    hidden = np.maximum(pre, 0.0)
    logits = hidden @ w2 + b2
    shifted = logits - logits.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    n = x.shape[0]
    loss = -(onehot * logp).sum() / n
    dlogits = (np.exp(logp) - onehot) / n
    dhidden = dlogits @ w2.T * (pre > 0)
    return loss, [x.T @ dhidden, dhidden.sum(0), hidden.T @ dlogits, dlogits.sum(0)]


def synthetic_data(n: int, dim: int, classes: int, rng: np.random.Generator):
    centers = rng.standard_normal((classes, dim))
    labels = rng.integers(0, classes, n)
    x = centers[labels] + 2.0 * rng.standard_normal((n, dim))
    return x / np.sqrt(dim), labels


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs=3, default=[784, 256, 10], metavar=("IN", "H", "OUT"))
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--small", action="store_true", help="64-32-10, 10 steps of 32")
    args = p.parse_args(argv)
    if args.small:
        (n_in, n_hidden, n_out), steps, batch, samples = (64, 32, 10), 10, 32, 256
    else:
        (n_in, n_hidden, n_out), steps, batch, samples = (
            args.sizes, args.steps, args.batch, args.samples,
        )  # fmt: skip

    rng = np.random.default_rng(args.seed)
    data, labels = synthetic_data(samples, n_in, n_out, rng)
    onehot_all = np.eye(n_out)[labels]
    params = [
        rng.standard_normal((n_in, n_hidden)) * np.sqrt(2.0 / n_in),
        np.zeros(n_hidden),
        rng.standard_normal((n_hidden, n_out)) * np.sqrt(1.0 / n_hidden),
        np.zeros(n_out),
    ]
    holders = [tl.placeholder(a.shape, name=nm) for a, nm in zip(params, ("w1", "b1", "w2", "b2"))]
    x = tl.placeholder((batch, n_in), name="x")
    onehot = tl.placeholder((batch, n_out), name="onehot")
    loss, grads = tl.value_and_grad(loss_graph(holders, x, onehot), holders)
    t0 = time.perf_counter()
    step_plan = tl.compile([loss, *grads], inputs=[*holders, x, onehot])
    # the first batch against a hand-written NumPy forward and backward pass
    first = slice(0, batch)
    first_value, *g = step_plan(*params, data[first], onehot_all[first])
    t_compile = time.perf_counter() - t0
    print(f"MLP {n_in}-{n_hidden}-{n_out}, batch {batch}, {samples} samples; compile and first "
          f"call {t_compile:.3f} s")  # fmt: skip
    before = numpy_loss_and_grads(params, data, onehot_all)[0]
    ref_loss, ref_g = numpy_loss_and_grads(params, data[first], onehot_all[first])
    grad_err = max(float(np.max(np.abs(a - b))) for a, b in zip(g, ref_g))
    print(f"loss: tenloom {float(first_value):.12f}, NumPy {ref_loss:.12f}")
    print(f"max |dW| against the NumPy backward pass = {grad_err:.2e}")

    losses = []
    t0 = time.perf_counter()
    for step in range(steps):
        idx = rng.choice(samples, batch, replace=False)
        value, *g = step_plan(*params, data[idx], onehot_all[idx])
        params = [a - args.lr * d for a, d in zip(params, g)]
        losses.append(float(value))
        if step % max(1, steps // 5) == 0 or step == steps - 1:
            print(f"step {step + 1:4d}: loss = {float(value):.6f}")
    t_steps = time.perf_counter() - t0
    after = numpy_loss_and_grads(params, data, onehot_all)[0]
    print(f"loss on all {samples} samples: {before:.6f} before, {after:.6f} after training")
    hidden = np.maximum(data @ params[0] + params[1], 0.0)
    accuracy = float(np.mean((hidden @ params[2] + params[3]).argmax(1) == labels))
    print(f"{steps} steps in {t_steps:.3f} s; training accuracy {accuracy:.3f}")
    return {
        "loss": float(first_value),
        "loss_ref": float(ref_loss),
        "grad_error": grad_err,
        "losses": losses,
        "loss_before": float(before),
        "loss_after": float(after),
        "accuracy": accuracy,
    }


if __name__ == "__main__":
    main()
