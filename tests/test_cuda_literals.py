"""issue 23: constant inputs of a fused region (FULL nodes) written into the CUDA kernel as C
literals (runtime/codegen/cuda.py ``c_literal``). The spelling is checked without a GPU (each
literal reads back as the value, bit for bit); the kernels run on the device machine against
NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import gpu_count
from tenloom.graph.ops import Op
from tenloom.runtime.codegen.cuda import c_literal, fused_source

import tenloom as tl

FLOATS = [0.9, -0.0, 0.0, 1e-45, 1.4e-45, 3.4028235e38, -2.5, 1 / 3]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("value", FLOATS + [5e-324, 1.7976931348623157e308])
def test_a_float_literal_reads_back_as_the_value_bit_for_bit(dtype, value):
    v = np.array(value).astype(dtype)
    text = c_literal(v[()], np.dtype(dtype))
    if not np.isfinite(v):  # a value that overflows float32 stays an argument
        assert text is None
        return
    ctype = "float" if dtype == "float32" else "double"
    assert text.startswith(f"(({ctype})") and text.endswith(")")
    back = np.array(float(text[len(ctype) + 3 : -1])).astype(dtype)
    assert back.tobytes() == v.tobytes()  # -0.0 and subnormals included


def test_integers_and_bools_and_what_stays_an_argument():
    assert c_literal(np.int32(-7), np.dtype("int32")) == "((int)-7)"
    assert c_literal(np.int64(2**40), np.dtype("int64")) == f"((long long){2**40}LL)"
    assert c_literal(np.int64(-(2**63)), np.dtype("int64")) is None
    assert c_literal(np.bool_(True), np.dtype("bool")) == "true"
    assert c_literal(np.bool_(False), np.dtype("bool")) == "false"
    for value, dtype in [
        (np.nan, "float64"),
        (np.inf, "float32"),
        (1 + 2j, "complex128"),
        (3, "uint8"),
        (3, "int16"),
        (1.5, "float16"),
    ]:
        assert c_literal(np.array(value).astype(dtype)[()], np.dtype(dtype)) is None


def test_literals_leave_the_parameters_and_enter_the_body():
    program = (
        (Op.MUL, (), (("in", 0), ("in", 1))),
        (Op.ADD, (), (("v", 0), ("in", 2))),
    )
    dts = [np.dtype("float32")] * 3
    params, out, body = fused_source(program, dts, np.dtype("float32"), {1: "((float)0.5)"})
    assert params == "float32 in0, float32 in2"
    assert "((float)0.5)" in body
    assert "in1" not in body
    params, _, body = fused_source(program, dts, np.dtype("float32"))
    assert params == "float32 in0, float32 in1, float32 in2" and "in1" in body


try:
    import cupy as cp
except ImportError:
    cp = None
_N_GPUS = gpu_count(cp)


N = 70_000  # over runtime/codegen GPU_BIG_REGION: a region may hold more than 48 ops


def _long(xp, y, consts, blocks: int = 40):
    """A region of 4 * blocks + 1 ops (over the CUDA backend's LITERAL_MIN_OPS at 40, on
    arrays of ``N`` elements) whose values stay bounded, for floats and integers alike."""
    for _ in range(blocks):
        y = y * consts[0] + consts[1]
        y = xp.maximum(y, consts[2]) - consts[3]
    return y + consts[1]


def _record(monkeypatch):
    from tenloom.runtime.backends import cuda as be

    seen = []
    real = be.fused_source

    def spy(program, in_dtypes, out_dtype, literals=None):
        seen.append(dict(literals or {}))
        return real(program, in_dtypes, out_dtype, literals)

    monkeypatch.setattr(be, "fused_source", spy)
    return seen


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.cuda
@pytest.mark.skipif(_N_GPUS == 0, reason="no CUDA GPU present")
def test_long_fused_regions_take_their_constants_as_literals_and_match_numpy(
    dtype, compiled, monkeypatch
):
    seen = _record(monkeypatch)
    rng = np.random.default_rng(3 + compiled)
    x = (rng.standard_normal(N) * 10).astype(dtype)
    if dtype.startswith("float"):
        # -0.0 and a float32 subnormal; values unique to this test (no kernel cached before)
        vals = (0.9 - 0.01 * compiled, -0.0, 1e-45, -2.5)
    else:
        vals = (-1, -7 - compiled, -(2**31) if dtype == "int32" else 0, 3)
    consts = list(vals)  # Python numbers: FULL nodes of x's dtype (NumPy's weak scalars)
    want = _long(np, x, consts)
    if compiled:
        p = tl.placeholder(x.shape, dtype, name="x")
        plan = tl.compile([_long(tl, p, consts)], [p], device="cuda:0")
        got = plan(x)[0]
        other = x[::-1].copy()
        np.testing.assert_array_equal(plan(other)[0], _long(np, other, consts))
    else:
        (got,) = tl.evaluate(_long(tl, tl.asarray(x), consts), device="cuda:0")
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))
    assert any(lit for lit in seen), "no constant was written in as a literal"


@pytest.mark.cuda
@pytest.mark.skipif(_N_GPUS == 0, reason="no CUDA GPU present")
def test_an_eager_loop_with_a_new_scalar_each_step_compiles_a_bounded_number_of_kernels(
    monkeypatch,
):
    from tenloom.runtime.backends import cuda as be

    seen = _record(monkeypatch)
    x = np.linspace(-3, 3, N)
    steps = be.LITERAL_VARIANTS + 4
    # 41 blocks: a region no other test builds, so the process-wide count of its literal
    # variants starts at zero whatever ran before (40 blocks of float64 run above)
    for k in range(steps):
        consts = [0.5 + 0.001 * k, 0.25, 0.1, 0.3]
        (got,) = tl.evaluate(_long(tl, tl.asarray(x), consts, blocks=41), device="cuda:0")
        want = _long(np, x, consts, blocks=41)
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)
    with_literals = [lit for lit in seen if lit]
    assert len(with_literals) == be.LITERAL_VARIANTS, seen
    # then one kernel with parameters for all the rest (cse orders the operands by structure
    # first, passes/cse.py: a new value gives the region's inputs no other order)
    assert len(seen) == be.LITERAL_VARIANTS + 1, seen


def test_int32_min_is_spelled_as_a_valid_literal():
    assert c_literal(np.int32(-(2**31)), np.dtype("int32")) == "((int)-2147483648)"
