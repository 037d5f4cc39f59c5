"""Build the documentation site: the guides in docs/ and the API reference that mkdocstrings
generates from the docstrings, into site/ (or the ``-d`` folder given).

    pip install -e ".[docs]" && python docs/build.py

The package's sub-packages live outside tenloom/ (pyproject's ``package-dir`` maps
``tenloom.graph`` to graph/, and so on), which the source reader of mkdocstrings (griffe)
cannot follow, so this lays the package out as it is installed, in a temporary folder, and
points mkdocs at it (``TENLOOM_DOCS_SRC``, read by mkdocs.yml). The public ops are made at
import time, so their pages are written from the imported package (``op_pages``) into a copy
of docs/ (``TENLOOM_DOCS_DIR``). Warnings fail the build (``--strict``).
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


def lay_out(dest: pathlib.Path) -> None:
    """Copy the package into ``dest`` as it is installed: tenloom/ with each top-level
    sub-package of pyproject's ``package-dir`` inside it."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[tool.setuptools.package-dir]", 1)[1].split("\n[", 1)[0]
    # lines '"tenloom.graph" = "graph"' (tomllib is Python 3.11+; the project supports 3.10)
    mapping = dict(re.findall(r'^"([\w.]+)"\s*=\s*"([^"]+)"', section, re.M))
    shutil.copytree(ROOT / mapping["tenloom"], dest / "tenloom")
    for name, folder in mapping.items():
        parts = name.split(".")
        if len(parts) == 2:  # tenloom.graph -> graph/ (deeper ones come with their parent)
            shutil.copytree(ROOT / folder, dest / "tenloom" / parts[1])


# pages of functions made at import time (the public ops from their builders, tl.linalg from
# its table), which a source reader cannot see: written from the imported modules
GENERATED = {
    "api/ops.md": ("tenloom.api", "tl", "The public ops"),
    "api/linalg_ops.md": ("tenloom.linalg", "tl.linalg", "tl.linalg"),
}


def op_pages(docs: pathlib.Path) -> None:
    """Write the GENERATED pages into ``docs``: each public name's signature and docstring."""
    import importlib
    import inspect

    for page, (module, prefix, title) in GENERATED.items():
        mod = importlib.import_module(module)
        lines = [f"# {title}", "", f"Generated from `{module}` by docs/build.py.", ""]
        for name in sorted(mod.__all__):
            fn = getattr(mod, name)
            try:
                sig = str(inspect.signature(fn))
            except (TypeError, ValueError):
                sig = "(...)"
            doc = inspect.cleandoc(fn.__doc__ or "").replace("\n#", "\n\\#")
            lines += [f"## `{prefix}.{name}`", "", "```python", f"{name}{sig}", "```", "", doc, ""]
        (docs / page).write_text("\n".join(lines))


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        lay_out(pathlib.Path(tmp))
        docs = pathlib.Path(tmp) / "docs"
        shutil.copytree(ROOT / "docs", docs)
        op_pages(docs)
        env = dict(os.environ, TENLOOM_DOCS_SRC=tmp, TENLOOM_DOCS_DIR=str(docs))
        cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", *argv]
        return subprocess.call(cmd, cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
