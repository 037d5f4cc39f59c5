"""The pieces the architecture step introduced: op codes defined by their families, builders
collected from them, typed attrs records, the lock-free placeholder counter, and the cache key
of the optimized graph."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from tenloom.graph import build
from tenloom.graph.node import make_node
from tenloom.graph.ops import OPS, Op, leaf
from tenloom.graph.ops.registry import BUILDERS, PUBLIC_BUILDERS

import tenloom as tl


def test_every_op_is_defined_once_and_registered_with_its_rules():
    ops = list(Op)
    assert len(ops) == len(set(ops)) == len(OPS)
    assert [op.code for op in ops] == list(range(len(ops)))
    for op in ops:
        assert Op.from_value(op.value) is op and getattr(Op, op.name) is op
        assert pickle.loads(pickle.dumps(op)) is op
    with pytest.raises(ValueError, match="already defined"):
        Op.define("EXP", "exp2")
    with pytest.raises(ValueError, match="already defined"):
        Op.define("EXP2", "exp")
    with pytest.raises(TypeError):
        Op("exp")


def test_every_public_op_is_a_builder_wrapped_as_a_tensor_function():
    for name in PUBLIC_BUILDERS:
        fn = getattr(tl, name)
        assert fn.__module__ == "tenloom.api" and fn.__name__ == name
        assert pickle.loads(pickle.dumps(fn)) is fn  # by reference, as NumPy's functions
    assert {"operator_power", "getitem"} <= set(BUILDERS) - set(PUBLIC_BUILDERS)
    x = tl.asarray(np.arange(6.0).reshape(2, 3))
    assert type(tl.sum(x)) is tl.Tensor and build.sum(x) is tl.sum(x).node
    np.testing.assert_array_equal(tl.absolute(-x).evaluate(), np.arange(6.0).reshape(2, 3))


def test_attrs_are_the_ops_record_and_a_wrong_length_is_a_typed_error():
    x = tl.asarray(np.ones((2, 3)))
    s = tl.sum(x, axis=1).node
    assert type(s.attrs) is OPS[Op.SUM].attrs and s.attrs.axes == (1,)
    assert make_node(Op.SUM, (x.node,), ((1,), False)) is s  # a plain tuple finds the node
    with pytest.raises(TypeError, match="sum: 3 attributes"):
        make_node(Op.SUM, (x.node,), ((1,), False, 7))


def test_checking_a_uid_does_not_use_up_a_placeholder_number(tmp_path):
    a = tl.placeholder((2,))
    n = leaf.placeholder_number(a.node.attrs.uid)
    for _ in range(5):
        assert leaf.issued_here(a.node.attrs.uid)
    assert not leaf.issued_here(a.node.attrs.uid + 1)  # not issued yet
    b = tl.placeholder((2,))
    assert leaf.placeholder_number(b.node.attrs.uid) == n + 1
    assert b.node.attrs.name == f"input{n + 1}"


def test_uids_stay_unique_across_threads():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        uids = list(pool.map(lambda _: leaf.next_placeholder_id(), range(20_000)))
    assert len(set(uids)) == len(uids)
    assert all(leaf.issued_here(u) for u in uids[::997])


def test_the_optimized_graph_cache_tells_fusion_limits_apart():
    from dataclasses import replace

    from tenloom.passes.fuse_elementwise import limits_for
    from tenloom.passes.options import Options
    from tenloom.runtime import session

    x = tl.asarray(np.linspace(0, 1, 50))
    graph = session.build_graph([tl.sin(x) * 2.0 + tl.cos(x)])
    fused = session.optimize(graph, Options()).graph
    no_fusion = replace(limits_for(Options(target="cpu")), ops=frozenset())
    plain = session.optimize(graph, Options(fusion=no_fusion)).graph
    ops_of = lambda g: {n.op for n in g.order}  # noqa: E731
    assert Op.FUSED in ops_of(fused) and Op.FUSED not in ops_of(plain)


def test_backends_list_their_own_caches_and_clear_caches_empties_them():
    from tenloom.runtime.backends import base, get_backend, loaded

    x = tl.asarray(np.linspace(0.0, 1.0, 64))
    (tl.sin(x) * 2.0 + tl.cos(x) * 3.0).evaluate()  # a fused region: the CPU compiles it
    cpu = get_backend("cpu")
    assert cpu in loaded() and isinstance(cpu, base.Backend)
    tables = cpu.caches()["kernels"]
    assert sum(len(t) for t in tables) > 0
    before = tl.cache_info()["runtime.device_kernels"].currsize
    assert before >= sum(len(t) for t in tables)
    tl.clear_caches()
    assert sum(len(t) for t in tables) == 0
    assert tl.cache_info()["runtime.device_kernels"].currsize == 0
