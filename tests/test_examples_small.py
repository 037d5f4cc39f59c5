"""The example scripts of examples/ (other than dmrg.py, tebd.py and mps_gradient.py, which
tests/test_examples.py covers) at their ``--small`` sizes: each ``main(["--small"])`` runs, its
returned numbers agree with the script's own NumPy reference (and, where cheap, with one made
here independently), and the output its header docstring promises is printed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from functools import reduce
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))

import circuit_amplitude  # noqa: E402
import inspect_graph  # noqa: E402
import mlp  # noqa: E402
import mps_expectation  # noqa: E402
import multi_device_slicing  # noqa: E402
import peps_norm  # noqa: E402
import quimb_interop  # noqa: E402
import vqe_gradient  # noqa: E402

SCRIPTS = [
    circuit_amplitude,
    inspect_graph,
    mlp,
    mps_expectation,
    multi_device_slicing,
    peps_norm,
    quimb_interop,
    vqe_gradient,
]


@pytest.mark.parametrize("module", SCRIPTS, ids=lambda m: m.__name__)
def test_header_docstring_says_what_how_and_prints(module):
    doc = module.__doc__
    assert f"python examples/{module.__name__}.py" in doc
    assert f"python examples/{module.__name__}.py --small" in doc
    assert "Prints" in doc


# the line of output each script ends with (its command line, run as a program)
LAST_LINE = {
    "circuit_amplitude": "|difference| =",
    "inspect_graph": "|y - NumPy| =",
    "mlp": "training accuracy",
    "mps_expectation": "|dE| =",
    "multi_device_slicing": "relative difference =",
    "peps_norm": "dense |psi|^2",
    "quimb_interop": "max |difference| =",
    "vqe_gradient": "exact ground energy",
}


@pytest.mark.parametrize("module", SCRIPTS, ids=lambda m: m.__name__)
def test_command_line(module, tmp_path):
    """``python examples/NAME.py --small`` as the header says, from the repository root."""
    if module is quimb_interop:
        pytest.importorskip("quimb.tensor")
    extra = ["--backend", "threads"] if module is multi_device_slicing else []
    extra += ["--out", str(tmp_path)] if module is inspect_graph else []
    run = subprocess.run(
        [sys.executable, "-W", "ignore", f"examples/{module.__name__}.py", "--small", *extra],
        cwd=EXAMPLES.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert LAST_LINE[module.__name__] in run.stdout.strip().splitlines()[-1]


def test_circuit_amplitude(capsys):
    out = circuit_amplitude.main(["--small"])
    text = capsys.readouterr().out
    assert (out["qubits"], out["depth"]) == (8, 6)
    assert abs(out["amplitude"] - out["reference"]) < 1e-12
    assert out["error"] == abs(out["amplitude"] - out["reference"])
    # independently: the circuit as a product of 2**n x 2**n matrices (Kronecker products)
    n = out["qubits"]
    psi = np.zeros(2**n, dtype=complex)
    psi[0] = 1.0
    for qubits, g in circuit_amplitude.random_circuit(n, out["depth"], seed=0):
        k = len(qubits)
        eye_left, eye_right = np.eye(2 ** qubits[0]), np.eye(2 ** (n - qubits[0] - k))
        psi = reduce(np.kron, [eye_left, g.reshape(2**k, 2**k), eye_right]) @ psi
    assert abs(out["amplitude"] - psi[0]) < 1e-12
    assert "tenloom      amplitude" in text and "state vector amplitude" in text
    assert "|difference| =" in text


def test_mps_expectation(capsys):
    out = mps_expectation.main(["--small"])
    text = capsys.readouterr().out
    assert (out["L"], out["chi"]) == (8, 4)
    assert abs(out["norm"] - 1.0) < 1e-12
    assert abs(out["sz"] - out["sz_ref"]) < 1e-12
    assert abs(out["energy"] - out["energy_ref"]) < 1e-12
    assert -0.5 <= out["sz"] <= 0.5
    assert "<psi|psi> =" in text and "|dE| =" in text and "dense:" in text


def test_peps_norm(capsys):
    out = peps_norm.main(["--small"])
    text = capsys.readouterr().out
    assert out["slices"] > 1  # the limit forced slicing
    assert out["sliced"] == pytest.approx(out["unsliced"], rel=1e-12)
    assert out["unsliced"] == pytest.approx(out["reference"], rel=1e-12)
    assert out["unsliced"] > 0
    assert f"{out['slices']} slices" in text and "sliced networks (memory_limit)" in text
    assert "relative difference =" in text and "dense |psi|^2      =" in text


def test_vqe_gradient(capsys):
    out = vqe_gradient.main(["--small"])
    text = capsys.readouterr().out
    assert out["energy0"] == pytest.approx(out["energy0_ref"], abs=1e-12)
    assert out["grad_error"] < 1e-7 * max(1.0, out["grad_scale"])
    e = out["energies"]
    assert len(e) == 6 and all(b < a for a, b in zip(e, e[1:]))  # descent lowers the energy
    assert out["exact"] <= min(e)  # variational
    assert "max |grad - finite differences| =" in text and "step   5: E =" in text
    assert "exact ground energy" in text


def test_mlp(capsys):
    out = mlp.main(["--small"])
    text = capsys.readouterr().out
    assert out["loss"] == pytest.approx(out["loss_ref"], rel=1e-12)
    assert out["grad_error"] < 1e-12
    assert len(out["losses"]) == 10
    assert out["loss_after"] < out["loss_before"]  # on all samples, computed in NumPy
    assert 0.0 <= out["accuracy"] <= 1.0
    assert "max |dW| against the NumPy backward pass =" in text
    assert "before," in text and "training accuracy" in text


@pytest.mark.parametrize("backend", ["auto", "threads"])
def test_multi_device_slicing(capsys, backend):
    out = multi_device_slicing.main(["--small", "--backend", backend])
    text = capsys.readouterr().out
    expected = multi_device_slicing.choose_backend(backend)
    assert out["backend"] == expected
    assert out["slices"] > 1
    assert out["relative_difference"] < 1e-12
    assert out["sliced"] == pytest.approx(out["unsliced"], rel=1e-12)
    # independently: NumPy's einsum of the same lattice
    arrays, subs = multi_device_slicing.lattice(4, 4, 3, seed=0)
    ref = np.einsum(*[x for a, s in zip(arrays, subs) for x in (a, s)], [], optimize="greedy")
    assert out["unsliced"] == pytest.approx(float(ref), rel=1e-12)
    assert f"{out['slices']} slices" in text and f"sliced on {expected}" in text
    assert "relative difference =" in text


def test_inspect_graph(capsys, tmp_path):
    out = inspect_graph.main(["--small", "--out", str(tmp_path)])
    text = capsys.readouterr().out
    assert out["error"] < 1e-12
    assert out["optimized_nodes"] < out["traced_nodes"]
    for head in ("tl.dump (as traced)", "tl.explain", "tl.dump (optimized)", "tl.to_networkx"):
        assert f"== {head} ==" in text
    assert "contraction networks seen by the order search" in text
    assert "|y - NumPy| =" in text
    try:
        import graphviz  # noqa: F401
    except ImportError:
        assert out["files"] == [] and "graphviz's Python package is missing" in text
        return
    suffix = ".svg" if shutil.which("dot") else ".dot"
    assert len(out["files"]) == 3
    for f in out["files"]:
        assert f.endswith(suffix) and Path(f).stat().st_size > 0 and f"wrote {f}" in text
        if suffix == ".svg":
            assert "<svg" in Path(f).read_text()


def test_quimb_interop(capsys):
    pytest.importorskip("quimb.tensor")
    out = quimb_interop.main(["--small"])
    text = capsys.readouterr().out
    assert out["max_difference"] < 1e-10
    for _bits, got, want in out["amplitudes"]:
        assert abs(got - want) < 1e-12
    assert out["energy"] == pytest.approx(out["energy_ref"], abs=1e-12)
    assert abs(out["overlap"] - out["overlap_ref"]) < 1e-10
    assert "max |difference| =" in text and "quimb/NumPy" in text


def test_quimb_interop_without_quimb(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "quimb", None)  # import quimb.tensor now raises ImportError
    monkeypatch.setitem(sys.modules, "quimb.tensor", None)
    out = quimb_interop.main(["--small"])
    assert "skipped" in out
    assert "quimb is not installed" in capsys.readouterr().out
