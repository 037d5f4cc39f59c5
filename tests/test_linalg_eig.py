"""tl.linalg.eig and eigvals (graph/ops/eig.py): values against numpy.linalg.eig for every
dtype, batched and not; gradients of gauge-invariant functions against finite differences and
forward against reverse mode (real and complex inputs); the broadening at a degenerate pair;
typed errors; save and load; OpenCL's DeviceError."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, on_cpu, opencl_device
from rule_checks import rule_tests
from test_autodiff import _rand

import tenloom as tl

DTYPES = ["float32", "float64", "complex64", "complex128"]
COMPLEX_OF = {"float32": "complex64", "float64": "complex128"}


def mH(x):
    return tl.conj(tl.moveaxis(x, -1, -2))


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (2, 1, 5, 5)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_values_match_numpy_and_are_always_complex(dtype, shape):
    rng = np.random.default_rng(0)
    a = _rand(rng, shape, dtype)
    w, v = tl.linalg.eig(a)
    got_w, got_v, got_vals = tl.evaluate(w, v, tl.linalg.eigvals(a))
    want_w, want_v = np.linalg.eig(a)
    cdt = np.dtype(COMPLEX_OF.get(dtype, dtype))
    assert (w.dtype, v.dtype) == (cdt, cdt)
    assert (w.shape, v.shape) == (shape[:-1], shape)
    if on_cpu():  # LAPACK's geev: NumPy's order and phases
        assert_close(got_w, want_w.astype(cdt), dtype)
        assert_close(got_vals, want_w.astype(cdt), dtype)
        assert_close(got_v, want_v.astype(cdt), dtype)
    else:  # cuSOLVER's geev orders the eigenvalues its own way: compare them sorted
        want = np.sort_complex(want_w.astype(cdt))
        assert_close(np.sort_complex(got_w), want, dtype)
        assert_close(np.sort_complex(got_vals), want, dtype)
    # the decomposition itself: A V = V diag(w), unit columns
    assert_close(a @ got_v, got_v * got_w[..., None, :], dtype, scale=np.abs(a).sum())
    assert_close(np.linalg.norm(got_v, axis=-2), np.ones(shape[:-1], cdt.type(0).real.dtype))


def test_real_matrix_with_a_complex_pair_and_integers():
    rot = np.array([[0.0, -2.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 3.0]])
    w = tl.linalg.eigvals(rot).evaluate()
    assert w.dtype == np.complex128
    assert_close(np.sort_complex(w), np.sort_complex(np.array([2j, -2j, 3.0])))
    ints = np.array([[2, 1], [0, 3]])
    assert [t.dtype for t in tl.linalg.eig(ints)] == [np.complex128] * 2
    assert_close(tl.linalg.eigvals(ints).evaluate(), np.linalg.eigvals(ints).astype(complex))
    # one EIG node serves eig and eigvals
    assert tl.linalg.eigvals(ints).node is tl.linalg.eig(ints)[0].node


def test_errors_are_typed_and_name_the_op():
    with pytest.raises(tl.ShapeError, match=r"eig: operand 0 of shape \(3, 4\) is not a"):
        tl.linalg.eig(np.ones((3, 4)))
    with pytest.raises(tl.ShapeError, match=r"eig: operand 0 of shape \(4,\) has 1 axes"):
        tl.linalg.eigvals(np.ones(4))
    with pytest.raises(tl.DTypeError, match="eig: not defined for dtype float16"):
        tl.linalg.eig(np.eye(2, dtype="float16"))
    with pytest.raises(tl.OptionError, match="eig: eps must be finite and >= 0"):
        tl.linalg.eig(np.eye(2), eps=-1e-3)
    with pytest.raises(tl.OptionError, match="eig: eps must be finite"):
        tl.linalg.eigvals(np.eye(2), eps=float("inf"))
    with pytest.raises(tl.OptionTypeError, match="eig: eps 'big' is not a number"):
        tl.linalg.eig(np.eye(2), eps="big")
    with pytest.raises(tl.OptionTypeError, match="eig: eps True"):
        tl.linalg.eig(np.eye(2), eps=True)


# ---- gradients: gauge-invariant functions of the eigenvectors --------------------------------


def _flat(*xs):
    return tl.concatenate([tl.reshape(x, (-1,)) for x in xs])


def _matrix_function(a):
    """V diag(exp(w / 4)) V^-1: invariant under any rescaling of the eigenvectors."""
    w, v = tl.linalg.eig(a)
    return (v * tl.expand_dims(tl.exp(0.25 * w), -2)) @ tl.linalg.inv(v)


def _abs2(a):
    """|V_ij|^2 and the eigenvalues: with unit columns, only the phase of each is free."""
    w, v = tl.linalg.eig(a)
    return _flat(tl.abs(v) ** 2, w)


def _projector(a):
    """v_0 u_0^H (u_0^H the first row of V^-1): the spectral projector of one eigenvalue."""
    w, v = tl.linalg.eig(a)
    return v[..., :, :1] @ tl.linalg.inv(v)[..., :1, :] + w[..., :1, None]


def _real_spectrum(a):
    """diag(1, 2, 3) + a / 10: real simple eigenvalues, real eigenvectors whose sign is locally
    constant, so V itself differentiates."""
    w, v = tl.linalg.eig(a * 0.1 + tl.asarray(np.diag([1.0, 2.0, 3.0])))
    return _flat(w, v)


GRADS = {
    "eigvals": (tl.linalg.eigvals, [(3, 3)]),
    "eigvals_batched": (tl.linalg.eigvals, [(2, 4, 4)]),
    "matrix_function": (_matrix_function, [(3, 3)]),
    "matrix_function_batched": (_matrix_function, [(2, 3, 3)]),
    "abs2_vectors": (_abs2, [(4, 4)]),
    "projector_batched": (_projector, [(2, 3, 3)]),
}
REAL_ONLY = {"vectors_of_a_real_spectrum": (_real_spectrum, [(3, 3)])}
test_gradients_match_finite_differences, test_jvp_matches_finite_differences_and_the_vjp = (
    rule_tests(GRADS, REAL_ONLY)
)


def test_the_random_real_cases_include_a_complex_pair():
    """The real gradient checks above go through complex-conjugate eigenvalue pairs too (the
    inputs are check_grads' normal draws with seed 0)."""
    rng = np.random.default_rng(0)
    a = _rand(rng, (2, 4, 4), "float64")
    assert np.any(np.abs(np.linalg.eigvals(a).imag) > 0.1)


def test_gradient_of_a_real_input_is_real_and_matches_the_trace_rule():
    """d sum(w) = tr(dA): the gradient of Re sum(w) is the identity, real for a real input."""
    rng = np.random.default_rng(1)
    a = _rand(rng, (2, 4, 4), "float64")
    x = tl.placeholder((2, 4, 4))
    (g,) = tl.grad(tl.sum(tl.real(tl.linalg.eigvals(x))), [x])
    assert g.dtype == np.float64
    assert_close(g.evaluate(feed={x: a}), np.broadcast_to(np.eye(4), (2, 4, 4)))
    # and of sum(w^2) = tr(A^2): 2 A^T
    (g2,) = tl.grad(tl.sum(tl.real(tl.linalg.eigvals(x) ** 2)), [x])
    assert_close(g2.evaluate(feed={x: a}), 2 * np.swapaxes(a, -1, -2))


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_gradient_next_to_a_degenerate_pair_is_finite_and_right(dtype):
    """A = S diag(1, 1, 2) S^-1 (S not unitary): the projector onto the simple eigenvalue's
    eigenvector along the others is smooth, and its gradient, whose degenerate pair's term is
    0 * 1 / (w_1 - w_0), stays finite with the broadening and matches finite differences."""
    rng = np.random.default_rng(3)
    s = _rand(rng, (3, 3), dtype) + 2 * np.eye(3)
    a = (s * np.array([1.0, 1.0, 2.0])) @ np.linalg.inv(s)
    c, d = _rand(rng, (3, 3), dtype), _rand(rng, (3, 3), dtype)
    j = int(np.argmin(np.abs(np.linalg.eigvals(a) - 2.0)))

    def loss_np(m):
        w, v = np.linalg.eig(m)
        k = int(np.argmin(np.abs(w - 2.0)))
        p = v[:, k : k + 1] @ np.linalg.inv(v)[k : k + 1, :]
        return float(np.sum(np.real(p * np.conj(c))))

    x = tl.placeholder((3, 3), dtype)
    _, v = tl.linalg.eig(x)
    p = v[:, j : j + 1] @ tl.linalg.inv(v)[j : j + 1, :]
    (g,) = tl.grad(tl.sum(tl.real(p * tl.conj(tl.asarray(c)))), [x])
    got = g.evaluate(feed={x: a})
    assert np.all(np.isfinite(got))
    numeric = (loss_np(a + 1e-6 * d) - loss_np(a - 1e-6 * d)) / 2e-6
    assert abs(float(np.real(np.vdot(got, d))) - numeric) <= 1e-5 * max(1.0, abs(numeric))


def test_second_derivatives_differentiate_the_rules_again():
    """A Hessian-vector product through eig (its rules are graphs of eig, solve and matmul)
    matches central differences of the gradient."""
    rng = np.random.default_rng(7)
    x = tl.placeholder((3, 3), "complex128")
    w, v = tl.linalg.eig(x)
    loss = tl.sum(tl.real(w * w * w)) + tl.sum(tl.abs(v) ** 2 * tl.real(w)[None, :])
    a, dv = _rand(rng, (3, 3), "complex128"), _rand(rng, (3, 3), "complex128")
    (hv,) = tl.hvp(loss, [x], [tl.asarray(dv)])
    (g,) = tl.grad(loss, [x])
    eps = 1e-5
    numeric = (g.evaluate(feed={x: a + eps * dv}) - g.evaluate(feed={x: a - eps * dv})) / (2 * eps)
    got = hv.evaluate(feed={x: a})
    assert np.max(np.abs(got - numeric)) <= 1e-5 * max(1.0, np.max(np.abs(numeric)))


# ---- dump, save/load, cost, devices -----------------------------------------------------------


def test_dump_save_load_and_cost(tmp_path):
    x = tl.placeholder((2, 3, 3), name="x")
    w, v = tl.linalg.eig(x, eps=1e-8)
    out = (w, v, tl.linalg.eigvals(x))
    text = tl.dump(v)
    assert "eig[eps=1e-08]" in text and text.count("eig[") == 1
    tl.save(out, tmp_path / "eig.json")
    loaded = tl.load(tmp_path / "eig.json")
    a = _rand(np.random.default_rng(0), (2, 3, 3), "float64")
    for got, ref in zip(tl.evaluate(*loaded, feed={x: a}), tl.evaluate(*out, feed={x: a})):
        assert_close(got, ref)
    assert "flop" in str(tl.explain(tl.linalg.eigvals(tl.placeholder((8, 8))) * 2.0)).lower()
    # a file whose eps is negative is rejected by the loader, naming the node
    path = tmp_path / "eig.json"
    path.write_text(path.read_text().replace("1e-08", "-1.0"))
    with pytest.raises(tl.GraphFormatError, match="eig: eps must be a finite float >= 0"):
        tl.load(path)


@pytest.mark.opencl
def test_opencl_has_no_kernel_for_eig_a_device_error_naming_it():
    device = opencl_device()
    if device is None:
        pytest.skip("no OpenCL device (see test_opencl.py)")
    x = tl.placeholder((3, 3))
    for t in (tl.linalg.eigvals(x) * 2.0, tl.linalg.eig(x)[1]):
        with pytest.raises(tl.DeviceError, match=f"{device}: no kernel for op 'eig'"):
            t.evaluate(device=device, feed={x: np.eye(3)})
