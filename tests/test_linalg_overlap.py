"""The default thread policy for decompositions (runtime/session.py ``default_threads``): on a
device with streams, independent decompositions get a worker each (up to MAX_OVERLAP); chains
and small ones do not; the CPU keeps DEFAULT_THREADS. The values are the same either way."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import device_params
from tenloom.runtime import session

import tenloom as tl


class _Streams:
    streams = True


class _NoStreams:
    streams = False


def _optimized(*tensors):
    return tl.explain(*tensors).graph


def test_independent_decompositions_get_a_worker_each_on_a_streams_device():
    ps = [tl.placeholder((64, 64), name=f"a{i}") for i in range(6)]
    two = _optimized(*[tl.linalg.svdvals(p) for p in ps[:2]])
    assert session.default_threads(two, _Streams()) == max(2, session.DEFAULT_THREADS)
    six = _optimized(*[tl.linalg.qr(p, "r") for p in ps])
    assert session.default_threads(six, _Streams()) == max(session.MAX_OVERLAP, 1)
    assert session.default_threads(six, _NoStreams()) == session.DEFAULT_THREADS


def test_chains_and_small_decompositions_stay_on_one_worker():
    a = tl.placeholder((64, 64), name="a")
    chain = tl.linalg.inv(tl.linalg.inv(a) + tl.eye(64))
    assert session.default_threads(_optimized(chain), _Streams()) == session.DEFAULT_THREADS
    small = [tl.linalg.svdvals(tl.placeholder((4, 4), name=f"s{i}")) for i in range(3)]
    assert session.default_threads(_optimized(*small), _Streams()) == session.DEFAULT_THREADS


@pytest.mark.parametrize("device", [d for d in device_params() if "opencl" not in str(d)])
def test_overlapped_decompositions_match_numpy(device):
    rng = np.random.default_rng(0)
    mats = [rng.normal(size=(48, 48)) for _ in range(3)]
    ps = [tl.placeholder((48, 48), name=f"m{i}") for i in range(3)]
    outs = [tl.linalg.svdvals(p @ p.T) for p in ps]
    got = tl.evaluate(*outs, device=device, feed=dict(zip(ps, mats)))
    for g, m in zip(got, mats):
        np.testing.assert_allclose(g, np.linalg.svd(m @ m.T, compute_uv=False), rtol=1e-9)
