"""The one IR node: immutable and hash-consed.

``make_node`` looks a node up by (op, attrs, input identities) in a weak intern table before
building it, so structurally identical subgraphs are the same object: ``a is b`` is structural
equality and common subexpressions are shared for free. The user's source line is recorded on
the node for messages but is not part of the key.
"""

from __future__ import annotations

import math
import sys
import weakref
from contextvars import ContextVar, Token
from typing import Any

import numpy as np
from tenloom.graph.ops import OPS, Op, op_def

# key -> weakref to the node. A plain dict of weak references (rather than WeakValueDictionary,
# whose get/set run in Python) keeps a lookup at C speed; each reference's callback removes
# its own entry when the node dies.
_INTERN: dict[tuple, "weakref.ref[Node]"] = {}


class Node:
    """A node of the computation graph. Never mutate one; build new nodes with make_node."""

    __slots__ = ("op", "inputs", "attrs", "shape", "dtype", "source", "__weakref__")

    op: Op
    inputs: tuple["Node", ...]
    attrs: tuple  # the op's attrs record (a NamedTuple, graph/ops/), () for ops without attrs
    shape: tuple[int, ...]
    dtype: np.dtype
    source: tuple[str, int] | None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def where(self) -> str:
        """``file:line`` of the user code that created this node, or ``<unknown>``."""
        if self.source is None:
            return "<unknown>"
        return f"{self.source[0]}:{self.source[1]}"

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Node is immutable")

    def __reduce__(self):
        raise TypeError("Node cannot be pickled; use tenloom.save")

    def __repr__(self) -> str:
        return f"Node({self.op.value}, shape={self.shape}, dtype={self.dtype})"


_set = object.__setattr__
_as_record = tuple.__new__  # (record class, tuple): NamedTuple._make without its Python frame


def _user_source(depth: int = 2) -> tuple[str, int] | None:
    """The innermost frame outside tenloom: where the user called us (the walk starts
    ``depth`` frames up: make_node's caller)."""
    f = sys._getframe(depth)
    while f is not None and f.f_globals.get("__name__", "").startswith("tenloom."):
        f = f.f_back
    if f is None:
        return None
    return (f.f_code.co_filename, f.f_lineno)


# (source,) while tenloom code that makes nodes only through its own frames runs in this thread
# or task (``pin_source``: the pass pipeline), else None: the source every node made meanwhile
# would find, found once (a TEBD energy's pipeline makes 700 nodes, each walking ten frames)
_PINNED: ContextVar[tuple | None] = ContextVar("tenloom_pinned_source", default=None)


def pin_source() -> Token:
    """Record the user's frame as seen from the caller (a tenloom function whose callees make
    nodes only through tenloom frames: the pass pipeline) as the source of the nodes made
    until ``unpin_source(token)``, instead of walking the stack for each. The same source the
    walk finds: every frame between those nodes and the caller is tenloom's."""
    return _PINNED.set((_user_source(2),))


def unpin_source(token: Token) -> None:
    _PINNED.reset(token)


def make_node(
    op: Op, inputs: tuple[Node, ...] = (), attrs: tuple = (), *, known: tuple | None = None
) -> Node:
    """Return the unique node for (op, inputs, attrs), running the op's shape/dtype rule once.

    ``attrs`` may be a plain tuple: the new node holds it as the op's attrs record
    (``OpDef.attrs``), which hashes and compares as the tuple, so either finds the node.
    ``known``: (shape, dtype) where the caller knows them already and the rule need not run (a
    pass rewriting a node into an equivalent one: the pairwise steps of an ordered network,
    its GEMMs); passes/verify.py runs every node's rule again after each pass in the tests."""
    # the op's code, not the op: a key of plain ints and tuples is untracked by the cyclic GC
    # after its first collection (that GC work dominated tracing)
    key = (op.code, attrs, *map(id, inputs))
    ref = _INTERN.get(key)
    if ref is not None:
        node = ref()
        if node is not None:
            return node
    d = OPS[op]
    record = d.attrs
    if record is not None and type(attrs) is not record:
        if len(attrs) != len(record._fields):
            raise TypeError(
                f"{op.value}: {len(attrs)} attributes for {record.__name__}{record._fields}"
            )
        attrs = _as_record(record, attrs)  # the op's typed record: equal to the tuple, same hash
    shape, dtype = d.infer(inputs, attrs) if known is None else known
    node = object.__new__(Node)
    _set(node, "op", op)
    _set(node, "inputs", inputs)
    _set(node, "attrs", attrs)
    _set(node, "shape", shape)
    _set(node, "dtype", dtype)
    pinned = _PINNED.get()
    _set(node, "source", _user_source() if pinned is None else pinned[0])
    ref = _Ref(node, _remove)
    ref.key = key
    existing = _INTERN.setdefault(key, ref)
    if existing is not ref:  # another thread interned the same node first
        other = existing()
        if other is not None:
            return other
        _INTERN[key] = ref
    return node


class _Ref(weakref.ref):
    """A weak reference that knows its intern-table key (one object, no closure per node)."""

    __slots__ = ("key",)


def _remove(ref: _Ref) -> None:
    if _INTERN.get(ref.key) is ref:
        del _INTERN[ref.key]


def rebuild(node: Node, inputs: tuple[Node, ...]) -> Node:
    """``node`` with new inputs (same op and attrs); the node itself when nothing changed."""
    if all(a is b for a, b in zip(inputs, node.inputs)) and len(inputs) == len(node.inputs):
        return node
    return make_node(node.op, inputs, node.attrs)


def interned_count() -> int:
    """How many nodes are alive in the intern table (for tests and stats)."""
    return len(_INTERN)


__all__ = [
    "Node",
    "make_node",
    "rebuild",
    "interned_count",
    "op_def",
    "pin_source",
    "unpin_source",
]
