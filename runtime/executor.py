"""The executor: runs a compiled program on one backend, in order (runtime/program.py's step
loop) or (threads > 1) through the concurrent scheduler.

It takes a graph and bindings and returns arrays: the feed checked against the placeholders,
the outputs fresh arrays (never a leaf's memory, never shared). The step loop frees each
intermediate after its last use and turns any failure into an ``EvaluationError`` that names
the node.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any

import numpy as np
from tenloom.graph.errors import (
    DeviceError,
    DTypeError,
    EvaluationError,
    OptionTypeError,
    ShapeError,
    fmt_shape,
)
from tenloom.graph.graph import Graph
from tenloom.graph.node import Node
from tenloom.graph.ops import Op, as_array
from tenloom.runtime.buffers import root
from tenloom.runtime.program import (  # noqa: F401  (describe, program_for: re-exported)
    Program,
    describe,
    finished,
    program_for,
    run,
)

# Device-resident leaves (tl.from_dlpack of a CUDA array): a placeholder node -> the device array
# it stands for, bound by ``bind_feed`` whenever the feed does not bind that placeholder. Weak
# keys: the entry goes when the last graph holding the placeholder does.
_DEVICE_LEAVES: "weakref.WeakKeyDictionary[Node, Any]" = weakref.WeakKeyDictionary()


def register_device_leaf(node: Node, array: Any) -> None:
    """Make ``array`` (a CUDA array: ``__cuda_array_interface__``) the value of the placeholder
    ``node`` in every run that does not feed it: the CUDA backend reads it in place, a run on
    any other device raises DeviceError."""
    _DEVICE_LEAVES[node] = array


def device_leaf(node: Node) -> Any:
    """The device array registered for the placeholder ``node``, or None."""
    return _DEVICE_LEAVES.get(node)


def bind_feed(
    graph: Graph, feed: dict[Any, Any] | None, devices: Any = None
) -> dict[int, np.ndarray]:
    """Check ``feed`` against the graph's placeholders: id(placeholder node) -> array.

    Host values become NumPy arrays. A CUDA array (anything with ``__cuda_array_interface__``:
    CuPy, torch, Numba) is bound as it is, with no copy, when the run is on that one CUDA
    device (``devices``: the run's device names, as "cuda:0"); anywhere else it is a
    DeviceError naming the placeholder and both devices, so no silent copy through the host
    happens."""
    feed = feed or {}
    by_node: dict[int, Any] = {}
    for key, value in feed.items():
        node = getattr(key, "node", key)
        if not isinstance(node, Node) or node.op is not Op.PLACEHOLDER:
            raise OptionTypeError(f"feed: key {key!r} is not a placeholder")
        by_node[id(node)] = value
    bound: dict[int, np.ndarray] = {}
    cuda_index = None  # the run's one CUDA device's index (-1: not one CUDA device), once asked
    for ph in graph.placeholders:
        name = ph.attrs.name
        if id(ph) not in by_node and ph in _DEVICE_LEAVES:
            bound[id(ph)] = _device_feed(_DEVICE_LEAVES[ph], ph, devices, leaf=True)
            continue
        if id(ph) not in by_node:
            raise EvaluationError(
                f"placeholder {name!r} {ph.dtype}{fmt_shape(ph.shape)} is not bound; "
                f"pass feed={{{name}: array}}"
            )
        value = by_node[id(ph)]
        if type(value) in _DEVICE_TYPES:
            # issue 23: a CuPy array already right for this run (its one CUDA device, the
            # placeholder's shape and dtype) is bound without the checks' error paths
            if cuda_index is None:
                run = _parsed_devices(
                    (devices,) if isinstance(devices, str) else tuple(devices or ())
                )
                cuda_index = run[0][1] if len(run) == 1 and run[0][0] == "cuda" else -1
            if (
                value.shape == ph.shape
                and value.dtype == ph.dtype
                and value.device.id == cuda_index
            ):
                bound[id(ph)] = value
                continue
        if type(value) in _DEVICE_TYPES or hasattr(value, "__cuda_array_interface__"):
            bound[id(ph)] = _device_feed(value, ph, devices)
            continue
        arr = np.asarray(value)
        if arr.shape != ph.shape:
            raise ShapeError(
                f"feed: placeholder {name!r} has shape {fmt_shape(ph.shape)} but the array bound "
                f"to it has shape {fmt_shape(arr.shape)}"
            )
        if arr.dtype != ph.dtype:
            arr = feed_cast(by_node[id(ph)], arr, ph.dtype, name)
        bound[id(ph)] = arr
    return bound


def _device_feed(value: Any, ph: Node, devices: Any, leaf: bool = False) -> Any:
    """A CUDA array bound to ``ph``: checked (shape, dtype: safe casts only, on the device) and
    kept on its device, which must be the run's one CUDA device. ``leaf``: the array is a
    device-resident leaf (``register_device_leaf``), not a feed."""
    name = ph.attrs.name
    where = _cuda_index(value)
    names = (devices,) if isinstance(devices, str) else tuple(devices or ())
    want = f"cuda:{where}" if where is not None else "a CUDA device"
    run = _parsed_devices(names)
    if len(run) != 1 or run[0][0] != "cuda" or (where is not None and run[0][1] != where):
        ran = ", ".join(names) if names else "cpu"
        if leaf:
            raise DeviceError(
                f"from_dlpack: tensor {name!r} is a {type(value).__module__}."
                f"{type(value).__name__} resident on {want}, but the program runs on {ran}; "
                f"evaluate it with device={want!r} alone, or import it to the host with "
                "tl.from_dlpack(x, device='cpu')"
            )
        raise DeviceError(
            f"feed: placeholder {name!r} is bound to a {type(value).__module__}."
            f"{type(value).__name__} on {want}, but the program runs on {ran}; pass a host "
            "array, or run on that device alone"
        )
    shape = tuple(value.shape)
    if shape != ph.shape:
        raise ShapeError(
            f"feed: placeholder {name!r} has shape {fmt_shape(ph.shape)} but the array bound "
            f"to it has shape {fmt_shape(shape)}"
        )
    dtype = array_dtype(value, f"feed: placeholder {name!r}")
    if type(value).__module__.startswith("cupy"):
        # issue 23: a type whose arrays are all device arrays (CuPy's) is known without asking
        # each array for its __cuda_array_interface__ (a dict built per call)
        _DEVICE_TYPES.add(type(value))
    if dtype != ph.dtype:
        if not np.can_cast(dtype, ph.dtype, "safe"):
            raise DTypeError(
                f"feed: placeholder {name!r} has dtype {ph.dtype} but the array bound to it has "
                f"dtype {dtype}, which does not convert safely; cast it with astype"
            )
        import cupy as cp  # a CUDA run has CuPy: the cast runs on the device

        return cp.asarray(value).astype(ph.dtype)
    return value


# array types every instance of which is a CUDA array (CuPy's ndarray); torch's Tensor is not
# one (a CPU tensor has no __cuda_array_interface__), so it is asked each time
_DEVICE_TYPES: set = set()


@functools.lru_cache(maxsize=64)
def _parsed_devices(names: tuple) -> tuple:
    """The run's device names parsed, once per set of names (a plan's call binds each of its
    placeholders against the same names)."""
    from tenloom.runtime.options import parse_device_name

    return tuple(parse_device_name("feed", n) for n in names)


def array_dtype(value: Any, where: str) -> np.dtype:
    """The NumPy dtype of an array from another library (CuPy's are NumPy's; torch's print as
    'torch.float32'); a DTypeError naming ``where`` for one NumPy has not (bfloat16)."""
    dt = value.dtype
    try:
        return np.dtype(dt)
    except TypeError:
        pass
    try:
        return np.dtype(str(dt).replace("torch.", ""))
    except TypeError:
        raise DTypeError(f"{where}: dtype {dt} has no NumPy equivalent") from None


def _cuda_index(value: Any) -> int | None:
    """The CUDA device index of a device array (CuPy's ``.device.id``, torch's
    ``.device.index``), or None when it does not say."""
    dev = getattr(value, "device", None)
    for attr in ("id", "index"):
        idx = getattr(dev, attr, None)
        if isinstance(idx, int):
            return idx
    return None


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
        finished(prog)  # issue 22: as program.run does after its own runs
        leaf_roots |= _leaf_ids(prog, bound)
    else:
        vals = _run_sequential(prog, bound, backend, device, leaf_roots)
    return _finish(graph, vals, backend, to_host, leaf_roots)


def _leaf_ids(prog: Program, bound: dict[int, Any]) -> set[int]:
    ids = set()
    for step in prog.steps:
        if step.kernel is None:
            node = step.node
            host = node.attrs.constant.value if node.op is Op.CONST else bound[id(node)]
            ids.add(id(root(host)))
    return ids


# the sequential run (benchmarks/grad_breakdown.py clocks it under this name)
_run_sequential = run


def _finish(graph: Graph, vals: list[Any], backend: Any, to_host: bool, leaf_roots: set[int]):
    """Outputs as fresh arrays: never the memory of a constant or an input, never shared
    between two outputs (``evaluate(y, y)`` gives two arrays), writable."""
    results = []
    taken = set(leaf_roots)
    for v, out in zip(vals, graph.outputs):
        if not to_host:
            v = as_array(v)
            rid = id(root(v)) if isinstance(v, np.ndarray) else id(v)
            if rid in taken:
                v = v.copy()
                rid = id(v)
            taken.add(rid)
            results.append(v)
            continue
        arr = np.asarray(backend.to_host(v))
        if arr.dtype != out.dtype:
            arr = arr.astype(out.dtype)
        if not arr.flags.writeable or id(root(arr)) in taken:
            arr = arr.copy()
        taken.add(id(root(arr)))
        results.append(arr)
    return results
