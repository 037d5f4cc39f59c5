"""Backend registry: device kind -> module, imported on first use (no heavy import at startup)."""

from __future__ import annotations

import importlib
from typing import Any

from tenloom.graph.errors import DeviceError
from tenloom.passes.fuse_elementwise import FusionLimits, register_fusion_limits
from tenloom.runtime.codegen import PORTABLE  # registers every kind's fusion limits

# kind -> (module, extra that provides its dependency)
_MODULES: dict[str, tuple[str, str | None]] = {
    "cpu": ("tenloom.runtime.backends.cpu", None),
    "cuda": ("tenloom.runtime.backends.cuda", "cuda13"),
    "rocm": ("tenloom.runtime.backends.cuda", "rocm"),
    "opencl": ("tenloom.runtime.backends.opencl", "opencl"),
}
_LOADED: dict[tuple[str, int], Any] = {}


def register_backend(
    kind: str, module: str, extra: str | None = None, fusion: FusionLimits = PORTABLE
) -> None:
    """Device ``kind`` runs on the backend of ``module`` (its class ``Backend``, see
    runtime/backends/base.py), whose fused elementwise kernels take ``fusion``'s regions."""
    if kind in _MODULES:
        raise ValueError(f"backend {kind!r} is already registered")
    _MODULES[kind] = (module, extra)
    register_fusion_limits(kind, fusion)


def get_backend(kind: str, index: int = 0) -> Any:
    """The backend object for device ``kind:index``, importing its module the first time."""
    be = _LOADED.get((kind, index))
    if be is not None:
        return be
    if kind not in _MODULES:
        valid = ", ".join(sorted(_MODULES))
        raise DeviceError(f"unknown device kind {kind!r}; valid kinds: {valid}")
    module, extra = _MODULES[kind]
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        hint = f"; install it with pip install 'tenloom[{extra}]'" if extra else ""
        raise DeviceError(f"backend {kind!r} is not available ({e}){hint}") from e
    be = _LOADED[(kind, index)] = mod.Backend() if kind == "cpu" else mod.Backend(kind, index)
    return be


def loaded() -> list[Any]:
    """The backends opened so far."""
    return list(_LOADED.values())


def known_kinds() -> list[str]:
    return sorted(_MODULES)
