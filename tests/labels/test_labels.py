"""Votes, ties, the peer ring, label sources and agreement rewards, by hand."""

import inspect

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from corl.labels import AnswersTable, build_label_source, majority_vote, peer_labels, ring_teacher, self_labels
from corl.rewards import agreement_rewards


def table(per_agent, ids=None):
    """answers[n][b][k] as written; keys = the answers themselves (exact-match key)."""
    answers = tuple(tuple(tuple(group) for group in agent) for agent in per_agent)
    ids = ids or tuple(f"p{b}" for b in range(len(per_agent[0])))
    return AnswersTable(prompt_ids=tuple(ids), answers=answers, keys=answers)


def exact(a, b):
    return a == b


def test_majority_vote_counts_and_ignores_missing():
    vote = majority_vote(["3", None, "5", "3", None])
    assert (vote.key, vote.count, vote.total) == ("3", 2, 5)
    assert vote.agreement == pytest.approx(0.4)
    assert majority_vote([None, None]) is None
    assert majority_vote([]) is None


def test_majority_vote_tie_goes_to_the_first_seen():
    assert majority_vote(["7", "2", "2", "7"]).key == "7"
    assert majority_vote(["2", "7", "7", "2"]).key == "2"
    assert majority_vote([None, "b", "a"]).key == "b"


def test_majority_vote_reports_the_first_spelling_of_the_winner():
    vote = majority_vote(["half", "half", "x"], answers=["\\frac12", "0.5", "x"])
    assert vote.answer == "\\frac12"


def test_ring_teachers():
    assert [ring_teacher(n, 2) for n in range(2)] == [1, 0]  # N = 2: mutual
    assert [ring_teacher(n, 3) for n in range(3)] == [2, 0, 1]  # agent 0 taught by agent N-1
    with pytest.raises(ValueError, match="at least 2"):
        ring_teacher(0, 1)


def test_peer_labels_come_from_the_predecessor_never_from_oneself():
    t = table(
        [
            [["1", "1", "2"]],  # agent 0 majority 1
            [["2", "2", "2"]],  # agent 1 majority 2
            [["3", "3", "1"]],  # agent 2 majority 3
        ]
    )
    labels = peer_labels(t)
    assert [labels[n][0].key for n in range(3)] == ["3", "1", "2"]
    assert [v[0].key for v in self_labels(t)] == ["1", "2", "3"]


def test_unlabeled_when_the_teacher_has_no_answer_or_too_little_agreement():
    t = table([[[None, None], ["4", "5"]], [["1", "1"], ["6", "7"]]])
    labels = peer_labels(t, min_agreement=0.6)
    assert labels[1][0] is None  # teacher (agent 0) gave no answer on prompt 0
    assert labels[0][0].key == "1"  # agent 1 agreed 2/2 on prompt 0
    assert labels[0][1] is None and labels[1][1] is None  # 1/2 agreement < 0.6


def test_truth_labels_are_the_dataset_answers_and_only_truth_gets_them():
    t = table([[["1"], ["2"]], [["1"], ["9"]]], ids=("a", "b"))
    source = build_label_source("truth", gold={"a": "1", "b": ""}, key=str.strip)
    labels = source(t)
    assert labels[0][0].answer == "1" and labels[1][0].answer == "1"
    assert labels[0][1] is None  # an empty gold answer is no label
    # The label-free sources take no ground truth: their functions have no parameter for it.
    assert set(inspect.signature(peer_labels).parameters) == {"table", "min_agreement"}
    assert set(inspect.signature(self_labels).parameters) == {"table", "min_agreement"}
    with pytest.raises(ValueError, match="answer column"):
        build_label_source("truth")
    with pytest.raises(ValueError, match="unknown label source"):
        build_label_source("oracle")


def test_agreement_rewards_by_hand():
    t = table([[["3", "4", None, "3"], ["1", "1", "1", "1"]], [["3", "3", "8", "8"], [None, None, None, None]]])
    labels = peer_labels(t)
    # agent 0 prompt 0: label = agent 1's majority "3" (tie 3/8 -> first seen "3")
    # agent 0 prompt 1: agent 1 has no answer -> unlabeled -> all 0
    r0 = agreement_rewards(t.answers[0], t.keys[0], labels[0], exact)
    assert r0.tolist() == [[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]]
    # agent 1 prompt 0: label "3" (agent 0 majority); prompt 1: label "1"
    r1 = agreement_rewards(t.answers[1], t.keys[1], labels[1], exact)
    assert r1.tolist() == [[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]


def test_rewards_use_the_careful_check_when_keys_differ():
    answers = [["0.5", "1/2", "2"]]
    keys = [["0.5", "1/2", "2"]]  # a key that failed to merge the two spellings
    label = majority_vote(["0.5"], ["0.5"])
    same_value = lambda a, b: float(eval(a)) == float(eval(b))  # noqa: E731 - a stand-in careful check
    assert agreement_rewards(answers, keys, [label], same_value).tolist() == [[1.0, 1.0, 0.0]]


answers_st = st.lists(st.sampled_from(["1", "2", "3", None]), min_size=4, max_size=4)


@settings(max_examples=60, deadline=None)
@given(
    n_agents=st.integers(2, 4),
    data=st.data(),
)
def test_property_own_answers_never_change_own_peer_rewards(n_agents, data):
    """Co-RL: agent n's labels depend only on its teacher, so changing agent n's answers
    changes its rewards only through its own answers' match with an unchanged label."""
    prompts = 3
    per_agent = [[data.draw(answers_st) for _ in range(prompts)] for _ in range(n_agents)]
    n = data.draw(st.integers(0, n_agents - 1))
    before = table(per_agent)
    changed = [list(map(list, a)) for a in per_agent]
    changed[n] = [data.draw(answers_st) for _ in range(prompts)]
    after = table(changed)
    # agent n's labels are identical
    assert peer_labels(before)[n] == peer_labels(after)[n]
    # and so the reward of any fixed answer list under those labels is identical
    probe = [["1", "2", None, "3"]] * prompts
    r_before = agreement_rewards(probe, probe, peer_labels(before)[n], exact)
    r_after = agreement_rewards(probe, probe, peer_labels(after)[n], exact)
    assert torch.equal(r_before, r_after)
    # with N = 2 the teacher's labels (taught by n) *do* depend on n's answers: the
    # property is about one's own rewards, not the peer's.
