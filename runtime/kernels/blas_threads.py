"""One BLAS thread for the host's small LAPACK calls (issue 20).

OpenBLAS runs a small SVD's level-2 steps on all of its threads, and on a host with many cores
that costs more than the work: on a 16-core H100 host an 80 x 80 complex128 SVD took 16 ms
with gesvd and 7.3 ms with gesdd (16 threads), against 2.7 ms and 0.9 ms on one thread of a
2-core VM. The Gram route's tail factor and the CUDA backend's small matrices are such calls,
and they run while the GPU works, so their time is the kernel's.

``one_thread()`` limits the process's BLAS libraries to one thread around such a call
(threadpoolctl, as scikit-learn uses it), set and restored by the calling thread. The limit of
OpenBLAS's own threads is process-wide, and threadpoolctl lets one Python thread at a time
hold it (another's request does nothing): so the calls inside take turns (a lock, re-entrant
for a nested call), each restoring the limit and giving up the hold before the next. They
are single-threaded anyway; a large BLAS call on another thread in that window runs on one
thread too, for the millisecond or so of a small SVD. Without threadpoolctl it does nothing.

**Other threads' limits.** Where another thread holds a threadpoolctl limit, the call here
changes nothing (its own thread's request does nothing). The reverse is a hazard of
threadpoolctl's own between threads: a ``threadpool_limits`` entered on another thread while
a call here holds the limit at one thread reads 1 as the original, and restores 1 when it
leaves. That thread's program then runs its BLAS on one thread until something sets it
again, as with any two threads that use threadpoolctl at once.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

_LOCK = threading.RLock()
_CONTROLLER: list = []  # [ThreadpoolController or None], made once


def _controller():
    if not _CONTROLLER:
        with _LOCK:
            if not _CONTROLLER:
                try:
                    import scipy.linalg  # noqa: F401  (loads SciPy's own OpenBLAS before the scan)
                    from threadpoolctl import ThreadpoolController

                    _CONTROLLER.append(ThreadpoolController())
                except ImportError:
                    _CONTROLLER.append(None)
    return _CONTROLLER[0]


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    c = _controller()
    if c is None:
        yield
        return
    with _LOCK, c.limit(limits=1, user_api="blas"):
        yield
