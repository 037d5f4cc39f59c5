"""Forward mode: JVP rules against central finite differences (float64, along a random
direction), forward-vs-reverse consistency Re<J t, c> = Re<t, J^H c> against the VJP rules,
random graphs, the rules of pass-made nodes (CONTRACT, FUSED, SLICED), sliced networks, and the
cost of a network's JVP through its contraction tree.

Each case runs three ways: through ``tl.jvp`` (the pre-pass first: einsum trees), on the traced
graph itself (the rules of matmul, tensordot, trace, diagonal as written), and on the fully
optimized graph (CONTRACT and FUSED nodes)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import graph_strategy
from hypothesis import given, settings
from hypothesis import strategies as st
from tenloom.graph.autodiff import jvp_nodes
from tenloom.graph.graph import Graph
from tenloom.graph.node import make_node
from tenloom.graph.ops import OPS, Op, OpKind
from tenloom.graph.traverse import toposort
from tenloom.passes import run_pipeline
from tenloom.passes.cost import graph_flops, node_flops
from test_autodiff import BINARY, COMPLEX, OPS_H, UNARY, _rand

import tenloom as tl

EPS = 1e-6
MODES = ("tl", "traced", "optimized")


def tangents_of(out, xs, dirs, mode):
    """The tangent of ``out`` along ``dirs`` by ``tl.jvp``, or by ``jvp_nodes`` on the traced
    graph or on the fully optimized one."""
    if mode == "tl":
        return tl.jvp(out, xs, [tl.asarray(d) for d in dirs], optimize="greedy")
    nodes = [out.node]
    if mode == "optimized":
        graph, _ = run_pipeline(Graph((out.node,)), None, {"optimize": "greedy"})
        nodes = list(graph.outputs)
    (t,) = jvp_nodes(nodes, [x.node for x in xs], [tl.asarray(d).node for d in dirs])
    return tl.Tensor(t) if t is not None else tl.zeros(out.shape, out.dtype)


def check_jvp(f, shapes, dtype="float64", seed=0, positive=False, mode="tl", rtol=1e-5):
    """tl.jvp / jvp_nodes of f along a random direction against a central difference, and
    against the VJP: Re<J t, c> = Re<t, J^H c>."""
    rng = np.random.default_rng(seed)
    xs = [tl.placeholder(s, dtype, name=f"x{i}") for i, s in enumerate(shapes)]
    out = f(*xs)
    vals = [_rand(rng, s, dtype, positive) for s in shapes]
    dirs = [_rand(rng, s, dtype) for s in shapes]
    jt = tangents_of(out, xs, dirs, mode)
    assert (jt.shape, jt.dtype) == (out.shape, out.dtype)
    c = _rand(rng, out.shape, out.dtype)
    cts = tl.vjp(out, xs, [tl.asarray(c)], optimize="greedy")
    got, *gs = tl.evaluate(jt, *cts, feed=dict(zip(xs, vals)), optimize="greedy")

    def at(sign):
        shifted = {x: v + sign * EPS * d for x, v, d in zip(xs, vals, dirs)}
        return out.evaluate(feed=shifted, optimize="greedy")

    numeric = (at(1) - at(-1)) / (2 * EPS)
    scale = max(1.0, float(np.max(np.abs(numeric), initial=0.0)))
    err = float(np.max(np.abs(got - numeric), initial=0.0))
    assert err <= rtol * scale, (err, scale)
    forward = float(np.real(np.vdot(got, c)))
    reverse = sum(float(np.real(np.vdot(d, g))) for d, g in zip(dirs, gs))
    assert abs(forward - reverse) <= 1e-9 * max(1.0, abs(forward), abs(reverse))


def _linalg_all(a):
    """inv, solve, det, slogdet, cholesky, eigh (a gauge-invariant function of it), qr and
    svdvals of a (3, 3) well-conditioned matrix made of ``a`` (3, 4), summed into one (3, 4)
    result."""
    m = a[:, :3] + 3.0 * tl.eye(3, dtype=a.dtype)
    sign, logabs = tl.linalg.slogdet(m)
    h = m @ tl.conj(m.T) + tl.eye(3, dtype=a.dtype)
    scalars = tl.linalg.det(m) * 0.1 + sign * logabs
    w, v = tl.linalg.eigh(h)
    q, r = tl.linalg.qr(a)
    square = tl.linalg.inv(m) + tl.linalg.cholesky(h) * scalars + (v * tl.sin(w)) @ tl.conj(v.T)
    sv = tl.expand_dims(tl.linalg.svdvals(a), -1)
    return tl.linalg.solve(m, a) + tl.concatenate([square, a[:, :1]], axis=1) + q @ r * r + sv


def _linalg_more(a):
    """eig (V f(w) V^-1, unchanged by rescaling the eigenvectors) and eigvals, expm, polar, the
    full svd (U S Vh) and eigvalsh of (3, 3) or (3, 4) matrices made of ``a`` (3, 4)."""
    w, v = tl.linalg.eig(a[:, :3])
    ev = (v * tl.exp(0.25 * w)[None, :]) @ tl.linalg.inv(v) + tl.linalg.eigvals(a[:, 1:])[:, None]
    u, s, vh = tl.linalg.svd(a, full_matrices=False)
    h = a[:, :3] + tl.conj(a[:, :3].T)
    rest = tl.linalg.expm(a[:, :3] * 0.5) @ tl.linalg.polar(a)[0] + (u * s) @ vh
    return tl.real(ev) @ a + rest + tl.linalg.eigvalsh(h)[:, None]


def _truncated(a):
    """tensor_svd cut to rank 2 of a (3, 4) (a TRUNCATED_SVD node): U S Vh and the discarded
    weight, both unchanged by the singular vectors' phases."""
    u, s, vh, discarded = tl.linalg.tensor_svd(a, 0, max_rank=2)
    return (u * s) @ vh + discarded


S = (3, 4)
SCATTER = (((6, 0, -2), (2, 5, 2)), (7, 5))  # SLICE_SCATTER attrs for a (3, 2) operand
EXTRA = {
    "sign": (lambda x: tl.sign(x) * x, [S], "float64", False),
    "imag_of_real": (lambda x: tl.imag(x) + x, [S], "float64", False),
    "mod_floordiv": (
        lambda a, b: tl.remainder(a, b * b + 0.5) + tl.floor_divide(a, b * b + 0.5),
        [S, S],
        "float64",
        False,
    ),
    "sign_complex": (tl.sign, [S], "complex128", False),
    "pinv": (tl.linalg.pinv, [S], "complex128", False),
    "truncated_svd": (_truncated, [S], "float64", False),
    "truncated_svd_complex": (_truncated, [S], "complex128", False),
    "prod_keepdims": (lambda x: tl.prod(x, axis=1, keepdims=True), [S], "float64", True),
    "max_keepdims": (lambda x: tl.max(x, axis=0, keepdims=True), [S], "float64", False),
    "min_axis": (lambda x: tl.min(x, axis=1), [S], "float64", False),
    "broadcast_both": (lambda a, b: a[:, :1] * b[:1, :], [S, S], "float64", False),
    "broadcast_constant": (lambda a: a[:1] + tl.zeros(S), [S], "float64", False),
    "where_broadcast": (lambda a: tl.where(a[:, :1] > 0, a[:1, :], 2.0), [S], "float64", False),
    "concatenate_constant": (
        lambda a, b: tl.concatenate([a, tl.ones((1, 4)), b[:1]], axis=0),
        [S, S],
        "float64",
        False,
    ),
    "einsum_hyper3": (lambda a, b: tl.einsum("ij,ij,ij->i", a, b, a), [S, S], "float64", False),
    # SEMIRING_EINSUM (graph/ops/semiring.py; its own tests in tests/test_semiring.py): the
    # log-sum-exp marginals, and max_plus's argmax indicator (random entries: no ties)
    "semiring_lse": (
        lambda a, b: tl.einsum("ij,kj,ij->ik", a, b, a, semiring="log_sum_exp"),
        [S, S],
        "float64",
        False,
    ),
    "semiring_max_plus": (
        lambda a, b: tl.einsum("ij,kj->i", a, b, semiring="max_plus"),
        [S, S],
        "float64",
        False,
    ),
    # LAYOUT (the permutation pass's copy into a chosen memory order): values unchanged
    "layout": (
        lambda a: tl.Tensor(make_node(Op.LAYOUT, ((a * 1.5).node,), ((1, 0),))) * a,
        [S],
        "float64",
        False,
    ),
    # SLICE_SCATTER (a strided slice's cotangent): zeros of shape (7, 5) with a[::-1, 1::2]
    # written at a basic index
    "slice_scatter": (
        lambda a: 2.0 * tl.Tensor(make_node(Op.SLICE_SCATTER, (a[::-1, 1::2].node,), SCATTER)),
        [S],
        "float64",
        False,
    ),
    "tensordot_int": (lambda a, b: tl.tensordot(a, b.T, 1), [S, S], "float64", False),
    "matmul_vec_mat": (lambda a, b: a[0] @ b.T, [S, S], "float64", False),
    "trace_3d": (lambda a: tl.trace(tl.reshape(a, (2, 3, 2)), 0, 0, 2), [S], "float64", False),
    "diagonal_3d": (
        lambda a: tl.diagonal(tl.reshape(a, (2, 3, 2)), -1, 2, 0),
        [S],
        "float64",
        False,
    ),
    "astype_float32_and_back": (
        lambda a: tl.astype(tl.astype(a, "complex128") * 1j, "float64"),
        [S],
        "float64",
        False,
    ),
    # complex: holomorphic ops take the plain complex derivative
    "c_exp": (lambda x: tl.exp(x), [S], "complex128", False),
    "c_log": (lambda x: tl.log(x), [S], "complex128", True),
    "c_sqrt": (lambda x: tl.sqrt(x), [S], "complex128", True),
    "c_sin_cos": (lambda x: tl.sin(x) * tl.cos(x), [S], "complex128", False),
    "c_tanh": (lambda x: tl.tanh(0.3 * x), [S], "complex128", False),
    "c_pow": (lambda a, b: a**b, [S, S], "complex128", True),
    "c_div": (lambda a, b: a / (b + 3.0), [S, S], "complex128", True),
    "c_prod_sum": (lambda x: tl.prod(x, axis=0) + tl.sum(x, axis=1)[:1], [S], "complex128", True),
    "c_where": (lambda a, b: tl.where(tl.real(a) > 0, a, b), [S, S], "complex128", False),
    "c_abs_conj": (lambda a: tl.abs(a) * tl.conj(a), [S], "complex128", False),
    "c_astype_real": (lambda a: tl.astype(a, "float64") * tl.imag(a), [S], "complex128", False),
    "c_real_to_complex": (
        lambda a: tl.astype(tl.real(a), "complex128") * a,
        [S],
        "complex128",
        False,
    ),
    # tl.linalg (its own cases in tests/test_linalg.py): every rule once, real and complex
    "linalg": (lambda a: _linalg_all(a), [S], "float64", False),
    "c_linalg": (lambda a: _linalg_all(a), [S], "complex128", False),
    "linalg_more": (lambda a: _linalg_more(a), [S], "float64", False),
    "c_linalg_more": (lambda a: _linalg_more(a), [S], "complex128", False),
    "c_matmul_tensordot": (
        lambda a, b: tl.tensordot(a @ tl.conj(b).T, b, 1),
        [S, S],
        "complex128",
        False,
    ),
    # complex(real, imag) (graph/ops/complex_parts.py): real parts in, one complex value out
    "complex_from_parts": (
        lambda a, b: tl.complex(a, b[:1]) * tl.complex(tl.sin(b), a * a),
        [S, S],
        "float64",
        False,
    ),
    # advanced indexing and functional updates (GATHER, SCATTER_ADD: graph/ops/gather.py)
    "gather_scatter_add": (
        lambda x: x.at[[0, 0], [1, 1]].add(x[[1, 2], [3, 0]]) + x[[2, 0, 2], ::-1],
        [S],
        "complex128",
        False,
    ),
    # tl.fft (FFT_C2C, FFT_C2R, FFT_R2C: graph/ops/fft.py; its own cases in tests/test_fft.py)
    "c_fft": (
        lambda x: tl.fft.rfft(tl.fft.irfft(tl.fft.fft(x, axis=0), n=6)) * x,
        [S],
        "complex128",
        False,
    ),
}

CASES = {
    **{f"unary_{k}": (f, [S], "float64", pos) for k, (f, pos) in UNARY.items()},
    **{f"binary_{k}": (f, shapes, "float64", k == "pow") for k, (f, shapes) in BINARY.items()},
    **{f"complex_{k}": (f, shapes, "complex128", False) for k, (f, shapes) in COMPLEX.items()},
    **EXTRA,
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(CASES))
def test_every_op_matches_finite_differences_and_the_vjp(name, mode):
    f, shapes, dtype, positive = CASES[name]
    check_jvp(f, shapes, dtype, positive=positive, mode=mode)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_contract_and_fused_nodes_of_the_optimized_graph(dtype):
    """The passes' own nodes differentiate: pairwise CONTRACTs (two GEMMs per node) and FUSED
    regions (their steps' rules chained)."""

    def f(a, b, c):
        net = tl.einsum("ij,jk,kl->il", a, b, c)
        return tl.tanh(0.3 * net) * tl.exp(a * 0.5) - net * net / (c * c + 2.0)

    check_jvp(f, [(4, 4)] * 3, dtype, mode="optimized")
    xs = [tl.placeholder((4, 4), dtype) for _ in range(3)]
    graph, _ = run_pipeline(Graph((f(*xs).node,)), None, {"optimize": "greedy"})
    kinds = {n.op for n in graph.order}
    assert {Op.CONTRACT, Op.FUSED} <= kinds and Op.EINSUM not in kinds


def test_every_op_has_a_jvp_rule_and_the_cases_call_each():
    """Each non-leaf op has a JVP rule, and the cases above (plus the sliced and zero-tangent
    tests below) call every rule."""
    called: set[Op] = set()
    saved = {op: d.jvp for op, d in OPS.items()}
    assert all(saved[op] is not None for op, d in OPS.items() if d.kind is not OpKind.LEAF)

    def spy(op, rule):
        def wrapped(node, y, xs, ts):
            called.add(op)
            return rule(node, y, xs, ts)

        return wrapped

    try:
        for op, rule in saved.items():
            if rule is not None:
                OPS[op].jvp = spy(op, rule)
        rng = np.random.default_rng(0)
        for f, shapes, dtype, _ in CASES.values():
            xs = [tl.placeholder(s, dtype) for s in shapes]
            dirs = [_rand(rng, s, dtype) for s in shapes]
            for mode in MODES:
                tangents_of(f(*xs), xs, dirs, mode)
        sliced = _sliced([tl.placeholder(s) for s in ((3, 4, 5), (5, 4, 2), (2, 6))], (1,))
        jvp_nodes([sliced.node], list(sliced.node.inputs), list(sliced.node.inputs))
    finally:
        for op, rule in saved.items():
            OPS[op].jvp = rule
    # comparisons and logic have a boolean value: no tangent, and the sweep does not ask them
    boolean = {Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE, Op.AND, Op.OR, Op.XOR, Op.INVERT}
    x = tl.placeholder(S)
    for op in boolean:
        ins = (x > 0).node if op in (Op.AND, Op.OR, Op.XOR, Op.INVERT) else x.node
        node = make_node(op, (ins,) * OPS[op].arity)
        xs = tuple(tl.Tensor(i) for i in node.inputs)
        assert OPS[op].jvp(node, tl.Tensor(node), xs, xs) is None
        called.add(op)
    missing = {op for op, d in OPS.items() if d.kind is not OpKind.LEAF} - called
    assert not missing, sorted(op.value for op in missing)


def test_subgradients_match_the_vjp_choices():
    """At ties and kinks the tangent follows the VJP's documented choices: sign(0) = 0, the
    first operand of maximum/minimum on ties, max/min reductions averaged over ties, clip at a
    bound passing the tangent (it is maximum/minimum)."""
    x = tl.placeholder((4,), name="x")
    v = np.array([0.0, 1.0, 1.0, -2.0])
    t = np.array([1.0, 2.0, 4.0, 8.0])
    cases = {
        "abs": (tl.abs(x), [0.0, 2.0, 4.0, -8.0]),
        "sign": (tl.sign(x) + x, t),
        "maximum_tie": (tl.maximum(x, 1.0), [0.0, 2.0, 4.0, 0.0]),
        "maximum_first": (tl.maximum(x, tl.asarray(v)), t),
        "minimum_first": (tl.minimum(tl.asarray(v), x), [0.0, 0.0, 0.0, 0.0]),
        "minimum_tie": (tl.minimum(x, 1.0), t),
        "max_reduce_ties": (tl.max(x), 3.0),
        "min_reduce": (tl.min(x), 8.0),
        "clip_bounds": (tl.clip(x, -2.0, 1.0), t),
    }
    for name, (y, want) in cases.items():
        jt = tl.jvp(y, [x], [tl.asarray(t)])
        c = np.linspace(1.0, 2.0, y.size).reshape(y.shape)
        (g,) = tl.vjp(y, [x], [tl.asarray(c)])
        got, gv = tl.evaluate(jt, g, feed={x: v})
        np.testing.assert_allclose(got, want, err_msg=name)
        assert np.vdot(got, c) == pytest.approx(np.vdot(t, gv)), name


def test_untouched_branches_emit_nothing_and_zeros_are_symbolic():
    rng = np.random.default_rng(1)
    a = tl.placeholder(S, name="a")
    c = tl.asarray(rng.standard_normal(S))
    y = a * 2.0 + tl.sin(c) @ tl.ones((4, 4))
    jt = tl.jvp(y, [a], [tl.ones(S)])
    ops = {n.op for n in toposort([jt.node])}
    assert Op.COS not in ops and Op.SIN not in ops and Op.EINSUM not in ops
    # an output that does not depend on the input, and an integer output: symbolic zeros
    z, k = tl.jvp([tl.sin(c), tl.astype(a, "int64")], [a], [tl.ones(S)])
    assert z.node.op is Op.FULL and k.node.op is Op.FULL and k.dtype == np.int64
    np.testing.assert_array_equal(z.evaluate(), np.zeros(S))
    # a float32 input gets a float32 tangent; tangents are cast to the input's dtype
    h = tl.placeholder(S, "float32", name="h")
    th = tl.jvp(tl.exp(h), h, tl.ones(S, "float64"))
    assert th.dtype == np.float32
    np.testing.assert_allclose(th.evaluate(feed={h: np.zeros(S, np.float32)}), 1.0)


def test_jvp_errors_and_options():
    a = tl.placeholder(S, name="a")
    with pytest.raises(tl.ShapeError, match="tangent of shape"):
        tl.jvp(a * 2, [a], [tl.ones((4,))])
    with pytest.raises(tl.ShapeError, match="1 tangents for 2 inputs"):
        tl.jvp(a * 2, [a, a], [tl.ones(S)])
    with pytest.raises(tl.DTypeError, match="complex tangent"):
        tl.jvp(a * 2, [a], [tl.ones(S, "complex128")])
    with pytest.raises(TypeError, match="jvp: unknown option 'optimise'"):
        tl.jvp(a * 2, [a], [tl.ones(S)], optimise="greedy")
    # a non-leaf input is independent: its own inputs' tangents do not reach it
    b = tl.sin(a)
    (tb,) = tl.jvp([b * b], [b], [tl.ones(S)])
    feed = {a: np.full(S, 0.5)}
    np.testing.assert_allclose(tb.evaluate(feed=feed), 2 * np.sin(0.5))


def test_network_jvp_follows_the_contraction_tree():
    """After the pre-pass every contraction in the tangent graph is pairwise: one per tree
    node for the primal intermediates, two per tree node for the tangents."""
    rng = np.random.default_rng(2)
    eq = "ab,bc,cd,de,ef,fa->"
    vals = [rng.standard_normal((3, 3)) for _ in range(6)]
    dirs = [rng.standard_normal((3, 3)) for _ in range(6)]
    arrays = [tl.asarray(v) for v in vals]
    jt = tl.jvp(tl.einsum(eq, *arrays), arrays, [tl.asarray(d) for d in dirs])
    einsums = [n for n in toposort([jt.node]) if n.op is Op.EINSUM]
    assert all(len(n.inputs) <= 2 for n in einsums)
    assert len(einsums) == 3 * 5 - 1  # 5 tree nodes; the root's value itself is not needed
    want = sum(np.einsum(eq, *vals[:k], dirs[k], *vals[k + 1 :]) for k in range(6))
    np.testing.assert_allclose(jt.evaluate(), want, rtol=1e-10)


def _sliced(xs, sliced):
    """A SLICED node over ``xs`` (labelled as in tests/test_slicing.py) with a left-to-right
    path."""
    terms = ((0, 1, 2), (2, 1, 3), (3, 4))
    sizes = {lab: s for x, t in zip(xs, terms) for lab, s in zip(t, x.shape)}
    path = ((0, 1), (3, 2))
    sl = tuple((lab, sizes[lab]) for lab in sliced)
    return tl.Tensor(
        make_node(Op.SLICED, tuple(x.node for x in xs), (terms, (0, 4), sl, path, None, None))
    )


@pytest.mark.parametrize("sliced", [(1,), (0, 3), (1, 2, 4)])
def test_sliced_node_tangent_is_one_forward_mode_network(sliced):
    shapes = [(3, 4, 5), (5, 4, 2), (2, 6)]
    check_jvp(lambda a, b, c: _sliced([a, b, c], sliced), shapes, "complex128", mode="traced")
    xs = [tl.placeholder(s) for s in shapes]
    y = _sliced(xs, sliced)
    ts = [tl.placeholder(xs[k].shape).node for k in (0, 2)]
    (t,) = jvp_nodes([y.node], [xs[0].node, xs[2].node], ts)
    (node,) = [n for n in toposort([t]) if n.op is Op.SLICED]
    # the same network, slicing and path, carrying the tangents of operands 0 and 2
    assert node.attrs == y.node.attrs[:4] + ((-1, -3), None)
    assert node.inputs == (*(x.node for x in xs), *ts)
    # derivative sweeps are not differentiated again
    ct = tl.placeholder((3, 6))
    attrs = y.node.attrs[:4] + ((0, 1, 2), None)
    rev = make_node(Op.SLICED, (*(x.node for x in xs), ct.node), attrs)
    with pytest.raises(tl.DTypeError, match="derivative sweep"):
        jvp_nodes([rev], [xs[0].node], [xs[0].node])
    with pytest.raises(tl.DTypeError, match="derivative sweep"):
        jvp_nodes([node], [xs[1].node], [xs[1].node])


def _lattice(n, m, d, seed):
    rng = np.random.default_rng(seed)
    bonds: dict = {}
    args = []
    for i in range(n):
        for j in range(m):
            labels = [
                bonds.setdefault(tuple(sorted([(i, j), (i + di, j + dj)])), len(bonds))
                for di, dj in ((-1, 0), (1, 0), (0, -1), (0, 1))
                if 0 <= i + di < n and 0 <= j + dj < m
            ]
            a = rng.standard_normal((d,) * len(labels))
            args += [tl.asarray(a / np.sqrt(a.size) * 2), labels]
    return args + [[]]


@pytest.mark.parametrize("limit", ["64 KB", 24_000])
def test_jvp_with_memory_limit_slices_and_matches_the_unsliced(limit):
    args = _lattice(4, 4, 5, seed=3)
    tensors = args[0:-1:2]
    y = tl.einsum(*args)
    rng = np.random.default_rng(4)
    wrt = [tensors[k] for k in (0, 5, 10)]
    dirs = [tl.asarray(rng.standard_normal(x.shape)) for x in wrt]
    plain = tl.jvp(y, wrt, dirs, optimize="greedy")
    sliced = tl.jvp(y, wrt, dirs, optimize="greedy", memory_limit=limit)
    (net,) = [n for n in toposort([sliced.node]) if n.op is Op.SLICED]  # one tangent sweep
    assert len(net.attrs[4]) == len(wrt) and all(k < 0 for k in net.attrs[4])
    want = plain.evaluate(optimize="greedy")
    got = sliced.evaluate(optimize="greedy", memory_limit=limit)
    np.testing.assert_allclose(got, want, rtol=1e-10)


OPS_J = [
    *OPS_H,
    lambda a, b: tl.einsum("ij,ij,jk->ik", a, b, a),  # hyper-index j
    lambda a, b: tl.einsum("ii,jj->ij", a, b),  # two diagonals
    lambda a, b: a[:, :1] * b + tl.sum(b, axis=1, keepdims=True),  # broadcasting
    lambda a, b: tl.abs(a) * b,
    lambda a, b: tl.real(a) + tl.imag(b) * b,
    lambda a, b: tl.conj(a) @ b,
    lambda a, b: tl.prod(a * 0.5 + 1.5, axis=0, keepdims=True) * b,
    lambda a, b: tl.concatenate([a[:2], b[2:]], 0),
    lambda a, b: tl.transpose(a) * tl.exp(b * 0.1),
    lambda a, b: tl.where(tl.real(a) > 0, a, b * 2.0),
]


def jvp_graphs():
    return graph_strategy(OPS_J)


@settings(max_examples=max(100, settings.default.max_examples // 3))
@given(
    jvp_graphs(),
    st.sampled_from(["float64", "complex128"]),
    st.sampled_from(MODES),
    st.integers(0, 100),
)
def test_random_graphs_match_finite_differences_and_the_vjp(f, dtype, mode, seed):
    check_jvp(f, [(3, 3), (3, 3)], dtype=dtype, seed=seed, mode=mode)


def test_jvp_of_a_100_tensor_network_costs_about_3x_the_forward():
    """Through the forward tree a network's tangent (with respect to all 100 tensors) costs
    two pairwise contractions per tree node on top of the forward ones (less the root's value,
    which is not needed), plus one addition per tree node: 3F - root + sum of intermediate
    sizes. The contractions alone stay within 3x the forward flops."""
    import cotengra as ctg

    inputs, output, shapes, sizes = ctg.utils.lattice_equation([10, 10], d_min=2, d_max=2, seed=4)
    labels = {lab: i for i, lab in enumerate(sizes)}
    rng = np.random.default_rng(0)
    arrays = [tl.asarray(rng.standard_normal(s) / 2) for s in shapes]
    args = []
    for a, term in zip(arrays, inputs):
        args += [a, [labels[x] for x in term]]
    value = tl.einsum(*args, [])
    dirs = [tl.asarray(rng.standard_normal(s) / 2) for s in shapes]
    jt = tl.jvp(value, arrays, dirs, optimize="greedy")

    def optimized(t):
        return run_pipeline(Graph((t.node,)), None, {"optimize": "greedy"})[0]

    forward, tangent = optimized(value), optimized(jt)
    fwd = graph_flops(forward)
    contractions = sum(node_flops(n) for n in tangent.order if OPS[n.op].kind is OpKind.CONTRACTION)
    additions = graph_flops(tangent) - contractions
    intermediates = sum(n.size for n in forward.order if n.op is Op.CONTRACT)
    assert contractions <= 3 * fwd, (fwd, contractions)
    assert additions <= intermediates, (additions, intermediates)
    assert graph_flops(tangent) <= 3 * fwd + intermediates, (fwd, graph_flops(tangent))
    assert fwd == tl.explain(value, optimize="greedy").after.flops
    # and the number is right: compare with the sum of 100 networks, each one tangent in
    k = [3, 50, 97]
    part = tl.jvp(value, [arrays[i] for i in k], [dirs[i] for i in k], optimize="greedy")
    vals = [a.evaluate() for a in arrays]
    want = 0.0
    for i in k:
        ops = vals[:i] + [dirs[i].evaluate()] + vals[i + 1 :]
        want += ctg.array_contract(ops, inputs, output, optimize="greedy")
    np.testing.assert_allclose(part.evaluate(optimize="greedy"), want, rtol=1e-8)
