"""Intermediate buffers reused between runs (runtime/buffers.py): results never change, outputs
never share memory with a later run, views keep their buffer alive, the pool stays bounded."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import run_in_threads
from hypothesis import given, settings
from hypothesis import strategies as st
from tenloom.runtime import buffers

import tenloom as tl

RNG = np.random.default_rng(0)
N = 96  # 96 x 96 float64 = 72 KiB: above the pooling threshold


def mats(k):
    return [RNG.standard_normal((N, N)) / np.sqrt(N) for _ in range(k)]


def test_outputs_are_never_reused_by_a_later_run():
    a, b, c = mats(3)
    ta, tb, tc = (tl.asarray(x) for x in (a, b, c))
    y = tl.einsum("ij,jk,kl->il", ta, tb, tc)
    first = y.evaluate()
    keep = first.copy()
    for _ in range(3):
        again = y.evaluate()
        assert not np.shares_memory(again, first)
        np.testing.assert_allclose(again, keep, rtol=1e-12)
    np.testing.assert_array_equal(first, keep)  # untouched by the later runs


def test_a_second_run_takes_its_buffers_from_the_pool():
    buffers.clear_pools()
    a, b, c, d = mats(4)
    t = [tl.asarray(x) for x in (a, b, c, d)]
    y = tl.sin(tl.einsum("ij,jk,kl,lm->im", *t)) * 2.0
    y.evaluate()
    assert buffers.held_bytes() > 0  # the first run left its freed intermediates
    taken = []
    real = buffers.Arena.take

    def spy(self, n, dtype):
        before = self.held
        out = real(self, n, dtype)
        taken.append(self.held < before)  # came from the free list
        return out

    buffers.Arena.take = spy
    try:
        np.testing.assert_allclose(y.evaluate(), np.sin(a @ b @ c @ d) * 2.0, rtol=1e-10)
    finally:
        buffers.Arena.take = real
    assert any(taken)


OPS = [
    lambda x, y: x @ y,
    lambda x, y: (x @ y).T,  # a view of a GEMM result
    lambda x, y: tl.einsum("ij,kj->ik", x, y),
    lambda x, y: x[::2].T @ y[::2],  # views of views
    lambda x, y: tl.sin(x) + y,
    lambda x, y: (x * y).reshape((N // 2, 2 * N)).reshape((N, N)),
    lambda x, y: tl.einsum("ij,jk->ki", x, y) * 0.5,
]
# a random graph: steps (op, operand, operand), operands counted among the values so far
STEPS = st.lists(
    st.tuples(st.integers(0, len(OPS) - 1), st.integers(0, 9), st.integers(0, 9)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60)
@given(STEPS)
def test_random_graphs_with_views_match_numpy_on_every_run(steps):
    _random_graph_runs(steps, threads=1)


@settings(max_examples=30)
@given(STEPS)
def test_random_graphs_with_views_on_the_threaded_scheduler(steps):
    # values are held and dropped by the scheduler's loop while workers take buffers
    _random_graph_runs(steps, threads=2)


def _random_graph_runs(steps, threads):
    xs = mats(2)

    def build(a, b, lib):
        pool = [a, b]
        for op, i, j in steps:
            x, y = pool[i % len(pool)], pool[j % len(pool)]
            if lib is np:
                with _numpy_ops():
                    pool.append(OPS[op](x, y))
            else:
                pool.append(OPS[op](x, y))
        return pool[-1], pool[len(pool) // 2]

    want = [np.asarray(w) for w in build(*xs, np)]
    got_t = build(*[tl.asarray(x) for x in xs], tl)
    for _ in range(3):
        got = tl.evaluate(*got_t, threads=threads)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9)


class _numpy_ops:
    """Run OPS on NumPy arrays: tl.sin / tl.einsum stand for NumPy's within the block."""

    def __enter__(self):
        self.saved = tl.sin, tl.einsum
        tl.sin, tl.einsum = np.sin, np.einsum

    def __exit__(self, *exc):
        tl.sin, tl.einsum = self.saved


def test_the_pool_is_bounded(monkeypatch):
    buffers.clear_pools()
    monkeypatch.setattr(buffers, "POOL_BYTES", 100_000)  # room for one 72 KiB buffer
    a, b, c, d = mats(4)
    t = [tl.asarray(x) for x in (a, b, c, d)]
    y = tl.einsum("ij,jk,kl,lm->im", *t)
    for _ in range(3):
        np.testing.assert_allclose(y.evaluate(), a @ b @ c @ d, rtol=1e-10)
        assert buffers.held_bytes() <= 100_000
    assert buffers.clear_pools() <= 100_000
    assert buffers.held_bytes() == 0


def test_no_pool_under_a_memory_limit():
    buffers.clear_pools()
    a, b, c, d = mats(4)
    t = [tl.asarray(x) for x in (a, b, c, d)]
    y = tl.einsum("ij,jk,kl,lm->im", *t)
    for _ in range(2):
        got = tl.evaluate(y, memory_limit="10MB")[0]
        np.testing.assert_allclose(got, a @ b @ c @ d, rtol=1e-10)
    assert buffers.held_bytes() == 0


def test_pooling_can_be_turned_off(monkeypatch):
    buffers.clear_pools()
    monkeypatch.setattr(buffers, "POOL_BYTES", 0)
    a, b, c = mats(3)
    y = tl.einsum("ij,jk,kl->il", *(tl.asarray(x) for x in (a, b, c)))
    np.testing.assert_allclose(y.evaluate(), a @ b @ c, rtol=1e-10)
    assert buffers.held_bytes() == 0


@pytest.mark.parametrize("threads", [1, 2])
def test_concurrent_runs_of_one_plan_use_separate_arenas(threads):
    a, b, c, d = mats(4)
    ph = [tl.placeholder((N, N), "float64", f"x{i}") for i in range(4)]
    plan = tl.compile(tl.einsum("ij,jk,kl,lm->im", *ph), ph, threads=threads)
    inputs = [[x * (k + 1) for x in (a, b, c, d)] for k in range(3)]

    def worker(k):
        want = np.linalg.multi_dot(inputs[k])
        for _ in range(15):
            np.testing.assert_allclose(plan(*inputs[k])[0], want, rtol=1e-10)

    run_in_threads(worker, 3)


def _program(*tensors):
    from tenloom.runtime import evaluate as ev
    from tenloom.runtime.backends import get_backend
    from tenloom.runtime.executor import program_for

    return program_for(ev.optimize_graph(ev.build_graph(tensors), {}), get_backend("cpu", 0))


def test_small_programs_run_without_an_arena():
    x = tl.asarray(np.ones((4, 4)))
    assert not _program(x @ x).pooled
    a, b = mats(2)
    assert _program(tl.asarray(a) @ tl.asarray(b) @ tl.asarray(a)).pooled


def test_a_failed_run_leaves_the_next_run_correct():
    from tenloom.runtime.testing import InjectedFailure, fail_node

    a, b, c = mats(3)
    ta, tb, tc = (tl.asarray(x) for x in (a, b, c))
    y = tl.sin(ta @ tb) @ tc
    want = np.sin(a @ b) @ c
    np.testing.assert_allclose(y.evaluate(), want, rtol=1e-10)
    # the last GEMM fails: the first one's result and the sine's are in arena buffers by then
    last = [s.node for s in _program(y).steps if s.kernel is not None][-1]
    with fail_node(last), pytest.raises(tl.EvaluationError) as info:
        y.evaluate()
    assert isinstance(info.value.__cause__, InjectedFailure)
    for _ in range(2):
        np.testing.assert_allclose(y.evaluate(), want, rtol=1e-10)


def test_a_memory_limit_lets_go_of_kept_buffers():
    a, b, c, d = mats(4)
    y = tl.einsum("ij,jk,kl,lm->im", *(tl.asarray(x) for x in (a, b, c, d)))
    y.evaluate()
    assert buffers.held_bytes() > 0
    np.testing.assert_allclose(tl.evaluate(y, memory_limit="10MB")[0], a @ b @ c @ d, rtol=1e-10)
    assert buffers.held_bytes() == 0


def test_a_buffer_goes_back_only_when_no_value_lives_in_it():
    from tenloom.runtime.buffers import Arena

    arena = Arena()
    buf = arena.take(1 << 14, np.float64)
    slots = [buf.reshape(128, 128), buf.reshape(128, 128).T[::2], None]
    slots[2] = slots[1][1:]  # a view of a view
    del buf
    arena.drop(slots, 0)
    assert slots[0] is None and not any(arena.free.values())  # two views still live in it
    arena.drop(slots, 1)
    assert not any(arena.free.values())  # the view of a view holds it through its base
    outside = slots[2][::3]  # a reference the arena's slots do not know about
    arena.drop(slots, 2)
    assert not any(arena.free.values())
    del outside
    # nothing refers to it now, but only a drop hands it back: take it again and drop it
    again = arena.take(1 << 14, np.float64)
    slots = [again[:10]]
    del again
    arena.drop(slots, 0)
    assert sum(len(b) for b in arena.free.values()) == 1
