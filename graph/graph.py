"""``Graph``: the unit the passes transform: an ordered tuple of output nodes.

A Graph is immutable; passes return a new Graph (or the same object when nothing changed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from tenloom.graph.node import Node
from tenloom.graph.ops import Op
from tenloom.graph.traverse import schedule, toposort


@dataclass(frozen=True, eq=False)
class Graph:
    outputs: tuple[Node, ...]
    # annotations passes leave for later passes and for the runtime (e.g. contraction trees)
    meta: dict = field(default_factory=dict, compare=False)

    @cached_property
    def order(self) -> list[Node]:
        return toposort(self.outputs)

    @cached_property
    def schedule(self) -> list[Node]:
        """The order the runtime executes (and the cost model predicts memory for)."""
        return schedule(self.order)

    def __len__(self) -> int:
        return len(self.order)

    @cached_property
    def placeholders(self) -> list[Node]:
        return [n for n in self.order if n.op is Op.PLACEHOLDER]

    def with_outputs(self, outputs: tuple[Node, ...]) -> "Graph":
        if all(a is b for a, b in zip(outputs, self.outputs)):
            return self
        return Graph(tuple(outputs), dict(self.meta))
