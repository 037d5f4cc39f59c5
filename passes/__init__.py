"""Graph rewrites. Each pass is a pure ``Graph -> Graph`` in its own module; the default pipeline
is the tuple below, read top to bottom.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from tenloom.graph.graph import Graph
from tenloom.passes import (  # noqa: F401  (each module registers its pass)
    canonicalize,
    contraction_order,
    cse,
    eliminate_permutations,
    fuse_elementwise,
    merge_contractions,
    prereduce,
    simplify,
)
from tenloom.passes.registry import PASSES, PassContext, get_pass, register_pass

# Check every node's shape/dtype rule after every pass (tests turn this on; so does the
# environment variable TENLOOM_VERIFY=1).
VERIFY = os.environ.get("TENLOOM_VERIFY") == "1"

# The default pipeline, top to bottom.
DEFAULT_PIPELINE: tuple[str, ...] = (
    "simplify",  # fold uniform constants, drop identities
    "canonicalize",  # matmul/tensordot/trace/diagonal/transpose/sum/products -> einsum
    "merge_contractions",  # einsum of einsum -> one n-ary network
    "prereduce",  # diagonals and lone indices first
    "cse",  # a + b and b + a become one node
    "contraction_order",  # n-ary network -> pairwise tree (cotengra)
    "eliminate_permutations",  # pairwise einsum -> copy-free GEMM layout
    "fuse_elementwise",  # elementwise regions -> one kernel (numexpr on CPU)
)


def run_pipeline(
    graph: Graph,
    names: Sequence[str] | None = None,
    options: dict[str, Any] | None = None,
    verify: bool = False,
    on_pass: Callable[[str, Graph], None] | None = None,
) -> tuple[Graph, PassContext]:
    """Run the named passes (default: the full pipeline) in order; returns (graph, context).

    ``verify`` re-checks every node after each pass; ``on_pass(name, graph)`` sees each result.
    """
    names = DEFAULT_PIPELINE if names is None else tuple(names)
    verify = verify or VERIFY
    passes = [(n, get_pass(n)) for n in names]
    ctx = PassContext(dict(options or {}), {})
    for name, fn in passes:
        graph = fn(graph, ctx)
        if verify:
            from tenloom.passes.verify import verify_graph

            verify_graph(graph, after=name)
        if on_pass is not None:
            on_pass(name, graph)
    return graph, ctx


__all__ = ["DEFAULT_PIPELINE", "PASSES", "PassContext", "register_pass", "run_pipeline"]
