"""Shared pytest configuration: hypothesis profiles and import path for ``helpers``.

Profiles (select with ``HYPOTHESIS_PROFILE=<name>``, default ``ci``):

* ``ci``   -- 300 examples, deterministic, no deadline; sized for a 2-core CI machine.
* ``slow`` -- 3000 examples, no deadline; for long local / nightly runs.
* ``dev``  -- 50 examples; quick local iteration.
"""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import HealthCheck, settings

_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
if _TESTS_DIR not in sys.path:
    # ``from helpers import ...`` works whatever pytest's import mode is.
    sys.path.insert(0, _TESTS_DIR)

_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=_SUPPRESSED,
)
settings.register_profile(
    "slow",
    max_examples=3000,
    deadline=None,
    suppress_health_check=_SUPPRESSED,
)
settings.register_profile(
    "dev",
    max_examples=50,
    deadline=None,
    suppress_health_check=_SUPPRESSED,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# ---- the disk cache -----------------------------------------------------------------------------
# The path cache is on by default (in the user cache folder). Tests never write there: each test
# gets its own folder under one temporary folder (named, made only when something is written),
# so the default stays on in every test and no test sees another's cached paths.
import itertools  # noqa: E402
import tempfile  # noqa: E402

_CACHE_ROOT = tempfile.mkdtemp(prefix="tenloom-test-cache-")
_CACHE_IDS = itertools.count()
os.environ["TENLOOM_CACHE_DIR"] = os.path.join(_CACHE_ROOT, "import")


@pytest.fixture(autouse=True)
def _test_cache_dir(monkeypatch):
    monkeypatch.setenv("TENLOOM_CACHE_DIR", os.path.join(_CACHE_ROOT, str(next(_CACHE_IDS))))


# ---- pass pipeline variants ------------------------------------------------------------------
# Every pass is checked after each pass in tests, and the op/einsum corpus runs with the full
# pipeline, with each pass switched off in turn, and with no passes at all (one axis at a time).
import tenloom.passes as _passes  # noqa: E402

_passes.VERIFY = True
FULL_PIPELINE = _passes.DEFAULT_PIPELINE
PIPELINE_VARIANTS = {
    "full": FULL_PIPELINE,
    **{f"without-{p}": tuple(q for q in FULL_PIPELINE if q != p) for p in FULL_PIPELINE},
    "no-passes": (),
    "threads-2": FULL_PIPELINE,  # the full pipeline run by the concurrent scheduler, 2 threads
}
if os.environ.get("TENLOOM_TEST_PIPELINES"):  # e.g. "full" for a quick run on a GPU
    _wanted = os.environ["TENLOOM_TEST_PIPELINES"].split(",")
    PIPELINE_VARIANTS = {k: v for k, v in PIPELINE_VARIANTS.items() if k in _wanted}

if os.environ.get("TENLOOM_TEST_DEVICE"):  # run the corpus on a device, e.g. cuda:0
    import tenloom.runtime.session as _session

    _session.DEFAULT_DEVICE = os.environ["TENLOOM_TEST_DEVICE"]


@pytest.fixture(scope="module", params=list(PIPELINE_VARIANTS), ids=list(PIPELINE_VARIANTS))
def pipeline_variant(request):
    """Run a whole module with DEFAULT_PIPELINE set to one variant."""
    import tenloom.runtime.session as session

    _passes.DEFAULT_PIPELINE = PIPELINE_VARIANTS[request.param]
    session.DEFAULT_THREADS = 2 if request.param == "threads-2" else 1
    try:
        yield request.param
    finally:
        _passes.DEFAULT_PIPELINE = FULL_PIPELINE
        session.DEFAULT_THREADS = 1
