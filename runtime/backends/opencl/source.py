"""OpenCL C source for the OpenCL backend's kernels other than elementwise ones (those are
runtime/codegen/opencl.py's, whose loads, stores, casts and op expressions these build on):
strided copies and accumulations, reductions, a tiled GEMM and the identity; and the stride
arithmetic that feeds every kernel.

Kernels take shapes and strides at run time (a small ``long`` metadata buffer), so one program
serves every shape of a given rank and dtype; the backend caches built programs by source.
"""

from __future__ import annotations

import numpy as np
from tenloom.graph.ops import Op
from tenloom.runtime.codegen.opencl import (
    BOOL,
    COMPUTE,
    STORAGE,
    cast,
    emit,
    kernel_text,
    load,
    store,
    zero,
)

# element types that move bytes in copies (no arithmetic, so no fp64 needed)
BYTES_TYPE = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong", 16: "ulong2"}


# ---- index arithmetic -------------------------------------------------------------------------


def c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, n = [], 1
    for s in reversed(shape):
        out.append(n)
        n *= s
    return tuple(reversed(out))


def collapse(sizes: list[int], *strides: list[int]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours that are contiguous in every stride list."""
    keep = [d for d, n in enumerate(sizes) if n != 1]
    sz = [sizes[d] for d in keep]
    st = [[s[d] for d in keep] for s in strides]
    d = len(sz) - 2
    while d >= 0:
        if all(s[d] == s[d + 1] * sz[d + 1] for s in st):
            sz[d] *= sz.pop(d + 1)
            for s in st:
                s[d] = s.pop(d + 1)
        d -= 1
    return sz, st


def broadcast_strides(shape, out_shape) -> list[int]:
    """Element strides of a C-contiguous array of ``shape`` broadcast to ``out_shape``."""
    st = c_strides(tuple(shape))
    lead = len(out_shape) - len(shape)
    return [0 if d < lead or shape[d - lead] == 1 else st[d - lead] for d in range(len(out_shape))]


def eye_source(dt: np.dtype, fp64: bool) -> str:
    """``eye(out, m, k, n)``: out[i, j] = (j - i == k)."""
    params = [f"__global {STORAGE[dt.name]} *out", "const long m", "const long k", "const long n"]
    body = [
        "const long o = get_global_id(0);",
        "if (o >= n) return;",
        "const int one = (int)((o % m) - (o / m) == k);",
        store(dt, "out", "o", cast("one", BOOL, dt)),
    ]
    return kernel_text(fp64, "eye", params, body)


# ---- strided copies (movement ops) --------------------------------------------------------------


def copy_source(itemsize: int, ndim: int, dst_contiguous: bool) -> str:
    """``copy(dst, src, meta, n, src_base, dst_base)``: for every index of a shape of ``ndim``
    dims (sizes in meta[0:ndim]), dst[dst_base + idx.dst_strides] = src[src_base +
    idx.src_strides] (src strides in meta[ndim:2ndim], dst strides in meta[2ndim:3ndim]).
    Moves bytes, so it is the same for every dtype of one size."""
    t = BYTES_TYPE[itemsize]
    params = [
        f"__global {t} *dst",
        f"__global const {t} *src",
        "__global const long *meta",
        "const long n",
        "const long src_base",
        "const long dst_base",
    ]
    body = ["const long o = get_global_id(0);", "if (o >= n) return;"]
    body.append("long s = src_base, d = dst_base, r = o, i;")
    for dim in reversed(range(ndim)):
        body.append(f"i = r % meta[{dim}]; r /= meta[{dim}]; s += i * meta[{ndim + dim}];")
        if not dst_contiguous:
            body.append(f"d += i * meta[{2 * ndim + dim}];")
    body.append("dst[d] = src[s];" if not dst_contiguous else "dst[dst_base + o] = src[s];")
    return kernel_text(False, "copy", params, body)


def accumulate_source(acc_dtype: np.dtype, part_dtype: np.dtype, ndim: int, fp64: bool) -> str:
    """``acc(dst, part, meta, n, dst_base)``: dst[dst_base + idx . strides] += part[idx] for
    every index of a shape of ``ndim`` dims (sizes in meta[0:ndim], dst strides after them);
    ``part`` is contiguous. A slice's part added into its place in the sliced result."""
    params = [
        f"__global {STORAGE[acc_dtype.name]} *dst",
        f"__global const {STORAGE[part_dtype.name]} *part",
        "__global const long *meta",
        "const long n",
        "const long dst_base",
    ]
    body = ["const long o = get_global_id(0);", "if (o >= n) return;"]
    body.append("long d = dst_base, r = o, i;")
    for dim in reversed(range(ndim)):
        body.append(f"i = r % meta[{dim}]; r /= meta[{dim}]; d += i * meta[{ndim + dim}];")
    ct = COMPUTE[acc_dtype.name]
    body.append(f"const {ct} a = {load(acc_dtype, 'dst', 'd')};")
    body.append(f"const {ct} p = {cast(load(part_dtype, 'part', 'o'), part_dtype, acc_dtype)};")
    total = emit(Op.ADD, (), [("a", acc_dtype), ("p", acc_dtype)], acc_dtype)
    body.append(store(acc_dtype, "dst", "d", total))
    return kernel_text(fp64, "acc", params, body)


# ---- reductions ---------------------------------------------------------------------------------

REDUCE_OPS = {"add": Op.ADD, "mul": Op.MUL, "max": Op.MAXIMUM, "min": Op.MINIMUM}


def reduce_source(
    in_dtype: np.dtype, acc_dtype: np.dtype, out_dtype: np.dtype, how: str, n_out_dims: int,
    n_red_dims: int, fp64: bool,
) -> str:  # fmt: skip
    """``red(out, x, meta, n_out, n_red, parts, chunk, base)``: work-item g computes output
    ``g / parts`` over the reduced indices ``[p * chunk, min(n_red, (p + 1) * chunk))`` with
    ``p = g % parts``, in order, so results do not depend on scheduling. Input element
    offsets: base + out index . out strides + reduced index . reduced strides; meta holds the
    out sizes, out strides, reduced sizes, reduced strides. Values are combined in the
    compute type of ``acc_dtype`` (float for float16) and stored as ``out_dtype``."""
    params = [
        f"__global {STORAGE[out_dtype.name]} *out",
        f"__global const {STORAGE[in_dtype.name]} *x",
        "__global const long *meta",
        "const long n_out",
        "const long n_red",
        "const long parts",
        "const long chunk",
        "const long base",
    ]
    no, nr = n_out_dims, n_red_dims
    body = ["const long g = get_global_id(0);", "if (g >= n_out * parts) return;"]
    body.append("const long o = g / parts, p = g - o * parts;")
    body.append("long off = base, q = o, i;")
    for d in reversed(range(no)):
        body.append(f"i = q % meta[{d}]; q /= meta[{d}]; off += i * meta[{no + d}];")
    body.append("const long r0 = p * chunk, r1 = min(n_red, r0 + chunk);")
    ct = COMPUTE[acc_dtype.name]

    def at(r: str) -> list[str]:
        lines = [f"long ro = 0, rq = {r};"]
        for d in reversed(range(nr)):
            s, t = 2 * no + d, 2 * no + nr + d
            lines.append(f"i = rq % meta[{s}]; rq /= meta[{s}]; ro += i * meta[{t}];")
        return lines

    body.append("if (r0 >= r1) return;")
    body.append("{")
    body += at("r0")
    body.append(f"{ct} acc = {cast(load(in_dtype, 'x', 'off + ro'), in_dtype, acc_dtype)};")
    body.append("for (long r = r0 + 1; r < r1; ++r) {")
    body += at("r")
    v = cast(load(in_dtype, "x", "off + ro"), in_dtype, acc_dtype)
    body.append(f"const {ct} v = {v};")
    body.append(
        f"acc = {emit(REDUCE_OPS[how], (), [('acc', acc_dtype), ('v', acc_dtype)], acc_dtype)};"
    )
    body.append("}")
    body.append(store(out_dtype, "out", "g", cast("acc", acc_dtype, out_dtype)))
    body.append("}")
    return kernel_text(fp64, "red", params, body)


# ---- GEMM ---------------------------------------------------------------------------------------


def gemm_source(dt: np.dtype, trans_a: bool, trans_b: bool, tile: int, fp64: bool) -> str:
    """``gemm(A, B, C, M, N, K)``: C[b] = op(A[b]) @ op(B[b]) for b = get_global_id(2), with
    A stored [M, K] (or [K, M] when ``trans_a``), B [K, N] (or [N, K]), C [M, N], all
    row-major and contiguous per batch. Square tiles in local memory; every output sums its
    products in the same order, so results are deterministic. Accumulates in the compute
    type (float for float16)."""
    st, ct = STORAGE[dt.name], COMPUTE[dt.name]
    acc_dt = np.dtype("float32") if dt.name == "float16" else dt
    a_at = load(dt, "A", "ka * M + i" if trans_a else "i * K + ka")
    b_at = load(dt, "B", "j * K + kb" if trans_b else "kb * N + j")
    zero_dt = zero(dt)
    muladd = emit(
        Op.ADD,
        (),
        [("acc", acc_dt), (emit(Op.MUL, (), [("As[ti][kk]", dt), ("Bs[kk][tj]", dt)], dt), dt)],
        acc_dt,
    )
    params = [
        f"__global const {st} *A",
        f"__global const {st} *B",
        f"__global {st} *C",
        "const long M",
        "const long N",
        "const long K",
    ]
    body = [
        "const int tj = get_local_id(0), ti = get_local_id(1);",
        f"const long j = get_group_id(0) * {tile} + tj, i = get_group_id(1) * {tile} + ti;",
        "const long b = get_global_id(2);",
        "A += b * M * K; B += b * K * N; C += b * M * N;",
        f"__local {ct} As[{tile}][{tile + 1}];",
        f"__local {ct} Bs[{tile}][{tile + 1}];",
        f"{COMPUTE[acc_dt.name]} acc = {zero(acc_dt)};",
        f"for (long k0 = 0; k0 < K; k0 += {tile}) {{",
        "  const long ka = k0 + tj, kb = k0 + ti;",
        f"  As[ti][tj] = (i < M && ka < K) ? {a_at} : {zero_dt};",
        f"  Bs[ti][tj] = (kb < K && j < N) ? {b_at} : {zero_dt};",
        "  barrier(CLK_LOCAL_MEM_FENCE);",
        f"  for (int kk = 0; kk < {tile}; ++kk) acc = {muladd};",
        "  barrier(CLK_LOCAL_MEM_FENCE);",
        "}",
        f"if (i < M && j < N) {{ {store(dt, 'C', 'i * N + j', cast('acc', acc_dt, dt))} }}",
    ]
    attr = f"__attribute__((reqd_work_group_size({tile}, {tile}, 1))) "
    return kernel_text(fp64, "gemm", params, body, attr)
