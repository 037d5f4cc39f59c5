"""issue 23: capture and replay of compiled programs as CUDA graphs (runtime/capture.py,
runtime/backends/cuda_graphs.py). The option and the segment plan are checked everywhere; the
captures themselves where a CUDA GPU is (TENLOOM_TEST_DEVICE=cuda:0 on the device machine)."""

from __future__ import annotations

import numpy as np
import pytest
from tenloom.graph.errors import GraphFormatError, OptionTypeError
from tenloom.graph.ops import Op
from tenloom.runtime.capture import (
    BUDGET,
    CUDA_GRAPHS,
    describe,
    graphs_mode,
    plan_segments,
    why_not,
)

import tenloom as tl

RNG = np.random.default_rng(23)


def _gpu() -> bool:
    try:
        import cupy as cp

        return cp.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


cuda = pytest.mark.skipif(not _gpu(), reason="no CUDA GPU present")


def _lattice(n: int, d: int, dtype="float32", seed=1):
    """A closed n x n lattice of bond dimension d as tl.asarray constants: (value, tensors)."""
    import cotengra as ctg

    inputs, output, shapes, _ = ctg.utils.lattice_equation([n, n], d_min=d, d_max=d, seed=seed)
    rng = np.random.default_rng(seed)
    labels: dict = {}
    ts, args = [], []
    for term, s in zip(inputs, shapes):
        t = tl.asarray((rng.standard_normal(s) / np.prod(s) ** 0.25).astype(dtype))
        ts.append(t)
        args += [t, [labels.setdefault(x, len(labels)) for x in term]]
    args.append([labels[x] for x in output])
    return tl.einsum(*args), ts


# ---- everywhere: the option, the plan of segments --------------------------------------------


@pytest.mark.parametrize("bad", [1, "yes", None, 0.0])
def test_cuda_graphs_takes_a_bool_only(bad):
    t = tl.asarray(np.ones((3, 4))) @ tl.asarray(np.ones((4, 2)))
    with pytest.raises(OptionTypeError, match=r"cuda_graphs=.*accepted: True or False"):
        t.evaluate(cuda_graphs=bad)
    x = tl.placeholder((3,), "float64", name="x")
    with pytest.raises(OptionTypeError, match="cuda_graphs"):
        tl.compile([x * 2], [x], cuda_graphs=bad)


def test_cuda_graphs_changes_nothing_on_the_cpu():
    a, b = RNG.standard_normal((5, 6)), RNG.standard_normal((6, 7))
    t = tl.exp(tl.asarray(a) @ tl.asarray(b))
    for on in (True, False):
        got = t.evaluate(device="cpu", cuda_graphs=on)
        np.testing.assert_allclose(got, np.exp(a @ b), rtol=1e-12)
    assert tl.explain(t, device="cpu").cuda_graphs is None  # the CPU: no capture to explain
    assert tl.explain(t, device="cpu").captured_segments == 0


def test_runs_that_go_step_by_step_whatever_their_program():
    from tenloom.passes.options import Options
    from tenloom.runtime.capture import run_off_reason
    from tenloom.runtime.session import run_context

    assert run_off_reason(Options(), 1) is None
    cases = {
        "cuda_graphs=False": (Options(cuda_graphs=False), 1),
        "progress=True": (Options(progress=True), 1),
        "precision='tf32'": (Options(precision="tf32"), 1),
        "threads>1": (Options(), 2),
        "deterministic=True": (Options(deterministic=True), 1),
    }
    for what, (o, threads) in cases.items():
        assert what in run_off_reason(o, threads)
    with run_context(Options(deterministic=True), ["cpu"], 1):
        assert CUDA_GRAPHS.get() is False
    with run_context(Options(), ["cpu"], 1):
        assert CUDA_GRAPHS.get() is True and BUDGET.get() is None
    # a memory limit captures slice programs only (runtime/sliced.py gives each its budget):
    # the run's own programs get none
    assert run_off_reason(Options(memory_limit=1 << 20), 1) is None
    with run_context(Options(memory_limit=1 << 20), ["cpu"], 1):
        assert CUDA_GRAPHS.get() is True and BUDGET.get() == 0
    assert BUDGET.get() is None


def test_run_context_sets_the_setting_and_restores_it():
    assert CUDA_GRAPHS.get() is True
    with graphs_mode(False):
        assert CUDA_GRAPHS.get() is False
        with graphs_mode(True):
            assert CUDA_GRAPHS.get() is True
        assert CUDA_GRAPHS.get() is False
    assert CUDA_GRAPHS.get() is True


def test_saved_plan_keeps_cuda_graphs(tmp_path):
    x = tl.placeholder((4,), "float64", name="x")
    plan = tl.compile([tl.sin(x) * 3], [x], cuda_graphs=False)
    plan.save(tmp_path / "p.json")
    loaded = tl.load(tmp_path / "p.json")
    assert loaded.options.cuda_graphs is False
    v = np.arange(4.0)
    np.testing.assert_allclose(loaded(v)[0], np.sin(v) * 3)
    # a wrong type in the file is a malformed file
    import json

    doc = json.loads((tmp_path / "p.json").read_text())
    doc["options"]["cuda_graphs"] = "no"
    (tmp_path / "q.json").write_text(json.dumps(doc))
    if (tmp_path / "p.npz").exists():
        (tmp_path / "q.npz").write_bytes((tmp_path / "p.npz").read_bytes())
    with pytest.raises(GraphFormatError, match="cuda_graphs"):
        tl.load(tmp_path / "q.json")


def _final(*ts):
    return tl.explain(*ts).graph.schedule


def test_a_network_is_one_captured_segment():
    value, ts = _lattice(3, 2, "float64")
    order = _final(value, *tl.grad(value, ts))
    segs = plan_segments(order, {})
    assert len(segs) == 1 and segs[0].captured
    assert segs[0].start == 0 and segs[0].stop == len(order)
    (line,) = describe(segs, order)
    kernels = sum(1 for n in order if n.op not in (Op.CONST, Op.PLACEHOLDER))
    assert line.startswith(f"captured graph: {kernels} kernels")


def test_an_uncapturable_op_splits_the_program():
    a = tl.asarray(RNG.standard_normal((6, 6)) + 6 * np.eye(6))
    b = tl.asarray(RNG.standard_normal((6, 6)))
    y = tl.exp(tl.linalg.inv(tl.sin(a) @ b + 6 * tl.asarray(np.eye(6))) @ b)
    order = _final(y)
    segs = plan_segments(order, {})
    kinds = [s.captured for s in segs]
    assert kinds == [True, False, True], describe(segs, order)
    inv = next(k for k, n in enumerate(order) if n.op is Op.INV)
    assert segs[1].start == inv and segs[1].stop == inv + 1
    assert "cuSOLVER" in segs[1].reason and why_not(order[inv]) == segs[1].reason
    lines = describe(segs, order)
    assert lines[1].startswith("from Python: 1 kernels") and "inv" in lines[1]
    # segments cover every step once, in order
    assert [s.start for s in segs[1:]] == [s.stop for s in segs[:-1]]
    # a step refused at run time splits it further; refusing every kernel leaves nothing
    first = next(k for k, n in enumerate(order) if n.op not in (Op.CONST, Op.PLACEHOLDER))
    segs2 = plan_segments(order, {first: "capture failed: test"})
    assert not segs2[0].captured and segs2[0].reason == "capture failed: test"
    every = {k: "x" for k, n in enumerate(order) if n.op not in (Op.CONST, Op.PLACEHOLDER)}
    assert [s.captured for s in plan_segments(order, every)] == [False]


def test_why_not_names_host_bound_ops():
    i = tl.asarray(np.arange(4, dtype=np.int64))
    assert "host" in why_not((i**i).node)
    assert why_not((tl.asarray(np.ones(3)) ** 2.0).node) is None
    assert "cuFFT" in why_not(tl.fft.fft(tl.asarray(np.ones(8))).node)
    assert why_not(tl.asarray(np.ones(3)).node) is None  # leaves are inputs


# ---- on a GPU -----------------------------------------------------------------------------------


def _counters():
    from tenloom.runtime.backends.cuda_graphs import COUNTERS

    return dict(COUNTERS)


@cuda
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_captured_runs_equal_uncaptured_ones(dtype):
    value, ts = _lattice(4, 3, dtype, seed=2)
    grads = tl.grad(value.real if dtype.startswith("c") else value, ts)
    want = tl.evaluate(value, *grads, device="cuda:0", cuda_graphs=False)
    before = _counters()
    # evaluate's program is captured on its second run, replayed after; the graph a repeated
    # evaluate promotes to (a longer path search) is a new program, captured again
    runs = [tl.evaluate(value, *grads, device="cuda:0") for _ in range(6)]
    assert _counters()["captures"] > before["captures"]
    mid = _counters()
    runs += [tl.evaluate(value, *grads, device="cuda:0") for _ in range(2)]
    after = _counters()
    assert after["replays"] == mid["replays"] + 2 and after["captures"] == mid["captures"]
    tol = 2e-5 if dtype in ("float32", "complex64") else 1e-12
    for run in runs:
        for got, exp in zip(run, want):
            assert got.dtype == exp.dtype and got.shape == exp.shape
            np.testing.assert_allclose(got, exp, rtol=tol, atol=tol * np.abs(exp).max())
    for got, exp in zip(runs[-1], runs[-2]):  # two replays: the same bits
        np.testing.assert_array_equal(got, exp)


@cuda
def test_replays_read_new_input_values():
    import cupy as cp

    x = tl.placeholder((32, 48), "float32", name="x")
    w = RNG.standard_normal((48, 16)).astype(np.float32)
    y = tl.tanh(x @ tl.asarray(w)).sum(axis=1) * 2.0
    plan = tl.compile([y, x.T @ x], [x], device="cuda:0")
    before = _counters()
    for k in range(5):
        v = RNG.standard_normal((32, 48)).astype(np.float32)
        # host arrays and device arrays alike
        out = plan(v if k % 2 else cp.asarray(v))
        np.testing.assert_allclose(out[0], np.tanh(v @ w).sum(axis=1) * 2, rtol=1e-4)
        np.testing.assert_allclose(out[1], v.T @ v, rtol=1e-4, atol=1e-4)
    after = _counters()
    assert after["captures"] == before["captures"] + 1
    assert after["replays"] == before["replays"] + 3
    assert plan.cuda_graphs[0].startswith("captured graph")


@cuda
def test_the_same_device_arrays_again_are_read_afresh():
    """A replay fed the very arrays of the last call reuses its copy table: values changed in
    place are read, and a different array, a strided view or a host array in their place is
    copied in as it is."""
    import cupy as cp

    x = tl.placeholder((16, 24), "float64", name="x")
    z = tl.placeholder((24,), "float64", name="z")
    plan = tl.compile([tl.sin(x) @ z, x.sum()], [x, z], device="cuda:0")
    a = cp.asarray(RNG.standard_normal((16, 24)))
    b = cp.asarray(RNG.standard_normal(24))

    def check(p, q):
        out = plan(p, q)
        hp, hq = cp.asnumpy(p), cp.asnumpy(q) if not isinstance(q, np.ndarray) else q
        np.testing.assert_allclose(out[0], np.sin(hp) @ hq, rtol=1e-12)
        np.testing.assert_allclose(out[1], hp.sum(), rtol=1e-12)

    for k in range(4):
        check(a, b)
        a[k] += 1.0  # in place, between calls
        b *= -1.5
    check(a.copy(), b)  # a new array at a new address
    big = cp.asarray(RNG.standard_normal((32, 24)))
    check(big[::2], b)  # a strided view
    check(a, cp.asnumpy(b))  # a host array in place of a device one
    check(a, b)
    assert plan.cuda_graphs[0].startswith("captured graph")


@cuda
def test_frozen_constants_are_copied_in_once_and_writeable_ones_every_replay():
    frozen = RNG.standard_normal((20, 30))
    frozen.flags.writeable = False
    live = RNG.standard_normal((30, 10))
    t = tl.tanh(tl.asarray(frozen) @ tl.asarray(live)).sum(axis=0)
    before = _counters()
    for k in range(6):
        np.testing.assert_allclose(
            t.evaluate(device="cuda:0"), np.tanh(frozen @ live).sum(axis=0), rtol=1e-12
        )
        live[k] *= -2.0  # a writeable constant changed in place: every replay reads it
    after = _counters()
    assert after["replays"] > before["replays"]
    # frozen when captured, then writeable again and changed: the replays read it again
    frozen.flags.writeable = True
    for k in range(3):
        frozen[k] += 1.0
        np.testing.assert_allclose(
            t.evaluate(device="cuda:0"), np.tanh(frozen @ live).sum(axis=0), rtol=1e-12
        )


@cuda
def test_device_inputs_of_any_layout_and_dtype_are_copied_in():
    """Device inputs go into the captured buffers by one gather kernel: offset, transposed,
    strided and negative-stride views, item sizes 1 to 16 bytes."""
    specs = [
        ("complex128", (4, 3)),
        ("float32", (3, 4)),
        ("int8", (4,)),
        ("int16", (2, 4)),
        ("float64", (2, 3, 4)),
    ]
    xs = [tl.placeholder(shape, dt, name=f"x{k}") for k, (dt, shape) in enumerate(specs)]
    plan = tl.compile([x * 2 + 1 for x in xs], xs, device="cuda:0")

    def view(big, shape, k):
        lead = (k,) * (3 - len(shape))
        if k == 0:  # an offset block
            return big[lead + tuple(slice(1, 1 + n) for n in shape)]
        if k == 1:  # transposed
            return big[lead + tuple(slice(0, n) for n in shape[::-1])].T
        if k == 2:  # every other element
            return big[lead + tuple(slice(0, 2 * n, 2) for n in shape)]
        return big[lead + tuple(slice(n - 1, None, -1) for n in shape)]  # reversed

    for k in range(4):
        host, dev = [], []
        for dt, shape in specs:
            big = (RNG.standard_normal((9, 9, 9)) * 10).astype(dt)
            v = view(big, shape, k)
            assert v.shape == shape
            host.append(np.ascontiguousarray(v))
            dev.append(_to_device(big, v))
        for g, h in zip(plan(*dev), host):
            np.testing.assert_array_equal(g, h * 2 + 1)


def _to_device(big: np.ndarray, view: np.ndarray):
    """The CuPy view of ``cupy.asarray(big)`` with ``view``'s offset, shape and strides."""
    import cupy as cp

    dbig = cp.asarray(big)
    offset = view.__array_interface__["data"][0] - big.__array_interface__["data"][0]
    mem = cp.cuda.MemoryPointer(dbig.data.mem, dbig.data.ptr - dbig.data.mem.ptr + offset)
    return cp.ndarray(view.shape, view.dtype, mem, strides=view.strides)


@cuda
def test_outputs_survive_the_next_replay():
    import cupy as cp

    x = tl.placeholder((8, 8), "float64", name="x")
    plan = tl.compile([x @ x + 1.0], [x], device="cuda:0", to_host=False)
    vs = [RNG.standard_normal((8, 8)) for _ in range(4)]
    outs = [plan(v)[0] for v in vs]
    assert all(isinstance(o, cp.ndarray) for o in outs)
    for v, o in zip(vs, outs):
        np.testing.assert_allclose(cp.asnumpy(o), v @ v + 1.0, rtol=1e-12)


@cuda
def test_an_uncapturable_op_runs_in_segments():
    x = tl.placeholder((6, 6), "float64", name="x")
    b = RNG.standard_normal((6, 6))
    y = tl.exp(tl.linalg.inv(tl.sin(x) @ tl.asarray(b) + 6 * tl.asarray(np.eye(6))) @ b)
    plan = tl.compile([y], [x], device="cuda:0")
    for _ in range(4):
        v = RNG.standard_normal((6, 6))
        want = np.exp(np.linalg.inv(np.sin(v) @ b + 6 * np.eye(6)) @ b)
        np.testing.assert_allclose(plan(v)[0], want, rtol=1e-10)
    lines = plan.cuda_graphs
    assert [x.split(":")[0] for x in lines] == ["captured graph", "from Python", "captured graph"]


@cuda
def test_steps_whose_capture_fails_run_from_python(monkeypatch):
    """With the capturable GEMM kernel taken away, cupy.matmul refuses capture at every
    contraction: each such step is marked, the rest still captured, results unchanged."""
    from tenloom.runtime.backends import cuda_graphs

    monkeypatch.setattr(cuda_graphs, "contract_kernel", lambda node, dev: None)
    x = tl.placeholder((16, 16), "float32", name="x")
    y = tl.sin(tl.exp(x * 0.1) @ x) * 2 + 1
    plan = tl.compile([y], [x], device="cuda:0")
    before = _counters()
    for _ in range(3):
        v = RNG.standard_normal((16, 16)).astype(np.float32)
        np.testing.assert_allclose(
            plan(v)[0], np.sin(np.exp(v * 0.1) @ v) * 2 + 1, rtol=1e-4, atol=1e-5
        )
    assert _counters()["refused"] > before["refused"]
    lines = plan.cuda_graphs
    assert any("capture failed: NotImplementedError" in x for x in lines), lines
    assert any(x.startswith("captured graph") for x in lines), lines


@cuda
def test_cuda_graphs_false_turns_capture_off():
    value, ts = _lattice(3, 3, "float32", seed=3)
    before = _counters()
    for _ in range(3):
        value.evaluate(device="cuda:0", cuda_graphs=False)
    x = tl.placeholder((4, 4), "float32", name="x")
    plan = tl.compile([x @ x], [x], device="cuda:0", cuda_graphs=False)
    for _ in range(3):
        plan(np.eye(4, dtype=np.float32))
    assert _counters() == before
    assert plan.cuda_graphs == ["not captured: cuda_graphs=False"]


@cuda
def test_explain_lists_the_lattice_value_and_grad_segments():
    value, ts = _lattice(8, 6, "float32")
    grads = tl.grad(value, ts)
    report = tl.explain(value, *grads, device="cuda:0")
    assert 1 <= report.captured_segments <= 2, report.cuda_graphs
    assert "CUDA graphs" in str(report)


def _peak_bytes_hook(pool):
    """A CuPy memory hook (thread-local: the runs must stay on this thread) keeping the peak,
    over every allocation from any pool, of the bytes ``pool`` (the default allocator's, for
    the run) has handed out plus what every captured program's own pool holds."""
    import cupy as cp
    from tenloom.runtime.backends.cuda_graphs import captured_bytes

    class Peak(cp.cuda.MemoryHook):
        name = "tenloom_test_peak"

        def __init__(self):
            self.peak = 0

        def malloc_postprocess(self, **kw):
            self.peak = max(self.peak, pool.used_bytes() + captured_bytes())

    return Peak()


@cuda
def test_a_memory_limit_run_captures_its_slices_within_the_limit():
    """Under memory_limit= each slice program is captured where its pool (its copied inputs,
    packed outputs and intermediates) fits the slice's share of the limit (runtime/sliced.py
    ``slice_budget``), and the device memory the runs take stays within the limit beside the
    operands: measured at every allocation, tenloom's live arrays plus every captured pool.
    A run under a limit starts with no capture held, and a sliced network's slice programs
    let theirs go when it has run: two sliced networks in one graph never hold two pools."""
    import cupy as cp
    from tenloom.runtime.backends.cuda_graphs import captured_bytes
    from tenloom.runtime.sliced import LAST_RUN

    # the device's replay stream and cuBLAS workspace (made once per process, as cuBLAS's
    # own) exist before the measured runs
    warm, _ = _lattice(3, 2, "float64", seed=5)
    for _ in range(3):
        warm.evaluate(device="cuda:0")
    assert captured_bytes() > 0  # (the warm-up's program, captured without a limit)
    value, ts = _lattice(5, 6, "float64", seed=4)
    other, ts2 = _lattice(5, 7, "float32", seed=9)
    operands = sum(int(np.prod(t.shape)) * t.dtype.itemsize for t in ts + ts2)
    limit = 200_000
    want = value.evaluate(optimize="greedy")
    both = value + other
    want_both = both.evaluate(optimize="greedy")
    mine = cp.cuda.MemoryPool()
    hook = _peak_bytes_hook(mine)
    before = _counters()
    cp.cuda.set_allocator(mine.malloc)
    try:
        with hook:
            for _ in range(3):
                got = value.evaluate(device="cuda:0", optimize="greedy", memory_limit=limit)
                np.testing.assert_allclose(got, want, rtol=1e-10)
            n = LAST_RUN.slices[0]
            mid = _counters()
            got = both.evaluate(device="cuda:0", optimize="greedy", memory_limit=limit)
            # float32 slices of a network whose terms cancel: 1e-4 apart between runs
            np.testing.assert_allclose(got, want_both, rtol=1e-3)
    finally:
        cp.cuda.set_allocator(cp.get_default_memory_pool().malloc)
    after = _counters()
    assert n > 2
    # the first run captures slice 1 and replays the rest; each later run captures its first
    # slice again (the last run let its capture go) and replays the rest
    assert mid["captures"] - before["captures"] == 3, (before, mid)
    assert mid["replays"] - before["replays"] == (n - 2) + 2 * (n - 1)
    assert after["captures"] - mid["captures"] == 2  # both networks' slice programs
    assert after["over_budget"] == before["over_budget"]
    assert captured_bytes() == 0  # nothing outlives the runs under the limit
    assert 0 < hook.peak <= limit + operands, (hook.peak, limit, operands)
    report = tl.explain(value, device="cuda:0", optimize="greedy", memory_limit=limit)
    assert report.cuda_graphs[0].startswith("not captured: memory_limit= captures slice programs")
    assert report.cuda_graphs[1] == "each slice's program:"
    assert report.cuda_graphs[2].startswith("  captured graph:")
    cp.cuda.Device().synchronize()


@cuda
def test_a_slice_program_over_its_share_of_the_limit_runs_step_by_step():
    """A slice program whose capture would not fit its share of the limit (here its copied
    inputs and packed outputs push the 6x6 lattice's slices over 2 MB) is never captured, and
    the runs still match."""
    value, _ = _lattice(6, 6, "float64", seed=7)
    want = value.evaluate(optimize="greedy")
    before = _counters()
    for _ in range(3):
        got = value.evaluate(device="cuda:0", optimize="greedy", memory_limit=2_000_000)
        np.testing.assert_allclose(got, want, rtol=1e-10)
    assert _counters() == before
