"""The chunked CPU kernel for fused elementwise regions (runtime/backends/cpu_fused.py).

The chunked kernel's results are compared bit for bit with the same optimized graph run op by op
(the pipeline without fuse_elementwise): it runs the same ufunc loops, only on cache-sized
pieces, so nothing may differ. Regions that go to numexpr are compared to a tolerance. (Against
NumPy on the user's expression they agree to rounding only: canonicalize orders commutative
operands, and complex products round with the order.)"""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from helpers import run_in_threads
from hypothesis import given
from hypothesis import strategies as st
from tenloom.passes import DEFAULT_PIPELINE
from tenloom.runtime.backends import cpu as cpu_backend
from tenloom.runtime.backends import cpu_fused

import tenloom as tl


@pytest.fixture
def used(monkeypatch):
    """Records, for each FUSED node compiled, whether the chunked kernel took it."""
    taken: list[bool] = []
    real = cpu_backend.chunked_kernel

    def spy(*args):
        k = real(*args)
        taken.append(k is not None)
        return k

    monkeypatch.setattr(cpu_backend, "chunked_kernel", spy)
    return taken


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), np.max(np.abs(a - b))


FLOAT_OPS = [
    lambda xp, a, b: a + b,
    lambda xp, a, b: a - b,
    lambda xp, a, b: a * b,
    lambda xp, a, b: a / (xp.abs(b) + 1.0),
    lambda xp, a, b: xp.sin(a) * b,
    lambda xp, a, b: xp.exp(-xp.abs(a)) + b,
    lambda xp, a, b: xp.maximum(a, b),
    lambda xp, a, b: xp.minimum(a, -b),
    lambda xp, a, b: xp.where(a > b, a, b * 2.0),
    lambda xp, a, b: xp.tanh(a * a) - xp.sqrt(xp.abs(b)),
    lambda xp, a, b: a * a,
]
INT_OPS = [
    lambda xp, a, b: a + b,
    lambda xp, a, b: a - b,
    lambda xp, a, b: a * b,
    lambda xp, a, b: xp.maximum(a, b),
    lambda xp, a, b: xp.where(a < b, a, -b),
    lambda xp, a, b: a * a,
]
# first axis lengths around the chunking: one chunk, several, a short tail
SHAPES = [(5000,), (70001,), (3, 4000), (2000, 7), (9000, 1), (40, 1500)]


def broadcast_forms(shape):
    """Input shapes that broadcast to ``shape``: itself, its rows, a column, a scalar."""
    forms = [shape, ()]
    if len(shape) == 2:
        forms += [(shape[1],), (shape[0], 1), (1, shape[1])]
    return forms


@st.composite
def programs(draw):
    shape = draw(st.sampled_from(SHAPES))
    dtype = draw(st.sampled_from(["float64", "float32", "int64", "complex128"]))
    forms = broadcast_forms(shape)
    in_shapes = [shape] + [draw(st.sampled_from(forms)) for _ in range(2)]
    ops = INT_OPS if dtype == "int64" else FLOAT_OPS
    if dtype == "complex128":
        ops = FLOAT_OPS[:3] + [FLOAT_OPS[4], FLOAT_OPS[10]]
    steps = draw(
        st.lists(
            st.tuples(st.integers(0, len(ops) - 1), st.integers(0, 20), st.integers(0, 20)),
            min_size=2,
            max_size=12,
        )
    )
    seed = draw(st.integers(0, 2**16))
    return shape, dtype, in_shapes, ops, steps, seed


def build(xp, ops, steps, xs):
    pool = list(xs)
    for op, i, j in steps:
        pool.append(ops[op](xp, pool[i % len(pool)], pool[j % len(pool)]))
    # everything feeds the result, so the region's output has the full shape
    out = pool[-1]
    for x in xs:
        out = out + x * 0 if out.dtype.kind != "b" else out
    return out


def arrays(in_shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    out = []
    for s in in_shapes:
        if dtype == "int64":
            a = rng.integers(-50, 50, s)
        elif dtype == "complex128":
            a = rng.standard_normal(s) + 1j * rng.standard_normal(s)
        else:
            a = rng.standard_normal(s)
        out.append(np.asarray(a, dtype))
    return out


TAKEN: list[bool] = []
UNFUSED = tuple(p for p in DEFAULT_PIPELINE if p != "fuse_elementwise")


@given(programs())
def test_random_regions_match_numpy_bitwise(prog):
    shape, dtype, in_shapes, ops, steps, seed = prog
    xs = arrays(in_shapes, dtype, seed)
    real = cpu_backend.chunked_kernel

    def spy(*args):
        k = real(*args)
        TAKEN.append(k is not None)
        return k

    with np.errstate(all="ignore"), mock.patch.object(cpu_backend, "chunked_kernel", spy):
        want = build(np, ops, steps, xs)
        t = build(tl, ops, steps, [tl.asarray(x) for x in xs])
        got = tl.evaluate(t)[0]
        exact = tl.evaluate(t, passes=UNFUSED)[0]
    same(got, exact)
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-12, atol=1e-300)


def test_most_random_regions_took_the_chunked_kernel():
    # runs after the hypothesis test (file order): its regions were mostly the chunked kernel's
    if len(TAKEN) < 50:
        pytest.skip("the hypothesis test did not run first")
    assert sum(TAKEN) >= 0.8 * len(TAKEN), (sum(TAKEN), len(TAKEN))


def test_random_regions_took_the_chunked_kernel(used):
    # the regions of the hypothesis test above are the chunked kernel's, not numexpr's
    xs = arrays([(70001,), (), (70001,)], "float64", 1)
    steps = [(k, k, k + 1) for k in range(len(FLOAT_OPS))]
    with np.errstate(all="ignore"):
        got = tl.evaluate(build(tl, FLOAT_OPS, steps, [tl.asarray(x) for x in xs]))[0]
        same(got, build(np, FLOAT_OPS, steps, xs))
    assert used and all(used)


@pytest.mark.parametrize("n", [cpu_fused.CHUNK - 1, cpu_fused.CHUNK, 3 * cpu_fused.CHUNK + 17])
def test_chunk_boundaries(used, n):
    x = np.linspace(-3, 3, n)
    y = x[::-1].copy()
    t = tl.asarray(x)
    u = tl.asarray(y)
    got = tl.evaluate(tl.sin(t * u + 1.0) * t - u)[0]
    same(got, np.sin(x * y + 1.0) * x - y)
    assert used == [True]


def test_chain_of_regions_reuses_scratch_in_place(used):
    # y = sin(y * y) ... repeated: every step writes over the operand that dies with it
    x = np.random.default_rng(0).random(50_000)
    y, ty = x, tl.asarray(x)
    for _ in range(30):
        y = np.sin(y * y) + x
        ty = tl.sin(ty * ty) + tl.asarray(x)
    same(tl.evaluate(ty)[0], y)
    assert used and all(used)


def test_where_does_not_overwrite_its_condition(used):
    a = np.random.default_rng(1).standard_normal((3000, 4))
    ta = tl.asarray(a)
    got = tl.evaluate(tl.where(ta * 2.0 > 0.5, ta * 3.0, -ta) + 1.0)[0]
    same(got, np.where(a * 2.0 > 0.5, a * 3.0, -a) + 1.0)
    assert used == [True]


def test_boolean_result(used):
    a = np.random.default_rng(2).standard_normal(10_000)
    ta = tl.asarray(a)
    got = tl.evaluate((ta * ta > 0.25) & (ta < 1.0))[0]
    same(got, (a * a > 0.25) & (a < 1.0))


def test_regions_it_does_not_take_fall_back(used):
    # a first axis of 1 cannot be cut, and rows far longer than a chunk are not cut either
    for shape in [(1, 10_000), (2, 5 * cpu_fused.CHUNK)]:
        a = np.random.default_rng(3).standard_normal(shape)
        ta = tl.asarray(a)
        got = tl.evaluate(tl.exp(ta * 0.5) + ta)[0]
        # numexpr computes exp, not NumPy
        np.testing.assert_allclose(got, np.exp(a * 0.5) + a, rtol=1e-13, atol=1e-13)
    assert used == [False, False]


def test_one_thread_and_many_agree(monkeypatch):
    x = np.random.default_rng(4).random(500_000)  # enough work for the pool
    t = tl.asarray(x)
    want = np.cos(x * 3.0) * x + 2.0
    expr = tl.cos(t * 3.0) * t + 2.0
    monkeypatch.setenv("TENLOOM_NUM_THREADS", "1")
    same(tl.evaluate(tl.cos(tl.asarray(x) * 3.0) * tl.asarray(x) + 2.0)[0], want)
    monkeypatch.setenv("TENLOOM_NUM_THREADS", "4")
    same(tl.evaluate(expr)[0], want)


def test_concurrent_evaluations_of_one_plan():
    # scratch buffers are per thread: two callers running the same kernel at once stay apart
    x = np.random.default_rng(5).random(500_000)
    t = tl.asarray(x)
    plan = tl.compile(tl.sin(t * t) * 0.5 + t)
    want = np.sin(x * x) * 0.5 + x

    def worker(_):
        for _ in range(20):
            same(plan()[0], want)

    run_in_threads(worker, 3)


def test_kernel_refuses_ops_with_attributes():
    from tenloom.graph.ops import Op

    program = ((Op.SIN, (), (("in", 0),)), (Op.CAST, ("float32",), (("step", 0),)))
    got = cpu_fused.chunked_kernel(program, (5000,), np.float32, [(5000,)], [np.float64])
    assert got is None


# ---- small regions: one compiled numexpr call instead of a ufunc call per op ----------------


def _kernel_names(t):
    from tenloom.runtime import evaluate as ev
    from tenloom.runtime.backends import get_backend
    from tenloom.runtime.program import compile_program

    graph = ev.optimize_graph(ev.build_graph((t,)), {})
    prog = compile_program(graph, get_backend("cpu", 0))
    return [
        (s.node.op.value, s.kernel.__qualname__) for s in prog.steps if s.node.op.value == "fused"
    ]


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "complex128"])
def test_small_regions_of_many_ops_take_numexpr(dtype):
    x = arrays([(8,)], dtype, 7)[0]
    t = tl.asarray(x)
    y, ty = x, t
    for _ in range(4):  # 12 ops
        y = y * y - x + x * 2
        ty = ty * ty - t + t * 2
    if dtype == "complex128":  # complex products: NumPy's ufuncs, not numexpr's formulas
        kernels = _kernel_names(ty)
        assert kernels and not any("_numexpr" in q for _, q in kernels), kernels
        y, ty = x, t
        for _ in range(4):  # 12 ops, each one numexpr computes as NumPy (cpu.py)
            y = -(y - x) + x
            ty = -(ty - t) + t
    kernels = _kernel_names(ty)
    assert kernels and all("_numexpr" in q for _, q in kernels), kernels
    got = tl.evaluate(ty)[0]
    assert got.dtype == y.dtype
    np.testing.assert_allclose(got, y, rtol=1e-5 if dtype == "float32" else 1e-12)


def test_every_fusable_dtype_has_a_numexpr_type():
    from tenloom.runtime.codegen.numexpr import ARITH, BOOL

    assert {d.str for d in ARITH | {BOOL}} <= set(cpu_backend.NUMEXPR_TYPES)


def test_small_regions_of_few_ops_call_the_ufuncs():
    x = np.arange(8.0)
    kernels = _kernel_names(tl.sin(tl.asarray(x)) + 1.0)
    assert kernels and not any("_numexpr" in q for _, q in kernels), kernels


def test_the_callers_errstate_holds_in_every_thread():
    # np.errstate is a context variable: the pool's chunk tasks run in the caller's context,
    # whatever the context their thread was started in
    import warnings

    ph = tl.placeholder((600_000,), "float64", "x")
    plan = tl.compile(tl.log(ph * 2.0) + ph * 3.0 - 1.0, [ph])
    plan(np.ones(600_000))  # the pool's threads start here, in the default context
    x = np.ones(600_000)
    x[-5] = 0.0  # in the last chunk, which a pool thread runs
    with np.errstate(divide="raise"), pytest.raises(tl.EvaluationError):
        plan(x)
    with np.errstate(divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        got = plan(x)[0]
    assert got[-5] == -np.inf
