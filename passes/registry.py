"""The pass registry: name -> pure ``Graph -> Graph`` function."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tenloom.graph.graph import Graph
from tenloom.passes.options import Options

PassFn = Callable[[Graph, "PassContext"], Graph]


@dataclass
class PassContext:
    """The options a pass may read (a frozen, typed record: ``ctx.options.optimize``,
    ``ctx.options.memory_limit`` ...) and where it records its stats."""

    options: Options
    stats: dict[str, dict[str, Any]]

    def record(self, pass_name: str, **values: Any) -> None:
        self.stats.setdefault(pass_name, {}).update(values)


PASSES: dict[str, PassFn] = {}


def register_pass(name: str) -> Callable[[PassFn], PassFn]:
    def deco(fn: PassFn) -> PassFn:
        if name in PASSES:
            raise ValueError(f"pass {name!r} is already registered")
        PASSES[name] = fn
        return fn

    return deco


def get_pass(name: str) -> PassFn:
    try:
        return PASSES[name]
    except KeyError:
        valid = ", ".join(sorted(PASSES))
        raise KeyError(f"unknown pass {name!r}; valid passes: {valid}") from None
