"""Per-group means of correctness, including a problem's share of correct samples."""

import pytest

from corl.evaluation.evaluate import accuracy_by_group


def test_fractions_are_averaged_not_truncated():
    # two "arith" problems with 3/4 and 1/4 of their samples correct: 0.5, not 0 (int() would truncate)
    got = accuracy_by_group([0.75, 0.25, 1.0, True, False], ["arith", "arith", "mod", "mod", "mod"])
    assert got == {"arith": pytest.approx(0.5), "mod": pytest.approx(2 / 3)}
