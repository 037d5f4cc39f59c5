"""Test hooks: make a chosen node fail when it runs, to exercise error paths."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

_FAIL: dict[int, BaseException] = {}
_LOCK = threading.Lock()


# Seconds each slice of a Dask-run sliced network sleeps first (tests set it, to keep tasks in
# flight long enough to kill a worker mid-run).
slice_delay = 0.0


class InjectedFailure(RuntimeError):
    """The exception ``fail_node`` raises inside the chosen node."""


def injecting() -> bool:
    """Whether a test has asked some node to fail."""
    return bool(_FAIL)


def check(node) -> None:
    """Called by executors before a node runs; raises if a test asked this node to fail."""
    if _FAIL:
        exc = _FAIL.get(id(node))
        if exc is not None:
            raise exc


@contextlib.contextmanager
def fail_node(tensor_or_node, exc: BaseException | None = None) -> Iterator[None]:
    """Within the block, running ``tensor_or_node`` raises ``exc`` (an InjectedFailure)."""
    node = getattr(tensor_or_node, "node", tensor_or_node)
    with _LOCK:
        _FAIL[id(node)] = exc or InjectedFailure(f"injected failure in {node.op.value}")
    try:
        yield
    finally:
        with _LOCK:
            _FAIL.pop(id(node), None)
