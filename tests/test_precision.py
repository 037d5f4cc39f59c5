"""precision= (runtime/precision.py): the option's checks and errors, where it is refused, saved
plans, explain's lines; on CUDA (skipped without CuPy and a GPU) the lowered contractions
against float64, "highest" bit for bit, and that each lowered mode really rounds."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import on_cpu
from tenloom.graph.errors import DeviceError, GraphFormatError, OptionError, OptionTypeError
from tenloom.passes.options import NO_OPTIONS, Options
from tenloom.runtime import session
from tenloom.runtime.precision import PRECISION, PRECISIONS, TOLERANCE

import tenloom as tl

try:
    import cupy as cp

    _N_GPUS = cp.cuda.runtime.getDeviceCount()
except Exception:  # no CuPy, or no driver
    _N_GPUS = 0
needs_gpu = pytest.mark.skipif(_N_GPUS == 0, reason="no CUDA GPU (CuPy) present")
LOWERED = ("tf32", "bf16", "fp16")
RNG = np.random.default_rng(23)


def _matmul(dtype="float32", shape=(16, 24, 8)):
    m, k, n = shape
    a = RNG.uniform(-1, 1, (m, k)).astype(dtype)
    b = RNG.uniform(-1, 1, (k, n)).astype(dtype)
    return a, b, tl.einsum("ij,jk->ik", tl.asarray(a), tl.asarray(b))


# ---- the option's checks (any machine) -------------------------------------------------------


def test_highest_is_accepted_everywhere_and_changes_nothing():
    a, b, c = _matmul()
    (plain,) = tl.evaluate(c)
    (highest,) = tl.evaluate(c, precision="highest")
    assert plain.tobytes() == highest.tobytes()
    x = tl.placeholder((16, 24), "float32", name="x")
    plan = tl.compile([tl.einsum("ij,jk->ik", x, tl.asarray(b))], [x], precision="highest")
    assert plan.options.precision == "highest"
    assert plan(a)[0].tobytes() == plain.tobytes()


@pytest.mark.parametrize("bad", ["tf64", "HIGHEST", "float16", ""])
def test_unknown_precision_is_an_option_error_naming_the_accepted(bad):
    c = _matmul()[2]
    with pytest.raises(OptionError, match=r"evaluate: precision=.* is not valid") as e:
        tl.evaluate(c, precision=bad)
    assert not isinstance(e.value, OptionTypeError)
    for name in PRECISIONS:
        assert repr(name) in str(e.value)


@pytest.mark.parametrize("bad", [3, None, True, ("tf32",), b"tf32"])
def test_precision_of_the_wrong_type_is_an_option_type_error(bad):
    c = _matmul()[2]
    with pytest.raises(OptionTypeError, match=r"compile: precision=.*accepted: 'highest'"):
        tl.compile([c], [], precision=bad)


@pytest.mark.parametrize("precision", LOWERED)
@pytest.mark.skipif(not on_cpu(), reason="the default device must be the CPU")
def test_lowered_precision_on_cpu_is_refused_before_any_work(precision):
    c = _matmul()[2]
    runs = session.PASS_RUNS["n"]
    pattern = rf"precision='{precision}' is not available on device 'cpu'"
    with pytest.raises(OptionError, match="evaluate: " + pattern):
        tl.evaluate(c, precision=precision)
    with pytest.raises(OptionError, match="evaluate: " + pattern):
        tl.evaluate(c, device="cpu", precision=precision)
    with pytest.raises(OptionError, match="compile: " + pattern):
        tl.compile([c], [], precision=precision)
    with pytest.raises(OptionError, match="function: " + pattern):
        tl.function(lambda x: x @ x, precision=precision)
    with pytest.raises(OptionError, match="evaluate_async: " + pattern):
        tl.evaluate_async(c, precision=precision)
    with pytest.raises(OptionError, match="explain: " + pattern):
        tl.explain(c, precision=precision)
    with pytest.raises(OptionError, match=r"evaluate: precision='\w+' is not available on "):
        tl.evaluate(c, device="opencl:0", precision=precision)
    assert session.PASS_RUNS["n"] == runs  # no pass ran


def test_run_start_refuses_a_device_that_cannot_lower(monkeypatch):
    """The record checked while the default device was a GPU, run on the CPU: run_context,
    where every run starts, refuses it too."""
    monkeypatch.setattr(session, "DEFAULT_DEVICE", "cuda:0")
    from tenloom.runtime.options import parse_options

    o = parse_options("evaluate", {"precision": "tf32"})
    assert o.precision == "tf32" and o.devices is None
    with (
        pytest.raises(OptionError, match="not available on device 'cpu'"),
        session.run_context(o, ["cpu"], 1),
    ):
        pass
    with session.run_context(o, ["cuda:0"], 1):  # no device opened: only the setting
        assert PRECISION.get() == "tf32"
    assert PRECISION.get() == "highest"
    monkeypatch.setattr(session, "DEFAULT_DEVICE", "cpu")  # checked again, not from a cache
    with pytest.raises(OptionError, match="evaluate: precision='tf32' is not available on "):
        parse_options("evaluate", {"precision": "tf32"})


def test_lowered_precision_with_a_dask_scheduler_is_refused():
    """Dask's workers run the slices in their own processes, where precision= does not reach
    (refused before any device is opened: none is needed here)."""

    class Client:  # the option check needs only .submit
        def submit(self, *args, **kwargs):
            raise AssertionError("nothing may be submitted")

    c = _matmul()[2]
    with pytest.raises(OptionError, match="evaluate: precision='fp16' with scheduler="):
        tl.evaluate(c, device="cuda:0", precision="fp16", scheduler=Client())
    from tenloom.runtime.options import parse_options

    o = parse_options("evaluate", {"precision": "highest", "scheduler": Client()})
    assert o.precision == "highest" and o.scheduler is not None


def test_grad_takes_no_precision_and_says_where_it_goes():
    x = tl.asarray(np.ones((3, 3), np.float32))
    with pytest.raises(OptionTypeError, match="grad: unknown option 'precision'.*evaluate or"):
        tl.grad(tl.sum(x @ x), x, precision="tf32")


def test_precision_shapes_no_pass_the_optimized_graph_is_shared():
    keys = {Options(precision=p).pass_key for p in PRECISIONS}
    assert keys == {NO_OPTIONS.pass_key}


# ---- saved plans -----------------------------------------------------------------------------


def _saved(tmp_path, **opts):
    a, b = RNG.uniform(-1, 1, (16, 24)), RNG.uniform(-1, 1, (24, 8))
    x = tl.placeholder((16, 24), "float32", name="x")
    plan = tl.compile([tl.einsum("ij,jk->ik", x, tl.asarray(b.astype("float32")))], [x], **opts)
    path = tmp_path / "plan.json"
    tl.save(plan, path)
    return plan, path, a.astype("float32")


def test_saved_plan_keeps_precision(tmp_path):
    plan, path, a = _saved(tmp_path, precision="highest")
    assert json.loads(path.read_text())["options"]["precision"] == "highest"
    loaded = tl.load(path)
    assert loaded.options.precision == "highest" and loaded.opts["precision"] == "highest"
    assert loaded(a)[0].tobytes() == plan(a)[0].tobytes()
    (tmp_path / "none").mkdir()
    _, path2, _ = _saved(tmp_path / "none")
    assert "precision" not in json.loads(path2.read_text())["options"]
    assert tl.load(path2).options.precision == "highest"


def _rewrite_precision(path, value, device=None):
    doc = json.loads(path.read_text())
    doc["options"]["precision"] = value
    if device is not None:
        doc["options"]["device"] = device
    path.write_text(json.dumps(doc))


@pytest.mark.skipif(not on_cpu(), reason="the default device must be the CPU")
def test_loaded_plan_with_a_lowered_precision_is_refused_where_it_cannot_run(tmp_path):
    _, path, _ = _saved(tmp_path, precision="highest")
    _rewrite_precision(path, "tf32")
    with pytest.raises(OptionError, match="plan: precision='tf32' is not available on device"):
        tl.load(path)  # the file is fine; this machine's default device is the CPU
    _rewrite_precision(path, "bf16", device="cuda:0")
    if _N_GPUS == 0:
        with pytest.raises(DeviceError):
            tl.load(path)
    else:
        assert tl.load(path).options.precision == "bf16"


def test_malformed_precision_in_a_plan_file(tmp_path):
    _, path, _ = _saved(tmp_path, precision="highest")
    for bad in ("tf64", 3, None):
        _rewrite_precision(path, bad)
        with pytest.raises(GraphFormatError, match="plan option precision="):
            tl.load(path)


# ---- explain ---------------------------------------------------------------------------------


def test_explain_reports_the_precision_of_each_contraction():
    a, b, c = _matmul()
    d = tl.einsum("ij,jk->ik", tl.asarray(a.astype("float64")), tl.asarray(b.astype("float64")))
    outer = tl.einsum("i,j->ij", tl.asarray(a[0]), tl.asarray(b[0]))
    z = tl.einsum("ij,jk->ik", tl.asarray(a.astype("complex64")), tl.asarray(b.astype("complex64")))
    text = str(tl.explain(c, d, outer, z, device="cuda:0", precision="fp16"))
    assert "precision='fp16' (contractions):" in text
    assert "1 float32 contraction: float16 operands, float32 accumulation" in text
    assert "1 float64 contraction: exact (only float32 and complex64" in text
    assert "sums over nothing" in text
    assert "1 complex64 contraction: float16 operands" in text and "real block GEMM" in text
    tf32 = str(tl.explain(c, device="cuda:0", precision="tf32"))
    assert "1 float32 contraction: TF32 tensor-core GEMM, float32 accumulation" in tf32
    assert "precision='highest'" in str(tl.explain(c, precision="highest"))
    assert "precision=" not in str(tl.explain(c))


# ---- on CUDA ----------------------------------------------------------------------------------


def _rel(x, ref):
    return float(np.max(np.abs(x - ref)) / np.max(np.abs(ref)))


NETWORKS = {
    # a chain, a batched contraction with a lone label, a transposed result
    "chain": ("ab,bc,cd->ad", [(32, 48), (48, 64), (64, 16)]),
    "batched": ("zab,zbc,zd->zca", [(4, 16, 96), (4, 96, 8), (4, 3)]),
}


@needs_gpu
@pytest.mark.parametrize("dtype", ["float32", "complex64"])
@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("net", sorted(NETWORKS))
def test_lowered_results_within_the_documented_tolerance(net, precision, dtype):
    eq, shapes = NETWORKS[net]
    xs = [RNG.uniform(-1, 1, s) for s in shapes]
    if dtype == "complex64":
        xs = [x + 1j * RNG.uniform(-1, 1, x.shape) for x in xs]
    ref = np.einsum(eq, *xs)  # float64 / complex128
    t = tl.einsum(eq, *[tl.asarray(x.astype(dtype)) for x in xs])
    (out,) = tl.evaluate(t, device="cuda:0", precision=precision)
    assert out.dtype == np.dtype(dtype)
    assert _rel(out, ref) <= TOLERANCE[precision]


@needs_gpu
@pytest.mark.parametrize("dtype", ["float32", "complex64", "float64"])
def test_highest_is_bit_identical_to_no_option(dtype):
    a, b, c = _matmul(dtype, (64, 96, 32))
    (plain,) = tl.evaluate(c, device="cuda:0")
    (highest,) = tl.evaluate(c, device="cuda:0", precision="highest")
    assert plain.tobytes() == highest.tobytes()


@needs_gpu
@pytest.mark.parametrize("precision", LOWERED)
def test_each_lowered_mode_really_rounds_the_operands(precision):
    """1 + 2^-12 is a float32 but rounds to 1 in TF32, float16 and bfloat16: the lowered sum of
    k of them is k; float32 (highest) keeps k (1 + 2^-12)."""
    k = 256
    a = np.full((8, k), 1 + 2.0**-12, np.float32)
    b = np.ones((k, 4), np.float32)
    t = tl.einsum("ij,jk->ik", tl.asarray(a), tl.asarray(b))
    (high,) = tl.evaluate(t, device="cuda:0")
    (low,) = tl.evaluate(t, device="cuda:0", precision=precision)
    assert np.all(high == np.float32(k * (1 + 2.0**-12)))
    assert np.all(low == k)
    z = tl.einsum("ij,jk->ik", tl.asarray(a.astype("complex64")), tl.asarray(b * 1j))
    (zlow,) = tl.evaluate(z, device="cuda:0", precision=precision)
    assert np.all(zlow == k * 1j)


@needs_gpu
@pytest.mark.parametrize(
    "precision, bits, rounding",
    [("tf32", 10, "hardware"), ("tf32", 10, "nearest"), ("fp16", 10, None), ("bf16", 7, None)],
)
def test_operands_are_rounded_to_nearest(precision, bits, rounding, monkeypatch):
    """1 + 3 2^-(p+2) lies above the midpoint of 1 and 1 + 2^-p (p mantissa bits): rounded to
    nearest it is 1 + 2^-p, truncated it would be 1. cuBLAS's own TF32 conversion
    (TF32_ROUNDING "hardware", the default) gives one of the two, never the float32 value."""
    if rounding is not None:
        monkeypatch.setattr(
            "tenloom.runtime.backends.cuda_precision.TF32_ROUNDING", rounding, raising=True
        )
    k = 64
    x = np.float32(1 + 3 * 2.0 ** -(bits + 2))
    a, b = np.full((4, k), x, np.float32), np.ones((k, 2), np.float32)
    t = tl.einsum("ij,jk->ik", tl.asarray(a), tl.asarray(b))
    (out,) = tl.evaluate(t, device="cuda:0", precision=precision)
    nearest = np.float32(k * (1 + 2.0**-bits))
    if rounding == "hardware":
        assert np.all((out == nearest) | (out == k)) and not np.any(out == k * x)
    else:
        assert np.all(out == nearest)


@needs_gpu
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_half_storage_accumulates_and_returns_float32(precision):
    """A sum of 4097 ones: float32 accumulation and result (a float16 result would be 4096)."""
    a, b = np.ones((3, 4097), np.float32), np.ones((4097, 5), np.float32)
    (out,) = tl.evaluate(
        tl.einsum("ij,jk->ik", tl.asarray(a), tl.asarray(b)), device="cuda:0", precision=precision
    )
    assert out.dtype == np.float32 and np.all(out == 4097)


@needs_gpu
def test_other_ops_and_dtypes_keep_their_arithmetic():
    x = RNG.uniform(-1, 1, (64, 64))
    a, b = tl.asarray(x.astype("float32")), tl.asarray(x)
    t = [
        tl.exp(a) * 3 + tl.sum(a, axis=0),
        tl.einsum("ij,jk->ik", b, b),
        tl.einsum("i,j->ij", a[0], a[1]),
    ]
    plain = tl.evaluate(*t, device="cuda:0")
    for p in LOWERED:
        for x0, x1 in zip(plain, tl.evaluate(*t, device="cuda:0", precision=p)):
            assert x0.dtype == x1.dtype and x0.tobytes() == x1.tobytes()


@needs_gpu
def test_workers_sliced_runs_and_saved_plans_keep_the_precision(tmp_path):
    eq, shapes = "ab,bc,cd,de->ae", [(64, 128), (128, 128), (128, 128), (128, 32)]
    xs = [RNG.uniform(-1, 1, s).astype("float32") for s in shapes]
    ref = np.einsum(eq, *[x.astype("float64") for x in xs])
    t = tl.einsum(eq, *[tl.asarray(x) for x in xs])
    (high,) = tl.evaluate(t, device="cuda:0")
    for opts in ({"threads": 2}, {"memory_limit": 200_000}):
        (low,) = tl.evaluate(t, device="cuda:0", precision="tf32", **opts)
        assert low.tobytes() != high.tobytes() and _rel(low, ref) <= TOLERANCE["tf32"]
    ph = [tl.placeholder(s, "float32", name=f"x{i}") for i, s in enumerate(shapes)]
    plan = tl.compile([tl.einsum(eq, *ph)], ph, device="cuda:0", precision="tf32")
    path = tmp_path / "tf32.json"
    tl.save(plan, path)
    loaded = tl.load(path)
    assert loaded.options.precision == "tf32"
    (a,), (b,) = plan(*xs), loaded(*xs)
    assert a.tobytes() == b.tobytes() and a.tobytes() != high.tobytes()
    assert _rel(a, ref) <= TOLERANCE["tf32"]
