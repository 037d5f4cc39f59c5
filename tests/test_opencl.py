"""The OpenCL backend (pyopencl), on PoCL in CI.

Runs on the first OpenCL device whose compiler builds a kernel. Where there is none the module
is skipped -- except under ``CI=true``, where a missing OpenCL is a failure. Besides the tests
here, ``test_op_and_einsum_corpus_on_opencl`` runs the whole op/einsum corpus (test_ops.py,
test_einsum.py, full pipeline) on the device in a child pytest.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from helpers import assert_close, random_array

import tenloom as tl

CI = os.environ.get("CI") == "true"
RNG = np.random.default_rng(11)


def _find_device() -> tuple[str | None, str]:
    """The first OpenCL device that builds and runs a kernel, or (None, why not)."""
    try:
        from tenloom.runtime.backends import opencl
    except ImportError as e:
        return None, f"pyopencl is not importable ({e}); pip install 'tenloom[opencl]'"
    found = opencl.list_devices()
    if not found:
        return None, "no OpenCL platform or device (is an ICD such as PoCL installed?)"
    reasons = []
    for index, name, _ in found:
        device = f"opencl:{index}"
        try:
            out = (tl.asarray(np.arange(4, dtype=np.float32)) * 2.0).evaluate(device=device)
            if np.array_equal(out, np.arange(4) * 2.0):
                return device, ""
            reasons.append(f"{device} ({name}) computed {out}")
        except Exception as e:  # a broken compiler: try the next device
            reasons.append(f"{device} ({name}): {str(e).splitlines()[0]} ...")
    return None, "no OpenCL device compiles kernels: " + "; ".join(reasons)


DEVICE, WHY = _find_device()
if DEVICE is None and not CI:
    pytest.skip(WHY, allow_module_level=True)
pytestmark = pytest.mark.opencl


@pytest.fixture
def device() -> str:
    if DEVICE is None:
        pytest.fail(f"CI=true requires a working OpenCL device: {WHY}")
    return DEVICE


@pytest.fixture
def backend(device):
    from tenloom.runtime.backends import get_backend

    kind, _, index = device.partition(":")
    return get_backend(kind, int(index))


def test_opencl_device_is_present_and_listed(device):
    """Under CI=true this is the check that PoCL is installed and compiles kernels."""
    found = [d for d in tl.devices() if d.kind == "opencl"]
    assert found and found[0].total_memory > 0
    assert any(f"opencl:{d.index}" == device for d in found)


def test_clblast_is_installed_in_ci():
    from tenloom.runtime.backends import opencl

    if not CI and opencl.pyclblast is None:
        pytest.skip("pyclblast is not installed")
    assert opencl.pyclblast is not None, ".ci/run installs pyclblast after libclblast-dev"


def test_bad_index_is_a_device_error():
    with pytest.raises(tl.DeviceError, match="does not exist"):
        tl.asarray(np.ones(2)).evaluate(device="opencl:99")


def test_linalg_ops_without_a_kernel_are_a_device_error_naming_the_op(device):
    x = tl.placeholder((3, 3))
    with pytest.raises(tl.DeviceError, match=f"{device}: no kernel for op 'inv'"):
        (tl.linalg.inv(x) * 2.0).evaluate(device=device, feed={x: np.eye(3)})


# ---- contractions -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "complex128"])  # CLBlast builds take seconds
def test_large_contractions_through_clblast(device, dtype, monkeypatch):
    """Big enough for CLBlast (when pyclblast is there): plain, batched, transposed layouts
    and a transposed output."""
    from tenloom.runtime.backends import opencl

    calls: list[str] = []
    real = opencl.pyclblast
    if real is not None:

        class Spy:
            def gemm(self, *args, **kwargs):
                calls.append("gemm")
                return real.gemm(*args, **kwargs)

            def gemmStridedBatched(self, *args, **kwargs):
                calls.append("gemmStridedBatched")
                return real.gemmStridedBatched(*args, **kwargs)

        monkeypatch.setattr(opencl, "pyclblast", Spy())
    a = random_array(RNG, (64, 48), dtype)
    b = random_array(RNG, (48, 56), dtype)
    c = random_array(RNG, (4, 40, 48), dtype)
    d = random_array(RNG, (4, 56, 48), dtype)
    ta, tb, tc, td = (tl.asarray(x) for x in (a, b, c, d))
    cases = [
        (ta @ tb, a @ b),
        (tl.einsum("ji,kj->ik", tb, ta), np.einsum("ji,kj->ik", b, a)),
        (tl.einsum("bij,bkj->bik", tc, td), np.einsum("bij,bkj->bik", c, d)),
        (tl.einsum("ij,jk->ki", ta, tb), (a @ b).T),
    ]
    for t, expected in cases:
        assert_close(t.evaluate(device=device), expected, scale=np.abs(expected).max())
    if real is not None:
        assert calls.count("gemm") == 3 and calls.count("gemmStridedBatched") == 1


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128", "int32", "int64", "bool"])
@pytest.mark.parametrize(
    "expr",
    ["ij,jk->ik", "ji,jk->ik", "ij,kj->ik", "ij,jk->ki", "bij,bjk->bik", "bji,bkj->bki", "i,j->ij"],
)
def test_own_tiled_gemm_on_every_layout(device, dtype, expr, monkeypatch):
    """The GEMM kernel of our own (used without pyclblast, and for ints and bools), on sizes
    that are not multiples of the tile."""
    from tenloom.runtime.backends import opencl

    monkeypatch.setattr(opencl, "USE_CLBLAST", False)
    sizes = {"i": 37, "j": 29, "k": 23, "b": 3}
    terms = expr.split("->")[0].split(",")
    arrays = [random_array(RNG, tuple(sizes[c] for c in t), dtype) for t in terms]
    expected = np.einsum(expr, *arrays)
    t = tl.einsum(expr, *[tl.asarray(x) for x in arrays])
    assert_close(t.evaluate(device=device), expected, scale=np.abs(expected).max())


def test_network_and_gradient_match_the_cpu(device):
    """A contraction network with elementwise glue, and its gradient, on the device."""
    a, b, c = (RNG.standard_normal((24, 24)) for _ in range(3))
    x = tl.asarray(a)
    loss = tl.sum(tl.tanh(x @ tl.asarray(b)) * tl.asarray(c)) + tl.trace(x @ x.T)
    (g,) = tl.grad(loss, [x])
    cpu = tl.evaluate(loss, g)
    dev = tl.evaluate(loss, g, device=device)
    for u, v in zip(dev, cpu):
        np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-10)


def test_unrewritten_contraction_ops_with_passes_off(device):
    """matmul, tensordot, many-operand einsum and trace reach the backend as they are."""
    a = random_array(RNG, (2, 1, 3, 4), "float32")
    b = random_array(RNG, (5, 4, 2), "int64")
    c = random_array(RNG, (3, 4, 5), "float64")
    d = random_array(RNG, (5, 3, 2), "float64")
    e = random_array(RNG, (4, 5), "complex128")
    v = random_array(RNG, (5, 4, 2), "complex64")
    w = random_array(RNG, (3, 2), "float64")
    tc, td = tl.asarray(c), tl.asarray(d)
    cases = [
        (tl.asarray(a) @ tl.asarray(b), a @ b),
        (tl.tensordot(tc, td, axes=([0, 2], [1, 0])), np.tensordot(c, d, axes=([0, 2], [1, 0]))),
        (
            tl.einsum("ijk,kjl,il->l", tc, tl.asarray(v), tl.asarray(w)),
            np.einsum("ijk,kjl,il->l", c, v, w),
        ),
        (tl.trace(tl.asarray(e), offset=1), np.trace(e, offset=1)),
        (tl.einsum("ii->i", tl.asarray(e[:, :4])), np.einsum("ii->i", e[:, :4])),
    ]
    for t, expected in cases:
        assert_close(t.evaluate(device=device, passes=()), expected)


def test_sliced_network_and_its_gradient_under_a_memory_limit(device):
    """memory_limit slices a lattice network; the slices run on the device (value and the
    sliced reverse sweep of its gradient)."""
    import cotengra as ctg
    from tenloom.runtime.sliced import LAST_RUN

    inputs, _, shapes, _ = ctg.utils.lattice_equation([4, 4], d_min=4, d_max=4)
    rng = np.random.default_rng(3)
    labels: dict = {}
    ops, args = [], []
    for term, shape in zip(inputs, shapes):
        t = tl.asarray((rng.standard_normal(shape) + 1j * rng.standard_normal(shape)) / 4)
        ops.append(t)
        args += [t, [labels.setdefault(x, len(labels)) for x in term]]
    y = tl.einsum(*args, [])
    opts = {"optimize": "greedy", "memory_limit": "16 KB"}
    expected = y.evaluate(optimize="greedy")
    assert "sliced" in [n.op.value for n in tl.explain(y, **opts).graph.order]
    np.testing.assert_allclose(y.evaluate(device=device, **opts), expected, rtol=1e-10)
    assert LAST_RUN.workers == [device] and LAST_RUN.slices[0] > 1
    opts["memory_limit"] = "100 KB"  # the reverse sweep needs more room
    grads = tl.grad(tl.real(y), ops[:3], **opts)
    cpu = tl.evaluate(*grads, optimize="greedy")
    for got, want in zip(tl.evaluate(*grads, device=device, **opts), cpu):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-14)
    assert LAST_RUN.workers == [device] and LAST_RUN.slices[0] > 1


# ---- elementwise, reductions, movement ----------------------------------------------------------


def test_fused_region_is_one_kernel_and_programs_are_cached_by_source(device, backend):
    x = RNG.standard_normal(10_000)

    def chain(t, k):
        for _ in range(15):  # 45 ops: one region (fuse_elementwise.MAX_OPS is 48)
            t = tl.tanh(t * k + 0.1)
        return t

    y = chain(tl.asarray(x), 0.9)
    ops = [n.op.value for n in tl.explain(y).graph.order]
    assert ops.count("fused") == 1 and "tanh" not in ops
    expected = x.copy()
    for _ in range(15):
        expected = np.tanh(expected * 0.9 + 0.1)
    np.testing.assert_allclose(y.evaluate(device=device), expected, rtol=1e-12)
    # two regions with one program (a chain of unary ops on different arrays): one build
    n_programs = len(backend._programs)
    u, v = (tl.asarray(RNG.standard_normal(1000)) for _ in range(2))
    fu, fv = (tl.cos(tl.exp(tl.sin(tl.sqrt(tl.abs(t))))) for t in (u, v))
    assert [n.op.value for n in tl.explain(fu, fv).graph.order].count("fused") == 2
    tl.evaluate(fu, fv, device=device)
    assert len(backend._programs) == n_programs + 1


def test_numpy_semantics_of_integer_float_and_complex_edge_cases(device):
    i = np.array([-7, -7, 7, 7, 5, 0, -1, np.iinfo(np.int64).min], np.int64)
    j = np.array([2, -2, 2, -2, 0, 3, -1, -1], np.int64)
    f = np.array([-7.5, 7.5, np.nan, 0.0, -0.0, np.inf, 3.0, -2.0])
    g = np.array([2.0, -2.0, 1.0, np.nan, 3.0, 2.0, 0.0, 0.5])
    z = np.array([1 + 2j, -3 + 0.5j, 0j, np.nan + 1j, 2 - 1j, 1j, -1 - 1j, 4 + 0j])
    ti, tj, tf, tg, tz = (tl.asarray(v) for v in (i, j, f, g, z))
    with np.errstate(all="ignore"):
        cases = [
            (ti // tj, i // j),
            (ti % tj, i % j),
            (tl.asarray(abs(i[:6])) ** tl.asarray(abs(j[:6])), abs(i[:6]) ** abs(j[:6])),
            # the kernel of NumPy's floor_divide (Tensor // follows the array API standard at
            # infinities: inf // 2 is inf, NumPy's NaN; tests/test_complex_parts.py)
            (tl.floor_divide(tf, tg), f // g),
            (tf % tg, f % g),
            (tl.maximum(tf, tg), np.maximum(f, g)),
            (tl.minimum(tg, tf), np.minimum(g, f)),
            (tl.sign(tf), np.sign(f)),
            (tz * tz / (tz + 1.0), z * z / (z + 1.0)),
            (tl.sqrt(tz) + tl.exp(tz) - tl.log(tz + 1.0), np.sqrt(z) + np.exp(z) - np.log(z + 1.0)),
            (tz**2, z**2),
            (tz < tl.conj(tz), z < np.conj(z)),
            (tl.maximum(tz, tl.conj(tz)), np.maximum(z, np.conj(z))),
            (tl.asarray(g[:2]).astype("int32") - tl.asarray(z.real[:2] > 0),
             g[:2].astype("int32") - (z.real[:2] > 0)),
        ]  # fmt: skip
    for t, expected in cases:
        assert_close(t.evaluate(device=device), expected)


def test_reductions_split_in_two_passes_and_propagate_nan(device):
    x = RNG.standard_normal((4096, 512))
    tx = tl.asarray(x)
    np.testing.assert_allclose(tl.sum(tx).evaluate(device=device), x.sum(), rtol=1e-10)
    np.testing.assert_allclose(tl.max(tx, axis=0).evaluate(device=device), x.max(axis=0), rtol=0)
    h = x[:64, :64].astype(np.float16)
    assert_close(tl.sum(tl.asarray(h)).evaluate(device=device), h.sum(), scale=np.abs(h).sum())
    y = x[:3, :5].copy()
    y[1, 2] = np.nan
    np.testing.assert_array_equal(
        tl.max(tl.asarray(y), axis=1).evaluate(device=device), np.max(y, axis=1)
    )
    b = x[:50, :7] > 0
    assert_close(tl.sum(tl.asarray(b), axis=0).evaluate(device=device), b.sum(axis=0))
    assert_close(tl.prod(tl.asarray(b), axis=1).evaluate(device=device), b.prod(axis=1))


def test_movement_ops(device):
    from tenloom.graph.node import make_node
    from tenloom.graph.ops import Op

    x = random_array(RNG, (4, 6, 5), "complex64")
    y = random_array(RNG, (4, 2, 5), "int32")
    tx, ty = tl.asarray(x), tl.asarray(y)
    cases = [
        (tx[::-1, 1::2, None, -1], x[::-1, 1::2, None, -1]),
        (tl.concatenate([tx, ty], axis=1), np.concatenate([x, y], axis=1)),
        (tl.broadcast_to(ty[:, :1], (3, 4, 7, 5)), np.broadcast_to(y[:, :1], (3, 4, 7, 5))),
        (tl.diagonal(tx, offset=-1, axis1=2, axis2=0), np.diagonal(x, -1, 2, 0)),
        (tl.permute_dims(tx, (2, 0, 1)).reshape((5, 24)), x.transpose(2, 0, 1).reshape(5, 24)),
        (tl.stack([ty, ty], axis=-1), np.stack([y, y], axis=-1)),
        (tl.Tensor(make_node(Op.LAYOUT, ((tx * 2.0).node,), ((2, 0, 1),))) + tx, 3.0 * x),
    ]
    for t, expected in cases:
        assert_close(t.evaluate(device=device, passes=()), expected)
        assert_close(t.evaluate(device=device), expected)


# ---- dtypes, placement, queues ------------------------------------------------------------------


def test_float64_is_refused_where_the_device_lacks_fp64(device, backend):
    from tenloom.runtime.backends import opencl
    from tenloom.runtime.program import compile_program

    no_fp64 = opencl.Backend("opencl", int(device.split(":")[1]))
    no_fp64.fp64 = False
    y = tl.asarray(np.ones(3)) * 2.0
    g = tl.explain(y).graph
    with pytest.raises(tl.DTypeError, match="cl_khr_fp64"):
        compile_program(g, no_fp64)
    with pytest.raises(tl.DTypeError, match="float64"):
        no_fp64.from_host(np.ones(3))
    z = tl.asarray(np.ones(3, np.float32)) * 2.0  # float32 still works there
    prog = compile_program(tl.explain(z).graph, no_fp64)
    assert prog.steps
    assert np.dtype("float64") in backend.dtypes or not backend.fp64


def test_to_host_false_returns_device_arrays_and_constants_are_copied_once(device, backend):
    import pyopencl.array as cla

    a = RNG.standard_normal((16, 16))
    t = tl.asarray(a) @ tl.asarray(a)
    (out,) = tl.evaluate(t, device=device, to_host=False)
    assert isinstance(out, cla.Array)
    n_consts = len(backend._consts)
    tl.evaluate(t, device=device)
    assert len(backend._consts) == n_consts
    np.testing.assert_allclose(out.get(), a @ a, rtol=1e-12)


def test_worker_queues_branches_and_determinism(device, backend):
    a = RNG.standard_normal((40, 40))
    b = RNG.standard_normal((40, 40))
    ta, tb = tl.asarray(a), tl.asarray(b)
    both = tl.sum(tl.tanh(ta @ ta) + 1.0) + tl.sum(tl.sin(tb @ tb.T) * 2.0)
    expected = np.tanh(a @ a).sum() + 40 * 40 + 2 * np.sin(b @ b.T).sum()
    results = {both.evaluate(device=device, threads=t).tobytes() for t in (1, 2, 4, 2, 4)}
    assert len(results) == 1  # every sum runs in a fixed order, whatever the queues
    np.testing.assert_allclose(np.frombuffer(results.pop()), expected, rtol=1e-10)


def test_memory_is_returned_and_the_high_water_mark_recorded(device, backend):
    x = tl.asarray(RNG.standard_normal((40, 40)))
    y = tl.exp(x @ x) + x
    y.evaluate(device=device)
    before = backend.memory_stats()["used_bytes"]
    y.evaluate(device=device)
    stats = backend.memory_stats()
    assert stats["used_bytes"] == before  # intermediates and outputs released
    assert stats["peak_bytes"] >= 2 * 40 * 40 * 8 and stats["total_bytes"] > 0


def test_failing_node_names_itself_and_a_rerun_works(device):
    from tenloom.runtime.testing import InjectedFailure, fail_node

    a = tl.asarray(RNG.standard_normal((30, 30)))
    branches = [tl.exp(a * float(i)).sum() for i in range(4)]
    total = branches[0] + branches[1] + branches[2] + branches[3]
    with fail_node(branches[2].node.inputs[0]), pytest.raises(tl.EvaluationError) as info:
        total.evaluate(device=device, threads=2, passes=())
    assert device in str(info.value) and isinstance(info.value.__cause__, InjectedFailure)
    time.sleep(0.05)
    assert not [t for t in threading.enumerate() if t.name.startswith("tenloom-worker")]
    expected = sum(np.exp(a.evaluate() * float(i)).sum() for i in range(4))
    np.testing.assert_allclose(total.evaluate(device=device, threads=2), expected, rtol=1e-12)


# ---- the corpus ---------------------------------------------------------------------------------


def test_op_and_einsum_corpus_on_opencl(device):
    """test_ops.py and test_einsum.py, full pipeline, with the device as the default."""
    tests = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, TENLOOM_TEST_DEVICE=device, TENLOOM_TEST_PIPELINES="full")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts="]
    cmd += [os.path.join(tests, "test_einsum.py"), os.path.join(tests, "test_ops.py")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    tail = "\n".join(proc.stdout.splitlines()[-40:])
    assert proc.returncode == 0, f"corpus on {device} failed:\n{tail}\n{proc.stderr[-2000:]}"
    passed = re.search(r"(\d+) passed", proc.stdout)
    assert passed and int(passed.group(1)) >= 1800, tail
    print(proc.stdout.splitlines()[-1])


def test_complex_order_with_a_nan_imaginary_part_matches_numpy(device):
    """<, <= and minimum on complex values whose imaginary part is NaN: as NumPy (and >, >=),
    not ordered by the real parts alone (session 19)."""
    a = np.array([1 + 0j, complex(np.inf, np.nan), 0.5 + 0j, complex(0, np.nan)])
    b = np.array([complex(np.inf, np.nan), 1 + 0j, complex(0.7, np.nan), 1 + 0j])
    with np.errstate(invalid="ignore"):
        for f in ("less", "less_equal", "greater", "greater_equal"):
            got = getattr(tl, f)(tl.asarray(a), tl.asarray(b)).evaluate(device=device)
            np.testing.assert_array_equal(got, getattr(np, f)(a, b), err_msg=f)
        got = tl.minimum(tl.asarray(a), tl.asarray(b)).evaluate(device=device)
        np.testing.assert_array_equal(got, np.minimum(a, b))
