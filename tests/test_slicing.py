"""memory_limit by slicing: sliced networks match unsliced ones, stay within the limit
(tracemalloc), run over threads and Dask, and differentiate slice by slice."""

from __future__ import annotations

import os
import signal
import time
import tracemalloc

import numpy as np
import pytest
from tenloom.graph.node import make_node
from tenloom.graph.ops import Op
from tenloom.graph.traverse import toposort
from tenloom.passes import contraction_order as order_pass
from tenloom.passes import slicing
from tenloom.runtime import evaluate as ev
from tenloom.runtime import testing
from tenloom.runtime.sliced import LAST_RUN

import tenloom as tl

RNG = np.random.default_rng(7)


def lattice(n: int, m: int, d: int, dtype=np.float64, seed: int = 0):
    """A closed n x m lattice network of bond dimension d: (tensors, arrays, tl.einsum args)."""
    rng = np.random.default_rng(seed)
    bonds: dict = {}

    def bond(a, b):
        return bonds.setdefault((min(a, b), max(a, b)), len(bonds))

    args, arrays = [], []
    for i in range(n):
        for j in range(m):
            labels = [
                bond((i, j), (i + di, j + dj))
                for di, dj in ((-1, 0), (1, 0), (0, -1), (0, 1))
                if 0 <= i + di < n and 0 <= j + dj < m
            ]
            a = rng.standard_normal((d,) * len(labels))
            if np.dtype(dtype).kind == "c":
                a = a + 1j * rng.standard_normal(a.shape)
            a = (a / np.sqrt(a.size) * 2).astype(dtype)
            arrays.append(a)
            args += [tl.asarray(a), labels]
    args.append([])
    return arrays, args


def traced_peak(fn):
    # buffers kept from earlier runs would be reused unseen by tracemalloc: start from none
    from tenloom.runtime.buffers import clear_pools

    clear_pools()
    tracemalloc.start()
    try:
        out = fn()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def sliced_nodes(*tensors):
    graph = ev.optimize_graph(ev.build_graph(tensors), {"optimize": "greedy"})
    return [n for n in graph.order if n.op is Op.SLICED]


def test_sliced_network_matches_and_stays_within_the_limit():
    # host memory (tracemalloc): pinned to the CPU whatever device the suite runs on
    arrays, args = lattice(6, 6, 6)
    y = tl.einsum(*args)
    expected, unsliced_peak = traced_peak(lambda: y.evaluate(optimize="greedy", device="cpu"))
    limit = unsliced_peak // 4
    report = tl.explain(y, optimize="greedy", memory_limit=limit)
    assert report.slicing and report.slicing[0]["slices"] > 1
    assert "sliced over" in str(report)
    y.evaluate(
        optimize="greedy", device="cpu", memory_limit=limit
    )  # search and compile outside the trace
    got, peak = traced_peak(lambda: y.evaluate(optimize="greedy", device="cpu", memory_limit=limit))
    assert peak <= limit, (peak, limit, unsliced_peak)
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    assert sum(LAST_RUN.slices) == report.slicing[0]["slices"]


def test_limit_as_string_and_threads_and_determinism():
    arrays, args = lattice(5, 5, 6, seed=1)
    y = tl.einsum(*args)
    expected = y.evaluate(optimize="greedy")
    for threads in (1, 2):
        got = y.evaluate(optimize="greedy", memory_limit="200 KB", threads=threads)
        np.testing.assert_allclose(got, expected, rtol=1e-10)
    assert len(LAST_RUN.workers) == 2 and sum(LAST_RUN.slices) == 36
    runs = {
        y.evaluate(
            optimize="greedy", memory_limit="200 KB", threads=2, deterministic=True
        ).tobytes()
        for _ in range(20)
    }
    assert len(runs) == 1
    assert LAST_RUN.slices == [18, 18]  # dealt round-robin


def test_limit_that_no_slicing_meets_raises_at_once_without_search():
    big = tl.asarray(RNG.standard_normal((200, 200)))  # 320 kB input
    small = tl.asarray(RNG.standard_normal((200, 3)))
    searches, slice_searches, passes = (
        order_pass.SEARCHES["n"],
        slicing.SLICE_SEARCHES["n"],
        ev.PASS_RUNS["n"],
    )
    t0 = time.perf_counter()
    with pytest.raises(tl.MemoryLimitError, match="input const float64\\(200, 200\\) alone"):
        tl.einsum("ij,jk,il->", big, small, small).evaluate(memory_limit=100_000)
    with pytest.raises(tl.MemoryLimitError, match="outputs alone need"):
        tl.einsum("ij,kl->ijkl", small, small).evaluate(memory_limit=100_000)
    assert time.perf_counter() - t0 < 2.0
    assert order_pass.SEARCHES["n"] == searches
    assert slicing.SLICE_SEARCHES["n"] == slice_searches
    assert ev.PASS_RUNS["n"] == passes


def _sliced_node(terms, out, sliced, arrays, wrt=None, ct=None):
    inputs = [tl.asarray(a).node for a in arrays]
    if wrt is not None:
        inputs.append(tl.asarray(ct).node)
    sizes = {lab: s for a, t in zip(arrays, terms) for lab, s in zip(t, a.shape)}
    path = tuple((0, 1) if i == 0 else (len(terms) + i - 1, i + 1) for i in range(len(terms) - 1))
    sl = tuple((lab, sizes[lab]) for lab in sliced)
    return tl.Tensor(make_node(Op.SLICED, tuple(inputs), (terms, out, sl, path, wrt, None)))


@pytest.mark.parametrize("sliced", [(1,), (0,), (0, 3), (1, 2, 4)])
def test_sliced_node_places_output_indices_and_sums_the_others(sliced):
    a = RNG.standard_normal((3, 4, 5))
    b = RNG.standard_normal((5, 4, 2))
    c = RNG.standard_normal((2, 6)) + 1j * RNG.standard_normal((2, 6))
    terms = ((0, 1, 2), (2, 1, 3), (3, 4))
    y = _sliced_node(terms, (0, 4), sliced, [a, b, c])
    expected = np.einsum("abc,cbd,de->ae", a, b, c)
    np.testing.assert_allclose(y.evaluate(passes=()), expected, rtol=1e-12)
    np.testing.assert_allclose(y.evaluate(passes=(), threads=2), expected, rtol=1e-12)
    # the reverse sweep: cotangents of every operand, flat, against the unsliced VJP
    ct = RNG.standard_normal((3, 6)) + 1j * RNG.standard_normal((3, 6))
    flat = _sliced_node(terms, (0, 4), sliced, [a, b, c], wrt=(0, 1, 2), ct=ct)
    ta, tb, tc = (tl.asarray(x) for x in (a, b, c))
    want = tl.vjp(tl.einsum("abc,cbd,de->ae", ta, tb, tc), [ta, tb, tc], [tl.asarray(ct)])
    want = np.concatenate([np.ravel(w) for w in tl.evaluate(*want)])
    got = flat.evaluate(passes=())
    np.testing.assert_allclose(got.real, want.real, rtol=1e-10, atol=1e-12)


def test_sliced_node_checks_its_attributes():
    a = tl.asarray(np.ones((3, 4))).node
    b = tl.asarray(np.ones((4, 3))).node
    good = (((0, 1), (1, 2)), (0, 2), ((1, 4),), ((0, 1),), None, None)
    assert make_node(Op.SLICED, (a, b), good).shape == (3, 3)
    with pytest.raises(tl.ShapeError, match="sliced label 5"):
        make_node(Op.SLICED, (a, b), (((0, 1), (1, 2)), (0, 2), ((5, 2),), ((0, 1),), None, None))
    with pytest.raises(tl.ShapeError, match="label 1 has size 4 and 3"):
        make_node(Op.SLICED, (a, a), (((0, 1), (1, 0)), (), ((0, 3),), ((0, 1),), None, None))
    with pytest.raises(tl.ShapeError, match="not a pairwise path"):
        make_node(Op.SLICED, (a, b), (((0, 1), (1, 2)), (0, 2), ((0, 3),), ((0, 5),), None, None))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_sliced_gradient_equals_unsliced_and_stays_within_the_limit(dtype):
    arrays, args = lattice(5, 5, 7, dtype=dtype, seed=3)
    tensors = args[0:-1:2]
    amp = tl.einsum(*args)
    loss = tl.real(amp * tl.conj(amp)) if np.dtype(dtype).kind == "c" else amp * amp
    grads = tl.grad(loss, tensors, optimize="greedy")
    tl.evaluate(*grads, device="cpu", optimize="greedy")
    plain, unsliced_peak = traced_peak(lambda: tl.evaluate(*grads, device="cpu", optimize="greedy"))
    limit = unsliced_peak // 3
    grads = tl.grad(loss, tensors, optimize="greedy", memory_limit=limit)
    kinds = {n.attrs[4] is None for n in toposort([g.node for g in grads]) if n.op is Op.SLICED}
    assert kinds == {True, False}  # the forward network and its reverse sweep, both sliced
    tl.evaluate(*grads, device="cpu", optimize="greedy", memory_limit=limit)
    got, peak = traced_peak(
        lambda: tl.evaluate(*grads, device="cpu", optimize="greedy", memory_limit=limit)
    )
    assert peak <= limit, (peak, limit, unsliced_peak)
    for g, p in zip(got, plain):
        np.testing.assert_allclose(g, p, rtol=1e-9, atol=1e-12 * np.abs(p).max())


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_sliced_jvp_is_one_forward_mode_network_within_the_limit(dtype):
    from tenloom.graph.ops.sliced import forward_positions
    from tenloom.passes.cost import graph_flops

    arrays, args = lattice(4, 5, 5, dtype=dtype, seed=5)
    tensors = args[0:-1:2]
    rng = np.random.default_rng(6)
    tangents = []
    for a in arrays:
        t = rng.standard_normal(a.shape)
        if np.dtype(dtype).kind == "c":
            t = t + 1j * rng.standard_normal(a.shape)
        tangents.append(tl.asarray(t.astype(dtype)))
    y = tl.einsum(*args)
    # host memory (tracemalloc): pinned to the CPU whatever device the suite runs on
    cpu = {"device": "cpu", "optimize": "greedy"}
    plain = tl.evaluate(tl.jvp(y, tensors, tangents, optimize="greedy"), **cpu)[0]
    _, unsliced_peak = traced_peak(lambda: y.evaluate(**cpu))
    limit = unsliced_peak // 2
    t = tl.jvp(y, tensors, tangents, optimize="greedy", memory_limit=limit)
    nodes = [n for n in toposort([t.node]) if n.op is Op.SLICED]
    forward = [n for n in nodes if forward_positions(n.attrs[4]) is not None]
    assert len(forward) == 1 and len(nodes) <= 2  # not one sliced network per operand
    assert forward[0].attrs[4] == tuple(-1 - k for k in range(len(tensors)))
    # one tangent sweep, a small multiple of the forward network: far below one sliced network
    # per operand (20 of them)
    opts = {"optimize": "greedy", "memory_limit": limit}
    graph = ev.optimize_graph(ev.build_graph((t,)), opts)
    value = ev.optimize_graph(ev.build_graph((y,)), opts)
    assert graph_flops(graph) <= 0.4 * len(tensors) * graph_flops(value)
    tl.evaluate(t, memory_limit=limit, **cpu)
    got, peak = traced_peak(lambda: tl.evaluate(t, memory_limit=limit, **cpu)[0])
    assert peak <= limit, (peak, limit)
    np.testing.assert_allclose(got, plain, rtol=1e-9, atol=1e-12 * abs(plain))
    # finite differences along the tangents
    eps = 1e-6
    shifted = [
        tl.asarray(a + eps * np.asarray(tl.evaluate(tg)[0]).astype(dtype))
        for a, tg in zip(arrays, tangents)
    ]
    up = tl.einsum(*[x for pair in zip(shifted, args[1::2]) for x in pair], [])
    fd = (complex(up.evaluate()) - complex(y.evaluate())) / eps
    assert abs(complex(got) - fd) <= 1e-4 * max(1.0, abs(fd))


def test_a_forward_mode_network_cannot_be_differentiated_again():
    arrays, args = lattice(3, 3, 3, seed=2)
    tensors = args[0:-1:2]
    t = tl.jvp(tl.einsum(*args), tensors, tensors, optimize="greedy", memory_limit=2000)
    with pytest.raises(tl.DTypeError, match="derivative sweep"):
        tl.grad(t, tensors)


# ---- Dask -------------------------------------------------------------------------------------


def _distributed():
    try:
        import distributed
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("dask.distributed is missing; the test extra installs it")
        pytest.skip("dask.distributed is not installed")
    return distributed


@pytest.fixture(scope="module")
def client():
    distributed = _distributed()
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_dask_cluster_matches_local(client):
    arrays, args = lattice(5, 5, 6, seed=4)
    y = tl.einsum(*args)
    local = y.evaluate(optimize="greedy", memory_limit="200 KB")
    remote = y.evaluate(optimize="greedy", memory_limit="200 KB", scheduler=client)
    np.testing.assert_allclose(remote, local, rtol=1e-12)


def test_dask_finishes_when_a_worker_dies_mid_run(client, monkeypatch):
    arrays, args = lattice(5, 5, 6, seed=5)
    y = tl.einsum(*args)
    local = y.evaluate(optimize="greedy", memory_limit="100 KB")
    monkeypatch.setattr(testing, "slice_delay", 0.3)
    pids = client.run(os.getpid)
    fut = tl.evaluate_async(y, optimize="greedy", memory_limit="100 KB", scheduler=client)
    victim = None
    deadline = time.monotonic() + 30
    while victim is None and time.monotonic() < deadline:
        busy = {w: ts for w, ts in client.processing().items() if ts and w in pids}
        if len(busy) == 2 and not fut.done():
            victim = sorted(busy)[0]
        else:
            time.sleep(0.02)
    assert victim is not None, "tasks never reached both workers"
    os.kill(pids[victim], signal.SIGKILL)
    assert not fut.done()  # it died while its tasks were pending
    (remote,) = fut.result(timeout=120)
    np.testing.assert_allclose(remote, local, rtol=1e-12)
    assert pids[victim] not in client.run(os.getpid).values()


def test_scheduler_must_be_a_client():
    y = tl.asarray(np.ones(3)).sum()
    with pytest.raises(TypeError, match="not a dask.distributed.Client"):
        y.evaluate(scheduler=object())


def test_dask_slice_tasks_run_under_the_callers_deterministic_flag(monkeypatch):
    # a Dask task runs in another thread or process, where the caller's context is not set:
    # the flag travels with the task (kernels must not time their plans under it)
    from tenloom.runtime import sliced
    from tenloom.runtime.determinism import DETERMINISTIC

    arrays, args = lattice(4, 4, 4, seed=6)
    y = tl.einsum(*args)
    g = ev.optimize_graph(ev.build_graph((y,)), {"optimize": "greedy", "memory_limit": "20 KB"})
    node = next(n for n in g.order if n.op is Op.SLICED)
    host = [n.attrs[0].value for n in node.inputs]
    from tenloom.runtime.capture import BUDGET, CUDA_GRAPHS

    seen = []
    run = sliced._Worker.run
    monkeypatch.setattr(
        sliced._Worker,
        "run",
        lambda w, k: (
            seen.append((DETERMINISTIC.get(), CUDA_GRAPHS.get(), BUDGET.get())),
            run(w, k),
        ),
    )
    shapes = tuple(x.shape for x in node.inputs)
    dtypes = tuple(x.dtype.str for x in node.inputs)
    for det, graphs, budget in ((True, False, None), (False, True, 12345), (False, False, 0)):
        seen.clear()
        args = (node.attrs, shapes, dtypes, "cpu", 0, 2, 0.0, det, graphs, budget)
        sliced.run_chunk(*args, *host)
        assert seen == [(det, graphs, budget)] * 2
    # and the task leaves all three as it found them
    assert DETERMINISTIC.get() is False and CUDA_GRAPHS.get() is True and BUDGET.get() is None


def test_slicing_a_start_stops_once_it_is_as_dear_as_the_best_found():
    from tenloom.passes.slicing import DearerError, slice_to_fit

    terms = [(i, (i + 1) % 8) for i in range(8)]  # a ring of 16 x 16 matrices
    sizes = dict.fromkeys(range(8), 16)
    chain = tuple((0, 1) if k == 0 else (k + 1, 7 + k) for k in range(7))
    found = slice_to_fit(terms, (), sizes, chain, 8, 1500)
    assert found is not None and found[0]  # sliced to fit
    # the same search, told a tree of fewer multiply-adds exists already, gives up
    with pytest.raises(DearerError):
        slice_to_fit(terms, (), sizes, chain, 8, 1400, bound=1.0)  # (1500 is cached)
