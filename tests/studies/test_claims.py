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
    problem_sums,
    ring_teacher,
    type_sums,
)
from corl.studies.quickstart_options import QuickstartOptions
from corl.studies.quickstart_summary import summarize
from corl.studies.report import theorem_table
from corl.tracking.metrics import MetricsLog


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


# -- every claim through check_claims (what summarize, and so the report, calls): where it holds, where it fails


def _by_text(claims: list[dict], start: str) -> dict:
    found = [c for c in claims if c["claim"].startswith(start)]
    assert len(found) == 1, [c["claim"] for c in claims]
    return found[0]


def test_gt_claim_needs_eight_points_for_every_agent():
    base = {"a": [[0] * 10 + [1] * 10], "b": [[0] * 20]}

    def gt(gain_b: int) -> dict:  # a gains 10/20 = 50 points, b gains gain_b / 20
        vectors = {"base": base, "gt": {"a": [[1] * 20], "b": [[1] * gain_b + [0] * (20 - gain_b)]}}
        return _by_text(check_claims(vectors, {}, [], None), "GT-Reward gains >= 8 points")

    assert gt(2)["holds"] and gt(2)["margin"] == pytest.approx(0.10 - 0.08)  # b: +10 points
    assert not gt(1)["holds"] and gt(1)["margin"] == pytest.approx(0.05 - 0.08)  # b: +5 points, below the bar
    assert not gt(0)["holds"]


def test_corl_above_base_holds_only_when_every_agent_gains():
    base = {"a": [[0, 1, 0, 1]], "b": [[0, 1, 0, 1]]}
    up = {"base": base, "co-rl": {"a": [[1, 1, 0, 1]], "b": [[1, 1, 1, 1]]}}
    assert _by_text(check_claims(up, {}, [], None), "Co-RL above Base")["holds"]
    down = {"base": base, "co-rl": {"a": [[1, 1, 0, 1]], "b": [[0, 0, 0, 1]]}}  # b loses a point
    c = _by_text(check_claims(down, {}, [], None), "Co-RL above Base")
    assert not c["holds"] and c["margin"] == pytest.approx(-0.25)


def test_corl_at_least_ttrl_compares_corl_to_ttrl_not_the_reverse():
    better = {"co-rl": {"a": [[1, 1, 1, 0]]}, "ttrl": {"a": [[1, 0, 0, 0]]}}
    c = _by_text(check_claims(better, {}, [], None), "Co-RL >= TTRL")
    assert c["holds"] and c["margin"] == pytest.approx(0.5) and c["numbers"] == {"co-rl": 0.75, "ttrl": 0.25}
    worse = {"co-rl": better["ttrl"], "ttrl": better["co-rl"]}
    c = _by_text(check_claims(worse, {}, [], None), "Co-RL >= TTRL")
    assert not c["holds"] and c["margin"] == pytest.approx(-0.5)


def test_ensemble_claim_holds_and_fails():
    a, b = [[1, 1, 0, 1]], [[1, 0, 0, 1]]
    holds = _by_text(
        check_claims({}, {"co-rl": {"correct": a, "k": 8}, "ttrl": {"correct": b, "k": 8}}, [], None), "co-rl ensemble"
    )
    fails = _by_text(
        check_claims({}, {"co-rl": {"correct": b, "k": 8}, "ttrl": {"correct": a, "k": 8}}, [], None), "co-rl ensemble"
    )
    assert holds["holds"] and holds["margin"] == pytest.approx(0.25)
    assert not fails["holds"] and fails["margin"] == pytest.approx(-0.25)


def test_kappa_claim_holds_and_fails():
    def rows(cross: float, seed: float) -> list[dict]:
        return [{"kind": "models", "kappa": cross}, {"kind": "seed", "kappa": seed}, {"kind": "seed", "kappa": seed + 0.1}]

    assert _by_text(check_claims({}, {}, rows(0.2, 0.5), None), "cross-family kappa")["margin"] == pytest.approx(0.3)
    c = _by_text(check_claims({}, {}, rows(0.5, 0.2), None), "cross-family kappa")
    assert not c["holds"] and c["margin"] == pytest.approx(-0.3) and c["noise"] is None  # no per-problem rows


def test_reward_std_claim_holds_when_ttrl_ends_lower():
    c = _by_text(check_claims({}, {}, [], {"ttrl": 0.3, "co-rl": 0.8}), "TTRL's reward std falls faster")
    assert c["holds"] and c["margin"] == pytest.approx(0.5)
    c = _by_text(check_claims({}, {}, [], {"ttrl": 0.8, "co-rl": 0.3}), "TTRL's reward std falls faster")
    assert not c["holds"] and c["margin"] == pytest.approx(-0.5)


# -- Theorem 1 where it predicts: Co-RL's gain over TTRL above the line p_A + p_B = 1, none below

# two agents, four test problems: 0 and 1 of type x, 2 and 3 of type y
TYPES = ["x", "x", "y", "y"]
# validation p per type: a + b = 1.3 on x (above the line), 0.5 on y (below)
REGIME = {"sampled_by_type": {"a": {"x": 0.7, "y": 0.2}, "b": {"x": 0.6, "y": 0.3}}}
CORL = {"a": [[1, 1, 0, 0]], "b": [[1, 0, 0, 0]]}
TTRL = {"a": [[0, 1, 0, 0]], "b": [[0, 0, 0, 1]]}


def test_theorem_split_per_type_by_hand():
    claims = check_claims({"co-rl": CORL, "ttrl": TTRL}, {}, [], None, REGIME, TYPES)
    c = _by_text(claims, "Theorem 1: Co-RL gains over TTRL where per-type")
    # d_a = [1, 0, 0, 0], d_b = [1, 0, 0, -1]; per problem, the agents' mean: [1, 0 | 0, -0.5]
    # above (problems 0, 1): gain 0.5, sample sd sqrt(0.5), se sqrt(0.5) / sqrt(2) = 0.5 -> noise 1.0
    # below (problems 2, 3): gain -0.25, sample sd sqrt(0.125), se 0.25 -> noise 0.5
    above, below = c["numbers"]["above"], c["numbers"]["below"]
    assert above["gain"] == pytest.approx(0.5) and above["noise"] == pytest.approx(1.0) and above["problems"] == 2
    assert below["gain"] == pytest.approx(-0.25) and below["noise"] == pytest.approx(0.5)
    # sign tests: above one problem +, none -: p = 2 * C(1, 0) / 2 = 1; below one -, p = 1
    assert (above["positive"], above["negative"], above["p"]) == (1, 0, 1.0) and (below["positive"], below["negative"]) == (0, 1)
    # the margin is the weaker side: min(0.5, +0.25) with the below side's noise
    assert c["holds"] and c["margin"] == pytest.approx(0.25) and c["noise"] == pytest.approx(0.5) and c["within_noise"]
    assert not any(x["claim"].startswith("bases in Theorem 1's regime") for x in claims)


def test_theorem_split_fails_where_corl_loses_above_or_gains_below():
    swapped = _by_text(check_claims({"co-rl": TTRL, "ttrl": CORL}, {}, [], None, REGIME, TYPES), "Theorem 1")
    # above: gain -0.5 (fails); below: +0.25 (a gain where the theorem predicts none: fails too)
    assert not swapped["holds"] and swapped["margin"] == pytest.approx(-0.5)
    gains_everywhere = {"a": [[1, 1, 1, 1]], "b": [[1, 1, 1, 1]]}
    c = _by_text(check_claims({"co-rl": gains_everywhere, "ttrl": TTRL}, {}, [], None, REGIME, TYPES), "Theorem 1")
    # above: d per problem [1, 0.5] -> +0.75; below: [1, 0.5] -> +0.75: the gain below fails the prediction
    assert c["numbers"]["above"]["gain"] == pytest.approx(0.75) and not c["holds"] and c["margin"] == pytest.approx(-0.75)
    # no gain below (both methods equal there) is what the theorem predicts
    flat_below = {"a": [[1, 1, 0, 0]], "b": [[1, 0, 0, 1]]}
    c = _by_text(check_claims({"co-rl": flat_below, "ttrl": TTRL}, {}, [], None, REGIME, TYPES), "Theorem 1")
    assert c["numbers"]["below"]["gain"] == 0 and c["holds"] and c["margin"] == 0


def test_theorem_split_per_problem_from_the_bases_samples():
    # the bases' shares of 16 T=1 samples per test problem: a + b = [1.5, 1.0, 0.75, 0]; problem 1 is on the line
    sampled = {"k": 16, "accuracy": {"a": [1, 0.75, 0.25, 0], "b": [0.5, 0.25, 0.5, 0]}}
    claims = check_claims({"co-rl": CORL, "ttrl": TTRL}, {}, [], None, base_sampled=sampled)
    c = _by_text(claims, "Theorem 1: Co-RL gains over TTRL where per-problem")
    # above: problem 0 alone (gain 1, one problem: no noise); below: problems 2, 3 as in the per-type case
    assert c["numbers"]["above"] == {"gain": 1.0, "noise": None, "problems": 1, "positive": 1, "negative": 0, "p": 1.0}
    assert c["numbers"]["below"]["gain"] == pytest.approx(-0.25) and c["margin"] == pytest.approx(0.25) and c["holds"]
    # the quickstart's four samples per problem are too few to place a problem on a side of the line
    coarse = check_claims({"co-rl": CORL, "ttrl": TTRL}, {}, [], None, base_sampled={**sampled, "k": 4})
    assert not [x for x in coarse if x["claim"].startswith("Theorem 1")]


def test_ring_teacher_and_the_sign_test():
    from corl.studies.claims import _sign_test

    assert ring_teacher(["a", "b", "c"]) == {"a": "c", "b": "a", "c": "b"} and ring_teacher(["a", "b"]) == {"a": "b", "b": "a"}
    # 3 +, 1 -, a zero dropped: n = 4, p = 2 * (C(4,0) + C(4,1)) / 16 = 0.625
    assert _sign_test([1, 0.5, 2, -1, 0]) == {"positive": 3, "negative": 1, "p": 0.625}


def _entry(correct: list[int], types: list[str], run_dir=None, samples=None) -> dict:
    acc = sum(correct) / len(correct)
    by_type = {t: sum(c for c, u in zip(correct, types) if u == t) / types.count(t) for t in set(types)}
    e = {"greedy": acc, "avg@4": acc, "greedy_by_type": by_type, "mean_length": 5.0, "greedy_correct": correct}
    return e | ({"run_dir": str(run_dir)} if run_dir else {}) | ({"samples": samples} if samples else {})


def test_summarize_hands_the_claims_the_split_and_the_reward_std(tmp_path):
    # the whole path the report reads: hand-built evaluations and metrics -> summarize -> claims -> report table
    for method, std in (("ttrl", 0.3), ("co-rl", 0.8)):
        log = MetricsLog(tmp_path / method, tensorboard=False)
        for step in range(4):
            log.log(step, {"a/reward_std_normalized": std, "b/reward_std_normalized": std})
        log.close()
    gold = ["1", "2", "3", "4"]
    samples = {  # 16 T=1 samples per problem (enough for the per-problem split): these four, four times
        "a": [s * 4 for s in (["1"] * 4, ["2", "2", "2", "9"], ["3", "9", "9", "9"], ["9"] * 4)],
        "b": [s * 4 for s in (["1", "1", "9", "9"], ["2", "9", "9", "9"], ["3", "3", "9", "9"], ["9"] * 4)],
    }
    per_seed = [
        {
            "base": {a: _entry([0, 0, 0, 0], TYPES, samples=samples[a]) for a in "ab"},
            "ttrl": {a: _entry(TTRL[a][0], TYPES, tmp_path / "ttrl") for a in "ab"},
            "co-rl": {a: _entry(CORL[a][0], TYPES, tmp_path / "co-rl") for a in "ab"},
        }
    ]
    out = summarize(QuickstartOptions(), {"a": "A", "b": "B"}, [], per_seed, [], 1.0, 2.0, gold=gold, regime=REGIME, types=TYPES)
    claims = out["claims"]
    assert _by_text(claims, "TTRL's reward std")["margin"] == pytest.approx(0.5)
    per_type = _by_text(claims, "Theorem 1: Co-RL gains over TTRL where per-type")
    per_problem = _by_text(claims, "Theorem 1: Co-RL gains over TTRL where per-problem")
    assert per_type["margin"] == pytest.approx(0.25) and per_problem["numbers"]["above"]["problems"] == 1
    assert "(16 samples each)" in per_problem["claim"]
    table = theorem_table(claims)
    assert "| per type | p_A + p_B > 1 | 2 | +50.0 ± 100.0 | 1 / 0, p = 1.000 |" in table
    assert "| per problem | p_A + p_B < 1 | 2 | -25.0 ± 50.0 | 0 / 1, p = 1.000 |" in table


# -- claims whose precondition fails before RL: outside the design, neither held nor failed


def test_gt_claim_is_outside_the_design_for_a_base_with_under_8_points_to_gain():
    vectors = {
        "base": {"a": [[0] * 2 + [1] * 18], "b": [[0] * 10 + [1] * 10]},
        "gt": {"a": [[0] * 2 + [1] * 18], "b": [[1] * 20]},
    }
    # a's base: 93.5% greedy on validation, 6.5 points of room; b's 60%: a cannot gain 8, so the claim is not tested
    claims = check_claims(vectors, {}, [], None, regime={"greedy": {"a": 0.935, "b": 0.60}})
    c = _by_text(claims, "GT-Reward gains >= 8 points")
    assert c["holds"] is None and c["outside"] == "base a at 93.5% on validation leaves under 8 points to gain"
    assert c["margin"] == pytest.approx(0.0 - 0.08)  # measured all the same: a gained nothing on test
    assert describe(c).startswith("GT-Reward gains >= 8 points for every agent: outside the design (base a at 93.5%")
    assert "not reproduced" not in describe(c)
    # 92% leaves exactly 8 points: inside the design, and failed here
    at_bar = _by_text(check_claims(vectors, {}, [], None, regime={"greedy": {"a": 184 / 200, "b": 0.6}}), "GT-Reward")
    assert at_bar["holds"] is False and at_bar["outside"] is None
    # no validation greedy accuracy (results before the precondition): tested as before
    assert _by_text(check_claims(vectors, {}, [], None, regime={}), "GT-Reward")["holds"] is False


def test_theorem_split_with_no_type_below_the_line_is_outside_the_design():
    above_only = {"sampled_by_type": {"a": {"x": 0.7, "y": 0.6}, "b": {"x": 0.6, "y": 0.5}}}  # sums 1.3 and 1.1
    c = _by_text(check_claims({"co-rl": CORL, "ttrl": TTRL}, {}, [], None, above_only, TYPES), "Theorem 1")
    # every problem above: per-problem d of the agents [1, 0, 0, -0.5], gain +0.125, nothing to contrast it with
    assert c["numbers"]["above"]["gain"] == pytest.approx(0.125) and "below" not in c["numbers"]
    assert c["holds"] is None and c["outside"] == "no problem type on the below side of p_A + p_B = 1"
    # the per-problem split (the bases' own samples of each test problem): every sum 1.5, none below
    sampled = {"k": 16, "accuracy": {"a": [1, 1, 1, 1], "b": [0.5, 0.5, 0.5, 0.5]}}
    per_problem = check_claims({"co-rl": CORL, "ttrl": TTRL}, {}, [], None, base_sampled=sampled)
    assert _by_text(per_problem, "Theorem 1")["outside"] == "no problem on the below side of p_A + p_B = 1"
    # both sides present (REGIME: 1.3 and 0.5): tested
    assert _by_text(check_claims({"co-rl": CORL, "ttrl": TTRL}, {}, [], None, REGIME, TYPES), "Theorem 1")["outside"] is None


def test_theorem_teacher_sums_add_the_agents_ring_teacher_not_itself_nor_its_student():
    # three agents: a is taught by c, b by a, c by b (Co-RL's ring). Per type x: a 0.7, b 0.2, c 0.5
    per_type = {"a": {"x": 0.7}, "b": {"x": 0.2}, "c": {"x": 0.5}}
    # a + c = 1.2 (above), b + a = 0.9 (below), c + b = 0.7 (below); a + a would be 1.4, a + b (its student) 0.9
    assert type_sums(per_type, ["x", "x"]) == {"a": [1.2, 1.2], "b": [pytest.approx(0.9)] * 2, "c": [0.7, 0.7]}
    # per problem, from each base's own samples: the same ring
    assert problem_sums({"a": [0.7, 0.1], "b": [0.2, 0.9], "c": [0.5, 0.5]}) == {
        "a": [1.2, 0.6],
        "b": [pytest.approx(0.9), 1.0],
        "c": [0.7, 1.4],
    }
    # through the claim: a's problems sit above the line, b's and c's below
    vectors = {
        "co-rl": {"a": [[1, 1]], "b": [[0, 0]], "c": [[0, 0]]},
        "ttrl": {"a": [[0, 0]], "b": [[0, 0]], "c": [[0, 0]]},
    }
    regime = {"sampled_by_type": per_type}
    c = _by_text(check_claims(vectors, {}, [], None, regime, ["x", "x"]), "Theorem 1")
    # above: a's two problems, gain 1 each; below: b's and c's, gain 0: holds, margin min(1, -0) = 0
    assert c["numbers"]["above"]["gain"] == 1.0 and c["numbers"]["below"]["gain"] == 0.0 and c["holds"]
    assert c["numbers"]["above"]["problems"] == 2 and c["numbers"]["below"]["problems"] == 2


def test_the_seeds_summary_counts_a_claim_outside_the_design_as_neither():
    from corl.studies.seeds import per_seed, summary

    def seed(holds) -> dict:
        gt = {"claim": "GT", "holds": holds, "margin": 0.1, "noise": 0.2, "within_noise": True, "numbers": {}}
        corl = {**gt, "claim": "Co-RL", "holds": True}
        methods = {m: {"a": {"greedy": {"mean": 0.5}}} for m in ("base", "ttrl", "co-rl", "gt")}
        return {"claims": [gt, corl], "methods": methods, "families": {"a": "A"}, "wall_time_s": 1.0}

    runs = {0: seed(True), 1: seed(None), 2: seed(False)}
    rows = "\n".join(per_seed(runs))
    assert "| 0 | ✓ | ✓ | 2/2 |" in rows and "| 1 | ○ | ✓ | 1/1 (1 ○) |" in rows and "| 2 | ✗ | ✓ | 1/2 |" in rows
    assert "○: outside the design on that seed" in rows
    assert "| GT | 10.0 ± 0.0 | 1/2 (1 outside) | 3/3 |" in summary(runs)
