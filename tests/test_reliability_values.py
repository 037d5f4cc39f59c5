"""Value semantics of user arrays (issue 18, class 1): ``tl.asarray`` does not copy, and an
evaluation reads a constant's values when it runs, so an expression built after an in-place
change always sees the new values -- on every backend, through every cache (the optimized-graph
cache of ``evaluate``, folded reductions of constants, device copies of constants). A compiled
plan captures its constants' values when it is compiled.

Runs on the CPU, on OpenCL where a device is present (PoCL in CI) and on CUDA where a GPU is.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import device_params

import tenloom as tl

DEVICES = device_params()
RNG = np.random.default_rng(18)


def _ev(t, device):
    return t.evaluate(device=device)


# ---- the issue's examples, as a class: every reduction of a constant ---------------------------

BUILDERS = {
    "einsum-sum": lambda x: tl.einsum("i->", x),
    "sum": lambda x: tl.sum(tl.asarray(x)),
    "mean": lambda x: tl.mean(tl.asarray(x)),
    "diag-network": lambda x: tl.einsum("iij,j->i", x.reshape(3, 3, 1)[:, :, [0, 0]], np.ones(2)),
    "trace": lambda x: tl.trace(tl.asarray(x.reshape(3, 3))),
    "lone-index": lambda x: tl.einsum("ij,jk->k", x.reshape(3, 3), np.ones((3, 2))),
    "sum-axis": lambda x: tl.sum(tl.asarray(x.reshape(3, 3)), axis=0),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_expression_built_after_in_place_change_sees_new_values(name, device):
    build = BUILDERS[name]
    x = np.zeros(9)
    first = _ev(build(x), device)
    x[:] = np.arange(1.0, 10.0)
    # a fresh expression over the same (mutated) array: it hash-conses to the same node and
    # hits evaluate's cache, which must not hold values folded from the old contents
    again = _ev(build(x), device)
    ref_build = BUILDERS[name]
    fresh = _ev(ref_build(x.copy()), "cpu")
    np.testing.assert_allclose(again, fresh)
    assert not np.allclose(first, again) or np.allclose(fresh, first)


def test_examples_from_the_issue():
    x = np.zeros(3)
    tl.einsum("i->", x).evaluate()
    x[:] = 1
    assert tl.einsum("i->", x).evaluate() == 3.0
    y = np.zeros((2, 2, 3))
    v = np.ones(3)
    tl.einsum("iij,j->i", y, v).evaluate()
    y[:] = 1
    np.testing.assert_array_equal(tl.einsum("iij,j->i", y, v).evaluate(), [3.0, 3.0])


@pytest.mark.parametrize("device", DEVICES)
def test_same_tensor_evaluated_after_change_reads_current_values(device):
    a = RNG.standard_normal((4, 4)).astype(np.float32)
    t = tl.trace(tl.asarray(a) @ tl.asarray(a)) + tl.sum(tl.asarray(a))
    for _ in range(3):
        got = _ev(t, device)
        np.testing.assert_allclose(got, np.trace(a @ a) + a.sum(), rtol=1e-5)
        a *= 1.5  # in place


# ---- loops the way the field writes them ---------------------------------------------------------


def _mps(n: int, d: int, chi: int, dtype) -> list[np.ndarray]:
    shapes = [(1, d, chi)] + [(chi, d, chi)] * (n - 2) + [(chi, d, 1)]
    return [RNG.standard_normal(s).astype(dtype) for s in shapes]


def _norm_np(mps: list[np.ndarray]) -> float:
    env = np.ones((1, 1))
    for a in mps:
        env = np.einsum("ab,apc,bpd->cd", env, a.conj(), a)
    return env.item()


def _norm_tl(mps: list[np.ndarray]):
    env = tl.ones((1, 1))
    for a in mps:
        env = tl.einsum("ab,apc,bpd->cd", env, tl.conj(tl.asarray(a)), a)
    return tl.sum(env)


@pytest.mark.parametrize("device", DEVICES)
def test_dmrg_like_sweep_updates_tensors_in_place(device):
    """A sweep rewrites each site tensor in place (``A[:] = new``) and rebuilds the norm lazily
    after every update: each evaluation must see every update made so far."""
    mps = _mps(5, 2, 3, np.float32)
    for _sweep in range(2):
        for k in range(len(mps)):
            mps[k][...] = RNG.standard_normal(mps[k].shape).astype(np.float32)
            mps[k] /= np.linalg.norm(mps[k])
            got = _ev(_norm_tl(mps), device)
            np.testing.assert_allclose(got, _norm_np(mps), rtol=2e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_tebd_like_gate_loop_writes_back_in_place(device):
    """Apply a two-site gate, write the result back into the same arrays, repeat."""
    psi = RNG.standard_normal((2, 2, 2)).astype(np.float32)
    gate = RNG.standard_normal((2, 2, 2, 2)).astype(np.float32)
    ref = psi.copy()
    for _ in range(4):
        new = _ev(tl.einsum("abij,ijc->abc", gate, psi), device)
        ref = np.einsum("abij,ijc->abc", gate, ref)
        psi[...] = new / np.abs(new).max()
        ref = ref / np.abs(ref).max()
        # a reduction of the constant that the passes would fold if it could not change
        norm = _ev(tl.einsum("abc,abc->", psi, psi), device)
        np.testing.assert_allclose(norm, np.sum(ref * ref), rtol=1e-4)
    np.testing.assert_allclose(psi, ref, rtol=1e-4, atol=1e-6)


# ---- what a compiled plan captures -----------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES)
def test_compiled_plan_captures_constants_at_compile_time(device):
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    x = tl.placeholder((3,), dtype="float32", name="x")
    plan = tl.compile([tl.asarray(a) @ x + tl.sum(tl.asarray(a))], inputs=[x], device=device)
    v = np.ones(3, dtype=np.float32)
    before = a @ v + a.sum()
    np.testing.assert_allclose(plan(v)[0], before)
    a[:] = -1.0  # the plan keeps the values it was compiled with
    np.testing.assert_allclose(plan(v)[0], before)
    # ... while a fresh expression sees the new ones
    np.testing.assert_allclose(_ev(tl.asarray(a) @ v, device), a @ v)


def test_function_captures_closed_over_arrays_at_first_trace():
    w = np.full((2, 2), 2.0)

    @tl.function
    def f(x):
        return tl.asarray(w) @ x

    v = np.ones(2)
    np.testing.assert_allclose(f(v), [4.0, 4.0])
    w[:] = 0.0
    np.testing.assert_allclose(f(v), [4.0, 4.0])  # traced once per signature, as jax.jit


# ---- frozen constants keep their fast paths ---------------------------------------------------


def test_is_frozen_follows_the_base_chain():
    from tenloom.graph.ops.leaf import frozen, is_frozen

    a = np.zeros(4)
    assert not is_frozen(a)
    view = a[1:]
    view.flags.writeable = False
    assert not is_frozen(view)  # the base can still be written
    b = frozen(a)
    assert b is not a and is_frozen(b) and is_frozen(b[::2])
    assert frozen(b) is b
    assert is_frozen(np.frombuffer(b"\0" * 16))


def test_reductions_of_frozen_constants_fold_and_writeable_ones_do_not():
    def folded(arr) -> int:
        report = tl.explain(tl.einsum("iij,jk->k", arr, np.ones((2, 3))))
        (row,) = [r for r in report.rows if r.stage == "prereduce"]
        return row.stats.get("constants_folded", 0)

    x = RNG.standard_normal((3, 3, 2))
    assert folded(x) == 0
    y = x.copy()
    y.flags.writeable = False
    assert folded(y) >= 1
    np.testing.assert_allclose(
        tl.einsum("iij,jk->k", y, np.ones((2, 3))).evaluate(),
        np.einsum("iij,jk->k", x, np.ones((2, 3))),
    )


@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu"])
def test_device_copies_kept_only_for_frozen_constants(device):
    from tenloom.graph.ops.leaf import frozen
    from tenloom.runtime.backends import get_backend
    from tenloom.runtime.evaluate import parse_device

    backend = get_backend(*parse_device(device))
    a = np.ones(5, dtype=np.float32)
    first = backend.from_host(a, True)
    a[:] = 2.0
    second = backend.from_host(a, True)
    np.testing.assert_array_equal(backend.to_host(second), a)
    assert second is not first
    b = frozen(np.ones(5, dtype=np.float32))
    assert backend.from_host(b, True) is backend.from_host(b, True)


def test_shape_or_dtype_set_in_place_makes_a_new_constant():
    # ``arr.shape = ...`` and ``arr.dtype = ...`` change the same array object in place (NumPy
    # discourages it but allows it): an expression built afterwards must see the new shape and
    # dtype. The node hash-consed by array identity alone kept the old ones: float64 results of
    # an int64 array, a (4,)-node over a (2, 2) array.
    a = np.arange(4.0)
    before = tl.asarray(a)
    assert tl.sum(before, axis=0).evaluate() == 6.0
    a.shape = (2, 2)
    after = tl.asarray(a)
    assert after.shape == (2, 2)
    np.testing.assert_array_equal(tl.sum(after, axis=0).evaluate(), a.sum(axis=0))
    b = np.arange(4.0)
    kept = tl.asarray(b)
    np.testing.assert_array_equal((kept + 1).evaluate(), b + 1)
    b.dtype = np.int64
    got = (tl.asarray(b) + 1).evaluate()
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, b + 1)


@pytest.mark.parametrize("device", DEVICES)
def test_a_frozen_array_made_writeable_again_is_read_anew(device):
    # A read-only array that owns its data can be made writeable again and changed: what was
    # derived from it while frozen (a folded reduction in the cached optimized graph, a device
    # copy bound into the cached program) must not be used after that. Both were: 15.0 and
    # 0, 2, 4, ... after b[:] = 3.
    b = np.arange(6.0)
    b.flags.writeable = False
    total, doubled = tl.einsum("i->", b), tl.asarray(b) * 2
    assert total.evaluate(device=device) == 15.0
    np.testing.assert_array_equal(doubled.evaluate(device=device), np.arange(6.0) * 2)
    b.flags.writeable = True
    b[:] = 3.0
    for _ in range(2):  # the same expressions, and built again
        assert total.evaluate(device=device) == 18.0
        np.testing.assert_array_equal(doubled.evaluate(device=device), np.full(6, 6.0))
        total, doubled = tl.einsum("i->", b), tl.asarray(b) * 2
