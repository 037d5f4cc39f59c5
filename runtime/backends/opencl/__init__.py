"""The OpenCL backend, on pyopencl: PoCL on CPUs (what CI runs), GPU drivers, Apple GPUs.

Every op runs as an OpenCL kernel; the source comes from ``source`` (elementwise kernels from
runtime/codegen/opencl.py) and built programs are cached by source, so one program serves every
node with the same op, dtypes and rank:

- pairwise CONTRACT: the operands' own layouts are used where the GEMM can read them
  (``A[batch, left, contracted]`` or transposed, likewise B; an output ordered
  ``batch, right, left`` is computed as the transposed product); other layouts are copied
  once by a permutation kernel. The GEMM is CLBlast's (``pyclblast``, strided-batched) for
  float32/float64/complex64/complex128 when pyclblast imports and the product has at least
  ``CLBLAST_MIN_MACS`` multiply-adds; otherwise -- and always for bool, integers and
  float16 -- a tiled local-memory GEMM of our own.
- elementwise ops and fused elementwise regions: one generated kernel per program, with
  broadcasting by strides; NumPy's dtype rules (see runtime/codegen/opencl.py).
- reductions (sum/prod/max/min), traces and one-operand einsums (diagonals, partial traces):
  one strided reduction kernel, split in two passes when few outputs reduce many elements;
  every output sums in a fixed order, so results are deterministic.
- movement (transpose, broadcast_to, slice, diagonal, concatenate): one strided-copy kernel
  per element size and rank; reshape is a view; LAYOUT passes values unchanged (arrays here
  are always in C order of their own axes).
- matmul, tensordot and many-operand einsum, which only reach a backend when passes are
  switched off, run as the same GEMM kernels (einsum after the lowering passes: canonicalize,
  prereduce, contraction_order, eliminate_permutations).
- SLICED (``memory_limit``): the per-slice network compiled once, slices gathered, run and
  added in place one after another on the device; ``threads=``, several devices and Dask do
  not spread OpenCL slices (runtime/sliced.py's runner works on array views).

The op-by-op assembly is in ``ops``. No op falls back to NumPy on the host. Device
arrays are ``pyopencl.array.Array`` (C-contiguous, offset 0). Each scheduler worker drives its
own in-order command queue; values crossing queues are ordered by marker events. Memory comes
straight from ``clCreateBuffer`` (a pool could hand a buffer to another queue while a kernel
still reads it), and ``memory_stats`` reports the bytes in use and the high-water mark.

Supported dtypes: bool, int8 to int64, uint8 to uint64 (OpenCL's char/short/int/long and
their unsigned types), float16, float32, float64, complex64, complex128;
float64 and complex128 only on devices with ``cl_khr_fp64`` (most Apple GPUs have none): there
they raise DTypeError. float16 needs no extension (it is stored as half and computed in float).
"""

from __future__ import annotations

import math
import threading
import weakref
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
from tenloom.graph.dtypes import SUPPORTED
from tenloom.graph.errors import DeviceError, DTypeError
from tenloom.graph.node import Node
from tenloom.graph.ops import OPS, Op, OpKind
from tenloom.graph.ops.leaf import is_frozen
from tenloom.runtime.backends.base import BackendBase
from tenloom.runtime.backends.opencl import source as src
from tenloom.runtime.backends.opencl.ops import HANDLERS
from tenloom.runtime.codegen import PORTABLE
from tenloom.runtime.codegen import opencl as ew

try:
    import pyclblast
except ImportError:  # the tiled GEMM kernel of our own runs instead
    pyclblast = None

USE_CLBLAST = True  # tests switch it off to exercise the fallback GEMM on every dtype
CLBLAST_DTYPES = frozenset(np.dtype(n) for n in ("float32", "float64", "complex64", "complex128"))
# Smaller GEMMs (multiply-adds, all batches) run on our own kernel: below about 40^3 it is
# faster than CLBlast's call overhead (PoCL, 2 cores: 23 vs 46 us at 4^3, 28 vs 38 at 32^3,
# 132 vs 49 at 64^3), and it spares building CLBlast's programs (seconds each on PoCL) for
# networks of small tensors.
CLBLAST_MIN_MACS = 1 << 16
FP64 = frozenset(np.dtype(n) for n in ("float64", "complex128"))
# reductions with fewer outputs than this and more elements per output than SPLIT_MIN run in
# two passes: partial results over chunks, then the chunks
SPLIT_OUTPUTS = 256
SPLIT_MIN = 8192


def _devices() -> list[Any]:
    try:
        platforms = cl.get_platforms()
    except cl.Error:  # no ICD or no platform
        return []
    return [d for p in platforms for d in p.get_devices()]


def list_devices() -> list[tuple[int, str, int]]:
    """(index, name, total memory) of every OpenCL device, platform by platform."""
    return [
        (i, f"{d.name.strip()} ({d.platform.name.strip()})", int(d.global_mem_size))
        for i, d in enumerate(_devices())
    ]


class _Buffer(cl.Buffer):
    """A buffer that can be weakly referenced (to count the bytes in use)."""

    __slots__ = ("__weakref__",)


class _Stream:
    """A worker's command queue; ``with stream:`` makes it the thread's current queue."""

    __slots__ = ("backend", "queue", "_prev")

    def __init__(self, backend: Backend, queue: Any):
        self.backend, self.queue, self._prev = backend, queue, None

    def __enter__(self) -> _Stream:
        self._prev = getattr(self.backend._tls, "queue", None)
        self.backend._tls.queue = self.queue
        return self

    def __exit__(self, *exc: Any) -> None:
        self.backend._tls.queue = self._prev


def _elementwise_op(be: Backend, node: Node):
    args = tuple(("in", k) for k in range(len(node.inputs)))
    run = be._elementwise(node, ((node.op, node.attrs, args),))
    if node.op is Op.POW and node.dtype.kind == "i":  # never fused (fuse_elementwise)
        return be._no_negative_powers(run)
    return run


def _fused(be: Backend, node: Node):
    return be._elementwise(node, node.attrs.program)


def _reduction(be: Backend, node: Node):
    return be._reduction(node)


class Backend(BackendBase):
    """One OpenCL device (see the module docstring). ``KERNELS``: every elementwise op one
    generated kernel, every reduction one strided reduction, the rest ``ops.HANDLERS``."""

    shares_host_memory = False
    streams = True
    fusion = PORTABLE
    KERNELS = {
        **HANDLERS,
        **{op: _reduction for op in Op if OPS[op].kind is OpKind.REDUCE},
        **{op: _elementwise_op for op in Op if OPS[op].kind is OpKind.ELEMENTWISE},
        Op.FUSED: _fused,
    }

    def __init__(self, kind: str = "opencl", index: int = 0):
        devices = _devices()
        if not 0 <= index < len(devices):
            raise DeviceError(
                f"{kind}:{index} does not exist; {len(devices)} OpenCL device(s) present"
            )
        self.kind = f"{kind}:{index}"
        self.device = devices[index]
        self.context = cl.Context([self.device])
        self.queue = cl.CommandQueue(self.context)
        self.fp64 = "cl_khr_fp64" in self.device.extensions
        self.dtypes = tuple(d for d in SUPPORTED if self.fp64 or d not in FP64)
        self.tile = 16 if self.device.max_work_group_size >= 256 else 8
        self._tls = threading.local()
        # worker queues of runs not yet synchronized (held, so none is released unfinished)
        self._streams: list[_Stream] = []
        self._streams_lock = threading.Lock()
        self._programs: dict[str, Any] = {}  # built programs by source
        self._sources: dict[tuple, str] = {}  # elementwise sources by program and dtypes
        self._build_lock = threading.Lock()
        self._launch_lock = threading.Lock()
        self._mem_lock = threading.Lock()
        self._used = self._peak = 0
        self._consts: dict[int, tuple[weakref.ref, Any]] = {}

    def caches(self) -> dict[str, list[dict]]:
        return {"constants": [self._consts], "kernels": [self._programs, self._sources]}

    # ---- memory ----------------------------------------------------------------------------------

    def _alloc(self, nbytes: int) -> _Buffer:
        try:
            buf = _Buffer(self.context, cl.mem_flags.READ_WRITE, nbytes)
        except cl.MemoryError as e:
            raise MemoryError(f"{self.kind}: cannot allocate {nbytes} bytes ({e})") from e
        with self._mem_lock:
            self._used += nbytes
            self._peak = max(self._peak, self._used)
        weakref.finalize(buf, self._release, nbytes)
        return buf

    def _release(self, nbytes: int) -> None:
        with self._mem_lock:
            self._used -= nbytes

    def memory_stats(self) -> dict[str, int]:
        with self._mem_lock:
            used, peak = self._used, self._peak
        return {
            "used_bytes": used,
            "peak_bytes": peak,
            "total_bytes": int(self.device.global_mem_size),
        }

    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> cla.Array:
        return cla.Array(self._queue(), shape, dtype, allocator=self._alloc)

    def zeros(self, shape: tuple[int, ...], dtype: np.dtype) -> cla.Array:
        out = self.empty(shape, dtype)
        self.fill(out, 0)
        return out

    # ---- data movement ---------------------------------------------------------------------------
    def _check_dtype(self, dt: np.dtype, what: str) -> None:
        if dt in FP64 and not self.fp64:
            names = ", ".join(d.name for d in self.dtypes)
            raise DTypeError(
                f"{self.kind} ({self.device.name.strip()}) has no double precision "
                f"(cl_khr_fp64): {what} needs {dt}; supported dtypes are {names}"
            )

    def from_host(self, array: np.ndarray, constant: bool = False) -> cla.Array:
        """Device copy of a host array; frozen constants (graph/ops/leaf.py ``is_frozen``) are
        copied once and reused, others every time (their values may have changed in place
        since)."""
        array = np.asarray(array)
        self._check_dtype(array.dtype, "an input")
        if not constant or not is_frozen(array):
            return self._upload(array)
        key = id(array)
        hit = self._consts.get(key)
        if hit is not None and hit[0]() is array:
            return hit[1]
        dev = self._upload(array)
        try:
            ref = weakref.ref(array, lambda _r, k=key: self._consts.pop(k, None))
            self._consts[key] = (ref, dev)
        except TypeError:  # not weak-referenceable: no caching
            pass
        return dev

    def _upload(self, array: np.ndarray) -> cla.Array:
        host = array if array.flags.c_contiguous else np.array(array, order="C")
        out = self.empty(host.shape, host.dtype)
        if host.size:
            cl.enqueue_copy(self._queue(), out.data, host, is_blocking=True)
        return out

    def to_host(self, array: cla.Array) -> np.ndarray:
        return array.get(queue=self._queue())

    # ---- queues and events -----------------------------------------------------------------------
    def _queue(self) -> Any:
        return getattr(self._tls, "queue", None) or self.queue

    def worker_stream(self) -> _Stream:
        stream = _Stream(self, cl.CommandQueue(self.context))
        with self._streams_lock:
            self._streams.append(stream)
        return stream

    def record_event(self, stream: _Stream) -> Any:
        return cl.enqueue_marker(stream.queue)

    def wait_event(self, stream: _Stream, event: Any) -> None:
        if event is not None:
            cl.enqueue_barrier(stream.queue, wait_for=[event])

    def synchronize(self) -> None:
        """Wait for the default queue and every worker queue handed out so far."""
        with self._streams_lock:
            streams, self._streams = self._streams, []
        for stream in streams:
            stream.queue.finish()
        self.queue.finish()

    # ---- programs and launches -------------------------------------------------------------------
    def kernel_from_source(self, source: str, name: str) -> Any:
        """A fresh kernel object (one per node) from the program built for ``source``."""
        with self._build_lock:
            prg = self._programs.get(source)
            if prg is None:
                try:
                    prg = cl.Program(self.context, source).build()
                except cl.Error as e:
                    raise DeviceError(
                        f"{self.kind}: the OpenCL compiler of {self.device.name.strip()} "
                        f"failed to build a kernel: {e}"
                    ) from e
                self._programs[source] = prg
        return cl.Kernel(prg, name)

    def launch(self, kernel: Any, gsize: tuple, lsize: tuple | None, *args: Any) -> None:
        """Enqueue ``kernel`` on the thread's queue. One-dimensional launches are rounded up to
        a multiple of 64 work-items (every kernel here returns early past its count), so that
        the driver can pick full work-groups for any count (OpenCL 1.2 needs the global size to
        be a multiple of the local one)."""
        if lsize is None and len(gsize) == 1:
            gsize = (-(-gsize[0] // 64) * 64,)
        queue = self._queue()
        with self._launch_lock:  # setting a kernel's arguments and enqueueing is one step
            kernel(queue, gsize, lsize, *args)

    def _meta(self, values: list[int]) -> Any:
        host = np.array(values or [0], dtype=np.int64)
        return cl.Buffer(
            self.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=host
        )

    def fill(self, out: cla.Array, value: Any) -> None:
        if out.size:
            pattern = np.array(value, dtype=out.dtype)
            cl.enqueue_fill_buffer(self._queue(), out.data, pattern, 0, out.nbytes)

    # ---- kernels ---------------------------------------------------------------------------------
    def _no_negative_powers(self, run):
        """``run`` refusing a negative exponent, as NumPy's integer power does (the kernel
        itself would give 0 silently): the exponent is read back and checked on each call
        (exponents are mostly scalars; pyopencl's own reductions would need Mako)."""

        def checked(a, b):
            if b.size and (self.to_host(b) < 0).any():
                raise ValueError("Integers to negative integer powers are not allowed.")
            return run(a, b)

        return checked

    def kernel(self, node: Node):
        """A callable ``f(*device_arrays) -> device_array`` for ``node``, prepared once (its
        dtypes checked against the device first)."""
        for dt in (node.dtype, *(i.dtype for i in node.inputs)):
            self._check_dtype(dt, f"{node.op.value} at {node.where}")
        return super().kernel(node)

    # elementwise ----------------------------------------------------------------------------------
    def _elementwise(self, node: Node, program: tuple):
        ins = node.inputs
        return self.ew_kernel(
            program, [i.shape for i in ins], [i.dtype for i in ins], node.shape, node.dtype
        )

    def ew_kernel(self, program, in_shapes, in_dtypes, out_shape, out_dtype):
        """``run(*xs)`` computing an elementwise program in one generated kernel."""
        specs = [ew.Spec(s, d) for s, d in zip(in_shapes, in_dtypes)]
        step_dts = ew.step_dtypes(program, specs)
        for dt in step_dts:
            self._check_dtype(dt, "an elementwise step")
        n = math.prod(out_shape)
        modes, strided = [], []
        for shape in in_shapes:
            if tuple(shape) == tuple(out_shape):
                modes.append("flat")
            elif math.prod(shape) == 1:
                modes.append("scalar")
            else:
                modes.append("strided")
                strided.append(src.broadcast_strides(shape, out_shape))
        sizes, strides = src.collapse(list(out_shape), src.c_strides(out_shape), *strided)
        meta = self._meta(sizes + [s for st in strides[1:] for s in st]) if strided else None
        key = (program, tuple(in_dtypes), tuple(modes), np.dtype(out_dtype), len(sizes))
        source = self._sources.get(key)
        if source is None:
            source = self._sources[key] = ew.elementwise_source(
                program, list(in_dtypes), modes, np.dtype(out_dtype), step_dts, len(sizes),
                self.fp64,
            )  # fmt: skip
        knl = self.kernel_from_source(source, "ew")
        meta = meta if meta is not None else self._meta([])
        count = np.int64(n)

        def run(*xs):
            out = self.empty(out_shape, out_dtype)
            if n:
                self.launch(knl, (n,), None, out.data, *[x.data for x in xs], meta, count)
            return out

        return run

    def cast_kernel(self, shape: tuple[int, ...], src_dt: np.dtype, dst_dt: np.dtype):
        program = ((Op.CAST, (np.dtype(dst_dt).str,), (("in", 0),)),)
        return self.ew_kernel(program, [shape], [np.dtype(src_dt)], shape, np.dtype(dst_dt))

    # copies ---------------------------------------------------------------------------------------
    def copier(self, itemsize, shape, src_strides, src_base=0, dst_strides=None, dst_base=0):
        """``copy(dst, src)``: for each index of ``shape``, dst[dst_base + idx . dst_strides]
        = src[src_base + idx . src_strides] (dst strides default to C order)."""
        n = math.prod(shape)
        contiguous = dst_strides is None
        lists = [list(src_strides), list(dst_strides or src.c_strides(shape))]
        sizes, (s_st, d_st) = src.collapse(list(shape), *lists)
        if len(sizes) <= 1 and (not sizes or (s_st[0] == 1 and d_st[0] == 1)):
            # one contiguous run: a plain buffer copy
            def run_plain(dst, x, src_base=src_base, dst_base=dst_base):
                if n:
                    cl.enqueue_copy(
                        self._queue(), dst.data, x.data, byte_count=n * itemsize,
                        src_offset=src_base * itemsize, dst_offset=dst_base * itemsize,
                    )  # fmt: skip

            return run_plain
        knl = self.kernel_from_source(src.copy_source(itemsize, len(sizes), contiguous), "copy")
        meta = self._meta(sizes + s_st + ([] if contiguous else d_st))

        def run(dst, x, src_base=src_base, dst_base=dst_base):
            if n:
                args = (meta, np.int64(n), np.int64(src_base), np.int64(dst_base))
                self.launch(knl, (n,), None, dst.data, x.data, *args)

        return run

    def gather_kernel(self, out_shape, dtype, src_strides, src_base=0):
        """``run(x, base=src_base)``: a new array of ``out_shape`` with out[idx] =
        x[base + idx.strides]."""
        copy = self.copier(np.dtype(dtype).itemsize, tuple(out_shape), src_strides, src_base)

        def run(x, base=src_base):
            out = self.empty(out_shape, dtype)
            copy(out, x, base)
            return out

        return run

    def accumulate_kernel(self, shape, part_dtype, acc_dtype, dst_strides):
        """``run(acc, part, base)``: acc[base + idx.dst_strides] += part[idx] over ``shape``."""
        n = math.prod(shape)
        sizes, (_, d_st) = src.collapse(list(shape), list(src.c_strides(shape)), list(dst_strides))
        source = src.accumulate_source(
            np.dtype(acc_dtype), np.dtype(part_dtype), len(sizes), self.fp64
        )
        knl = self.kernel_from_source(source, "acc")
        meta = self._meta(sizes + d_st)

        def run(acc, part, base):
            if n:
                self.launch(knl, (n,), None, acc.data, part.data, meta, np.int64(n), np.int64(base))

        return run

    def permute_kernel(self, shape, dtype, perm):
        """``run(x)``: x of ``shape`` transposed by ``perm`` (None when perm is the identity)."""
        if tuple(perm) == tuple(range(len(perm))):
            return None
        st = src.c_strides(tuple(shape))
        return self.gather_kernel(tuple(shape[p] for p in perm), dtype, [st[p] for p in perm])

    # reductions -----------------------------------------------------------------------------------
    def reduce_kernel(self, in_dtype, out_dtype, how, out_dims, red_dims, out_shape, base=0):
        """``run(x)``: out[o] = combine over r of x[base + o.out_strides + r.red_strides]
        (dims as (size, stride) pairs; ``how`` one of add, mul, max, min)."""
        in_dtype, out_dtype = np.dtype(in_dtype), np.dtype(out_dtype)
        acc = np.dtype("float32") if out_dtype.name == "float16" else out_dtype
        n_out = math.prod(s for s, _ in out_dims)
        n_red = math.prod(s for s, _ in red_dims)
        if n_out == 0 or n_red == 0:
            # max and min of nothing are refused at trace time; sums and products are 0 and 1
            identity = {"add": 0, "mul": 1}.get(how)

            def run_empty(x):
                out = self.empty(out_shape, out_dtype)
                if n_out:
                    self.fill(out, identity)
                return out

            return run_empty
        o_sz, (o_st,) = src.collapse([s for s, _ in out_dims], [t for _, t in out_dims])
        r_sz, (r_st,) = src.collapse([s for s, _ in red_dims], [t for _, t in red_dims])
        parts = 1
        if n_out < SPLIT_OUTPUTS and n_red >= SPLIT_MIN:
            parts = min(1024, math.ceil(n_red / 2048))
        chunk = math.ceil(n_red / parts)
        parts = math.ceil(n_red / chunk)
        stage1_out = out_dtype if parts == 1 else acc
        source = src.reduce_source(in_dtype, acc, stage1_out, how, len(o_sz), len(r_sz), self.fp64)
        k1 = self.kernel_from_source(source, "red")
        m1 = self._meta(o_sz + o_st + r_sz + r_st)
        a1 = (m1, np.int64(n_out), np.int64(n_red), np.int64(parts), np.int64(chunk))
        a1 += (np.int64(base),)
        if parts > 1:
            source2 = src.reduce_source(acc, acc, out_dtype, how, 1, 1, self.fp64)
            k2 = self.kernel_from_source(source2, "red")
            m2 = self._meta([n_out, parts, parts, 1])
            a2 = (m2, np.int64(n_out), np.int64(parts), np.int64(1), np.int64(parts))
            a2 += (np.int64(0),)

        def run(x):
            out = self.empty(out_shape, out_dtype)
            if parts == 1:
                self.launch(k1, (n_out,), None, out.data, x.data, *a1)
                return out
            partial = self.empty((n_out * parts,), acc)
            self.launch(k1, (n_out * parts,), None, partial.data, x.data, *a1)
            self.launch(k2, (n_out,), None, out.data, partial.data, *a2)
            return out

        return run

    def _reduction(self, node: Node):
        (x,) = node.inputs
        axes, _keepdims = node.attrs
        st = src.c_strides(x.shape)
        dims = list(zip(x.shape, st))
        out_dims = [d for i, d in enumerate(dims) if i not in axes]
        red_dims = [d for i, d in enumerate(dims) if i in axes]
        how = {Op.SUM: "add", Op.PROD: "mul", Op.MAX: "max", Op.MIN: "min"}[node.op]
        return self.reduce_kernel(x.dtype, node.dtype, how, out_dims, red_dims, node.shape)

    # GEMM -----------------------------------------------------------------------------------------
    def gemm_kernel(self, dtype, nb, m, n, k, trans_a=False, trans_b=False):
        """``run(A, B, C)``: C[b] = op(A[b]) @ op(B[b]) for contiguous row-major arrays of
        ``nb`` batches; A is [m, k] ([k, m] when ``trans_a``), B [k, n] ([n, k]), C [m, n]."""
        dtype = np.dtype(dtype)
        big = nb * m * n * k >= CLBLAST_MIN_MACS
        if USE_CLBLAST and big and pyclblast is not None and dtype in CLBLAST_DTYPES:
            a_rows, a_cols = (k, m) if trans_a else (m, k)
            b_rows, b_cols = (n, k) if trans_b else (k, n)
            flags = {"a_transp": trans_a, "b_transp": trans_b}

            def run_clblast(a, b, c):
                q = self._queue()
                a2 = a.reshape((nb * a_rows, a_cols))
                b2 = b.reshape((nb * b_rows, b_cols))
                c2 = c.reshape((nb * m, n))
                if nb == 1:
                    pyclblast.gemm(q, m, n, k, a2, b2, c2, a_cols, b_cols, n, **flags)
                else:
                    pyclblast.gemmStridedBatched(
                        q, m, n, k, nb, a2, b2, c2, a_cols, b_cols, n, m * k, k * n, m * n,
                        **flags,
                    )  # fmt: skip

            return run_clblast
        t = self.tile
        knl = self.kernel_from_source(
            src.gemm_source(dtype, trans_a, trans_b, t, self.fp64), "gemm"
        )
        gsize = (math.ceil(n / t) * t, math.ceil(m / t) * t, nb)
        sizes = (np.int64(m), np.int64(n), np.int64(k))

        def run(a, b, c):
            self.launch(knl, gsize, (t, t, 1), a.data, b.data, c.data, *sizes)

        return run

    def product_kernel(self, dtype, nb, m, n, k, trans_a, trans_b, out_shape):
        """``run(A, B)`` -> a new array of ``out_shape`` holding the batched product."""
        empty = nb * m * n == 0
        gemm = None if empty or k == 0 else self.gemm_kernel(dtype, nb, m, n, k, trans_a, trans_b)

        def run(a, b):
            c = self.empty((nb, m, n), dtype)
            if gemm is None:
                self.fill(c, 0)
            else:
                gemm(a, b, c)
            return c.reshape(out_shape)

        return run
