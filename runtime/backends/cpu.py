"""The CPU backend: NumPy for each op's registered reference, numexpr for fused regions.

Supported dtypes: all of tenloom's (bool, int32, int64, float16, float32, float64, complex64,
complex128).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tenloom.graph.dtypes import SUPPORTED
from tenloom.graph.node import Node
from tenloom.graph.ops import OPS, Op
from tenloom.graph.ops_contract import contract_kernel
from tenloom.graph.ops_elementwise import BINARY, UNARY

SMALL = 2048  # elements; smaller fused regions run step by step in NumPy


def compile_steps(program: tuple):
    """Generate ``def fused(in0, in1, ...)`` running the program's ops through NumPy.

    The source is built from our own op table (never from user strings); each step's function
    is bound by name in the namespace, so the body is a straight line of calls.
    """
    n_inputs = 1 + max(
        (i for _, _, args in program for kind, i in args if kind == "in"), default=-1
    )
    namespace: dict = {}
    lines = [f"def fused({', '.join(f'in{i}' for i in range(n_inputs))}):"]
    for j, (op, attrs, args) in enumerate(program):
        argv = ", ".join(f"in{i}" if kind == "in" else f"v{i}" for kind, i in args)
        ufunc = UNARY.get(op) or BINARY.get(op) or (np.where if op is Op.WHERE else None)
        if ufunc is not None and not attrs:
            namespace[f"f{j}"] = ufunc
            lines.append(f"    v{j} = f{j}({argv})")
        else:
            namespace[f"f{j}"] = OPS[op].ref
            namespace[f"a{j}"] = attrs
            lines.append(f"    v{j} = f{j}(({argv},), a{j})")
    lines.append(f"    return v{len(program) - 1}")
    exec("\n".join(lines), namespace)  # noqa: S102 - our own generated code
    return namespace["fused"]


class Backend:
    kind = "cpu"
    dtypes = SUPPORTED

    def from_host(self, array: np.ndarray, constant: bool = False) -> np.ndarray:
        return array

    def to_host(self, array: np.ndarray) -> np.ndarray:
        return array

    def __init__(self) -> None:
        try:
            import numexpr
        except ImportError:  # fused regions then run step by step through NumPy
            numexpr = None
        self._ne = numexpr
        self._exprs: dict[tuple, str] = {}
        self._small: dict[tuple, object] = {}

    def kernel(self, node: Node):
        """A callable ``f(*arrays) -> array`` for ``node``, prepared once."""
        if node.op is Op.CONTRACT:
            a, b = node.inputs
            return contract_kernel(a.shape, b.shape, node.attrs)
        if node.op is Op.FUSED:
            if self._ne is not None and node.size >= SMALL:
                return lambda *xs: self._run_fused(node, xs)
            return self._small_fused(node.attrs[0])
        ref, attrs = OPS[node.op].ref, node.attrs
        return lambda *xs: ref(xs, attrs)

    def run(self, node: Node, args: Sequence[np.ndarray]) -> np.ndarray:
        """Compute ``node`` from its input arrays."""
        # numexpr's fixed cost (~20 us a call) only pays off on arrays of some size
        if node.op is Op.FUSED:
            if self._ne is not None and node.size >= SMALL:
                return self._run_fused(node, args)
            return self._small_fused(node.attrs[0])(*args)
        return OPS[node.op].ref(args, node.attrs)

    def _small_fused(self, program: tuple):
        """A Python function calling the steps' ufuncs in a row (generated once per program):
        for small arrays the per-call cost is what matters, and this has the least."""
        fn = self._small.get(program)
        if fn is None:
            fn = self._small[program] = compile_steps(program)
        return fn

    def _run_fused(self, node: Node, args: Sequence[np.ndarray]) -> np.ndarray:
        program = node.attrs[0]
        expr = self._exprs.get(program)
        if expr is None:
            from tenloom.passes.fuse_elementwise import expression

            expr = self._exprs[program] = expression(program)
        local = {f"in{i}": a for i, a in enumerate(args)}
        out = self._ne.evaluate(expr, local_dict=local, global_dict={})
        if out.shape != node.shape:  # numexpr keeps 0-d results 0-d; broadcasting is exact
            out = np.broadcast_to(out, node.shape)
        return out

    def synchronize(self) -> None:
        pass
