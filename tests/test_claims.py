"""The quickstart's claims: margins and their noise, by hand-computed cases."""

import math

import pytest

from corl.claims import beats_base, check_claims, cohort_average, describe, ensembles, kappa_gap, paired_se


def test_paired_standard_error_by_hand():
    # d = [1, 0, 0, -1]: mean 0, population sd sqrt(2/4); se = sd / sqrt(4)
    assert paired_se([1, 1, 0, 0], [0, 1, 0, 1]) == pytest.approx(math.sqrt(0.5) / 2)
    assert paired_se([1, 0], [1, 0]) == 0.0
    with pytest.raises(ValueError, match="same, non-zero length"):
        paired_se([1], [1, 0])


def test_gt_claim_margin_is_the_worst_agents_gain_minus_the_bar():
    vectors = {"base": {"a": [0, 0, 1, 1], "b": [0, 1, 1, 1]}, "gt": {"a": [1, 1, 1, 1], "b": [0, 1, 1, 1]}}
    c = beats_base(vectors, "gt", "GT", threshold=0.08)
    # a gains 0.5, b gains 0: the worst is b, margin 0 - 0.08, noise 0 (identical vectors)
    assert c["margin"] == pytest.approx(-0.08) and c["noise"] == 0.0 and not c["holds"] and not c["within_noise"]
    assert c["numbers"]["a"]["margin"] == pytest.approx(0.42)
    # a alone: margin 0.42 against two se of d = [1, 1, 0, 0] (sd 0.5, se 0.25): within noise
    c = beats_base({"base": {"a": [0, 0, 1, 1]}, "gt": {"a": [1, 1, 1, 1]}}, "gt", "GT", threshold=0.08)
    assert c["holds"] and c["noise"] == pytest.approx(0.5) and c["within_noise"]


def test_cohort_average_pairs_problems_across_agents_and_allows_a_tie():
    vectors = {"co-rl": {"a": [1, 0, 1, 0], "b": [1, 1, 0, 0]}, "ttrl": {"a": [1, 0, 0, 0], "b": [0, 1, 1, 0]}}
    c = cohort_average(vectors, "co-rl", "ttrl", "Co-RL >= TTRL")
    # per-problem means: co-rl [1, .5, .5, 0], ttrl [.5, .5, .5, 0] -> margin 0.125
    assert c["margin"] == pytest.approx(0.125) and c["holds"]
    assert c["noise"] == pytest.approx(2 * paired_se([1, 0.5, 0.5, 0], [0.5, 0.5, 0.5, 0]))
    tie = cohort_average({"co-rl": {"a": [1, 0]}, "ttrl": {"a": [0, 1]}}, "co-rl", "ttrl", "tie")
    assert tie["margin"] == 0 and tie["holds"]  # ">=": a tie holds


def test_ensembles_and_kappa_gap():
    pooled = {"co-rl": {"correct": [1, 1, 0, 1], "k": 8}, "ttrl": {"correct": [1, 0, 0, 1], "k": 8}}
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
    vectors = {"base": {"a": [0, 1]}, "co-rl": {"a": [1, 1]}}
    claims = check_claims(vectors, {}, [], None)
    assert [c["claim"] for c in claims] == ["Co-RL above Base for every agent"]
    line = describe(claims[0])
    assert line.startswith(
        "Co-RL above Base for every agent: reproduced — margin +0.500 ± 0.707, within noise"
    )  # d = [1, 0]: sd .5, se .5 / sqrt 2
    assert "no noise estimate" in describe({**claims[0], "noise": None, "within_noise": False})
