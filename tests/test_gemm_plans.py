"""eliminate_permutations' choice of GEMM groups (``_plan_contraction``) against its definition:
of the batch and contracted labels in operand a's or b's memory order (tried (a, a), (a, b),
(b, a), (b, b)), the first candidate that copies the fewest bytes, an operand being read as
a view when ``groups_are_views`` says so (issue 22: the plan is worked out faster, the same)."""

from __future__ import annotations

import random

from tenloom.passes.eliminate_permutations import _plan_contraction, groups_are_views


def reference(ta, tb, out, mem_a, mem_b, sizes, size_a, size_b):
    sa, sb, so = set(ta), set(tb), set(out)
    mem_a = tuple(lab for lab in mem_a if lab in sb or lab in so)  # lone labels: summed first
    mem_b = tuple(lab for lab in mem_b if lab in sa or lab in so)
    left = tuple(lab for lab in mem_a if lab in so and lab not in sb)
    right = tuple(lab for lab in mem_b if lab in so and lab not in sa)
    best, seen = None, []
    for bmem in (mem_a, mem_b):
        for cmem in (mem_a, mem_b):
            batch = tuple(lab for lab in bmem if lab in sa and lab in sb and lab in so)
            con = tuple(lab for lab in cmem if lab in sa and lab in sb and lab not in so)
            if (batch, con) in seen:
                continue
            seen.append((batch, con))
            ok_a = groups_are_views(mem_a, [batch, left, con], sizes, batch)
            ok_b = groups_are_views(mem_b, [batch, con, right], sizes, batch)
            cost = (0 if ok_a else size_a) + (0 if ok_b else size_b)
            if best is None or cost < best[2]:
                best = ((batch, left, con, right), (not ok_a) + (not ok_b), cost)
    return best


def test_plan_contraction_is_the_first_cheapest_candidate():
    rng = random.Random(0)
    kinds = set()
    for _ in range(20000):
        labels = list(range(rng.randint(1, 8)))
        ta = tuple(rng.sample(labels, rng.randint(0, len(labels))))
        tb = tuple(rng.sample(labels, rng.randint(0, len(labels))))
        both = sorted(set(ta) | set(tb))
        out = tuple(rng.sample(both, rng.randint(0, len(both))))
        sizes = {lab: rng.choice([1, 1, 2, 3, 4]) for lab in labels}
        mem_a = tuple(rng.sample(ta, len(ta))) if rng.random() < 0.7 else ta
        mem_b = tuple(rng.sample(tb, len(tb))) if rng.random() < 0.7 else tb
        size_a, size_b = rng.randint(1, 99), rng.randint(1, 99)
        args = (ta, tb, out, mem_a, mem_b, sizes, size_a, size_b)
        found = _plan_contraction(*args)
        assert found == reference(*args), args
        kinds.add(found[1])
    assert kinds == {0, 1, 2}  # view-only plans and plans copying one or both operands
