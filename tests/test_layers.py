"""The layer rule (docs/architecture.md): graph <- passes <- runtime <- tenloom.

A module imports only from its own layer or the layers below it, at module level or inside a
function alike, and no exception is listed here. graph/ is the pure IR: besides the layer rule it
knows nothing of timing or threads, and nothing of the front end's Tensor.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

import tenloom
import tenloom.graph
import tenloom.passes
import tenloom.runtime

LAYERS = {"graph": 0, "passes": 1, "runtime": 2, "tenloom": 3}
ROOTS = {
    "graph": pathlib.Path(tenloom.graph.__file__).parent,
    "passes": pathlib.Path(tenloom.passes.__file__).parent,
    "runtime": pathlib.Path(tenloom.runtime.__file__).parent,
    "tenloom": pathlib.Path(tenloom.__file__).parent,
}
# graph/ is the IR: no clocks, no threads, no kernel tuning
IR_FORBIDDEN = {"time", "threading", "concurrent", "multiprocessing", "asyncio"}


def sources() -> list[tuple[str, str, pathlib.Path]]:
    """(layer, dotted module name, path) of every module of the package."""
    out = []
    for layer, root in ROOTS.items():
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).with_suffix("").parts
            if layer == "tenloom" and rel and rel[0] in ("graph", "passes", "runtime"):
                continue  # a source checkout nests nothing, an installed one might
            parts = [] if layer == "tenloom" else [layer]
            parts += [p for p in rel if p != "__init__"]
            out.append((layer, ".".join(["tenloom", *parts]), path))
    return out


def layer_of(module: str) -> int | None:
    """The layer of an imported module (None: not tenloom's)."""
    parts = module.split(".")
    if parts[0] != "tenloom":
        return None
    if len(parts) > 1 and parts[1] in ("graph", "passes", "runtime"):
        return LAYERS[parts[1]]
    return LAYERS["tenloom"]


def imports(path: pathlib.Path, module: str) -> list[tuple[str, int]]:
    """Every module ``path`` imports, anywhere in the file (functions included), with its
    line: ``import a.b``, ``from a import b`` (as a.b too: b may be a module), relative
    imports resolved, and ``importlib.import_module("...")`` with a literal name."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((target, node.lineno))
            found += [(f"{target}.{a.name}", node.lineno) for a in node.names]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.args[0].value, node.lineno))
    return found


def test_sources_are_found():
    names = {m for _, m, _ in sources()}
    for expected in ("tenloom.graph.node", "tenloom.passes", "tenloom.runtime.evaluate", "tenloom"):
        assert expected in names


@pytest.mark.parametrize("layer,module,path", sources(), ids=lambda x: str(x))
def test_no_module_imports_a_higher_layer(layer, module, path):
    mine = LAYERS[layer]
    bad = []
    for target, line in imports(path, module):
        if target == "tenloom" and layer != "tenloom":
            bad.append(f"line {line}: import tenloom (the front end)")
            continue
        theirs = layer_of(target)
        if theirs is not None and theirs > mine:
            bad.append(f"line {line}: {target}")
    assert not bad, f"{module} ({layer}) imports a higher layer:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "layer,module,path", [s for s in sources() if s[0] == "graph"], ids=lambda x: str(x)
)
def test_the_ir_is_pure(layer, module, path):
    bad = [
        f"line {line}: {target}"
        for target, line in imports(path, module)
        if target.split(".")[0] in IR_FORBIDDEN
    ]
    tree = ast.parse(path.read_text())
    bad += [
        f"line {n.lineno}: refers to Tensor"
        for n in ast.walk(tree)
        if (isinstance(n, ast.Name) and n.id == "Tensor")
        or (isinstance(n, ast.Attribute) and n.attr == "Tensor")
    ]
    assert not bad, f"{module} is not pure IR:\n" + "\n".join(bad)


def test_the_checker_sees_a_lazy_upward_import(tmp_path):
    """The rule holds inside functions too: a late import is an import."""
    src = tmp_path / "mod.py"
    src.write_text(
        "def f():\n"
        "    from tenloom.runtime.evaluate import evaluate\n"
        "    from .. import visualize\n"
        "    import importlib\n"
        "    return importlib.import_module('tenloom.passes')\n"
    )
    found = {t for t, _ in imports(src, "tenloom.graph.mod")}
    assert "tenloom.runtime.evaluate" in found
    assert "tenloom.visualize" in found
    assert "tenloom.passes" in found
    assert layer_of("tenloom.visualize") == 3 and layer_of("tenloom.graph.node") == 0
