"""Buffers for intermediates, reused from run to run of a compiled program.

    run k:   take(n, dtype) -> a free buffer of exactly n elements left by run k-1, or a new one
             when the last value living in a buffer is freed, the buffer goes back to the arena

A fresh NumPy array above glibc's mmap threshold is mapped on allocation and unmapped on free,
so every run pays a page fault per 4 KiB it writes (measured: a third of the lattice W3's
forward time, and run-to-run swings of 2x depending on what the process allocated before).
Each compiled program keeps an arena of the buffers its last run freed; the next run takes
them back by size. GEMM results, operand copies, layout copies and fused-region results are
taken from it (the kernels that write with ``out=``).

Safety: a buffer goes back only when nothing refers to it any more: no slot holds a value living
in its memory (views hold their base, so CPython's reference count of the buffer tells), and
never once it is (part of) an output.
What arenas keep between runs is bounded by ``POOL_BYTES`` over the whole process (256 MiB, or
``TENLOOM_POOL_BYTES``; 0 turns reuse between runs off; buffers beyond it are simply dropped),
goes with the program when the program is freed, and ``clear_pools()`` lets go of all of it.
"""

from __future__ import annotations

import contextvars
import os
import sys
import threading
import weakref

import numpy as np

POOL_BYTES = int(os.environ.get("TENLOOM_POOL_BYTES", 1 << 28))  # kept between runs, in all
# smaller buffers come from malloc's heap without page faults: not worth the bookkeeping, and
# a program with no intermediate this big runs without an arena at all
POOL_MIN_BYTES = 1 << 16
_HELD = [0]  # bytes kept by all arenas
_HELD_LOCK = threading.Lock()
_ARENAS: weakref.WeakSet = weakref.WeakSet()
_PROBE = {0: np.empty(0)}  # an array referred to only by this table (Arena.drop)


def root(arr: np.ndarray) -> np.ndarray:
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


class Arena:
    """Free buffers of one program by (elements, dtype), and those lent to the current run."""

    def __init__(self) -> None:
        self.free: dict[tuple, list[np.ndarray]] = {}
        self.lent: dict[int, np.ndarray] = {}  # id(buffer) -> buffer, while a run uses it
        self.held = 0  # bytes in self.free
        self.lock = threading.Lock()
        _ARENAS.add(self)

    def clear(self) -> None:
        """Let go of every free buffer."""
        with self.lock:
            self.free.clear()
            with _HELD_LOCK:
                _HELD[0] -= self.held
            self.held = 0

    # take, give and drop run for every pooled value of every run: each does no more than it
    # must.
    def take(self, n: int, dtype) -> np.ndarray:
        """A 1-d buffer of n elements of ``dtype`` (contents undefined)."""
        if not isinstance(dtype, np.dtype):
            dtype = np.dtype(dtype)
        nbytes = n * dtype.itemsize
        if nbytes < POOL_MIN_BYTES:
            return np.empty(n, dtype)
        with self.lock:
            bufs = self.free.get((n, dtype))
            buf = bufs.pop() if bufs else None
            if buf is not None:
                self.held -= nbytes
                self.lent[id(buf)] = buf
        if buf is None:
            buf = np.empty(n, dtype)
            with self.lock:
                self.lent[id(buf)] = buf
        else:
            with _HELD_LOCK:
                _HELD[0] -= nbytes
        return buf

    def give(self, buf: np.ndarray) -> None:
        """Return a buffer that no value uses any more (one this arena lent)."""
        nbytes = buf.nbytes
        with self.lock:
            if self.lent.pop(id(buf), None) is None:
                return
            with _HELD_LOCK:
                if _HELD[0] + nbytes > POOL_BYTES:
                    return
                _HELD[0] += nbytes
            self.held += nbytes
            self.free.setdefault((buf.size, buf.dtype), []).append(buf)

    # ---- value accounting, called by the executor ----------------------------------------
    def drop(self, slots: list, k: int) -> None:
        """Clear ``slots[k]``; the buffer its value lived in goes back when no other Python
        object refers to it any more: a value living in a buffer is a view, and every view
        holds a reference to its base, so CPython's reference count of the buffer says whether
        any slot (or output, or anything else) still uses its memory. This costs one count
        read where counting slots per buffer cost a dictionary update for every value."""
        value = slots[k]
        slots[k] = None
        if not isinstance(value, np.ndarray):
            return
        value = root(value)  # the view itself is gone with this rebinding
        if id(value) in self.lent:
            # no value uses it when it has no more references than an array held the same way
            # (by a table and this frame) that nothing else refers to: measured side by side
            # rather than a fixed count, which CPython versions may change
            probe = _PROBE[0]
            if sys.getrefcount(value) <= sys.getrefcount(probe):
                self.give(value)

    def finish(self) -> None:
        """End of a run: whatever is still lent (outputs, values of a failed run) is the
        caller's or garbage now, never reused."""
        with self.lock:
            self.lent.clear()

    # the module's lock and count bound here: an arena freed while the interpreter shuts down
    # may outlive the module's globals (a cache registry holding its program keeps it that long)
    def __del__(self, _lock=_HELD_LOCK, _held=_HELD) -> None:
        with _lock:
            _held[0] -= self.held


def clear_pools() -> int:
    """Free the buffers every program keeps between runs; returns the bytes let go."""
    total = 0
    for arena in list(_ARENAS):
        total += arena.held
        arena.clear()
    return total


def held_bytes() -> int:
    """Bytes all programs keep between runs."""
    return _HELD[0]


CURRENT: contextvars.ContextVar[Arena | None] = contextvars.ContextVar(
    "tenloom_arena", default=None
)
# False under a memory limit: a run then frees what it frees, so its peak is the predicted one
# (an arena keeps freed buffers of every size it saw, which can add up past the live set)
POOLING: contextvars.ContextVar[bool] = contextvars.ContextVar("tenloom_pooling", default=True)


def take(n: int, dtype) -> np.ndarray:
    """A buffer from the running program's arena (a plain new array outside a run)."""
    arena = CURRENT.get()
    return np.empty(n, dtype) if arena is None else arena.take(n, dtype)


def give(buf: np.ndarray) -> None:
    """Hand back a kernel's own temporary (taken with ``take``) as soon as it is done with."""
    arena = CURRENT.get()
    if arena is not None:
        arena.give(buf)
