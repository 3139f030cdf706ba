"""Label-free scores, selection rules and stop rules on small hand-computed tables."""

import json
import math

import pytest

from corl.config import validate_config
from corl.trainer.scores import (
    answer_variety,
    chance_agreement,
    greedy_agreement,
    label_free_score,
    majority_share,
    mean_reward_std,
    self_agreement,
    self_chance_agreement,
    stability,
    top_answer_share,
    variety_kept,
)
from corl.trainer.selection import Selector, choose, stop_reason


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


def test_chance_agreement_is_the_product_of_each_agents_answer_shares():
    # agent 0: 7 on 3 of 4 prompts, 8 on 1; agent 1: 7 on 2, 9 on 1, 8 on 1 -> 3/4 x 2/4 + 1/4 x 1/4 = 7/16
    keys = [["7", "7", "7", "8"], ["7", "7", "9", "8"]]
    assert chance_agreement(keys) == pytest.approx(7 / 16)
    # an unanswered prompt is no answer: agent 1 answers 7 on 1 of 2 prompts -> 1 x 1/2
    assert chance_agreement([["7", "7"], ["7", None]]) == pytest.approx(0.5)
    # three agents: all give 5 on 1 of 2 prompts -> 1/2 x 1/2 x 1/2
    assert chance_agreement([["5", "1"], ["5", "2"], ["5", "3"]]) == pytest.approx(1 / 8)
    assert chance_agreement([["1"]]) is None
    # agreement 3/4 (prompts 0, 1, 3) minus 7/16 = 5/16
    assert label_free_score({"agreement": greedy_agreement(keys), "chance_agreement": chance_agreement(keys)}) == 5 / 16


def test_self_agreement_and_its_chance_level_for_one_agent():
    # greedy 1 / 2 / none; samples of prompt 0: 1,1,2,- (2 of 4 confirm), prompt 1: 2,2,2,2 (4 of 4), prompt 2: 0
    keys = [["1", "2", None]]
    samples = [[["1", "1", "2", None], ["2", "2", "2", "2"], ["3", "3", "1", None]]]
    assert self_agreement(keys, samples) == pytest.approx((0.5 + 1 + 0) / 3)
    # pooled samples (12): "1" x 3, "2" x 5, "3" x 2; greedy shares: 1 -> 1/3, 2 -> 1/3
    # chance = 1/3 x 3/12 + 1/3 x 5/12 = 8/36
    assert self_chance_agreement(keys, samples) == pytest.approx(8 / 36)
    scores = {"agreement": None, "self_agreement": 0.5, "chance_agreement": 8 / 36, "majority_share": 0.9}
    assert label_free_score(scores) == pytest.approx(0.5 - 8 / 36)


def test_label_free_score_is_agreement_minus_chance_else_self_agreement_minus_chance():
    assert label_free_score({"agreement": 0.25, "majority_share": 0.9}) == 0.25  # no chance level recorded: 0
    assert label_free_score({"agreement": 0.6, "chance_agreement": 0.1, "self_agreement": 0.9}) == pytest.approx(0.5)
    assert label_free_score({"agreement": None, "self_agreement": 0.9, "chance_agreement": 0.2}) == pytest.approx(0.7)
    assert label_free_score({"agreement": None, "majority_share": 0.9}) == 0.0  # one agent without samples


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
    # the agreement, not the label-free score, is what says "every sample the same answer": here
    # every prompt has its own answer, so chance is 0 and both are 1
    flat = [point(9, 1.0, top_answer_share=0.2, reward_std=0.0005, agreement=1.0)]
    assert "reward std" in stop_reason(flat, "collapse", **args)
    # two answers, half the prompts each: label-free 1 - 1/2 = 0.5, but every sample agrees and earns the same
    halves = [point(9, 0.5, top_answer_share=0.5, reward_std=0.0, agreement=1.0)]
    assert "reward std" in stop_reason(halves, "collapse", **args)
    # one agent (no greedy agreement): its majority share
    flat_one = [point(9, 0.9, top_answer_share=0.2, reward_std=0.0, agreement=None, majority_share=1.0)]
    assert "reward std" in stop_reason(flat_one, "collapse", **args)
    # flat rewards alone (e.g. nothing labeled yet) are no collapse
    unsure = [point(9, 0.5, top_answer_share=0.2, reward_std=0.0, agreement=0.5)]
    assert stop_reason(unsure, "collapse", **args) is None
    assert stop_reason(one_answer, "none", **args) is None


def test_plateau_does_not_measure_the_trained_points_against_the_base_model():
    # eval_on_start's base point (0.8) is never chosen, so it is no bar either: 0.5 -> 0.6 -> 0.7 is rising
    args = {"patience": 2, "min_delta": 0.0, "collapse_share": 0.9}
    rising = [point(-1, 0.8, candidate=False), point(9, 0.5), point(19, 0.6), point(29, 0.7)]
    assert stop_reason(rising, "plateau", **args) is None
    # the trained points' own plateau still stops: best 0.5 at step 9, then 0.5 and 0.4
    flat = [point(-1, 0.8, candidate=False), point(9, 0.5), point(19, 0.5), point(29, 0.4)]
    assert "not improved on 0.5000" in stop_reason(flat, "plateau", **args)
    # two trained points are too few for patience 2, with or without the base point
    assert stop_reason(rising[:3], "plateau", **args) is None


def selector(tmp_path, **stop):
    cfg = validate_config(
        {
            "agents": [{"name": "a", "model": "m"}, {"name": "b", "model": "m"}],
            "data": {"train": "t.jsonl", "val": "v.jsonl"},
            "cohort": {"stop": {"rule": "collapse", **stop}},
            "logging": {"select": "label_free", "select_also": ["truth"], "select_samples": 2},
        }
    )
    return Selector(cfg, ["a", "b"], {})


def healthy_and_collapsed(b=20):
    """Two agents on 20 prompts. Healthy: each prompt its own answer, the agents agree on 12 (0.60).
    Collapsed: both say "0" on 19 prompts (95%) and "5" on one: they agree everywhere (1.00)."""
    truth = [str(10 + i) for i in range(b)]
    healthy = [truth, truth[:12] + [str(100 + i) for i in range(b - 12)]]
    collapsed = [["0"] * (b - 1) + ["5"]] * 2
    return healthy, collapsed


def test_the_selector_never_chooses_nor_publishes_a_collapsed_point(tmp_path):
    healthy, collapsed = healthy_and_collapsed()
    sel = selector(tmp_path)
    samples = [[[k, k] for k in agent] for agent in healthy]
    sel.observe(9, healthy, samples, accuracy=0.60)
    assert sel.folders_at(10) == ["best", "best-truth"] and sel.stop_reason() is None
    scores = sel.observe(19, collapsed, [[[k, k] for k in agent] for agent in collapsed], accuracy=0.10)
    # agreement 1.00, chance 0.95^2 + 0.05^2 = 0.905: 0.095 beyond chance, times the variety kept:
    # exp(-(0.95 ln 0.95 + 0.05 ln 0.05)) = 1.2196 effective answers of the 20 both agents had
    # at the healthy point; the healthy point: 0.60 minus chance 12 shared answers x 1/20 x 1/20 = 0.57
    kept = math.exp(-(0.95 * math.log(0.95) + 0.05 * math.log(0.05))) / 20
    assert scores["select/variety_kept"] == pytest.approx(kept)
    assert scores["select/agreement"] == 1.0 and scores["select/label_free"] == pytest.approx(0.095 * kept)
    assert sel.state["points"][0]["label_free"] == pytest.approx(0.57)
    assert sel.state["points"][1]["collapsed"] and not sel.state["points"][0]["collapsed"]
    assert "one agent gives one and the same greedy answer on 95%" in sel.stop_reason()  # cohort.stop: collapse stops here
    assert sel.folders_at(20) == []  # best/ is not rewritten with it (nor best-truth/: its accuracy is 0.10)
    assert sel.record()["chosen"]["label_free"] == {"step": 10, "checkpoint_step": 10}  # one numbering: updates done


def test_a_collapsed_point_is_excluded_even_with_the_best_score():
    # the concentration term is the first guard, the collapse flag the second: a collapsed point whose
    # score somehow beats every other point is still not chosen; with nothing else, nothing is
    points = [point(9, 0.05, 0.3, collapsed=False), point(19, 0.5, 0.4, collapsed=True)]
    assert choose(points, "label_free")["step"] == 9
    assert choose(points[1:], "label_free") is None
    assert choose(points, "truth")["step"] == 19 and choose(points, "last")["step"] == 19  # diagnostics, untouched


def one_agent_selector() -> Selector:
    """A TTRL run's selector: one agent labelled by its own vote, label_free selection."""
    cfg = validate_config(
        {
            "agents": [{"name": "a", "model": "m"}],
            "data": {"train": "t.jsonl", "val": "v.jsonl"},
            "cohort": {"label_source": "self"},
            "logging": {"select": "label_free"},
        }
    )
    return Selector(cfg, ["a"], {})


def test_one_agent_collapsing_onto_its_own_vote_scores_below_a_healthy_one():
    # TTRL: one agent. Healthy: own answer per prompt, 3 of 4 samples confirm it (self agreement 0.75,
    # chance ~0: each answer is 1/20 of the greedy and ~1/20 of the samples). Collapsed: "0" on 19 of 20
    # prompts and in every sample: self agreement 1.0 on those 19, chance 19/20 x 76/80 + ...
    truth = [str(10 + i) for i in range(20)]
    healthy = ([truth], [[[k, k, k, "x"] for k in truth]])
    collapsed_keys = ["0"] * 19 + ["5"]
    collapsed = ([collapsed_keys], [[[k] * 4 for k in collapsed_keys]])
    sel = one_agent_selector()
    sel.observe(9, *healthy, accuracy=0.6)
    sel.observe(19, *collapsed, accuracy=0.1)
    first, second = sel.state["points"]
    # healthy: 0.75 - sum_a (1/20)(3/80) = 0.75 - 20 x 3/1600 = 0.7125; the "x" samples are one key, never greedy
    assert first["label_free"] == pytest.approx(0.75 - 20 * (1 / 20) * (3 / 80))
    # collapsed: 1.0 - (19/20 x 76/80 + 1/20 x 4/80) = 1.0 - 0.905 = 0.095, times the variety kept 1.2196 / 20
    kept = math.exp(-(0.95 * math.log(0.95) + 0.05 * math.log(0.05))) / 20
    assert second["label_free"] == pytest.approx((1.0 - (19 / 20 * 76 / 80 + 1 / 20 * 4 / 80)) * kept)
    assert second["majority_share"] == 1.0 and second["collapsed"]
    assert choose(sel.state["points"], "label_free")["step"] == 9


def test_spelling_one_answer_differently_does_not_spread_it_over_keys():
    """What a collapsed cohort could try against the concentration term: write its one answer in a
    different way on each prompt. Vote keys are canonical, so every spelling is one key; the
    spellings that keep distinct keys ("6+1", "7^1") must then be coordinated across the agents
    prompt by prompt, or the agreement term pays for the spread instead."""
    from corl.answers import answer_key

    spellings = ["7", "7.0", "07", "14/2", r"\frac{14}{2}", "x=7", "+7", r"\text{7}", "7 units", r"\dfrac{14}{2}"]
    keys = [[answer_key(a) for a in spellings]] * 2
    assert len({k for agent in keys for k in agent}) == 1
    assert chance_agreement(keys) == 1.0 and greedy_agreement(keys) == 1.0  # label-free score 0
    # distinct keys, chosen by each agent on its own: 3 spellings over 12 prompts, uncoordinated
    odd = ["6+1", "7^1", "{7}"]
    a = [odd[i % 3] for i in range(12)]
    b = [odd[(2 * i) % 3] for i in range(12)]
    spread = greedy_agreement([a, b]) - chance_agreement([a, b])
    # agreement: prompts 0, 3, 6, 9 (same spelling by both) = 4/12; chance 3 x (1/3 x 1/3) = 1/3: no score at all
    assert spread == pytest.approx(0.0)
    assert spread < 0.60 - chance_agreement(healthy_and_collapsed()[0])  # far below the healthy cohort


def test_answer_variety_is_the_effective_number_of_distinct_answers():
    assert answer_variety(["1", "2", "3", "4"]) == pytest.approx(4.0)  # four answers, equally often
    assert answer_variety(["7", "7", "7", None]) == pytest.approx(1.0)  # one answer (no answer is none)
    assert answer_variety([None, None]) == 0.0
    # 1, 1, 2, 3: entropy -(1/2 ln 1/2 + 2 x 1/4 ln 1/4) = 1.5 ln 2, exp = 2^1.5 = 2.828
    assert answer_variety(["1", "1", "2", "3"]) == pytest.approx(2**1.5)
    # the cohort's bar is the smallest agent's best (4): agent 0 at 4 keeps it all (its fall from 8
    # is down to its peer's variety), agent 1 keeps 3 of 4
    assert variety_kept([4.0, 3.0], [8.0, 4.0]) == 0.75
    assert variety_kept([6.0, 5.0], [8.0, 4.0]) == 1.0  # above the bar earns no more than 1
    assert variety_kept([2.0, 4.0], [8.0, 4.0]) == 0.5  # below it: a fall no peer explains
    assert variety_kept([4.0], [8.0]) == 0.5  # one agent: its own best is the bar
    assert variety_kept([0.0, 3.0], [0.0, 4.0]) == 0.75  # an agent that never answered sets no bar
    assert variety_kept([4.0], None) == 1.0


def test_a_learner_whose_scattered_errors_turn_right_is_not_read_as_a_collapse(tmp_path):
    """What Co-RL did in text seed 4: one agent's slip scattered its wrong answers over more values
    than the right ones take; as its peer taught it, its variety fell to its peer's. 8 prompts whose
    right answers take 4 values (2 prompts each). Step 9: agent a answers every prompt with its own
    wrong value (8 answers), b is right; they agree nowhere. Step 19: a is right too."""
    sel = selector(tmp_path)
    truth = ["1", "1", "2", "2", "3", "3", "4", "4"]
    scattered = [str(100 + i) for i in range(8)]
    sel.observe(9, [scattered, truth], [[[k, k] for k in agent] for agent in (scattered, truth)], accuracy=0.5)
    scores = sel.observe(19, [truth, truth], [[[k, k] for k in truth]] * 2, accuracy=1.0)
    # variety a: 8 -> 4, b: 4 -> 4. The bar is b's best, 4, so both keep all of it (a's own best
    # would have halved the score). Agreement 1, chance 4 x (1/4 x 1/4) = 1/4: 0.75 x 1
    assert scores["select/variety_kept"] == 1.0 and scores["select/label_free"] == pytest.approx(0.75)
    assert choose(sel.state["points"], "label_free")["step"] == 19


def test_a_cohort_collapsing_below_its_least_varied_agent_still_loses(tmp_path):
    """The same two agents, both right at step 9, then both piling 8 prompts onto 2 answers (4 each)
    at step 19: agreement stays 1, chance rises to 1/2, and both fall below the bar (4 answers)."""
    sel = selector(tmp_path)
    truth = ["1", "1", "2", "2", "3", "3", "4", "4"]
    piled = ["1", "1", "1", "1", "2", "2", "2", "2"]
    sel.observe(9, [truth, truth], [[[k, k] for k in truth]] * 2, accuracy=1.0)
    scores = sel.observe(19, [piled, piled], [[[k, k] for k in piled]] * 2, accuracy=0.5)
    # step 9: 1 - 1/4 = 0.75; step 19: (1 - 2 x 1/4) x 2/4 = 0.25
    assert sel.state["points"][0]["label_free"] == pytest.approx(0.75)
    assert scores["select/variety_kept"] == pytest.approx(0.5) and scores["select/label_free"] == pytest.approx(0.25)
    assert choose(sel.state["points"], "label_free")["step"] == 9


def test_a_collapse_under_way_loses_to_the_point_before_it_began():
    """What TTRL at lr 3e-4 did on the tiny task (corl/studies/selection_collapse.py): more and more
    prompts answered with a few values, each more confidently. Step 9: 8 prompts, 8 answers, 3 of 4
    samples confirm each. Step 19: the same 8 prompts on 4 answers (2 each), every sample confirms.
    Beyond chance alone the later point wins; the variety it lost (8 -> 4) makes it lose."""
    sel = one_agent_selector()
    spread = [str(i) for i in range(8)]
    sel.observe(9, [spread], [[[k, k, k, "x"] for k in spread]], accuracy=0.5)
    piled = ["10", "10", "2", "2", "3", "3", "9", "9"]
    sel.observe(19, [piled], [[[k] * 4 for k in piled]], accuracy=0.1)
    first, second = sel.state["points"]
    # step 9: self agreement 3/4; chance sum_a 1/8 x 3/32 = 3/32; variety kept 1: 0.75 - 0.09375 = 0.65625
    assert first["label_free"] == pytest.approx(0.75 - 3 / 32)
    # step 19: self agreement 1; chance 4 x (1/4 x 1/4) = 1/4; beyond chance 0.75 (above 0.656);
    # variety 4 of 8 kept: 0.75 x 1/2 = 0.375
    assert second["self_agreement"] - second["chance_agreement"] > first["label_free"]
    assert second["variety"] == [pytest.approx(4.0)] and second["variety_kept"] == pytest.approx(0.5)
    assert second["label_free"] == pytest.approx(0.375)
    assert not second["collapsed"] and choose(sel.state["points"], "label_free")["step"] == 9


def test_the_quickstart_reports_a_label_free_rule_that_chose_no_point(tmp_path):
    from corl.studies.quickstart_selection import evaluate_selected, selection_table, summarize_selection

    record = {
        "folders": {"best": "label_free", "best-truth": "truth"},
        "chosen": {"last": {"step": 39, "checkpoint_step": 40}, "label_free": None, "truth": {"step": 9, "checkpoint_step": 10}},
    }
    (tmp_path / "selection.json").write_text(json.dumps(record))
    collapsed = evaluate_selected(tmp_path, "a", 0.2, accuracy=lambda folder: 0.5)
    assert collapsed == {
        "last": {"checkpoint_step": 40, "greedy": 0.2},
        "label_free": {"checkpoint_step": None, "greedy": None},
        "truth": {"checkpoint_step": 10, "greedy": 0.5},
    }
    chose = {"last": {"checkpoint_step": 40, "greedy": 0.3}, "label_free": {"checkpoint_step": 20, "greedy": 0.4}}
    summary = summarize_selection([{"selection": collapsed}, {"selection": chose}])
    assert summary["label_free"] == {"mean": 0.4, "std": 0.0, "steps": [20], "unchosen": 1}
    alone = summarize_selection([{"selection": collapsed}])
    assert alone["label_free"]["mean"] is None and alone["label_free"]["unchosen"] == 1
    table = selection_table({"methods": {"ttrl": {"a": {"selection": alone}}}})
    assert "| ttrl | a | 20.0 (step 40) | none (collapsed) | 50.0 (step 10) |" in table


def test_selection_variants_rescores_recorded_points_by_validation_regret(tmp_path):
    """`python -m corl.studies.selection_variants` on one hand-built run: step 20 keeps every answer (10 of 10
    effective answers), step 40 agrees more but its variety fell to 5. Shipped: 0.5 x 1 = 0.5 at
    step 20 against 0.7 x 5/10 = 0.35 at step 40, so it chooses step 20 (validation 0.6 where the
    best candidate has 0.8: 20 points of regret); without the variety term step 40 (regret 0)."""
    import subprocess
    import sys

    def pt(step, agreement, variety, accuracy, candidate=True):
        return {
            "step": step,
            "candidate": candidate,
            "agreement": agreement,
            "chance_agreement": 0.0,
            "variety": [variety, 10.0],
            "val_accuracy": accuracy,
        }

    run = tmp_path / "seed0" / "co-rl"
    (run / "best").mkdir(parents=True)
    record = {"points": [pt(0, 0.3, 10.0, 0.5, candidate=False), pt(20, 0.5, 10.0, 0.6), pt(40, 0.7, 5.0, 0.8)]}
    (run / "selection.json").write_text(json.dumps(record))
    (run / "best" / "selection.json").write_text(json.dumps({"points": []}))  # a published copy: not a run
    command = [sys.executable, "-m", "corl.studies.selection_variants", str(tmp_path)]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == "1 runs"
    assert "shipped (variety kept)       mean regret 20.00 points, over 5 on 1 runs" in out
    assert "no variety term              mean regret 0.00 points, over 5 on 0 runs" in out
    assert f"no variety term: {run} step 40 (0.0) where shipped chose step 20 (20.0)" in out


def test_the_collapse_threshold_counts_a_share_equal_to_it():
    """cohort.stop.collapse_share is a ">=" bar, for the point's flag and for the stop: one agent on
    one answer on exactly 9 of 10 prompts (0.9) has collapsed; on 8 of 10 it has not."""

    def observed(same: int) -> Selector:
        sel = selector(None)
        keys = [["0"] * same + [str(i) for i in range(1, 11 - same)], [str(10 + i) for i in range(10)]]
        sel.observe(9, keys, [[[k, k] for k in agent] for agent in keys], accuracy=0.5)
        return sel

    at, below = observed(9), observed(8)
    assert at.state["points"][0]["top_answer_share"] == 0.9 == at.cfg.cohort.stop.collapse_share
    assert at.state["points"][0]["collapsed"] and "on 90% of the validation prompts" in at.stop_reason()
    assert choose(at.state["points"], "label_free") is None and at.folders_at(10) == ["best-truth"]
    assert not below.state["points"][0]["collapsed"] and below.stop_reason() is None
    assert below.folders_at(10) == ["best", "best-truth"]
