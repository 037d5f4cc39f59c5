"""explain, dump and evaluate agree on a memory_limit that no slicing can meet: each refuses
it with MemoryLimitError, in any order (an optimization cached by explain does not let
evaluate skip the check)."""

from __future__ import annotations

import numpy as np
import pytest

import tenloom as tl


def _network():
    rng = np.random.default_rng(0)
    a, b, c = (tl.asarray(rng.standard_normal((8, 8))) for _ in range(3))
    return tl.einsum("ij,jk,ki->", a, b, c)  # each input 512 bytes


@pytest.mark.parametrize("first", ["explain", "dump", "evaluate"])
def test_an_infeasible_limit_is_refused_by_every_caller_in_any_order(first):
    y = _network()
    calls = {
        "explain": lambda: tl.explain(y, memory_limit=256),
        "dump": lambda: tl.dump(y, memory_limit=256),
        "evaluate": lambda: tl.evaluate(y, memory_limit=256),
    }
    with pytest.raises(tl.MemoryLimitError, match=f"{first}: input .* alone needs 512 bytes"):
        calls[first]()
    for name, call in calls.items():
        with pytest.raises(tl.MemoryLimitError, match=f"{name}: input .* alone needs 512 bytes"):
            call()
    assert np.isfinite(tl.evaluate(y, memory_limit=4096)[0])


def test_a_predicted_peak_over_the_limit_is_refused_by_explain_as_by_evaluate():
    rng = np.random.default_rng(1)
    a, b = (tl.asarray(rng.standard_normal((100, 100))) for _ in range(2))
    y = tl.sum(tl.exp(a @ b) @ tl.sin(a @ a))
    for name, call in {
        "explain": lambda: tl.explain(y, memory_limit=90000),
        "evaluate": lambda: tl.evaluate(y, memory_limit=90000),
    }.items():
        # the message names where the peak is, not the largest array
        with pytest.raises(
            tl.MemoryLimitError,
            match=rf"{name}: predicted peak memory \d+ bytes exceeds memory_limit=90000 bytes; "
            r"the peak is at \w+ float64\(100, 100\) at .* \(80000 bytes, beside \d+ bytes",
        ):
            call()
    # dump shows such a plan (to see why it does not fit)
    assert "contract" in tl.dump(y, memory_limit=90000)
