"""Label-free scores, selection rules and stop rules on small hand-computed tables."""

import pytest

from corl.trainer.scores import greedy_agreement, label_free_score, majority_share, mean_reward_std, stability, top_answer_share
from corl.trainer.selection import choose, stop_reason


def test_greedy_agreement_counts_prompts_where_every_agent_gives_the_same_key():
    # prompts 0 and 3 agree; 1 differs; 2 has no answer from either (no agreement): 2 / 4
    assert greedy_agreement([["1", "2", None, "3"], ["1", "5", None, "3"]]) == 0.5
    # three agents: only prompt 0 has one key from all three: 1 / 3
    assert greedy_agreement([["1", "2", "3"], ["1", "2", "4"], ["1", "7", "3"]]) == pytest.approx(1 / 3)
    assert greedy_agreement([["1", "2"]]) is None  # one agent has no peer


def test_majority_share_is_the_mean_share_of_the_majority_vote():
    samples = [
        [["1", "1", "2", None], [None, None, None, None]],  # 2/4, 0 (nobody answered)
        [["3", "3", "3", "3"], ["4", "5", "6", "7"]],  # 4/4, 1/4
    ]
    assert majority_share(samples) == pytest.approx((0.5 + 0 + 1 + 0.25) / 4)  # 0.4375


def test_stability_counts_unchanged_answered_prompts():
    # agent 0: same "1", changed 2 -> 3, None both times (not an answer): 1 of 3; agent 1: 2 of 3
    previous = [["1", "2", None], ["a", "b", "c"]]
    now = [["1", "3", None], ["a", "b", "d"]]
    assert stability(previous, now) == pytest.approx(3 / 6)
    assert stability(None, now) is None


def test_top_answer_share_is_the_most_repeated_answer_of_any_agent():
    assert top_answer_share([["7", "7", "7", None], ["1", "2", "3", "4"]]) == 0.75  # agent 0: "7" on 3 of 4


def test_mean_reward_std_over_agents_and_steps():
    steps = [{"a/reward_std": 0.2, "b/reward_std": 0.4}, {"a/reward_std": 0.0, "b/reward_std": 0.2, "x": 9.0}]
    assert mean_reward_std(steps, ["a", "b"]) == pytest.approx(0.8 / 4)
    assert mean_reward_std([], ["a"]) is None


def test_label_free_score_is_agreement_else_majority_share():
    assert label_free_score({"agreement": 0.25, "majority_share": 0.9}) == 0.25
    assert label_free_score({"agreement": None, "majority_share": 0.9}) == 0.9


def point(step, label_free, accuracy=None, candidate=True, **extra):
    return {"step": step, "done": step + 1, "candidate": candidate, "label_free": label_free, "val_accuracy": accuracy} | extra


def test_truth_and_label_free_choose_different_points_and_ties_go_later():
    points = [
        point(-1, 0.9, 0.9, candidate=False),  # the base model: recorded, never chosen
        point(9, 0.6, 0.5),
        point(19, 0.4, 0.7),  # truth's best
        point(29, 0.6, 0.3),  # label_free ties with step 9: the later wins
        point(39, 0.5, 0.7),  # truth ties with step 19: the later wins
    ]
    assert choose(points, "label_free")["step"] == 29
    assert choose(points, "truth")["step"] == 39
    assert choose(points, "last")["step"] == 39


def test_label_free_choice_ignores_the_accuracy_entirely():
    with_answers = [point(9, 0.2, 0.9), point(19, 0.7, 0.1)]
    without = [point(9, 0.2), point(19, 0.7)]
    assert choose(with_answers, "label_free") == with_answers[1]
    assert choose(without, "label_free")["step"] == 19
    assert choose(without, "truth") is None


def test_plateau_stops_after_patience_points_without_improvement():
    flat = [point(-1, 0.2, candidate=False), point(9, 0.5), point(19, 0.4), point(29, 0.5)]
    # before the last 2 points the best is 0.5; since then at most 0.5: no improvement
    assert "plateau" in stop_reason(flat, "plateau", patience=2, min_delta=0.0, collapse_share=0.9)
    better = flat[:-1] + [point(29, 0.6)]
    assert stop_reason(better, "plateau", patience=2, min_delta=0.0, collapse_share=0.9) is None
    # 0.6 beats 0.5, but not by more than min_delta 0.2
    assert stop_reason(better, "plateau", patience=2, min_delta=0.2, collapse_share=0.9) is not None
    assert stop_reason(flat[:2], "plateau", patience=2, min_delta=0.0, collapse_share=0.9) is None  # too few points


def test_collapse_on_one_answer_everywhere_or_flat_rewards_with_full_agreement():
    args = {"patience": 1, "min_delta": 0.0, "collapse_share": 0.9}
    one_answer = [point(9, 0.5, top_answer_share=0.95, reward_std=0.3)]
    assert "same greedy answer" in stop_reason(one_answer, "collapse", **args)
    flat = [point(9, 1.0, top_answer_share=0.2, reward_std=0.0005)]
    assert "reward std" in stop_reason(flat, "collapse", **args)
    # flat rewards alone (e.g. nothing labeled yet) are no collapse
    unsure = [point(9, 0.5, top_answer_share=0.2, reward_std=0.0)]
    assert stop_reason(unsure, "collapse", **args) is None
    assert stop_reason(one_answer, "none", **args) is None
