"""Compiled plans as users see them: ``compile``, whose ``Plan`` can also dump and draw itself;
``@function``, a Python function traced into such plans, one per (shape, dtype) signature of
its arguments; and ``load``, which gives saved graphs back as Tensors and saved plans as Plans.

The runtime's plan (runtime/plan.py) optimizes and runs; what shows a plan to a person (its
text dump, its drawing in Jupyter) is inspection, which lives up here (tenloom/dump.py,
tenloom/visualize.py), so the front end adds it in a subclass."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from tenloom import api
from tenloom.graph.errors import DTypeError
from tenloom.graph.value import Value
from tenloom.runtime import plan as plan_mod
from tenloom.runtime.executor import array_dtype
from tenloom.tensor import Tensor


class Plan(plan_mod.Plan):
    """A compiled computation: ``plan(*arrays) -> list of ndarrays`` (see ``compile``), which
    also shows itself: ``plan.dump()`` and, in Jupyter, a drawing of its optimized graph."""

    def dump(self) -> str:
        """The optimized graph as text, one line per node (as ``tl.dump``)."""
        from tenloom.dump import dump_nodes

        return dump_nodes(self.optimized.outputs)

    def _repr_svg_(self) -> str | None:
        """Jupyter: the compiled (optimized) graph as SVG; None, so that Jupyter shows the text
        repr, when graphviz or its ``dot`` program is missing or the graph is too big to draw."""
        from tenloom.visualize import repr_svg

        return repr_svg(self)


def compile(outputs: Any, inputs: Any = (), **opts: Any) -> Plan:  # noqa: A001
    """Optimize ``outputs`` once (the pass pipeline, order search included, and the backend
    program); the plan binds arrays to ``inputs`` (placeholders) in order at each call, with
    no tracing, pass or path search. Options as for ``evaluate`` except ``feed``."""
    outs = [outputs] if isinstance(outputs, Value) else list(outputs)
    return Plan(outs, list(inputs), **opts)


def function(fn: Callable | None = None, **opts: Any):
    """Decorator: trace ``fn`` on placeholders per (shape, dtype) signature, cache the plan,
    and return ``fn``'s own structure (a Tensor, tuple, list or dict of them) as ndarrays.

    Every argument becomes a placeholder of ``numpy.asarray(arg)``'s dtype: a Python scalar
    argument is a 0-d int64/float64/complex128 input, not a weak scalar (``f(float32_x, 0.5)``
    computes ``x * arg1`` in float64 where eager NumPy's ``x * 0.5`` stays float32); pass
    ``np.float32(0.5)``, or close over the Python scalar in ``fn``, to keep float32. Arrays that
    ``fn`` closes over are captured at the first trace of each signature (see ``compile``)."""

    from tenloom.runtime.options import COMPILE_OPTIONS, parse_options

    parse_options("function", opts, COMPILE_OPTIONS)  # when decorating, not at the first call

    def wrap(f: Callable):
        plans: dict[tuple, tuple[Plan, Any]] = {}

        @functools.wraps(f)
        def call(*args: Any):
            # CUDA arrays stay where they are (the plan binds them on its device; see
            # runtime/executor.py bind_feed); everything else becomes a NumPy array
            arrays = [a if hasattr(a, "__cuda_array_interface__") else np.asarray(a) for a in args]
            dts = [array_dtype(a, f"{f.__name__}: argument {i}") for i, a in enumerate(arrays)]
            sig = tuple((tuple(a.shape), dt.str) for a, dt in zip(arrays, dts))
            hit = plans.get(sig)
            if hit is None:
                plan_mod.COUNTERS["traces"] += 1
                phs = [
                    api.placeholder(tuple(a.shape), dt, name=f"arg{i}")
                    for i, (a, dt) in enumerate(zip(arrays, dts))
                ]
                out = f(*phs)
                leaves, rebuild = _flatten(out)
                hit = plans[sig] = (compile(leaves, phs, **opts), rebuild)
            plan, rebuild = hit
            return rebuild(plan(*arrays))

        call.plans = plans  # type: ignore[attr-defined]
        return call

    return wrap(fn) if fn is not None else wrap


def _flatten(out: Any) -> tuple[list, Callable[[list], Any]]:
    """Leaves (Tensors) of a nest of tuples, lists and dicts, and a function rebuilding the
    nest from their values."""
    if isinstance(out, Tensor):
        return [out], lambda vals: vals[0]
    if isinstance(out, (tuple, list, dict)):
        keys = list(out) if isinstance(out, dict) else None
        items = [out[k] for k in keys] if keys is not None else list(out)
        parts = [_flatten(item) for item in items]
        sizes = [len(leaves) for leaves, _ in parts]
        leaves = [leaf for ls, _ in parts for leaf in ls]

        def rebuild(vals: list) -> Any:
            out_items, start = [], 0
            for (_, sub), n in zip(parts, sizes):
                out_items.append(sub(vals[start : start + n]))
                start += n
            if keys is not None:
                return dict(zip(keys, out_items))
            return type(out)(out_items)

        return leaves, rebuild
    raise DTypeError(
        f"function: return Tensors in tuples, lists or dicts, not {type(out).__name__}"
    )


def load(path: str | os.PathLike) -> Any:
    """Read what ``save`` wrote: a Tensor (one output), a tuple of Tensors (several), or a Plan
    ready to call (no tracing, pass or path search). Anything malformed raises
    GraphFormatError; loading never runs code from the files and reads nothing outside the
    JSON file's folder."""
    loaded = plan_mod.load(path, Plan)
    if isinstance(loaded, Plan):
        return loaded
    outs = tuple(Tensor(n) for n in loaded)
    return outs[0] if len(outs) == 1 else outs
