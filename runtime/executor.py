"""The executor: runs a compiled program on one backend, in order or (threads > 1) through
the concurrent scheduler.

It takes a graph and bindings and returns arrays; it frees each intermediate after its last use
and turns any failure into an ``EvaluationError`` that names the node.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
from tenloom.graph.errors import (
    DTypeError,
    EvaluationError,
    OptionTypeError,
    ShapeError,
    fmt_shape,
)
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node
from tenloom.graph.ops import Op, as_array
from tenloom.runtime import testing
from tenloom.runtime.buffers import CURRENT
from tenloom.runtime.program import Program, compile_program, still_bound


def bind_feed(graph: Graph, feed: dict[Any, Any] | None) -> dict[int, np.ndarray]:
    """Check ``feed`` against the graph's placeholders: id(placeholder node) -> array."""
    feed = feed or {}
    by_node: dict[int, Any] = {}
    for key, value in feed.items():
        node = getattr(key, "node", key)
        if not isinstance(node, Node) or node.op is not Op.PLACEHOLDER:
            raise OptionTypeError(f"feed: key {key!r} is not a placeholder")
        by_node[id(node)] = value
    bound: dict[int, np.ndarray] = {}
    for ph in graph.placeholders:
        name = ph.attrs[0]
        if id(ph) not in by_node:
            raise EvaluationError(
                f"placeholder {name!r} {ph.dtype}{fmt_shape(ph.shape)} is not bound; "
                f"pass feed={{{name}: array}}"
            )
        arr = np.asarray(by_node[id(ph)])
        if arr.shape != ph.shape:
            raise ShapeError(
                f"feed: placeholder {name!r} has shape {fmt_shape(ph.shape)} but the array bound "
                f"to it has shape {fmt_shape(arr.shape)}"
            )
        if arr.dtype != ph.dtype:
            arr = feed_cast(by_node[id(ph)], arr, ph.dtype, name)
        bound[id(ph)] = arr
    return bound


_KIND_RANK = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}  # a weak value converts to its rank or up


def feed_cast(value: Any, arr: np.ndarray, dtype: np.dtype, name: str) -> np.ndarray:
    """``arr`` (``np.asarray(value)``) converted to a placeholder's ``dtype``, never narrowed.

    A typed value (a NumPy array or scalar, anything with a ``dtype``) converts where NumPy's
    ``can_cast(..., "safe")`` allows it: int32 into int64 or float64, a big-endian array into
    its native dtype, but not int64 into int32 or float64 into float32 (cast it yourself with
    ``astype``). Python scalars and (nested) lists are weak, as NEP 50 takes a Python scalar:
    they convert to a placeholder of their kind or a wider one (bool -> int -> float -> complex)
    when every value fits: integers exactly, floats rounding to the placeholder's precision but
    never overflowing to infinity. Anything else raises DTypeError."""
    want = f"placeholder {name!r} has dtype {dtype}"
    if hasattr(value, "dtype"):
        if not np.can_cast(arr.dtype, dtype, "safe"):
            raise DTypeError(
                f"feed: {want} but the array bound to it has dtype {arr.dtype}, which does not "
                f"convert to it safely (NumPy's casting='safe'); convert it with "
                f".astype({dtype.name!r}) if its values fit"
            )
        return arr.astype(dtype)
    if _KIND_RANK.get(arr.dtype.kind, 9) > _KIND_RANK[dtype.kind]:
        raise DTypeError(
            f"feed: {want} but the value bound to it holds {arr.dtype} values, which do not "
            f"convert to it"
        )
    with np.errstate(all="ignore"):
        out = arr.astype(dtype)
        if dtype.kind in "biu":
            ok = bool(np.all(out == arr))
        else:
            ok = bool(np.all(np.isfinite(out) | ~np.isfinite(arr)))
    if not ok:
        raise DTypeError(
            f"feed: {want} but a value bound to it does not fit {dtype} "
            f"({'out of range' if dtype.kind in 'biu' else 'overflows to infinity'})"
        )
    return out


def describe(node: Node, device: str) -> str:
    return f"{node.op.value} {node.dtype}{fmt_shape(node.shape)} on {device} at {node.where}"


def _root(arr: np.ndarray) -> np.ndarray:
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


_PROGRAMS: "weakref.WeakKeyDictionary[Graph, dict]" = weakref.WeakKeyDictionary()


def program_for(graph: Graph, backend: Any) -> Program:
    """The compiled program of ``graph`` on ``backend`` (compiled once per graph and backend)."""
    per_graph = _PROGRAMS.setdefault(graph, {})
    prog = per_graph.get(backend.kind)
    if prog is None or (prog.frozen_bound and not still_bound(prog)):
        prog = per_graph[backend.kind] = compile_program(graph, backend)
    return prog


def execute(
    graph: Graph,
    bound: dict[int, np.ndarray],
    backend: Any,
    device: str = "cpu",
    to_host: bool = True,
    threads: int = 1,
    program: Program | None = None,
) -> list[Any]:
    """Run ``graph`` and return one array per output (fresh, writable, never a leaf's memory);
    with ``to_host=False`` the backend's own arrays are returned. ``threads > 1`` runs
    independent nodes concurrently (runtime/scheduler.py). ``program`` replaces the graph's
    compiled program (e.g. one whose kernels report progress)."""
    prog = program if program is not None else program_for(graph, backend)
    leaf_roots: set[int] = set()
    if threads > 1:
        from tenloom.runtime.scheduler import run_concurrent

        vals = run_concurrent(prog, bound, backend, device, threads, leaf_roots)
        leaf_roots |= _leaf_ids(prog, bound)
    else:
        vals = _run_sequential(prog, bound, backend, device, leaf_roots)
    return _finish(graph, vals, backend, to_host, leaf_roots)


def _leaf_ids(prog: Program, bound: dict[int, Any]) -> set[int]:
    ids = set()
    for step in prog.steps:
        if step.kernel is None:
            node = step.node
            host = node.attrs[0].value if node.op is Op.CONST else bound[id(node)]
            ids.add(id(_root(host)))
    return ids


def _run_sequential(prog, bound, backend, device, leaf_roots) -> list[Any]:
    arena = prog.arena()
    token = CURRENT.set(arena)  # None too: a run nested in another never takes the outer's
    check = testing.check
    from_host = backend.from_host
    if testing.injecting():  # every node checked, constants too
        vals: list[Any] = [None] * prog.n_slots
        steps = prog.steps
    else:  # constants are in their slots already
        vals = list(prog.slots)
        leaf_roots |= prog.const_roots
        steps = prog.run_steps
    # one pass per node: this loop's own cost is the dispatch overhead of every small node
    try:
        for step in steps:
            node = step.node
            kernel = step.kernel
            try:
                check(node)
                if kernel is None:
                    const = node.op is Op.CONST
                    host = node.attrs[0].value if const else bound[id(node)]
                    value = from_host(host, const)
                    leaf_roots.add(id(_root(value)) if isinstance(value, np.ndarray) else id(value))
                else:
                    ins = step.inputs
                    if len(ins) == 2:
                        value = kernel(vals[ins[0]], vals[ins[1]])
                    elif len(ins) == 1:
                        value = kernel(vals[ins[0]])
                    else:
                        value = kernel(*[vals[i] for i in ins])
            except Exception as e:
                raise EvaluationError(f"node failed: {describe(node, device)}: {e}") from e
            vals[step.out] = value
            if arena is not None:
                for f in step.drop:
                    arena.drop(vals, f)
            for f in step.free:
                vals[f] = None
        return [vals[k] for k in prog.outputs]
    finally:
        vals.clear()
        CURRENT.reset(token)
        if arena is not None:
            prog.release(arena)


def _finish(graph: Graph, vals: list[Any], backend: Any, to_host: bool, leaf_roots: set[int]):
    """Outputs as fresh arrays: never the memory of a constant or an input, never shared
    between two outputs (``evaluate(y, y)`` gives two arrays), writable."""
    results = []
    taken = set(leaf_roots)
    for v, out in zip(vals, graph.outputs):
        if not to_host:
            v = as_array(v)
            rid = id(_root(v)) if isinstance(v, np.ndarray) else id(v)
            if rid in taken:
                v = v.copy()
                rid = id(v)
            taken.add(rid)
            results.append(v)
            continue
        arr = np.asarray(backend.to_host(v))
        if arr.dtype != out.dtype:
            arr = arr.astype(out.dtype)
        if not arr.flags.writeable or id(_root(arr)) in taken:
            arr = arr.copy()
        taken.add(id(_root(arr)))
        results.append(arr)
    return results
