"""Copy-plan timing on a kernel's first call (runtime/kernels/copy_plan.py, issue 22): bounded
per program by a budget from its predicted run time, remembered across processes in the cache
folder, never done under ``deterministic=True``. Every test points the cache at tmp_path."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from tenloom.runtime.kernels import copy_plan

import tenloom as tl

# a closed random 3-regular network of 20 tensors with bonds of 4: about 15 contractions whose
# operands need copies with several candidate plans
SCRIPT = r"""
import json, sys
import numpy as np
import tenloom as tl
from tenloom.runtime.kernels import copy_plan

copy_plan.TUNE_MIN_S = 1e9  # a budget that times every kernel
inputs = {inputs!r}
shapes = {shapes!r}
eq = ",".join("".join(t) for t in inputs) + "->"
rng = np.random.default_rng(0)
xs = [rng.standard_normal(s) for s in shapes]
value = tl.einsum(eq, *map(tl.asarray, xs)).evaluate(**{opts})
print(json.dumps({{"stats": copy_plan.STATS, "value": float(value)}}))
"""


@pytest.fixture(scope="module")
def network():
    import cotengra as ctg

    inputs, _, shapes, _ = ctg.utils.randreg_equation(20, 3, d_min=4, d_max=4, seed=1)
    return [tuple(t) for t in inputs], [tuple(s) for s in shapes]


@pytest.fixture
def stats(monkeypatch):
    fresh = {"measured": 0, "refused": 0, "disk_hits": 0, "seconds": 0.0}
    monkeypatch.setattr(copy_plan, "STATS", fresh)
    return fresh


def expression(network, seed=0):
    inputs, shapes = network
    eq = ",".join("".join(t) for t in inputs) + "->"
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(s) for s in shapes]
    return tl.einsum(eq, *map(tl.asarray, xs)), eq, xs


def reference(eq, xs):
    import opt_einsum

    return opt_einsum.contract(eq, *xs, optimize="greedy")


def test_a_generous_budget_times_every_kernel_that_has_a_choice(network, stats, monkeypatch):
    monkeypatch.setattr(copy_plan, "TUNE_MIN_S", 1e9)
    monkeypatch.setattr(copy_plan, "_TABLES", {})
    expr, eq, xs = expression(network)
    np.testing.assert_allclose(expr.evaluate(cache_dir=False), reference(eq, xs), rtol=1e-10)
    assert stats["measured"] >= 3 and stats["refused"] == 0
    measured = stats["measured"]
    expr.evaluate(cache_dir=False)  # a plan is timed once
    assert stats["measured"] == measured


def test_no_budget_times_nothing_and_keeps_the_model(network, stats, monkeypatch):
    monkeypatch.setattr(copy_plan, "TUNE_MIN_S", 0.0)
    monkeypatch.setattr(copy_plan, "TUNE_FRACTION", 0.0)
    monkeypatch.setattr(copy_plan, "AGAIN_MIN_S", 0.0)  # nor on later runs
    monkeypatch.setattr(copy_plan, "_TABLES", {})
    expr, eq, xs = expression(network, seed=1)
    np.testing.assert_allclose(expr.evaluate(cache_dir=False), reference(eq, xs), rtol=1e-10)
    assert stats["measured"] == 0 and stats["refused"] >= 3


def test_a_first_run_spends_its_share_and_later_runs_time_the_rest(
    network, stats, monkeypatch, tmp_path
):
    """A program's first run times only within TUNE_FRACTION x its predicted run time; the
    kernels refused there for want of budget are timed on its next run, within AGAIN_MIN_S in
    all, and what was timed is on disk after each run."""
    monkeypatch.setattr(copy_plan, "TUNE_MIN_S", 0.0)
    monkeypatch.setattr(copy_plan, "TUNE_FRACTION", 0.0)
    monkeypatch.setattr(copy_plan, "AGAIN_MIN_S", 1e9)
    monkeypatch.setattr(copy_plan, "_TABLES", {})
    folder = tmp_path / "cache"
    expr, eq, xs = expression(network, seed=8)
    want = reference(eq, xs)
    np.testing.assert_allclose(expr.evaluate(cache_dir=str(folder)), want, rtol=1e-10)
    assert stats["measured"] == 0 and stats["refused"] == 0 and stats["deferred"] >= 3
    assert not list(folder.glob("copy-plans-*"))  # nothing timed, nothing written
    deferred = stats["deferred"]
    np.testing.assert_allclose(expr.evaluate(cache_dir=str(folder)), want, rtol=1e-10)
    assert stats["measured"] >= 3 and stats["deferred"] == deferred
    (table,) = folder.glob("copy-plans-*.json")
    assert len(json.loads(table.read_text())["plans"]) == stats["measured"]


def test_the_budget_caps_what_timing_spends(network, stats, monkeypatch):
    """With each trial's predicted time made 1 s and timings charged their estimate, a budget
    of 20 s grants timings until the next would overrun it, and refuses the rest."""
    granted: list[float] = []
    grant = copy_plan.Budget.grant

    def spy(self, estimate):
        ok = grant(self, estimate)
        if ok:
            granted.append(estimate)
        return ok

    monkeypatch.setattr(copy_plan.Budget, "grant", spy)
    monkeypatch.setattr(copy_plan.Budget, "settle", lambda self, estimate, spent: None)
    monkeypatch.setattr(copy_plan, "kernel_seconds", lambda madds, elements, dtype: 1.0)
    monkeypatch.setattr(copy_plan, "TUNE_FRACTION", 0.0)
    monkeypatch.setattr(copy_plan, "TUNE_MIN_S", 20.0)
    monkeypatch.setattr(copy_plan, "_TABLES", {})
    expr, eq, xs = expression(network, seed=2)
    np.testing.assert_allclose(expr.evaluate(cache_dir=False), reference(eq, xs), rtol=1e-10)
    assert stats["measured"] == len(granted) >= 1
    assert sum(granted) <= 20.0
    assert stats["refused"] >= 1
    assert all(e >= copy_plan.ROUNDS * 2 for e in granted)  # rounds x candidates x 1 s


def test_the_budget_is_the_programs_predicted_time(monkeypatch):
    class Step:
        def __init__(self, kernel, node):
            self.kernel, self.node = kernel, node

    def kernel():
        return None

    k1, k2 = (lambda: None), (lambda: None)
    k1.tuning, k2.tuning = [None], [None]
    a = tl.asarray(np.ones((200, 300))).node
    b = tl.asarray(np.ones((300, 100))).node
    c = tl.einsum("ij,jk->ik", tl.asarray(np.ones((200, 300))), tl.asarray(np.ones((300, 100))))
    c = c.node
    steps = [Step(None, a), Step(None, b), Step(k1, c), Step(k2, c), Step(kernel, c)]
    monkeypatch.setattr(copy_plan, "TUNE_MIN_S", 0.0)
    budget = copy_plan.bind_budget(steps)
    assert k1.tuning[0] is budget and k2.tuning[0] is budget
    one = copy_plan.kernel_seconds(200 * 300 * 100, c.size + a.size + b.size, np.float64)
    assert budget.left == pytest.approx(3 * one * copy_plan.TUNE_FRACTION)
    assert copy_plan.bind_budget([Step(None, a)]) is None  # nothing to time: no budget


def test_deterministic_runs_time_nothing_and_read_nothing(network, stats, monkeypatch, tmp_path):
    monkeypatch.setattr(copy_plan, "TUNE_MIN_S", 1e9)
    expr, eq, xs = expression(network, seed=3)
    want = reference(eq, xs)
    got = expr.evaluate(deterministic=True, cache_dir=str(tmp_path))
    np.testing.assert_allclose(got, want, rtol=1e-10)
    assert stats["measured"] == 0 and stats["disk_hits"] == 0
    assert not list(tmp_path.glob("copy-plans-*"))
    again = expr.evaluate(deterministic=True, cache_dir=str(tmp_path))
    assert again.tobytes() == got.tobytes()


def run_script(network, tmp_path, opts="{}", env_dir=None):
    inputs, shapes = network
    script = tmp_path / "tune.py"
    script.write_text(SCRIPT.format(inputs=inputs, shapes=shapes, opts=opts))
    env = dict(os.environ)
    env["TENLOOM_CACHE_DIR"] = str(env_dir if env_dir is not None else tmp_path / "cache")
    out = subprocess.run(
        [sys.executable, "-P", str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_process_reads_the_timings_and_times_nothing(network, tmp_path):
    first = run_script(network, tmp_path)
    # kernels of one layout (the same shapes and strides) reuse the first one's timing
    measured, reused = first["stats"]["measured"], first["stats"]["disk_hits"]
    assert measured >= 3
    (table,) = (tmp_path / "cache").glob("copy-plans-*.json")
    data = json.loads(table.read_text())
    assert len(data["plans"]) == measured
    second = run_script(network, tmp_path)
    assert second["stats"]["measured"] == 0
    assert second["stats"]["disk_hits"] == measured + reused
    assert second["value"] == pytest.approx(first["value"], rel=1e-12)


def test_cache_dir_option_and_false(network, stats, tmp_path, monkeypatch):
    monkeypatch.setattr(copy_plan, "TUNE_MIN_S", 1e9)
    monkeypatch.setattr(copy_plan, "_TABLES", {})
    monkeypatch.setenv("TENLOOM_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "given"
    expression(network, seed=4)[0].evaluate(cache_dir=str(folder))
    assert stats["measured"] >= 3
    (table,) = folder.glob("copy-plans-*.json")
    assert len(json.loads(table.read_text())["plans"]) == stats["measured"]
    assert not (tmp_path / "cache").exists()  # the option wins over TENLOOM_CACHE_DIR
    expression(network, seed=5)[0].evaluate(cache_dir=False)
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    "content",
    [
        "not json {",
        "[1, 2]",
        '{"version": "some other version/1", "plans": {}}',
        '{"version": null, "plans": []}',
        "\x00\xff",
    ],
)
def test_a_corrupt_or_foreign_cache_file_is_ignored(network, stats, tmp_path, monkeypatch, content):
    monkeypatch.setattr(copy_plan, "TUNE_MIN_S", 1e9)
    monkeypatch.setattr(copy_plan, "_TABLES", {})
    folder = tmp_path / "cache"
    folder.mkdir()
    with copy_plan.tuning_cache(str(folder)):
        table = copy_plan._table_file(str(folder))
    with open(table, "wb") as f:
        f.write(content.encode("latin-1"))
    expr, eq, xs = expression(network, seed=6)
    got = expr.evaluate(cache_dir=str(folder))  # times anew, and writes a good file
    np.testing.assert_allclose(got, reference(eq, xs), rtol=1e-10)
    assert stats["measured"] >= 3 and stats["disk_hits"] < stats["measured"]
    with open(table) as f:
        assert len(json.load(f)["plans"]) == stats["measured"]


def test_bad_entries_are_left_out(tmp_path, monkeypatch):
    from tenloom.passes.caches import disk_key

    monkeypatch.setattr(copy_plan, "_TABLES", {})
    monkeypatch.setattr(copy_plan, "STATS", dict(copy_plan.STATS))
    folder = str(tmp_path)
    plans = {"good": [1, 0], "neg": [-1, 0], "float": [1.0], "long": [0, 0, 0], "str": "x"}
    with open(copy_plan._table_file(folder), "w") as f:
        json.dump({"version": disk_key(), "plans": plans}, f)
    with copy_plan.tuning_cache(folder):
        assert copy_plan.cached_choice("good", (2, 2)) == (1, 0)
        assert copy_plan.cached_choice("good", (1, 2)) is None  # index out of range
        for k in ("neg", "float", "long", "str", "missing"):
            assert copy_plan.cached_choice(k, (2, 2)) is None
    with copy_plan.tuning_cache(False):  # no folder: this process's own timings only
        assert copy_plan.cached_choice("good", (2, 2)) is None
        copy_plan.remember("mine", [1])
        assert copy_plan.cached_choice("mine", (2,)) == (1,)
    with copy_plan.tuning_cache(folder):
        assert copy_plan.cached_choice("mine", (2,)) is None


def test_an_unwritable_folder_only_loses_the_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(copy_plan, "_TABLES", {})
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with copy_plan.tuning_cache(str(blocker / "sub")):  # a folder below a file
        copy_plan.remember("k", [0, 1])
        assert copy_plan.cached_choice("k", (2, 2)) == (0, 1)  # kept in this process
    assert list(tmp_path.iterdir()) == [blocker]


def test_layout_copies_are_bounded_too(stats, monkeypatch):
    """LAYOUT's copy (runtime/backends/cpu.py layout_kernel) asks the same budget."""
    from tenloom.runtime.backends.cpu import layout_kernel

    x = np.arange(64 * 64 * 8, dtype=np.float64).reshape(64, 64, 8)
    monkeypatch.setattr(copy_plan, "_TABLES", {})
    for budget, measured in ((copy_plan.Budget(0.0), 0), (copy_plan.Budget(1e9), 1)):
        run = layout_kernel((1, 0, 2))
        run.tuning[0] = budget
        before = stats["measured"]
        with copy_plan.tuning_cache(False):
            out = run(x)
        np.testing.assert_array_equal(out, x)
        assert stats["measured"] - before == measured


def test_the_timings_are_in_the_cache_registry(network, stats, monkeypatch):
    monkeypatch.setattr(copy_plan, "TUNE_MIN_S", 1e9)
    monkeypatch.setattr(copy_plan, "_TABLES", copy_plan._TABLES)  # put back as it was
    expression(network, seed=7)[0].evaluate(cache_dir=False)
    info = tl.cache_info().caches["runtime.copy_plan_timings"]
    assert info.currsize >= stats["measured"] >= 3
    tl.clear_caches()
    assert tl.cache_info().caches["runtime.copy_plan_timings"].currsize == 0


def test_the_oldest_timings_go_first_past_the_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(copy_plan, "_TABLES", {})
    monkeypatch.setattr(copy_plan, "MAX_ENTRIES", 3)
    folder = str(tmp_path)
    with copy_plan.tuning_cache(folder):
        for k in range(5):
            copy_plan.remember(f"k{k}", [k % 2])
        copy_plan.flush()  # written once, at the end of a program's run
        table = copy_plan._table_file(folder)
    with open(table) as f:
        assert list(json.load(f)["plans"]) == ["k2", "k3", "k4"]
    monkeypatch.setattr(copy_plan, "_TABLES", {})  # a new process reads what the file keeps
    with copy_plan.tuning_cache(folder):
        assert copy_plan.cached_choice("k4", (2,)) == (0,)
        assert copy_plan.cached_choice("k0", (2,)) is None
