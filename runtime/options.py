"""Parsing the options of ``evaluate``, ``compile``, ``grad`` and friends: checked in one place,
before any work, into the one frozen, typed record ``Options`` (passes/options.py).

``parse_options(caller, opts)`` checks every name and value and returns the record; a bad one
raises ``OptionError`` (``OptionTypeError`` for an unknown name or a value of the wrong type),
or ``DeviceError`` for a device that is unknown or absent, naming the option, the value and
what is accepted. ``record.given`` holds the options given, normalized (``memory_limit`` in
bytes, ``passes`` a tuple; ``device`` as given, its resolved names in ``devices``).
No options at all is the common case: it returns one shared record at once; options seen
before (plain values) are parsed once and their record reused (a bounded cache).
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import numpy as np
from tenloom.graph.errors import DeviceError, OptionError, OptionTypeError
from tenloom.passes.caches import LRUCache
from tenloom.passes.options import NO_OPTIONS, Options

# every option of evaluate, in the order the docs list them
OPTION_NAMES: tuple[str, ...] = (
    "feed",
    "device",
    "passes",
    "optimize",
    "to_host",
    "verify",
    "cache_dir",
    "progress",
    "threads",
    "deterministic",
    "memory_limit",
    "scheduler",
    "precision",  # runtime/precision.py: contractions at tf32 / bf16 / fp16 on CUDA
    "cuda_graphs",  # issue 23: runtime/capture.py
)
# compile / @function bind arrays when the plan is called: no feed=
COMPILE_OPTIONS = tuple(k for k in OPTION_NAMES if k != "feed")
# grad, value_and_grad, vjp, jvp, hvp: the pre-pass's order search and slicing
GRAD_OPTIONS: tuple[str, ...] = ("optimize", "memory_limit", "cache_dir")

# optimize= presets tenloom itself knows (others go to cotengra, checked against its presets)
_OWN_PRESETS = frozenset({"auto", "greedy", "optimal", "hyper"})
_OPTIMIZE_ACCEPTED = (
    "'auto', 'greedy', 'hyper', 'optimal', another cotengra preset name (e.g. 'auto-hq', "
    "'random-greedy', 'dp'), a dict with 'method' (and, for 'hyper', HyperOptimizer's "
    "arguments), a cotengra optimizer object, or False (left to right)"
)
_BOOL_OPTIONS = ("to_host", "verify", "progress", "deterministic", "cuda_graphs")  # issue 23

# options checked before -> their record (plain values only: names, numbers, tuples)
_PARSED: LRUCache[tuple, Options] = LRUCache("runtime.options.parsed", 256)


def parse_options(
    caller: str, opts: Mapping[str, Any] | Options, allowed: tuple[str, ...] = OPTION_NAMES
) -> Options:
    """Check ``opts`` (the keyword arguments of ``caller``) and return the record; a record is
    returned as it is (checked already)."""
    if not opts:
        return NO_OPTIONS
    if isinstance(opts, Options):
        return opts
    try:  # the same options again (a loop calling evaluate(threads=2)): checked once
        key = (allowed, tuple((k, type(v), v) for k, v in opts.items()))  # True != 1
        hit = _PARSED.get(key)
    except TypeError:  # a dict or other unhashable value (feed=, optimize={...})
        key = hit = None
    if hit is not None:
        return hit
    for name in opts:
        if name not in allowed:
            raise _unknown(caller, name, allowed)
    given: dict[str, Any] = {}
    fields: dict[str, Any] = {}
    for name, value in opts.items():
        checked = _CHECKS[name](caller, value)
        if name == "device":  # given as given (a saved plan keeps "cuda:*"), and resolved
            given[name] = value
            fields["devices"] = None if checked is None else _as_tuple(checked)
        else:
            given[name] = fields[name] = checked
    if fields.get("precision", "highest") != "highest":  # precision=: a CUDA device's only
        _check_precision_devices(caller, fields["precision"], fields.get("devices"))
        if fields.get("scheduler") is not None:  # precision=: not carried to Dask's workers
            raise OptionError(
                f"{caller}: precision={fields['precision']!r} with scheduler=: the slices that "
                "Dask's workers run are not lowered; use precision='highest' with a scheduler"
            )
    record = Options(**fields, given=MappingProxyType(given))
    if record.precision != "highest" and record.devices is None:
        key = None  # precision=: checked against the default device, which may change
    if key is not None:
        _PARSED.put(key, record)
    return record


def _as_tuple(device: str | tuple[str, ...]) -> tuple[str, ...]:
    return (device,) if isinstance(device, str) else device


def _unknown(caller: str, name: Any, allowed: tuple[str, ...]) -> OptionTypeError:
    close = difflib.get_close_matches(str(name), allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    if name == "precision" and name not in allowed:  # precision=: grad & co. build lazy tensors
        hint = " (precision is an option of the run: give it to evaluate or compile)"
    return OptionTypeError(
        f"{caller}: unknown option {name!r}{hint}; valid options: {', '.join(allowed)}"
    )


def _bad(caller: str, name: str, value: Any, accepted: str, wrong_type: bool = True):
    cls = OptionTypeError if wrong_type else OptionError
    return cls(f"{caller}: {name}={_short(value)} is not valid; accepted: {accepted}")


# ---- one check per option: (caller, value) -> normalized value, or raise ----------------------


def _check_bool(name: str):
    def check(caller: str, value: Any) -> bool:
        if not isinstance(value, (bool, np.bool_)):
            raise _bad(caller, name, value, "True or False")
        return bool(value)

    return check


def _check_feed(caller: str, feed: Any) -> Mapping[Any, Any] | None:
    if feed is None:
        return None
    if not isinstance(feed, Mapping):
        raise _bad(caller, "feed", feed, "a dict {placeholder: array}")
    from tenloom.graph.node import Node
    from tenloom.graph.ops import Op

    for key in feed:
        node = getattr(key, "node", key)
        if not isinstance(node, Node) or node.op is not Op.PLACEHOLDER:
            raise OptionTypeError(
                f"{caller}: feed key {_short(key)} is not a placeholder; accepted: a dict "
                "{placeholder: array} with placeholders made by tl.placeholder"
            )
    return feed


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_threads(caller: str, threads: Any) -> int | None:
    if threads is None:
        return None
    if isinstance(threads, (bool, np.bool_)) or not isinstance(threads, (int, np.integer)):
        raise _bad(caller, "threads", threads, "a positive int (or None: the default)")
    if threads < 1:
        raise _bad(caller, "threads", threads, "a positive int", wrong_type=False)
    return int(threads)


def _check_memory_limit(caller: str, limit: Any) -> int | None:
    from tenloom.passes.slicing import parse_bytes

    if limit is None:
        return None
    accepted = "a number of bytes (at least 1) or a size such as '4GiB' or '512 MB'"
    if isinstance(limit, (bool, np.bool_)) or not isinstance(
        limit, (int, float, str, np.integer, np.floating)
    ):
        raise _bad(caller, "memory_limit", limit, accepted)
    if isinstance(limit, (float, np.floating)) and not math.isfinite(limit):
        raise _bad(caller, "memory_limit", limit, accepted, wrong_type=False)
    try:
        return parse_bytes(limit)
    except (ValueError, OverflowError):
        raise _bad(caller, "memory_limit", limit, accepted, wrong_type=False) from None


def _check_passes(caller: str, passes: Any) -> tuple[str, ...] | None:
    from tenloom.passes import PASSES

    if passes is None:
        return None
    valid = ", ".join(sorted(PASSES))
    if isinstance(passes, str):
        raise OptionTypeError(
            f"{caller}: passes={passes!r} is a string; give a tuple of pass names, e.g. "
            f"passes=({passes!r},) (valid passes: {valid})"
        )
    if not isinstance(passes, (list, tuple)):
        raise _bad(caller, "passes", passes, f"a tuple of pass names ({valid}), or None")
    for name in passes:
        if not isinstance(name, str):
            raise OptionTypeError(
                f"{caller}: passes={passes!r}: {name!r} is not a pass name; valid passes: {valid}"
            )
        if name not in PASSES:
            raise OptionError(
                f"{caller}: passes={passes!r}: unknown pass {name!r}; valid passes: {valid}"
            )
    return tuple(passes)


def _check_optimize(caller: str, optimize: Any) -> Any:
    if optimize is None or optimize is False:
        return optimize
    if isinstance(optimize, str):
        if optimize not in _OWN_PRESETS and not _is_preset(optimize):
            raise _bad(caller, "optimize", optimize, _OPTIMIZE_ACCEPTED, wrong_type=False)
        return optimize
    if isinstance(optimize, dict):
        method = optimize.get("method", "hyper")
        if not isinstance(method, str) or not (method == "hyper" or _is_preset(method)):
            raise _bad(caller, "optimize", optimize, _OPTIMIZE_ACCEPTED, wrong_type=False)
        others = sorted(str(k) for k in optimize if k != "method")
        if method != "hyper" and others:
            raise OptionError(
                f"{caller}: optimize={optimize!r}: the keys {', '.join(others)} are "
                f"HyperOptimizer's arguments, for method 'hyper' only, not {method!r}"
            )
        for k in optimize:
            if not isinstance(k, str):
                raise _bad(caller, "optimize", optimize, _OPTIMIZE_ACCEPTED)
        _check_hyper_args(caller, optimize)
        return optimize
    # an optimizer object: cotengra takes one with .search (a tree) or a callable (a path)
    if isinstance(optimize, (bool, int, float, complex, bytes, type, np.generic)) or not (
        hasattr(optimize, "search") or callable(optimize)
    ):
        raise _bad(caller, "optimize", optimize, _OPTIMIZE_ACCEPTED)
    return optimize


def _check_hyper_args(caller: str, optimize: dict) -> None:
    """The values of the HyperOptimizer arguments whose mistakes cotengra only finds while it
    searches (max_repeats=-1 raised KeyError 'tree', methods=['nope'] KeyError 'nope',
    minimize='nope' ValueError): checked here, before any work. Other keys go to cotengra as
    they are (its optimizer library's options among them)."""

    def fail(key: str, accepted: str, wrong_type: bool = False):
        cls = OptionTypeError if wrong_type else OptionError
        raise cls(
            f"{caller}: optimize={_short(optimize)}: {key}={_short(optimize[key])} is not "
            f"valid; accepted: {accepted}"
        )

    if "max_repeats" in optimize:
        n = optimize["max_repeats"]
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
            fail("max_repeats", "an int >= 1", True)
        if n < 1:
            fail("max_repeats", "an int >= 1")
    if optimize.get("max_time") is not None:
        t = optimize["max_time"]
        if isinstance(t, str):
            if not t.startswith(("rate:", "equil:")):
                fail("max_time", "seconds > 0, 'rate:R' or 'equil:N'")
        elif isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, float, np.number)):
            fail("max_time", "seconds > 0, 'rate:R' or 'equil:N'", True)
        elif not (math.isfinite(t) and t > 0):
            fail("max_time", "seconds > 0, 'rate:R' or 'equil:N'")
    if optimize.get("methods") is not None:
        from cotengra.hyperoptimizers.hyper import list_hyper_functions

        known = list_hyper_functions()
        methods = optimize["methods"]
        names = [methods] if isinstance(methods, str) else methods
        if not isinstance(names, (list, tuple)) or not all(isinstance(m, str) for m in names):
            fail("methods", f"a name or a list of names of {known}", True)
        if not names or any(m not in known for m in names):
            fail("methods", f"a name or a list of names of {known}")
    if "minimize" in optimize:
        from cotengra.scoring import get_score_fn

        try:
            get_score_fn(optimize["minimize"])
        except (ValueError, TypeError, KeyError, AttributeError):
            fail(
                "minimize",
                "'flops', 'size', 'write', 'combo', 'limit' (optionally '-N'), or "
                "a cotengra score function",
            )


def _is_preset(name: str) -> bool:
    """Whether cotengra (or opt_einsum, through it) knows the path preset ``name``."""
    from cotengra.interface import _PRESETS_TREE, preset_to_optimizer

    if name in _PRESETS_TREE:
        return True
    try:
        preset_to_optimizer(name)
    except (KeyError, ValueError, TypeError):
        return False
    return True


def _check_cache_dir(caller: str, cache_dir: Any) -> str | bool | None:
    accepted = "a folder (a str or os.PathLike), None (the user cache folder) or False (none)"
    if cache_dir is None or cache_dir is False:
        return cache_dir
    if not isinstance(cache_dir, (str, os.PathLike)):
        raise _bad(caller, "cache_dir", cache_dir, accepted)
    path = os.fspath(cache_dir)
    if not isinstance(path, str) or not path:
        raise _bad(caller, "cache_dir", cache_dir, accepted)
    if os.path.exists(path) and not os.path.isdir(path):
        raise OptionError(f"{caller}: cache_dir={path!r} exists and is not a folder")
    return path


def _check_scheduler(caller: str, client: Any) -> Any:
    if client is not None and not callable(getattr(client, "submit", None)):
        raise OptionTypeError(
            f"{caller}: scheduler={_short(client)} is not a dask.distributed.Client "
            "(accepted: a Client, or None)"
        )
    return client


# device= values already checked (a str or a tuple of str) -> the resolved name or names
_DEVICES: LRUCache[Any, str | tuple[str, ...]] = LRUCache("runtime.options.devices", 256)


def _check_device(caller: str, device: Any) -> str | tuple[str, ...] | None:
    if device is None:
        return None
    key = tuple(device) if isinstance(device, list) else device
    try:
        hit = _DEVICES.get(key)
    except TypeError:  # unhashable: a wrong type, said below
        hit = None
    if hit is not None:
        return hit
    names = device_names(caller, device)
    out = names[0] if len(names) == 1 else tuple(names)
    if isinstance(key, (str, tuple)):
        _DEVICES.put(key, out)
    return out


def device_names(caller: str, device: Any) -> list[str]:
    """The devices of ``device=``: one name, a list of names, or "kind:*" (every device of that
    kind present), each of a known kind with an index that exists; no device twice."""
    if isinstance(device, (list, tuple)):
        if not device:
            raise DeviceError(f"{caller}: device={device!r}: give at least one device")
        names = list(device)
    elif isinstance(device, str) and device.endswith(":*"):
        from tenloom.runtime.devices import devices

        kind = device[:-2]
        _check_kind(caller, device, kind)
        names = [f"{d.kind}:{d.index}" for d in devices() if d.kind == kind]
        if not names:
            raise DeviceError(f"{caller}: device={device!r}: no {kind!r} devices are present")
    else:
        names = [device]
    parsed = [parse_device_name(caller, name, device) for name in names]
    if len(set(parsed)) != len(parsed):  # 'cpu' and 'cpu:0' are one device
        raise DeviceError(f"{caller}: device={device!r} names a device twice")
    return names


def _check_kind(caller: str, device: Any, kind: str) -> None:
    from tenloom.runtime.backends import known_kinds

    if kind not in known_kinds():
        raise DeviceError(
            f"{caller}: device={_short(device)}: unknown device kind {kind!r}; valid kinds: "
            f"{', '.join(known_kinds())}"
        )


def parse_device_name(caller: str, name: Any, device: Any = None) -> tuple[str, int]:
    """(kind, index) of one device name such as 'cpu' or 'cuda:1', checked: a known kind, a
    non-negative index, and for the CPU index 0 (there is one CPU device)."""
    hit = _NAMES.get(name) if type(name) is str else None
    if hit is not None:  # evaluate's every call reads its device: checked once per name
        return hit
    whole = name if device is None else device
    # "evaluate: device='cpu:7'" or, in a list, "evaluate: device=['cpu', 'cpu:7']: 'cpu:7'"
    shown = f"{caller}: device={_short(whole)}" + ("" if whole is name else f": {name!r}")
    if not isinstance(name, str):
        raise OptionTypeError(
            f"{shown} is not a device name; accepted: a name like 'cpu', 'cuda:0' or "
            "'opencl:1', a list of names, or 'kind:*'"
        )
    kind, _, index = name.partition(":")
    _check_kind(caller, whole, kind)
    if index and not (index.isascii() and index.isdigit()):
        raise DeviceError(f"{shown}: the index {index!r} is not a non-negative int")
    idx = int(index) if index else 0
    if kind == "cpu" and idx != 0:
        raise DeviceError(
            f"{shown} does not exist; the CPU is one device, 'cpu' (or 'cpu:0'); its cores "
            "are used through threads="
        )
    _NAMES.put(name, (kind, idx))
    return kind, idx


# device names checked -> (kind, index)
_NAMES: LRUCache[str, tuple[str, int]] = LRUCache("runtime.options.device_names", 256)


def _check_precision(caller: str, precision: Any) -> str:
    from tenloom.runtime.precision import PRECISIONS

    accepted = ", ".join(repr(p) for p in PRECISIONS) + " (JAX's names)"
    if not isinstance(precision, str):
        raise _bad(caller, "precision", precision, accepted)
    if precision not in PRECISIONS:
        raise _bad(caller, "precision", precision, accepted, wrong_type=False)
    return precision


def _check_precision_devices(caller: str, precision: str, devices: Any) -> None:
    """precision= other than "highest" on a device that cannot run it (the default device
    where none is given): OptionError here, before any work."""
    from tenloom.runtime import session
    from tenloom.runtime.precision import check_devices

    names = (session.DEFAULT_DEVICE,) if devices is None else devices
    check_devices(caller, precision, names)


_CHECKS = {
    "precision": _check_precision,
    "feed": _check_feed,
    "device": _check_device,
    "passes": _check_passes,
    "optimize": _check_optimize,
    "cache_dir": _check_cache_dir,
    "threads": _check_threads,
    "memory_limit": _check_memory_limit,
    "scheduler": _check_scheduler,
    **{name: _check_bool(name) for name in _BOOL_OPTIONS},
}
