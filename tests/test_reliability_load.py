"""tl.load on unlucky and hostile files (issue 18): placeholders that never alias (class 6),
memory bounded by what the file declares (class 13), and a fuzzer of saved files.

The fuzzer takes saved graphs and plans (constants of several dtypes and layouts,
placeholders, slices with negative steps, contractions, fused regions, a sliced network, a
gradient through a strided slice) and mutates them with hypothesis: JSON values replaced,
deleted, duplicated, retyped and swapped, ops exchanged for others of their kind, huge
numbers, deep nesting, truncated or corrupted text; npz members swapped, replaced,
truncated, over-sized, extreme values, deflate bombs (in the data and in the .npy header),
zip directories that lie, junk and corrupted bytes. ``tl.load`` must either raise
GraphFormatError (DeviceError only for a well-formed device that is absent) or give a graph
or plan that evaluates to its declared shapes and dtypes (or raises a TenloomError); its
traced memory must stay below a small multiple of the JSON file's size plus the constants it
declares. CI runs a fixed number of examples (``ci`` profile: 600, 5 to 20 s); a longer
run (docs/format.md, "Limits")::

    HYPOTHESIS_PROFILE=slow TENLOOM_LOAD_FUZZ_EXAMPLES=20000 \\
        python -m pytest tests/test_reliability_load.py -k fuzz -p no:cacheprovider
"""

from __future__ import annotations

import copy
import io
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import textwrap
import tracemalloc
import warnings
import zipfile
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tenloom.graph.graph import Graph
from tenloom.graph.ops import Op

import tenloom as tl

MiB = 1 << 20


def _python(code: str, *args: str) -> str:
    """Run ``code`` in a fresh interpreter (its own placeholder counter); its stdout."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def _peak(fn):
    """(fn(), peak traced bytes while it ran) - NumPy reports its arrays to tracemalloc."""
    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# ---- class 6: loaded placeholders never alias others ------------------------------------------

_SAVE_XY = """
    import sys, tenloom as tl
    x = tl.placeholder((3,))
    y = tl.placeholder((3,))
    tl.save((10 * x + y, x, y), sys.argv[1])
    tl.save(tl.compile([10 * x + y], inputs=[x, y]), sys.argv[2])
"""

_PRELUDE = """
    import json, sys, numpy as np, tenloom as tl
    def value(*ts, feed):
        return [float(np.asarray(r).ravel()[0]) for r in tl.evaluate(*ts, feed=feed)]
    def full(v):
        return np.full(3, float(v))
"""

# Each interleaving runs in a fresh process, where the counters of the saving process and of
# the loading one start alike: before the fix the first two new placeholders *were* the loaded
# x and y, and two loads of one file shared their placeholders.
_INTERLEAVINGS = {
    "load then make": """
        g, x, y = tl.load(sys.argv[1])
        a = tl.placeholder((3,))
        b = tl.placeholder((3,))
        assert len({id(t.node) for t in (x, y, a, b)}) == 4
        feed = {x: full(1), y: full(2), a: full(3), b: full(4)}
        print(json.dumps(value(g, 10 * a + b, 10 * x + a, feed=feed)))
    """,
    "make then load": """
        a = tl.placeholder((3,))
        b = tl.placeholder((3,))
        g, x, y = tl.load(sys.argv[1])
        assert len({id(t.node) for t in (x, y, a, b)}) == 4
        feed = {x: full(1), y: full(2), a: full(3), b: full(4)}
        print(json.dumps(value(g, 10 * a + b, 10 * x + a, feed=feed)))
    """,
    "load twice": """
        g1, x1, y1 = tl.load(sys.argv[1])
        g2, x2, y2 = tl.load(sys.argv[1])
        a = tl.placeholder((3,))
        feed = {x1: full(1), y1: full(2), x2: full(3), y2: full(4), a: full(5)}
        print(json.dumps(value(g1, g2, 10 * x1 + a, feed=feed)))
    """,
    "plan, then graph, then make": """
        p = tl.load(sys.argv[2])
        g, x, y = tl.load(sys.argv[1])
        a = tl.placeholder((3,))
        b = tl.placeholder((3,))
        (r,) = p(full(1), full(2))
        feed = {x: full(3), y: full(4), a: full(5), b: full(6)}
        print(json.dumps([float(r[0])] + value(g, 10 * a + b, feed=feed)))
    """,
}
_EXPECTED = {
    "load then make": [12.0, 34.0, 13.0],
    "make then load": [12.0, 34.0, 13.0],
    "load twice": [12.0, 34.0, 15.0],
    "plan, then graph, then make": [12.0, 34.0, 56.0],
}


@pytest.fixture(scope="module")
def saved_xy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("xy")
    graph, plan = str(folder / "g.json"), str(folder / "p.json")
    _python(_SAVE_XY, graph, plan)
    return graph, plan


@pytest.mark.parametrize("case", list(_INTERLEAVINGS))
def test_placeholders_from_another_process_never_alias(saved_xy, case):
    out = _python(textwrap.dedent(_PRELUDE) + textwrap.dedent(_INTERLEAVINGS[case]), *saved_xy)
    assert json.loads(out) == _EXPECTED[case]


def test_a_file_whose_uids_line_up_with_ours_gets_new_placeholders(tmp_path):
    """A foreign placeholder carrying the very (name, uid) this process issues next."""
    p = tl.placeholder((2,))
    name, uid = p.node.attrs[0], p.node.attrs[1]
    nxt = f"input{int(name[len('input') :]) + 1}"
    doc = {
        "format": "tenloom",
        "version": 1,
        "kind": "graph",
        "constants": None,
        "nodes": [
            {
                "id": 0,
                "op": "placeholder",
                "inputs": [],
                "attrs": [nxt, uid + 1, [2], "<f8"],
                "shape": [2],
                "dtype": "float64",
            }
        ],
        "outputs": [0],
    }
    (tmp_path / "f.json").write_text(json.dumps(doc))
    z = tl.load(tmp_path / "f.json")
    y = tl.placeholder((2,))
    assert y.node is not z.node
    (r,) = tl.evaluate(10 * y + z, feed={y: np.ones(2), z: np.full(2, 2.0)})
    np.testing.assert_array_equal(r, [12.0, 12.0])


def test_in_the_saving_process_the_same_placeholders_come_back(tmp_path):
    x = tl.placeholder((3,), name="x")
    tl.save((tl.exp(x), x), tmp_path / "s.json")
    (g1, x1), (g2, x2) = tl.load(tmp_path / "s.json"), tl.load(tmp_path / "s.json")
    assert x1.node is x.node and x2.node is x.node and g1.node is g2.node
    y = tl.placeholder((3,), name="x")  # same name, shape and dtype: still a new placeholder
    assert y.node is not x.node
    (r,) = tl.evaluate(g1 + y, feed={x: np.zeros(3), y: np.full(3, 2.0)})
    np.testing.assert_array_equal(r, [3.0, 3.0, 3.0])


def test_a_forked_child_makes_its_own_placeholders(tmp_path):
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    code = """
        import os, sys, numpy as np, tenloom as tl
        x = tl.placeholder((2,))
        pid = os.fork()
        if pid == 0:  # the child: one inherited and one new placeholder
            y = tl.placeholder((2,))
            tl.save((x, y), sys.argv[1])
            os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0
        z = tl.placeholder((2,))  # the same counter value as the child's y
        x2, y2 = tl.load(sys.argv[1])
        assert x2.node is x.node  # the parent made it: the same placeholder
        assert y2.node is not z.node and y2.node.attrs[1] != z.node.attrs[1]
        print("ok")
    """
    assert _python(code, str(tmp_path / "c.json")).split() == ["ok"]


def test_commutative_operand_order_does_not_depend_on_the_uid_session():
    """cse orders commutative operands by a fingerprint: it must not see a uid's random
    session part, or results would round differently from run to run. (Complex products
    keep the order written: NumPy's are not symmetric to the bit, so x * y and y * x stay
    two nodes.)"""
    from tenloom.graph.ops import leaf as ops_leaf
    from tenloom.passes import run_pipeline

    orders = set()
    for _ in range(16):
        ops_leaf._new_session()
        x = tl.placeholder((2,), "float64", name="x")
        y = tl.placeholder((2,), "float64", name="y")
        g, _ = run_pipeline(Graph(((x * y + 1).node, (y * x + 1).node)), ("cse",))
        a, b = g.outputs
        assert a is b
        orders.add(tuple(i.attrs[0] for i in a.inputs[0].inputs))
        xc = tl.placeholder((2,), "complex128", name="x")
        yc = tl.placeholder((2,), "complex128", name="y")
        g, _ = run_pipeline(Graph(((xc * yc).node, (yc * xc).node)), ("cse",))
        a, b = g.outputs
        assert [i.attrs[0] for i in a.inputs] == ["x", "y"]
        assert [i.attrs[0] for i in b.inputs] == ["y", "x"]
    assert len(orders) == 1


# ---- class 13: memory bounded by what the file declares ---------------------------------------


def test_a_small_file_does_not_reserve_the_json_size_cap(tmp_path):
    x = tl.placeholder((3,), name="x")
    tl.save(tl.exp(x) * 2.0, tmp_path / "s.json")
    tl.load(tmp_path / "s.json")  # imports and caches warm
    _, peak = _peak(lambda: tl.load(tmp_path / "s.json"))
    assert peak < 2 * MiB, peak


def _write_npz(path, members: dict[str, bytes], compression=zipfile.ZIP_STORED) -> None:
    with zipfile.ZipFile(path, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _const_doc(shape, dtype="float64", npz="c.npz") -> dict:
    return {
        "format": "tenloom",
        "version": 1,
        "kind": "graph",
        "constants": npz,
        "nodes": [
            {"id": 0, "op": "const", "inputs": [], "data": "c0", "shape": list(shape),
             "dtype": dtype}
        ],
        "outputs": [0],
    }  # fmt: skip


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
@pytest.mark.parametrize("order", ["C", "F"])
def test_a_constant_costs_its_own_size_once(tmp_path, compression, order):
    arr = np.asarray((np.arange(2 * MiB) % 251).reshape(1024, 2048), np.float64, order=order)
    assert arr.nbytes == 16 * MiB
    (tmp_path / "c.json").write_text(json.dumps(_const_doc(arr.shape)))
    _write_npz(tmp_path / "c.npz", {"c0.npy": _npy(arr)}, compression)
    t, peak = _peak(lambda: tl.load(tmp_path / "c.json"))
    assert peak < arr.nbytes + 4 * MiB, peak  # before: a second full copy (2x)
    value = t.node.attrs[0].value
    assert not value.flags.writeable  # owned by the graph alone: frozen
    np.testing.assert_array_equal(t.evaluate(), arr)


def test_a_declared_large_constant_from_a_small_deflated_npz(tmp_path):
    """Legal (zeros deflate 1000:1): memory is the declared 32 MiB once, not twice."""
    n = 4 * MiB
    (tmp_path / "c.json").write_text(json.dumps(_const_doc((n,))))
    _write_npz(tmp_path / "c.npz", {"c0.npy": _npy(np.zeros(n))}, zipfile.ZIP_DEFLATED)
    assert os.path.getsize(tmp_path / "c.npz") < 64 * 1024
    t, peak = _peak(lambda: tl.load(tmp_path / "c.json"))
    assert t.shape == (n,) and peak < 8 * n + 2 * MiB, peak


def _bomb(header: bytes, size: int) -> bytes:
    """A deflated member: ``header`` then ``size`` zero bytes (about size / 1000 on disk)."""
    buf = io.BytesIO()
    block = bytes(MiB)
    with (
        zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf,
        zf.open("c0.npy", "w", force_zip64=True) as m,
    ):
        m.write(header)
        for _ in range(size // MiB):
            m.write(block)
    return buf.getvalue()


def _lie_about_size(npz: bytes, usize: int, crc: int | None = None) -> bytes:
    """The npz with its last central directory entry claiming ``usize`` bytes (and ``crc``);
    the local header and the data stay as they are."""
    raw = bytearray(npz)
    at = raw.rindex(b"PK\x01\x02")
    if crc is not None:
        struct.pack_into("<I", raw, at + 16, crc)
    struct.pack_into("<I", raw, at + 24, min(usize, 0xFFFFFFFE))
    return bytes(raw)


def _v1_header(shape, descr="<f8") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": descr, "fortran_order": False, "shape": tuple(shape)}
    )
    return buf.getvalue()


_BOMB = 48 * MiB


@pytest.mark.parametrize(
    "case", ["huge header length", "data runs past the declaration", "lying directory"]
)
def test_deflate_bombs_are_refused_within_the_declared_memory(tmp_path, case):
    (tmp_path / "c.json").write_text(json.dumps(_const_doc((4,))))
    if case == "huge header length":  # a v2 header claiming 4 GiB of header text
        npz = _bomb(b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFFF), _BOMB)
    elif case == "data runs past the declaration":
        npz = _bomb(_v1_header((4,)), _BOMB)
    else:  # the directory claims the declared size and the CRC of its first bytes
        head = _v1_header((4,))
        npz = _lie_about_size(_bomb(head, _BOMB), len(head) + 32, zlib.crc32(head + bytes(32)))
    (tmp_path / "c.npz").write_bytes(npz)
    assert len(npz) < 256 * 1024

    def load():
        try:
            return tl.load(tmp_path / "c.json")
        except tl.GraphFormatError as e:
            return e

    result, peak = _peak(load)
    assert peak < 4 * MiB, (case, peak)
    if case == "lying directory":  # what it declares is a valid array; the rest is never read
        np.testing.assert_array_equal(result.evaluate(), np.zeros(4))
    else:
        assert isinstance(result, tl.GraphFormatError), result


def test_npz_bigger_than_its_declared_data_is_refused(tmp_path):
    arr = np.arange(16.0)
    (tmp_path / "c.json").write_text(json.dumps(_const_doc((16,))))
    _write_npz(tmp_path / "c.npz", {"c0.npy": _npy(arr)})
    assert np.array_equal(tl.load(tmp_path / "c.json").evaluate(), arr)
    with open(tmp_path / "c.npz", "ab") as f:  # junk zipfile would skip over
        f.write(bytes(MiB))
    with pytest.raises(tl.GraphFormatError, match="at most"):
        tl.load(tmp_path / "c.json")
    # a directory of many more members than the file declares constants
    (tmp_path / "c.json").write_text(json.dumps(_const_doc((2 * MiB,))))
    members = {"c0.npy": _npy(np.zeros(2 * MiB))}
    members.update({f"x{k}": b"" for k in range(5000)})
    _write_npz(tmp_path / "c.npz", members, zipfile.ZIP_DEFLATED)
    with pytest.raises(tl.GraphFormatError, match="directory lists 5001 members"):
        tl.load(tmp_path / "c.json")


def test_a_valid_constant_bigger_than_memory_is_a_memory_limit_error(tmp_path):
    """Allocation fails before any data is read: the directory and header are all it takes."""
    if not sys.platform.startswith("linux"):
        pytest.skip("RLIMIT_AS and /proc are Linux's")
    n = 2**28  # 2 GiB of float64
    head = _v1_header((n,))
    raw = io.BytesIO()
    with zipfile.ZipFile(raw, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("c0.npy", head + np.random.default_rng(0).bytes(n * 8 // 1000))
    (tmp_path / "c.npz").write_bytes(_lie_about_size(raw.getvalue(), len(head) + 8 * n))
    (tmp_path / "c.json").write_text(json.dumps(_const_doc((n,))))
    code = """
        import re, resource, sys, tenloom as tl
        vm = int(re.search(r"VmSize:\\s+(\\d+)", open("/proc/self/status").read())[1]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + (512 << 20), resource.RLIM_INFINITY))
        try:
            tl.load(sys.argv[1])
        except tl.MemoryLimitError as e:
            print("MemoryLimitError", e)
    """
    out = _python(code, str(tmp_path / "c.json"))
    assert out.startswith("MemoryLimitError") and "c0.npy" in out and str(8 * n) in out, out


def test_a_plan_naming_an_unknown_device_is_a_format_error(tmp_path):
    x = tl.placeholder((3,), name="x")
    tl.compile([tl.exp(x)], inputs=[x]).save(tmp_path / "p.json")
    doc = json.loads((tmp_path / "p.json").read_text())
    for device in ("tpu:0", "", "cpu:x", ["cpu", "quantum:1"], "gpu"):
        doc["options"]["device"] = device
        (tmp_path / "p.json").write_text(json.dumps(doc))
        with pytest.raises(tl.GraphFormatError, match="device"):
            tl.load(tmp_path / "p.json")


# ---- the fuzzer -------------------------------------------------------------------------------


def _bases(folder) -> dict[str, tuple[str, bytes | None]]:
    """Saved files to mutate: name -> (JSON text, npz bytes or None)."""
    rng = np.random.default_rng(18)
    out = {}

    def keep(name, obj):
        tl.save(obj, folder / f"{name}.json")
        npz = folder / f"{name}.npz"
        out[name] = (
            (folder / f"{name}.json").read_text(),
            npz.read_bytes() if npz.exists() else None,
        )

    x = tl.placeholder((4, 4), name="x")
    v = tl.placeholder((4,), dtype="complex128", name="v")
    a = tl.asarray(rng.standard_normal((4, 4)))
    af = tl.asarray(np.asfortranarray(rng.standard_normal((4, 3))))
    c = tl.asarray(np.arange(6, dtype=np.int32).reshape(2, 3))
    z = tl.asarray((rng.standard_normal(4) + 1j).astype(np.complex64))
    b = tl.asarray(np.array([True, False, True, True]))
    keep(
        "graph",
        (
            tl.sum(tl.exp(x[::-1, 1:4:2]) * af[:, ::2], axis=0),
            tl.einsum("ij,j->i", a, v) + z,
            tl.where(b, v, 0),
            tl.sum(c, axis=1, keepdims=True) * tl.full((2, 1), 3, "int32"),
            tl.trace(a @ x) + tl.max(x[-3:-4:-1]),
            x,
            v,
        ),
    )
    keep("graph_no_constants", (tl.sin(x) * 2.0 - tl.eye(4), x))
    # a gradient through a strided slice (a scatter of the cotangent)
    (gx,) = tl.grad(tl.sum(tl.exp(x[::-1, 1:4:2]) * af[:, ::2]), [x])
    keep("gradient", (gx, x))
    y = tl.trace(a @ x @ a @ x) * tl.sum(tl.exp(x * 0.5 + 1.0)) + tl.sum(c)
    keep("plan", tl.compile([y, tl.abs(v) * 2.0 + 1.0], inputs=[x, v], optimize="greedy"))
    w = tl.placeholder((6, 6, 6), name="w")
    ws = [tl.asarray(rng.standard_normal((6, 6, 6))) for _ in range(3)]
    net = tl.einsum("abc,cde,efa,bdf->", w, *ws)
    for limit in (3000, 4000, 6000, 8000):
        try:
            plan = tl.compile([net], inputs=[w], optimize="greedy", memory_limit=limit)
        except tl.MemoryLimitError:
            continue
        if any(n.op is Op.SLICED for n in plan.optimized.order):
            break
    assert any(n.op is Op.SLICED for n in plan.optimized.order)
    keep("sliced_plan", plan)
    return out


def _members(npz: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(npz)) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def _zip(members: dict[str, bytes], compression=zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names
        with zipfile.ZipFile(buf, "w", compression) as zf:
            for name, data in members.items():
                zf.writestr(name.split("\0")[0], data)
    return buf.getvalue()


@pytest.fixture(scope="module")
def fuzz_bases(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz_bases")
    bases = _bases(folder)
    # deflate bombs are precomputed (compressing 48 MiB per example would dominate the run)
    bombs = {
        "header": _bomb(b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFFF), _BOMB),
        "data": _bomb(_v1_header((4, 4)), _BOMB),
    }
    bombs["lying"] = _lie_about_size(bombs["data"], len(_v1_header((4, 4))) + 128)
    return bases, bombs


# JSON values a mutation puts somewhere
_HUGE = st.sampled_from([2**31, 2**32 + 1, 2**48, 2**63, 2**64, 10**30, 10**300, -(2**63), -1])
_SCALARS = st.one_of(
    st.integers(-3, 9),
    st.integers(-3, 70),
    _HUGE,
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.sampled_from(["float64", "<f8", "int32", "|b1", "O", "cuda:0", "tpu", "fused", "$op"]),
    st.booleans(),
    st.none(),
)
_TAGS = st.one_of(
    st.builds(lambda v: {"$float": v}, st.sampled_from(["inf", "-inf", "nan", "bits:ffff", 1])),
    st.builds(
        lambda v: {"$bytes": v},
        st.sampled_from([0, 2, 16, 10**5]).map(lambda n: "0" * n) | st.just("zz"),
    ),
    st.builds(lambda v: {"$list": v}, st.lists(st.integers(-2, 9), max_size=4)),
    st.builds(lambda v: {"$op": v}, st.sampled_from(["add", "exp", "const", "nope"])),
    st.builds(lambda v: {"$dtype": v}, st.sampled_from(["float64", "object"])),
    st.builds(lambda v: {"$scalar": v}, st.sampled_from([["float64", "00" * 8], ["int8", ""]])),
    st.builds(
        lambda v: {"$dict": v}, st.sampled_from([[], [[1, 2]], [[[1], 2]], [[1, 2], [1, 3]]])
    ),
)
_VALUES = st.recursive(
    st.one_of(_SCALARS, _TAGS),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def _fresh(value):
    """A copy of a drawn value: strategies hand out the same list objects again, and the
    mutations change what they put in place."""
    return copy.deepcopy(value)


def _deep(depth: int, kind: str) -> str:
    """JSON text nested ``depth`` deep (put in as text: too deep for json.dumps)."""
    if kind == "list":
        return "[" * depth + "0" + "]" * depth
    return '{"$list": [' * depth + "0" + "]}" * depth


def _dump(doc) -> str:
    """The document as JSON text, deep-nesting markers expanded."""
    text = json.dumps(doc)
    for marker in set(re.findall(r'"@deep:\d+:\w+"', text)):
        _, depth, kind = marker.strip('"').split(":")
        text = text.replace(marker, _deep(int(depth), kind))
    return text


def _containers(doc) -> list:
    """Every list and dict in the document (mutation sites)."""
    out, stack = [], [doc]
    while stack:
        c = stack.pop()
        out.append(c)
        items = c.values() if isinstance(c, dict) else c
        stack.extend(i for i in items if isinstance(i, (list, dict)))
    return out


_OP_FAMILIES = [
    {"exp", "sin", "cos", "tanh", "neg", "abs", "sqrt", "log", "conj", "real", "imag", "sign"},
    {"add", "sub", "mul", "div", "maximum", "minimum", "pow", "eq", "lt", "mod", "floordiv"},
    {"sum", "prod", "max", "min"},
    {"transpose", "layout"},
    {"diagonal", "trace"},
    {"reshape", "broadcast_to"},
]


def _mutate_json(data, doc) -> None:
    # mostly inside one node entry (its attrs, shape, inputs...), sometimes anywhere
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    root = None
    if isinstance(nodes, list) and nodes and data.draw(st.integers(0, 9), label="where") < 7:
        root = nodes[data.draw(st.integers(0, len(nodes) - 1), label="node")]
        sites = _containers(root) if isinstance(root, (list, dict)) else [nodes]
    else:
        sites = _containers(doc)
    site = sites[data.draw(st.integers(0, len(sites) - 1), label="site")]
    keys = list(site) if isinstance(site, dict) else list(range(len(site)))
    action = data.draw(
        st.sampled_from(
            ["set", "delete", "duplicate", "swap", "retype", "deep", "extend", "op", "op", "op"]
        ),
        label="action",
    )
    if not keys and action != "extend":
        action = "extend"
    key = data.draw(st.sampled_from(keys), label="key") if keys else None
    if action == "set":
        site[key] = _fresh(data.draw(_VALUES, label="value"))
    elif action == "delete":
        del site[key]
    elif action == "duplicate":
        if isinstance(site, list):
            site.insert(data.draw(st.integers(0, len(site))), json.loads(json.dumps(site[key])))
        else:
            other = data.draw(st.sampled_from(keys))
            site[other] = json.loads(json.dumps(site[key]))
    elif action == "swap":
        other = data.draw(st.sampled_from(keys))
        site[key], site[other] = site[other], site[key]
    elif action == "retype":
        v = site[key]
        if type(v) is int:
            site[key] = data.draw(st.sampled_from([str(v), float(v), [v], bool(v), v + 1, -v - 1]))
        elif type(v) is list:
            site[key] = data.draw(st.sampled_from([{"$list": v}, tuple(v), v[::-1], v[1:], v * 2]))
        elif type(v) is str:
            site[key] = data.draw(st.sampled_from([v.upper(), v[:-1], v + "x", 0, None]))
        else:
            site[key] = _fresh(data.draw(_SCALARS))
    elif action == "op":  # another op of the same kind: often still valid, other semantics
        op = root.get("op") if isinstance(root, dict) else None
        family = next((f for f in _OP_FAMILIES if op in f), None)
        if family:
            root["op"] = data.draw(st.sampled_from(sorted(family)))
        else:
            doc["outputs"] = data.draw(st.lists(st.integers(0, 40), min_size=1, max_size=4))
    elif action == "deep":  # a marker that json text replaces (see _dump)
        depth = data.draw(st.sampled_from([33, 200, 5000]))
        site[key] = f"@deep:{depth}:{data.draw(st.sampled_from(['list', 'tag']))}"
    elif isinstance(site, list):  # extend
        site.append(_fresh(data.draw(_VALUES)))
    else:
        site[data.draw(st.text(max_size=5))] = _fresh(data.draw(_VALUES))


def _mutate_text(data, text: str) -> str:
    action = data.draw(
        st.sampled_from(["truncate", "byte", "repeat key", "number", "nan"]), label="text"
    )
    if action == "truncate":
        return text[: data.draw(st.integers(0, len(text)))]
    if action == "byte":
        at = data.draw(st.integers(0, len(text) - 1))
        return (
            text[:at]
            + data.draw(st.sampled_from(["\x00", "\udcff", "}", "[", '"', "9"]))
            + text[at + 1 :]
        )
    if action == "repeat key":
        return text.replace('"id": 0,', '"id": 0, "id": 0,', 1)
    if action == "number":
        big = data.draw(st.sampled_from(["1e400", "-1e400", "9" * 5000, "1" * 4000, "-0", "1.5"]))
        return text.replace('"shape": [4', '"shape": [' + big, 1)
    return text.replace("1.0", "NaN", 1).replace('"version": 1', '"version": Infinity', 1)


def _mutate_npz(data, npz: bytes, bombs: dict[str, bytes]) -> bytes:
    members = _members(npz)
    names = sorted(members)
    action = data.draw(
        st.sampled_from(
            ["swap", "replace", "truncate member", "oversize", "bomb", "deflate", "flip",
             "truncate file", "junk", "lie", "extra", "many", "drop", "fortran", "specials",
             "specials", "specials"]
        ),
        label="npz",
    )  # fmt: skip
    name = data.draw(st.sampled_from(names), label="member")
    if action == "swap" and len(names) > 1:
        other = data.draw(st.sampled_from(names))
        members[name], members[other] = members[other], members[name]
    elif action == "replace":
        members[name] = data.draw(
            st.sampled_from(
                [b"", b"hello", _npy(np.zeros((4, 5))), _npy(np.zeros((4, 4), np.float32)),
                 _npy(np.zeros((4, 4), ">f8")), _npy(np.zeros(0)), _npy(np.array(1.0)),
                 b"\x93NUMPY\x03\x00" + bytes(8), b"\x93NUMPY\x01\x00\xff\xff" + bytes(16)]
            )
        )  # fmt: skip
    elif action == "truncate member":
        members[name] = members[name][: data.draw(st.integers(0, len(members[name])))]
    elif action == "oversize":
        members[name] += bytes(data.draw(st.sampled_from([1, 8, 4096, MiB])))
    elif action == "bomb":
        return bombs[data.draw(st.sampled_from(sorted(bombs)))]
    elif action == "deflate":  # legal
        return _zip(members, zipfile.ZIP_DEFLATED)
    elif action == "flip":
        raw = bytearray(npz)
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] ^= data.draw(st.integers(1, 255))
        return bytes(raw)
    elif action == "truncate file":
        return npz[: data.draw(st.integers(0, len(npz) - 1))]
    elif action == "junk":
        junk = bytes(data.draw(st.sampled_from([16, 4096, 2 * MiB])))
        return data.draw(st.sampled_from([junk + npz, npz + junk]))
    elif action == "lie":
        return _lie_about_size(_zip(members, zipfile.ZIP_DEFLATED), data.draw(_HUGE.map(abs)))
    elif action == "extra":
        members[data.draw(st.sampled_from(["evil.npy", name + "\0dup", "../x.npy"]))] = b""
    elif action == "many":
        members.update({f"m{k}.npy": b"" for k in range(data.draw(st.sampled_from([2, 3000])))})
    elif action == "drop":
        del members[name]
    elif action == "specials":  # same shape and dtype, extreme values: legal
        value = np.load(io.BytesIO(members[name]))
        if value.dtype.kind in "fc":
            with np.errstate(all="ignore"):  # 1e308 becomes inf in float32
                pool = np.array([np.nan, np.inf, -np.inf, -0.0, 1e308, 5e-324]).astype(value.dtype)
        elif value.dtype.kind == "b":
            pool = np.array([True])
        else:
            info = np.iinfo(value.dtype)
            pool = np.array([info.min, info.max, 0, -1], dtype=value.dtype)
        members[name] = _npy(np.resize(pool, value.shape).astype(value.dtype))
    else:  # a Fortran-ordered copy of the same values: legal
        value = np.load(io.BytesIO(members[name]))
        members[name] = _npy(np.asfortranarray(value))
    return _zip(members)


def _declared_bytes(text: str) -> int:
    """What the (mutated) JSON declares for its constants, read leniently."""
    try:
        doc = json.loads(text)
        total = 0
        for e in doc["nodes"]:
            if isinstance(e, dict) and e.get("op") == "const":
                total += int(np.prod(e["shape"], dtype=object)) * np.dtype(e["dtype"]).itemsize
        return total
    except Exception:
        return 0


def _well_formed_device(text: str) -> bool:
    from tenloom.runtime.backends import known_kinds

    try:
        dev = json.loads(text)["options"]["device"]
    except Exception:
        return False
    names = dev if isinstance(dev, list) else [dev]
    return all(isinstance(n, str) and n.partition(":")[0] in known_kinds() for n in names)


def _small_enough(nodes) -> bool:
    """Whether evaluating these nodes is cheap (mutations may declare huge lazy arrays)."""
    from tenloom.graph.ops.sliced import n_slices

    for n in nodes:
        if n.size > 4096 or (n.op is Op.SLICED and n_slices(n.attrs) > 256):
            return False
    return len(nodes) < 500


def _feed_value(node, k: int) -> np.ndarray:
    return (np.arange(int(np.prod(node.shape))) % 5 + k).reshape(node.shape).astype(node.dtype)


def _check_loaded(loaded) -> str:
    """A loaded graph or plan evaluates to its declared shapes and dtypes, or raises a
    TenloomError."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        if isinstance(loaded, tl.Plan):
            if not _small_enough(loaded.optimized.order):
                return "too big to run"
            outs = loaded.optimized.outputs
            try:
                got = loaded(*(_feed_value(p, k) for k, p in enumerate(loaded.inputs)))
            except tl.TenloomError as e:
                return type(e).__name__
        else:
            tensors = loaded if isinstance(loaded, tuple) else (loaded,)
            outs = tuple(t.node for t in tensors)
            graph = Graph(outs)
            if not _small_enough(graph.order):
                return "too big to run"
            feed = {p: _feed_value(p, k) for k, p in enumerate(graph.placeholders)}
            try:
                got = tl.evaluate(*tensors, feed=feed, optimize="greedy")
            except tl.TenloomError as e:
                return type(e).__name__
    assert len(got) == len(outs)
    for node, value in zip(outs, got):
        value = np.asarray(value)
        assert value.shape == node.shape and value.dtype == node.dtype, (node, value)
    return "ran"


_EXAMPLES = int(os.environ.get("TENLOOM_LOAD_FUZZ_EXAMPLES", 0)) or max(
    10, settings.default.max_examples * 2
)


@settings(
    max_examples=_EXAMPLES,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        *settings.default.suppress_health_check,
    ],
)
@given(data=st.data())
def test_fuzz_load_raises_only_format_errors_within_bounded_memory(fuzz_bases, tmp_path, data):
    bases, bombs = fuzz_bases
    name = data.draw(st.sampled_from(sorted(bases)), label="base")
    text, npz = bases[name]
    doc = json.loads(text)
    layers = data.draw(
        st.sampled_from([{"json"}] * 5 + [{"npz"}] * 3 + [{"json", "npz"}, {"text"}]), label="on"
    )
    if "json" in layers:
        for _ in range(data.draw(st.integers(1, 3))):
            _mutate_json(data, doc)
        text = _dump(doc)
    if "text" in layers:
        text = _mutate_text(data, text)
    if "npz" in layers and npz is not None:
        npz = _mutate_npz(data, npz, bombs)
    folder = tempfile.mkdtemp(dir=tmp_path)  # a fresh folder: nothing left from earlier cases
    path = os.path.join(folder, f"{name}.json")
    with open(path, "wb") as f:
        f.write(text.encode("utf-8", "surrogatepass"))
    if npz is not None:
        with open(os.path.join(folder, f"{name}.npz"), "wb") as f:
            f.write(npz)

    def load():
        try:
            return tl.load(path)
        except tl.GraphFormatError as e:
            return e
        except tl.DeviceError as e:  # a well-formed name of a device this machine lacks
            assert _well_formed_device(text), e
            return e

    loaded, peak = _peak(load)
    limit = 4 * MiB + 64 * len(text) + _declared_bytes(text) * 5 // 4
    assert peak < limit, (peak, limit)
    if isinstance(loaded, Exception):
        event(f"{type(loaded).__name__}: {str(loaded).split(': ', 2)[-1][:24]}")
    else:
        event(f"loaded {type(loaded).__name__}: {_check_loaded(loaded)}")


def test_fuzz_bases_load_and_match_the_originals(fuzz_bases, tmp_path):
    """Unmutated, every base loads and evaluates (so mutations start from valid files)."""
    bases, _ = fuzz_bases
    for name, (text, npz) in bases.items():
        (tmp_path / f"{name}.json").write_text(text)
        if npz is not None:
            (tmp_path / f"{name}.npz").write_bytes(npz)
        loaded = tl.load(tmp_path / f"{name}.json")
        assert isinstance(loaded, tl.Plan) == name.endswith("plan")
        _check_loaded(loaded)
