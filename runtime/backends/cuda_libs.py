"""CUDA libraries called through ctypes where CuPy has no binding (issue 23's captured cuBLAS
GEMMs, issue 20's cuSOLVER gesvdp): the very library CuPy's own binding loaded, found in the
process's memory mappings, so both call one copy; else the first soname that loads."""

from __future__ import annotations

import ctypes


def cuda_library(stem: str, sonames: list[str]) -> tuple[ctypes.CDLL | None, list[str]]:
    """``(library, names tried)`` for ``stem`` (e.g. "libcublas"): the path mapped into this
    process (load CuPy's binding first), else each of ``sonames`` in turn; None where none
    loads."""
    path = None
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                name = line.rsplit(None, 1)[-1]
                if f"/{stem}.so" in name:
                    path = name
                    break
    except OSError:
        pass
    names = [path] if path else list(sonames)
    for n in names:
        try:
            return ctypes.CDLL(n), names
        except OSError:
            continue
    return None, names


CUBLAS_SONAMES = ["libcublas.so.13", "libcublas.so.12", "libcublas.so"]


def cublas_library() -> tuple[ctypes.CDLL | None, list[str]]:
    """libcublas as ``cuda_library`` finds it, after CuPy's binding has loaded its own (issue
    23's captured GEMMs and issue 20's rank-k products call the same library)."""
    from cupy_backends.cuda.libs import cublas as _binding  # noqa: F401  (loads it)

    return cuda_library("libcublas", CUBLAS_SONAMES)
