"""Issue 18, class 11: every option of evaluate, compile, grad and friends, and every argument
of the ops (axis=, keepdims=, shapes, permutations, einsum sublists), is checked before any
work, in one place (runtime/options.py), by a TenloomError naming the option and what is
accepted; wrong types are TypeErrors as in NumPy. ``compile(verify=True)`` verifies."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tenloom.passes as passes
import tenloom.runtime.evaluate as ev
from hypothesis import given
from hypothesis import strategies as st
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node
from tenloom.runtime.options import parse_options
from tenloom.runtime.plan import COUNTERS

import tenloom as tl

RNG = np.random.default_rng(11)
A, B, C = (RNG.standard_normal(s) for s in ((3, 4), (4, 5), (5, 2)))


def network() -> tl.Tensor:
    """A fresh three-operand network (its evaluation needs an order search)."""
    return tl.einsum("ij,jk,kl->il", *map(tl.asarray, (A, B, C))).sum()


class NothingRan(Exception):
    pass


@pytest.fixture
def no_work(monkeypatch):
    """Any pass looked up, or pipeline run, or compile, fails the test: the option checks come
    first. Yields a function asserting the counters did not move."""
    before = (ev.PASS_RUNS["n"], COUNTERS["compiles"], COUNTERS["traces"])

    def refuse(name):
        raise NothingRan(f"pass {name!r} was about to run")

    monkeypatch.setattr(passes, "get_pass", refuse)

    def check():
        assert (ev.PASS_RUNS["n"], COUNTERS["compiles"], COUNTERS["traces"]) == before

    return check


def _evaluate(**o):
    return tl.evaluate(network(), **o)


def _evaluate_async(**o):
    return tl.evaluate_async(network(), **o)  # raises at once, not from the Future


def _tensor_evaluate(**o):
    return network().evaluate(**o)


def _explain(**o):
    return tl.explain(network(), **o)


def _dump(**o):
    return tl.dump(network(), **o)


def _compile(**o):
    x = tl.placeholder((3, 4), name="x")
    return tl.compile(tl.einsum("ij,jk,kl->il", x, B, C), [x], **o)


def _function(**o):
    return tl.function(lambda x: x * 2.0, **o)  # raises when decorating


def _scalar_loss():
    x = tl.asarray(A)
    return x, (tl.einsum("ij,jk,kl->il", x, B, C) ** 2).sum()


def _grad(**o):
    x, loss = _scalar_loss()
    return tl.grad(loss, x, **o)


def _value_and_grad(**o):
    x, loss = _scalar_loss()
    return tl.value_and_grad(loss, x, **o)


def _vjp(**o):
    x, loss = _scalar_loss()
    return tl.vjp(loss, x, tl.ones((), "float64"), **o)


def _jvp(**o):
    x, loss = _scalar_loss()
    return tl.jvp(loss, x, tl.ones(A.shape), **o)


def _hvp(**o):
    x, loss = _scalar_loss()
    return tl.hvp(loss, [x], [tl.ones(A.shape)], **o)


RUN_CALLERS = [_evaluate, _evaluate_async, _tensor_evaluate, _explain, _dump]
PLAN_CALLERS = [_compile, _function]
GRAD_CALLERS = [_grad, _value_and_grad, _vjp, _jvp, _hvp]


class NotAClient:
    pass


# (option, bad value, error class): the error also names the option
BAD_SEARCH = [
    ("optimize", "bogus", tl.OptionError),
    ("optimize", True, tl.OptionTypeError),
    ("optimize", 3, tl.OptionTypeError),
    ("optimize", {"method": "bogus"}, tl.OptionError),
    ("optimize", {"method": "greedy", "max_time": 1}, tl.OptionError),
    # HyperOptimizer values cotengra only rejected while searching (KeyError 'tree', KeyError
    # 'nope', ValueError), or not at all
    ("optimize", {"method": "hyper", "max_repeats": -1}, tl.OptionError),
    ("optimize", {"method": "hyper", "max_repeats": "x"}, tl.OptionTypeError),
    ("optimize", {"method": "hyper", "methods": ["nope"]}, tl.OptionError),
    ("optimize", {"method": "hyper", "minimize": "nope"}, tl.OptionError),
    ("optimize", {"method": "hyper", "max_time": -1}, tl.OptionError),
    ("optimize", tl.Tensor, tl.OptionTypeError),  # a class, not an optimizer object
    ("memory_limit", math.inf, tl.OptionError),
    ("memory_limit", math.nan, tl.OptionError),
    ("memory_limit", -1, tl.OptionError),
    ("memory_limit", 0.5, tl.OptionError),
    ("memory_limit", "lots", tl.OptionError),
    ("memory_limit", "1e9 GB", tl.OptionError),
    ("memory_limit", True, tl.OptionTypeError),
    ("memory_limit", [1000], tl.OptionTypeError),
    ("cache_dir", 3, tl.OptionTypeError),
    ("cache_dir", "", tl.OptionTypeError),
]
BAD_RUN = BAD_SEARCH + [
    ("device", "cpu:7", tl.DeviceError),
    ("device", "cpu:x", tl.DeviceError),
    ("device", "cuda:-1", tl.DeviceError),
    ("device", "tpu", tl.DeviceError),
    ("device", ["cpu", "cpu:0"], tl.DeviceError),
    ("device", [], tl.DeviceError),
    ("device", 0, tl.OptionTypeError),
    ("device", ["cpu", 1], tl.OptionTypeError),
    ("passes", "simplify", tl.OptionTypeError),
    ("passes", ("nope",), tl.OptionError),
    ("passes", ("simplify", 3), tl.OptionTypeError),
    ("passes", 5, tl.OptionTypeError),
    ("threads", -1, tl.OptionError),
    ("threads", 0, tl.OptionError),
    ("threads", 1.5, tl.OptionTypeError),
    ("threads", True, tl.OptionTypeError),
    ("threads", "2", tl.OptionTypeError),
    ("deterministic", "yes", tl.OptionTypeError),
    ("progress", 3, tl.OptionTypeError),
    ("to_host", None, tl.OptionTypeError),
    ("to_host", "no", tl.OptionTypeError),
    ("verify", "yes", tl.OptionTypeError),
    ("scheduler", NotAClient(), tl.OptionTypeError),
    ("fead", {}, tl.OptionTypeError),  # an unknown option
]
BAD_EVALUATE = BAD_RUN + [
    ("feed", [1, 2], tl.OptionTypeError),
    ("feed", {"x": np.ones(2)}, tl.OptionTypeError),
]
BAD_PLAN = BAD_RUN + [("feed", {}, tl.OptionTypeError)]  # plans bind arrays when called
BAD_GRAD = BAD_SEARCH + [
    ("threads", 2, tl.OptionTypeError),
    ("optimise", "greedy", tl.OptionTypeError),
]


def _cases(callers, table):
    return [
        pytest.param(fn, name, value, err, id=f"{fn.__name__[1:]}-{name}={value!r}"[:80])
        for fn in callers
        for name, value, err in table
    ]


@pytest.mark.parametrize(
    "fn,name,value,err",
    _cases(RUN_CALLERS, BAD_EVALUATE)
    + _cases(PLAN_CALLERS, BAD_PLAN)
    + _cases(GRAD_CALLERS, BAD_GRAD),
)
def test_a_bad_option_raises_before_any_work(no_work, fn, name, value, err):
    with pytest.raises(err) as info:
        fn(**{name: value})
    assert isinstance(info.value, tl.TenloomError)
    msg = str(info.value)
    assert name in msg, msg
    if err is tl.OptionTypeError:  # a wrong type (or an unknown name) is a TypeError
        assert isinstance(info.value, TypeError)
    if isinstance(info.value, tl.OptionError):  # every option error is also a ValueError
        assert isinstance(info.value, ValueError)
        assert any(w in msg for w in ("accepted", "valid", "give", "HyperOptimizer")), msg
    no_work()


def test_messages_name_the_value_and_the_accepted_values():
    with pytest.raises(tl.OptionError) as info:
        _evaluate(optimize="bogus")
    msg = str(info.value)
    assert msg.startswith("evaluate: optimize='bogus' is not valid; accepted: 'auto', 'greedy'")
    assert "False" in msg and "dict" in msg
    with pytest.raises(tl.OptionTypeError, match=r"passes='simplify' is a string; give a tuple"):
        _evaluate(passes="simplify")
    with pytest.raises(tl.OptionTypeError, match=r"did you mean 'memory_limit'"):
        _evaluate(memory_limt="1GB")
    with pytest.raises(tl.DeviceError, match=r"device='cpu:7' does not exist"):
        _compile(device="cpu:7")
    with pytest.raises(tl.OptionTypeError, match=r"grad: unknown option 'threads'"):
        _grad(threads=2)


def test_a_cache_dir_that_is_a_file_is_refused(tmp_path, no_work):
    path = tmp_path / "a-file"
    path.write_text("")
    for fn in (_evaluate, _compile, _grad):
        with pytest.raises(tl.OptionError, match="cache_dir"):
            fn(cache_dir=path)
    no_work()


def test_good_options_still_work(tmp_path):
    expected = (A @ B @ C).sum()
    for opts in (
        {},
        {"optimize": "random-greedy"},  # a cotengra preset tenloom does not name itself
        {"optimize": {"method": "hyper", "max_repeats": 4, "max_time": 1}},
        {"optimize": False, "passes": ["simplify", "canonicalize"]},
        {"memory_limit": 1e6, "threads": np.int64(2), "deterministic": np.True_},
        {"device": ["cpu"], "cache_dir": tmp_path, "verify": True, "progress": False},
    ):
        got = _evaluate(**opts)[0]
        np.testing.assert_allclose(got, expected, rtol=1e-12, err_msg=repr(opts))
    x = tl.placeholder((3, 4), name="x")
    loss = (tl.einsum("ij,jk,kl->il", x, B, C) ** 2).sum()
    g = tl.grad(loss, x, optimize="greedy", memory_limit="1 MB", cache_dir=tmp_path)
    want = 2 * (A @ B @ C) @ (B @ C).T
    np.testing.assert_allclose(g.evaluate(feed={x: A}), want, rtol=1e-12)


def test_compile_verify_runs_the_verifier(monkeypatch):
    """verify=True checks every node after each pass of that compile (it was ignored); a pass
    that breaks a node's shape rule is caught, naming the pass."""
    monkeypatch.setattr(passes, "VERIFY", False)  # the tests' global switch off: verify= alone

    def break_shapes(graph, ctx):
        out = graph.outputs[0]
        bad = object.__new__(Node)  # a node whose recorded shape its op's rule disagrees with
        for slot in ("op", "inputs", "attrs", "dtype", "source"):
            object.__setattr__(bad, slot, getattr(out, slot))
        object.__setattr__(bad, "shape", (*out.shape, 1))
        return Graph((bad,))

    monkeypatch.setitem(passes.PASSES, "break_shapes_for_test", break_shapes)
    x = tl.placeholder((3, 4), name="x")
    y = x * 2.0 + 1.0
    with pytest.raises(AssertionError, match="after break_shapes_for_test"):
        tl.compile(y, [x], passes=("simplify", "break_shapes_for_test"), verify=True)
    calls = []
    import tenloom.passes.verify as verify_module

    real = verify_module.verify_graph
    monkeypatch.setattr(
        verify_module, "verify_graph", lambda g, after="?": calls.append(after) or real(g, after)
    )
    plan = tl.compile(y, [x], passes=("simplify", "fuse_elementwise"), verify=True)
    assert calls == ["simplify", "fuse_elementwise"]
    np.testing.assert_allclose(plan(A)[0], A * 2 + 1)
    tl.compile(y, [x], passes=("simplify", "fuse_elementwise"))
    assert calls == ["simplify", "fuse_elementwise"]  # no verify=: not verified


def test_evaluate_verify_is_not_skipped_by_the_cache():
    from tenloom.runtime.session import PROMOTE_AT

    y = network()  # (the same nodes as other tests' networks: past its promotion, then cached)
    for _ in range(PROMOTE_AT):
        y.evaluate()
    before = ev.PASS_RUNS["n"]
    y.evaluate()
    assert ev.PASS_RUNS["n"] == before  # cached
    y.evaluate(verify=True)
    assert ev.PASS_RUNS["n"] == before + 1  # verified: the passes ran again


def test_a_loaded_plan_with_a_bad_option_is_a_format_error(tmp_path):
    import json

    x = tl.placeholder((3, 4), name="x")
    tl.compile(x * tl.asarray(A), [x], optimize="greedy").save(tmp_path / "p.json")
    doc = json.loads((tmp_path / "p.json").read_text())
    for name, value in (("optimize", "bogus"), ("passes", ["nope"]), ("device", "cpu:7")):
        bad = {**doc, "options": {**doc["options"], name: value}}
        (tmp_path / "q.json").write_text(json.dumps(bad))
        (tmp_path / "q.npz").write_bytes((tmp_path / "p.npz").read_bytes())
        with pytest.raises(tl.GraphFormatError, match=name):
            tl.load(tmp_path / "q.json")


@pytest.mark.parametrize("path", [3, None, b"", ""])
def test_save_and_load_refuse_a_path_that_is_not_a_file_name(path):
    x = tl.placeholder((3, 4), name="x")
    t = tl.asarray(A) * 2.0
    for call in (lambda: tl.save(t, path), lambda: tl.compile(x * 2.0, [x]).save(path)):
        with pytest.raises(tl.OptionTypeError, match="save: path="):
            call()
    with pytest.raises(tl.OptionTypeError, match="load: path="):
        tl.load(path)


def test_inspection_entry_points_check_their_options(no_work):
    t = network()
    with pytest.raises(tl.OptionError, match="visualize: optimize='bogus'"):
        tl.visualize(t, optimize="bogus")
    with pytest.raises(tl.OptionError, match="to_networkx: threads=0"):
        tl.to_networkx(t, optimized=True, threads=0)
    no_work()


def test_hvp_needs_one_vector_per_input():
    x, y = tl.asarray(A), tl.asarray(B)
    loss = (tl.einsum("ij,jk->ik", x, y) ** 2).sum()
    with pytest.raises(tl.ShapeError, match="hvp: 1 vectors for 2 inputs"):
        tl.hvp(loss, [x, y], [tl.ones(A.shape)])
    with pytest.raises(tl.ShapeError, match="hvp: vector of shape"):
        tl.hvp(loss, [x], [tl.ones(B.shape)])


# ---- the ops' own arguments: NumPy's error type for the same call ----------------------------

X = np.arange(6.0).reshape(2, 3)
ARGUMENTS = [
    ("sum axis=1.0", lambda m, x: m.sum(x, axis=1.0)),
    ("sum axis=True", lambda m, x: m.sum(x, axis=True)),
    ("sum axis=np.True_", lambda m, x: m.sum(x, axis=np.True_)),
    ("sum axis=(0, 1.0)", lambda m, x: m.sum(x, axis=(0, 1.0))),
    ("sum axis='0'", lambda m, x: m.sum(x, axis="0")),
    ("max axis=True", lambda m, x: m.max(x, axis=True)),
    ("prod keepdims='yes'", lambda m, x: m.prod(x, axis=0, keepdims="yes")),
    ("mean axis=1.0", lambda m, x: m.mean(x, axis=1.0)),
    ("mean keepdims=None", lambda m, x: m.mean(x, keepdims=None)),
    ("reshape (2.0, 3)", lambda m, x: m.reshape(x, (2.0, 3))),
    ("reshape (True, 6)", lambda m, x: m.reshape(x, (True, 6))),
    ("reshape 6.0", lambda m, x: m.reshape(x, 6.0)),
    ("transpose (0.0, 1)", lambda m, x: m.transpose(x, (1.0, 0))),
    ("transpose (True, False)", lambda m, x: m.transpose(x, (True, False))),
    ("zeros (2.5,)", lambda m, x: m.zeros((2.5,))),
    ("zeros (True,)", lambda m, x: m.zeros((True, 2))),
    ("expand_dims 1.0", lambda m, x: m.expand_dims(x, 1.0)),
    ("moveaxis dst 1.0", lambda m, x: m.moveaxis(x, 0, 1.0)),
    ("squeeze axis=True", lambda m, x: m.squeeze(x[:1], axis=True)),
    ("concatenate axis=1.0", lambda m, x: m.concatenate([x, x], axis=1.0)),
    ("stack axis=0.0", lambda m, x: m.stack([x, x], axis=0.0)),
    ("diagonal offset=0.5", lambda m, x: m.diagonal(x, offset=0.5)),
    ("einsum label 0.5", lambda m, x: m.einsum(x, [0.5, 1], [0])),
    ("einsum label True", lambda m, x: m.einsum(x, [True, 0])),
    ("einsum output label", lambda m, x: m.einsum(x, [0, 1], [0.0])),
    ("einsum nested sublist", lambda m, x: m.einsum(x, [[0], 1])),
    ("einsum sublist an int", lambda m, x: m.einsum(x, 5)),
    ("einsum output an int", lambda m, x: m.einsum(x, [0, 1], 5)),
]


@pytest.mark.parametrize("build", [c[1] for c in ARGUMENTS], ids=[c[0] for c in ARGUMENTS])
def test_a_bad_argument_raises_numpys_error_type(build):
    with pytest.raises(Exception) as expected:
        build(np, X)
    assert isinstance(expected.value, TypeError), "the table lists NumPy's TypeErrors"
    with pytest.raises(tl.OptionTypeError) as info:  # a TenloomError and a TypeError
        build(tl, tl.asarray(X))
    assert isinstance(info.value, TypeError) and isinstance(info.value, tl.TenloomError)
    msg = str(info.value)
    assert any(w in msg for w in ("axis", "keepdims", "dimension", "offset", "sublist")), msg


# ---- properties: any value is either accepted or refused up front ---------------------------

VALUES = st.one_of(
    st.integers(-3, 3),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.booleans(),
    st.text(max_size=6),
    st.none(),
    st.sampled_from(["2", "4GiB", "12 kb", "1e3", " 7 MB ", "0 B", "-1KB", "inf"]),
)


@given(VALUES)
def test_threads_and_memory_limit_are_accepted_or_refused_up_front(value):
    small = tl.asarray(np.ones(4)) * 2.0
    threads_ok = value is None or (type(value) is int and value >= 1)
    try:
        got = small.evaluate(threads=value)
        assert threads_ok, value
        np.testing.assert_array_equal(got, 2.0)
    except tl.OptionError as e:
        assert not threads_ok and "threads" in str(e)
    try:
        limit = parse_options("evaluate", {"memory_limit": value}).memory_limit
    except tl.OptionError as e:
        assert "memory_limit" in str(e)
        return
    if value is None:
        return
    assert isinstance(limit, int) and limit >= 1, (value, limit)
    try:
        np.testing.assert_array_equal(small.evaluate(memory_limit=value), 2.0)
    except tl.MemoryLimitError:
        assert limit < 4096  # too small for the arrays themselves: refused, not wrong


# ---- every input error is a TenloomError (also the builtin type NumPy raises) ----------------


def test_protocol_and_input_errors_are_typed():
    t = tl.asarray(np.ones(3))
    s = tl.sum(t)
    with pytest.raises(tl.ConcretizationError) as e:
        bool(t > 1)
    assert isinstance(e.value, TypeError)
    with pytest.raises(tl.ConcretizationError, match="0-d"):
        len(s)
    with pytest.raises(tl.DTypeError, match="object"):
        tl.exp(object())
    with pytest.raises(tl.OptionTypeError, match="feed: key"):
        from tenloom.graph.graph import Graph
        from tenloom.runtime.executor import bind_feed

        bind_feed(Graph((t.node,)), {"x": 1.0})

    @tl.function
    def f(x):
        return {1, 2}

    with pytest.raises(tl.DTypeError, match="return Tensors"):
        f(np.ones(2))
    with pytest.raises(tl.OptionError, match="memory_limit"):
        from tenloom.passes.slicing import parse_bytes

        parse_bytes("lots")


@pytest.mark.parametrize("axes", [2.0, (1.0, 0), ([0], [0.5]), (np.float64(1), 0)])
def test_tensordot_float_axes_raise_a_type_error_as_numpy(axes):
    a = np.ones((2, 2))
    with pytest.raises(TypeError):
        np.tensordot(a, a, axes)
    with pytest.raises(tl.OptionTypeError, match="tensordot"):
        tl.tensordot(a, a, axes)


def test_where_with_one_argument_is_a_typed_error():
    with pytest.raises(tl.ConcretizationError, match="nonzero"):
        tl.where(np.array([True, False]))


def test_non_integer_index_is_also_an_index_error_as_numpy():
    x = np.ones(3)
    with pytest.raises(IndexError):
        x[1.0]
    with pytest.raises(tl.IndexingError) as e:
        tl.asarray(x)[1.0]
    assert isinstance(e.value, IndexError) and isinstance(e.value, TypeError)


@pytest.mark.parametrize("offset", [2**70, -(2**70), 10, -10])
def test_diagonal_offsets_beyond_the_axes_are_empty_at_trace_time(offset):
    x = np.arange(12.0).reshape(3, 4)
    clipped = max(-4, min(4, offset))
    got = tl.diagonal(x, offset).evaluate()
    assert got.shape == np.diagonal(x, clipped).shape == (0,)
    assert tl.trace(x, offset).evaluate() == np.trace(x, clipped) == 0
