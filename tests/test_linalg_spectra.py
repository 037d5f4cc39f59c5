"""Values-only decompositions (graph/ops/spectra.py): svdvals, svd(compute_uv=False) and
eigvalsh are their own ops (LAPACK without vectors), with derivatives through the full
decomposition, and the cse pass shares one decomposition when a graph has both."""

from __future__ import annotations

import numpy as np
import pytest
from rule_checks import rule_tests
from test_autodiff import _rand

import tenloom as tl

DTYPES = ["float32", "float64", "complex64", "complex128"]


def _ops(text: str) -> list[str]:
    return [
        ln.split("=", 1)[1].split("[")[0].split("(")[0].strip()
        for ln in text.splitlines()
        if " = " in ln
    ]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 1, 4, 4)])
def test_values_match_numpy_without_vectors(dtype, shape):
    rng = np.random.default_rng(0)
    a = _rand(rng, shape, dtype)
    k = min(shape[-2:])
    h = a[..., :k, :k]
    h = h + np.conj(np.swapaxes(h, -1, -2))
    x, y = tl.placeholder(a.shape, dtype, name="a"), tl.placeholder(h.shape, dtype, name="h")
    outs = [tl.linalg.svdvals(x), tl.linalg.svd(x, compute_uv=False), tl.linalg.eigvalsh(y, "U")]
    got = tl.evaluate(*outs, feed={x: a, y: h})
    want = [np.linalg.svd(a, compute_uv=False)] * 2 + [np.linalg.eigvalsh(h, "U")]
    tol = 1e-4 if dtype in ("float32", "complex64") else 1e-11
    for g, w, o in zip(got, want, outs):
        assert g.dtype == w.dtype and o.dtype == w.dtype and g.shape == o.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    text = tl.dump(*outs)
    assert "svdvals(" in text and "eigvalsh[UPLO=U](" in text
    assert "svd[" not in text and "eigh[" not in text  # no vectors computed


def test_a_graph_with_both_decomposes_once():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(5, 4))
    x = tl.placeholder((5, 4), name="x")
    u, s, vh = tl.linalg.svd(x, full_matrices=False)
    vals = tl.linalg.svdvals(x)
    text = tl.dump(vals, u)
    assert text.count("svd[") == 1 and "svdvals(" not in text
    got_vals, got_s = tl.evaluate(vals, s, feed={x: a})
    np.testing.assert_array_equal(got_vals, got_s)
    h = a.T @ a
    y = tl.placeholder((4, 4), name="y")
    text = tl.dump(tl.linalg.eigvalsh(y), tl.linalg.eigh(y)[1])
    assert text.count("eigh[") == 1 and "eigvalsh" not in text
    # another triangle is another decomposition
    text = tl.dump(tl.linalg.eigvalsh(y, "U"), tl.linalg.eigh(y)[1])
    assert "eigh[" in text and "eigvalsh[UPLO=U]" in text
    np.testing.assert_allclose(tl.linalg.eigvalsh(y).evaluate(feed={y: h}), np.linalg.eigvalsh(h))


def test_the_gradient_computes_one_full_decomposition():
    x = tl.placeholder((6, 6), name="x")
    loss = tl.sum(tl.linalg.svdvals(x) ** 2)
    (g,) = tl.grad(loss, [x])
    text = tl.dump(loss, g)
    assert text.count("svd[") == 1 and "svdvals(" not in text
    a = np.random.default_rng(2).normal(size=(6, 6))
    lv, gv = tl.evaluate(loss, g, feed={x: a})
    np.testing.assert_allclose(lv, (a * a).sum())
    np.testing.assert_allclose(gv, 2 * a, atol=1e-12)


GRADS = {
    "svdvals_tall": (tl.linalg.svdvals, [(4, 3)]),
    "svdvals_wide_batched": (lambda a: tl.linalg.svd(a, compute_uv=False), [(2, 2, 4)]),
    "eigvalsh": (tl.linalg.eigvalsh, [(4, 4)]),
    "eigvalsh_upper_batched": (lambda a: tl.linalg.eigvalsh(a, "U"), [(2, 3, 3)]),
    "nuclear_norm": (lambda a: tl.sum(tl.linalg.svdvals(a), axis=-1), [(2, 3, 4)]),
}
test_gradients_match_finite_differences, test_jvp_matches_finite_differences_and_the_vjp = (
    rule_tests(GRADS)
)


def test_errors_and_save_load(tmp_path):
    with pytest.raises(tl.ShapeError, match="svdvals: operand 0 of shape \\(3,\\)"):
        tl.linalg.svdvals(np.ones(3))
    with pytest.raises(tl.ShapeError, match="eigvalsh: operand 0 of shape \\(3, 4\\)"):
        tl.linalg.eigvalsh(np.ones((3, 4)))
    with pytest.raises(tl.OptionError, match="UPLO"):
        tl.linalg.eigvalsh(np.eye(3), "X")
    with pytest.raises(tl.DTypeError):
        tl.linalg.svdvals(np.ones((3, 3), np.float16))
    x = tl.placeholder((3, 3), name="x")
    plan = tl.compile([tl.linalg.svdvals(x), tl.linalg.eigvalsh(x, "U")], [x])
    plan.save(tmp_path / "p.tlp")
    back = tl.load(tmp_path / "p.tlp")
    a = np.random.default_rng(0).normal(size=(3, 3))
    for g, w in zip(back(a), plan(a)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_an_exactly_zero_singular_value_is_nan_in_the_svd_rule_not_a_wrong_number(dtype):
    """U S Vh of a matrix with a zero row is A itself, so the gradient of sum(W * U S Vh) is W;
    the SVD rule alone cannot see the factor s_i that cancels its 1 / s_i, so it must not
    return a finite wrong number (taking 1/0 as 0 did: off by 0.4): nan says so. The
    singular values' own rule stays exact."""
    rng = np.random.default_rng(4)
    a = _rand(rng, (3, 4), dtype)
    a[2] = 0
    w = _rand(rng, (3, 4), dtype)
    x = tl.placeholder((3, 4), dtype, name="x")
    u, s, vh = tl.linalg.svd(x, full_matrices=False)
    loss = tl.sum(tl.real((u * s) @ vh * tl.conj(tl.asarray(w))))
    (g,) = tl.evaluate(*tl.grad(loss, [x]), feed={x: a})
    bad = ~np.isfinite(g)
    assert bad.any() or np.allclose(g, w, atol=1e-10)  # never finite and wrong
    (gs,) = tl.evaluate(*tl.grad(tl.sum(tl.linalg.svdvals(x) ** 2), [x]), feed={x: a})
    np.testing.assert_allclose(gs, 2 * a, atol=1e-12)


def test_nested_values_only_decompositions_are_shared_too():
    """svdvals of an operand built from svdvals: after the inner one becomes a view, the outer
    operand is rebuilt, and its svdvals is still shared with its svd."""
    x = tl.placeholder((4, 4), name="x")
    inner = tl.linalg.svdvals(x)
    m = inner[:, None] * inner[None, :] + x
    outs = [tl.linalg.svdvals(m), tl.linalg.svd(m)[0], tl.linalg.svd(x)[0], inner]
    text = tl.dump(*outs)
    assert text.count("svd[") == 2 and "svdvals(" not in text
    a = np.random.default_rng(5).normal(size=(4, 4))
    got = tl.evaluate(*outs, feed={x: a})
    sa = np.linalg.svd(a, compute_uv=False)
    np.testing.assert_allclose(got[0], np.linalg.svd(np.outer(sa, sa) + a, compute_uv=False))
