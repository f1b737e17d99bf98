"""explorer.answer._paired: a candidate's quality against the best, paired by unit."""

from __future__ import annotations

import numpy as np

from explorer.answer import PairedDifference, answer
from tests.answer.test_recommend import SPEC, finalist_records


def test_a_candidate_is_compared_with_the_best_as_the_mean_difference_over_shared_units():
    finals = finalist_records(10, [((8, 8), 0.95, 2.4, "8 heads"), ((2, 2), 0.90, 1.2, "knee")], seeds=6)
    ans = answer(finals, SPEC)
    two = next(c for c in ans.verdicts if c.arch.heads == (2, 2))
    diff = two.versus_best
    assert isinstance(diff, PairedDifference) and diff.n == 6
    by_seed = {(r.heads, r.seed): r.val_accuracy for r in finals}
    mean = np.mean([by_seed[(2, 2), s] - by_seed[(8, 8), s] for s in {r.seed for r in finals}])
    assert abs(diff.diff - mean) < 1e-9 and diff.low <= diff.diff <= diff.high
