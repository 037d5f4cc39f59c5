"""``Options``: the one frozen, typed record of a call's options, from the user's keywords to
every pass.

The runtime parses and checks the keywords once (runtime/options.py ``parse_options``: names,
types, device names, sizes) and gives this record to the orchestrator (runtime/session.py),
which sets the fields only it knows (``target``; ``fold_constants`` and ``reverse_sweep`` for
the gradient pre-pass) and hands it to the passes as ``ctx.options``. The record lives here, in
passes/, so that the passes can read it without importing the runtime.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from tenloom.graph.errors import OptionTypeError


@dataclass(frozen=True)
class Options:
    """The checked options of one call (defaults where not given)."""

    # ---- what users give (evaluate, compile, grad ...), checked by runtime/options.py -------
    feed: Mapping[Any, Any] | None = None
    devices: tuple[str, ...] | None = None  # resolved names; None: the default device
    passes: tuple[str, ...] | None = None  # None: the default pipeline
    optimize: Any = None  # None: "auto"
    to_host: bool = True
    verify: bool = False
    cache_dir: str | bool | None = None  # None: the user cache folder; False: no disk cache
    progress: bool = False
    threads: int | None = None  # None: the default (runtime/session.py DEFAULT_THREADS)
    deterministic: bool = False
    memory_limit: int | None = None  # bytes
    scheduler: Any = None
    # contractions' arithmetic (runtime/precision.py): a run setting read by the CUDA kernels,
    # not in pass_key (no pass reads it; the optimized graph is the same at every precision)
    precision: str = "highest"
    # issue 23: capture and replay compiled programs as CUDA graphs (runtime/capture.py); a
    # run setting, not in pass_key
    cuda_graphs: bool = True
    # ---- what the orchestrator sets for the passes ----------------------------------------
    target: str | None = None  # the device the graph will run on (its fusion limits)
    fusion: Any = None  # a FusionLimits overriding the target's (passes/fuse_elementwise.py)
    # False in the gradient pre-pass only: prereduce keeps reductions of constants, and the
    # order pass leaves semiring networks whole (their rules differentiate the whole network)
    fold_constants: bool = True
    reverse_sweep: bool | str = False  # slices leave room for the reverse sweep / tangents
    # how many times its predicted run time the "auto" path search may spend (in trials):
    # 1 for evaluate, passes/contraction_order.py COMPILE_EFFORT for tl.compile
    search_effort: float = 1.0
    # the weight of a tree's multiply-adds added to its layout_cost when "auto" picks among
    # its trees: 0 for a value, tenloom/autodiff.py SWEEP_MADDS in a derivative's pre-pass
    # (each forward contraction has two cotangent or tangent contractions of its own size)
    sweep_madds: float = 0.0
    # the options given, normalized (``memory_limit`` in bytes, ``passes`` a tuple, ``device``
    # as given): what a saved plan records and what nested calls are given again (read-only)
    given: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "pass_key", _pass_key(self))

    # what in these options shapes the optimized graph, hashable; None: not cacheable
    pass_key: tuple | None = field(init=False, repr=False, compare=False)

    @classmethod
    def of(cls, options: Options | Mapping[str, Any] | None) -> Options:
        """``options`` as a record: a record as it is; a dict of option names (as tests and
        benchmarks give ``run_pipeline``) converted without the runtime's checks, ``device``
        to ``devices`` and ``memory_limit`` to bytes."""
        if isinstance(options, Options):
            return options
        if not options:
            return NO_OPTIONS
        values: dict[str, Any] = {}
        for name, value in options.items():
            if name == "device":
                values["devices"] = (
                    None if value is None else (value,) if isinstance(value, str) else tuple(value)
                )
            elif name == "memory_limit" and value is not None:
                from tenloom.passes.slicing import parse_bytes

                values[name] = parse_bytes(value)
            elif name == "passes" and value is not None:
                values[name] = tuple(value)
            elif name in _FIELDS:
                values[name] = value
            else:
                valid = ", ".join(sorted({*_FIELDS, "device"} - {"devices"}))
                raise OptionTypeError(f"unknown option {name!r}; valid options: {valid}")
        return cls(**values, given=MappingProxyType(dict(options)))


def _pass_key(o: Options) -> tuple | None:
    """The options the passes read, normalized: two records with the same key give the same
    optimized graph of the same outputs (with the same pipeline and target)."""
    if o.verify:
        return None  # verify= checks the passes as they run: never skipped by a cache
    optimize = o.optimize
    if optimize is None:
        optimize = "auto"
    elif isinstance(optimize, dict):
        optimize = ("dict", repr(sorted(optimize.items())))
    elif not isinstance(optimize, (str, bool)):
        return None  # an optimizer object: its own state decides
    return (
        optimize,
        o.memory_limit,
        o.threads,
        o.fold_constants,
        o.reverse_sweep,
        o.fusion,
        o.search_effort,
        o.sweep_madds,
    )


_FIELDS = frozenset(f.name for f in fields(Options) if f.init and f.name != "given")
NO_OPTIONS = Options()  # no options given: the common case, one shared record

__all__ = ["NO_OPTIONS", "Options"]
