"""The NumPy dialect: a fused region as a generated Python function calling NumPy's ufuncs in
a straight line (the CPU's smallest regions, and each chunk of its big ones).

    def fused(in0, in1):            def chunk(x0, x1, s0, o):
        v0 = f0(in0, in1)               f0(x0, x1, out=s0)
        v1 = f1(v0)                     f1(s0, out=o)
        return v1

The source is built from our own op table (never from user strings); each step's function is
bound by name in the namespace, so the body is a straight line of calls.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from tenloom.graph.ops import OPS, Op
from tenloom.graph.ops.elementwise import BINARY, UNARY

# A region over BIG_REGION elements or more may take BIG_MAX_OPS ops with any number of inputs
# on the CPU: its chunked kernel (runtime/backends/cpu_fused.py) has none of numexpr's limits
BIG_REGION = 2048
BIG_MAX_OPS = 4096


def steps_function(program: tuple) -> Callable:
    """Generate ``def fused(in0, in1, ...)`` running the program's ops through NumPy, each
    step's ufunc (or, for ops with attributes, its registered reference) in turn."""
    n_inputs = 1 + max(
        (i for _, _, args in program for kind, i in args if kind == "in"), default=-1
    )
    namespace: dict = {}
    lines = [f"def fused({', '.join(f'in{i}' for i in range(n_inputs))}):"]
    # each step's value is deleted after its last use: a region of 2000 steps on 1.6 MB
    # arrays otherwise held every one of them until it returned (3.1 GB)
    last = {i: j for j, (_, _, args) in enumerate(program) for kind, i in args if kind == "step"}
    dead: dict[int, list[int]] = {}
    for i, j in last.items():
        dead.setdefault(j, []).append(i)
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
        if dead.get(j):
            lines.append(f"    del {', '.join(f'v{i}' for i in sorted(dead[j]))}")
    lines.append(f"    return v{len(program) - 1}")
    exec("\n".join(lines), namespace)  # noqa: S102 - our own generated code
    return namespace["fused"]


def chunk_function(program: tuple, n_inputs: int) -> Callable:
    """Generate ``def chunk(x0.., s0.., o)``: the program on one chunk, every step writing with
    ``out=`` into its scratch buffer ``s<j>`` (the last one into ``o``); where is two copies.
    The ops must be ufuncs or WHERE (np.real and np.imag are functions: no ``out=``)."""
    final = len(program) - 1
    ns: dict = {"copyto": np.copyto}
    body = []
    for j, (op, _, args) in enumerate(program):
        argv = [f"x{i}" if kind == "in" else f"s{i}" for kind, i in args]
        dst = "o" if j == final else f"s{j}"
        if op is Op.WHERE:
            body.append(f"    copyto({dst}, {argv[2]})")
            body.append(f"    copyto({dst}, {argv[1]}, where={argv[0]})")
        else:
            ns[f"f{j}"] = UNARY.get(op) or BINARY[op]
            body.append(f"    f{j}({', '.join(argv)}, out={dst})")
    params = [f"x{i}" for i in range(n_inputs)] + [f"s{j}" for j in range(final)] + ["o"]
    src = f"def chunk({', '.join(params)}):\n" + "\n".join(body)
    exec(src, ns)  # noqa: S102 - generated from our own op table, never from user strings
    return ns["chunk"]
