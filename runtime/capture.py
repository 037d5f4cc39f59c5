"""Capture and replay (``cuda_graphs=``): what of a compiled program goes into CUDA graphs.

A program (runtime/program.py) is a list of steps. On a device that can capture
(runtime/backends/cuda_graphs.py), its steps are split once into **segments**: maximal runs
of steps that can be captured become one graph each, replayed with one launch per call; a
step that cannot (it synchronizes with the host, its shapes depend on data, its kernel calls
the host: ``UNCAPTURABLE`` below, or a step whose capture failed once) runs from Python
between them. Leaves (placeholders and constants not bound to the program) are the inputs:
their values are copied into buffers fixed at capture.

This module is the pure part, with no device in it: the run setting (``CUDA_GRAPHS``, on by
default, set from the ``cuda_graphs=`` option by runtime/session.py ``run_context``), the
segment plan, and its description for ``explain``. OpenCL and the CPU have no capture: the
setting means nothing there.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tenloom.graph.ops import OPS, Op, OpKind

# the run's cuda_graphs= (a context variable: each thread and async call has its own)
CUDA_GRAPHS: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "tenloom_cuda_graphs", default=True
)
# bytes a captured program may hold on its device: its own pool (the inputs copied in, the
# packed outputs, every intermediate) and the copy of its outputs a call returns; None: no
# bound. Under memory_limit= a run's own programs get 0, never captured (a captured pool stays
# held between the program's segments, while its sliced networks run), and each slice program
# its share of the limit (runtime/sliced.py ``slice_budget``)
BUDGET: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "tenloom_capture_budget", default=None
)
# runs of a program before its capture: the first runs step by step (kernels compiled, CuPy's
# caches and cuBLAS warm), the next one is captured and every later one replays
CAPTURE_AFTER = 1

# ops never captured, and why (explain says it)
UNCAPTURABLE: dict[Op, str] = {
    Op.SLICED: "runs its slices itself (each slice program is captured on its own)",
    Op.EINSUM: "cupy.einsum calls cuBLAS through CuPy, which refuses capture",
    Op.EXPM: "its squarings are counted on the host",
    Op.SEMIRING_EINSUM: "semiring kernels choose their tiling on the host",
    Op.GATHER: "its indices' bounds are checked on the host",
}
_UNCAPTURABLE_KINDS: dict[OpKind, str] = {
    OpKind.LINALG: "cuSOLVER's status is read on the host",
}
_FFT = {Op.FFT_C2C, Op.FFT_R2C, Op.FFT_C2R}
_LEAVES = (Op.CONST, Op.PLACEHOLDER)


def why_not(node: Any) -> str | None:
    """Why ``node``'s step cannot be captured, or None where it can (leaves are inputs)."""
    op = node.op
    if op in UNCAPTURABLE:
        return UNCAPTURABLE[op]
    if op in _FFT:
        return "cuFFT plans are made and cached on the host"
    if op is Op.POW and node.dtype.kind == "i":
        return "negative integer exponents are checked on the host"
    return _UNCAPTURABLE_KINDS.get(OPS[op].kind)


def run_off_reason(options: Any, threads: int) -> str | None:
    """Why a run with ``options`` on ``threads`` threads goes step by step whatever its
    program (None: it may capture). One rule for the run (runtime/session.py
    ``run_context``) and ``explain``."""
    if not options.cuda_graphs:
        return "cuda_graphs=False"
    if options.progress:
        return "progress=True counts each kernel as it runs"
    if options.precision != "highest":
        return f"precision={options.precision!r} runs its lowered GEMMs step by step"
    if threads > 1:
        return "threads>1 runs independent steps concurrently"
    if options.deterministic:
        # a replay's GEMMs read operands in place where the first run copied them: other
        # roundings, so the same call could give other bits from one run to the next
        return "deterministic=True keeps every run's kernels the first run's"
    return None


# the device modules' "let go of every capture not in use" (runtime/backends/cuda_graphs.py
# registers its own on import): a run under memory_limit= starts with no capture held, and a
# sliced network's slice programs let theirs go when it has run
RELEASERS: list = []


def release_captures() -> None:
    """Let go of every capture not in use now, on every device module loaded."""
    for release in RELEASERS:
        release()


# explain's line for a run's own program under memory_limit= (BUDGET above)
LIMITED = "memory_limit= captures slice programs only, each within its share of the limit"


@contextlib.contextmanager
def graphs_mode(on: bool) -> Iterator[None]:
    """``cuda_graphs=`` for the runs inside the block."""
    token = CUDA_GRAPHS.set(bool(on))
    try:
        yield
    finally:
        CUDA_GRAPHS.reset(token)


@contextlib.contextmanager
def capture_budget(nbytes: int | None) -> Iterator[None]:
    """``BUDGET`` for the runs inside the block."""
    token = BUDGET.set(nbytes)
    try:
        yield
    finally:
        BUDGET.reset(token)


@dataclass(frozen=True)
class Segment:
    """Steps ``start`` to ``stop`` (exclusive) of the run's steps: one captured graph
    (``captured``) or steps run one by one from Python, with the reason of the first."""

    start: int
    stop: int
    captured: bool
    reason: str = ""


def plan_segments(nodes: Sequence[Any], refused: dict[int, str]) -> list[Segment]:
    """The segments of a program whose steps compute ``nodes`` in order: leaves (placeholders
    and constants) are inputs and join whichever segment is around them; ``why_not`` and
    ``refused`` (step index -> reason: steps whose capture failed) mark the steps run from
    Python; consecutive such steps form one segment. A program with no kernel is one
    uncaptured segment."""
    segments: list[Segment] = []
    start, captured, reason = 0, None, ""
    for k, node in enumerate(nodes):
        if node.op in _LEAVES:
            continue
        why = refused.get(k) or why_not(node)
        here = why is None
        if captured is None:
            captured, reason = here, why or ""
        elif here != captured:
            segments.append(Segment(start, k, captured, reason))
            start, captured, reason = k, here, why or ""
    if captured is None:  # leaves only
        return [Segment(0, len(nodes), False, "no kernels")]
    segments.append(Segment(start, len(nodes), captured, reason))
    return segments


def describe(segments: Sequence[Segment], nodes: Sequence[Any]) -> list[str]:
    """One line per segment for ``explain``: its kernels, captured or why not."""
    lines = []
    for s in segments:
        ops = [n.op.value for n in nodes[s.start : s.stop] if n.op not in _LEAVES]
        if s.captured:
            lines.append(f"captured graph: {len(ops)} kernels (steps {s.start}-{s.stop - 1})")
        else:
            first = ops[0] if ops else "-"
            lines.append(
                f"from Python: {len(ops)} kernels (steps {s.start}-{s.stop - 1}; "
                f"{first}: {s.reason})"
            )
    return lines


def explain_segments(graph: Any, options: Any) -> list[str] | None:
    """``explain``'s lines for the run of ``graph`` (an optimized graph) with ``options``
    (an Options record): its program's segments, and each sliced network's slice program's,
    where the run's first device is a CUDA one and ``cuda_graphs`` is on (None elsewhere).
    Planned from the ops alone: a step whose capture fails at run time runs from Python
    besides (the run then keeps it out)."""
    from tenloom.runtime import session

    names = session.run_devices(options)
    if not names[0].startswith("cuda"):
        return None
    off = run_off_reason(options, options.threads or session.DEFAULT_THREADS)
    if off is not None:
        return [f"not captured: {off}"]
    order = graph.schedule
    limited = options.memory_limit is not None
    lines = [f"not captured: {LIMITED}"] if limited else describe(plan_segments(order, {}), order)
    from tenloom.runtime.sliced import _inner_of

    for node in order:
        if node.op is Op.SLICED:
            inner = _inner_of(node)[0].schedule
            lines += ["each slice's program:"]
            lines += ["  " + x for x in describe(plan_segments(inner, {}), inner)]
            if limited:
                lines += ["  (captured only where its pool fits its share of memory_limit=)"]
    return lines


__all__ = [
    "explain_segments",
    "CAPTURE_AFTER",
    "BUDGET",
    "CUDA_GRAPHS",
    "LIMITED",
    "RELEASERS",
    "Segment",
    "UNCAPTURABLE",
    "capture_budget",
    "describe",
    "graphs_mode",
    "plan_segments",
    "release_captures",
    "run_off_reason",
    "why_not",
]
