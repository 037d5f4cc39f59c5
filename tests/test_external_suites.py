"""NumPy's and opt_einsum's own einsum tests, run in place against tenloom.

The test modules ship inside the installed packages; they run in a subprocess
(``pytest --pyargs``) with the ``einsum_shim`` plugin (tests/einsum_shim.py), which hands those
modules tenloom-backed ``np.einsum`` / ``contract`` / ``contract_expression`` and writes a JSON
report: every test's outcome, how often each shim was called, and every result that disagreed
with ``numpy.einsum`` on the same arguments. Here we check that report: every failure is one of
the documented design differences below (docs/reliability.md explains each), each of those
still happens, enough tests pass, the shims really ran, and no value disagreed with NumPy.

The same run by hand (the report lands in r.json; drop ``--einsum-shim-optimize-subset`` to run
all 13 of opt_einsum's optimize= names, not six: 30 s of CPU instead of 17)::

    PYTHONPATH=tests python -m pytest -p einsum_shim --einsum-shim-report=r.json \\
        --einsum-shim-optimize-subset -q -p no:cacheprovider --pyargs \\
        numpy._core.tests.test_einsum opt_einsum.tests.test_contract \\
        opt_einsum.tests.test_edge_cases opt_einsum.tests.test_input
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest

SUITES = (
    "numpy._core.tests.test_einsum",
    "opt_einsum.tests.test_contract",
    "opt_einsum.tests.test_edge_cases",
    "opt_einsum.tests.test_input",
)
FILES = {
    "numpy._core.tests.test_einsum": "numpy/_core/tests/test_einsum.py",
    "opt_einsum.tests.test_contract": "opt_einsum/tests/test_contract.py",
    "opt_einsum.tests.test_edge_cases": "opt_einsum/tests/test_edge_cases.py",
    "opt_einsum.tests.test_input": "opt_einsum/tests/test_input.py",
}


@dataclass(frozen=True)
class DesignDifference:
    """Tests allowed to fail: ``tests`` matches their node ids, and the failure message must
    match ``failure`` (so a wrong value in an allowed test still fails here)."""

    name: str
    tests: str
    failure: str
    reason: str


DESIGN_DIFFERENCES = (
    DesignDifference(
        "non-ASCII subscripts",
        r"test_contract\.py::(test_compare(_blas)?_greek\[|test_some_non_alphabet_maintains_order$)",
        r"ShapeError: einsum: invalid subscript character '[^\x00-\x7f]'",
        "string subscripts are the 52 ASCII letters, as in NumPy; opt_einsum's extension to any "
        "Unicode character is not taken over (more labels: the integer-sublist form)",
    ),
    DesignDifference(
        "object and long double dtypes",
        r"test_einsum\.py::TestEinsum::(test_einsum_sums_(object|longdouble|clongdouble)"
        r"|test_object_loop|test_einsum_object_errors|test_different_paths\[[gG]\])$",
        r"DTypeError: einsum: dtype (object|float96|float128|complex192|complex256) is not "
        r"supported",
        "no backend has kernels for Python objects or 80-bit floats; rejected with DTypeError "
        "when the op is built",
    ),
    DesignDifference(
        "results are new arrays, not views",
        r"test_einsum\.py::TestEinsum::test_einsum_views$",
        r"AssertionError",
        "a lazy graph's result is a fresh array (NumPy returns a view of the input for "
        "transposes and diagonals, so writing to it writes to the input)",
    ),
    DesignDifference(
        "integer sublist labels beyond 0..51",
        r"test_einsum\.py::TestEinsum::test_subscript_range$",
        r"ValueError not raised",
        "the integer-sublist form takes any int as a label (networks with more than 52 indices); "
        "NumPy rejects labels outside 0..51",
    ),
    DesignDifference(
        "no explicit contraction path",
        r"test_einsum\.py::TestEinsumPath::test_path_type_input_invalid$",
        r"RuntimeError not raised",
        "tenloom has no optimize=[path] option (it plans the whole graph, across calls); the shim "
        "ignores an explicit path, so an invalid one is not rejected",
    ),
    DesignDifference(
        "sublist labels are ints",
        r"test_input\.py::test_hashable_object_input_format$",
        r"sublist label 'left' of operand 0 is not an int",
        "as in NumPy, sublist labels are ints (and Ellipsis); opt_einsum's arbitrary hashable "
        "labels are not taken over",
    ),
    DesignDifference(
        "opt_einsum's path internals",
        r"test_edge_cases\.py::test_can_blas_on_healed_broadcast_dimensions$",
        r"has no attribute 'contraction_list'",
        "the test inspects opt_einsum's own pairwise plan (contraction_list, BLAS choice); "
        "tenloom's plan is a graph (tl.explain / tl.dump show it)",
    ),
)

# Floors, a little under the last run's counts (docs/reliability.md), so that a shim that stops
# routing, or a collection that silently shrinks, fails here.
MIN_PASSED = {
    "numpy/_core/tests/test_einsum.py": 66,
    "opt_einsum/tests/test_contract.py": 2600,
    "opt_einsum/tests/test_edge_cases.py": 9,
    "opt_einsum/tests/test_input.py": 14,
}
MIN_CALLS = {
    "numpy.einsum": 12_000,
    "opt_einsum.contract": 5_000,
    "opt_einsum.contract_expression": 1_600,
}


def _site_packages() -> str:
    return os.path.dirname(os.path.dirname(os.path.realpath(np.__file__)))


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    if int(np.__version__.split(".")[0]) < 2:
        pytest.fail(f"numpy {np.__version__}: the suite runs NumPy 2's numpy._core tests")
    missing = [m for m in SUITES if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(f"test modules not installed (does the wheel ship its tests?): {missing}")
    work = tmp_path_factory.mktemp("external_suites")
    (work / "pytest.ini").write_text("[pytest]\n")  # not the project's settings
    out = work / "report.json"
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["PYTHONPATH"] = os.pathsep.join([tests_dir, *filter(None, [env.get("PYTHONPATH")])])
    env["TENLOOM_VERIFY"] = "1"  # every pass's output checked, as in the project's own tests
    cmd = [
        sys.executable, "-m", "pytest",
        "-c", str(work / "pytest.ini"), "--rootdir", _site_packages(),
        "-p", "no:cacheprovider", "-p", "einsum_shim",
        f"--einsum-shim-report={out}", "--einsum-shim-optimize-subset",
        "-q", "--tb=line", "-W", "ignore::UserWarning",
        "--pyargs", *SUITES,
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=900)
    tail = (proc.stdout + proc.stderr)[-3000:]
    # 0: all passed, 1: some failed (judged below); anything else is a broken run
    assert proc.returncode in (0, 1), f"pytest exited {proc.returncode}:\n{tail}"
    assert out.exists(), f"no report written:\n{tail}"
    return json.loads(out.read_text())


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def test_every_suite_ran_and_was_routed(report):
    assert sorted(report["routed"]) == sorted(FILES.values())
    assert all(report["routed"].values()), report["routed"]


def test_shims_were_called(report):
    calls = report["calls"]
    for entry, floor in MIN_CALLS.items():
        assert calls.get(entry, 0) >= floor, (entry, calls)
    # nearly every test went through a shim (the few that do not test einsum_path/contract_path)
    assert report["tests_calling"] >= 0.95 * sum(MIN_PASSED.values()), report["tests_calling"]


def test_failures_are_documented_design_differences(report):
    unexplained = []
    for nodeid, res in report["tests"].items():
        if res["outcome"] in ("passed", "skipped"):
            continue
        allowed = [
            d
            for d in DESIGN_DIFFERENCES
            if re.search(d.tests, nodeid) and re.search(d.failure, res["message"])
        ]
        if not allowed:
            unexplained.append(f"{nodeid}: {res['outcome']}: {res['message'][:300]}")
    assert not unexplained, "\n".join(unexplained)


def test_every_design_difference_still_happens(report):
    """A difference that no longer shows is taken off the list (and docs/reliability.md)."""
    failed = [(n, r["message"]) for n, r in report["tests"].items() if r["outcome"] == "failed"]
    for d in DESIGN_DIFFERENCES:
        assert any(re.search(d.tests, n) and re.search(d.failure, m) for n, m in failed), d.name


def test_enough_tests_pass(report):
    passed = Counter(_file(n) for n, r in report["tests"].items() if r["outcome"] == "passed")
    for path, floor in MIN_PASSED.items():
        assert passed[path] >= floor, (path, passed[path], floor)


def test_no_result_disagrees_with_numpy(report):
    """Every tenloom result was also compared with numpy.einsum on the same arguments
    (opt_einsum's tests mostly compare two tenloom results with each other)."""
    assert report["checked"].get("agree", 0) >= 0.8 * sum(MIN_CALLS.values())
    shown = "\n".join(
        f"{m['test']}: {m['call']}: {m['problem']}" for m in report["mismatches"][:20]
    )
    assert not report["mismatches"], f"{len(report['mismatches'])} disagreements:\n{shown}"
