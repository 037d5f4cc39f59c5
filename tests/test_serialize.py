"""tl.save / tl.load: exact round trips, plans that load without any search, and a catalogue of
malformed files that must each raise GraphFormatError without running anything."""

from __future__ import annotations

import io
import json
import os
import pickle
import struct
import subprocess
import sys
import warnings
import zipfile
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tenloom.graph.ops import OPS, Op
from tenloom.passes import DEFAULT_PIPELINE, slicing
from tenloom.passes import contraction_order as co
from tenloom.runtime import evaluate as ev
from tenloom.runtime import plan as pl
from tenloom.runtime import serialize as ser
from tenloom.runtime import serialize_checks as checks
from tenloom.runtime.serialize_values import SaveTypeError, decode_value, encode_value

import tenloom as tl
from tenloom.tensor import Tensor

# ---- helpers ----------------------------------------------------------------------------------


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def run_quietly(fn):
    """fn() or the EvaluationError it raised (random graphs may take log(-1) or overflow)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return fn()
        except tl.EvaluationError as e:
            return e


def assert_same_results(a, b, what: str) -> None:
    if isinstance(a, Exception) or isinstance(b, Exception):
        assert isinstance(a, Exception) and isinstance(b, Exception), (what, a, b)
        return
    assert len(a) == len(b), what
    for k, (x, y) in enumerate(zip(a, b)):
        assert same_bits(x, y), f"{what}: output {k} differs: {x!r} vs {y!r}"


def assert_close_results(a, b, what: str) -> None:
    if isinstance(a, Exception) or isinstance(b, Exception):
        assert isinstance(a, Exception) and isinstance(b, Exception), (what, a, b)
        return
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape, what
        finite = np.abs(x[np.isfinite(x)]) if x.dtype.kind in "fc" else np.abs(x)
        scale = max(1.0, float(finite.max())) if finite.size else 1.0
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-6 * scale, equal_nan=True)


def counters() -> tuple:
    return (dict(pl.COUNTERS), co.SEARCHES["n"], slicing.SLICE_SEARCHES["n"], ev.PASS_RUNS["n"])


# ---- random graphs ----------------------------------------------------------------------------

NO_CSE = tuple(p for p in DEFAULT_PIPELINE if p != "cse")
CONST_DTYPES = (
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "int32",
    "int64",
    "bool",
)


def _array(rng, shape, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind == "i":
        return rng.integers(-3, 4, size=shape).astype(dt)
    x = rng.standard_normal(shape)
    if dt.kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    x = np.asarray(x).astype(dt)
    if x.size and rng.random() < 0.2:  # non-finite values and negative zero must survive
        flat = x.reshape(-1)
        flat[rng.integers(x.size)] = rng.choice([np.nan, np.inf, -np.inf, -0.0])
    return x


UNARY = [
    tl.negative,
    tl.abs,
    tl.exp,
    tl.sin,
    tl.tanh,
    tl.sqrt,
    tl.log,
    tl.conj,
    tl.real,
    tl.imag,
    tl.sign,
    tl.invert,
    lambda t: t.astype("float32"),
    lambda t: t.astype("complex128"),
    lambda t: t.T,
    lambda t: t.reshape(-1),
    lambda t: tl.sum(t, axis=0),
    lambda t: tl.max(t, axis=-1, keepdims=True),
    lambda t: tl.mean(t),
    lambda t: t[1:],
    lambda t: t[::-1],
    lambda t: t[None],
    lambda t: tl.diagonal(t),
    lambda t: tl.trace(t),
    lambda t: t * 0.5 + 1.0,
    lambda t: tl.tanh(t * t) - t,
]
BINARY = [
    tl.add,
    tl.subtract,
    tl.multiply,
    tl.divide,
    tl.maximum,
    tl.minimum,
    tl.less,
    tl.equal,
    tl.bitwise_and,
    lambda a, b: tl.where(a > b, a, b),
    lambda a, b: a @ b,
    lambda a, b: tl.einsum("ij,jk->ik", a, b),
    lambda a, b: tl.tensordot(a, b, axes=([0], [0])),
    lambda a, b: tl.concatenate([a, b]),
    lambda a, b: tl.stack([a, b]),
    lambda a, b: tl.exp(a * b + 1.0) * (a > 0),
]


def random_graph(seed: int):
    """(outputs, placeholders, arrays bound to them, dtypes of the constants) for one seed."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 5))
    shapes = [(n, n), (n,), (), (n, n, n), (n, n)]
    pool: list[Tensor] = []
    derived: list[Tensor] = []
    phs, feeds, dts = [], [], []
    for _ in range(int(rng.integers(3, 7))):
        shape = shapes[int(rng.integers(len(shapes)))]
        r = rng.random()
        if r < 0.55:
            dt = CONST_DTYPES[int(rng.integers(len(CONST_DTYPES)))]
            dts.append(dt)
            pool.append(tl.asarray(_array(rng, shape, dt)))
        elif r < 0.8:
            dt = ("float64", "float32", "complex128", "int64")[int(rng.integers(4))]
            ph = tl.placeholder(shape, dtype=dt, name=f"p{len(phs)}")
            phs.append(ph)
            feeds.append(_array(rng, shape, dt))
            pool.append(ph)
        elif r < 0.9:
            pool.append(tl.full(shape, rng.choice([0.5, np.nan, -np.inf, -0.0, 3])))
        else:
            pool.append(tl.eye(n) if rng.random() < 0.5 else tl.arange(n))
    if rng.random() < 0.6:  # a network of 3-4 matrices: a contraction tree to keep
        mats = [tl.asarray(_array(rng, (n, n), "float64")) for _ in range(int(rng.integers(3, 5)))]
        eq = {3: "ij,jk,kl->il", 4: "ij,jk,kl,li->"}[len(mats)]
        pool.append(tl.einsum(eq, *mats))
        dts.append("float64")
        derived.append(pool[-1])

    def pick() -> Tensor:  # mostly recent results, so that chains grow deep
        src = derived if derived and rng.random() < 0.7 else pool
        if rng.random() < 0.7:
            return src[len(src) - 1 - int(rng.integers(min(len(src), 3)))]
        return src[int(rng.integers(len(src)))]

    for _ in range(int(rng.integers(12, 40))):
        try:
            if rng.random() < 0.45:
                out = UNARY[int(rng.integers(len(UNARY)))](pick())
            else:
                out = BINARY[int(rng.integers(len(BINARY)))](pick(), pick())
        except tl.TenloomError:
            continue  # shapes or dtypes that do not fit: try another op
        derived.append(out)
    src = derived or pool
    outs = [src[-1]] + ([src[int(rng.integers(len(src)))]] if rng.random() < 0.4 else [])
    return outs, phs, feeds, dts


def test_random_graphs_round_trip_bitwise(tmp_path):
    """200 random graphs: the traced graph, the optimized graph (fused regions, pairwise
    contractions) and the compiled plan all load back and give bitwise the same results; a
    loaded plan runs with no tracing, pass or search."""
    seen_ops: Counter = Counter()
    seen_dtypes: Counter = Counter()
    for seed in range(200):
        outs, phs, feeds, dts = random_graph(seed)
        seen_dtypes.update(dts)
        feed = dict(zip(phs, feeds))
        what = f"seed {seed}"
        g = tmp_path / f"g{seed}.json"

        tl.save(outs if len(outs) > 1 else outs[0], g)
        loaded = tl.load(g)
        loaded = loaded if isinstance(loaded, tuple) else (loaded,)
        assert [t.shape for t in loaded] == [t.shape for t in outs], what
        for passes in ((), NO_CSE):
            ref = run_quietly(lambda: tl.evaluate(*outs, feed=feed, passes=passes))
            got = run_quietly(lambda: tl.evaluate(*loaded, feed=feed, passes=passes))
            assert_same_results(ref, got, f"{what} (graph, passes={passes})")
        # With cse the loaded graph may differ in the last bits: cse orders commutative
        # operands by a fingerprint that hashes constants by identity, so ``a * b`` may run as
        # ``b * a``; complex products (FMA) and NaN propagation are not bitwise symmetric.
        ref = run_quietly(lambda: tl.evaluate(*outs, feed=feed, optimize="greedy"))
        got = run_quietly(lambda: tl.evaluate(*loaded, feed=feed, optimize="greedy"))
        assert_close_results(ref, got, what + " (graph, all passes)")

        plan = tl.compile(outs, inputs=phs, optimize="greedy")
        seen_ops.update(n.op for n in plan.optimized.order)
        p = tmp_path / f"p{seed}.json"
        plan.save(p)
        before = counters()
        loaded_plan = tl.load(p)
        got = run_quietly(lambda: loaded_plan(*feeds))
        assert counters() == before, what + ": loading or calling a plan ran passes or search"
        assert_same_results(run_quietly(lambda: plan(*feeds)), got, what + " (plan)")
        assert len(loaded_plan.optimized) == len(plan.optimized), what

        # the optimized graph saved as tensors: FUSED and CONTRACT nodes in a graph document
        opt = [Tensor(o) for o in plan.optimized.outputs]
        tl.save(opt, tmp_path / f"o{seed}.json")
        lo = tl.load(tmp_path / f"o{seed}.json")
        lo = lo if isinstance(lo, tuple) else (lo,)
        ref = run_quietly(lambda: tl.evaluate(*opt, feed=feed, passes=()))
        got = run_quietly(lambda: tl.evaluate(*lo, feed=feed, passes=()))
        assert_same_results(ref, got, what + " (optimized graph)")
    # the generator really covers what the format must carry
    assert all(seen_dtypes[d] >= 10 for d in CONST_DTYPES), seen_dtypes
    for op in (Op.FUSED, Op.CONTRACT, Op.PLACEHOLDER, Op.CONST, Op.FULL):
        assert seen_ops[op] >= 20, (op, seen_ops[op])


def test_loaded_plan_runs_without_search_and_keeps_trees_and_fused_regions(tmp_path):
    rng = np.random.default_rng(0)
    x = tl.placeholder((5000,), name="x")  # big enough for the numexpr kernel
    m = tl.placeholder((6, 6), name="m")
    a, b = (tl.asarray(rng.standard_normal((6, 6))) for _ in range(2))
    y = tl.tanh(x * 0.5 + 1.0) * x - tl.exp(-x * x)
    z = tl.trace(a @ m @ b @ m) + tl.sum(m * m)
    plan = tl.compile([y, z], inputs=[x, m], optimize="greedy")
    ops = Counter(n.op for n in plan.optimized.order)
    assert ops[Op.FUSED] >= 1 and ops[Op.CONTRACT] >= 2
    path = tmp_path / "plan.json"
    tl.save(plan, path)
    doc = json.loads(path.read_text())
    assert doc["kind"] == "plan" and doc["inputs"] and doc["options"] == {"optimize": "greedy"}
    assert sum(e["op"] == "contract" for e in doc["nodes"]) == ops[Op.CONTRACT]
    before = counters()
    loaded = tl.load(path)
    assert isinstance(loaded, tl.Plan)
    xs, ms = rng.standard_normal(5000), rng.standard_normal((6, 6))
    for _ in range(2):
        assert_same_results(plan(xs, ms), loaded(xs, ms), "plan")
    assert counters() == before

    def strip(text):  # source lines differ: loaded nodes are made where tl.load was called
        return [line.split("#")[0].rstrip() for line in text.splitlines()]

    assert strip(loaded.dump()) == strip(plan.dump())
    assert loaded.cost.flops == plan.cost.flops and loaded.cost.madds == plan.cost.madds
    assert loaded.cost.passes == plan.cost.passes
    assert loaded.inputs[0] is x.node and loaded.inputs[1] is m.node


def test_sliced_forward_mode_plan_round_trips(tmp_path):
    rng = np.random.default_rng(4)
    x = tl.placeholder((6, 6), name="x")
    tx = tl.placeholder((6, 6), name="tx")
    w = tl.asarray(rng.standard_normal((6, 6)))
    t = tl.jvp(tl.trace(x @ w @ x @ w), [x], [tx], optimize="greedy", memory_limit=6 * 6 * 6 * 2)
    plan = tl.compile([t], inputs=[x, tx], optimize="greedy", memory_limit=6 * 6 * 6 * 2)
    fwd = [n for n in plan.optimized.order if n.op is Op.SLICED and n.attrs[4] is not None]
    assert fwd and all(k < 0 for k in fwd[0].attrs[4])
    plan.save(tmp_path / "j.json")
    loaded = tl.load(tmp_path / "j.json")
    xs, ts = rng.standard_normal((6, 6)), rng.standard_normal((6, 6))
    assert_same_results(plan(xs, ts), loaded(xs, ts), "forward-mode sliced plan")
    wm = np.asarray(tl.evaluate(w)[0])
    f = lambda a: np.trace(a @ wm @ a @ wm)  # noqa: E731
    np.testing.assert_allclose(
        plan(xs, ts)[0], (f(xs + 1e-6 * ts) - f(xs - 1e-6 * ts)) / 2e-6, rtol=1e-6
    )
    # a wrt that mixes the reverse and forward encodings is refused
    doc = json.loads((tmp_path / "j.json").read_text())
    node = next(n for n in doc["nodes"] if n.get("op") == "sliced" and n["attrs"][4] is not None)
    node["attrs"][4] = [0, -2]
    with pytest.raises(tl.GraphFormatError, match="mixes the two modes"):
        tl.load(write_case(tmp_path, doc))


def test_sliced_plan_keeps_its_slicing(tmp_path):
    rng = np.random.default_rng(3)
    x = tl.placeholder((8, 8, 8), name="x")
    ws = [tl.asarray(rng.standard_normal((8, 8, 8))) for _ in range(3)]
    y = tl.einsum("abc,cde,efa,bdf->", x, *ws)
    for limit in (6000, 8000, 12000, 16000):  # small enough to slice, big enough to fit
        try:
            plan = tl.compile([y], inputs=[x], optimize="greedy", memory_limit=limit)
        except tl.MemoryLimitError:
            continue
        sliced = [n for n in plan.optimized.order if n.op is Op.SLICED]
        if sliced:
            break
    (sliced,) = sliced
    plan.save(tmp_path / "s.json")
    before = counters()
    loaded = tl.load(tmp_path / "s.json")
    (node,) = [n for n in loaded.optimized.order if n.op is Op.SLICED]
    assert node.attrs == sliced.attrs and loaded.opts["memory_limit"] == limit
    xs = rng.standard_normal((8, 8, 8))
    assert_same_results(plan(xs), loaded(xs), "sliced plan")
    assert counters() == before
    # a path that contracts an operand twice is not a tree
    doc = json.loads((tmp_path / "s.json").read_text())
    path = node_of(doc, "sliced")["attrs"][3]
    path[1] = [path[0][0], path[1][1]]
    with pytest.raises(tl.GraphFormatError, match="not a contraction tree"):
        tl.load(write_case(tmp_path, doc))
    doc = json.loads((tmp_path / "s.json").read_text())
    node_of(doc, "sliced")["attrs"][2][0][1] = 0
    with pytest.raises(tl.GraphFormatError, match="size >= 1"):
        tl.load(write_case(tmp_path, doc))


def test_plan_options_round_trip(tmp_path):
    x = tl.placeholder((3, 3), name="x")
    plan = tl.compile([x @ x + 1.0], inputs=[x], device=["cpu"], deterministic=True, threads=2)
    plan.save(tmp_path / "o.json")
    loaded = tl.load(tmp_path / "o.json")
    assert loaded.opts == {"device": ["cpu"], "deterministic": True, "threads": 2}
    assert loaded.devices == plan.devices
    assert same_bits(loaded(np.eye(3))[0], plan(np.eye(3))[0])
    # optimization-only options that are not plain data are dropped; run options must encode
    plan.opts = {**plan.opts, "optimize": object(), "cache_dir": "/tmp", "progress": True}
    plan.save(tmp_path / "o.json")
    assert set(json.loads((tmp_path / "o.json").read_text())["options"]) == {
        "device",
        "deterministic",
        "threads",
    }
    plan.opts = {**plan.opts, "threads": object()}
    with pytest.raises(SaveTypeError, match="plan option threads"):
        plan.save(tmp_path / "o.json")


def test_plan_loads_in_a_fresh_process_without_any_search(tmp_path):
    rng = np.random.default_rng(1)
    x = tl.placeholder((4, 4), name="x")
    ws = [tl.asarray(rng.standard_normal((4, 4)).astype(np.complex64)) for _ in range(3)]
    y = tl.einsum("ij,jk,kl,li->", x, *ws) + tl.sum(tl.abs(x))
    plan = tl.compile([y], inputs=[x], optimize="greedy")
    plan.save(tmp_path / "p.json")
    xs = rng.standard_normal((4, 4))
    np.save(tmp_path / "x.npy", xs)
    code = (
        "import numpy as np, tenloom as tl\n"
        "from tenloom.passes import contraction_order as co\n"
        "from tenloom.runtime import evaluate as ev, plan as pl\n"
        f"p = tl.load({str(tmp_path / 'p.json')!r})\n"
        f"(r,) = p(np.load({str(tmp_path / 'x.npy')!r}))\n"
        "print(r.dtype.str, r.tobytes().hex(), co.SEARCHES['n'], ev.PASS_RUNS['n'],"
        " pl.COUNTERS['compiles'], pl.COUNTERS['traces'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    dt, hexbytes, *counts = out.stdout.split()
    (ref,) = plan(xs)
    assert dt == ref.dtype.str and hexbytes == ref.tobytes().hex()
    assert counts == ["0", "0", "0", "0"]


def test_single_and_several_outputs_and_placeholders_keep_their_identity(tmp_path):
    x = tl.placeholder((3,), dtype="float32", name="x")
    y = tl.exp(x) + tl.asarray(np.array([1.0, -0.0, np.nan], np.float32))
    tl.save(y, tmp_path / "one.json")
    one = tl.load(tmp_path / "one.json")
    assert isinstance(one, Tensor) and one.shape == (3,) and one.dtype == np.float32
    xs = np.array([0.5, 1.5, 2.5], np.float32)
    assert same_bits(one.evaluate(feed={x: xs}), y.evaluate(feed={x: xs}))
    tl.save((y, x), tmp_path / "two.json")
    two = tl.load(tmp_path / "two.json")
    assert isinstance(two, tuple) and len(two) == 2
    assert two[1].node is x.node  # name, uid, shape and dtype come back: the same placeholder
    # without constants the whole graph hash-conses back to the very same nodes
    w = tl.sin(x) * 2.0
    tl.save(w, tmp_path / "w.json")
    assert tl.load(tmp_path / "w.json").node is w.node
    assert not (tmp_path / "w.npz").exists()


def test_constants_of_every_layout_round_trip(tmp_path):
    base = np.arange(24, dtype=np.float64).reshape(4, 6) / 7
    for k, arr in enumerate([base, np.asfortranarray(base), base[:, ::2], base.T, base[0, 0]]):
        t = tl.asarray(arr)
        tl.save(t, tmp_path / f"c{k}.json")
        back = tl.load(tmp_path / f"c{k}.json")
        assert same_bits(back.evaluate(), t.evaluate())


def test_long_chain_round_trips(tmp_path):
    x = tl.placeholder((2,), name="x")
    y = x
    for _ in range(20_000):
        y = tl.sin(y)
    tl.save(y, tmp_path / "chain.json")
    assert tl.load(tmp_path / "chain.json").node is y.node


# ---- tagged values ----------------------------------------------------------------------------


def _identical(a, b) -> bool:
    """Equal with the same types all the way down; floats compared by their bits."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, complex):
        return _identical(a.real, b.real) and _identical(a.imag, b.imag)
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_identical(a[k], b[k]) for k in a)
    return a == b


_floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [-0.0, struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000001))[0]]
)
_leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.text(max_size=8)
    | _floats
    | st.builds(complex, _floats, _floats)
    | st.binary(max_size=8)
    | st.sampled_from([np.dtype("float32"), np.dtype("bool"), Op.ADD, Op.FUSED])
    | st.builds(np.float32, st.floats(width=32))
    | st.builds(np.int64, st.integers(-(2**63), 2**63 - 1))
    | st.builds(np.bool_, st.booleans())
    | st.builds(np.complex64, st.complex_numbers(width=64))
)
_values = st.recursive(
    _leaves,
    lambda kids: (
        st.tuples(kids, kids)
        | st.lists(kids, max_size=3)
        | st.lists(kids, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=3) | st.integers(), kids, max_size=3)
    ),
    max_leaves=12,
)


@given(_values)
def test_tagged_values_round_trip_exactly(value):
    text = json.dumps(encode_value(value), allow_nan=False)
    back = decode_value(json.loads(text))
    assert _identical(back, value), (value, back)


def test_every_op_has_an_attribute_check():
    unchecked = set(OPS) - set(checks.CHECKS) - {Op.CONST, Op.FUSED}
    assert not unchecked, f"register a check_attrs rule with {unchecked} (graph/ops/)"


# ---- errors on save ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "obj, match",
    [
        (np.ones(3), "got ndarray"),
        ([], "non-empty"),
        ("g.json", "got str"),
        ([tl.asarray(np.ones(2)), 3.0], "item 1 is a float"),
        ({"a": 1}, "got dict"),
    ],
)
def test_save_rejects_what_it_cannot_write(tmp_path, obj, match):
    with pytest.raises(SaveTypeError, match=match) as info:
        tl.save(obj, tmp_path / "x.json")
    assert isinstance(info.value, tl.TenloomError) and isinstance(info.value, TypeError)
    assert not list(tmp_path.iterdir())


def test_save_of_an_unencodable_attribute_names_the_op():
    with pytest.raises(SaveTypeError, match="set"):
        encode_value((1, {2}))


# ---- the catalogue of malformed files --------------------------------------------------------


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    """A valid saved plan with constants, a placeholder, pairwise contractions, a fused region,
    a slice, a reduction and a full node: (folder, document, npz bytes)."""
    folder = tmp_path_factory.mktemp("valid")
    rng = np.random.default_rng(5)
    x = tl.placeholder((4, 4), name="x")
    a, b = (tl.asarray(rng.standard_normal((4, 4))) for _ in range(2))
    c = tl.asarray(np.arange(4, dtype=np.int32))
    y = tl.trace(a @ x @ b @ x) * tl.sum(tl.exp(x[1:] * 0.5 + 1.0)) + tl.sum(c)
    plan = tl.compile([y], inputs=[x], optimize="greedy")
    plan.save(folder / "p.json")
    doc = json.loads((folder / "p.json").read_text())
    ops = {e["op"] for e in doc["nodes"]}
    assert {"contract", "fused", "slice", "sum", "full", "const", "placeholder"} <= ops
    return folder, doc, (folder / "p.npz").read_bytes()


def node_of(doc, op):
    return next(e for e in doc["nodes"] if e["op"] == op)


def write_case(folder, doc=None, text=None, npz=None) -> str:
    """Write a (mutated) document next to the saved constants; returns its path."""
    path = folder / "case.json"
    path.write_text(text if text is not None else json.dumps(doc))
    if npz is not None:
        (folder / "p.npz").write_bytes(npz)
    return str(path)


def _swap_gemm_groups(doc):
    attrs = node_of(doc, "contract")["attrs"]  # (a, b, out, batch, left, con, right)
    assert attrs[4] and attrs[6]
    attrs[4], attrs[6] = attrs[6], attrs[4]


def _contract_on_a_vector(doc):
    """b_labels of length 2 on a 1-d operand: the contract rule checks only operand 0."""
    zeros = {"$bytes": "00" * 8}
    vector = {"id": 1000, "op": "full", "inputs": [], "attrs": [[4], "<f8", zeros]}
    doc["nodes"].insert(0, {**vector, "shape": [4], "dtype": "float64"})
    contract = next(e for e in doc["nodes"] if e["op"] == "contract" and e["shape"] == [])
    assert len(contract["attrs"][1]) == 2
    contract["inputs"][1] = 1000


def fused_program(doc):
    return node_of(doc, "fused")["attrs"][0]


CASES = {
    # JSON itself
    "empty file": (lambda d: "", "not valid JSON"),
    "truncated": (lambda d: json.dumps(d)[: len(json.dumps(d)) // 2], "not valid JSON"),
    "bad json": (lambda d: "{'format': 'tenloom'}", "not valid JSON"),
    "not utf-8": (lambda d: b"\xff\xfe".decode("latin-1"), "not valid JSON"),
    "not an object": (lambda d: "[1, 2]", "must be a JSON object"),
    "NaN literal": (
        lambda d: json.dumps(d).replace('"version": 1', '"version": NaN'),
        "NaN is not JSON",
    ),
    "repeated key": (
        lambda d: json.dumps(d).replace('"version": 1', '"version": 1, "version": 1'),
        "repeats the key",
    ),
    "deep nesting": (lambda d: "[" * 100_000 + "]" * 100_000, "not valid JSON|JSON object"),
    # header
    "wrong format": (lambda d: d.update(format="pickle"), "not a tenloom file"),
    "newer version": (lambda d: d.update(version=2), "version 2 .written by a newer"),
    "string version": (lambda d: d.update(version="1"), "version must be an int"),
    "unknown kind": (lambda d: d.update(kind="module"), "kind must be one of"),
    "extra key": (lambda d: d.update(code="print(1)"), "unexpected \\['code'\\]"),
    "missing key": (lambda d: d.pop("outputs"), "missing \\['outputs'\\]"),
    "no nodes": (lambda d: d.update(nodes=[]), "non-empty array"),
    # nodes and references
    "unknown op": (lambda d: node_of(d, "sum").update(op="frobnicate"), "unknown op 'frobnicate'"),
    "unknown dtype": (lambda d: node_of(d, "sum").update(dtype="object"), "unknown dtype 'object'"),
    "float128 dtype": (lambda d: node_of(d, "sum").update(dtype="float128"), "unknown dtype"),
    "duplicate ids": (lambda d: d["nodes"][1].update(id=d["nodes"][0]["id"]), "duplicate node id"),
    "dangling input": (
        lambda d: node_of(d, "sum").update(inputs=[999]),
        "node 999, which does not",
    ),
    "cycle": (
        lambda d: d["nodes"][1].update(inputs=[d["nodes"][-1]["id"]]),
        "cycle",
    ),
    "out of order": (
        lambda d: d["nodes"].insert(0, d["nodes"].pop(-1)),
        "topological order",
    ),
    "dangling output": (lambda d: d.update(outputs=[12345]), "names node 12345"),
    "bool id": (lambda d: d["nodes"][0].update(id=True), "id must be a non-negative int"),
    "extra node key": (lambda d: d["nodes"][0].update(source="x.py"), "keys must be"),
    "wrong arity": (lambda d: node_of(d, "slice").update(inputs=[0, 0]), "takes 1 inputs"),
    # attributes against shapes
    "recorded shape": (lambda d: node_of(d, "slice").update(shape=[4, 4]), "recorded as"),
    "recorded dtype": (lambda d: node_of(d, "contract").update(dtype="float32"), "recorded as"),
    "contract labels": (
        lambda d: node_of(d, "contract")["attrs"].__setitem__(0, [0, 1, 2]),
        "labels .* for operands of 2 and 2 axes",
    ),
    "dtype rule": (
        lambda d: node_of(d, "slice").update(op="invert", attrs=[]),
        "rejected by the op's rule: DTypeError: invert",
    ),
    "contract groups": (_swap_gemm_groups, "GEMM grouping"),
    "contract operand rank": (_contract_on_a_vector, "labels .* for operands of 2 and 1 axes"),
    "float axis": (lambda d: node_of(d, "sum")["attrs"].__setitem__(0, [0.0]), "tuple of ints"),
    "keepdims int": (lambda d: node_of(d, "sum")["attrs"].__setitem__(1, 0), "keepdims must be"),
    "unnormalized slice": (
        lambda d: node_of(d, "slice")["attrs"][0].__setitem__(0, [1, 99, 1]),
        "not a normalized",
    ),
    "full bytes": (
        lambda d: node_of(d, "full")["attrs"].__setitem__(2, {"$bytes": "00"}),
        "full value must be 8 bytes",
    ),
    "placeholder shape": (
        lambda d: node_of(d, "placeholder")["attrs"].__setitem__(2, [4, 5]),
        "recorded as",
    ),
    "placeholder dtype": (
        lambda d: node_of(d, "placeholder")["attrs"].__setitem__(3, "O"),
        "dtype 'O' is not one of",
    ),
    "attrs not array": (lambda d: node_of(d, "sum").update(attrs={"$list": []}), "attrs must be"),
    # FUSED programs
    "fused non-elementwise step": (
        lambda d: fused_program(d)[0].__setitem__(0, {"$op": "matmul"}),
        "not an elementwise op",
    ),
    "fused unknown step op": (
        lambda d: fused_program(d)[0].__setitem__(0, {"$op": "system"}),
        "unknown op 'system'",
    ),
    "fused forward reference": (
        lambda d: fused_program(d)[0][2].__setitem__(0, ["step", 5]),
        "names no input or earlier step",
    ),
    "fused missing input": (
        lambda d: fused_program(d)[0][2].__setitem__(0, ["in", 7]),
        "names no input or earlier step",
    ),
    "fused bad arg kind": (
        lambda d: fused_program(d)[0][2].__setitem__(0, ["__import__('os')", 0]),
        "names no input or earlier step",
    ),
    "fused bool index": (
        lambda d: fused_program(d)[0][2].__setitem__(0, ["in", True]),
        "is not \\('in', k\\)",
    ),
    "fused unused input": (
        lambda d: node_of(d, "fused")["inputs"].append(node_of(d, "fused")["inputs"][0]),
        "never read",
    ),
    "fused result shape": (
        lambda d: node_of(d, "fused")["attrs"].__setitem__(1, [2, 2]),
        "fused program gives",
    ),
    "fused not fusable": (
        lambda d: fused_program(d)[0].__setitem__(0, {"$op": "floordiv"}),
        "not fusable",
    ),
    "fused empty": (
        lambda d: node_of(d, "fused")["attrs"].__setitem__(0, []),
        "1 to 4096 steps",
    ),
    # tagged values
    "unknown tag": (
        lambda d: node_of(d, "sum")["attrs"].__setitem__(1, {"$pickle": "gASVAAAA"}),
        "unknown tag",
    ),
    "two-key tag": (
        lambda d: node_of(d, "sum")["attrs"].__setitem__(1, {"$list": [], "$op": "add"}),
        "one '\\$tag' key",
    ),
    "bad float tag": (
        lambda d: node_of(d, "sum")["attrs"].__setitem__(1, {"$float": "1e3"}),
        "bad \\$float",
    ),
    "finite bits": (
        lambda d: node_of(d, "sum")["attrs"].__setitem__(1, {"$float": "bits:3ff0000000000000"}),
        "bad \\$float",
    ),
    # absurd sizes
    "huge shape": (lambda d: node_of(d, "sum").update(shape=[2**30, 2**30]), "more than"),
    "negative dim": (lambda d: node_of(d, "sum").update(shape=[-1]), "non-negative int"),
    "float dim": (lambda d: node_of(d, "sum").update(shape=[2.0]), "non-negative int"),
    "too many axes": (lambda d: node_of(d, "sum").update(shape=[1] * 65), "at most 64"),
    "huge reshape": (
        lambda d: node_of(d, "placeholder")["attrs"].__setitem__(2, [2**40, 2**40]),
        "more than",
    ),
    # plan fields
    "input not placeholder": (
        lambda d: d.update(inputs=[node_of(d, "sum")["id"]]),
        "not a placeholder",
    ),
    "input missing": (lambda d: d.update(inputs=[]), "not among its inputs"),
    "unknown option": (lambda d: d["options"].update(exec="rm -rf /"), "unknown plan option"),
    "option type": (lambda d: d["options"].update(threads=0), "wrong type"),
    "memory limit": (lambda d: d["options"].update(memory_limit="sliced"), "memory_limit="),
    "stats not object": (lambda d: d.update(stats=[]), "'stats' must be"),
    # constants reference
    "npz parent path": (lambda d: d.update(constants="../p.npz"), "bare .npz file name"),
    "npz absolute path": (lambda d: d.update(constants="/etc/passwd.npz"), "bare .npz file name"),
    "npz not npz": (lambda d: d.update(constants="p.json"), "bare .npz file name"),
    "npz missing": (lambda d: d.update(constants="other.npz"), "does not exist"),
    "npz null": (lambda d: d.update(constants=None), "no constants file"),
    "npz dot dot": (lambda d: d.update(constants=".."), "bare .npz"),
    "data key": (lambda d: node_of(d, "const").update(data="../x"), "data must be a unique key"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_documents_raise(valid, tmp_path, case):
    folder, doc, npz = valid
    mutate, match = CASES[case]
    d = json.loads(json.dumps(doc))
    out = mutate(d)
    text = out if isinstance(out, str) else None
    path = write_case(tmp_path, d, text, npz)
    with pytest.raises(tl.GraphFormatError, match=match):
        tl.load(path)


def test_the_valid_document_loads(valid, tmp_path):
    folder, doc, npz = valid
    assert isinstance(tl.load(write_case(tmp_path, doc, npz=npz)), tl.Plan)


def test_json_number_overflow_and_limits(valid, tmp_path, monkeypatch):
    folder, doc, npz = valid
    d = json.loads(json.dumps(doc))
    text = json.dumps(d).replace('"version": 1', '"version": 1e400')
    with pytest.raises(tl.GraphFormatError):
        tl.load(write_case(tmp_path, text=text, npz=npz))
    d = json.loads(json.dumps(doc))
    node_of(d, "sum")["attrs"][0] = "1" * 5000  # a number too long to parse
    text = json.dumps(d).replace('"' + "1" * 5000 + '"', "1" * 5000)
    with pytest.raises(tl.GraphFormatError, match="not valid JSON"):
        tl.load(write_case(tmp_path, text=text, npz=npz))
    path = write_case(tmp_path, doc, npz=npz)
    monkeypatch.setattr(ser, "MAX_NODES", 3)
    with pytest.raises(tl.GraphFormatError, match="the limit is 3"):
        tl.load(path)
    monkeypatch.setattr(ser, "MAX_JSON_BYTES", 100)
    with pytest.raises(tl.GraphFormatError, match="the limit is 100"):
        tl.load(path)


# ---- the constants file -----------------------------------------------------------------------


def _npz(members: dict[str, bytes], compression=zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _npy(arr: np.ndarray, allow_pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=allow_pickle)
    return buf.getvalue()


def _members(npz: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(npz)) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def _const_entry(doc):
    """The float64 (4, 4) constant of the valid document."""
    return next(e for e in doc["nodes"] if e["op"] == "const" and e["shape"] == [4, 4])


def test_npz_with_wrong_shape_dtype_or_members_raises(valid, tmp_path):
    folder, doc, npz = valid
    key = _const_entry(doc)["data"] + ".npy"
    members = _members(npz)
    bad = {
        "wrong shape": {**members, key: _npy(np.zeros((4, 5)))},
        "wrong dtype": {**members, key: _npy(np.zeros((4, 4), np.float32))},
        "big-endian": {**members, key: _npy(np.zeros((4, 4), ">f8"))},
        "missing member": {k: v for k, v in members.items() if k != key},
        "extra member": {**members, "evil.npy": _npy(np.zeros(1))},
        "truncated data": {**members, key: _npy(np.zeros((4, 4)))[:-8]},
        "trailing data": {**members, key: _npy(np.zeros((4, 4))) + b"\0" * 8},
        "bad header": {**members, key: b"\x93NUMPY\x01\x00\x10\x00{'descr': os}    \n"},
        "not npy": {**members, key: b"hello"},
    }
    for ms in bad.values():
        path = write_case(tmp_path, doc, npz=_npz(ms))
        with pytest.raises(tl.GraphFormatError):
            tl.load(path)
    for data in (b"PK\x03\x04garbage", b""):
        path = write_case(tmp_path, doc, npz=data)
        with pytest.raises(tl.GraphFormatError, match="not a valid npz"):
            tl.load(path)
    # deflate bombs: a member cannot claim more than deflate can expand
    path = write_case(tmp_path, doc, npz=_npz(members, zipfile.ZIP_BZIP2))
    with pytest.raises(tl.GraphFormatError, match="compression method"):
        tl.load(path)
    path = write_case(tmp_path, doc, npz=_npz(members, zipfile.ZIP_DEFLATED))
    assert isinstance(tl.load(path), tl.Plan)
    arrays = {k[:-4]: np.load(io.BytesIO(v)) for k, v in members.items()}
    np.savez_compressed(tmp_path / "p.npz", **arrays)  # NumPy's own archives are fine
    assert isinstance(tl.load(path), tl.Plan)


class _Canary:
    """Unpickling this creates the file at ``path`` (what a malicious pickle would do)."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_pickle_payload_is_never_unpickled(valid, tmp_path):
    folder, doc, npz = valid
    canary = tmp_path / "canary"
    payload = np.empty(1, dtype=object)
    payload[0] = _Canary(str(canary))
    key = _const_entry(doc)["data"] + ".npy"
    evil = _npz({**_members(npz), key: _npy(payload, allow_pickle=True)})
    path = write_case(tmp_path, doc, npz=evil)
    with pytest.raises(tl.GraphFormatError, match="pickled"):
        tl.load(path)
    assert not canary.exists()
    # a pickle smuggled into the JSON is just an unknown tag
    d = json.loads(json.dumps(doc))
    node_of(d, "sum")["attrs"][1] = {"$pickle": pickle.dumps(_Canary(str(canary))).hex()}
    with pytest.raises(tl.GraphFormatError, match="unknown tag"):
        tl.load(write_case(tmp_path, d, npz=npz))
    assert not canary.exists()
    # the payload is live: unpickling it (which tenloom never does) creates the canary
    (tmp_path / "evil.npz").write_bytes(evil)
    with np.load(tmp_path / "evil.npz", allow_pickle=True) as f:
        f[key[:-4]]
    assert canary.exists()


def test_npz_symlinks_must_stay_in_the_folder(valid, tmp_path):
    folder, doc, npz = valid
    outside = tmp_path / "outside"
    inside = tmp_path / "inside"
    outside.mkdir()
    inside.mkdir()
    (outside / "p.npz").write_bytes(npz)
    (inside / "case.json").write_text(json.dumps(doc))
    os.symlink(outside / "p.npz", inside / "p.npz")
    with pytest.raises(tl.GraphFormatError, match="outside"):
        tl.load(inside / "case.json")
    os.symlink(os.path.join("..", "outside"), inside / "sub")  # a folder link: still a path
    d = dict(doc, constants="sub/p.npz")
    (inside / "case.json").write_text(json.dumps(d))
    with pytest.raises(tl.GraphFormatError, match="bare"):
        tl.load(inside / "case.json")
    # a link to a file in the same folder is fine
    os.unlink(inside / "p.npz")
    (inside / "real.npz").write_bytes(npz)
    os.symlink("real.npz", inside / "p.npz")
    (inside / "case.json").write_text(json.dumps(doc))
    assert isinstance(tl.load(inside / "case.json"), tl.Plan)


def test_errors_name_the_file_and_node(valid, tmp_path):
    folder, doc, npz = valid
    d = json.loads(json.dumps(doc))
    bad = node_of(d, "slice")
    bad["shape"] = [9, 9]
    path = write_case(tmp_path, d, npz=npz)
    with pytest.raises(tl.GraphFormatError) as info:
        tl.load(path)
    msg = str(info.value)
    assert msg.startswith(path) and f"node {bad['id']} (slice)" in msg and "(9, 9)" in msg


def test_nothing_is_allocated_for_a_file_that_fails_validation(valid, tmp_path, monkeypatch):
    """Constants are read only after the whole graph has been validated."""
    folder, doc, npz = valid
    d = json.loads(json.dumps(doc))
    node_of(d, "fused")["attrs"][1] = [2, 2]
    reads = []
    monkeypatch.setattr(ser, "_read_member", lambda *a: reads.append(a) or np.zeros(0))
    with pytest.raises(tl.GraphFormatError):
        tl.load(write_case(tmp_path, d, npz=npz))
    assert not reads


def test_a_constant_claiming_terabytes_is_refused_before_allocation(tmp_path):
    n = 2**40
    doc = {
        "format": "tenloom",
        "version": 1,
        "kind": "graph",
        "constants": "big.npz",
        "nodes": [
            {"id": 0, "op": "const", "inputs": [], "data": "c0", "shape": [n], "dtype": "float64"}
        ],
        "outputs": [0],
    }
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (n,)}
    )
    (tmp_path / "big.npz").write_bytes(_npz({"c0.npy": header.getvalue() + bytes(128)}))
    (tmp_path / "big.json").write_text(json.dumps(doc))
    with pytest.raises(tl.GraphFormatError, match="bytes, expected"):
        tl.load(tmp_path / "big.json")
