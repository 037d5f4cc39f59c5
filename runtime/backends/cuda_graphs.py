"""Capture and replay on CUDA: a compiled program's steps captured into CUDA graphs once and
replayed with one launch per graph (runtime/capture.py plans the segments).

    run 1          step by step (runtime/program.py ``run``): kernels compiled, caches warm
    run 2          captured: every intermediate comes from the program's own memory pool,
                   the GEMMs from a cuBLAS handle of ours (below), then launched
    runs 3, 4 ...  inputs copied into the buffers fixed at capture, one launch per captured
                   segment, steps that cannot be captured run from Python between them, the
                   outputs packed into one buffer (captured too) and copied out in one copy

**GEMMs.** CuPy refuses any cuBLAS call while a stream captures (its binding's ``setStream``
raises NotImplementedError, cupy/cupy#6290), which covers ``cupy.matmul`` and the low-level
``cupy_backends.cuda.libs.cublas`` functions alike. cuBLAS itself captures its GEMMs (its
docs, "CUDA Graphs Support") when the handle has a user workspace (``cublasSetWorkspace``: no
allocation inside the capture) and scalars in host memory. So captured contractions call
``cublasGemmStridedBatchedEx`` through ctypes on a handle of our own, one per device, with a
32 MiB workspace: the library CuPy already loaded, no new dependency, and the GEMM is the same
cuBLAS call ``cupy.matmul`` makes (only the layouts may differ: a transposed operand is passed
as a transposed GEMM operand, others are copied to C order). torch's CUDA graphs over shared
buffers would also capture cuBLAS, but torch's caching allocator would have to own the
intermediates' memory and torch is no dependency of tenloom; cuTENSOR is not installed here.

**Memory.** A captured program allocates from a ``cupy.cuda.MemoryPool`` of its own, only
while it captures: its graphs replay on the addresses they were captured with, and nothing
else ever allocates from that pool. All replays on a device go in order on one stream of
ours (the device's ``_Device``); the caller's stream waits for it, and it waits for the
caller's stream, with events.

ROCm: no capture (CuPy's HIP graphs are untested here); OpenCL and the CPU have none.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Any

import cupy as cp
import numpy as np
from tenloom.graph.errors import TenloomError
from tenloom.graph.ops import OPS, Op, OpKind
from tenloom.graph.ops.contract import contract_layout, gemm_operands
from tenloom.graph.ops.leaf import is_frozen
from tenloom.passes.caches import counter
from tenloom.runtime import capture
from tenloom.runtime.program import failure

# programs captured (each try counted), captures refused at a step, replays, captures let go
# for holding more than their budget (tests read them)
COUNTERS = counter("runtime.cuda_graphs", captures=0, refused=0, replays=0, over_budget=0)
WORKSPACE_BYTES = 32 << 20  # cuBLAS's recommendation for Hopper
_ALIGN = 256

# cuBLAS / CUDA enums (cublas_api.h, library_types.h): dtype -> (data type, compute type)
_OP_N, _OP_T = 0, 1
_TYPES = {
    np.dtype(np.float32): (0, 68, np.float32),  # CUDA_R_32F, CUBLAS_COMPUTE_32F
    np.dtype(np.float64): (1, 70, np.float64),  # CUDA_R_64F, CUBLAS_COMPUTE_64F
    np.dtype(np.complex64): (4, 68, np.complex64),  # CUDA_C_32F
    np.dtype(np.complex128): (5, 70, np.complex128),  # CUDA_C_64F
}
_SCALARS = {dt: (np.ones(1, s), np.zeros(1, s)) for dt, (_, _, s) in _TYPES.items()}


class CaptureError(TenloomError):
    """cuBLAS could not be reached for capture (its library not found, or a call failed)."""


_LIB: list = []
_LIB_LOCK = threading.Lock()


def _cublas():
    """libcublas as ctypes functions: the library CuPy's binding loaded (found in the
    process's mappings), else the soname."""
    if _LIB:
        return _LIB[0]
    with _LIB_LOCK:
        if _LIB:
            return _LIB[0]
        from tenloom.runtime.backends.cuda_libs import cublas_library

        lib, names = cublas_library()
        if lib is None:
            raise CaptureError(f"cuda_graphs: libcublas not found (tried {names})")
        p, i, ll, sz = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_size_t
        lib.cublasCreate_v2.argtypes = [ctypes.POINTER(p)]
        lib.cublasSetStream_v2.argtypes = [p, p]
        lib.cublasSetWorkspace_v2.argtypes = [p, p, sz]
        g = lib.cublasGemmStridedBatchedEx
        g.argtypes = [p, i, i, i, i, i, p, p, i, i, ll, p, i, i, ll, p, p, i, i, ll, i, i, i]
        _LIB.append(lib)
        return lib


class _Device:
    """One device's replay stream, cuBLAS handle and workspace (made once, kept)."""

    def __init__(self, device: Any) -> None:
        lib = _cublas()
        with device:
            self.stream = cp.cuda.Stream(non_blocking=True)
            self.workspace = cp.empty(WORKSPACE_BYTES, np.uint8)
            handle = ctypes.c_void_p()
            _check(lib.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate")
        self.handle = handle
        # cublasSetStream resets the workspace: both set once, for the one stream it serves
        _check(lib.cublasSetStream_v2(handle, self.stream.ptr), "cublasSetStream")
        _check(
            lib.cublasSetWorkspace_v2(handle, self.workspace.data.ptr, WORKSPACE_BYTES),
            "cublasSetWorkspace",
        )
        self.lock = threading.Lock()  # one capture or replay at a time on the stream


def _check(status: int, what: str) -> None:
    if status != 0:
        raise CaptureError(f"cuda_graphs: {what} failed with cuBLAS status {status}")


_DEVICES: dict[int, _Device] = {}
_DEVICES_LOCK = threading.Lock()


def _device(backend: Any) -> _Device:
    d = _DEVICES.get(backend.device.id)
    if d is None:
        with _DEVICES_LOCK:
            d = _DEVICES.get(backend.device.id)
            if d is None:
                d = _DEVICES[backend.device.id] = _Device(backend.device)
    return d


def _merged(shape: tuple, strides: tuple, axes: range) -> tuple[int, int] | None:
    """The size and byte stride of ``axes`` taken as one axis, or None where their memory is
    not one arithmetic progression (size-1 axes left out; no axis: size 1)."""
    kept = [k for k in axes if shape[k] != 1]
    if not kept:
        return 1, 0
    n = 1
    for a, b in zip(kept, kept[1:]):
        if strides[a] != strides[b] * shape[b]:
            return None
    for k in kept:
        n *= shape[k]
    return n, strides[kept[-1]]


def _operand(x, batch: int, rows: int):
    """How cuBLAS reads an operand grouped as (batch axes, row axes, column axes) (a view;
    ``batch`` and ``rows`` count axes): (array to keep, its address, leading dimension, batch
    stride, transposed), in elements. In place wherever each group is one progression, the
    batch stride non-negative and the rows or the columns of unit stride (a transposed read);
    else from a C-ordered copy."""
    shape, strides, item = x.shape, x.strides, x.itemsize
    n = x.ndim
    groups = [_merged(shape, strides, r) for r in (range(batch), range(batch, batch + rows))]
    groups.append(_merged(shape, strides, range(batch + rows, n)))
    if None not in groups:
        (nb, sb), (nr, sr), (nc, sc) = groups
        if nc == 1:
            sc = item
        if nr == 1:
            sr = max(nc, 1) * item if sc == item else item
        if sb >= 0 and sb % item == 0:
            if sc == item and sr % item == 0 and sr // item >= max(nc, 1):
                return x, x.data.ptr, sr // item, sb // item, False
            if sr == item and sc % item == 0 and sc // item >= max(nr, 1):
                return x, x.data.ptr, sc // item, sb // item, True
    nr = int(np.prod(shape[batch : batch + rows], dtype=np.int64))
    nc = int(np.prod(shape[batch + rows :], dtype=np.int64))
    c = cp.ascontiguousarray(x)
    return c, c.data.ptr, max(nc, 1), nr * nc, False


def contract_kernel(node: Any, dev: _Device):
    """The capturable kernel of a float or complex CONTRACT that sums over something (others:
    None, their usual kernel captures as it is): lone labels summed, operands grouped as
    A[batch, left, con] and B[batch, con, right] (graph/ops/contract.py ``contract_layout``),
    one ``cublasGemmStridedBatchedEx`` on our handle, the result in ``out``'s order."""
    a, b = node.inputs
    dt = np.dtype(node.dtype)
    g = contract_layout(node.attrs, a.shape, b.shape)
    if dt not in _TYPES or g.nk <= 1 or g.nb * g.nl * g.nr == 0:
        return None
    dtype_id, compute, _ = _TYPES[dt]
    one, zero = (s.ctypes.data for s in _SCALARS[dt])
    _, _, _, batch, left, con, _ = node.attrs
    nbat, nleft, ncon, nl, nk, nr = len(batch), len(left), len(con), g.nl, g.nk, g.nr
    perm_c = None if g.perm_c == tuple(range(len(g.perm_c))) else g.perm_c
    gemm = _cublas().cublasGemmStridedBatchedEx
    handle = dev.handle

    def run(x, y):
        x, y = gemm_operands(g, x, y, dt)
        # A[nb, nl, nk] and B[nb, nk, nr], each read in place where cuBLAS can (transposed or
        # not, any batch stride), else copied
        a_keep, a_ptr, lda, sa, at = _operand(x, nbat, nleft)
        b_keep, b_ptr, ldb, sb, bt = _operand(y, nbat, ncon)
        nb = g.nb
        c = cp.empty((nb, nl, nr), dt)
        # row-major C = A @ B is column-major C^T = B^T A^T: B goes first
        status = gemm(
            handle,
            _OP_T if bt else _OP_N,
            _OP_T if at else _OP_N,
            nr,
            nl,
            nk,
            one,
            b_ptr,
            dtype_id,
            ldb,
            sb,
            a_ptr,
            dtype_id,
            lda,
            sa,
            zero,
            c.data.ptr,
            dtype_id,
            nr,
            nl * nr,
            nb,
            compute,
            -1,
        )
        _check(status, "cublasGemmStridedBatchedEx")
        del a_keep, b_keep  # (a copy's memory goes back to the pool once the GEMM is queued)
        c = c.reshape(g.c_shape)
        return c if perm_c is None else c.transpose(perm_c)

    return run


# One launch copies every device input into its fixed buffer: a table row per input (source
# and destination addresses, elements, item size, then up to _GATHER_DIMS sizes and byte
# strides of the source); each row's elements are gathered by the blocks of its grid row.
_GATHER_DIMS = 8
_ROW = 5 + 2 * _GATHER_DIMS
_GATHER_SRC = r"""
extern "C" __global__ void tenloom_gather(const long long* table) {
    const long long* d = table + (long long)blockIdx.y * ROW;
    const char* src = (const char*)d[0];
    char* dst = (char*)d[1];
    long long n = d[2], item = d[3];
    int nd = (int)d[4];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        long long r = i, off = 0;
        for (int k = nd - 1; k >= 0; --k) {
            long long s = d[5 + k];
            off += (r % s) * d[5 + DIMS + k];
            r /= s;
        }
        const char* p = src + off;
        char* q = dst + i * item;
        switch (item) {
            case 1: *q = *p; break;
            case 2: *(short*)q = *(const short*)p; break;
            case 4: *(int*)q = *(const int*)p; break;
            case 8: *(long long*)q = *(const long long*)p; break;
            default: *(double2*)q = *(const double2*)p; break;
        }
    }
}
""".replace("ROW", str(_ROW)).replace("DIMS", str(_GATHER_DIMS))
_GATHER: list = []


def _gather_kernel():
    if not _GATHER:
        _GATHER.append(cp.RawKernel(_GATHER_SRC, "tenloom_gather"))
    return _GATHER[0]


class _Refused(Exception):
    def __init__(self, step: int, reason: str) -> None:
        self.step, self.reason = step, reason


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


_POOL_UNIT = 512  # CuPy's MemoryPool rounds every allocation up to this


def _pooled(n: int) -> int:
    return -(-n // _POOL_UNIT) * _POOL_UNIT


class Captured:
    """One program's capture: the segments, their graphs, the buffers fixed at capture."""

    def __init__(self, prog: Any, backend: Any) -> None:
        # no reference to ``prog`` (the table holding this is weakly keyed by it)
        self.steps = prog.run_steps
        self.slots = prog.slots
        self.outputs = prog.outputs
        self.backend = backend
        self.runs = 0
        self.refused: dict[int, str] = {}
        self.segments = capture.plan_segments([s.node for s in self.steps], self.refused)
        self.ready = False
        self.done = None  # event: the caller's copy of the last outputs
        self._footprint: int | None = None
        self.budget: int | None = None  # the bytes its capture may hold (None: no bound)
        # bytes a capture of it was seen to need (over a budget, or short of memory under
        # one): no budget below that captures it again
        self.needs = 0
        # why this program is never captured (None: it may be): an output that no step makes
        # (a plan's frozen constant returned as it is) has no place in the packed outputs
        made = {st.out for st in self.steps}
        self.unsupported = next(
            (f"output slot {o} is a constant of the plan" for o in self.outputs if o not in made),
            None,
        )

    def footprint(self) -> int:
        """The bytes a capture of this program is predicted to hold (runtime/capture.py
        ``BUDGET``), for a program captured whole (one segment): the inputs copied in, the
        packed outputs and the copy a call returns, the copy table, and the peak of its
        intermediates, with room at each step for a result and contiguous copies of every
        operand (as graph/ops/sliced.py ``slice_peak_bytes`` predicts a slice's). Sizes are
        rounded to CuPy's pool unit; a step that may return a view of its input (a movement
        op) holds its input's memory until both are freed. Computed once."""
        if self._footprint is not None:
            return self._footprint
        size = {st.out: _pooled(st.node.nbytes) for st in self.steps}
        leaves = {st.out for st in self.steps if st.kernel is None}
        outs = sum(size.get(o, 0) for o in self.outputs)
        root: dict[int, int] = {}  # slot -> the slot whose memory it may be a view of
        users: dict[int, int] = {}  # root -> slots alive on its memory
        live = peak = 0
        for st in self.steps:
            if st.kernel is None:
                continue
            ins = [i for i in st.inputs if i in size]
            peak = max(peak, live + 2 * size[st.out] + sum(size[i] for i in ins))
            if OPS[st.node.op].kind is OpKind.MOVEMENT and ins and ins[0] not in leaves:
                r = root.get(ins[0], ins[0])  # a view: no new memory, the base stays
            else:
                r = st.out
                live += size[st.out]
            root[st.out] = r
            users[r] = users.get(r, 0) + 1
            for f in st.free:
                if f not in size or f in leaves or f in self.outputs:
                    continue
                r = root.get(f, f)
                users[r] = users.get(r, 1) - 1
                if users[r] <= 0:
                    live -= size[r]
        table = _pooled(max(len(leaves), 1) * _ROW * 8)
        self._footprint = sum(size[k] for k in leaves) + 2 * outs + table + peak
        return self._footprint

    def held_bytes(self) -> int:
        """What this capture holds now: its pool and the copy of its outputs a call returns."""
        pool = getattr(self, "pool", None)
        if pool is None:
            return 0
        return pool.total_bytes() + sum(_pooled(nb) for _o, nb, _dt, _s in self.out_views)

    def release(self, why: str | None = None) -> None:
        """Give the capture's memory back (its graphs are never launched again): the program
        runs step by step until it is captured again, or for good with ``why`` (said by
        ``unsupported``). The caller holds the device's lock."""
        self.dev.stream.synchronize()
        if self.done is not None:  # the caller's copy out of the packed outputs
            self.done.synchronize()
        self.graphs, self.held, self.pack_graph = [], None, None
        self.in_dev = self.out_buf = self.table_dev = None
        self.in_views, self.fixed_bufs = [], {}
        self.ready, self.done = False, None
        if why is not None:
            self.unsupported = why
        pool, self.pool = getattr(self, "pool", None), None
        if pool is not None:
            with self.backend.device:
                pool.free_all_blocks()

    @property
    def worthwhile(self) -> bool:
        return self.unsupported is None and any(s.captured for s in self.segments)

    # ---- capture --------------------------------------------------------------------------
    def _layout(self) -> None:
        """Which slots need fixed buffers: leaves (inputs), values an uncaptured step makes
        that a later graph reads, and the outputs (packed into one buffer)."""
        steps, segs = self.steps, self.segments
        seg_of = {}
        for i, s in enumerate(segs):
            for k in range(s.start, s.stop):
                seg_of[k] = i
        slot_step = {st.out: k for k, st in enumerate(steps)}
        self.leaves = [k for k, st in enumerate(steps) if st.kernel is None]
        self.keep: set[int] = set(self.outputs)  # slots never freed while capturing
        self.fixed: set[int] = set()  # slots an uncaptured step makes, copied to a fixed buffer
        for k, st in enumerate(steps):
            if st.kernel is None:
                continue
            here = segs[seg_of[k]].captured
            for i in st.inputs:
                j = slot_step.get(i)
                made_eagerly = j is not None and steps[j].kernel is not None
                if not here:
                    self.keep.add(i)  # Python reads it: the array object must live
                elif made_eagerly and not segs[seg_of[j]].captured:
                    self.fixed.add(i)
        for o in self.outputs:
            j = slot_step.get(o)
            if j is not None and steps[j].kernel is not None and not segs[seg_of[j]].captured:
                self.fixed.add(o)
        self.keep |= self.fixed

    def _capture(self, feed: dict, upload: bool, device: str | None) -> list:
        """Capture every segment (and launch it, so the next segments see real values);
        returns the outputs of this run. _Refused where a step failed in capture."""
        be, dev, steps = self.backend, self.dev, self.steps
        self._layout()
        self.pool = cp.cuda.MemoryPool()
        if self.budget is not None:  # a hard cap: an overrun is CuPy's OutOfMemoryError
            copy = sum(
                _pooled(n.nbytes)
                for n in (_output_node(steps, self.slots, o) for o in self.outputs)
            )
            with be.device:
                self.pool.set_limit(size=max(self.budget - copy, 1))
        vals: list = list(self.slots)
        with be.device, cp.cuda.using_allocator(self.pool.malloc):
            # the leaves' buffers: views of one device buffer, filled from pinned host memory
            sizes = [_aligned(steps[k].node.nbytes) for k in self.leaves]
            self.in_dev = cp.empty(max(sum(sizes), 1), np.uint8)
            self.in_host = cp.cuda.alloc_pinned_memory(max(sum(sizes), 1))
            host = self.in_host_np = np.frombuffer(self.in_host, np.uint8, max(sum(sizes), 1))
            n_in = max(len(self.leaves), 1)
            self.table_pinned = cp.cuda.alloc_pinned_memory(n_in * _ROW * 8)
            self.table_host = np.frombuffer(self.table_pinned, np.int64, n_in * _ROW).reshape(
                n_in, _ROW
            )
            self.table_dev = cp.empty((n_in, _ROW), np.int64)
            self.in_views, off = [], 0
            for k, n in zip(self.leaves, sizes):
                node = steps[k].node
                nb = node.nbytes
                d = self.in_dev[off : off + nb].view(node.dtype).reshape(node.shape)
                h = host[off : off + nb].view(node.dtype).reshape(node.shape)
                self.in_views.append((steps[k].out, node, d, h))
                vals[steps[k].out] = d
                off += n
            out_nodes = [_output_node(steps, self.slots, o) for o in self.outputs]
            sizes = [_aligned(n.nbytes) for n in out_nodes]
            self.out_buf = cp.empty(max(sum(sizes), 1), np.uint8)
            self.out_views, off = [], 0
            for n, sz in zip(out_nodes, sizes):
                self.out_views.append((off, n.nbytes, n.dtype, n.shape))
                off += sz
        self.fixed_bufs: dict[int, Any] = {}
        self.graphs: list = []
        self.pack_graph = None
        self.in_event = None
        self.last_sig = self.last_gather = None
        # leaf slots filled for good (frozen constants, checked again at every fill)
        self.settled: dict[int, Any] | None = None
        self._fill(feed, upload)
        for i, seg in enumerate(self.segments):
            last = i == len(self.segments) - 1
            if seg.captured:
                self.graphs.append(self._capture_segment(seg, vals, last))
            else:
                self.graphs.append(None)
                self._eager(seg, vals, device, capturing=True)
        if not self.segments[-1].captured:
            self.pack_graph = self._capture_pack(vals)
            self.pack_graph.launch(dev.stream)
        self.held = vals  # the arrays Python reads again (the rest were freed)
        self.ready = True

    def _capture_segment(self, seg, vals: list, last: bool):
        dev, steps = self.dev, self.steps
        kernels = self.kernels
        with self.backend.device, cp.cuda.using_allocator(self.pool.malloc), dev.stream:
            dev.stream.begin_capture()
            k = seg.start
            try:
                for k in range(seg.start, seg.stop):
                    st = steps[k]
                    if st.kernel is None:
                        continue
                    vals[st.out] = kernels[k](*[vals[i] for i in st.inputs])
                    for f in st.free:
                        if f not in self.keep:
                            vals[f] = None
                if last:
                    self._pack(vals)
            except Exception as e:
                try:
                    dev.stream.end_capture()
                except Exception:
                    pass
                raise _Refused(k, f"capture failed: {type(e).__name__}: {e}") from e
            graph = dev.stream.end_capture()
        graph.launch(dev.stream)
        return graph

    def _pack(self, vals: list) -> None:
        for (off, nb, dt, shape), o in zip(self.out_views, self.outputs):
            view = self.out_buf[off : off + nb].view(dt).reshape(shape)
            cp.copyto(view, vals[o], casting="unsafe")

    def _capture_pack(self, vals: list):
        dev = self.dev
        with self.backend.device, cp.cuda.using_allocator(self.pool.malloc), dev.stream:
            dev.stream.begin_capture()
            try:
                self._pack(vals)
            except Exception:
                dev.stream.end_capture()
                raise
            return dev.stream.end_capture()

    def _eager(self, seg, vals: list, device: str | None, capturing: bool = False) -> None:
        """An uncaptured segment, step by step on the replay stream; values a later graph
        reads go into their fixed buffers."""
        steps, fixed = self.steps, self.fixed
        with self.backend.device, self.dev.stream:
            for k in range(seg.start, seg.stop):
                st = steps[k]
                if st.kernel is None:
                    continue
                try:
                    value = st.kernel(*[vals[i] for i in st.inputs])
                except Exception as e:
                    if device is None:
                        raise
                    raise failure(st.node, device, e) from e
                if st.out in fixed:
                    buf = self.fixed_bufs.get(st.out)
                    if buf is None:  # made once, at capture, from the program's pool
                        with cp.cuda.using_allocator(self.pool.malloc):
                            buf = self.fixed_bufs[st.out] = cp.empty(st.node.shape, st.node.dtype)
                    cp.copyto(buf, value, casting="unsafe")
                    value = buf
                vals[st.out] = value
                for f in st.free:
                    if f not in self.keep:
                        vals[f] = None

    # ---- replay ---------------------------------------------------------------------------
    def _fill(self, feed: dict, upload: bool) -> None:
        """The leaves' values into their fixed buffers, on the replay stream: host arrays
        through the pinned buffer in one copy, device arrays by a copy kernel each."""
        stream = self.dev.stream
        # frozen constants (read-only arrays: graph/ops/leaf.py is_frozen) cannot change: they
        # are copied in by the first fill only, as the step-by-step run keeps their device copy
        settled = self.settled or {}
        for slot, array in list(settled.items()):
            if not is_frozen(array):  # made writeable again: read at every fill from now on
                del settled[slot]
        # the same CuPy arrays (pointers, strides, dtypes) as the last call: the copy table on
        # the device is still right, only the gather runs (their values may have changed)
        sig: list | None = []
        for slot, node, _d, _h in self.in_views:
            if slot in settled:
                continue
            value = node.attrs.constant.value if node.op is Op.CONST else feed[id(node)]
            if type(value) is not cp.ndarray:
                sig = None
                break
            sig.append((value.data.ptr, value.strides, value.dtype))
        if sig is not None and sig == self.last_sig and self.last_gather is not None:
            n, blocks = self.last_gather
            with self.backend.device, stream:
                _gather_kernel()((blocks, n), (256,), (self.table_dev,))
            return
        self.last_sig = self.last_gather = None
        if self.in_event is not None:
            self.in_event.synchronize()  # the last copy out of the pinned buffer is done
        host_any = False
        others, rows, most = [], [], 0
        for slot, node, d, h in self.in_views:
            if slot in settled:
                continue
            value = node.attrs.constant.value if node.op is Op.CONST else feed[id(node)]
            if isinstance(value, np.ndarray) or not hasattr(value, "__cuda_array_interface__"):
                np.copyto(h, value, casting="unsafe")
                host_any = True
                continue
            value = cp.asarray(value)
            if value.size == 0:
                continue
            if value.dtype != d.dtype or value.ndim > _GATHER_DIMS or value.itemsize > 16:
                others.append((d, value))
                continue
            nd = value.ndim
            pad = (0,) * (_GATHER_DIMS - nd)
            rows.append(
                (value.data.ptr, d.data.ptr, value.size, value.itemsize, nd)
                + value.shape
                + pad
                + value.strides
                + pad
            )
            most = max(most, value.size)
        if rows:
            n = len(rows)
            self.table_host[:n] = rows
        with self.backend.device, stream:
            if host_any:
                self.in_dev.set(self.in_host_np, stream=stream)
            if rows:
                self.table_dev[:n].set(self.table_host[:n], stream=stream)
                blocks = min(-(-most // 256), 1024)
                _gather_kernel()((blocks, n), (256,), (self.table_dev,))
            if host_any or rows:
                self.in_event = stream.record()
            for d, value in others:
                cp.copyto(d, value, casting="unsafe")
        if sig is not None and rows and not host_any and not others and len(rows) == len(sig):
            self.last_sig, self.last_gather = sig, (n, blocks)
        if self.settled is None:
            self.settled = {
                slot: node.attrs.constant.value
                for slot, node, _d, _h in self.in_views
                if node.op is Op.CONST and is_frozen(node.attrs.constant.value)
            }

    def call(self, feed: dict, upload: bool, device: str | None) -> list:
        be, dev = self.backend, self.dev
        with be.device:
            caller = cp.cuda.get_current_stream()
            dev.stream.wait_event(caller.record())
            if self.done is not None:
                dev.stream.wait_event(self.done)
        if not self.ready:
            COUNTERS["captures"] += 1
            self._capture(feed, upload, device)
        else:
            COUNTERS["replays"] += 1
            self._fill(feed, upload)
            vals = list(self.held)
            for seg, graph in zip(self.segments, self.graphs):
                if graph is not None:
                    graph.launch(dev.stream)
                else:
                    self._eager(seg, vals, device)
            if self.pack_graph is not None:  # it reads the fixed buffers _eager filled
                self.pack_graph.launch(dev.stream)
        with be.device:
            caller.wait_event(dev.stream.record())
            fresh = self.out_buf.copy()  # on the caller's stream, from CuPy's own pool
            self.done = caller.record()
        return [fresh[o : o + nb].view(dt).reshape(shape) for o, nb, dt, shape in self.out_views]


def _output_node(steps: list, slots: list, slot: int):
    for st in steps:
        if st.out == slot:
            return st.node
    raise TenloomError(f"cuda_graphs: output slot {slot} has no step")  # pragma: no cover


# each program's capture is its attribute ``captured`` (it goes with the program); every live
# one is in _LIVE too (captured_bytes)
_LIVE: "weakref.WeakSet[Captured]" = weakref.WeakSet()
_UNAVAILABLE: list[str] = []  # why capture cannot run in this process (cuBLAS not reached)
_STATE_LOCK = threading.Lock()


def replay(backend: Any, prog: Any, feed: dict, upload: bool, device: str | None):
    """The outputs of ``prog``'s run, replayed from its CUDA graphs, or None where this run goes
    step by step (cuda_graphs=False, a lowered precision, ROCm, the program's first runs, a
    program with nothing to capture, or another thread replaying it now)."""
    budget = capture.BUDGET.get()
    if not capture.CUDA_GRAPHS.get() or budget == 0 or cp.cuda.runtime.is_hip:
        return None
    from tenloom.runtime.precision import PRECISION

    if PRECISION.get() != "highest":
        return None
    st = getattr(prog, "captured", None)
    if st is None:
        with _STATE_LOCK:
            st = getattr(prog, "captured", None)
            if st is None:
                st = prog.captured = Captured(prog, backend)
                _LIVE.add(st)
    st.runs += 1
    if st.runs <= capture.CAPTURE_AFTER or not st.worthwhile:
        return None
    if _UNAVAILABLE:
        return None
    if budget is not None and not st.ready and not _fits(st, backend, budget):
        return None  # step by step under this limit (a larger one may capture it)
    try:
        dev = _device(backend)
    except CaptureError as e:  # no cuBLAS to call: every run step by step, said once
        import warnings

        _UNAVAILABLE.append(str(e))
        warnings.warn(f"{e}; programs run step by step", RuntimeWarning, stacklevel=2)
        return None
    if not dev.lock.acquire(blocking=False):
        return None
    try:
        st.dev = dev
        if not st.ready:
            return _first_capture(st, feed, upload, device, budget)
        if budget is not None and st.held_bytes() > budget:
            # captured under a larger budget (or none): its pool would overrun this one
            st.release()
            return None
        return st.call(feed, upload, device)
    finally:
        dev.lock.release()


def _fits(st: Captured, backend: Any, budget: int) -> bool:
    """Whether a capture of ``st`` may be made within ``budget`` bytes: only a program captured
    whole (a step run from Python would take its memory from outside the capture's pool),
    predicted and never seen to need more, with the device's cuBLAS workspace counted where
    this capture would make it."""
    if len(st.segments) != 1 or not st.segments[0].captured:
        return False
    need = max(st.footprint(), st.needs)
    if backend.device.id not in _DEVICES:
        need += WORKSPACE_BYTES
    return need <= budget


def release_all() -> None:
    """Let go of every capture not in use now (runtime/capture.py ``release_captures``: a run
    under memory_limit= starts with none held)."""
    for st in list(_LIVE):
        dev = getattr(st, "dev", None)
        if not st.ready or dev is None or not dev.lock.acquire(blocking=False):
            continue
        try:
            st.release()
        finally:
            dev.lock.release()


capture.RELEASERS.append(release_all)


# headroom a capture asks beyond twice its values' bytes (cuBLAS workspaces, CuPy's rounding)
CAPTURE_MARGIN = 64 << 20


def _room_to_capture(st: Captured) -> bool:
    """Whether the device has room for the capture's own pool without running short: every
    value of the program at once, twice over (the first run's memory is still cached by CuPy's
    default pool, which is emptied first if need be), plus CAPTURE_MARGIN. Short of memory
    mid-capture, CuPy's pool would give its free blocks back to the driver and retry, and the
    graphs captured before would then write into memory that is no longer theirs."""
    need = 2 * sum(s.node.nbytes for s in st.steps) + CAPTURE_MARGIN
    with st.backend.device:
        free, _ = cp.cuda.runtime.memGetInfo()
        if free < need:
            cp.get_default_memory_pool().free_all_blocks()
            free, _ = cp.cuda.runtime.memGetInfo()
    return free >= need


def _first_capture(
    st: Captured, feed: dict, upload: bool, device: str | None, budget: int | None = None
):
    """Capture (retrying without each step whose capture fails), then this run's outputs;
    None (step by step, for good) where the device has no room for it or runs out of memory
    during it. ``budget`` (bytes, runtime/capture.py ``BUDGET``): a capture whose pool came
    out larger than predicted and than the budget is let go at once, and its program runs
    step by step."""
    if not _room_to_capture(st):
        st.unsupported = "too little free device memory to capture it safely"
        return None
    if budget is not None:
        # under a memory limit the device's memory is what is limited: the blocks CuPy's
        # default pool still caches from the step-by-step runs go back before the capture's
        # own pool takes its share
        with st.backend.device:
            cp.get_default_memory_pool().free_all_blocks()
    st.budget = budget
    for _ in range(len(st.steps) + 1):
        st.kernels = {
            k: (contract_kernel(s.node, st.dev) if s.node.op is Op.CONTRACT else None) or s.kernel
            for k, s in enumerate(st.steps)
            if s.kernel is not None
        }
        try:
            try:
                outs = st.call(feed, upload, device)
            except cp.cuda.memory.OutOfMemoryError as e:  # outside a segment: its buffers
                raise _Refused(-1, f"capture failed: {type(e).__name__}: {e}") from e
            if budget is not None and st.held_bytes() > budget:
                COUNTERS["over_budget"] += 1
                st.needs = max(st.needs, st.held_bytes())
                st.release()
            return outs
        except _Refused as r:
            COUNTERS["refused"] += 1
            st.ready = False
            if isinstance(r.__cause__, cp.cuda.memory.OutOfMemoryError):
                if budget is not None:  # the pool's limit (the budget) stopped it
                    COUNTERS["over_budget"] += 1
                    st.needs = max(st.needs, budget + 1)
                    st.release()
                else:
                    st.release("the device ran out of memory during its capture")
                return None
            st.refused[r.step] = r.reason
            st.segments = capture.plan_segments([s.node for s in st.steps], st.refused)
            if not st.worthwhile:
                return None
    return None  # pragma: no cover - every step refused


def segments_of(prog: Any) -> list | None:
    """The segments of ``prog``'s capture as they stand (None: never run with capture)."""
    st = getattr(prog, "captured", None)
    return None if st is None else list(st.segments)


def captured_bytes() -> int:
    """Device memory held by the pools of captured programs."""
    return sum(st.pool.total_bytes() for st in list(_LIVE) if getattr(st, "pool", None))
