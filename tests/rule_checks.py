"""The two parametrized tests every table of differentiation cases gets (tests/test_linalg*.py,
tests/test_tensor_svd.py): reverse mode against finite differences (test_autodiff's
``check_grads``) and forward mode against finite differences and the VJP (test_jvp's
``check_jvp``, every mode), for float64 and complex128, plus float64 alone for the cases that
only real inputs differentiate (eigenvector signs are locally constant, complex phases are
not)."""

from __future__ import annotations

import pytest
from test_autodiff import check_grads
from test_jvp import MODES, check_jvp


def rule_tests(grads: dict, real_only: dict | None = None):
    """``(test_gradients, test_jvp)`` for the cases ``{name: (f, shapes)}``; bind them to
    ``test_*`` names in the test module, where pytest collects them."""
    real_only = real_only or {}
    table = {**grads, **real_only}
    cases = [(k, "float64") for k in real_only]
    cases += [(k, dt) for k in grads for dt in ("float64", "complex128")]

    @pytest.mark.parametrize(("name", "dtype"), cases)
    def test_gradients_match_finite_differences(name, dtype):
        f, shapes = table[name]
        check_grads(f, shapes, dtype)

    @pytest.mark.parametrize("mode", MODES)
    @pytest.mark.parametrize(("name", "dtype"), cases)
    def test_jvp_matches_finite_differences_and_the_vjp(name, dtype, mode):
        f, shapes = table[name]
        check_jvp(f, shapes, dtype, mode=mode)

    return test_gradients_match_finite_differences, test_jvp_matches_finite_differences_and_the_vjp


def check_hvp(loss, x, a, v, eps: float = 1e-5, rtol: float = 1e-5) -> None:
    """``tl.hvp`` of the scalar ``loss`` with respect to the placeholder ``x`` at ``a`` along
    ``v`` against a central difference of ``tl.grad``: second derivatives through the rules."""
    import numpy as np

    import tenloom as tl

    (hv,) = tl.hvp(loss, [x], [tl.asarray(v)])
    (g,) = tl.grad(loss, [x])
    numeric = (g.evaluate(feed={x: a + eps * v}) - g.evaluate(feed={x: a - eps * v})) / (2 * eps)
    got = hv.evaluate(feed={x: a})
    assert np.max(np.abs(got - numeric)) <= rtol * max(1.0, np.max(np.abs(numeric)))
