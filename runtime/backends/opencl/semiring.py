"""SEMIRING_EINSUM on the OpenCL backend: one generated, tiled semiring GEMM per semiring,
dtype and operand kind (raw or (value, count) pair), and the steps around it on the device.

The GEMM stages square tiles of A and B in local memory (as the backend's own GEMM,
runtime/backends/opencl/source.py ``gemm_source``), each work-item combining its output's
terms in order of k, so results are deterministic:

- max_plus / min_plus / max_times (float32, float64, int32, int64): the max (min) of the terms,
  NaN sticking as in ``numpy.maximum``; integer sums and products wrap around as NumPy's
  (computed unsigned);
- log_sum_exp (float32, float64): a running maximum and the sum of the terms' exponentials
  shifted by it, rescaled when the maximum grows (one exp per term; nothing underflows, since
  the largest term counts exp(0) = 1);
- count (float64): the running (value, count) pair; raw operands count 1 per entry, 0 for an
  entry of -inf.

A pairwise network: each operand permuted (one strided copy) so that its labels of the GEMM
come first and its lone labels last, the lone labels reduced by a semiring GEMM against a
vector of the semiring's ones, the GEMM, the result permuted to the output's order. More
operands are contracted pairwise left to right (what runs when the order pass did not split
the network); one operand is a reduction (and transpose) by the same steps.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from tenloom.graph.errors import DTypeError, ShapeError
from tenloom.graph.node import Node
from tenloom.graph.ops.semiring import is_pair, one_of, zero_of
from tenloom.runtime.codegen.opencl import kernel_text

if TYPE_CHECKING:
    from tenloom.runtime.backends.opencl import Backend

_TYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "long"}
_UNSIGNED = {"int32": "uint", "int64": "ulong"}
_LOWEST = {"float32": "-INFINITY", "float64": "-INFINITY", "int32": "INT_MIN", "int64": "LONG_MIN"}
_HIGHEST = {"float32": "INFINITY", "float64": "INFINITY", "int32": "INT_MAX", "int64": "LONG_MAX"}
TILE = 16


def gemm_source(semiring: str, dt: np.dtype, a_pair: bool, b_pair: bool, tile: int, fp64: bool):
    """``sgemm(A, B, C, M, N, K)``: C[b] = the semiring sum over k of A[b, i, k] (x) B[b, k, j]
    for b = get_global_id(2), all row-major and contiguous per batch; for count, a pair operand
    stores (value, count) interleaved and C is always pairs."""
    dt = np.dtype(dt)
    counting = semiring == "count"
    t = _TYPES[dt.name]
    a_w, b_w = (2 if a_pair else 1), (2 if b_pair else 1)
    c_w = 2 if counting else 1
    params = [
        f"__global const {t} *A",
        f"__global const {t} *B",
        f"__global {t} *C",
        "const long M",
        "const long N",
        "const long K",
    ]
    body = [
        "const int tj = get_local_id(0), ti = get_local_id(1);",
        f"const long j = get_group_id(0) * {tile} + tj, i = get_group_id(1) * {tile} + ti;",
        "const long b = get_global_id(2);",
        f"A += b * M * K * {a_w}; B += b * K * N * {b_w}; C += b * M * N * {c_w};",
        f"__local {t} Av[{tile}][{tile + 1}];",
        f"__local {t} Bv[{tile}][{tile + 1}];",
    ]
    if counting:
        body += [
            f"__local double Ac[{tile}][{tile + 1}];",
            f"__local double Bc[{tile}][{tile + 1}];",
            "double v = -INFINITY, c = 0.0;",
        ]
    elif semiring == "log_sum_exp":
        body.append(f"{t} m = -INFINITY, s = 0;")
    else:
        init = _HIGHEST[dt.name] if semiring == "min_plus" else _LOWEST[dt.name]
        body.append(f"{t} acc = {init};")

    def count_of(ptr, at, value, pair):
        if pair:
            return f"{ptr}[2 * ({at}) + 1]"
        return f"(({value}) == -INFINITY ? 0.0 : 1.0)"

    a_at, b_at = "i * K + ka", "kb * N + j"
    a_val = f"A[2 * ({a_at})]" if a_pair else f"A[{a_at}]"
    b_val = f"B[2 * ({b_at})]" if b_pair else f"B[{b_at}]"
    body += [
        f"for (long k0 = 0; k0 < K; k0 += {tile}) {{",
        "  const long ka = k0 + tj, kb = k0 + ti;",
        "  if (i < M && ka < K) {",
        f"    Av[ti][tj] = {a_val};",
    ]
    if counting:
        body.append(f"    Ac[ti][tj] = {count_of('A', a_at, 'Av[ti][tj]', a_pair)};")
    body += ["  }", "  if (kb < K && j < N) {", f"    Bv[ti][tj] = {b_val};"]
    if counting:
        body.append(f"    Bc[ti][tj] = {count_of('B', b_at, 'Bv[ti][tj]', b_pair)};")
    body += [
        "  }",
        "  barrier(CLK_LOCAL_MEM_FENCE);",
        f"  const int kmax = (K - k0 < {tile}) ? (int)(K - k0) : {tile};",
        "  if (i < M && j < N) {",
        "    for (int kk = 0; kk < kmax; ++kk) {",
    ]
    if dt.name in _UNSIGNED:
        u = _UNSIGNED[dt.name]
        op = "*" if semiring == "max_times" else "+"
        term = f"({t})(({u})Av[ti][kk] {op} ({u})Bv[kk][tj])"
    else:
        term = f"Av[ti][kk] {'*' if semiring == 'max_times' else '+'} Bv[kk][tj]"
    body.append(f"      const {t} x = {term};")
    if counting:  # a NaN value stays, with count 0
        body += [
            "      const double w = Ac[ti][kk] * Bc[kk][tj];",
            "      if (v == v) {",
            "        if (x != x) { v = x; c = 0.0; }",
            "        else if (x > v) { v = x; c = w; }",
            "        else if (x == v) { c += w; }",
            "      }",
        ]
    elif semiring == "log_sum_exp":
        body += [
            "      if (m == m) {",
            "        if (x != x) m = x;",
            "        else if (x > m) { s = s * exp(m - x) + 1; m = x; }",
            "        else if (x == m) s += 1;",
            "        else s += exp(x - m);",
            "      }",
        ]
    else:
        better = "<" if semiring == "min_plus" else ">"
        nan = "x != x || " if dt.kind == "f" else ""
        body.append(f"      if ({nan}x {better} acc) acc = x;")
        if dt.kind == "f":  # a NaN accumulator stays
            body[-1] = f"      if (acc == acc && ({nan}x {better} acc)) acc = x;"
    body += [
        "    }",
        "  }",
        "  barrier(CLK_LOCAL_MEM_FENCE);",
        "}",
        "if (i >= M || j >= N) return;",
    ]
    if counting:
        body += ["C[2 * (i * N + j)] = v;", "C[2 * (i * N + j) + 1] = c;"]
    elif semiring == "log_sum_exp":
        body.append("C[i * N + j] = m + log(s);")
    else:
        body.append("C[i * N + j] = acc;")
    return kernel_text(fp64, "sgemm", params, body)


class _Operand:
    """An operand on its way to the GEMM: its labels, label shape and whether it is a pair."""

    def __init__(self, terms, shape, pair):
        self.terms, self.shape, self.pair = tuple(terms), tuple(shape), pair


def _gemm_step(be: Backend, semiring, dt, nb, m, n, k, a_pair, b_pair):
    """``run(a, b)`` -> the (nb, m, n[, 2]) semiring product of contiguous stacks."""
    counting = semiring == "count"
    shape = (nb, m, n, 2) if counting else (nb, m, n)
    empty = zero_of(semiring, dt)
    fill = [empty, 0.0] if counting else empty
    if nb * m * n == 0 or k == 0:

        def run_empty(a, b):
            c = be.empty(shape, dt)
            if c.size:
                be.fill(c, np.array(fill, dtype=dt))
            return c

        return run_empty
    source = gemm_source(semiring, dt, a_pair, b_pair, TILE, be.fp64)
    knl = be.kernel_from_source(source, "sgemm")
    gsize = (math.ceil(n / TILE) * TILE, math.ceil(m / TILE) * TILE, nb)
    sizes = (np.int64(m), np.int64(n), np.int64(k))

    def run(a, b):
        c = be.empty(shape, dt)
        be.launch(knl, gsize, (TILE, TILE, 1), a.data, b.data, c.data, *sizes)
        return c

    return run


def _permute(be: Backend, shape, dt, perm, pair):
    """A copy of an array of ``shape`` (plus a trailing pair axis) transposed by ``perm``
    (None where that is the identity)."""
    if pair:
        shape, perm = tuple(shape) + (2,), tuple(perm) + (len(perm),)
    return be.permute_kernel(tuple(shape), dt, perm)


def _prepared(be: Backend, x: _Operand, order, semiring, dt, as_pair=False):
    """``(run, pair)``: ``run(a)`` gives the operand with its labels in ``order`` (contiguous,
    a stack ready for the GEMM) and its other labels reduced by the semiring's addition; with
    ``as_pair``, a raw counting operand becomes pairs (a reduction over no labels)."""
    lone = tuple(i for i, lab in enumerate(x.terms) if lab not in order)
    perm = tuple(x.terms.index(lab) for lab in order) + lone
    move = _permute(be, x.shape, dt, perm, x.pair)
    if not lone and not (as_pair and semiring == "count" and not x.pair):
        return (move or (lambda a: a)), x.pair
    rows = math.prod(x.shape[i] for i in range(len(x.shape)) if i not in lone)
    k = math.prod(x.shape[i] for i in lone)
    gemm = _gemm_step(be, semiring, dt, 1, rows, 1, k, x.pair, False)
    unit = be.from_host(np.full((k,), one_of(semiring, dt), dt))  # uploaded once, here
    pair = x.pair or semiring == "count"

    def run(a):
        a = a if move is None else move(a)
        return gemm(a, unit)

    return run, pair


def _pair_step(be: Backend, a: _Operand, b: _Operand, out, semiring, dt):
    """``(run, pair)`` contracting two operands into labels ``out``."""
    from tenloom.runtime.kernels.semiring import PairLayout

    lay = PairLayout(a.terms, b.terms, out, a.shape, b.shape, "semiring_einsum (OpenCL)")
    a_kept = tuple(lab for i, lab in enumerate(a.terms) if i not in lay.a_only)
    b_kept = tuple(lab for i, lab in enumerate(b.terms) if i not in lay.b_only)
    a_order = a_kept if lay.perm_a is None else tuple(a_kept[p] for p in lay.perm_a)
    b_order = b_kept if lay.perm_b is None else tuple(b_kept[p] for p in lay.perm_b)
    prep_a, a_pair = _prepared(be, a, a_order, semiring, dt)
    prep_b, b_pair = _prepared(be, b, b_order, semiring, dt)
    gemm = _gemm_step(be, semiring, dt, lay.nb, lay.nl, lay.nr, lay.nk, a_pair, b_pair)
    counting = semiring == "count"
    post = None
    if lay.perm_c is not None:
        post = _permute(be, lay.c_shape, dt, lay.perm_c, counting)
    out_shape = tuple(lay.c_shape[p] for p in (lay.perm_c or range(len(lay.c_shape))))
    out_shape += (2,) if counting else ()

    def run(x, y):
        c = gemm(prep_a(x), prep_b(y))
        c = c.reshape(lay.c_shape + ((2,) if counting else ()))
        return (c if post is None else post(c)).reshape(out_shape)

    return run, counting


def semiring_kernel(be: Backend, node: Node):
    """The OpenCL kernel of one SEMIRING_EINSUM node."""
    terms, out, semiring = node.attrs
    dt = np.dtype(node.dtype)
    if dt.name not in _TYPES or (semiring == "log_sum_exp" and dt.kind != "f"):
        raise DTypeError(f"semiring_einsum ({semiring}) on OpenCL: no kernel for {dt}")
    counting = semiring == "count"
    ops = [
        _Operand(t, x.shape[: len(t)], counting and is_pair(x.shape, t))
        for x, t in zip(node.inputs, terms)
    ]
    for x in ops:
        if len(set(x.terms)) != len(x.terms):
            raise ShapeError(f"semiring_einsum (OpenCL): operand labels {x.terms} repeat a label")
    if len(ops) == 1:
        (x,) = ops
        step, _ = _prepared(be, x, tuple(out), semiring, dt, as_pair=True)
        shape = node.shape

        def run_one(a):
            return step(a).reshape(shape)

        return run_one
    steps: list[Any] = []
    cur = ops[0]
    for i, nxt in enumerate(ops[1:], start=1):
        later = {lab for o in ops[i + 1 :] for lab in o.terms} | set(out)
        keep = (
            tuple(out)
            if i == len(ops) - 1
            else tuple(dict.fromkeys(lab for lab in (*cur.terms, *nxt.terms) if lab in later))
        )
        step, pair = _pair_step(be, cur, nxt, keep, semiring, dt)
        sizes = dict(zip(cur.terms, cur.shape)) | dict(zip(nxt.terms, nxt.shape))
        steps.append(step)
        cur = _Operand(keep, tuple(sizes[lab] for lab in keep), pair)

    def run(*xs):
        acc = xs[0]
        for step, x in zip(steps, xs[1:]):
            acc = step(acc, x)
        return acc

    return run
