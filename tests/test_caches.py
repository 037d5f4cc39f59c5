"""The one registry of caches and counters (passes/caches.py): every cache bounded, inspected
with tl.cache_info() and emptied with tl.clear_caches(); and the cached optimize that evaluate,
compile, dump, explain, visualize and the gradient pre-pass share (runtime/session.py)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from tenloom.passes import caches, slicing
from tenloom.passes import contraction_order as co
from tenloom.passes.options import Options
from tenloom.runtime import session

import tenloom as tl


def test_lru_cache_filled_past_its_bound_forgets_the_least_recently_used():
    c = caches.LRUCache("test.lru", 3, registered=False)
    for k in range(3):
        c.put(k, k * 10)
    assert c.get(0) == 0  # 0 is now the most recently used
    c.put(3, 30)
    assert len(c) == 3 and 1 not in c and c.get(1) is None
    assert [c.get(k) for k in (0, 2, 3)] == [0, 20, 30]
    info = c.info()
    assert (info.currsize, info.maxsize, info.hits, info.misses) == (3, 3, 4, 1)
    c.clear()
    assert len(c) == 0 and c.get(0, "gone") == "gone"


def test_lru_cache_is_safe_from_several_threads():
    c = caches.LRUCache("test.threads", 64, registered=False)

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for k in rng.integers(0, 500, 2000):
            c.put(int(k), int(k))
            v = c.get(int(rng.integers(0, 500)))
            assert v is None or isinstance(v, int)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(c) == 64


def test_the_registry_rejects_a_name_taken_and_names_each_cache_once():
    c = caches.LRUCache("test.registered", 2)
    assert caches.register("test.registered", c) is c  # the same cache again: fine
    with pytest.raises(ValueError, match="already registered"):
        caches.LRUCache("test.registered", 2)
    assert tl.cache_info()["test.registered"].maxsize == 2


def test_every_cache_is_bounded():
    for name, info in tl.cache_info().caches.items():
        assert info.maxsize is not None or info.weak or name == "runtime.device_kernels", name


def test_the_path_and_slicing_caches_are_bounded_and_registered():
    assert co._CACHE.maxsize and co._ALTERNATIVES.maxsize and slicing._CACHE.maxsize
    info = tl.cache_info()
    for name in ("passes.paths", "passes.path_alternatives", "passes.slicings"):
        assert info[name].maxsize is not None


def test_clear_caches_empties_them_all_and_the_next_call_works_them_out_again():
    rng = np.random.default_rng(0)
    mats = [tl.asarray(rng.standard_normal((6, 6))) for _ in range(4)]
    t = tl.einsum("ij,jk,kl,li->", *mats)  # a ring: searched (a chain has its own answer)
    expected = tl.evaluate(t, optimize="greedy")[0]
    tl.evaluate(2.0 * t + 1.0)  # a scalar node, a fused region, a compiled program
    info = tl.cache_info()
    assert info["runtime.optimized_graphs"].currsize >= 1 and info["passes.paths"].currsize >= 1
    assert info["runtime.programs"].currsize >= 1
    tl.clear_caches()
    info = tl.cache_info()
    assert all(i.currsize == 0 for i in info.caches.values()), str(info)
    runs, searches = session.PASS_RUNS["n"], co.SEARCHES["n"]
    disk = co.DISK_HITS["n"]
    np.testing.assert_allclose(tl.evaluate(t, optimize="greedy")[0], expected)
    # the passes run again; the path comes from the disk cache (on by default), not a search
    assert session.PASS_RUNS["n"] == runs + 1 and co.SEARCHES["n"] == searches
    assert co.DISK_HITS["n"] == disk + 1
    info = tl.cache_info()
    assert info["runtime.optimized_graphs"].currsize == 1 and info["passes.paths"].currsize == 1
    tl.clear_caches()  # without the disk cache, the path is searched again
    np.testing.assert_allclose(tl.evaluate(t, optimize="greedy", cache_dir=False)[0], expected)
    assert co.SEARCHES["n"] == searches + 1 and co.DISK_HITS["n"] == disk + 1


def test_cache_info_reports_hits_and_counters():
    x = tl.asarray(np.arange(4.0))
    y = tl.sin(x) * 2.0
    y.evaluate()
    before = tl.cache_info()
    y.evaluate()
    after = tl.cache_info()
    assert after["runtime.optimized_graphs"].hits == before["runtime.optimized_graphs"].hits + 1
    assert after.counters["runtime.pass_runs"] == before.counters["runtime.pass_runs"]
    assert {"runtime.plans.compiles", "runtime.plans.traces", "passes.path_searches"} <= set(
        after.counters
    )
    text = str(after)
    assert "runtime.optimized_graphs" in text and "runtime.pass_runs" in text


def test_the_optimized_graph_is_shared_by_evaluate_compile_dump_explain_and_visualize():
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((5, 5)) for _ in range(3)]
    for arr in arrays:
        arr.flags.writeable = False  # compile captures these as they are (no frozen copy)
    t = tl.einsum("ij,jk,kl->il", *(tl.asarray(arr) for arr in arrays)) + 1.0
    t.evaluate()
    runs = session.PASS_RUNS["n"]
    tl.dump(t)
    tl.to_networkx(t, optimized=True)
    assert session.PASS_RUNS["n"] == runs  # evaluate's optimization, from the cache
    plan = tl.compile(t)  # its constants are read-only already: the same outputs
    assert session.PASS_RUNS["n"] == runs
    np.testing.assert_allclose(plan()[0], t.evaluate())
    report = tl.explain(t)  # wants each pass's graph: runs once more, then cached with them
    assert session.PASS_RUNS["n"] == runs + 1
    tl.explain(t)
    t.evaluate()
    assert session.PASS_RUNS["n"] == runs + 1
    assert report.after.nodes == len(plan.optimized)


def test_the_gradient_pre_pass_is_cached():
    x = tl.asarray(np.linspace(0.1, 1.0, 6).reshape(2, 3))
    w = tl.asarray(np.ones((3, 3)))
    loss = tl.sum(tl.einsum("ij,jk,kl->il", x, w, w) ** 2)
    g1 = tl.grad(loss, [w])[0]
    runs = session.PASS_RUNS["n"]
    g2 = tl.grad(loss, [w])[0]
    assert session.PASS_RUNS["n"] == runs
    np.testing.assert_allclose(g1.evaluate()[0], g2.evaluate()[0])


def test_options_are_one_typed_record_the_passes_read():
    o = Options.of({"optimize": "greedy", "memory_limit": "2 KB", "device": "cpu"})
    assert (o.optimize, o.memory_limit, o.devices) == ("greedy", 2000, ("cpu",))
    assert o.pass_key is not None and Options.of({"verify": True}).pass_key is None
    with pytest.raises(tl.OptionTypeError, match="unknown option 'optimise'"):
        Options.of({"optimise": "greedy"})


def test_compile_verify_checks_every_pass_and_the_plan_runs():
    x = tl.placeholder((3,), name="x")
    plan = tl.compile(tl.sin(x) * 2.0, [x], verify=True)
    np.testing.assert_allclose(plan(np.ones(3))[0], np.sin(np.ones(3)) * 2.0)
    assert "sin" in plan.dump()
