"""Two-site DMRG sweeps: tenloom against plain NumPy and quimb, in one process.

The S=1/2 Heisenberg chain (MPO bond dimension 5), L sites, bond dimension chi, from the same
random right-canonical MPS. Three implementations of one sweep (left to right and back):

- tenloom: examples/dmrg.py (effective Hamiltonian, environments, two-site tensor and
  ``tl.linalg.tensor_svd`` split as ``tl.function`` plans compiled per shape);
- numpy: the same ``DMRG`` class and the same Lanczos (examples/dmrg.py ``lanczos``) with
  kernels written in NumPy: ``tensordot`` in the contraction order tenloom's plan picks for
  the effective Hamiltonian (W W first, then R x, then W W with it, then L; checked against
  the plan's dump below), the environments by the usual three ``tensordot``, and
  ``numpy.linalg.svd`` cut at chi and at the cutoff;
- quimb: ``quimb.tensor.DMRG2`` on ``MPO_ham_heis`` (its own eigensolver, scipy's eigsh, with
  ``local_eig_tol`` set to the same 1e-10; its own canonization), when quimb imports.

Sweep 1 starts from the random state (for tenloom it includes tracing and compiling every
plan shape); later sweeps start from the previous one's state (steady state: the plans
exist). Each implementation runs sweep 1, then the later sweeps run in turn, one of each
implementation after the other, so that a change of the machine's load falls on all, each
after ``--settle`` seconds idle (0.5; untimed) in which the threads of the sweep before park:
a BLAS pool spins for a while after its work, and measured on the H100 host, tenloom's GPU
sweeps run right after its CPU sweeps took up to 0.50 s where they took 0.33-0.36 s alone.
Times are wall-clock seconds of each sweep; ratios are other / tenloom (sweep 1, and the median of
the later sweeps).

    python benchmarks/dmrg.py [--L 50] [--chi 128] [--sweeps 2] [--device cuda] [--json out]

With ``--device cuda`` tenloom's plans run on the GPU and the whole sweep stays there (the
plans take and return CuPy arrays; Lanczos runs in CuPy), and, when CuPy imports, a fourth
implementation runs the NumPy kernels with CuPy, also resident. ``--cpu-too`` adds tenloom on
the host's CPU in the same process (the GPU's speed-up over the same code on the CPU).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import dmrg as ex  # noqa: E402


class ArrayKernels:
    """The kernels of examples/dmrg.py ``Kernels`` in NumPy (or CuPy, ``xp``): same interface,
    same results, no tenloom."""

    def __init__(self, mpo: ex.MPO, chi: int, cutoff: float, xp=np):
        self.xp, self.chi, self.cutoff = xp, chi, cutoff
        W = xp.asarray(mpo.W)
        self.W = W
        # W W over the shared MPO bond: (w, y, s, t, u, v), out s, t and in u, v
        self.WW = xp.einsum("wxsu,xytv->wystuv", W, W)

    def _in(self, *arrays):
        return [self.xp.asarray(a) for a in arrays]

    def _out(self, *arrays):
        # results stay where they were made (the DMRG class keeps CuPy arrays on the GPU)
        return list(arrays) if len(arrays) > 1 else arrays[0]

    def heff(self, L, R, x):  # noqa: N803
        L, R, x = self._in(L, R, x)
        xp = self.xp
        rx = xp.tensordot(R, x, axes=([2], [3]))  # b y | c u v
        t = xp.tensordot(self.WW, rx, axes=([1, 4, 5], [1, 3, 4]))  # w s t | b c
        return self._out(xp.tensordot(L, t, axes=([1, 2], [0, 4])))  # a s t b

    def grow_left(self, L, A):  # noqa: N803
        L, A = self._in(L, A)
        xp = self.xp
        t = xp.tensordot(L, A, axes=([2], [0]))  # a w | u e
        t = xp.tensordot(t, self.W, axes=([1, 2], [0, 3]))  # a e | x s
        out = xp.tensordot(A.conj(), t, axes=([0, 1], [0, 3]))  # b | e x
        return self._out(out.transpose(0, 2, 1))

    def grow_right(self, R, B):  # noqa: N803
        R, B = self._in(R, B)
        xp = self.xp
        t = xp.tensordot(B, R, axes=([2], [2]))  # c u | b x
        t = xp.tensordot(self.W, t, axes=([1, 3], [3, 1]))  # w s | c b
        out = xp.tensordot(B.conj(), t, axes=([1, 2], [1, 3]))  # a | w c
        return self._out(out)

    def two_site(self, A, B):  # noqa: N803
        A, B = self._in(A, B)
        return self._out(self.xp.tensordot(A, B, axes=1))

    def lq(self, M):  # noqa: N803
        (M,) = self._in(M)
        q, r = self.xp.linalg.qr(M.conj().T)
        return self._out(r.conj().T, q.conj().T)

    def _split(self, theta, absorb: str):
        (theta,) = self._in(theta)
        xp = self.xp
        a, s, t, b = theta.shape
        u, sv, vh = xp.linalg.svd(theta.reshape(a * s, t * b), full_matrices=False)
        k = min(self.chi, sv.shape[0])
        keep = (sv[:k] > self.cutoff * sv[0]).astype(sv.dtype)
        discarded = xp.sum(sv * sv) - xp.sum((sv[:k] * keep) ** 2)
        u, sv, vh = u[:, :k] * keep, sv[:k] * keep, vh[:k] * keep[:, None]
        if absorb == "right":
            vh = sv[:, None] * vh
        else:
            u = u * sv
        rank = xp.sum(keep).astype(xp.int64)
        return self._out(u.reshape(a, s, k), vh.reshape(k, t, b), discarded, rank)

    def split_right(self, theta):
        return self._split(theta, "right")

    def split_left(self, theta):
        return self._split(theta, "left")

    def plans(self) -> int:
        return 0


def sweeper(run: ex.DMRG):
    """A function running one sweep of ``run`` and returning (seconds, energy)."""

    def sweep() -> tuple[float, float]:
        t0 = time.perf_counter()
        e = run.sweep()
        return time.perf_counter() - t0, e

    return sweep


def quimb_sweeper(L: int, chi: int, cutoff: float):  # noqa: N803
    """quimb's DMRG2 as a sweep function (right then left), or None when quimb is missing."""
    try:
        import quimb.tensor as qtn
    except ImportError:
        return None
    ham = qtn.MPO_ham_heis(L, j=1.0, cyclic=False)
    dmrg = qtn.DMRG2(ham, bond_dims=[chi], cutoffs=cutoff)
    dmrg.opts["local_eig_tol"] = 1e-10
    first = [True]

    def sweep() -> tuple[float, float]:
        t0 = time.perf_counter()
        opts = {"max_bond": chi, "cutoff": cutoff, "cutoff_mode": "rel"}
        dmrg.sweep("R", canonize=first[0], **opts)
        e = dmrg.sweep("L", canonize=False, **opts)
        first[0] = False
        return time.perf_counter() - t0, float(np.real(e))

    return sweep


def check_order(L_dim: int, chi: int, device: str) -> str:  # noqa: N803
    """The effective Hamiltonian's plan at bond dimension ``chi`` (its dump), and a check that
    the NumPy kernel gives the same numbers."""
    mpo = ex.heisenberg_mpo()
    k = ex.Kernels(mpo, chi, device)
    rng = np.random.default_rng(0)
    L = rng.standard_normal((chi, 5, chi))
    R = rng.standard_normal((chi, 5, chi))
    x = rng.standard_normal((chi, 2, 2, chi))
    ref = ArrayKernels(mpo, chi, 0.0).heff(L, R, x)
    got = k.heff(k.xp.asarray(L), k.xp.asarray(R), k.xp.asarray(x))
    got = got.get() if hasattr(got, "get") else got  # a CuPy result on --device cuda
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10)
    (plan, _) = next(iter(k.heff.plans.values()))
    return plan.dump()


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--L", type=int, default=50)
    p.add_argument("--chi", type=int, default=128)
    p.add_argument("--sweeps", type=int, default=3)
    p.add_argument("--cutoff", type=float, default=1e-14)
    p.add_argument("--device", default="cpu")
    p.add_argument("--no-quimb", action="store_true")
    p.add_argument("--no-numpy", action="store_true", help="leave out the NumPy (and CuPy) kernels")
    p.add_argument(
        "--cpu-too",
        action="store_true",
        help="with --device cuda: also tenloom on the host's CPU (the GPU's speed-up)",
    )
    p.add_argument(
        "--settle",
        type=float,
        default=0.5,
        help="seconds idle before each sweep (not timed): the threads of the sweep before "
        "(BLAS pools spin for a while after their work) park first, so that they do not slow "
        "the host side of the next implementation's sweep",
    )
    p.add_argument("--json", default=None, help="write the results here")
    args = p.parse_args(argv)

    print(check_order(args.L, args.chi, args.device))
    mpo = ex.heisenberg_mpo()
    start = ex.random_mps(args.L, 2, args.chi, seed=7)
    results: dict[str, list] = {}

    sweeps, matvecs = {}, {}

    def add(name: str, kernels=None, device: str = "cpu"):
        r = ex.DMRG(
            mpo,
            args.L,
            args.chi,
            cutoff=args.cutoff,
            device=device,
            mps=[a.copy() for a in start],
            kernels=kernels,
        )
        sweeps[name] = sweeper(r)
        matvecs[name] = r

    add("tenloom", device=args.device)
    if args.cpu_too and args.device != "cpu":
        add("tenloom-cpu", device="cpu")
    if not args.no_numpy:
        add("numpy", ArrayKernels(mpo, args.chi, args.cutoff))
    if args.device.startswith("cuda") and not args.no_numpy:
        try:
            import cupy
        except ImportError:
            cupy = None
        if cupy is not None:
            add("cupy", ArrayKernels(mpo, args.chi, args.cutoff, cupy))
    if not args.no_quimb:
        q = quimb_sweeper(args.L, args.chi, args.cutoff)
        if q is not None:
            sweeps["quimb"] = q
        else:
            print("quimb does not import: pip install quimb")
    # sweep 1 of each, then the later sweeps in turn (tenloom, numpy, ..., tenloom, ...), so
    # that a change of the machine's load falls on all of them
    results: dict[str, list] = {name: [] for name in sweeps}
    for _ in range(args.sweeps):
        for name, sweep in sweeps.items():
            time.sleep(args.settle)
            results[name].append(sweep())

    names = list(results)
    print(f"\nL = {args.L}, chi = {args.chi}, device = {args.device}")
    print(
        "| implementation | "
        + " | ".join(f"sweep {i + 1} s" for i in range(args.sweeps))
        + " | energy | matvecs | ratio sweep 1 | ratio later (median) |"
    )
    print("|---" * (args.sweeps + 5) + "|")
    base = results["tenloom"]

    def later(rows: list) -> float:
        return float(np.median([t for t, _ in rows[1:]])) if len(rows) > 1 else np.nan

    for n in names:
        rows = results[n]
        mv = matvecs[n].matvecs if n in matvecs else ""
        print(
            f"| {n} | "
            + " | ".join(f"{t:.2f}" for t, _ in rows)
            + f" | {rows[-1][1]:.12f} | {mv} | {rows[0][0] / base[0][0]:.2f} | "
            f"{later(rows) / later(base):.2f} |"
        )
    out = {"L": args.L, "chi": args.chi, "device": args.device, "results": results}
    out["matvecs"] = {n: r.matvecs for n, r in matvecs.items()}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
