"""The quickstart's claims: margins and their noise, by hand-computed cases."""

import math

import pytest

from corl.studies.claims import (
    beats_base,
    check_claims,
    cohort_average,
    describe,
    ensembles,
    kappa_gap,
    paired_se,
    per_problem_differences,
)


def test_paired_standard_error_by_hand():
    # one seed: d = [1, 0, 0, -1], mean 0, sample variance (1 + 0 + 0 + 1) / 3; se = sqrt(2/3) / sqrt(4)
    assert paired_se([[1, 1, 0, 0]], [[0, 1, 0, 1]]) == pytest.approx(math.sqrt(2 / 3) / 2)
    assert paired_se([[1, 0]], [[1, 0]]) == 0.0
    with pytest.raises(ValueError, match="same, non-zero number of problems"):
        paired_se([[1]], [[1, 0]])
    with pytest.raises(ValueError, match="same, non-zero number of seeds"):
        paired_se([[1, 0]], [[1, 0], [0, 1]])


def test_paired_standard_error_averages_seeds_per_problem_first():
    # two seeds, three problems; per-problem differences averaged over the seeds:
    #   problem 0: (1-0 + 1-0) / 2 = 1;  problem 1: (1-1 + 0-1) / 2 = -0.5;  problem 2: (0-0 + 0-1) / 2 = -0.5
    x, y = [[1, 1, 0], [1, 0, 0]], [[0, 1, 0], [0, 1, 1]]
    assert per_problem_differences(x, y) == [1.0, -0.5, -0.5]
    # mean 0; sample variance (1 + .25 + .25) / 2 = .75; se = sqrt(.75 / 3) = 0.5
    # (the six (seed, problem) pairs taken as independent would give sqrt(4/6) / sqrt(6) = 1/3)
    assert paired_se(x, y) == pytest.approx(0.5)


def test_repeating_a_seed_adds_no_information():
    # three seeds that agree on every problem are one seed's evidence: the same standard error,
    # where counting 3 x 4 independent pairs would shrink it by sqrt(3)
    x, y = [1, 1, 0, 0], [0, 1, 0, 1]
    assert paired_se([x] * 3, [y] * 3) == pytest.approx(paired_se([x], [y])) == pytest.approx(math.sqrt(2 / 3) / 2)


def test_gt_claim_margin_is_the_worst_agents_gain_minus_the_bar():
    vectors = {"base": {"a": [[0, 0, 1, 1]], "b": [[0, 1, 1, 1]]}, "gt": {"a": [[1, 1, 1, 1]], "b": [[0, 1, 1, 1]]}}
    c = beats_base(vectors, "gt", "GT", threshold=0.08)
    # a gains 0.5, b gains 0: the worst is b, margin 0 - 0.08, noise 0 (identical vectors)
    assert c["margin"] == pytest.approx(-0.08) and c["noise"] == 0.0 and not c["holds"] and not c["within_noise"]
    assert c["numbers"]["a"]["margin"] == pytest.approx(0.42)
    # a alone: margin 0.42 against two se of d = [1, 1, 0, 0] (sample sd sqrt(1/3), se sqrt(1/3) / 2)
    c = beats_base({"base": {"a": [[0, 0, 1, 1]]}, "gt": {"a": [[1, 1, 1, 1]]}}, "gt", "GT", threshold=0.08)
    assert c["holds"] and c["noise"] == pytest.approx(math.sqrt(1 / 3)) and c["within_noise"]


def test_claims_over_seeds_use_the_per_problem_paired_error():
    # seed 0: base [0, 0, 1, 1] -> co-rl [1, 1, 1, 1]; seed 1: base [0, 1, 1, 1] -> co-rl [1, 1, 1, 1]
    # margin: mean 1 - mean 0.625 = 0.375; per-problem d = [1, .5, 0, 0], mean .375,
    # sample variance (.390625 + .015625 + .140625 + .140625) / 3 = .229167; se = sqrt(.229167 / 4) = .239357
    vectors = {"base": {"a": [[0, 0, 1, 1], [0, 1, 1, 1]]}, "co-rl": {"a": [[1, 1, 1, 1], [1, 1, 1, 1]]}}
    c = beats_base(vectors, "co-rl", "Co-RL")
    assert c["margin"] == pytest.approx(0.375) and c["noise"] == pytest.approx(2 * 0.239357, abs=1e-6)
    assert c["within_noise"]


def test_cohort_average_pairs_problems_across_agents_and_allows_a_tie():
    vectors = {"co-rl": {"a": [[1, 0, 1, 0]], "b": [[1, 1, 0, 0]]}, "ttrl": {"a": [[1, 0, 0, 0]], "b": [[0, 1, 1, 0]]}}
    c = cohort_average(vectors, "co-rl", "ttrl", "Co-RL >= TTRL")
    # per-problem means: co-rl [1, .5, .5, 0], ttrl [.5, .5, .5, 0] -> margin 0.125
    # d = [.5, 0, 0, 0]: sample variance (.140625 + 3 * .015625) / 3 = .0625; se = sqrt(.0625 / 4) = .125
    assert c["margin"] == pytest.approx(0.125) and c["holds"]
    assert c["noise"] == pytest.approx(2 * 0.125)
    tie = cohort_average({"co-rl": {"a": [[1, 0]]}, "ttrl": {"a": [[0, 1]]}}, "co-rl", "ttrl", "tie")
    assert tie["margin"] == 0 and tie["holds"]  # ">=": a tie holds


def test_ensembles_and_kappa_gap():
    pooled = {"co-rl": {"correct": [[1, 1, 0, 1]], "k": 8}, "ttrl": {"correct": [[1, 0, 0, 1]], "k": 8}}
    c = ensembles(pooled, "co-rl", "ttrl")
    assert c["claim"] == "co-rl ensemble beats the ttrl ensemble (pooled maj@8)" and c["margin"] == pytest.approx(0.25)
    rows = [
        {"kind": "models", "kappa": 0.1, "correct_a": [1, 0, 1, 0, 1, 0], "correct_b": [0, 1, 1, 0, 0, 1]},
        {"kind": "seed", "kappa": 0.6, "correct_a": [1, 0, 1, 0, 1, 0], "correct_b": [1, 0, 1, 0, 0, 0]},
    ]
    k = kappa_gap(rows)
    assert k["margin"] == pytest.approx(0.5) and k["holds"] and k["noise"] > 0
    assert kappa_gap([rows[0]]) is None  # no seed-only pair: nothing to compare


def test_check_claims_skips_what_was_not_measured_and_describe_states_the_margin():
    vectors = {"base": {"a": [[0, 1]]}, "co-rl": {"a": [[1, 1]]}}
    claims = check_claims(vectors, {}, [], None)
    assert [c["claim"] for c in claims] == ["Co-RL above Base for every agent"]
    line = describe(claims[0])
    assert line.startswith(
        "Co-RL above Base for every agent: reproduced — margin +0.500 ± 1.000, within noise"
    )  # d = [1, 0]: sample sd sqrt(.5), se sqrt(.5) / sqrt 2 = .5
    assert "no noise estimate" in describe({**claims[0], "noise": None, "within_noise": False})
