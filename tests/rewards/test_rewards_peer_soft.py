"""The `confidence` and `vote_share` rewards by hand, the GRPO advantages they lead to, and
what a policy could try against them (no answer, several answers at once)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from corl.config import ConfigError, validate_config
from corl.grpo import group_advantages
from corl.labels import Vote, majority_vote
from corl.rewards import RewardInputs, agreement_rewards
from corl.rewards.confidence import confidence_rewards
from corl.rewards.vote_share import vote_share_rewards


def zeros_equal(a, b):
    return a.lstrip("0") == b.lstrip("0")  # "02" and "2" are the same number; keys stay distinct


def inputs(answers, labels, equivalent=zeros_equal):
    return RewardInputs(
        texts=[], answers=answers, keys=answers, labels=labels, samples=[], equivalent=equivalent, k=len(answers[0])
    )


def test_confidence_is_agreement_times_the_labels_vote_share():
    labels = [Vote("1", "1", 3, 4), Vote("2", "2", 2, 4), None]
    answers = [["1", "1", None, "2"], ["3", "02", "2", "2"], ["1", "1", "1", "1"]]
    r = confidence_rewards(inputs(answers, labels))
    # prompt 0: agreement [1, 1, 0, 0] x 3/4; prompt 1: [0, 1 ("02" ~ "2"), 1, 1] x 2/4; prompt 2: no label
    assert r.tolist() == [[0.75, 0.75, 0.0, 0.0], [0.0, 0.5, 0.5, 0.5], [0.0] * 4]


def test_confidence_changes_the_update_only_without_the_group_std():
    labels = [Vote("1", "1", 3, 4), Vote("2", "2", 2, 4)]
    answers = [["1", "1", None, "2"], ["3", "02", "2", "2"]]
    scaled = confidence_rewards(inputs(answers, labels))
    binary = agreement_rewards(answers, answers, labels, zeros_equal)
    # scale "none": prompt 0 rewards [.75, .75, 0, 0], mean .375 -> [.375, .375, -.375, -.375]
    # (binary: mean .5 -> +-.5); prompt 1 [0, .5, .5, .5], mean .375 -> [-.375, .125, .125, .125]
    # (binary: [-.75, .25, .25, .25]): each group is the binary advantage x its label's share
    none = group_advantages(scaled, "none")
    assert torch.allclose(none, torch.tensor([[0.375, 0.375, -0.375, -0.375], [-0.375, 0.125, 0.125, 0.125]]))
    assert torch.allclose(none, group_advantages(binary, "none") * torch.tensor([[0.75], [0.5]]))
    # scale "group": prompt 0 std (unbiased) = sqrt(4 x .375^2 / 3) = .4330, .375 / (.4330 + 1e-4) = .86583;
    # binary: .5 / (.57735 + 1e-4) = .86588. The factor cancels up to the std's eps.
    group = group_advantages(scaled, "group")
    assert group[0, 0].item() == pytest.approx(0.375 / (0.1875**0.5 + 1e-4), abs=1e-5)
    assert torch.allclose(group, group_advantages(binary, "group"), atol=5e-4)


def base(**cohort):
    return {
        "agents": [{"name": "a", "model": "m"}, {"name": "b", "model": "m"}],
        "data": {"train": "t.jsonl"},
        "cohort": cohort,
    }


def test_confidence_is_refused_where_the_group_std_would_cancel_it():
    with pytest.raises(ConfigError, match="set grpo.scale_rewards: none"):
        validate_config(base(reward="confidence"))
    with pytest.raises(ConfigError, match="grpo.scale_rewards: group divides out"):
        validate_config(base(rewards=[{"name": "agreement"}, {"name": "confidence", "weight": 0.5}]))
    ok = validate_config({**base(reward="confidence"), "grpo": {"scale_rewards": "none"}})
    assert ok.cohort.reward == "confidence"


def test_vote_share_counts_every_agreeing_teacher_sample():
    # teacher's K = 5 answers 1, 1, 2, -, 02: entries ("1", 2), ("2", 1), ("02", 1), 4 answered of 5
    label = majority_vote(["1", "1", "2", None, "02"])
    r = vote_share_rewards(inputs([["1", "2", "002", "3", None]], [label]))
    # "1": 2/4; "2": key "2" (1) + "02" equivalent (1) = 2/4; "002": equivalent to both = 2/4; "3": 0; none: 0
    assert r.tolist() == [pytest.approx([0.5, 0.5, 0.5, 0.0, 0.0])]


def test_vote_share_is_the_random_controls_expected_reward_with_an_unanswered_teacher_sample():
    # teacher 1, 1, 2, (none): `random` draws among the 3 answered samples, so it labels "1" with
    # probability 2/3 and "2" with 1/3; a completion saying 1 earns 2/3 in expectation, 2 earns 1/3
    # (not 2/4 and 1/4: the unanswered sample is never drawn)
    label = majority_vote(["1", "1", "2", None])
    r = vote_share_rewards(inputs([["1", "2", "3", None]], [label]))
    assert r.tolist() == [pytest.approx([2 / 3, 1 / 3, 0.0, 0.0])]
    # the same number by drawing: over 3000 prompts the random control's labels say "1" about 2000 times
    from corl.labels.random_label import draw_seed, random_label

    labels = [random_label(["1", "1", "2", None], ["1", "1", "2", None], 0.0, draw_seed(0, 0, 0, f"q{i}")) for i in range(3000)]
    earned = sum(v.key == "1" for v in labels) / len(labels)  # binomial sd sqrt(2/3 x 1/3 / 3000) = 0.0086
    assert abs(earned - r[0, 0].item()) < 5 * 0.0086


def test_abstaining_never_raises_a_self_taught_groups_mean_vote_share():
    # a group that is its own teacher: 4 of 8 say "7", 4 say nothing -> "7" earns 4/4 each, mean 4/8 = 0.5;
    # all 8 saying "7" -> mean 1.0; 2 of 8 -> each earns 2/2, mean 2/8: fewer answers, lower mean
    for answered, mean in ((8, 1.0), (4, 0.5), (2, 0.25)):
        group = ["7"] * answered + [None] * (8 - answered)
        assert vote_share_rewards(inputs([group], [majority_vote(group)])).mean().item() == pytest.approx(mean)


def test_vote_share_of_a_label_without_its_vote_and_of_gold():
    plugin = Vote("1", "1", 3, 4)  # a source that does not record shares: the winner alone
    gold = Vote("7", "7", 1, 1, shares=(("7", "7", 1),))  # what label source truth hands out
    r = vote_share_rewards(inputs([["1", "2"], ["7", "07"], ["7", "7"]], [plugin, gold, None]))
    assert r.tolist() == [[0.75, 0.0], [1.0, 1.0], [0.0, 0.0]]  # gold: the same as agreement


@settings(max_examples=200, deadline=None)
@given(
    teacher=st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=6),
    answers=st.lists(st.sampled_from(["a", "b", "d", None]), min_size=1, max_size=6),
)
def test_vote_share_is_agreement_averaged_over_a_label_drawn_from_the_teacher(teacher, answers):
    """The expectation of the random-label control's reward: mean over the teacher's answered
    samples (the ones `random` draws from, uniformly) of the agreement with that sample."""
    exact = lambda a, b: a == b  # noqa: E731
    label = majority_vote(teacher)
    soft = vote_share_rewards(inputs([answers], [label], exact))
    drawable = [t for t in teacher if t is not None]
    per_sample = [agreement_rewards([answers], [answers], [Vote(t, t, 1, 1)], exact) for t in drawable]
    expected = torch.stack(per_sample).mean(0) if label is not None else torch.zeros(1, len(answers))
    assert torch.allclose(soft, expected)
    assert float(soft.max()) <= 1.0


HEDGES = [  # as tests/answers/test_answers.py: what a policy would try instead of solving
    r"The answer is \boxed{7 or 8}",
    r"\boxed{7}\boxed{8}",
    r"\boxed{7, 8}",
    r"\boxed{\{7, 8\}}",
    r"\boxed{[7, 8]}",
    r"\boxed{7 \le x \le 8}",
    r"\boxed{}",
    "no box at all: 7 or 8",
]


def math_inputs(completions, teacher_texts, label_of):
    from corl.answers import answer_key, extract_answer, is_equivalent

    def read(texts):
        answers = [extract_answer(t) for t in texts]
        return answers, [answer_key(a) if a is not None else None for a in answers]

    answers, keys = read(completions)
    t_answers, t_keys = read(teacher_texts)
    label = label_of(t_keys, t_answers)
    return RewardInputs(
        texts=completions,
        answers=[answers],
        keys=[keys],
        labels=[label],
        samples=[],
        equivalent=is_equivalent,
        k=len(completions),
    )


def test_hedges_and_missing_answers_earn_nothing_under_any_new_reward():
    from corl.labels.random_label import random_label

    # the teacher says 7 three times and 8 once: every label (its majority, any random draw) is 7 or 8
    teacher = [r"\boxed{7}", r"\boxed{7}", r"\boxed{8}", r"\boxed{7}"]
    completions = [*HEDGES, r"\boxed{7}", r"\boxed{8}"]
    for label_of in (majority_vote, lambda k, a: random_label(k, a, 0.0, seed=1), lambda k, a: random_label(k, a, 0.0, seed=2)):
        x = math_inputs(completions, teacher, label_of)
        agree = agreement_rewards(x.answers, x.keys, x.labels, x.equivalent)
        for reward in (confidence_rewards(x), vote_share_rewards(x)):
            hedged = reward[0, : len(HEDGES)]
            assert hedged.tolist() == [0.0] * len(HEDGES)  # a hedge or no answer earns nothing, as under agreement
            assert agree[0, : len(HEDGES)].tolist() == [0.0] * len(HEDGES)
        # the honest answers do earn: the test can tell a reward that pays nothing from one that pays hedges nothing
        assert vote_share_rewards(x)[0, len(HEDGES) :].tolist() == pytest.approx([0.75, 0.25])
        assert (confidence_rewards(x) <= agree).all()
