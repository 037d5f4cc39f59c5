"""quimb's tensor networks contracted by tenloom, through autoray.

tenloom registers itself as an autoray backend (tenloom/interop.py): once quimb's arrays are
tenloom tensors (``tn.apply_to_arrays(tl.asarray)``), quimb's own code (``contract``,
``expec_TN_1D``, ``compress``) builds lazy tenloom graphs, and ``np.asarray`` of the result
evaluates them. Three workflows, each compared with quimb on NumPy:

- the amplitude <b|C|0...0> of a random quimb ``Circuit`` (U3 layers and CZ brickwork) for a
  few bitstrings: ``circ.amplitude_tn(b)`` moved to tenloom and contracted, and
  ``circ.amplitude(b, backend="tenloom")``;
- <psi|H|psi> of a random complex MPS (``MPS_rand_state``) with the Heisenberg MPO
  (``MPO_ham_heis``) by ``qtn.expec_TN_1D``;
- the MPS compressed by quimb's SVD sweep (``compress(max_bond=...)``) on tenloom arrays, and
  its overlap with the original state.

Without quimb the script says so and returns ``{"skipped": ...}``.

    python examples/quimb_interop.py --qubits 12 --depth 8 --L 24 --chi 16
    python examples/quimb_interop.py --small              # 6 qubits, depth 4, L = 8, chi = 4

Prints each amplitude, energy and overlap from tenloom and from quimb on NumPy, with
"max |difference| = ..." at the end.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tenloom as tl


def random_circuit(qtn, n: int, depth: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    circ = qtn.Circuit(n)
    for d in range(depth):
        for i in range(n):
            circ.apply_gate("U3", *rng.uniform(0, 2 * np.pi, 3), i)
        for i in range(d % 2, n - 1, 2):
            circ.apply_gate("CZ", i, i + 1)
    return circ


def on_tenloom(tn):
    """A copy of the quimb network whose arrays are tenloom tensors (lazy from here on)."""
    tn = tn.copy()
    tn.apply_to_arrays(tl.asarray)
    return tn


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--qubits", type=int, default=12)
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--L", type=int, default=24)
    p.add_argument("--chi", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--small", action="store_true", help="6 qubits, depth 4, L = 8, chi = 4")
    args = p.parse_args(argv)
    n, depth, L, chi = (6, 4, 8, 4) if args.small else (args.qubits, args.depth, args.L, args.chi)  # noqa: N806

    try:
        import quimb.tensor as qtn
    except ImportError as e:
        print(f"quimb is not installed ({e}); skipping: pip install quimb")
        return {"skipped": str(e)}

    diffs = []
    rng = np.random.default_rng(args.seed)
    circ = random_circuit(qtn, n, depth, args.seed)
    amplitudes = []
    t0 = time.perf_counter()
    for _ in range(3):
        bits = "".join(rng.choice(["0", "1"], n))
        want = complex(circ.amplitude(bits))  # quimb on NumPy
        tn = on_tenloom(circ.amplitude_tn(bits))
        got = tn.contract(all, output_inds=(), optimize="greedy")  # a lazy tl.Tensor
        assert isinstance(got, tl.Tensor), type(got)
        got = complex(np.asarray(got))
        via = complex(np.asarray(circ.amplitude(bits, backend="tenloom")))
        print(f"<{bits}|C|0>: tenloom {got:.12e}, backend='tenloom' {via:.12e}, "
              f"quimb/NumPy {want:.12e}")  # fmt: skip
        diffs += [abs(got - want), abs(via - want)]
        amplitudes.append((bits, got, want))

    psi = qtn.MPS_rand_state(L, chi, dtype=complex, seed=args.seed)
    ham = qtn.MPO_ham_heis(L)
    want_e = complex(qtn.expec_TN_1D(psi.H, ham, psi)).real
    p_t, h_t = on_tenloom(psi), on_tenloom(ham)
    got_e = qtn.expec_TN_1D(p_t.H, h_t, p_t)
    assert isinstance(got_e, tl.Tensor), type(got_e)
    got_e = complex(np.asarray(got_e)).real
    print(f"MPS L = {L}, chi = {chi}: <psi|H_heis|psi> tenloom {got_e:+.12f}, "
          f"quimb/NumPy {want_e:+.12f}")  # fmt: skip
    diffs.append(abs(got_e - want_e))

    ref, comp = psi.copy(), on_tenloom(psi)
    for mps in (ref, comp):
        mps.compress(max_bond=max(chi // 2, 1), cutoff=1e-10)
    got_o = complex(np.asarray(comp.H @ p_t))
    want_o = complex(ref.H @ psi)
    print(f"compressed to max_bond {comp.max_bond()}: <psi_c|psi> tenloom {got_o:.12f}, "
          f"quimb/NumPy {want_o:.12f}")  # fmt: skip
    diffs.append(abs(got_o - want_o))
    t_all = time.perf_counter() - t0
    print(f"max |difference| = {max(diffs):.2e}  ({t_all:.3f} s)")
    return {
        "amplitudes": amplitudes,
        "energy": got_e,
        "energy_ref": want_e,
        "overlap": got_o,
        "overlap_ref": want_o,
        "max_difference": max(diffs),
    }


if __name__ == "__main__":
    main()
