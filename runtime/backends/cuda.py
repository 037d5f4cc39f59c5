"""The CUDA backend (and ROCm, when CuPy is its ROCm build), on CuPy.

Contractions run as cuBLAS (batched) GEMMs through ``cupy.matmul`` on the layouts the
permutation pass chose; fused elementwise regions become one generated ``ElementwiseKernel``;
everything else runs the op's NumPy reference, which dispatches to CuPy through NumPy's
``__array_function__`` / ``__array_ufunc__`` protocols. Constants are copied to the device once
and kept while their host array lives. Memory comes from CuPy's pool; ``memory_stats`` reports
its high-water mark.

Supported dtypes: all of tenloom's (bool, int8 to int64, uint8 to uint64, float16, float32,
float64, complex64, complex128). Fused regions (code from runtime/codegen/cuda.py) hold only the
dtypes of the portable fusion limits (int32, int64, float32, float64, complex128 and bool); the
others run op by op through CuPy.
ROCm: install CuPy's ROCm build (``pip install cupy-rocm-5-0`` or a newer one for your ROCm);
devices are then named ``rocm:N``. Untested here: no AMD GPU was available.
"""

from __future__ import annotations

import weakref
from typing import Any

import cupy as cp
import numpy as np
from tenloom.graph.dtypes import SUPPORTED
from tenloom.graph.einsum import _LETTERS
from tenloom.graph.errors import DeviceError
from tenloom.graph.node import Node
from tenloom.graph.ops import OPS, Op, OpKind
from tenloom.graph.ops.leaf import full_value, is_frozen
from tenloom.runtime.backends.base import BackendBase
from tenloom.runtime.backends.cuda_graphs import captured_bytes, replay  # issue 23
from tenloom.runtime.codegen import GPU
from tenloom.runtime.codegen.cuda import COMPLEX_ORDER, FUSED_PREAMBLE, c_literal, fused_source
from tenloom.runtime.kernels.contract import contract_kernel


def _contract(be: Backend, node: Node):
    a, b = node.inputs
    exact = contract_kernel(a.shape, b.shape, node.attrs)
    return _with_precision(exact, node)  # precision=: float32 / complex64 GEMMs lowered


def _with_precision(exact, node: Node):
    """precision=: the exact kernel where the run is at "highest" (read on each call, a context
    variable), else the lowered one (runtime/backends/cuda_precision.py); contractions that
    are never lowered (runtime/precision.py ``lowered``) get the exact kernel itself."""
    from tenloom.graph.ops.contract import contract_layout
    from tenloom.runtime.precision import PRECISION, lowered

    a, b = node.inputs
    if not lowered(node.dtype, contract_layout(node.attrs, a.shape, b.shape).nk):
        return exact
    from tenloom.runtime.backends.cuda_precision import lowered_contract

    low = lowered_contract(a.shape, b.shape, node.attrs, node.dtype)
    get = PRECISION.get

    def run(x, y):
        p = get()
        return exact(x, y) if p == "highest" else low(x, y, p)

    run.__dict__.update(exact.__dict__)  # the exact kernel's tuning budget and flags
    return run


def _full(be: Backend, node: Node):
    shape, dt = node.attrs.shape, np.dtype(node.attrs.dtype)
    value = full_value(node.attrs)
    return lambda: cp.full(shape, value, dtype=dt)


def _eye(be: Backend, node: Node):
    n, m, k, dt = node.attrs
    return lambda: cp.eye(n, m, k, dtype=np.dtype(dt))


def _einsum(be: Backend, node: Node):
    terms, out = node.attrs
    labels = sorted({x for t in (*terms, out) for x in t})
    if len(labels) <= 52:
        letter = {lab: _LETTERS[i] for i, lab in enumerate(labels)}
        sub = ",".join("".join(letter[x] for x in t) for t in terms)
        sub += "->" + "".join(letter[x] for x in out)
        return lambda *xs: cp.einsum(sub, *xs)
    # more labels than cupy.einsum's letters (only without the order pass, which splits
    # networks into pairwise CONTRACTs): cotengra contracts it pair by pair on CuPy
    import cotengra as ctg

    return lambda *xs: ctg.array_contract(xs, terms, out, optimize="greedy")


def _fused(be: Backend, node: Node):
    return be._fused(node)


def _semiring(be: Backend, node: Node):  # semiring: runtime/kernels/semiring.py (RawKernels)
    from tenloom.runtime.kernels.semiring import semiring_kernel

    return semiring_kernel(node.attrs, tuple(x.shape for x in node.inputs))


def _division(be: Backend, node: Node):
    """Complex / and floating // and %: not CuPy's divide, floor_divide, remainder (see
    FUSED_PREAMBLE); None (the reference) for the other dtypes."""
    op = node.op
    if not (
        (op is Op.DIV and node.dtype.kind == "c")
        or (op in (Op.FLOORDIV, Op.MOD) and node.dtype.kind == "f")
    ):
        return None
    out_dt = node.dtype  # float16 computes in float32 and rounds, as NumPy's loops
    dt = np.dtype("float32") if out_dt == np.float16 else out_dt
    program = ((op, (), (("in", 0), ("in", 1))),)
    div = be._fused(node, (program, node.shape, dt.str), [dt, dt])
    return lambda a, b: div(a.astype(dt, copy=False), b.astype(dt, copy=False)).astype(
        out_dt, copy=False
    )


def _order(be: Backend, node: Node):
    """NumPy's lexicographic order of complex numbers (CuPy's comparisons differ: True > 1+0j
    came out True on an H100), in one generated kernel; None (the reference) for real ones."""
    if not any(i.dtype.kind == "c" for i in node.inputs):
        return None
    dt = np.result_type(*[i.dtype for i in node.inputs])
    cmp = be._complex_compare(node.op)
    return lambda a, b: cmp(a.astype(dt, copy=False), b.astype(dt, copy=False))


def _sliced(be: Backend, node: Node):
    from tenloom.runtime.sliced import sliced_kernel

    return sliced_kernel(node, be)


def _power(be: Backend, node: Node):
    """Integer powers: NumPy refuses a negative integer exponent; CuPy's power gives 0
    silently. None (the reference) for other dtypes."""
    if node.dtype.kind != "i":
        return None
    ref, attrs = OPS[node.op].ref, node.attrs

    def int_power(a, b):
        if b.size and bool((b < 0).any()):
            raise ValueError("Integers to negative integer powers are not allowed.")
        return ref((a, b), attrs)

    return int_power


# Higham's [13/13] Pade coefficients and the 1-norm up to which they need no scaling
# ("The scaling and squaring method for the matrix exponential revisited", 2005)
_EXPM_PADE13 = (
    64764752532480000.0,
    32382376266240000.0,
    7771770303897600.0,
    1187353796428800.0,
    129060195264000.0,
    10559470521600.0,
    670442572800.0,
    33522128640.0,
    1323241920.0,
    40840800.0,
    960960.0,
    16380.0,
    182.0,
    1.0,
)
_EXPM_THETA13 = 5.371920351148152
_EXPM_MAX_SQUARINGS = 1100  # 2^1100 overflows float64: a norm past it gives inf either way


def _expm(be: Backend, node: Node):
    """The matrix exponential (Op.EXPM, whose reference is SciPy's, host-only): scaling and
    squaring with the [13/13] Pade approximant, batched through cupy.matmul and
    cupy.linalg.solve, in the node's dtype. Not cupyx.scipy.linalg.expm, which takes one
    float64 matrix (complex ones fail, float32 is promoted) and skips the scaling of small
    norms; each matrix here is scaled by its own power of two and squared back as often."""
    dt = node.dtype
    b = _EXPM_PADE13

    def run(x):
        a = x.astype(dt, copy=False)
        if a.size == 0:
            return cp.zeros(a.shape, dt)
        norm = cp.abs(a).sum(axis=-2).max(axis=-1)  # the 1-norm of each matrix
        # 2^-s A has a 1-norm <= theta13; a NaN or inf matrix is not scaled (its result is NaN)
        s = cp.clip(cp.ceil(cp.log2(norm / _EXPM_THETA13)), 0, _EXPM_MAX_SQUARINGS)
        s = cp.where(cp.isfinite(norm), s, 0)
        a = a / (2.0**s).astype(norm.dtype)[..., None, None]
        eye = cp.broadcast_to(cp.eye(a.shape[-1], dtype=dt), a.shape)
        a2 = a @ a
        a4 = a2 @ a2
        a6 = a4 @ a2
        u = a @ (
            a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2)
            + b[7] * a6
            + b[5] * a4
            + b[3] * a2
            + b[1] * eye
        )
        v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2
        v = v + b[0] * eye
        r = cp.linalg.solve(v - u, v + u)
        squarings = s[..., None, None]
        for k in range(int(s.max())):
            r = cp.where(squarings > k, r @ r, r)
        return r.astype(dt, copy=False)

    return run


def _gather(be: Backend, node: Node):
    """GATHER (graph/ops/gather.py) with NumPy's bounds check: CuPy's array indexing wraps an
    index out of range around silently. One reduction and one copy to the host a call (so
    the op is not captured into CUDA graphs, runtime/capture.py)."""
    n = node.inputs[0].shape[0]

    def run(x, idx):
        if idx.size:
            lo, hi = (int(v) for v in cp.stack([idx.min(), idx.max()]).get())
            if lo < -n or hi >= n:
                bad = lo if lo < -n else hi
                raise IndexError(f"index {bad} is out of bounds for axis 0 with size {n}")
        return x[idx]

    return run


# tall matrices with at least this many times more rows than columns go to gesvd transposed
TALL_BY_TRANSPOSE = 2


def _svd(be: Backend, node: Node):
    """issue 20: SVD by cuSOLVER's gesvdp where it is accurate, else CuPy's gesvd
    (runtime/backends/cuda_svd.py), packed as the op's reference packs it. TRUNCATED_SVD too:
    the Gram route's head alone, else the same routes cut."""
    import cupyx
    from tenloom.graph.ops.decompositions import svd_arrays
    from tenloom.runtime.backends.cuda_svd import svd_kernel

    full = node.op is Op.SVD and node.attrs.full

    def fallback(x):
        with cupyx.errstate(linalg="raise"):  # as default_kernel: non-convergence raises
            m, n = x.shape[-2:]
            if full or m < TALL_BY_TRANSPOSE * n:
                return svd_arrays(x, full)
            # a tall matrix through its conjugate transpose, x^H = U S V^H: cuSOLVER's gesvd
            # took 86 ms on a 1024 x 512 DMRG split and 63 ms on its transpose (27 against
            # 34 ms at 986 x 256); near-square ones go as they are (1024 x 986: 121 against
            # 189 ms)
            u, s, vh = svd_arrays(x.swapaxes(-1, -2).conj(), False)
            return vh.swapaxes(-1, -2).conj(), s, u.swapaxes(-1, -2).conj()

    def fallback_host(x):
        return svd_arrays(x, full)  # gesdd, matrix by matrix with gesvd where it fails

    kern = svd_kernel(fallback, fallback_host)
    if node.op is Op.TRUNCATED_SVD:  # the Gram route's head alone where it is accurate
        from tenloom.graph.ops.tensor_svd import pack_truncated

        r = node.attrs.rank
        return lambda x: pack_truncated(cp, *kern(x, False, r))

    def run(x):
        u, s, vh = kern(x, full)
        return cp.concatenate([u.reshape(-1), s.reshape(-1).astype(u.dtype), vh.reshape(-1)])

    return run


def _fft(be: Backend, node: Node):
    """The transforms of graph/ops/fft.py by cupy.fft (cuFFT, with CuPy's plan cache) called
    directly, not through NumPy's dispatch of the numpy.fft reference."""
    from tenloom.graph.ops.fft import run_transform

    op, attrs = node.op, node.attrs
    return lambda x: run_transform(cp.fft, op, x, attrs)


# fused regions of at least this many ops get their constants as literals, for at most this many
# sets of values each (Backend._literals)
LITERAL_MIN_OPS = 128
LITERAL_VARIANTS = 4


class Backend(BackendBase):
    """CuPy on one GPU (see the module docstring): ``KERNELS`` below, every other op its
    NumPy reference dispatched to CuPy; each kernel runs with the device current."""

    dtypes = SUPPORTED
    streams = True
    fusion = GPU  # issue 23: big regions are one kernel of up to 4096 ops
    KERNELS = {
        Op.CONTRACT: _contract,
        Op.FULL: _full,
        Op.EYE: _eye,
        Op.EINSUM: _einsum,
        Op.SEMIRING_EINSUM: _semiring,  # semiring
        Op.SVD: _svd,  # issue 20: gesvdp, checked
        Op.TRUNCATED_SVD: _svd,  # the Gram route's head alone, checked
        Op.GATHER: _gather,  # bounds checked, as NumPy's
        Op.FUSED: _fused,
        Op.DIV: _division,
        Op.FLOORDIV: _division,
        Op.MOD: _division,
        **dict.fromkeys(COMPLEX_ORDER, _order),
        Op.SLICED: _sliced,
        Op.POW: _power,
        Op.EXPM: _expm,  # expm: SciPy's reference takes host arrays only
        **dict.fromkeys((Op.FFT_C2C, Op.FFT_R2C, Op.FFT_C2R), _fft),  # cupy.fft (cuFFT)
    }

    def __init__(self, kind: str = "cuda", index: int = 0):
        if bool(cp.cuda.runtime.is_hip) != (kind == "rocm"):
            build = "ROCm" if cp.cuda.runtime.is_hip else "CUDA"
            raise DeviceError(f"device kind {kind!r} asked for, but CuPy is its {build} build")
        n = cp.cuda.runtime.getDeviceCount()
        if not 0 <= index < n:
            raise DeviceError(f"{kind}:{index} does not exist; {n} device(s) present")
        self.kind = f"{kind}:{index}"
        self.device = cp.cuda.Device(index)
        self._consts: dict[int, tuple[weakref.ref, Any]] = {}
        self._kernels: dict[tuple, Any] = {}
        # (a region's ops, its input dtypes) -> the sets of literal values given a kernel
        self._literal_sets: dict[tuple, set] = {}

    def caches(self) -> dict[str, list[dict]]:
        return {"constants": [self._consts], "kernels": [self._kernels, self._literal_sets]}

    # ---- data movement --------------------------------------------------------------------

    def from_host(self, array: np.ndarray, constant: bool = False) -> Any:
        """Device copy of a host array; frozen constants (graph/ops/leaf.py ``is_frozen``) are
        copied once and reused, others every time (their values may have changed in place
        since)."""
        if not constant or not is_frozen(array):
            with self.device:
                return cp.asarray(array)
        key = id(array)
        hit = self._consts.get(key)
        if hit is not None and hit[0]() is array:
            return hit[1]
        with self.device:
            dev = cp.asarray(array)
        try:
            ref = weakref.ref(array, lambda _r, k=key: self._consts.pop(k, None))
            self._consts[key] = (ref, dev)
        except TypeError:  # not weak-referenceable (e.g. a numpy scalar): no caching
            pass
        return dev

    def to_host(self, array: Any) -> np.ndarray:
        return cp.asnumpy(array)

    def zeros(self, shape: tuple, dtype) -> Any:
        with self.device:
            return cp.zeros(shape, dtype)

    def synchronize(self) -> None:
        self.device.synchronize()

    def activate(self):
        return self.device

    # ---- streams (the scheduler gives each worker thread its own) -------------------------
    def worker_stream(self):
        with self.device:
            return cp.cuda.Stream(non_blocking=True)

    def record_event(self, stream):
        # The worker waits for its stream before handing the value on: memory freed after
        # the last consumer returns to CuPy's pool only once no stream still reads it.
        stream.synchronize()
        return None

    def wait_event(self, stream, event) -> None:
        if event is not None:
            stream.wait_event(event)

    def marker(self):
        """An event recorded on the current stream: ``.synchronize()`` waits for the work
        enqueued so far (the sliced runner keeps one slice in flight per device with it)."""
        with self.device:
            event = cp.cuda.Event(disable_timing=True)
            event.record()
            return event

    def memory_stats(self) -> dict[str, int]:
        pool = cp.get_default_memory_pool()
        held = captured_bytes()  # issue 23: captured programs' own pools
        return {"used_bytes": pool.used_bytes() + held, "total_bytes": pool.total_bytes() + held}

    def replay(self, prog, feed, upload: bool, device):
        """issue 23: the run of ``prog`` replayed from CUDA graphs, or None (step by step)."""
        return replay(self, prog, feed, upload, device)

    # ---- kernels ----------------------------------------------------------------------------
    def kernel(self, node: Node):
        """The table's kernel (or the reference), run with this device current; SLICED runs
        its slices on its own workers, which make their devices current themselves."""
        fn = super().kernel(node)
        return fn if node.op is Op.SLICED else _on(self.device, fn)

    def default_kernel(self, node: Node):
        ref, attrs = OPS[node.op].ref, node.attrs
        if OPS[node.op].kind is OpKind.LINALG:
            # as NumPy: a singular matrix (inv, solve, det's LU; cholesky of a matrix that is
            # not positive definite) raises instead of leaving inf/nan; CuPy checks cuSOLVER's
            # info only when asked (it costs a synchronization per call)
            import cupyx

            def checked(*xs):
                with cupyx.errstate(linalg="raise"):
                    return ref(xs, attrs)

            return checked
        return lambda *xs: ref(xs, attrs)

    def _complex_compare(self, op: Op):
        kern = self._kernels.get(op)
        if kern is None:
            kern = self._kernels[op] = cp.ElementwiseKernel(
                "T x, T y", "bool out", COMPLEX_ORDER[op], f"tenloom_complex_{op.value}"
            )
        return kern

    def _literals(self, node: Node, program: tuple, dts: tuple) -> dict[int, str]:
        """The constant inputs (FULL: one value, fixed at trace time) of a fused region to
        write into its kernel as C literals (runtime/codegen/cuda.py ``c_literal``).

        Only in long regions (``LITERAL_MIN_OPS``), which are compute-bound and where the
        compiler's folding pays (the 2000-op chain: 35.6 -> 31.5 ms on an H100); a short one
        is bound by memory and gains nothing. And only for the first ``LITERAL_VARIANTS`` sets
        of values of a region: each set is a kernel of its own (an NVRTC compilation), and an
        eager loop whose scalar changes every step (``y + dt_i * k``) would otherwise compile
        one kernel a step; later sets pass the constants as parameters, one kernel for all."""
        if len(program) < LITERAL_MIN_OPS:
            return {}
        literals = {}
        for k, inp in enumerate(node.inputs):
            if inp.op is Op.FULL:
                text = c_literal(full_value(inp.attrs), inp.dtype)
                if text is not None:
                    literals[k] = text
        if not literals:
            return {}
        # the region's ops, not its program: a new graph each step may number the same
        # region's inputs in another order
        shape = (tuple(op for op, _attrs, _args in program), tuple(sorted(dts)))
        seen = self._literal_sets.setdefault(shape, set())
        values = tuple(sorted(literals.items()))
        if values not in seen:
            if len(seen) >= LITERAL_VARIANTS:
                return {}
            seen.add(values)
        return literals

    def _fused(self, node: Node, attrs=None, in_dtypes=None):
        program, shape, dt = node.attrs if attrs is None else attrs
        literals = {}
        dts = None if in_dtypes is None else tuple(d.str for d in in_dtypes)
        if in_dtypes is None:
            in_dtypes = [i.dtype for i in node.inputs]
            dts = tuple(d.str for d in in_dtypes)
            literals = self._literals(node, program, dts)
        key = (program, dts, dt, tuple(sorted(literals.items())))
        kern = self._kernels.get(key)
        if kern is None:
            params_in, params_out, body = fused_source(program, in_dtypes, np.dtype(dt), literals)
            kern = cp.ElementwiseKernel(
                params_in, params_out, body, "tenloom_fused", preamble=FUSED_PREAMBLE
            )
            self._kernels[key] = kern
        out_dt = np.dtype(dt)
        if literals:
            keep = [k for k in range(len(in_dtypes)) if k not in literals]

            def run(*xs):
                out = cp.empty(shape, dtype=out_dt)
                kern(*[xs[k] for k in keep], out)
                return out

            return run

        def run(*xs):
            out = cp.empty(shape, dtype=out_dt)
            kern(*xs, out)
            return out

        return run


def _on(device, fn):
    def run(*xs):
        with device:
            return fn(*xs)

    return run


def list_devices(kind: str) -> list[tuple[int, str, int]]:
    """(index, name, total memory) of each GPU CuPy sees."""
    out = []
    for i in range(cp.cuda.runtime.getDeviceCount()):
        props = cp.cuda.runtime.getDeviceProperties(i)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        out.append((i, name, int(props["totalGlobalMem"])))
    return out
