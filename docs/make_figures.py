"""Regenerate the figures of docs/inspection.md: the demo's optimized graph and its contraction
tree, drawn by ``tl.visualize`` (needs graphviz: ``pip install 'tenloom[viz]'`` and the ``dot``
program, e.g. ``apt-get install graphviz``).

    python docs/make_figures.py

The demo workload (``tenloom demo``, an MPS/MPO expectation value built site by site) is drawn
at a small size, 4 sites with bond dimension 4, so that the pictures stay readable; the graph's
structure is the same at any size.
"""

from __future__ import annotations

import os

import tenloom as tl
from tenloom.cli.demo import expectation_lazy, make_workload

SITES, CHI = 4, 4
HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> None:
    mps, mpo = make_workload(SITES, CHI)
    value = expectation_lazy(mps, mpo)
    for name, what in (("demo_optimized.svg", "graph"), ("demo_tree.svg", "tree")):
        path = os.path.join(HERE, name)
        tl.visualize(value, path, what=what)
        print(f"wrote {os.path.relpath(path)}")


if __name__ == "__main__":
    main()
