"""The "auto" path search budgeted in trials from the predicted run time, the disk cache of
paths, reproducible plans across processes, and evaluate's promotion of repeated graphs
(issue 22; passes/contraction_order.py, runtime/session.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from tenloom.graph.errors import OptionTypeError
from tenloom.passes import contraction_order as co
from tenloom.passes.caches import cache_folder, disk_key
from tenloom.passes.options import Options
from tenloom.runtime import session

import tenloom as tl


def randreg(n, d, seed=1):
    import cotengra as ctg

    inputs, output, _, sd = ctg.utils.randreg_equation(n, 3, d_min=d, d_max=d, seed=seed)
    ids = {lab: i for i, lab in enumerate(sd)}
    terms = [tuple(ids[x] for x in t) for t in inputs]
    return terms, tuple(ids[x] for x in output), {ids[k]: v for k, v in sd.items()}


def lazy(terms, out, sizes, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    ops, arrays = [], []
    for t in terms:
        a = rng.standard_normal(tuple(sizes[x] for x in t)).astype(dtype) * 0.5
        arrays.append(a)
        ops += [tl.asarray(a), list(t)]
    return tl.einsum(*ops, list(out)), arrays


def reference(terms, out, arrays):
    import opt_einsum as oe

    ops = []
    for a, t in zip(arrays, terms):
        ops += [a, list(t)]
    return oe.contract(*ops, list(out), optimize="greedy")


# ---- the budget -------------------------------------------------------------------------------


def test_the_high_quality_searches_run_only_when_the_effort_pays_for_them(monkeypatch):
    terms, out, sizes = randreg(24, 3)
    made = []
    real = co.hq_optimizer

    def spy(trials, progress=False, kind="labels", minimize="flops"):
        made.append((kind, trials, minimize))
        return real(trials, progress, kind, minimize)

    monkeypatch.setattr(co, "hq_optimizer", spy)
    cheap = min(t.contraction_cost() for t in co.auto_trees(terms, out, sizes, effort=1.0))
    assert made == []  # a third of a millisecond's budget buys no high-quality trial
    n = len(terms)
    # an effort whose third pays for HQ_MIN trials of both: both run, with the trials that
    # time pays for, within [HQ_MIN, HQ_MAX]
    effort = 3 * co.HQ_MIN * co.HQ_TRIAL_S * n / co.predicted_seconds(cheap, False) * 4
    trees = co.auto_trees(terms, out, sizes, effort=effort)
    assert [k for k, _, _ in made] == ["rg", "labels"]
    assert all(co.HQ_MIN <= t <= co.HQ_MAX for _, t, _ in made)
    assert made[0][2] == "combo-64" and made[1][2] == "flops"
    assert min(t.contraction_cost() for t in trees) <= cheap
    made.clear()
    co.auto_trees(terms, out, sizes, effort=effort, complex_=True)  # writes weigh more
    assert made[0][2] == "combo-170"
    # complex multiply-adds cost 4x: the same network in complex earns 4x the budget
    assert co.predicted_seconds(1e9, True) == 4 * co.predicted_seconds(1e9, False)


def test_the_searches_are_seeded_and_leave_the_global_generators_alone():
    import random

    terms, out, sizes = randreg(30, 4, seed=4)
    random.seed(123)
    np.random.seed(123)
    before = (random.random(), np.random.random())
    random.seed(123)
    np.random.seed(123)
    a = [t.get_ssa_path() for t in co.auto_trees(terms, out, sizes, effort=200.0)]
    after = (random.random(), np.random.random())
    assert before == after  # Python's state was put back; NumPy's never touched
    b = [t.get_ssa_path() for t in co.auto_trees(terms, out, sizes, effort=200.0)]
    assert a == b  # cotengra's trials draw from the global generators: seeded, the same trees


def test_auto_is_never_worse_than_greedy_and_keeps_the_least_layout_cost():
    import cotengra as ctg
    from tenloom.passes.cost import layout_cost

    for n, d in ((30, 3), (40, 4)):
        terms, out, sizes = randreg(n, d)
        best, others = co._auto_path(terms, out, sizes)
        greedy = ctg.array_contract_tree(terms, out, sizes, optimize="greedy").get_ssa_path()
        assert layout_cost(terms, out, sizes, best) <= layout_cost(terms, out, sizes, greedy)
        assert all(
            layout_cost(terms, out, sizes, best) <= layout_cost(terms, out, sizes, p)
            for p in others
        )


def test_the_same_search_twice_in_one_process_gives_the_same_tree():
    terms, out, sizes = randreg(40, 4, seed=3)
    a = co._auto_path(terms, out, sizes, effort=50.0)
    b = co._auto_path(terms, out, sizes, effort=50.0)
    assert a == b


# ---- reproducible across processes ------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import cotengra as ctg
    import tenloom as tl
    from tenloom.graph.ops import Op
    from tenloom.runtime.evaluate import optimize_graph

    def net(kind):
        if kind == "randreg":
            i, o, _, sd = ctg.utils.randreg_equation(36, 3, d_min=4, d_max=4, seed=5)
        elif kind == "lattice":
            i, o, _, sd = ctg.utils.lattice_equation([5, 5], d_min=4, d_max=4, seed=5)
        else:
            i, o, _, sd = ctg.utils.rand_equation(30, 3, n_out=2, d_min=2, d_max=4, seed=5)
        ids = {lab: k for k, lab in enumerate(sd)}
        rng = np.random.default_rng(0)
        ops = []
        for t in i:
            ops += [tl.asarray(rng.standard_normal([sd[x] for x in t])), [ids[x] for x in t]]
        return tl.einsum(*ops, [ids[x] for x in o])

    def plan(t, **opts):
        g = optimize_graph((t,), opts) if False else None
        from tenloom.runtime import session
        from tenloom.runtime.options import parse_options
        o = session.optimize(session.build_graph((t,)), parse_options("evaluate", opts))
        sig = []
        for n in o.graph.order:
            if n.op is Op.SLICED:
                sig.append(["sliced", repr(n.attrs[2]), repr(n.attrs[3])])
            elif n.op in (Op.CONTRACT, Op.EINSUM):
                sig.append([n.op.name, repr(n.attrs), repr(n.shape)])
        return sig

    cache = sys.argv[1] if sys.argv[1] != "off" else False
    out = {}
    for kind in ("randreg", "lattice", "random"):
        t = net(kind)
        out[kind] = plan(t, cache_dir=cache)
        out[kind + "-sliced"] = plan(t, cache_dir=cache, memory_limit="64KiB")
        out[kind + "-compiled"] = plan(t, cache_dir=cache, memory_limit="256KiB")
    print(json.dumps(out))
    """
)


def _plans(tmp_path, cache) -> dict:
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    env = dict(os.environ, PYTHONHASHSEED="random")
    env.pop("TENLOOM_CACHE_DIR", None)
    env["TENLOOM_CACHE_DIR"] = str(tmp_path / "default-never-used")
    res = subprocess.run(
        [sys.executable, "-P", str(script), str(cache)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_two_fresh_processes_make_the_same_plans_and_a_cached_process_too(tmp_path):
    first = _plans(tmp_path, "off")
    second = _plans(tmp_path, "off")  # another process, hash seeds differ, no cache
    assert first == second
    assert any(row[0] == "sliced" for row in first["randreg-sliced"])  # slicing is compared
    folder = tmp_path / "cache"
    fresh = _plans(tmp_path, folder)  # fills the cache
    assert list(folder.glob("path-*.json"))
    cached = _plans(tmp_path, folder)  # reads it
    assert fresh == first and cached == first
    assert not (tmp_path / "default-never-used").exists()  # cache_dir given: used instead


# ---- the disk cache ---------------------------------------------------------------------------


def test_the_default_cache_folder_follows_the_variable_and_false_turns_it_off(
    monkeypatch, tmp_path
):
    monkeypatch.setenv("TENLOOM_CACHE_DIR", str(tmp_path / "c"))
    assert cache_folder(None) == str(tmp_path / "c")
    assert cache_folder(False) is None
    assert cache_folder(tmp_path / "given") == str(tmp_path / "given")
    monkeypatch.setenv("TENLOOM_CACHE_DIR", "")
    assert cache_folder(None) is None
    monkeypatch.delenv("TENLOOM_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if sys.platform.startswith("linux"):
        assert cache_folder(None) == str(tmp_path / "xdg" / "tenloom")
    with pytest.raises(OptionTypeError, match="cache_dir"):
        tl.evaluate(tl.asarray(1.0), cache_dir=True)


def _network_and_files(tmp_path, **opts):
    terms, out, sizes = randreg(20, 3, seed=7)
    t, arrays = lazy(terms, out, sizes)
    tl.clear_caches()
    value = t.evaluate(**opts)
    np.testing.assert_allclose(value, reference(terms, out, arrays), rtol=1e-10, atol=1e-12)
    return t, terms, out, sizes, arrays


def test_default_evaluate_writes_the_path_and_a_new_process_reads_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TENLOOM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(co, "RG_TRIAL_S", 1e-12)  # random-greedy rounds: other trees to keep
    t, *_ = _network_and_files(tmp_path)
    files = list(tmp_path.glob("path-*.json"))
    assert len(files) == 1
    data = json.loads(files[0].read_text())
    assert data["version"] == disk_key() and data["ssa_path"]
    assert data["alternatives"]  # the search's other trees, for slicing
    searches, hits = co.SEARCHES["n"], co.DISK_HITS["n"]
    tl.clear_caches()  # as a new process: nothing in memory
    t.evaluate()
    assert co.SEARCHES["n"] == searches and co.DISK_HITS["n"] == hits + 1
    # the alternatives came back too: slicing sees the same candidates
    assert co._ALTERNATIVES.info().currsize >= 1


def test_cache_dir_false_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("TENLOOM_CACHE_DIR", str(tmp_path))
    _network_and_files(tmp_path, cache_dir=False)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "spoil",
    ["garbage", "version", "signature", "invalid_path", "bad_alternative", "truncated"],
)
def test_a_bad_cache_file_is_ignored_searched_again_and_rewritten(tmp_path, monkeypatch, spoil):
    monkeypatch.setenv("TENLOOM_CACHE_DIR", str(tmp_path))
    t, terms, out, sizes, arrays = _network_and_files(tmp_path)
    (f,) = tmp_path.glob("path-*.json")
    good = json.loads(f.read_text())
    data = dict(good)
    if spoil == "garbage":
        f.write_text("{not json")
    elif spoil == "truncated":
        f.write_text(json.dumps(good)[:40])
    else:
        if spoil == "version":
            data["version"] = "0.0.0/0"
        elif spoil == "signature":
            data["signature"] = data["signature"][:-3] + "9)"
        elif spoil == "invalid_path":
            data["ssa_path"] = [[0, 0]] + data["ssa_path"][1:]
        else:
            data["alternatives"] = [[[0, 1]]]
        f.write_text(json.dumps(data))
    searches = co.SEARCHES["n"]
    tl.clear_caches()
    np.testing.assert_allclose(t.evaluate(), reference(terms, out, arrays), rtol=1e-10, atol=1e-12)
    assert co.SEARCHES["n"] == searches + 1  # not used: searched again
    assert json.loads(f.read_text())["ssa_path"] == good["ssa_path"]  # and rewritten


def test_valid_ssa():
    assert co.valid_ssa([(0, 1), (2, 3)], 3)
    assert not co.valid_ssa([(0, 1)], 3)
    assert not co.valid_ssa([(0, 1), (0, 2)], 3)
    assert not co.valid_ssa([(0, 1), (3, 3)], 3)
    assert not co.valid_ssa([(0, "x"), (2, 3)], 3)
    assert not co.valid_ssa([(0, 5), (2, 3)], 3)


def test_an_unwritable_cache_folder_only_loses_the_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TENLOOM_CACHE_DIR", str(blocker / "sub"))
    _network_and_files(tmp_path)  # evaluates; nothing written


# ---- evaluate's promotion, and compile's effort -----------------------------------------------


def test_a_repeated_evaluate_is_promoted_to_the_compile_search_once(tmp_path):
    terms, out, sizes = randreg(30, 4, seed=11)
    t, arrays = lazy(terms, out, sizes)
    ref = reference(terms, out, arrays)
    runs, promotions = session.PASS_RUNS["n"], session.PROMOTIONS["n"]
    for k in range(session.PROMOTE_AT + 2):
        np.testing.assert_allclose(t.evaluate(), ref, rtol=1e-9, atol=1e-12)
        if k < session.PROMOTE_AT - 1:
            assert session.PROMOTIONS["n"] == promotions
    assert session.PROMOTIONS["n"] == promotions + 1
    assert session.PASS_RUNS["n"] == runs + 2  # the first run, and the promotion
    # the promoted graph is what a compiled plan of the same outputs gets
    plan = tl.compile(t)
    from tenloom.runtime.evaluate import optimize_graph

    promoted = optimize_graph(session.build_graph((t,)), {})
    assert [n.attrs for n in plan.optimized.order if n.op.name == "CONTRACT"] == [
        n.attrs for n in promoted.order if n.op.name == "CONTRACT"
    ]
    np.testing.assert_allclose(plan()[0], ref, rtol=1e-9, atol=1e-12)


def test_graphs_without_an_auto_search_are_never_promoted():
    arr = np.arange(6.0)
    arr.flags.writeable = False  # compile captures it as it is: the same outputs
    x = tl.asarray(arr)
    y = tl.sin(x) * 2 + 1
    promotions, runs = session.PROMOTIONS["n"], session.PASS_RUNS["n"]
    for _ in range(session.PROMOTE_AT + 1):
        np.testing.assert_allclose(y.evaluate(), np.sin(np.arange(6.0)) * 2 + 1)
    assert session.PROMOTIONS["n"] == promotions and session.PASS_RUNS["n"] <= runs + 1
    plan = tl.compile(y)  # no search to lengthen: evaluate's optimized graph is reused
    assert session.PASS_RUNS["n"] <= runs + 1
    np.testing.assert_allclose(plan()[0], np.sin(np.arange(6.0)) * 2 + 1)


def test_compile_searches_with_the_compile_effort(monkeypatch):
    seen = []
    real = co._auto_trees  # the search itself, which auto_trees and the pass both call

    def spy(terms, out, sizes, effort, complex_, progress):
        seen.append(effort)
        return real(terms, out, sizes, effort, complex_, progress)

    monkeypatch.setattr(co, "_auto_trees", spy)
    terms, out, sizes = randreg(16, 3, seed=13)
    t, arrays = lazy(terms, out, sizes)
    tl.compile(t, cache_dir=False)
    t2, _ = lazy(terms, out, sizes, seed=1)
    t2.evaluate(cache_dir=False)
    assert seen == [co.COMPILE_EFFORT, 1.0]
    assert Options(search_effort=2.0).pass_key != Options().pass_key


def test_random_greedy_rounds_run_only_as_far_as_the_predicted_time_pays(monkeypatch):
    import cotengra as ctg

    terms, out, sizes = randreg(40, 4, seed=2)  # too hard for the exact programme
    seeds = []
    real = ctg.RandomGreedyOptimizer

    def spy(*a, seed=None, **k):
        seeds.append(seed)
        return real(*a, seed=seed, **k)

    monkeypatch.setattr(ctg, "RandomGreedyOptimizer", spy)
    monkeypatch.setattr(co, "RG_TRIAL_S", 1.0)  # a round costs more than any run here: none
    assert len(co.auto_trees(terms, out, sizes)) == 1 and seeds == []  # greedy alone
    monkeypatch.setattr(co, "RG_TRIAL_S", 1e-12)  # rounds cost nothing: all of them, seeded
    co.auto_trees(terms, out, sizes)
    assert seeds == list(range(co.RG_MAX // co.RG_ROUND))


def test_the_disk_key_changes_with_the_cost_model_and_the_budgets(monkeypatch):
    from tenloom.passes import caches, cost

    base = caches._model_digest()
    monkeypatch.setattr(cost, "COPY_MADDS", cost.COPY_MADDS + 1)
    assert caches._model_digest() != base
    monkeypatch.undo()
    monkeypatch.setattr(co, "NOMINAL_MADDS_PER_S", 2 * co.NOMINAL_MADDS_PER_S)
    assert caches._model_digest() != base
    monkeypatch.undo()
    monkeypatch.setattr(caches, "_DISK_KEY", [])  # worked out again (it is memoized)
    assert caches._model_digest() == base and disk_key().endswith(base)


def test_a_limit_nothing_can_meet_is_refused_before_the_path_search(monkeypatch):
    from tenloom.graph.errors import MemoryLimitError

    terms, out, sizes = randreg(12, 3, seed=9)
    out = tuple(terms[0])  # an output of 27 float64 elements: 216 bytes
    t, _ = lazy(terms, out, sizes)

    def no_search(*a, **k):
        raise AssertionError("searched")

    monkeypatch.setattr(co, "find_path", no_search)
    with pytest.raises(MemoryLimitError, match="output"):
        t.evaluate(memory_limit=200, cache_dir=False)


def test_a_start_no_slicing_fits_does_not_fail_the_network(monkeypatch):
    from tenloom.graph.errors import MemoryLimitError
    from tenloom.passes import slicing

    terms, out, sizes = randreg(14, 3, seed=10)
    t, arrays = lazy(terms, out, sizes)
    real = slicing.slice_to_fit
    calls = []

    def first_fails(*a, **k):
        calls.append(a[3])
        if len(calls) == 1:
            raise MemoryLimitError("contraction: even the finest slicing (a test's refusal)")
        return real(*a, **k)

    monkeypatch.setattr(slicing, "slice_to_fit", first_fails)
    got = t.evaluate(memory_limit=2000, cache_dir=False)
    assert len(calls) >= 2
    np.testing.assert_allclose(got, reference(terms, out, arrays), rtol=1e-9, atol=1e-12)


def test_deterministic_runs_are_never_promoted_and_keep_their_bits():
    terms, out, sizes = randreg(24, 3, seed=3)
    t, _ = lazy(terms, out, sizes)
    promotions = session.PROMOTIONS["n"]
    first = t.evaluate(deterministic=True, cache_dir=False)
    for _ in range(session.PROMOTE_AT + 1):
        assert t.evaluate(deterministic=True, cache_dir=False).tobytes() == first.tobytes()
    assert session.PROMOTIONS["n"] == promotions


def test_explain_after_a_promotion_shows_and_keeps_the_promoted_tree():
    from tenloom.graph.ops import Op
    from tenloom.runtime.evaluate import optimize_graph

    terms, out, sizes = randreg(30, 4, seed=11)
    t, arrays = lazy(terms, out, sizes)
    for _ in range(session.PROMOTE_AT):
        t.evaluate()
    promotions = session.PROMOTIONS["n"]

    def contracts(g):
        return [n.attrs for n in g.order if n.op is Op.CONTRACT]

    promoted = contracts(optimize_graph(session.build_graph((t,)), {}))
    report = tl.explain(t)
    after = contracts(optimize_graph(session.build_graph((t,)), {}))
    assert after == promoted  # explain's own run did not put evaluate back on the first tree
    for _ in range(session.PROMOTE_AT + 1):
        np.testing.assert_allclose(t.evaluate(), reference(terms, out, arrays), rtol=1e-9)
    assert session.PROMOTIONS["n"] == promotions  # and nothing is promoted twice
    assert report.after.nodes == len(optimize_graph(session.build_graph((t,)), {}))


def test_a_bad_feed_on_the_promoting_run_fails_before_the_search():
    from tenloom.graph.errors import ShapeError

    terms, out, sizes = randreg(24, 3, seed=5)
    x = tl.placeholder(tuple(sizes[lab] for lab in terms[0]), np.float64, name="x")
    rng = np.random.default_rng(0)
    ops = [x, list(terms[0])]
    for term in terms[1:]:
        ops += [tl.asarray(rng.standard_normal([sizes[lab] for lab in term])), list(term)]
    y = tl.einsum(*ops, list(out))
    good = rng.standard_normal(x.shape)
    for _ in range(session.PROMOTE_AT - 1):
        y.evaluate(feed={x: good})
    searches, promotions = co.SEARCHES["n"], session.PROMOTIONS["n"]
    with pytest.raises(ShapeError):
        y.evaluate(feed={x: np.zeros((3, 3))})
    assert co.SEARCHES["n"] == searches and session.PROMOTIONS["n"] == promotions


def test_the_disk_key_follows_the_search_code_and_cotengra(monkeypatch):
    import cotengra
    from tenloom.passes import caches

    base = caches._model_digest()
    monkeypatch.setattr(cotengra, "__version__", "0.0.0-other")
    assert caches._model_digest() != base


def test_prune_keeps_the_newest_path_files(tmp_path):
    for i in range(12):
        f = tmp_path / f"path-{i:02d}.json"
        f.write_text("{}")
        os.utime(f, (1000 + i, 1000 + i))
    (tmp_path / "copy-plans-x.json").write_text("{}")  # not a path file: kept
    assert co.prune(str(tmp_path), keep=20) == 0
    assert co.prune(str(tmp_path), keep=8) == 6  # down to three quarters of 8
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["copy-plans-x.json"] + [f"path-{i:02d}.json" for i in range(6, 12)]
