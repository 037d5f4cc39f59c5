"""tl.dump / plan.dump: one line per node, with continuation lines for fused regions, contraction
trees and sliced networks. The structured lines are checked by reading them back: the
subscripts a dump prints, fed to numpy.einsum, must compute what the graph computes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from tenloom.graph.ops import Op
from tenloom.passes import run_pipeline
from tenloom.runtime.evaluate import build_graph

import tenloom as tl
from tenloom.dump import GUTTER, _attrs_text, dump_nodes

HEAD = re.compile(r"^(%\d+) = (\w+)(\[.*\])?\(([^)]*)\) : (\w+)\(")


def parse(text: str) -> list[tuple[str, str, str, list[str], list[str]]]:
    """(name, op, attrs, args, continuation lines) per node line of a dump."""
    nodes: list = []
    for line in text.splitlines():
        if line.startswith(GUTTER):
            nodes[-1][4].append(line[len(GUTTER) :])
            continue
        if line.startswith("return "):
            break
        m = HEAD.match(line)
        assert m, line
        args = [a for a in m.group(4).split(", ") if a]
        nodes.append((m.group(1), m.group(2), m.group(3) or "", args, []))
    return nodes


def optimized_graph(*tensors, **opts):
    graph, _ = run_pipeline(build_graph(tensors), opts.get("passes"), opts)
    return graph


def test_fused_program_lines_appear_indented_under_the_node():
    x = tl.placeholder((4, 3), name="x")
    b = tl.placeholder((3,), name="b")
    y = tl.exp(tl.sin(x) * 2.0 + b) - tl.sqrt(tl.abs(x))
    text = tl.dump(y, optimized=True)
    fused = [n for n in parse(text) if n[1] == "fused"]
    assert len(fused) == 1
    name, _, attrs, args, steps = fused[0]
    node = next(n for n in optimized_graph(y).order if n.op is Op.FUSED)
    program = node.attrs[0]
    assert attrs == f"[{len(program)} ops]" and len(steps) == len(program)
    for j, ((op, _, step_args), line) in enumerate(zip(program, steps)):
        operands = " ".join(f"in{i}" if k == "in" else f"v{i}" for k, i in step_args)
        assert line.startswith(f"v{j} = {op.value} {operands} : ")
    assert steps[-1].endswith(": float64(4, 3)")
    # the block sits right under its node line, every line in the gutter
    lines = text.splitlines()
    at = next(k for k, line in enumerate(lines) if line.startswith(f"{name} = fused"))
    assert lines[at + 1 : at + 1 + len(steps)] == [GUTTER + s for s in steps]
    assert all(len(args) > int(i) for s in steps for i in re.findall(r"\bin(\d+)", s))


def test_fused_step_shapes_follow_broadcasting():
    x = tl.placeholder((5, 1), dtype="float32", name="x")
    y = tl.placeholder((1, 6), dtype="float32", name="y")
    z = tl.sin(x) + tl.cos(y)
    steps = next(n for n in parse(tl.dump(z, optimized=True)) if n[1] == "fused")[4]
    assert len(steps) == 3
    assert any(re.fullmatch(r"v[01] = sin in[01] : float32\(5, 1\)", s) for s in steps)
    assert any(re.fullmatch(r"v[01] = cos in[01] : float32\(1, 6\)", s) for s in steps)
    assert re.fullmatch(r"v2 = add v[01] v[01] : float32\(5, 6\)", steps[2])


def run_contract_lines(text: str, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate every contract line of a dump with numpy.einsum on its printed subscripts."""
    vals = dict(feed)
    for name, op, attrs, args, _ in parse(text):
        if op == "contract":
            vals[name] = np.einsum(attrs[1:-1], *[vals[a] for a in args])
    return vals


def network_line(extra: list[str]) -> tuple[str, list[str]]:
    m = re.fullmatch(r"network (\S+) over (.+): \d+ pairwise contractions", extra[-1])
    assert m, extra
    return m.group(1), m.group(2).split(", ")


def test_contraction_tree_shares_letters_across_the_tree():
    rng = np.random.default_rng(0)
    shapes = {"a": (3, 4), "b": (4, 5), "c": (5, 6, 2), "d": (6, 3), "e": (2, 7)}
    phs = {k: tl.placeholder(s, name=k) for k, s in shapes.items()}
    arrays = {k: rng.standard_normal(s) for k, s in shapes.items()}
    y = tl.einsum("ij,jk,klm,li,mn->n", *phs.values())
    text = tl.dump(y, optimized=True, optimize="greedy")
    nodes = parse(text)
    feed = {n[0]: arrays[n[2][2:-2]] for n in nodes if n[1] == "placeholder"}
    contracts = [n for n in nodes if n[1] == "contract"]
    assert len(contracts) == 4
    vals = run_contract_lines(text, feed)
    expected = np.einsum("ij,jk,klm,li,mn->n", *arrays.values())
    root = contracts[-1]
    np.testing.assert_allclose(vals[root[0]], expected)
    # one network line, under the root: the whole network in the tree's letters
    assert [n[0] for n in contracts if n[4]] == [root[0]]
    subscripts, operands = network_line(root[4])
    assert sorted(operands) == sorted(feed)
    np.testing.assert_allclose(np.einsum(subscripts, *[feed[o] for o in operands]), expected)
    # each index keeps its letter through the tree: every letter a node reads from a child is
    # one that child produces
    out_letters = {n[0]: n[2][1:-1].split("->")[1] for n in contracts}
    for _, _, attrs, args, _ in contracts:
        ins = attrs[1:-1].split("->")[0].split(",")
        for arg, sub in zip(args, ins):
            if arg in out_letters:
                assert sub == out_letters[arg]


def test_contraction_tree_letters_with_transposed_outputs():
    # outputs in an order the permutation pass has to honour, and a leaf read twice
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 4))
    x = tl.placeholder((4, 4), name="x")
    y = tl.einsum("ij,jk,kl->li", x, x, x)
    text = tl.dump(y, optimized=True, optimize="greedy")
    vals = run_contract_lines(text, {"%0": a})
    root = [n for n in parse(text) if n[1] == "contract"][-1]
    np.testing.assert_allclose(vals[root[0]], (a @ a @ a).T)
    subscripts, operands = network_line(root[4])
    assert operands == ["%0", "%0", "%0"]
    np.testing.assert_allclose(np.einsum(subscripts, a, a, a), (a @ a @ a).T)


def test_traced_pairwise_einsums_form_a_tree_too():
    a = tl.placeholder((2, 3), name="a")
    b = tl.placeholder((3, 4), name="b")
    c = tl.placeholder((4, 5), name="c")
    y = tl.einsum("pq,qr->pr", tl.einsum("ij,jk->ik", a, b), c)
    lines = [line.split("#")[0].rstrip() for line in tl.dump(y, optimized=False).splitlines()]
    assert lines == [
        "%0 = placeholder['a']() : float64(2, 3)",
        "%1 = placeholder['b']() : float64(3, 4)",
        "%2 = einsum[ab,bc->ac](%0, %1) : float64(2, 4)",
        "%3 = placeholder['c']() : float64(4, 5)",
        "%4 = einsum[ac,cd->ad](%2, %3) : float64(2, 5)",
        GUTTER + "network ab,bc,cd->ad over %0, %1, %3: 2 pairwise contractions",
        "return %4",
    ]


def test_a_lone_contraction_has_no_network_line():
    a = tl.placeholder((3, 4), name="a")
    b = tl.placeholder((4, 5), name="b")
    text = tl.dump(a @ b, optimized=True)
    (contract,) = [n for n in parse(text) if n[1] == "contract"]
    assert contract[2] == "[ab,bc->ac]" and contract[4] == []
    assert GUTTER not in text


def test_sliced_network_shows_its_slicing_and_per_slice_tree():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((8, 8))
    x = tl.placeholder((8, 8), name="x")
    y = tl.trace(x @ x @ x @ x)
    text = tl.dump(y, optimized=True, optimize="greedy", memory_limit=8 * 8 * 8 * 2)
    (sliced,) = [n for n in parse(text) if n[1] == "sliced"]
    _, _, attrs, args, extra = sliced
    head = re.fullmatch(r"network (\S+) \((\d+) tensors\)", extra[0])
    assert head and int(head.group(2)) == len(args) == 4
    cut = re.fullmatch(
        r"sliced over (.+): (\d+) slices, each running (\d+) pairwise contr\w+", extra[1]
    )
    assert cut, extra[1]
    sizes = dict(re.fullmatch(r"(\w) \((\d+)\)", s).groups() for s in cut.group(1).split(", "))
    count = int(cut.group(2))
    assert attrs == f"[{count} slices]" and count == np.prod([int(v) for v in sizes.values()])
    steps = [re.fullmatch(r"  (s\d+) = contract\[(\S+)\] (\w+) (\w+)", s) for s in extra[2:]]
    assert all(steps) and len(steps) == int(cut.group(3)) == 3
    # run the network slice by slice from the printed lines alone
    terms = head.group(1).split("->")[0].split(",")
    total = 0.0
    for values in np.ndindex(*[int(v) for v in sizes.values()]):
        fixed = dict(zip(sizes, values))
        vals = {
            f"in{k}": a[tuple(fixed.get(c, slice(None)) for c in t)] for k, t in enumerate(terms)
        }
        for m in steps:
            vals[m.group(1)] = np.einsum(m.group(2), vals[m.group(3)], vals[m.group(4)])
        total += vals[steps[-1].group(1)]
    np.testing.assert_allclose(total, np.trace(a @ a @ a @ a))
    np.testing.assert_allclose(
        y.evaluate(feed={x: a}, optimize="greedy", memory_limit=8 * 8 * 8 * 2), total
    )


def test_sliced_reverse_sweep_says_so():
    x = tl.placeholder((8, 8), name="x")
    w = tl.placeholder((8, 8), name="w")
    # room for the sweep's flat cotangents of all four operands (2048 bytes) beside the slices
    limit = 8 * 8 * 8 * 6
    (g,) = tl.grad(tl.trace(x @ w @ x @ w), [x], optimize="greedy", memory_limit=limit)
    text = tl.dump(g, optimized=True, optimize="greedy", memory_limit=limit)
    (sliced,) = [n for n in parse(text) if n[1] == "sliced"]
    _, _, attrs, args, extra = sliced
    assert re.fullmatch(r"\[\d+ slices, reverse sweep\]", attrs)
    assert extra[0] == "network ab,bc,cd,da-> (4 tensors)" and len(args) == 5
    assert extra[-1] == (
        "reverse sweep: cotangents of in0, in1, in2, in3 (flattened, concatenated) from the "
        "output's cotangent in4"
    )


def test_sliced_forward_mode_says_so():
    x = tl.placeholder((8, 8), name="x")
    w = tl.placeholder((8, 8), name="w")
    tx = tl.placeholder((8, 8), name="tx")
    limit = 8 * 8 * 8 * 2
    t = tl.jvp(tl.trace(x @ w @ x @ w), [x], [tx], optimize="greedy", memory_limit=limit)
    text = tl.dump(t, optimized=True, optimize="greedy", memory_limit=limit)
    fwd = [n for n in parse(text) if n[1] == "sliced" and "forward mode" in n[2]]
    (sliced,) = fwd
    _, _, attrs, args, extra = sliced
    assert re.fullmatch(r"\[\d+ slices, forward mode\]", attrs)
    assert extra[0] == "network ab,bc,cd,da-> (4 tensors)" and len(args) == 6
    assert (
        extra[-1] == "forward mode: the output's tangent from the tangents in4 of in0, in5 of in2"
    )


def test_plan_dump_shows_the_same_structure():
    x = tl.placeholder((6, 6), name="x")
    y = tl.tanh(x @ x @ x) * 2.0 + 1.0
    plan = tl.compile([y], inputs=[x], optimize="greedy")

    def strip(text):
        return [line.split("#")[0].rstrip() for line in text.splitlines()]

    assert strip(plan.dump()) == strip(tl.dump(y, optimized=True, optimize="greedy"))
    ops = [n[1] for n in parse(plan.dump())]
    assert "fused" in ops and "contract" in ops
    assert any(line.startswith(GUTTER + "v0 = ") for line in plan.dump().splitlines())
    assert any(line.startswith(GUTTER + "network ") for line in plan.dump().splitlines())


def test_attrs_text_reads_anything_with_op_and_attrs():
    # visualize passes the steps of fused programs, which are not Nodes
    class Step:
        op, attrs = Op.SUM, ((1,), True)

    assert _attrs_text(Step()) == "[axes=[1], keepdims]"
    x = tl.placeholder((3, 4), name="x")
    assert _attrs_text((x @ tl.ones((4, 2))).node) == ""  # matmul: no attributes
    graph = optimized_graph(tl.exp(x) * 2.0 + x @ tl.ones((4, 4)))
    texts = {n.op: _attrs_text(n) for n in graph.order}
    assert texts[Op.CONTRACT] == "[ab,bc->ac]" and re.fullmatch(r"\[\d+ ops\]", texts[Op.FUSED])


def test_long_chains_dump_without_recursion():
    n = 100_000
    x = tl.asarray(np.full(4, 0.5))
    y = x
    for _ in range(n // 2):
        y = y * 0.999 + 0.001
    m = tl.placeholder((3, 3), name="m")
    z = m
    for _ in range(n):
        z = tl.einsum("ij,jk->ik", z, m)  # one contraction tree of 100,000 nodes
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)  # nothing may recurse per node
    try:
        fused = tl.dump(y, optimized=True, passes=("fuse_elementwise",))
        tree = tl.dump(z, optimized=False)
    finally:
        sys.setrecursionlimit(limit)
    assert sum(line.startswith(GUTTER + "v") for line in fused.splitlines()) == n
    lines = tree.splitlines()
    assert len(lines) == n + 3
    # past 52 labels the tree's indices print as numbers
    assert lines[1].startswith("%1 = einsum[[0, 1],[1, 2]->[0, 2]](%0, %0)")
    assert (
        lines[-2]
        == GUTTER + f"network of {n + 1} tensors -> [0, {n + 1}]: {n} pairwise contractions"
    )


PROGRAM = """
import numpy as np
import tenloom as tl
rng = np.random.default_rng(3)
x = tl.placeholder((8, 8), name="x")
w = tl.asarray(rng.standard_normal((8, 8)))
y = tl.trace(x @ w @ x @ w)
z = tl.tanh(x @ w @ x) * 2.0 + tl.exp(x)
print(tl.dump(y, z, optimized=False))
print("----")
print(tl.dump(y, z, optimized=True, optimize="greedy", memory_limit=8 * 8 * 8 * 4))
print(tl.dump(y, z, optimized=True, optimize="greedy"))
"""


def dump_in_subprocess(hash_seed: str) -> str:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROGRAM)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_output_is_deterministic():
    x = tl.placeholder((5, 5), name="x")
    y = tl.sin(x @ x @ x) + 1.0
    assert tl.dump(y, optimized=True) == tl.dump(y, optimized=True)
    assert dump_nodes([y.node]) == dump_nodes([y.node])
    # Separate processes place objects at other addresses: nothing may depend on id() order.
    first, second = dump_in_subprocess("0"), dump_in_subprocess("0")
    assert first == second
    assert "sliced over" in first and "| v0 = " in first and "| network " in first
    # Another string-hash seed: the traced graph's text is the same. (The optimized graph may
    # differ in the operand order of commutative ops, which the cse pass picks by hash().)
    assert dump_in_subprocess("1").split("----")[0] == first.split("----")[0]


@pytest.mark.parametrize("optimized", [False, True])
def test_every_node_has_exactly_one_line(optimized):
    x = tl.placeholder((4, 4), name="x")
    y = tl.sum(tl.exp(x @ x @ x) * x, axis=0)
    graph = optimized_graph(y) if optimized else build_graph((y,))
    nodes = parse(tl.dump(y, optimized=optimized))
    assert [n[0] for n in nodes] == [f"%{k}" for k in range(len(graph.order))]
    assert [n[1] for n in nodes] == [node.op.value for node in graph.order]
