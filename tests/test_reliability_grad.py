"""Issue 18, class 12 (gradients) and the gradient fuzzer.

* The reverse sweep of an n-op elementwise chain is one network of 2n products: the merge pass
  builds it once (it built networks of 1, 2, ..., n operands: quadratic compile time), and the
  order pass takes it left to right without searching.
* A strided slice's cotangent is a SLICE_SCATTER into zeros (it was a dense n x m selection
  matrix per axis), a diagonal's the offset identity times the padded cotangent (it was a
  dense (n1, n2, length) tensor): the gradient graph's nodes are of the input's size.
* ``prod``'s derivative is the product of the other elements, also at zeros (it divided by x).
* Differentiating with respect to an integer or boolean input is a DTypeError naming it.

The fuzzer draws random differentiable programs (elementwise ops with broadcasting, reductions
with axis/keepdims, slices with negative steps, reshape/transpose/concatenate/where/maximum/clip,
diagonals and traces with offsets, einsum with repeated and lone indices; float64 and
complex128) and checks reverse mode, forward mode and second order (hvp, jvp of the gradient)
against central finite differences. Complex values follow PyTorch's convention
(tests/test_autodiff.py): for a real loss L the gradient is dL/dRe + i dL/dIm, so along a
direction d, dL = Re(vdot(g, d)). A failure prints the program as Python.

Budget: ``ci`` (the default profile) runs a fixed number of examples in well under a minute;
for a longer run::

    HYPOTHESIS_PROFILE=slow python -m pytest tests/test_reliability_grad.py -p no:cacheprovider
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import assert_close, device_params, random_array
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st
from tenloom.graph.graph import Graph
from tenloom.graph.node import make_node
from tenloom.graph.ops import Op
from tenloom.graph.traverse import toposort
from tenloom.passes import merge_contractions as merge_module
from tenloom.passes import run_pipeline

import tenloom as tl

# ---- quadratic compile time of chain gradients ---------------------------------------------


def _chain(x, n):
    y = x
    for _ in range(n):
        y = tl.sin(y) * 1.01 + 0.1
    return y


def test_chain_gradient_networks_are_built_once(monkeypatch):
    """The merge pass builds each merged network once: the operands of all the EINSUM nodes it
    builds add up to O(n) for a chain of n ops (they added up to n^2 / 2)."""
    n = 200
    x = tl.placeholder((8,), name="x")
    w = tl.placeholder((8,), name="w")
    # a weighted sum: its cotangent enters the chain as a contraction (g * w), so the chain's
    # products merge into one network (a plain sum's cotangent is a broadcast of g, and the
    # products stay elementwise)
    (g,) = tl.grad(tl.dot(_chain(x, n), w), [x])
    built = []
    real = merge_module.einsum_node

    def spy(nodes, terms, out):
        built.append(len(nodes))
        return real(nodes, terms, out)

    monkeypatch.setattr(merge_module, "einsum_node", spy)
    graph, _ = run_pipeline(Graph((g.node,)), ("simplify", "canonicalize", "merge_contractions"))
    assert max(built) >= n  # the chain's products are one network...
    assert sum(built) <= 4 * n  # ...built once


def test_chain_gradient_value():
    n = 300
    x = tl.placeholder((8,), name="x")
    (g,) = tl.grad(tl.sum(_chain(x, n)), [x])
    xv = np.linspace(-1.0, 1.0, 8)
    y, dy = xv.copy(), np.ones(8)
    for _ in range(n):
        dy = dy * np.cos(y) * 1.01
        y = np.sin(y) * 1.01 + 0.1
    assert_close(g.evaluate(feed={x: xv}), dy)


# ---- strided slices: a scatter, not a selection matrix -------------------------------------


DEVICES = device_params()


def _largest_bytes(t: tl.Tensor) -> int:
    """The largest node (constants included) of the traced and of the optimized graph."""
    graph, _ = run_pipeline(Graph((t.node,)))
    nodes = list(toposort([t.node])) + list(graph.order)
    return max(n.nbytes for n in nodes)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "shape, key",
    [
        ((8000,), np.s_[::3]),
        ((8000,), np.s_[-2::-5]),
        ((100, 80), np.s_[1:-1:2, ::-1]),
        ((40, 30, 20), np.s_[::-3, 2:29:4, 5:6]),
        ((50, 60), np.s_[-7:-6:-1, :]),  # an empty selection
    ],
)
def test_strided_slice_gradient_is_a_scatter(shape, key, device):
    rng = np.random.default_rng(0)
    xv = rng.standard_normal(shape)
    x = tl.placeholder(shape, name="x")
    (g,) = tl.grad(tl.sum(tl.sin(x[key]) * 3.0), [x])
    assert _largest_bytes(g) <= xv.nbytes  # the dense selection matrix was n x m
    assert any(n.op is Op.SLICE_SCATTER for n in toposort([g.node]))
    want = np.zeros(shape)
    want[key] = 3.0 * np.cos(xv[key])
    assert_close(g.evaluate(feed={x: xv}, device=device), want)


@pytest.mark.parametrize("offset, axes", [(3, (0, 1)), (-2, (1, 0)), (1, (2, 0)), (0, (0, 1))])
def test_diagonal_gradient_is_of_the_input_size(offset, axes):
    """The same class for diagonals: their cotangent was a contraction with a dense
    (n1, n2, length) selection tensor (cubic), it is the offset identity times the padded
    cotangent."""
    rng = np.random.default_rng(5)
    shape = (120, 100, 3)
    xv = rng.standard_normal(shape)
    x = tl.placeholder(shape, name="x")
    d = tl.diagonal(x, offset, *axes)
    w = rng.standard_normal(d.shape)
    (g,) = tl.grad(tl.sum(d * d * w), [x])
    assert _largest_bytes(g) <= xv.nbytes
    want = np.zeros(shape)
    index = np.diagonal(np.arange(xv.size).reshape(shape), offset, *axes)
    want.reshape(-1)[index.reshape(-1)] = (
        2 * np.diagonal(xv, offset, *axes).reshape(-1) * w.reshape(-1)
    )
    assert_close(g.evaluate(feed={x: xv}), want)


def test_second_order_through_a_strided_slice():
    """The scatter's own VJP is a slice again (Hessian-vector product of sum(x[::-2]^3))."""
    rng = np.random.default_rng(1)
    xv, v = rng.standard_normal(9), rng.standard_normal(9)
    x = tl.placeholder((9,), name="x")
    (h,) = tl.hvp(tl.sum(x[::-2] ** 3), [x], [v])
    want = np.zeros(9)
    want[::-2] = 6.0 * xv[::-2] * v[::-2]
    assert_close(h.evaluate(feed={x: xv}), want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["bool", "int32", "float32", "complex64", "complex128"])
@pytest.mark.parametrize(
    "spec, target",
    [
        (((5, -1, -2), (1, 6, 2), (1, 2, 1)), (7, 6, 2)),  # [5::-2, 1:6:2, 1:2]
        (((6, 1, -4), (0, 0, 1)), (7, 3)),  # [6:1:-4, empty]
        ((), ()),
    ],
)
def test_slice_scatter_on_every_backend(spec, target, dtype, device):
    """The op itself: zeros of ``target`` with the operand at the basic index ``spec``."""
    key = tuple(slice(a, None if b < 0 else b, c) for a, b, c in spec)
    v = random_array(np.random.default_rng(3), np.zeros(target)[key].shape, dtype)
    node = make_node(Op.SLICE_SCATTER, (tl.asarray(v).node,), (spec, target))
    want = np.zeros(target, dtype)
    want[key] = v
    assert_close(tl.Tensor(node).evaluate(device=device), want)


def test_slice_scatter_saves_and_loads(tmp_path):
    """A gradient graph holding SLICE_SCATTER round-trips through tl.save / tl.load, as a
    tensor and as a compiled plan; a scatter whose index does not fit is a GraphFormatError."""
    x = tl.placeholder((9, 4), name="x")
    (g,) = tl.grad(tl.sum(tl.sin(x[::-2, 1:3])), [x])
    xv = np.random.default_rng(4).standard_normal((9, 4))
    want = g.evaluate(feed={x: xv})
    tl.save(g, tmp_path / "g.json")
    loaded = tl.load(tmp_path / "g.json")
    (lx,) = [n for n in toposort([loaded.node]) if n.op is Op.PLACEHOLDER]
    assert_close(loaded.evaluate(feed={tl.Tensor(lx): xv}), want)
    plan = tl.compile([g], inputs=[x])
    tl.save(plan, tmp_path / "p.json")
    assert_close(tl.load(tmp_path / "p.json")(xv)[0], want)
    doc = json.loads((tmp_path / "g.json").read_text())
    (node,) = [n for n in doc["nodes"] if n["op"] == "slice_scatter"]
    node["attrs"][0][1] = [1, 4, 1]  # selects 3 columns for an operand of 2
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    with pytest.raises(tl.GraphFormatError, match="slice_scatter"):
        tl.load(tmp_path / "bad.json")


# ---- prod at zeros ---------------------------------------------------------------------------


def _others(xv: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """d prod / d x by brute force: the product of the other elements of each group."""
    out = np.empty_like(xv)
    for idx in np.ndindex(xv.shape):
        mask = np.ones(xv.shape, bool)
        for ax in range(xv.ndim):
            if ax not in axes:
                along = np.arange(xv.shape[ax]) == idx[ax]
                mask &= along.reshape([-1 if a == ax else 1 for a in range(xv.ndim)])
        mask[idx] = False
        out[idx] = np.prod(xv[mask])
    return out


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), ()])
@pytest.mark.parametrize("keepdims", [False, True])
def test_prod_gradient_at_zeros(dtype, axis, keepdims):
    """One zero in a group: the product of the others at the zero, 0 elsewhere; two or more:
    0 (JAX and PyTorch); no zero: prod / x. Reverse and forward mode, no NaN."""
    rng = np.random.default_rng(2)
    xv = random_array(rng, (3, 4, 2), dtype)
    xv[0, 1, 0] = 0  # groups with one zero, with two (below) and with none, whatever the axes
    xv[1, 1, 1] = xv[1, 2, 1] = 0
    x = tl.placeholder(xv.shape, dtype, name="x")
    axes = tuple(range(3)) if axis is None else tuple(np.atleast_1d(axis) % 3)
    p = tl.prod(x, axis=axis, keepdims=keepdims)
    w = random_array(rng, p.shape, dtype)
    loss = tl.sum(tl.real(p * tl.conj(tl.asarray(w))))
    (g,) = tl.grad(loss, [x])
    others = _others(xv, axes)
    want = np.conj(others) * np.reshape(w, np.prod(xv, axis=axes, keepdims=True).shape)
    got = g.evaluate(feed={x: xv})
    assert not np.isnan(got).any()
    assert_close(got, want)
    t = random_array(rng, xv.shape, dtype)
    (jt,) = tl.jvp([p], [x], [tl.asarray(t)])
    assert_close(jt.evaluate(feed={x: xv}), np.sum(t * others, axis=axes, keepdims=keepdims))


def test_prod_hessian_at_a_zero():
    """f = prod(x) at x = (0, 2, 3): H v = (2 v1 ... ) by hand; finite, second order too."""
    x = tl.placeholder((3,), name="x")
    v = np.array([1.0, -1.0, 0.5])
    (h,) = tl.hvp(tl.prod(x), [x], [v])
    xv = np.array([0.0, 2.0, 3.0])
    hess = np.array([[0.0, 3.0, 2.0], [3.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    assert_close(h.evaluate(feed={x: xv}), hess @ v)


# ---- integer and boolean inputs --------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_derivatives_with_respect_to_integers_raise(dtype):
    n = tl.placeholder((3,), dtype, name="counts")
    x = tl.placeholder((3,), name="x")
    loss = tl.sum(x * n)
    ones = tl.asarray(np.ones(3))
    calls = {
        "grad": lambda: tl.grad(loss, [x, n]),
        "value_and_grad": lambda: tl.value_and_grad(loss, n),
        "vjp": lambda: tl.vjp(x * n, [n], [ones]),
        "jvp": lambda: tl.jvp([x * n], [n], [ones]),
        "hvp": lambda: tl.hvp(loss, [n], [np.ones(3)]),
    }
    for name, call in calls.items():
        with pytest.raises(tl.DTypeError, match=rf"{name}: .*'counts'.*{dtype}"):
            call()
    # a float input next to it is fine, and a constant is named by where it was made
    assert tl.grad(loss, x).evaluate(feed={x: np.ones(3), n: np.arange(3).astype(dtype)}).shape
    with pytest.raises(tl.DTypeError, match="constant made at"):
        tl.grad(tl.sum(x), tl.asarray(np.arange(3)))


def test_loss_must_be_a_real_scalar():
    x = tl.placeholder((3,), "complex128", name="z")
    with pytest.raises(tl.DTypeError, match="real floating point"):
        tl.grad(tl.sum(x), [x])
    with pytest.raises(tl.ShapeError, match="scalar"):
        tl.grad(tl.real(x), [x])
    (g,) = tl.grad(tl.sum(tl.real(x * tl.conj(x))), [x])  # complex inputs are fine
    zv = np.array([1 + 2j, -1j, 0.5])
    assert_close(g.evaluate(feed={x: zv}), 2 * zv)


# ---- the gradient fuzzer -----------------------------------------------------------------------

MAX_STEPS = 8
MAX_SIZE = 256  # elements of any value: keeps einsum's outer products small
EPS = 1e-6
# twice the profile's budget (``ci``: 600 programs, about 15 s; ``slow``: 6000)
EXAMPLES = 2 * settings().max_examples

UNARY = [
    "-{a}",
    "tl.sin({a})",
    "tl.cos({a})",
    "tl.tanh(0.3 * {a})",
    "tl.exp(0.3 * {a})",
    "{a} * {a}",
    "{a} ** 3",
    "tl.sqrt({a} * tl.conj({a}) + 1.0)",
    "tl.log({a} * tl.conj({a}) + 1.0)",
    "1.0 / ({a} * tl.conj({a}) + 1.0)",
    "tl.conj({a})",
    "tl.abs({a})",
    "0.5 * {a} + 1.5",
]
UNARY_REAL = [
    "tl.astype({a}, 'complex128') * (1.0 - 0.5j)",
    "tl.clip({a}, -0.5, 0.5)",
    "tl.maximum({a}, 0.2)",
]
UNARY_COMPLEX = ["tl.real({a})", "tl.imag({a})", "tl.abs({a}) * {a}"]
BINARY = ["{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} / ({b} * tl.conj({b}) + 1.0)"]
BINARY_REAL = ["tl.maximum({a}, {b})", "tl.minimum({a}, {b})"]
BINARY_ANY = ["tl.where(tl.real({a}) > 0, {a}, {b})", "tl.where(tl.real({b}) < 0.3, {a}, 2.0)"]
REDUCTIONS = ["sum", "prod", "mean"]
REDUCTIONS_REAL = ["max", "min"]
KINDS = [
    "unary",
    "binary",
    "reduce",
    "slice",
    "reshape",
    "broadcast",
    "diagonal",
    "transpose",
    "concat",
    "einsum",
]


class Program:
    """Input shapes and dtype, and steps: Python expressions over ``tl`` and earlier values
    (``v0``, ``v1``, ...; the inputs come first)."""

    def __init__(self, shapes, dtype):
        self.shapes, self.dtype = shapes, dtype
        self.lines: list[str] = []
        self.inputs = [tl.placeholder(s, dtype, name=f"v{i}") for i, s in enumerate(shapes)]
        self.pool: list[tl.Tensor] = list(self.inputs)

    def add(self, expr: str) -> bool:
        """Trace one step; False (and nothing kept) when its value would be too big."""
        env = {"tl": tl, **{f"v{i}": v for i, v in enumerate(self.pool)}}
        value = eval(expr, env)  # our own templates (no user text)
        if value.size > MAX_SIZE:
            return False
        self.lines.append(f"v{len(self.pool)} = {expr}")
        self.pool.append(value)
        return True

    @property
    def outputs(self) -> list[tl.Tensor]:
        """Every step's value (the inputs themselves when no step was kept)."""
        return self.pool[len(self.inputs) :] or list(self.inputs)

    def source(self) -> str:
        head = [
            f"v{i} = tl.placeholder({s}, {self.dtype!r}, name='v{i}')"
            for i, s in enumerate(self.shapes)
        ]
        return "\n".join(head + self.lines)


def _name(i: int) -> str:
    return f"v{i}"


def _broadcasts(a: tuple, b: tuple) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


@st.composite
def slice_key(draw, shape):
    parts = []
    for n in shape:
        kinds = ["all", "slice", "slice", "none"] + (["index"] if n else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "all":
            parts.append(":")
        elif kind == "index":
            parts.append(str(draw(st.integers(-n, n - 1))))
        elif kind == "none":
            parts.append("None, :")
        else:
            start = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            stop = draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
            step = draw(st.sampled_from([None, 1, 2, 3, -1, -2, -3]))
            parts.append(":".join("" if v is None else str(v) for v in (start, stop, step)))
    return ", ".join(parts) if parts else "..."


@st.composite
def step(draw, prog: Program):
    """One step's expression (None: nothing fits; the caller draws again)."""
    pool = prog.pool
    # the latest value half of the time: chains of steps, not only steps on the inputs
    k = draw(st.one_of(st.just(len(pool) - 1), st.integers(0, len(pool) - 1)))
    a = pool[k]
    na = _name(k)
    cplx = a.dtype.kind == "c"
    kind = draw(st.sampled_from(KINDS))
    if kind == "unary":
        ops = UNARY + (UNARY_COMPLEX if cplx else UNARY_REAL)
        return draw(st.sampled_from(ops)).format(a=na)
    if kind == "binary":
        partners = [j for j, b in enumerate(pool) if _broadcasts(a.shape, b.shape)]
        j = draw(st.sampled_from(partners))  # a itself at least
        both_real = not cplx and pool[j].dtype.kind != "c"
        ops = BINARY + BINARY_ANY + (BINARY_REAL if both_real else [])
        return draw(st.sampled_from(ops)).format(a=na, b=_name(j))
    if kind == "reduce":
        ops = REDUCTIONS + ([] if cplx else REDUCTIONS_REAL)
        op = draw(st.sampled_from(ops))
        if a.ndim and draw(st.booleans()):
            axes = draw(st.lists(st.integers(-a.ndim, a.ndim - 1), min_size=1, max_size=a.ndim))
            axes = tuple(dict.fromkeys(ax % a.ndim for ax in axes))
            axis = str(axes[0]) if len(axes) == 1 else str(axes)
        else:
            axis = "None"
        keepdims = draw(st.booleans())
        if op in ("max", "min", "mean") and a.size == 0:
            return None  # no identity, or 0 / 0
        return f"tl.{op}({na}, axis={axis}, keepdims={keepdims})"
    if kind == "slice":
        return f"{na}[{draw(slice_key(a.shape))}]"
    if kind == "reshape":
        shape = draw(st.sampled_from([a.shape[::-1], (a.size,), (1, *a.shape), (*a.shape, 1)]))
        return f"tl.reshape({na}, {tuple(shape)})"
    if kind == "broadcast":
        lead = draw(st.integers(1, 3))
        shape = (lead, *(draw(st.integers(1, 3)) if n == 1 else n for n in a.shape))
        return f"tl.broadcast_to({na}, {shape})"
    if kind == "diagonal":
        if a.ndim < 2:
            return None
        a1, a2 = draw(st.permutations(range(a.ndim)))[:2]
        offset = draw(st.integers(-a.shape[a1], a.shape[a2]))
        fn = draw(st.sampled_from(["diagonal", "trace"]))
        return f"tl.{fn}({na}, {offset}, {a1}, {a2})"
    if kind == "transpose":
        perm = draw(st.permutations(range(a.ndim)))
        return f"tl.transpose({na}, {tuple(perm)})"
    if kind == "concat":
        if not a.ndim:
            return None
        ax = draw(st.integers(0, a.ndim - 1))
        same = [
            j
            for j, b in enumerate(pool)
            if b.ndim == a.ndim
            and all(p == q for i, (p, q) in enumerate(zip(a.shape, b.shape)) if i != ax)
        ]
        j = draw(st.sampled_from(same))
        other = draw(st.sampled_from([_name(j), f"tl.sin({_name(j)})"]))
        return f"tl.concatenate([{na}, {other}], axis={ax})"
    # einsum: one or two operands; equal sizes may share a label (a contraction, a hyper
    # index, or a repeated label inside one operand: a diagonal); the output keeps a subset
    j = draw(st.integers(0, len(pool) - 1))
    b = pool[j]
    two = draw(st.booleans())
    labels: dict[int, int] = {}  # label -> size
    terms = []
    for x in [a, b] if two else [a]:
        term = []
        for n in x.shape:
            same = [lab for lab, size in labels.items() if size == n]
            if same and draw(st.booleans()):
                term.append(draw(st.sampled_from(same)))
            else:
                labels[len(labels)] = n
                term.append(len(labels) - 1)
        terms.append(term)
    out = draw(st.lists(st.sampled_from(sorted(labels)), unique=True)) if labels else []
    args = [na, str(terms[0])] + ([_name(j), str(terms[1])] if two else [])
    return f"tl.einsum({', '.join(args)}, {out})"


@st.composite
def programs(draw):
    dtype = draw(st.sampled_from(["float64", "complex128"]))
    shapes = draw(
        st.lists(st.lists(st.integers(1, 4), max_size=3).map(tuple), min_size=1, max_size=3)
    )
    prog = Program(shapes, dtype)
    for _ in range(draw(st.integers(2, MAX_STEPS))):
        for _attempt in range(5):
            expr = draw(step(prog))
            if expr is not None and prog.add(expr):
                break
    return prog


def _loss(outs: list[tl.Tensor], ws: list[np.ndarray]) -> tl.Tensor:
    """sum(Re(out * conj(w))) over the outputs: a real scalar whatever their dtypes."""
    total = None
    for out, w in zip(outs, ws):
        prod = out * tl.conj(tl.asarray(w))
        term = tl.sum(tl.real(prod)) if prod.dtype.kind == "c" else tl.sum(prod)
        total = term if total is None else total + term
    return total


def _dot(gs, ds) -> float:
    """Re<g, d> summed over the inputs (PyTorch's convention for complex values)."""
    return sum(float(np.real(np.vdot(g, d))) for g, d in zip(gs, ds))


def _near(got: float, want: float, scale: float, what: str, truncation: float = 0.0) -> None:
    """``got`` within rounding of the finite difference ``want``, plus twice the difference's
    own truncation error (estimated from a second step size: steep functions such as
    sin(exp(0.3 x**4)) have a central difference off by more than rounding)."""
    tol = 1e-6 * max(1.0, abs(want), abs(got)) + 1e-8 * scale + 2.0 * truncation
    assert abs(got - want) <= tol, f"{what}: {got} against finite differences {want}"


@settings(max_examples=EXAMPLES)
@given(programs(), st.integers(0, 2**32 - 1))
def test_random_programs_match_finite_differences(prog, seed):
    """The loss sums Re<v, w_v> over every step's value v with random weights w_v, so each
    step's derivative counts; reverse mode, forward mode, and second order (reverse over
    reverse: hvp; forward over reverse: jvp of the gradient), each against a central difference
    along a random direction."""
    note(prog.source())
    rng = np.random.default_rng(seed)
    xs, outs = prog.inputs, prog.outputs
    vals = [random_array(rng, x.shape, x.dtype) for x in xs]
    dirs = [random_array(rng, x.shape, x.dtype) for x in xs]
    ws = [random_array(rng, out.shape, out.dtype) for out in outs]
    loss = _loss(outs, ws)
    feed = dict(zip(xs, vals))
    # magnitude of the loss's terms: bounds the rounding of its finite differences
    scale = sum(float(np.sum(np.abs(v * w))) for v, w in zip(tl.evaluate(*outs, feed=feed), ws))
    assume(scale < 1e6)  # complex sin(sin(...)) and the like overflow: no derivative to check

    def shifted(t):
        return {x: v + t * d for x, v, d in zip(xs, vals, dirs)}

    def central(h):
        return (float(loss.evaluate(feed=shifted(h))) - float(loss.evaluate(feed=shifted(-h)))) / (
            2 * h
        )

    # the central difference's error is about c h**2: the two step sizes differ by 3 c h**2
    numeric = central(EPS)
    trunc = abs(central(2 * EPS) - numeric) / 3
    grads = tl.grad(loss, xs)
    _near(_dot(tl.evaluate(*grads, feed=feed), dirs), numeric, scale, "grad", trunc)
    # forward mode: dL = sum of Re<J d, w> over the outputs
    tangents = tl.jvp(outs, xs, [tl.asarray(d) for d in dirs])
    _near(_dot(ws, tl.evaluate(*tangents, feed=feed)), numeric, scale, "jvp", trunc)
    # Hessian-vector product along the same direction: d/dt Re<grad(x + t d), d>
    hv = tl.hvp(loss, xs, dirs)

    def slope_at(t):
        return _dot(tl.evaluate(*grads, feed=shifted(t)), dirs)

    numeric2 = (slope_at(EPS) - slope_at(-EPS)) / (2 * EPS)
    trunc2 = abs((slope_at(2 * EPS) - slope_at(-2 * EPS)) / (4 * EPS) - numeric2) / 3
    _near(_dot(tl.evaluate(*hv, feed=feed), dirs), numeric2, scale, "hvp", trunc2)
    # and forward over reverse: the gradient's tangent along d
    dgrads = tl.jvp(grads, xs, [tl.asarray(d) for d in dirs])
    _near(_dot(tl.evaluate(*dgrads, feed=feed), dirs), numeric2, scale, "jvp of grad", trunc2)
