"""The IR, the executor and evaluate's contract."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from tenloom.graph.node import interned_count
from tenloom.graph.ops import Op
from tenloom.runtime.backends import get_backend
from tenloom.runtime.testing import InjectedFailure, fail_node

import tenloom as tl


def test_hash_consing_shares_identical_subgraphs():
    a = tl.asarray(np.ones((3, 4)))
    b = tl.asarray(np.ones((4, 2)))
    x = tl.exp(a @ b) + 1.0
    y = tl.exp(a @ b) + 1.0
    assert x is not y  # Tensors are handles...
    assert x.node is y.node  # ...on one node
    assert (a @ b).node is x.node.inputs[0].inputs[0]
    # different scalars, including -0.0 against 0.0, stay different nodes
    assert (a * 0.0).node is not (a * -0.0).node
    assert np.signbit((a * -0.0).evaluate()).all()


def test_source_line_is_kept_but_not_part_of_identity():
    a = tl.asarray(np.ones(3))
    t = tl.sin(a)  # this line
    assert t.node.source is not None and t.node.source[0] == __file__
    assert tl.sin(a).node is t.node


def test_nodes_are_immutable_and_freed():
    a = tl.asarray(np.ones(3))
    with pytest.raises(AttributeError):
        a.node.op = Op.NEG
    gc.collect()
    before = interned_count()
    t = a
    for _ in range(1000):
        t = t * 1.5
    assert interned_count() >= before + 1000
    del t
    gc.collect()
    assert interned_count() <= before + 2


def test_tensors_hash_by_identity_and_refuse_bool():
    a = tl.asarray(np.ones(3))
    b = tl.asarray(np.ones(3))
    d = {a: 1, b: 2}
    assert d[a] == 1 and d[b] == 2
    assert isinstance(a == b, tl.Tensor)
    with pytest.raises(TypeError):
        bool(a == b)
    with pytest.raises(TypeError):
        if a < 2:
            pass


def test_evaluate_returns_tuple_and_shared_subgraphs_run_once(monkeypatch):
    backend = get_backend("cpu")
    calls: dict[Op, int] = {}
    real_kernel = backend.kernel

    def counting_kernel(node):
        k = real_kernel(node)

        def run(*args):
            calls[node.op] = calls.get(node.op, 0) + 1
            return k(*args)

        return run

    monkeypatch.setattr(backend, "kernel", counting_kernel)
    a = tl.asarray(np.arange(6.0).reshape(2, 3))
    shared = tl.exp(a)
    y = shared.sum()
    z = shared * 2.0
    out = tl.evaluate(y, z, passes=(), device="cpu")
    assert isinstance(out, tuple) and len(out) == 2
    assert calls[Op.EXP] == 1
    np.testing.assert_allclose(out[0], np.exp(np.arange(6.0)).sum())
    np.testing.assert_allclose(out[1], 2 * np.exp(np.arange(6.0).reshape(2, 3)))
    assert isinstance(y.evaluate(), np.ndarray) and y.evaluate().shape == ()


def test_outputs_never_alias_inputs():
    src = np.arange(4.0)
    out = tl.asarray(src).evaluate()
    assert out is not src and not np.shares_memory(out, src)
    view = tl.asarray(src)[::-1].evaluate()
    assert not np.shares_memory(view, src) and view.flags.writeable
    b = tl.broadcast_to(tl.asarray(src), (3, 4)).evaluate()
    assert b.flags.writeable


def test_intermediates_are_freed_after_last_use(monkeypatch):
    """At most a few intermediates are alive at once along a chain."""
    import tenloom.runtime.executor as ex

    live_max = 0
    backend = get_backend("cpu")
    real_kernel = backend.kernel
    alive: set[int] = set()

    class Tracked(np.ndarray):
        pass

    def kernel(node):
        k = real_kernel(node)

        def run(*args):
            nonlocal live_max
            out = np.asarray(k(*args)).view(Tracked)
            import weakref

            key = id(out)
            alive.add(key)
            weakref.finalize(out, alive.discard, key)
            live_max = max(live_max, len(alive))
            return out

        return run

    monkeypatch.setattr(backend, "kernel", kernel)
    x = tl.asarray(np.ones(1000))
    for _ in range(200):
        x = tl.sin(x)
    x.evaluate(passes=())
    assert ex is not None
    assert live_max <= 3


def test_placeholders_bind_through_feed():
    x = tl.placeholder((2, 3), dtype="float64", name="x")
    y = (x * 2).sum(axis=1)
    np.testing.assert_allclose(y.evaluate(feed={x: np.ones((2, 3))}), [6.0, 6.0])
    with pytest.raises(tl.TenloomError, match="'x'"):
        y.evaluate()
    with pytest.raises(tl.ShapeError, match=r"\(2, 3\).*\(3, 2\)"):
        y.evaluate(feed={x: np.ones((3, 2))})
    with pytest.raises(tl.DTypeError, match="'x'"):
        y.evaluate(feed={x: np.ones((2, 3), dtype=complex)})
    # a lower-precision float array is cast
    np.testing.assert_allclose(y.evaluate(feed={x: np.ones((2, 3), np.float32)}), [6.0, 6.0])


def test_unknown_option_and_device_errors():
    a = tl.asarray(np.ones(2))
    with pytest.raises(TypeError, match="unknown option 'fead'"):
        a.evaluate(fead={})
    with pytest.raises(tl.DeviceError, match="tpu"):
        a.evaluate(device="tpu:0")


def test_failing_node_raises_evaluation_error_naming_it():
    a = tl.asarray(np.ones((2, 2)))
    bad = tl.exp(a)  # the failing node
    y = bad.sum()
    with fail_node(bad), pytest.raises(tl.EvaluationError) as info:
        y.evaluate(passes=(), device="cpu")
    msg = str(info.value)
    assert "exp" in msg and "(2, 2)" in msg and "cpu" in msg and __file__ in msg
    assert isinstance(info.value.__cause__, InjectedFailure)
    np.testing.assert_allclose(y.evaluate(passes=()), 4 * np.e)  # a re-run works


def test_runtime_error_inside_numpy_becomes_evaluation_error():
    a = tl.asarray(np.array([2, 3], dtype=np.int64))
    with pytest.raises(tl.EvaluationError, match="pow") as info:
        (a ** tl.asarray(np.array([-1, -2]))).evaluate(device="cpu")
    assert isinstance(info.value.__cause__, ValueError)


def test_dump_one_line_per_node():
    a = tl.placeholder((3, 4), name="a")
    b = tl.asarray(np.ones((4, 5)))
    y = tl.einsum("ij,jk->ik", a, b).sum()
    text = tl.dump(y, optimized=False)
    lines = text.splitlines()
    assert len(lines) == 5  # 4 nodes + return
    assert "placeholder['a']" in lines[0]
    assert "einsum[ab,bc->ac](%0, %1) : float64(3, 5)" in text
    assert lines[-1] == "return %3"


def test_long_chain_traces_dumps_and_evaluates_without_recursion():
    n = 100_000
    x = tl.asarray(np.full(4, 0.5))
    y = x
    for _ in range(n // 2):
        y = y * 0.999 + 0.001
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # nothing may recurse per node
    try:
        text = tl.dump(y, optimized=False)
        (out,) = tl.evaluate(y)
    finally:
        sys.setrecursionlimit(limit)
    assert len(text.splitlines()) > n
    expected = 1.0 + (0.5 - 1.0) * 0.999 ** (n // 2)
    np.testing.assert_allclose(out, np.full(4, expected), rtol=1e-9)


def test_import_is_light():
    code = textwrap.dedent(
        """
        import sys, tenloom
        heavy = [m for m in ("cotengra", "networkx", "cupy", "pyopencl", "dask", "graphviz",
                             "numexpr", "torch", "jax") if m in sys.modules]
        print(",".join(heavy))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_evaluate_async_returns_future():
    a = tl.asarray(np.arange(3.0))
    fut = tl.evaluate_async(a * 2, a + 1)
    r = fut.result(timeout=30)
    assert isinstance(r, tuple)
    np.testing.assert_allclose(r[0], [0, 2, 4])


def test_demo_runs():
    from tenloom.cli import main

    assert main(["demo", "--sites", "8", "--chi", "8"]) == 0


def test_to_networkx_and_cli_devices(capsys):
    from tenloom.cli import main

    a = tl.asarray(np.ones((2, 3)))
    g = tl.to_networkx(tl.exp(a) @ a.T)
    assert g.number_of_nodes() == 4
    ops = sorted(d["op"] for _, d in g.nodes(data=True))
    assert ops == ["const", "exp", "matmul", "transpose"]
    assert sum(1 for *_, d in g.edges(data=True) if d["slot"] == 1) == 1
    assert main(["devices"]) == 0
    assert "cpu:0" in capsys.readouterr().out
