"""The MPS examples (examples/dmrg.py, tebd.py, mps_gradient.py) against exact diagonalization
of Hamiltonians built here independently (Kronecker products of Pauli/spin matrices, not the
examples' MPOs)."""

from __future__ import annotations

import sys
from functools import reduce
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

import dmrg  # noqa: E402
import mps_gradient  # noqa: E402
import tebd  # noqa: E402

SX = sp.csr_matrix([[0.0, 0.5], [0.5, 0.0]])
SY = sp.csr_matrix([[0.0, -0.5j], [0.5j, 0.0]])
SZ = sp.csr_matrix([[0.5, 0.0], [0.0, -0.5]])


def _site(op, i: int, L: int):  # noqa: N803
    mats = [sp.identity(2, format="csr")] * L
    mats[i] = op
    return reduce(lambda a, b: sp.kron(a, b, format="csr"), mats)


def heisenberg_matrix(L: int):  # noqa: N803
    """sum_i S_i . S_{i+1} on an open chain, from Sx, Sy, Sz (real in the end)."""
    h = sum(_site(s, i, L) @ _site(s, i + 1, L) for i in range(L - 1) for s in (SX, SY, SZ))
    return sp.csr_matrix(h.real)


def tfi_matrix(L: int, g: float):  # noqa: N803
    """-sum_i Z_i Z_{i+1} - g sum_i X_i with Pauli matrices (2 S)."""
    zz = sum(_site(2 * SZ, i, L) @ _site(2 * SZ, i + 1, L) for i in range(L - 1))
    x = sum(_site(2 * SX, i, L) for i in range(L))
    return sp.csr_matrix(-zz - g * x)


def ground_energy(h) -> float:
    return float(spla.eigsh(h, k=1, which="SA", tol=1e-13)[0][0])


# ---- DMRG ----------------------------------------------------------------------------------


@pytest.mark.parametrize("L, chi", [(8, 16), (10, 32), (12, 64)])
def test_dmrg_heisenberg_matches_exact_diagonalization(L, chi):
    run = dmrg.DMRG(dmrg.heisenberg_mpo(), L, chi, seed=1)
    energies = run.run(3)
    exact = ground_energy(heisenberg_matrix(L))
    assert abs(energies[-1] - exact) < 1e-8
    # the state itself has that energy (an independent contraction of <psi|H|psi>)
    assert abs(dmrg.expectation(run.mps, run.mpo) - exact) < 1e-8
    # bond dimensions bounded by chi and the exact Schmidt ranks
    for i, a in enumerate(run.mps[:-1]):
        assert a.shape[2] <= min(chi, 2 ** (i + 1), 2 ** (L - i - 1))


@pytest.mark.parametrize("g", [0.5, 1.0, 1.5])
def test_dmrg_transverse_field_ising(g):
    L = 10
    energies = dmrg.DMRG(dmrg.tfi_mpo(1.0, g), L, 32).run(3)
    assert abs(energies[-1] - ground_energy(tfi_matrix(L, g))) < 1e-8


def test_dmrg_critical_ising_closed_form():
    # open chain at g = J = 1: E0 = 1 - 1 / sin(pi / (2 (2L + 1))) (free fermions)
    L = 24
    energy = dmrg.DMRG(dmrg.tfi_mpo(1.0, 1.0), L, 24).run(3)[-1]
    assert abs(energy - (1 - 1 / np.sin(np.pi / (2 * (2 * L + 1))))) < 1e-8


def test_dmrg_complex_and_eigsh_agree_with_real_lanczos():
    L, chi = 8, 16
    exact = ground_energy(heisenberg_matrix(L))
    complex_run = dmrg.DMRG(dmrg.heisenberg_mpo(), L, chi, dtype=np.complex128)
    assert complex_run.mps[0].dtype == np.complex128
    assert abs(complex_run.run(3)[-1] - exact) < 1e-8
    eigsh_run = dmrg.DMRG(dmrg.heisenberg_mpo(), L, chi, eigensolver="eigsh")
    assert abs(eigsh_run.run(3)[-1] - exact) < 1e-8


def test_dmrg_truncation_is_variational_and_reports_discarded_weight():
    L = 12
    exact = ground_energy(heisenberg_matrix(L))
    run = dmrg.DMRG(dmrg.heisenberg_mpo(), L, 4)
    energy = run.run(3)[-1]
    assert max(a.shape[2] for a in run.mps) == 4
    assert 1e-7 < energy - exact < 1e-1  # above the ground state, not far
    assert run.discarded > 1e-8  # a cut at chi = 4 discards weight


def test_lanczos_lowest_eigenpair():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((60, 60))
    h = a + a.T
    w, v = np.linalg.eigh(h)
    e, x = dmrg.lanczos(lambda y: h @ y, rng.standard_normal(60), krylov=20, tol=1e-11)
    assert abs(e - w[0]) < 1e-10
    assert abs(abs(x @ v[:, 0]) - 1) < 1e-10
    # an exact eigenvector as the start: the Krylov space is invariant at once
    e, x = dmrg.lanczos(lambda y: h @ y, v[:, 0].copy())
    assert abs(e - w[0]) < 1e-12


def test_dmrg_bad_arguments():
    with pytest.raises(ValueError, match="L >= 2"):
        dmrg.DMRG(dmrg.heisenberg_mpo(), 1, 4)
    with pytest.raises(ValueError, match="eigensolver"):
        dmrg.DMRG(dmrg.heisenberg_mpo(), 4, 4, eigensolver="davidson")
    with pytest.raises(ValueError, match="unknown model"):
        dmrg.make_mpo("xyz")


def test_dmrg_main_cli(capsys):
    energies = dmrg.main(["--L", "8", "--chi", "16", "--sweeps", "2", "--model", "tfi"])
    assert len(energies) == 2
    assert abs(energies[-1] - ground_energy(tfi_matrix(8, 1.0))) < 1e-8
    assert "E0 = " in capsys.readouterr().out


def test_two_site_terms_sum_to_the_hamiltonian():
    L = 5
    for model, ref in (("heisenberg", heisenberg_matrix(L)), ("tfi", tfi_matrix(L, 0.7))):
        terms = dmrg.bond_term(model, 1.0, 0.7, L)
        h = sum(
            sp.kron(sp.kron(sp.identity(2**i), t), sp.identity(2 ** (L - i - 2)))
            for i, t in enumerate(terms)
        )
        np.testing.assert_allclose(h.toarray(), ref.toarray(), atol=1e-14)


# ---- TEBD ----------------------------------------------------------------------------------


def test_tebd_imaginary_time_converges_with_fourth_order_energy_error():
    # a second-order splitting leaves the state off by O(dt^2), so the energy (quadratic
    # around the ground state) by O(dt^4): halving dt divides the error by about 16
    L = 6
    exact = ground_energy(heisenberg_matrix(L))
    errors = []
    for dt in (0.2, 0.1):
        energy, _ = tebd.ground_state("heisenberg", L, 8, dt, tol=1e-13, max_steps=4000)
        errors.append(energy - exact)
    assert 0 < errors[0] < 1e-5
    assert 12 < errors[0] / errors[1] < 20


def test_tebd_real_time_matches_exact_evolution_to_second_order():
    L, t_max = 8, 1.0
    h = heisenberg_matrix(L)
    psi = np.zeros(2**L)
    psi[int("01" * (L // 2), 2)] = 1.0  # up, down, ... with up = index 0
    psi_t = spla.expm_multiply(-1j * t_max * h, psi)
    exact = np.array([np.vdot(psi_t, _site(SZ, i, L) @ psi_t).real for i in range(L)])
    errors = []
    for dt in (0.1, 0.05):
        run = tebd.TEBD(dmrg.bond_term("heisenberg", L=L), tebd.neel_state(L), 16)
        run.evolve(dt, round(t_max / dt), imaginary=False)
        assert run.mps[0].dtype == np.complex128
        sz = tebd.local_expectations(run.mps, np.diag([0.5, -0.5]))
        errors.append(np.max(np.abs(sz - exact)))
    assert errors[0] < 1e-2
    assert 3 < errors[0] / errors[1] < 5  # O(dt^2)


def test_tebd_truncates_to_chi():
    L = 10
    run = tebd.TEBD(dmrg.bond_term("heisenberg", L=L), tebd.neel_state(L), 4)
    run.evolve(0.1, 5, imaginary=False)
    assert max(a.shape[2] for a in run.mps) == 4
    assert run.discarded > 0


# ---- gradient optimization -----------------------------------------------------------------


def test_gradient_mps_energy_and_gradient_against_finite_differences():
    L, chi = 6, 4
    mpo = dmrg.heisenberg_mpo()
    problem = mps_gradient.GradientMPS(mpo, L, chi)
    rng = np.random.default_rng(5)
    x = rng.standard_normal(sum(problem.sizes))
    energy, grad = problem(x)
    # the energy of the same state contracted by the DMRG example's (QR-free) expectation
    assert abs(energy - dmrg.expectation(problem.unflatten(x), mpo)) < 1e-12
    for _ in range(3):
        v = rng.standard_normal(x.size)
        h = 1e-6
        fd = (problem(x + h * v)[0] - problem(x - h * v)[0]) / (2 * h)
        assert abs(fd - grad @ v) < 1e-7 * max(1.0, abs(fd))


def test_gradient_mps_reaches_the_exact_ground_state():
    L, chi = 6, 8  # chi = 2**(L/2): the MPS family holds the exact ground state
    mpo = dmrg.heisenberg_mpo()
    exact = ground_energy(heisenberg_matrix(L))
    assert abs(mps_gradient.exact_energy(mpo, L) - exact) < 1e-10
    energy, _, _, reached = mps_gradient.ground_state(mpo, L, chi, maxiter=3000, exact=exact)
    assert abs(energy - exact) < 1e-6
    assert 1e-6 in reached


# ---- the targets (a few seconds each) ----------------------------------------------


def test_dmrg_heisenberg_L20_chi64_target():  # noqa: N802
    energies = dmrg.DMRG(dmrg.heisenberg_mpo(), 20, 64).run(6)
    assert abs(energies[-1] - dmrg.EXACT_HEISENBERG_L20) < 1e-8


def test_gradient_mps_L10_chi16_target():  # noqa: N802
    mpo = dmrg.heisenberg_mpo()
    exact = ground_energy(heisenberg_matrix(10))
    energy, _, _, reached = mps_gradient.ground_state(mpo, 10, 16, maxiter=3000, exact=exact)
    assert 1e-6 in reached
    assert 0 < energy - exact < 1e-6
