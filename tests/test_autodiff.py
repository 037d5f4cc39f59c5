"""Gradients against central finite differences (float64), forward/reverse consistency,
Hessian-vector products, and the cost of network gradients."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import graph_strategy
from hypothesis import given, settings
from hypothesis import strategies as st

import tenloom as tl

EPS = 1e-6


def _rand(rng, shape, dtype, positive=False):
    x = rng.uniform(0.5, 1.5, shape) if positive else rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        y = rng.uniform(0.5, 1.5, shape) if positive else rng.standard_normal(shape)
        x = x + 1j * y
    return np.asarray(x, dtype=dtype)


def check_grads(f, shapes, dtype="float64", seed=0, positive=False, rtol=1e-5):
    """Compare tl.grad of sum(Re(f(xs) * conj(w))) with a central difference along a random
    direction; complex inputs follow PyTorch's convention, so dL = Re(sum(conj(g) * v))."""
    rng = np.random.default_rng(seed)
    xs = [tl.placeholder(s, dtype, name=f"x{i}") for i, s in enumerate(shapes)]
    out = f(*xs)
    w = _rand(rng, out.shape, out.dtype if out.dtype.kind in "fc" else "float64")
    prod = out * tl.conj(tl.asarray(w)) if out.dtype.kind == "c" else out * tl.asarray(w)
    loss = tl.sum(tl.real(prod)) if prod.dtype.kind == "c" else tl.sum(prod)
    grads = tl.grad(loss, xs)
    vals = [_rand(rng, s, dtype, positive) for s in shapes]
    dirs = [_rand(rng, s, dtype) for s in shapes]
    feed = dict(zip(xs, vals))
    gs = tl.evaluate(*grads, feed=feed)
    analytic = sum(float(np.real(np.vdot(g, v))) for g, v in zip(gs, dirs))

    def at(sign):
        shifted = {x: v + sign * EPS * d for x, v, d in zip(xs, vals, dirs)}
        return float(loss.evaluate(feed=shifted))

    numeric = (at(1) - at(-1)) / (2 * EPS)
    scale = max(1.0, abs(numeric), abs(analytic))
    assert abs(analytic - numeric) <= rtol * scale, (analytic, numeric)


S = (3, 4)
UNARY = {
    "neg": (lambda x: -x, False),
    "abs": (tl.abs, False),
    "exp": (tl.exp, False),
    "log": (tl.log, True),
    "sqrt": (tl.sqrt, True),
    "sin": (tl.sin, False),
    "cos": (tl.cos, False),
    "tanh": (tl.tanh, False),
    "square": (lambda x: x**2, False),
    "pow_scalar": (lambda x: x**2.5, True),
    "rpow": (lambda x: 2.0**x, False),
    "reciprocal": (lambda x: 1.0 / x, True),
    "sum_axis": (lambda x: tl.sum(x, axis=1), False),
    "sum_keepdims": (lambda x: tl.sum(x, axis=0, keepdims=True), False),
    "mean": (lambda x: tl.mean(x, axis=1), False),
    "prod": (lambda x: tl.prod(x, axis=0), True),
    "max": (lambda x: tl.max(x, axis=1), False),
    "min": (lambda x: tl.min(x), False),
    "reshape": (lambda x: tl.reshape(x, (2, 6)) * 1.5, False),
    "transpose": (lambda x: x.T * tl.arange(3.0), False),
    "moveaxis_expand": (lambda x: tl.expand_dims(x, 1) * 2.0, False),
    "broadcast_to": (lambda x: tl.broadcast_to(x[:, :1], (3, 5)), False),
    "slice": (lambda x: x[1:, ::2], False),
    "slice_neg_step": (lambda x: x[::-1, 3:0:-2], False),
    "index_none": (lambda x: x[1, None, ...], False),
    "concatenate": (lambda x: tl.concatenate([x, 2.0 * x[:1]], axis=0), False),
    "stack": (lambda x: tl.stack([x, tl.sin(x)], axis=-1), False),
    "diagonal": (lambda x: tl.diagonal(x, 1), False),
    "trace_offset": (lambda x: tl.trace(x, -1), False),
    "matmul_self": (lambda x: x @ x.T, False),
    "einsum_diag": (lambda x: tl.einsum("ii->i", x[:, :3]), False),
    "einsum_lone": (lambda x: tl.einsum("ij->", x), False),
    "clip": (lambda x: tl.clip(x, -0.5, 0.5), False),
    "where": (lambda x: tl.where(x > 0, x * x, -x), False),
    "maximum": (lambda x: tl.maximum(x, 0.1), False),
    "minimum": (lambda x: tl.minimum(x, x.T[:, :1].T * 0 + 0.2), False),
    "astype_complex": (lambda x: tl.astype(x, "complex128") * (1 + 2j), False),
}


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_ops_match_finite_differences(name):
    f, positive = UNARY[name]
    check_grads(f, [S], positive=positive)


BINARY = {
    "add_broadcast": (lambda a, b: a + b[0], [(3, 4), (2, 4)]),
    "sub": (lambda a, b: a - b, [S, S]),
    "mul": (lambda a, b: a * b, [S, S]),
    "div": (lambda a, b: a / (b * b + 1.0), [S, S]),
    "pow": (lambda a, b: (a * a + 1.0) ** b, [S, S]),
    "maximum": (lambda a, b: tl.maximum(a, b), [S, S]),
    "matmul": (lambda a, b: a @ b, [(3, 4), (4, 2)]),
    "matmul_vec": (lambda a, b: a @ b[:, 0], [(3, 4), (4, 2)]),
    "batched_matmul": (lambda a, b: a @ b, [(2, 3, 4), (1, 4, 5)]),
    "tensordot": (lambda a, b: tl.tensordot(a, b, axes=([1], [0])), [(3, 4), (4, 2)]),
    "dot_outer": (lambda a, b: tl.outer(a, b), [(3,), (4,)]),
    "trace_ab": (lambda a, b: tl.trace(a @ b), [(3, 4), (4, 3)]),
    "einsum_hyper": (lambda a, b: tl.einsum("ab,ab,bc->ac", a, a, b), [(3, 4), (4, 2)]),
    "einsum_repeated": (lambda a, b: tl.einsum("iij,jk->ik", a, b), [(3, 3, 4), (4, 2)]),
    "einsum_broadcast": (lambda a, b: tl.einsum("...ij,jk->...ik", a, b), [(2, 3, 4), (4, 2)]),
    "where_two": (lambda a, b: tl.where(a > b, a, b * 2.0), [S, S]),
}


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_ops_match_finite_differences(name):
    f, shapes = BINARY[name]
    check_grads(f, shapes, positive=name == "pow")


COMPLEX = {
    "mul": (lambda a, b: a * b, [S, S]),
    "conj": (lambda a, b: tl.conj(a) * b, [S, S]),
    "abs": (lambda a, b: tl.abs(a) + tl.real(b), [S, S]),
    "real_imag": (lambda a, b: tl.real(a) * tl.imag(b), [S, S]),
    "exp": (lambda a, b: tl.exp(a) / (b * tl.conj(b) + 1.0), [S, S]),
    "einsum": (lambda a, b: tl.einsum("ij,kj->ik", a, tl.conj(b)), [S, S]),
    "matmul_trace": (lambda a, b: tl.trace(a @ b.T) * 1j, [S, S]),
}


@pytest.mark.parametrize("name", list(COMPLEX))
def test_complex_gradients_follow_pytorch_convention(name):
    f, shapes = COMPLEX[name]
    check_grads(f, shapes, dtype="complex128")


def test_gradient_of_unused_input_is_a_symbolic_zero_and_ints_have_none():
    a = tl.placeholder((2,), name="a")
    b = tl.placeholder((3,), name="b")
    (ga, gb) = tl.grad(tl.sum(a * a), [a, b])
    assert gb.node.op.value == "full"
    feed = {a: np.array([1.0, 2.0]), b: np.zeros(3)}
    np.testing.assert_allclose(ga.evaluate(feed=feed), [2.0, 4.0])
    np.testing.assert_allclose(gb.evaluate(feed=feed), 0.0)


def test_grad_errors_are_typed():
    a = tl.asarray(np.ones(3))
    with pytest.raises(tl.ShapeError, match="scalar"):
        tl.grad(a * 2, [a])
    with pytest.raises(tl.DTypeError, match="real"):
        tl.grad(tl.sum(a * 1j), [a])
    with pytest.raises(tl.ShapeError, match="cotangent"):
        tl.vjp(a * 2, [a], [tl.ones((4,))])


def test_value_and_grad_and_grad_of_constants():
    rng = np.random.default_rng(1)
    A = tl.asarray(rng.standard_normal((4, 4)))
    loss, (g,) = tl.value_and_grad(tl.sum(tl.tanh(A @ A)), [A])
    a = A.evaluate()
    t = np.tanh(a @ a)
    np.testing.assert_allclose(loss.evaluate(), t.sum())
    d = 1 - t * t
    np.testing.assert_allclose(g.evaluate(), d @ a.T + a.T @ d, rtol=1e-10)


def test_forward_and_reverse_agree():
    rng = np.random.default_rng(2)
    a, b = tl.asarray(rng.standard_normal((3, 4))), tl.asarray(rng.standard_normal((4, 5)))
    y = tl.sin(a @ b) * tl.sum(a)
    t_a, t_b = rng.standard_normal((3, 4)), rng.standard_normal((4, 5))
    c = rng.standard_normal((3, 5))
    (jt,) = [tl.jvp(y, [a, b], [tl.asarray(t_a), tl.asarray(t_b)])]
    ga, gb = tl.vjp(y, [a, b], [tl.asarray(c)])
    lhs = np.vdot(t_a, ga.evaluate()).real + np.vdot(t_b, gb.evaluate()).real
    rhs = np.vdot(jt.evaluate(), c).real
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10)


def test_hessian_vector_product():
    rng = np.random.default_rng(3)
    x = tl.placeholder((4,), name="x")
    A = rng.standard_normal((4, 4))
    loss = tl.sum(tl.sin(tl.asarray(A) @ x)) + tl.sum(x**3)
    v = rng.standard_normal(4)
    (hv,) = tl.hvp(loss, [x], [tl.asarray(v)])
    x0 = rng.standard_normal(4)
    s = A @ x0
    hess = -(A.T * np.sin(s)) @ A + np.diag(6 * x0)
    np.testing.assert_allclose(hv.evaluate(feed={x: x0}), hess @ v, rtol=1e-10)


def test_gradient_of_a_100_tensor_network_costs_at_most_3x_the_forward():
    import cotengra as ctg

    inputs, output, shapes, sizes = ctg.utils.lattice_equation([10, 10], d_min=2, d_max=2, seed=4)
    labels = {lab: i for i, lab in enumerate(sizes)}
    rng = np.random.default_rng(0)
    arrays = [tl.asarray(rng.standard_normal(s) / 2) for s in shapes]
    args = []
    for a, term in zip(arrays, inputs):
        args += [a, [labels[x] for x in term]]
    value = tl.einsum(*args, [])
    grads = tl.grad(value, arrays)
    fwd = tl.explain(value, optimize="greedy").after.flops
    both = tl.explain(value, *grads, optimize="greedy").after.flops
    assert both <= 4 * fwd, (fwd, both)  # forward + backward <= 4x forward: backward <= 3x
    # and the numbers are right: compare one gradient with cotengra on the n-1 network
    k = 7
    rest = [x.evaluate() for j, x in enumerate(arrays) if j != k]
    rest_in = [t for j, t in enumerate(inputs) if j != k]
    expected = ctg.array_contract(rest, rest_in, inputs[k], optimize="greedy")
    np.testing.assert_allclose(grads[k].evaluate(optimize="greedy"), expected, rtol=1e-8)


OPS_H = [
    lambda a, b: a * b,
    lambda a, b: a + tl.sin(b),
    lambda a, b: a @ b,
    lambda a, b: tl.einsum("ij,jk->ik", a, b.T),
    lambda a, b: tl.einsum("ij,ij->ij", a, tl.conj(b)),
    lambda a, b: tl.diagonal(a)[:, None] * b,
    lambda a, b: tl.trace(a @ b) * a,
    lambda a, b: tl.sum(a, axis=0) + b,
    lambda a, b: tl.exp(a * 0.3) - b.T,
    lambda a, b: tl.einsum("ii,ij->ij", a, b),
]


def graph_functions():
    return graph_strategy(OPS_H)


@settings(max_examples=200)
@given(graph_functions(), st.sampled_from(["float64", "complex128"]), st.integers(0, 100))
def test_random_graphs_match_finite_differences(f, dtype, seed):
    check_grads(f, [(3, 3), (3, 3)], dtype=dtype, seed=seed, rtol=1e-5)


def test_explain_splits_forward_and_backward_networks():
    rng = np.random.default_rng(4)
    mats = [tl.asarray(rng.standard_normal((6, 6))) for _ in range(5)]
    loss = tl.trace(mats[0] @ mats[1] @ mats[2] @ mats[3] @ mats[4])
    grads = tl.grad(loss, mats)
    report = tl.explain(loss, *grads)
    fwd, bwd = report.sweeps["forward"], report.sweeps["backward"]
    assert fwd["contractions"] == 4 and fwd["flops"] == tl.explain(loss).after.flops
    assert 0 < bwd["flops"] <= 3 * fwd["flops"]
    assert [n["operands"] for n in report.sweeps["networks"]] == [5]
    text = str(report)
    assert "forward and backward" in text and "ab,bc,cd,de,ea->" in text
    assert tl.explain(loss).sweeps is None


def test_derivatives_with_respect_to_reductions_of_constants():
    # the evaluation pipeline folds reductions of constants into constants (prereduce); the
    # pre-pass of grad and jvp must not, or these derivatives would come out zero
    xv = np.arange(18.0).reshape(3, 3, 2)
    c = tl.asarray(xv)
    for w in (tl.sum(c, 2), tl.sum(tl.sum(tl.asarray(xv[..., None] * [1.0, 2.0]), 3), 2)):
        loss = tl.trace(w)
        (g,) = tl.grad(loss, [w])
        np.testing.assert_array_equal(g.evaluate(), np.eye(3))
        np.testing.assert_allclose(tl.jvp(loss, [w], [tl.asarray(np.eye(3))]).evaluate(), 3.0)
    d = tl.einsum("ii->i", tl.asarray(xv[..., 0]))  # a diagonal (a view in NumPy)
    (g,) = tl.grad(tl.sum(d * tl.asarray([1.0, 2.0, 3.0])), [d])
    np.testing.assert_array_equal(g.evaluate(), [1.0, 2.0, 3.0])


def test_a_complex_sign_has_the_derivative_of_z_over_abs_z():
    """sign(z) = z / |z| for complex z (NumPy 2): both sweeps as the composite's, and 0 at 0
    (PyTorch's sgn). A real sign stays without a derivative."""
    check_grads(tl.sign, [S], dtype="complex128")  # (forward mode: tests/test_jvp.py)
    z = tl.placeholder((3,), "complex128")
    w = np.array([1 + 2j, -0.5j, 3.0])
    loss = tl.sum(tl.real(tl.sign(z) * tl.conj(tl.asarray(w))))
    ref = tl.sum(tl.real(z / tl.abs(z) * tl.conj(tl.asarray(w))))
    at = np.array([0.3 - 1.2j, 2.0 + 0.5j, 0.0])
    (g,) = tl.evaluate(tl.grad(loss, z), feed={z: at})
    (g_ref,) = tl.evaluate(tl.grad(ref, z), feed={z: at[:2].tolist() + [1.0]})
    np.testing.assert_allclose(g[:2], g_ref[:2], rtol=1e-14)
    assert g[2] == 0
    x = tl.placeholder((3,))
    (gr,) = tl.evaluate(tl.grad(tl.sum(tl.sign(x) * x), x), feed={x: np.array([-2.0, 0.0, 3.0])})
    np.testing.assert_array_equal(gr, [-1.0, 0.0, 1.0])


@pytest.mark.parametrize("scale", [1.0, 1e3, 1e4])
def test_second_derivatives_through_svd_do_not_grow_with_the_scale(scale):
    """Reverse over reverse through the SVD's rule: the broadening's diagonal is masked, not
    0 / (0 + 1), whose derivative sent a cotangent that had to cancel (an error of 0.8 at
    s_max = 2.6e4). U diag(s^3) Vh is A A^T A, whose Hessian-vector product is exact."""
    rng = np.random.default_rng(5)
    a, w, d = (rng.standard_normal((3, 3)) for _ in range(3))
    a = a * scale
    z = tl.placeholder((3, 3))
    u, s, vh = tl.linalg.svd(z)
    got = tl.hvp(tl.sum(((u * s**3) @ vh) * tl.asarray(w)), [z], [tl.asarray(d)])[0]
    want = tl.hvp(tl.sum((z @ z.T @ z) * tl.asarray(w)), [z], [tl.asarray(d)])[0]
    got, want = tl.evaluate(got, want, feed={z: a})
    assert np.abs(got - want).max() <= 1e-9 * np.abs(want).max()
