"""Standard errors and 95% intervals of figures over problems, by hand-computed cases."""

from __future__ import annotations

import math

import pytest

from corl.evaluation.evaluate import Z95, interval95, problem_scores, spread, standard_error


def test_standard_error_by_hand():
    # x = 1, 0, 1, 1: mean 3/4; squares (1/16) * 3 + 9/16 = 12/16; / (n - 1 = 3) = 1/4; / n = 1/16 -> 1/4
    assert standard_error([1, 0, 1, 1]) == pytest.approx(0.25)
    # the samples of one problem are one observation: x = 2/3, 1/3 -> sqrt((1/36 + 1/36) / 1 / 2) = 1/6
    assert standard_error([2 / 3, 1 / 3]) == pytest.approx(1 / 6)
    assert standard_error([0.5, 0.5, 0.5]) == 0.0
    assert standard_error([1.0]) is None and standard_error([]) is None  # one problem: no spread to measure


def test_k_equal_1_is_lm_evals_stderr():
    """lm-eval's mean_stderr: sample_stddev (n - 1) / sqrt(n)."""
    x = [1, 1, 0, 1, 0, 0, 1, 1, 1, 0]
    mu = sum(x) / len(x)
    assert standard_error(x) == pytest.approx(math.sqrt(sum((v - mu) ** 2 for v in x) / (len(x) - 1)) / math.sqrt(len(x)))


def test_interval_is_value_plus_minus_1_96_se_clipped_to_0_1():
    assert abs(Z95 - 1.959964) < 1e-6
    assert interval95(0.5, 0.1) == pytest.approx([0.5 - 0.1959964, 0.5 + 0.1959964])
    assert interval95(0.9, 0.1) == pytest.approx([0.9 - 0.1959964, 1.0])  # 1.096 is no share
    assert interval95(0.05, 0.05) == pytest.approx([0.0, 0.05 + 0.0979982])
    assert interval95(1.0, 0.0) == [1.0, 1.0] and interval95(0.3, None) is None


def test_problem_scores_and_spread_of_avg_maj_pass():
    # problem 1: right, right, wrong (majority right); problem 2: wrong x3
    scores = problem_scores([[True, True, False], [False, False, False]], [True, False])
    assert scores == {"avg@3": [2 / 3, 0.0], "maj@3": [1.0, 0.0], "pass@3": [1.0, 0.0]}
    figures = {"avg@3": 1 / 3, "maj@3": 0.5}
    out = spread(figures, scores)
    # avg@3: x = 2/3, 0: sqrt((1/9 + 1/9) / 1 / 2) = 1/3; 1/3 -/+ 0.6533 -> [0, 0.9866]
    assert out["se"] == pytest.approx({"avg@3": 1 / 3, "maj@3": 0.5})
    assert out["ci95"]["avg@3"] == pytest.approx([0.0, 1 / 3 + 1.959964 / 3])
    assert set(out["se"]) == set(figures)  # only the figures asked for
