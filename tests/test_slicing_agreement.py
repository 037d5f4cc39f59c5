"""explain and evaluate share one slicing decision (issue 22): for a set of memory limits on a
few networks, the sliced indices and slice count that ``tl.explain`` reports are the ones
``evaluate`` runs, whatever ``threads=`` and whichever is called first; a limit one of them
refuses, the other refuses with the same reason. A limit that no slicing can meet raises
MemoryLimitError before any search, naming what fills it (not the largest array)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from tenloom.passes.contraction_order import SEARCHES
from tenloom.passes.slicing import SLICE_SEARCHES
from tenloom.runtime.sliced import LAST_RUN

import tenloom as tl

GREEDY = {"optimize": "greedy"}  # a deterministic search: the same tree in every call


def lattice(n: int, d: int, dtype=np.float64, seed: int = 0):
    """A closed n x n lattice of bond dimension d, as one lazy einsum, and its arrays."""
    rng = np.random.default_rng(seed)
    bonds: dict = {}
    args, arrays = [], []
    for i in range(n):
        for j in range(n):
            labels = [
                bonds.setdefault(tuple(sorted([(i, j), (i + di, j + dj)])), len(bonds))
                for di, dj in ((-1, 0), (1, 0), (0, -1), (0, 1))
                if 0 <= i + di < n and 0 <= j + dj < n
            ]
            a = rng.standard_normal((d,) * len(labels))
            if np.dtype(dtype).kind == "c":
                a = a + 1j * rng.standard_normal(a.shape)
            arrays.append(a.astype(dtype) / d)
            args += [tl.asarray(arrays[-1]), labels]
    return tl.einsum(*args, []), arrays, args


def random_regular(n: int, d: int, seed: int):
    """A random 3-regular complex network (cotengra's generator) as one lazy einsum."""
    import cotengra as ctg

    inputs, output, shapes, _ = ctg.utils.randreg_equation(n, 3, d_min=d, d_max=d, seed=seed)
    rng = np.random.default_rng(seed)
    labels: dict = {}
    args = []
    for t, s in zip(inputs, shapes):
        a = (rng.standard_normal(s) + 1j * rng.standard_normal(s)) / d
        args += [tl.asarray(a), [labels.setdefault(x, len(labels)) for x in t]]
    return tl.einsum(*args, [labels[x] for x in output])


def computed_operands(first: int = 16):
    """A 4 x 4 lattice whose ``first`` operands are computed in the graph (exp of the inputs)."""
    _, _, args = lattice(4, 4, seed=3)
    args = [tl.exp(x) if k < 2 * first and k % 2 == 0 else x for k, x in enumerate(args)]
    return tl.einsum(*args, [])


def norm_gradient(limit, n: int = 3, d: int = 4):
    """The gradients of a complex lattice's real norm <psi|psi> (the bra is ``tl.conj`` of the
    kets) with respect to the kets, sliced under ``limit`` by tl.grad's pre-pass; and the bytes
    that no slicing of its reverse sweep shrinks (its cotangents of the kets and of the bras,
    and the bras, computed in the graph)."""
    _, arrays, args = lattice(n, d, np.complex128, seed=4)
    kets = list(args[0::2])
    shift = 1 + max(max(t) for t in args[1::2])
    ops = []
    for x, t in zip(kets, args[1::2]):
        ops += [x, list(t)]
    for x, t in zip(kets, args[1::2]):
        ops += [tl.conj(x), [lab + shift for lab in t]]
    loss = tl.real(tl.einsum(*ops, []))
    floor = 16 + 3 * sum(a.nbytes for a in arrays)
    return tl.grad(loss, kets, memory_limit=limit, **GREEDY), floor


NETWORKS = {
    "lattice": lambda: (lattice(5, 4)[0],),
    "random_regular": lambda: (random_regular(16, 4, seed=2),),
    "computed_operands": lambda: (computed_operands(first=5),),
}


def explain_plan(ys, limit, **opts) -> list:
    report = tl.explain(*ys, memory_limit=limit, **GREEDY, **opts)
    return [(tuple(s["indices"]), s["slices"]) for s in report.slicing]


def evaluate_plan(ys, limit, threads) -> tuple:
    LAST_RUN.indices, LAST_RUN.slices[:] = (), []
    tl.evaluate(*ys, memory_limit=limit, threads=threads, **GREEDY)
    return LAST_RUN.indices, sum(LAST_RUN.slices)


def outcome(fn):
    """What a call gives: ("ok", value) or ("refused", its message without the caller)."""
    try:
        return "ok", fn()
    except tl.MemoryLimitError as e:
        return "refused", re.sub(r"^\w+: ", "", str(e))


def unsliced_peak(ys) -> int:
    return tl.explain(*ys, **GREEDY).after.peak_bytes


@pytest.mark.parametrize("first", ["explain", "evaluate"])
@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_explain_and_evaluate_agree_on_the_slicing(name, first):
    ys = NETWORKS[name]()
    peak = unsliced_peak(ys)
    sliced_somewhere = False
    for fraction in (2, 4, 6, 64):  # the last: an input alone exceeds it
        limit = peak // fraction
        tl.clear_caches()  # each order from a cold start: neither reuses the other's search
        calls = {
            "explain": lambda: explain_plan(ys, limit),
            "evaluate": lambda: evaluate_plan(ys, limit, threads=2),
        }
        order = [first, *(k for k in calls if k != first)]
        got = {k: outcome(calls[k]) for k in order}
        assert got["explain"][0] == got["evaluate"][0], (name, limit, got)
        if got["explain"][0] == "refused":
            assert got["explain"][1] == got["evaluate"][1]
            continue
        (plan,) = got["explain"][1]
        assert got["evaluate"][1] == plan, (name, limit, got)
        sliced_somewhere |= plan[1] > 1
        # other thread counts and explain with threads= run the same slicing: no re-planning
        assert evaluate_plan(ys, limit, threads=1) == plan
        assert explain_plan(ys, limit, threads=3) == [plan]
        assert evaluate_plan(ys, limit, threads=3) == plan
    assert sliced_somewhere, name


def test_a_sliced_gradient_is_explained_as_it_runs():
    _, floor = norm_gradient(None)
    whole = None
    outcomes = []
    for factor in (1.2, 1.5, 2):  # 1.2: the reshapes after the sweep peak over the limit
        limit = int(factor * floor)
        tl.clear_caches()
        grads, _ = norm_gradient(limit)
        explained = outcome(lambda: explain_plan(grads, limit))
        ran = outcome(lambda: evaluate_plan(grads, limit, threads=2))
        outcomes.append(explained[0])
        assert explained[0] == ran[0], (limit, explained, ran)
        if explained[0] == "refused":
            assert explained[1] == ran[1]
            assert "the peak is at" in ran[1]
            continue
        plans = explained[1]
        assert plans and all(p == plans[0] for p in plans)  # the forward and reverse sweeps
        assert plans[0][1] > 1 and ran[1] == plans[-1]
        assert evaluate_plan(grads, limit, threads=1) == plans[-1]
        if whole is None:
            whole = tl.evaluate(*norm_gradient(None)[0], **GREEDY)
        for got, want in zip(tl.evaluate(*grads, memory_limit=limit, **GREEDY), whole):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    assert outcomes == ["refused", "ok", "ok"]


def _searches() -> tuple[int, int]:
    return SEARCHES["n"], SLICE_SEARCHES["n"]


@pytest.mark.parametrize("caller", ["explain", "evaluate"])
def test_unmeetable_limits_fail_before_any_search_naming_the_reason(caller):
    run = {
        "explain": lambda ys, limit: tl.explain(*ys, memory_limit=limit, **GREEDY),
        "evaluate": lambda ys, limit: tl.evaluate(*ys, memory_limit=limit, **GREEDY),
    }[caller]
    y, arrays, _ = lattice(4, 6, seed=5)  # corner inputs 288 bytes, edges 1728, bulk 10368
    tl.clear_caches()
    before = _searches()
    with pytest.raises(tl.MemoryLimitError, match=rf"{caller}: input .* alone needs 10368 bytes"):
        run((y,), 5000)
    assert _searches() == before
    v = tl.einsum("ij,jk->ik", tl.asarray(np.ones((40, 3))), tl.asarray(np.ones((3, 40))))
    with pytest.raises(tl.MemoryLimitError, match=rf"{caller}: the outputs alone need 12800"):
        run((v,), 4000)
    assert _searches() == before
    # operands computed in the graph (exp of each input) fill the limit: refused without a
    # slicing search, naming them
    y = computed_operands()
    with pytest.raises(
        tl.MemoryLimitError, match=r"operands computed in the graph \(\d+ bytes\) need .* bytes"
    ) as info:
        run((y,), 3000)
    assert "largest array" not in str(info.value)
    assert _searches()[1] == before[1]


def test_a_reverse_sweep_whose_cotangents_fill_the_limit_is_refused_before_slicing():
    tl.clear_caches()
    before = SLICE_SEARCHES["n"]
    # every operand far below the limit, but the cotangents of all 18 operands, the bras and
    # the output fill it
    _, floor = norm_gradient(None)
    with pytest.raises(tl.MemoryLimitError, match="reverse sweep's operand cotangents") as info:
        norm_gradient(floor - 1)
    assert f"need {floor} bytes together" in str(info.value)
    assert SLICE_SEARCHES["n"] == before


def test_a_limit_met_only_by_a_runaway_slicing_is_refused_alike(monkeypatch):
    import tenloom.passes.slicing as slicing

    y = lattice(5, 4)[0]
    limit = unsliced_peak((y,)) // 6
    plan = explain_plan((y,), limit)[0]
    overhead = tl.explain(y, memory_limit=limit, **GREEDY).slicing[0]["overhead"]
    assert plan[1] > 1 and overhead > 1.0
    monkeypatch.setattr(slicing, "MAX_SLICING_OVERHEAD", 1.0)
    messages = []
    for caller in ("explain", "evaluate"):
        with pytest.raises(
            tl.MemoryLimitError, match=rf"{caller}: memory_limit={limit} bytes"
        ) as e:
            explain_plan((y,), limit) if caller == "explain" else evaluate_plan((y,), limit, 2)
        messages.append(re.sub(r"^\w+: ", "", str(e.value)))
    assert messages[0] == messages[1]
    assert f"into {plan[1]} slices" in messages[0] and "MAX_SLICING_OVERHEAD=1.0x" in messages[0]
