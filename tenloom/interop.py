"""Interoperability: DLPack import and export, and tenloom as an autoray backend.

**DLPack.** ``tl.from_dlpack(x)`` wraps any DLPack producer (NumPy, torch, CuPy, JAX, ...) as a
lazy leaf without copying where the memory can be shared:

- a host producer becomes a constant over ``np.from_dlpack(x)``: the same memory, read when the
  graph runs (like ``tl.asarray``, a later in-place change of ``x`` is seen);
- a CUDA producer stays on its device: it becomes a *device-resident leaf*, a placeholder that
  every run binds to the device array (a zero-copy CuPy view of it) unless ``feed`` binds it
  otherwise (runtime/executor.py ``register_device_leaf``). ``evaluate(device="cuda:N")`` on
  the producer's device reads it in place; a run anywhere else raises DeviceError: nothing is
  copied through the host behind the caller's back. ``device="cpu"`` imports it to the host
  (one copy), ``device="cuda:N"`` moves a host producer to the GPU.

``Tensor.__dlpack__`` exports a value: a constant or device-resident leaf exports its own
memory (zero-copy); any other tensor is *materialized*: evaluated (on the device of its
device-resident leaves, else on the CPU) and the fresh array exported.

**autoray.** ``autoray.infer_backend(t)`` is ``"tenloom"`` and ``autoray.do(name, t, ...)``
finds tenloom's functions (``tenloom.*``, ``tenloom.linalg.*``); this module registers what
autoray cannot find there by name: ``array``/``asarray``, ``to_numpy`` (evaluates), ``diag``,
``split``, ``take``, ``cumsum``, ``count_nonzero``, ``allclose``, ``random.normal``/``uniform``
(drawn by NumPy, then constants) and the dtype objects; ``linalg.svd`` returns the reduced
factors by default, as autoray's NumPy backend does. ``count_nonzero`` and ``allclose``
*evaluate*: through autoray they decide shapes and branches (quimb truncates singular values
to ``count_nonzero(s > cutoff)``), so they return concrete NumPy values, the array API's rule
for data-dependent shapes (evaluate up to that point). The registration runs when autoray is
imported (at once when it already is): importing tenloom never imports autoray.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
import warnings
from typing import Any

import numpy as np

from tenloom.graph.errors import DeviceError, OptionTypeError, ShapeError
from tenloom.graph.ops import Op
from tenloom.runtime.executor import device_leaf, register_device_leaf
from tenloom.runtime.options import parse_device_name

# DLPack device types (dlpack.h DLDeviceType)
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13
_HOST_TYPES = (_DL_CPU, _DL_CUDA_HOST)
_CUDA_TYPES = (_DL_CUDA, _DL_CUDA_MANAGED)

_dlpack_names = itertools.count()


def _tensor(node: Any) -> Any:
    from tenloom.tensor import Tensor

    return node if isinstance(node, Tensor) else Tensor(getattr(node, "node", node))


def _cupy(what: str) -> Any:
    try:
        import cupy
    except ImportError:
        raise DeviceError(f"from_dlpack: {what} needs CuPy (pip install tenloom[cuda12])") from None
    return cupy


def from_dlpack(x: Any, *, device: Any = None, copy: bool | None = None) -> Any:
    """A lazy tensor over the memory of a DLPack producer ``x`` (the array API's
    ``from_dlpack``).

    ``device=None`` keeps ``x`` where it is: a host array becomes a constant sharing its memory
    (``np.from_dlpack``); a CUDA array (CuPy, torch on the GPU, ...) becomes a device-resident
    leaf that ``evaluate(device="cuda:N")`` reads in place, and that a run on another device
    refuses with DeviceError. ``device="cpu"`` imports a CUDA array to the host (a copy);
    ``device="cuda:N"`` copies a host array to that GPU. ``copy=True`` always copies,
    ``copy=False`` raises BufferError where sharing is impossible."""
    from tenloom.tensor import Tensor

    if isinstance(x, Tensor):
        return x
    if not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
        raise OptionTypeError(
            f"from_dlpack: x is a {type(x).__module__}.{type(x).__name__}, which is not a DLPack "
            "producer (it has no __dlpack__ and __dlpack_device__); use tl.asarray for "
            "other array-likes"
        )
    if copy is not None and not isinstance(copy, bool):
        raise OptionTypeError(f"from_dlpack: copy={copy!r} must be True, False or None")
    kind, index = (None, None) if device is None else parse_device_name("from_dlpack", device)
    if kind not in (None, "cpu", "cuda"):
        raise DeviceError(
            f"from_dlpack: device={device!r}: DLPack import goes to 'cpu' or 'cuda:N' only"
        )
    dl_type, dl_id = (int(v) for v in x.__dlpack_device__())
    if dl_type in _HOST_TYPES:
        arr = np.from_dlpack(x, copy=copy)
        if kind == "cuda":
            if copy is False:
                raise BufferError(
                    f"from_dlpack: copy=False, but x is on the host and device={device!r}"
                )
            cp = _cupy(f"device={device!r}")
            with cp.cuda.Device(index):
                return _device_leaf(cp.asarray(arr), f"cuda:{index}")
        from tenloom.graph.ops.leaf import asarray

        return _tensor(asarray(arr))
    if dl_type in _CUDA_TYPES:
        where = f"cuda:{dl_id}"
        if kind == "cpu":
            if copy is False:
                raise BufferError(f"from_dlpack: copy=False, but x is on {where} and device='cpu'")
            cp = _cupy(f"importing an array on {where}")
            from tenloom.graph.ops.leaf import asarray

            return _tensor(asarray(cp.asnumpy(cp.from_dlpack(x))))
        if kind == "cuda" and index != dl_id:
            raise DeviceError(
                f"from_dlpack: x is on {where} but device={device!r}; move it there first "
                f"(for CuPy: with cupy.cuda.Device({index}): cupy.asarray(x))"
            )
        cp = _cupy(f"an array on {where}")
        with cp.cuda.Device(dl_id):
            arr = cp.from_dlpack(x)
            if copy:
                arr = arr.copy()
        return _device_leaf(arr, where)
    raise DeviceError(
        f"from_dlpack: x ({type(x).__name__}) is on DLPack device type {dl_type} (id {dl_id}); "
        "tenloom imports host (CPU) and CUDA arrays only"
    )


def _device_leaf(arr: Any, where: str) -> Any:
    """A placeholder bound to the CUDA array ``arr`` in every run (the device-resident leaf)."""
    from tenloom.graph.ops.leaf import placeholder

    name = f"dlpack_{where.replace(':', '')}_{next(_dlpack_names)}"
    t = _tensor(placeholder(tuple(arr.shape), np.dtype(str(arr.dtype)), name=name))
    register_device_leaf(t.node, arr)
    return t


def _device_leaves(t: Any) -> list[Any]:
    """The device-resident leaves' arrays in ``t``'s graph."""
    seen, stack, found = set(), [t.node], []
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op is Op.PLACEHOLDER:
            arr = device_leaf(node)
            if arr is not None:
                found.append(arr)
        stack.extend(node.inputs)
    return found


def _cuda_id(arr: Any) -> int:
    dev = getattr(arr, "device", None)
    return int(getattr(dev, "id", getattr(dev, "index", 0)) or 0)


def dlpack_device(t: Any) -> tuple[int, int]:
    """``Tensor.__dlpack_device__``: (kDLCUDA, N) when ``t`` depends on device-resident
    leaves on cuda:N, else (kDLCPU, 0). Nothing is evaluated."""
    leaves = _device_leaves(t)
    if not leaves:
        return (_DL_CPU, 0)
    return (_DL_CUDA, _cuda_id(leaves[0]))


def dlpack_export(t: Any, **kwargs: Any) -> Any:
    """``Tensor.__dlpack__``: a leaf exports its own memory; any other tensor is evaluated (on
    its device-resident leaves' GPU, else the CPU) and the result exported. ``kwargs`` (stream,
    max_version, dl_device, copy) go to the exported array's ``__dlpack__``, without those
    that are None."""
    node = t.node
    if node.op is Op.CONST:
        arr = node.attrs.constant.value
    elif node.op is Op.PLACEHOLDER and device_leaf(node) is not None:
        arr = device_leaf(node)
    else:
        leaves = _device_leaves(t)
        if leaves:
            arr = t.evaluate(device=f"cuda:{_cuda_id(leaves[0])}", to_host=False)
        else:
            arr = t.evaluate()
    given = {k: v for k, v in kwargs.items() if v is not None}
    try:
        return arr.__dlpack__(**given)
    except TypeError:  # an older producer: stream= only
        if set(given) - {"stream"}:
            return arr.__dlpack__(**{k: v for k, v in given.items() if k == "stream"})
        raise


# ---- autoray --------------------------------------------------------------------------------


def _to_numpy(x: Any) -> np.ndarray:
    """autoray's ``to_numpy``: evaluates (``np.asarray``)."""
    return np.asarray(x)


def _array(x: Any, dtype: Any = None, **kwargs: Any) -> Any:
    import tenloom as tl

    return tl.asarray(x, dtype=dtype)


def _diag(x: Any, k: int = 0) -> Any:
    """NumPy's ``diag``: the k-th diagonal of a matrix, or a matrix with ``x`` (1-d) on it."""
    import tenloom as tl

    x = tl.asarray(x)
    if x.ndim == 2:
        return tl.diagonal(x, offset=k)
    if x.ndim != 1:
        raise ShapeError(f"diag: x must be 1-d or 2-d, got shape {tuple(x.shape)}")
    n = x.shape[0] + abs(k)
    if k:  # the row of values each column of the k-th diagonal's ones picks up
        pad = tl.zeros((abs(k),), dtype=x.dtype)
        x = tl.concatenate([pad, x] if k > 0 else [x, pad])
    return tl.eye(n, n, k=k, dtype=x.dtype) * tl.reshape(x, (1, n))


def _split(x: Any, indices_or_sections: Any, axis: int = 0) -> list[Any]:
    """NumPy's ``split``: equal sections (which must divide the axis) or split points."""
    import tenloom as tl

    x = tl.asarray(x)
    ax = axis + x.ndim if axis < 0 else axis
    if not 0 <= ax < x.ndim:
        raise ShapeError(f"split: axis {axis} is out of range for shape {tuple(x.shape)}")
    n = x.shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0 or n % k:
            raise ShapeError(
                f"split: {k} sections do not divide axis {axis} of shape {tuple(x.shape)}"
            )
        points = [n // k * i for i in range(1, k)]
    else:
        points = [int(i) for i in indices_or_sections]
    bounds = [0, *[min(max(p, 0), n) for p in points], n]
    head = (slice(None),) * ax
    return [x[(*head, slice(a, max(a, b)))] for a, b in zip(bounds, bounds[1:])]


def _take(x: Any, indices: Any, axis: int | None = None) -> Any:
    """NumPy's ``take`` for concrete indices: basic indexing for an int, else one slice per
    index stacked along ``axis`` (lazy and differentiable)."""
    import tenloom as tl

    x = tl.asarray(x)
    if axis is None:
        x, axis = tl.reshape(x, (-1,)), 0
    ax = axis + x.ndim if axis < 0 else axis
    if not 0 <= ax < x.ndim:
        raise ShapeError(f"take: axis {axis} is out of range for shape {tuple(x.shape)}")
    head = (slice(None),) * ax
    idx = np.asarray(indices)
    if idx.dtype.kind not in "iu":
        raise ShapeError(f"take: indices must be integers, got {idx.dtype}")
    if idx.ndim == 0:
        return x[(*head, int(idx))]
    parts = [x[(*head, int(i))] for i in idx.reshape(-1)]
    out = tl.stack(parts, axis=ax) if parts else x[(*head, slice(0, 0))]
    return tl.reshape(out, (*x.shape[:ax], *idx.shape, *x.shape[ax + 1 :]))


def _cumsum(x: Any, axis: int | None = None, dtype: Any = None) -> Any:
    """NumPy's ``cumsum``, lazy and differentiable: a product with a triangular matrix of ones
    along the axis (O(n^2) in the axis' length, meant for short axes such as spectra)."""
    import tenloom as tl

    x = tl.asarray(x)
    if dtype is not None:
        x = tl.astype(x, dtype)
    if axis is None:
        x, axis = tl.reshape(x, (-1,)), 0
    ax = axis + x.ndim if axis < 0 else axis
    if not 0 <= ax < x.ndim:
        raise ShapeError(f"cumsum: axis {axis} is out of range for shape {tuple(x.shape)}")
    n = x.shape[ax]
    tri = tl.asarray(np.triu(np.ones((n, n), dtype=x.dtype)))
    moved = tl.moveaxis(x, ax, -1)
    return tl.moveaxis(tl.tensordot(moved, tri, axes=1), -1, ax)


def _svd(a: Any, full_matrices: bool = False, **kwargs: Any) -> Any:
    """``linalg.svd`` as autoray's NumPy backend has it: the reduced factors by default."""
    import tenloom as tl

    return tl.linalg.svd(a, full_matrices=full_matrices, **kwargs)


def _allclose(x: Any, y: Any, rtol: float = 1e-5, atol: float = 1e-8) -> bool:
    """NumPy's ``allclose``, evaluated: callers branch on it."""
    return bool(np.allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol))


def _count_nonzero(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """NumPy's ``count_nonzero``, evaluated: its result decides shapes (see the module doc)."""
    return np.count_nonzero(np.asarray(x), axis=axis, keepdims=keepdims)


def _random(name: str) -> Any:
    """autoray's ``random.<name>`` (NumPy's signature, ``size=``), drawn by NumPy's global
    generator and wrapped as a constant (``tl.random`` replaces it where tenloom has one)."""

    def draw(*args: Any, size: Any = None, dtype: Any = None, **kwargs: Any) -> Any:
        import tenloom as tl

        out = getattr(np.random, name)(*args, size=size, **kwargs)
        return tl.asarray(np.asarray(out, dtype=dtype))

    return draw


_DTYPES = ("bool", "int32", "int64", "float32", "float64", "complex64", "complex128")


def register_autoray(ar: Any = None) -> None:
    """Register tenloom with autoray (``ar``: the autoray module, imported if not given)."""
    if ar is None:
        import autoray as ar
    import tenloom as tl
    from tenloom.tensor import Tensor

    ar.register_backend(Tensor, "tenloom")
    fns: dict[str, Any] = {
        "array": _array,
        "asarray": _array,
        "to_numpy": _to_numpy,
        "count_nonzero": _count_nonzero,
        "allclose": _allclose,
        "linalg.svd": _svd,
    }
    for name, fn in (("diag", _diag), ("split", _split), ("cumsum", _cumsum), ("take", _take)):
        fns[name] = getattr(tl, name, fn)  # tenloom's own where it has one
    rand = getattr(tl, "random", None)
    for name in ("normal", "uniform"):
        if not hasattr(rand, name):
            fns[f"random.{name}"] = _random(name)
    for name in _DTYPES:
        fns[name] = np.dtype(name)
    for name, fn in fns.items():
        ar.register_function("tenloom", name, fn)


class _AutorayHook:
    """A one-shot import hook: registers tenloom with autoray right after autoray's own module
    has run (so ``import tenloom`` does not import autoray)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "autoray":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            _register_quietly(module)

        spec.loader.exec_module = exec_module
        return spec


def _register_quietly(ar: Any) -> None:
    try:
        register_autoray(ar)
    except Exception as e:  # never break `import autoray`
        warnings.warn(f"tenloom: registering with autoray failed: {e!r}", stacklevel=2)


def install_autoray_hook() -> None:
    """Register with autoray now if it is imported, else when it is (tenloom/__init__.py)."""
    if "autoray" in sys.modules:
        _register_quietly(sys.modules["autoray"])
    elif not any(isinstance(f, _AutorayHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _AutorayHook())
