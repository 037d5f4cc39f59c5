"""A sliced contraction spread over several GPUs, a Dask cluster, or CPU threads.

The network is a closed Lx x Ly square lattice of random real tensors (bond dimension D, one
leg per neighbour), one lazy ``tl.einsum``. With ``memory_limit=`` below its unsliced peak,
tenloom slices it (cotengra picks the indices; ``tl.explain`` reports them) and the slices are
independent tasks. Where they run is one option of ``evaluate``:

- ``device="cuda:*"``: every GPU keeps a copy of the operands and pulls the next slice when it
  is done with the last (``--backend gpus``; the default when ``tl.devices()`` lists CUDA);
- ``scheduler=client``: a ``dask.distributed.Client``; here a ``LocalCluster`` of two worker
  processes is started (``--backend dask``; the default without GPUs when dask.distributed
  imports), slices go out in chunks and partial sums are added as a tree;
- ``threads=2``: two CPU threads take slices (``--backend threads``; the fallback).

The result is compared with the unsliced evaluation on the CPU.

    python examples/multi_device_slicing.py --Lx 6 --Ly 6 --D 4
    python examples/multi_device_slicing.py --small                    # 4 x 4, D = 3
    python examples/multi_device_slicing.py --small --backend threads

Prints the backend chosen, the slicing (indices, "N slices", overhead), the unsliced and the
distributed value, and their relative difference.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np

import tenloom as tl


def lattice(Lx: int, Ly: int, D: int, seed: int = 0) -> tuple[list[np.ndarray], list[list[int]]]:  # noqa: N803
    """A closed open-boundary square lattice: the arrays and their integer index lists."""
    rng = np.random.default_rng(seed)
    labels: dict = {}
    arrays, subs = [], []
    for i in range(Lx):
        for j in range(Ly):
            legs = []
            for ni, nj in ((i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)):
                if 0 <= ni < Lx and 0 <= nj < Ly:
                    legs.append(labels.setdefault(frozenset([(i, j), (ni, nj)]), len(labels)))
            # entries of size ~ D**(-legs/2) keep the contracted value of order one
            arrays.append(rng.uniform(0.5, 1.5, (D,) * len(legs)) / D ** (len(legs) / 2))
            subs.append(legs)
    return arrays, subs


def choose_backend(name: str) -> str:
    if name != "auto":
        return name
    if any(d.kind == "cuda" for d in tl.devices()):
        return "gpus"
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        return "threads"
    return "dask"


@contextlib.contextmanager
def backend_options(backend: str):
    """The evaluate options for ``backend`` (a Dask LocalCluster lives inside the block)."""
    if backend == "gpus":
        yield {"device": "cuda:*"}, f"every GPU ({sum(d.kind == 'cuda' for d in tl.devices())})"
    elif backend == "dask":
        from dask.distributed import Client, LocalCluster

        cluster = LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        )
        client = Client(cluster)
        try:
            yield {"scheduler": client}, "a Dask LocalCluster of 2 worker processes"
        finally:
            client.close()
            cluster.close()
    elif backend == "threads":
        yield {"threads": 2}, "2 CPU threads"
    else:
        raise ValueError(f"unknown backend {backend!r}: auto, gpus, dask or threads")


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--Lx", type=int, default=6)
    p.add_argument("--Ly", type=int, default=6)
    p.add_argument("--D", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", choices=["auto", "gpus", "dask", "threads"], default="auto")
    p.add_argument("--memory-limit", default=None, help="default: 1/8 of the unsliced peak")
    p.add_argument("--small", action="store_true", help="4 x 4, D = 3")
    args = p.parse_args(argv)
    Lx, Ly, D = (4, 4, 3) if args.small else (args.Lx, args.Ly, args.D)  # noqa: N806

    arrays, subs = lattice(Lx, Ly, D, args.seed)
    y = tl.einsum(*[x for a, s in zip(arrays, subs) for x in (tl.asarray(a), s)], [])
    t0 = time.perf_counter()
    whole = tl.explain(y)
    (unsliced,) = tl.evaluate(y)
    t_whole = time.perf_counter() - t0
    # 1/8 of the unsliced peak, but room for the largest input twice over (a limit below one
    # input cannot be met by any slicing: evaluate raises MemoryLimitError)
    limit = args.memory_limit or max(whole.after.peak_bytes // 8, 2 * max(a.nbytes for a in arrays))
    report = tl.explain(y, memory_limit=limit)
    info = report.slicing[0] if report.slicing else None
    backend = choose_backend(args.backend)
    print(f"lattice {Lx} x {Ly}, D = {D}: {len(arrays)} tensors, unsliced peak "
          f"{whole.after.peak_bytes} bytes")  # fmt: skip
    if info is not None:
        inds = ", ".join(f"{label}:{size}" for label, size in info["indices"])
        print(f"memory_limit={limit}: sliced over [{inds}]: {info['slices']} slices, "
              f"flops overhead {info['overhead']:.3f}x")  # fmt: skip
    with backend_options(backend) as (opts, where):
        t0 = time.perf_counter()
        (spread,) = tl.evaluate(y, memory_limit=limit, **opts)
        t_spread = time.perf_counter() - t0
    unsliced, spread = float(unsliced), float(spread)
    rel = abs(spread - unsliced) / abs(unsliced)
    print(f"unsliced (CPU)      = {unsliced:.15e}  ({t_whole:.3f} s incl. path search)")
    print(f"sliced on {backend:<9} = {spread:.15e}  ({t_spread:.3f} s, {where})")
    print(f"relative difference = {rel:.2e}")
    return {
        "backend": backend,
        "slices": info["slices"] if info else 1,
        "unsliced": unsliced,
        "sliced": spread,
        "relative_difference": rel,
    }


if __name__ == "__main__":
    main()
