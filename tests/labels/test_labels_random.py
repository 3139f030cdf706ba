"""The `random` label source (the random-label control): one of the ring teacher's answered
samples, drawn uniformly and reproducibly, never voted."""

import hashlib
import random
from collections import Counter

import pytest

from corl.config import validate_config
from corl.labels import AnswersTable, build_label_source, label_source_spec, peer_labels
from corl.labels.random_label import draw_seed
from tests.helpers import tiny_config


def table(*agents, ids=None, step=0):
    """agents[n][b] = agent n's K answers for prompt b (answers double as their keys)."""
    answers = tuple(tuple(tuple(group) for group in agent) for agent in agents)
    ids = ids or tuple(f"p{b}" for b in range(len(agents[0])))
    return AnswersTable(prompt_ids=tuple(ids), answers=answers, keys=answers, step=step)


def test_the_seed_is_the_documented_hash():
    # sha256("corl-random-label|<seed>|<step>|<agent>|<prompt id>"), first 8 bytes big-endian
    digest = hashlib.sha256(b"corl-random-label|3|7|1|q42").digest()
    assert draw_seed(3, 7, 1, "q42") == int.from_bytes(digest[:8], "big")
    assert len({draw_seed(3, 7, 1, "q42"), draw_seed(4, 7, 1, "q42"), draw_seed(3, 8, 1, "q42"), draw_seed(3, 7, 0, "q42")}) == 4


def test_the_label_is_the_drawn_answered_sample_of_the_ring_teacher():
    # agent 1 is taught by agent 0, whose answered samples are k = 0, 2, 3 ("5", "6", "5");
    # the draw picks candidates[Random(seed).randrange(3)]
    t = table([["5", None, "6", "5"]], [["9", "9", "9", "9"]], ids=("q0",), step=4)
    labels = build_label_source("random", seed=11)(t)
    pick = [0, 2, 3][random.Random(draw_seed(11, 4, 1, "q0")).randrange(3)]
    expected = ["5", None, "6", "5"][pick]
    vote = labels[1][0]
    assert vote.key == expected and vote.total == 4
    assert vote.count == {"5": 2, "6": 1}[expected]  # its key's count among the teacher's K
    assert vote.shares == (("5", "5", 2), ("6", "6", 1))  # the teacher's whole vote, first-seen order
    # agent 0 is taught by agent 1: every sample says "9", so any draw is "9" with 4 of 4
    assert (labels[0][0].key, labels[0][0].count) == ("9", 4)


def test_draws_follow_the_teachers_distribution_not_its_vote():
    # teacher (agent 0) answers 1, 1, 1, 2 and one sample without an answer on every prompt:
    # its majority is always "1", while a uniform draw over the 4 answered samples gives "2"
    # with probability 1/4. Over 2000 prompts: 500 expected, binomial sd sqrt(2000 x 1/4 x 3/4) = 19.4.
    ids = tuple(f"q{b}" for b in range(2000))
    teacher = [["1", "2", None, "1", "1"]] * len(ids)
    t = table(teacher, [["3"] * 5] * len(ids), ids=ids)
    drawn = Counter(vote.key for vote in build_label_source("random")(t)[1])
    assert set(drawn) == {"1", "2"} and abs(drawn["2"] - 500) < 5 * 19.4
    assert {vote.key for vote in peer_labels(t)[1]} == {"1"}


def test_same_table_and_seed_give_the_same_labels_and_the_step_redraws():
    ids = tuple(f"q{b}" for b in range(64))
    groups = [["1", "2", "3", "4"]] * len(ids)
    first = build_label_source("random", seed=5)(table(groups, groups, ids=ids, step=2))
    again = build_label_source("random", seed=5)(table(groups, groups, ids=ids, step=2))  # a resumed run rebuilds it
    assert first == again
    later = build_label_source("random", seed=5)(table(groups, groups, ids=ids, step=3))
    other_seed = build_label_source("random", seed=6)(table(groups, groups, ids=ids, step=2))
    # 64 prompts with 4 equally likely answers each: equal by chance with probability (1/4)^64
    assert [v.key for v in later[0]] != [v.key for v in first[0]]
    assert [v.key for v in other_seed[0]] != [v.key for v in first[0]]


def test_it_labels_exactly_the_prompts_peer_labels():
    # min_agreement 0.5 with K = 4: the teacher's majority needs 2 votes. Prompt 0: "7" x 3 -> labeled;
    # prompt 1: 1, 2, 3, - -> majority 1 of 4 -> unlabeled; prompt 2: no answers -> unlabeled.
    teacher = [["7", "7", "8", "7"], ["1", "2", "3", None], [None] * 4]
    t = table(teacher, teacher)
    random_rows = build_label_source("random", min_agreement=0.5)(t)
    peer_rows = peer_labels(t, 0.5)
    assert [v is None for v in random_rows[1]] == [v is None for v in peer_rows[1]] == [False, True, True]
    assert random_rows[1][0].key in {"7", "8"}


def test_one_agent_draws_from_its_own_samples():
    # N = 1: the ring teacher n - 1 mod 1 is the agent itself (a self random control)
    assert label_source_spec("random").teachers_of(0, 1) == (0,)
    assert label_source_spec("random").teachers_of(0, 3) == (2,)
    vote = build_label_source("random")(table([["4", None, "4"]]))[0][0]
    assert (vote.key, vote.count, vote.total) == ("4", 2, 3)
    one = {"agents": [{"name": "a", "model": "m"}], "data": {"train": "t.jsonl"}, "cohort": {"label_source": "random"}}
    assert validate_config(one).cohort.label_source == "random"


def test_the_loop_hands_the_step_to_the_label_source(tiny_models, tiny_data, tmp_path):
    from corl.trainer import CohortTrainer

    trainer = CohortTrainer(validate_config(tiny_config(tmp_path, tiny_models, tiny_data, cohort={"label_source": "random"})))
    seen = []
    real = trainer.label_source
    trainer.label_source = lambda t: seen.append(t) or real(t)  # records the table, labels as before
    trainer.step(0)
    trainer.step(1)
    assert [t.step for t in seen] == [0, 1]


@pytest.mark.parametrize("n", [2, 3])
def test_teachers_are_the_ring(n):
    assert [label_source_spec("random").teachers_of(i, n) for i in range(n)] == [((i - 1) % n,) for i in range(n)]
