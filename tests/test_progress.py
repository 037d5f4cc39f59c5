"""progress=True: tqdm bars that count the flops of an evaluation (slices included)."""

from __future__ import annotations

import numpy as np
import pytest
from tenloom.runtime import progress

import tenloom as tl

RNG = np.random.default_rng(11)


@pytest.fixture
def bars(monkeypatch):
    """Every bar an evaluation opens, kept for inspection (shown at once: no delay)."""
    seen = []
    real = progress.flops_bar

    def spy(graph, enabled, desc="evaluate"):
        cm = real(graph, enabled, desc)

        class Wrap:
            def __enter__(self):
                bar = cm.__enter__()
                if bar is not None:
                    seen.append(bar)
                return bar

            def __exit__(self, *exc):
                return cm.__exit__(*exc)

        return Wrap()

    monkeypatch.setattr(progress, "DELAY", 0)
    monkeypatch.setattr("tenloom.runtime.evaluate.flops_bar", spy)
    return seen


@pytest.mark.parametrize("threads", [1, 2])
def test_evaluation_bar_counts_every_flop(bars, threads, capsys):
    a, b, c = (tl.asarray(RNG.standard_normal((40, 40))) for _ in range(3))
    y = tl.exp(a @ b) @ c + 1.0
    np.testing.assert_allclose(y.evaluate(progress=True, threads=threads), y.evaluate())
    (bar,) = bars
    assert bar.total > 0 and bar.n == bar.total
    assert "flop" in capsys.readouterr().err


def test_sliced_network_counts_its_slices(bars):
    x = tl.asarray(RNG.standard_normal((12, 12, 12)))
    y = tl.einsum("abc,cde,efa,bdf->", x, x, x, x)
    y.evaluate(optimize="greedy", memory_limit=20_000, progress=True)
    (bar,) = bars
    assert bar.total > 0 and 0.99 * bar.total <= bar.n <= bar.total


def test_no_bar_without_progress(bars):
    tl.asarray(np.ones(3)).sum().evaluate()
    assert bars == []
