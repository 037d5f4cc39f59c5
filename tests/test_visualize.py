"""tl.visualize: the DOT structure of graph and tree drawings, rendering, Jupyter reprs, limits.

Structure is checked on the DOT text (``Digraph.source``), which needs only the graphviz Python
package; rendering needs graphviz's ``dot`` program. Outside CI either missing skips those
tests; under CI=true (``.ci/run`` installs both) a missing one fails.
"""

from __future__ import annotations

import ast
import os
import re
import shutil

import numpy as np
import pytest
from tenloom.graph.ops import Op, OpKind
from tenloom.passes.cost import node_flops
from tenloom.runtime.evaluate import build_graph, optimize_graph

import tenloom as tl

IN_CI = os.environ.get("CI") == "true"

try:
    import graphviz  # noqa: F401
except ImportError as e:
    if IN_CI:
        raise ImportError(
            "CI=true: the graphviz package is required: pip install -e '.[test]'"
        ) from e
    pytest.skip("graphviz Python package not installed", allow_module_level=True)

from tenloom.visualize import (  # noqa: E402
    CPU_COLOR,
    KIND_COLORS,
    GraphvizMissingError,
    VisualizeError,
    contraction_trees,
    fmt_bytes,
    fmt_flops,
    repr_svg,
)

needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None and not IN_CI,
    reason="graphviz's dot program not installed (apt-get install graphviz)",
)

NODE = re.compile(r'^\t*(\S+) \[label="((?:[^"\\]|\\.)*)"(.*)\]$', re.M)
EDGE = re.compile(r'^\t*(\S+) -> (\S+) \[label="([^"]*)"\]$', re.M)
GREEDY = {"optimize": "greedy"}


def nodes(source: str, pattern: str = r"n\d+") -> dict[str, tuple[str, str]]:
    """DOT node id -> (label, other attributes), for ids matching ``pattern`` in full."""
    return {
        m.group(1): (m.group(2), m.group(3))
        for m in NODE.finditer(source)
        if re.fullmatch(pattern, m.group(1))
    }


def edges(source: str) -> list[tuple[str, str, str]]:
    return [m.groups() for m in EDGE.finditer(source)]


def rng_array(rng, *shape):
    return tl.asarray(rng.standard_normal(shape))


@pytest.fixture
def fused_graph():
    """exp(a * b + 1) > 0.5 next to a matmul: one fused region and one contraction."""
    rng = np.random.default_rng(0)
    a, b, c = rng_array(rng, 3, 4), rng_array(rng, 4), rng_array(rng, 4, 5)
    return (tl.exp(a * b + 1.0) > 0.5), (a @ c)


def chain_network(n: int, seed: int = 0):
    """A matrix chain of n operands whose indices all have different sizes (2, 3, ...)."""
    rng = np.random.default_rng(seed)
    sizes = list(range(2, n + 3))
    letters = "abcdefghijklmnopqrstuvwxyz"
    ops = [rng_array(rng, sizes[i], sizes[i + 1]) for i in range(n)]
    terms = [letters[i] + letters[i + 1] for i in range(n)]
    eq = ",".join(terms) + "->" + letters[0] + letters[n]
    return tl.einsum(eq, *ops), dict(zip(letters, sizes))


# ---- graph view ----------------------------------------------------------------------------


def test_one_dot_node_per_graph_node_with_op_shape_dtype(fused_graph):
    graph = build_graph(fused_graph)
    dot = tl.visualize(list(fused_graph), optimized=False)
    drawn = nodes(dot.source)
    assert len(drawn) == len(graph)
    for k, node in enumerate(graph.order):
        label, _ = drawn[f"n{k}"]
        assert label.startswith(f"%{k} {node.op.value}")
        assert f"{node.dtype.name}{node.shape}" in label


def test_edges_carry_bytes_of_the_producer(fused_graph):
    graph = build_graph(fused_graph)
    dot = tl.visualize(list(fused_graph), optimized=False)
    drawn = edges(dot.source)
    assert len(drawn) == sum(len(n.inputs) for n in graph.order)
    index = {id(n): k for k, n in enumerate(graph.order)}
    expected = sorted(
        (f"n{index[id(x)]}", f"n{k}", fmt_bytes(x.nbytes))
        for k, n in enumerate(graph.order)
        for x in n.inputs
    )
    assert sorted(drawn) == expected
    assert any(label == "96 B" for _, _, label in drawn)  # the (3, 4) float64 operand


def test_nodes_coloured_by_op_kind_and_device(fused_graph):
    dot = tl.visualize(fused_graph[1], optimized=False)
    drawn = nodes(dot.source)
    assert f'fillcolor="{KIND_COLORS[OpKind.LEAF]}"' in drawn["n0"][1]
    assert f'fillcolor="{KIND_COLORS[OpKind.CONTRACTION]}"' in drawn["n2"][1]
    assert all(f'color="{CPU_COLOR}"' in attrs for _, attrs in drawn.values())
    assert "@ " not in dot.source  # CPU only: no device line in the labels
    gpu = tl.visualize(fused_graph[1], optimized=False, device="cuda:0")
    drawn = nodes(gpu.source)
    assert all("@ cuda:0" in label for label, _ in drawn.values())
    assert all(f'color="{CPU_COLOR}"' not in attrs for _, attrs in drawn.values())
    assert ">cuda:0</td>" in gpu.source  # the legend
    # per-node placement through a function
    mixed = tl.visualize(
        fused_graph[1], optimized=False, device=lambda n: "cuda:1" if n.inputs else "cpu"
    )
    drawn = nodes(mixed.source)
    assert "@ cpu" in drawn["n0"][0] and "@ cuda:1" in drawn["n2"][0]


def test_fused_regions_are_clusters_of_their_steps(fused_graph):
    optimized = optimize_graph(build_graph(fused_graph), {})
    fused = [k for k, n in enumerate(optimized.order) if n.op is Op.FUSED]
    assert len(fused) == 1
    (k,) = fused
    program = optimized.order[k].attrs[0]
    dot = tl.visualize(list(fused_graph))
    src = dot.source
    # one DOT node per node of the optimized graph, plus one per step of the fused program
    assert len(nodes(src)) == len(optimized)
    steps = nodes(src, rf"n{k}_s\d+")
    assert len(steps) == len(program)
    assert [label.split("\\n")[0] for label, _ in steps.values()] == [
        op.value for op, _, _ in program
    ]
    block = src[src.index(f"subgraph cluster_fused{k} {{") :]
    block = block[: block.index("\n\t}")]
    for name in [*steps, f"n{k}"]:
        assert f"\t{name} [label=" in block
    assert "fused region" in block
    # the region's inputs are read by the steps that use them; the last step gives its value
    assert (f"n{k}_s{len(program) - 1}", f"n{k}", fmt_bytes(optimized.order[k].nbytes)) in (
        edges(src)
    )
    assert "96 B" in {label for tail, head, label in edges(src) if head == f"n{k}_s0"}


def test_side_by_side_has_two_clusters(fused_graph):
    traced = build_graph(fused_graph)
    optimized = optimize_graph(traced, {})
    src = tl.visualize(list(fused_graph), optimized="both").source
    assert "subgraph cluster_unoptimized {" in src and "subgraph cluster_optimized {" in src
    assert len(nodes(src, r"u_n\d+")) == len(traced)
    assert len(nodes(src, r"o_n\d+")) == len(optimized)
    assert f"unoptimized: {len(traced)} nodes" in src
    assert "subgraph cluster_o_fused" in src  # nested inside the optimized cluster


def test_plan_draws_its_compiled_graph():
    x = tl.placeholder((4, 5), name="x")
    w = tl.asarray(np.ones((5, 6)))
    plan = tl.compile([tl.tanh(x @ w).sum()], inputs=[x])
    assert len(nodes(tl.visualize(plan).source)) == len(plan.optimized)
    assert len(nodes(tl.visualize(plan, optimized=False).source)) == len(plan.graph)
    assert "'x'" in tl.visualize(plan, optimized=False).source  # the placeholder's name


# ---- contraction-tree view -----------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 6])
def test_tree_has_n_leaves_and_n_minus_1_contractions(n):
    t, sizes = chain_network(n)
    src = tl.visualize(t, what="tree", **GREEDY).source
    assert src.count("subgraph cluster_tree") == 1
    internal = nodes(src, r"t0_c\d+")
    leaves = nodes(src, r"t0_l\d+")
    assert len(internal) == n - 1
    assert len(leaves) == n
    assert sum("peripheries=2" in attrs for _, attrs in internal.values()) == 1  # the root
    # one edge into each internal node per operand, each with bytes
    assert len(edges(src)) == 2 * (n - 1)
    assert all(label.endswith(" B") for _, _, label in edges(src))


def test_tree_labels_are_consistent_across_the_tree():
    """Each pairwise node numbers its own labels; the drawing names an index the same way
    everywhere, so a letter always has one size."""
    t, _ = chain_network(6)
    graph = optimize_graph(build_graph((t,)), GREEDY)
    (tree,) = contraction_trees(graph)
    src = tl.visualize(t, what="tree", **GREEDY).source
    size_of: dict[str, int] = {}
    for label, _ in nodes(src, r"t0_l\d+").values():
        _, letters, typed = label.split("\\n")
        shape = ast.literal_eval(typed[typed.index("(") :])  # "float64(2, 3)" -> (2, 3)
        for letter, size in zip(letters, shape):
            assert size_of.setdefault(letter, size) == size
    assert len(size_of) == 7  # 7 distinct indices in a chain of 6 matrices
    # internal nodes: their subscripts and flops
    index = {id(n): k for k, n in enumerate(graph.order)}
    internal = nodes(src, r"t0_c\d+")
    for node in tree:
        label, _ = internal[f"t0_c{index[id(node)]}"]
        assert "->" in label and fmt_flops(node_flops(node)) in label
    root_label = internal[f"t0_c{index[id(tree[0])]}"][0]
    assert root_label.split("\\n")[1].endswith("->ab") and "output" in root_label


def test_tree_of_the_demo_network():
    from tenloom.cli.demo import expectation_lazy, make_workload

    mps, mpo = make_workload(3, 4)
    src = tl.visualize(expectation_lazy(mps, mpo), what="tree", **GREEDY).source
    # 3 sites x (A, W, conj A) plus the initial environment: 10 tensors, 9 contractions
    assert len(nodes(src, r"t0_l\d+")) == 10
    assert len(nodes(src, r"t0_c\d+")) == 9


def test_tree_of_a_sliced_network():
    """With memory_limit the order pass emits one SLICED node; its per-slice tree is drawn."""
    rng = np.random.default_rng(0)
    bonds = {}  # a closed 3 x 3 lattice of bond dimension 4
    args: list = []
    for i in range(3):
        for j in range(3):
            nbrs = [(i + di, j + dj) for di, dj in ((-1, 0), (1, 0), (0, -1), (0, 1))]
            labels = [
                bonds.setdefault(tuple(sorted([(i, j), nb])), len(bonds))
                for nb in nbrs
                if 0 <= nb[0] < 3 and 0 <= nb[1] < 3
            ]
            args += [tl.asarray(rng.standard_normal((4,) * len(labels))), labels]
    t = tl.einsum(*args, [])
    opts = {"memory_limit": 2000, **GREEDY}
    graph = optimize_graph(build_graph((t,)), opts)
    (k,) = [k for k, n in enumerate(graph.order) if n.op is Op.SLICED]
    src = tl.visualize(t, what="tree", **opts).source
    assert f"sliced network %{k}: 9 tensors" in src
    assert len(nodes(src, rf"t0_c{k}_\d+")) == 8
    leaves = nodes(src, r"t0_l\d+")
    assert len(leaves) == 9 and all("per slice" in label for label, _ in leaves.values())
    assert "slices]" in nodes(tl.visualize(t, **opts).source)[f"n{k}"][0]


def test_tree_needs_contractions_and_the_optimized_graph():
    x = tl.asarray(np.ones(3))
    with pytest.raises(VisualizeError, match="no pairwise contractions"):
        tl.visualize(tl.exp(x), what="tree")
    t, _ = chain_network(3)
    with pytest.raises(VisualizeError, match="optimized=True"):
        tl.visualize(t, what="tree", optimized=False)


# ---- files, Jupyter, limits ----------------------------------------------------------------


@needs_dot
@pytest.mark.parametrize(
    "suffix, magic", [(".svg", (b"<?xml", b"<svg")), (".png", (b"\x89PNG",)), (".pdf", (b"%PDF",))]
)
def test_render_formats(tmp_path, fused_graph, suffix, magic):
    path = tmp_path / f"g{suffix}"
    tl.visualize(list(fused_graph), path)
    assert path.read_bytes().startswith(magic)
    tree = tmp_path / f"tree{suffix}"
    tl.visualize(chain_network(4)[0], str(tree), what="tree", **GREEDY)
    assert tree.read_bytes().startswith(magic)


def test_dot_source_needs_no_dot_program(tmp_path, fused_graph, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` on the PATH
    dot = tl.visualize(list(fused_graph), tmp_path / "g.dot", optimized="both")
    assert (tmp_path / "g.dot").read_text() == dot.source
    tl.visualize(list(fused_graph), tmp_path / "g.gv")
    assert (tmp_path / "g.gv").read_text().startswith("digraph tenloom {")
    with pytest.raises(GraphvizMissingError, match="apt-get install graphviz"):
        tl.visualize(list(fused_graph), tmp_path / "g.svg")
    assert not (tmp_path / "g.svg").exists()
    assert repr_svg(fused_graph[0]) is None  # Jupyter falls back to the text repr


@needs_dot
def test_repr_svg_of_tensor_and_plan():
    x = tl.placeholder((3,), name="x")
    y = tl.exp(x) * 2.0
    svg = y._repr_svg_()
    assert svg is not None, "no SVG (is graphviz's dot installed?)"
    assert svg.lstrip().startswith(("<?xml", "<svg")) and "</svg>" in svg
    assert "placeholder" in svg
    plan = tl.compile([y], inputs=[x])
    svg = plan._repr_svg_()
    assert svg is not None
    assert svg.lstrip().startswith(("<?xml", "<svg")) and "fused" in svg


def test_size_cap(monkeypatch):
    x = tl.asarray(np.ones(2))
    y = x
    for _ in range(2100):  # traced chain of 2101 nodes
        y = y + 1.0
    with pytest.raises(VisualizeError, match=r"max_nodes=2000.*tl\.dump") as info:
        tl.visualize(y, optimized=False)
    assert isinstance(info.value, tl.TenloomError)
    assert repr_svg(y) is None  # too big for Jupyter: the text repr instead
    with pytest.raises(VisualizeError, match="max_nodes=10"):
        tl.visualize(chain_network(6)[0], what="tree", max_nodes=10, **GREEDY)


def test_invalid_arguments(tmp_path, fused_graph):
    with pytest.raises(VisualizeError, match=r"unknown suffix '\.jpg'; valid suffixes: \.svg"):
        tl.visualize(fused_graph[0], tmp_path / "g.jpg")
    with pytest.raises(VisualizeError, match="unknown suffix ''"):
        tl.visualize(fused_graph[0], tmp_path / "g")
    with pytest.raises(VisualizeError, match="optimized='yes'"):
        tl.visualize(fused_graph[0], optimized="yes")
    with pytest.raises(VisualizeError, match="what='forest'"):
        tl.visualize(fused_graph[0], what="forest")
    with pytest.raises(TypeError, match="unknown option 'colour'"):
        tl.visualize(fused_graph[0], colour="red")
    assert not list(tmp_path.iterdir())


@needs_dot
def test_user_text_is_escaped(tmp_path):
    x = tl.placeholder((3,), name='a"b\\c<d>&')
    tl.visualize(tl.exp(x), tmp_path / "g.svg", optimized=False)  # dot parses the labels
    svg = (tmp_path / "g.svg").read_text()
    assert "placeholder[&#39;a&quot;b\\\\c&lt;d&gt;&amp;&#39;]" in svg


def test_tree_with_more_labels_than_letters():
    rng = np.random.default_rng(0)
    args: list = []
    for i in range(60):  # an open chain with 61 indices
        args += [tl.asarray(rng.standard_normal((2, 2))), [i, i + 1]]
    src = tl.visualize(tl.einsum(*args, [0, 60]), what="tree", **GREEDY).source
    assert len(nodes(src, r"t0_c\d+")) == 59
    assert "->[0, 1]" in src  # labels as lists once letters run out
