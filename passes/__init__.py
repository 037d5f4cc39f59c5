"""Graph rewrites. Each pass is a pure ``Graph -> Graph`` in its own module; every pipeline is a
tuple below, read top to bottom: the default one, and the three that run parts of it elsewhere
(before differentiating, inside one slice, lowering a device's einsums).
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tenloom.graph.graph import Graph
from tenloom.graph.node import pin_source, unpin_source
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
from tenloom.passes.options import Options
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

# Before differentiating (tl.grad, vjp, jvp; tenloom/autodiff.py): up to the contraction order,
# so that the sweeps follow each network's tree; layout and fusion come after differentiation,
# when the gradient is evaluated with the default pipeline.
PRE_GRAD: tuple[str, ...] = (
    "canonicalize",
    "merge_contractions",
    "prereduce",
    "cse",
    "contraction_order",
)

# The network of one slice of a SLICED node (runtime/sliced.py), once per node: its pairwise
# tree is fixed already, so only the clean-up, layout and fusion passes.
SLICE_PIPELINE: tuple[str, ...] = (
    "simplify",
    "cse",
    "eliminate_permutations",
    "fuse_elementwise",
)

# Device lowering (the OpenCL backend): a many-operand EINSUM seen with passes off becomes
# pairwise CONTRACTs and one-operand einsums (with optimize="greedy").
LOWERING_PIPELINE: tuple[str, ...] = (
    "canonicalize",
    "prereduce",
    "contraction_order",
    "eliminate_permutations",
)


def run_pipeline(
    graph: Graph,
    names: Sequence[str] | None = None,
    options: Options | Mapping[str, Any] | None = None,
    verify: bool = False,
    on_pass: Callable[[str, Graph], None] | None = None,
) -> tuple[Graph, PassContext]:
    """Run the named passes (default: the full pipeline) in order; returns (graph, context).

    ``options``: the record the passes read (a dict of option names is turned into one,
    ``Options.of``). ``verify`` re-checks every node after each pass; ``on_pass(name, graph)``
    sees each result. Not cached: runtime/session.py ``optimize`` is the cached entry point.
    """
    names = DEFAULT_PIPELINE if names is None else tuple(names)
    verify = verify or VERIFY
    passes = [(n, get_pass(n)) for n in names]
    ctx = PassContext(Options.of(options), {})
    with gc_paused():
        for name, fn in passes:
            graph = _run_pass(fn, graph, ctx)
            if verify:
                from tenloom.passes.verify import verify_graph

                verify_graph(graph, after=name)
            if on_pass is not None:
                on_pass(name, graph)
    return graph, ctx


def _run_pass(fn: Callable, graph: Graph, ctx: PassContext) -> Graph:
    """One pass; a pass of tenloom's own makes its nodes through tenloom's frames only, so
    their source (the user's frame that called into tenloom) is found once (``pin_source``)
    rather than by a walk of the stack per node (a TEBD energy's passes make 700). A pass
    registered from elsewhere has its nodes' source found as the builders find it."""
    if not getattr(fn, "__module__", "").startswith("tenloom."):
        return fn(graph, ctx)
    token = pin_source()
    try:
        return fn(graph, ctx)
    finally:
        unpin_source(token)


_GC_LOCK = threading.Lock()
_GC_HOLDS = [0]  # runs inside gc_paused now, over all threads


@contextlib.contextmanager
def gc_paused():
    """Python's cyclic garbage collector off while the passes (or a program's compilation)
    run, back on after the last one leaves: they allocate tens of thousands of short-lived,
    acyclic objects, and the collections that triggered took 15% of a first evaluate of many
    small networks (a TEBD energy: 15 of 100 ms). Where the user has turned the collector off
    it stays off."""
    with _GC_LOCK:
        if _GC_HOLDS[0] == 0 and not gc.isenabled():
            owned = False
        else:
            owned = True
            _GC_HOLDS[0] += 1
            gc.disable()
    try:
        yield
    finally:
        if owned:
            with _GC_LOCK:
                _GC_HOLDS[0] -= 1
                if _GC_HOLDS[0] == 0:
                    gc.enable()


__all__ = [
    "DEFAULT_PIPELINE",
    "LOWERING_PIPELINE",
    "PASSES",
    "PRE_GRAD",
    "SLICE_PIPELINE",
    "gc_paused",
    "Options",
    "PassContext",
    "register_pass",
    "run_pipeline",
]
