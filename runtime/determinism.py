"""Run-time settings that kernels read while a graph runs: the worker count and whether
accumulations must happen in a fixed order (``deterministic=True``).

They are context variables, set by ``evaluate`` and carried into scheduler workers, so two
evaluations in different threads never see each other's settings.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

DETERMINISTIC: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "tenloom_deterministic", default=False
)
THREADS: contextvars.ContextVar[int] = contextvars.ContextVar("tenloom_threads", default=1)


@contextlib.contextmanager
def deterministic_mode(flag: bool, threads: int = 1) -> Iterator[None]:
    t1 = DETERMINISTIC.set(flag)
    t2 = THREADS.set(threads)
    try:
        yield
    finally:
        DETERMINISTIC.reset(t1)
        THREADS.reset(t2)
