"""issue 23: constant inputs of a fused region (FULL nodes) written into the CUDA kernel as C
literals (runtime/codegen/cuda.py ``c_literal``). The spelling is checked without a GPU (each
literal reads back as the value, bit for bit); the kernels run on the device machine against
NumPy."""

from __future__ import annotations

import numpy as np
import pytest
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

    _N_GPUS = cp.cuda.runtime.getDeviceCount()
except Exception:  # no CuPy, or no driver
    _N_GPUS = 0


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.cuda
@pytest.mark.skipif(_N_GPUS == 0, reason="no CUDA GPU present")
def test_fused_regions_with_constants_match_numpy_on_cuda(dtype, compiled):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(1000) * 10).astype(dtype)
    if dtype.startswith("float"):
        consts = [np.array(v).astype(dtype)[()] for v in (0.9, -0.0, 1e-45, -2.5)]
    else:
        consts = [
            np.array(v).astype(dtype)[()] for v in (3, -7, 0, 2**20 if dtype == "int64" else 5)
        ]

    def f(xp, y):
        y = y * consts[0] + consts[1]
        y = xp.where(y > consts[2], y - consts[3], y * consts[0])
        return y * y + consts[1]

    want = f(np, x)
    if compiled:
        p = tl.placeholder(x.shape, dtype, name="x")
        plan = tl.compile([f(tl, p)], [p], device="cuda:0")
        got = plan(x)[0]
        got2 = plan(x[::-1].copy())[0]  # replay with new values
        np.testing.assert_array_equal(got2, f(np, x[::-1].copy()))
    else:
        (got,) = tl.evaluate(f(tl, tl.asarray(x)), device="cuda:0")
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got), np.signbit(want))
