"""`pooled` and `star`, by hand for N = 3 and N = 4 (ties by majority_vote's first-seen rule),
and the whole vote each label carries (`Vote.shares`)."""

import pytest

from corl.checkpoints.model_card import teachers_text
from corl.config import ConfigError, validate_config
from corl.labels import AnswersTable, build_label_source, label_source_spec, majority_vote


def table(*agents):
    """agents[n][b] = agent n's K answers for prompt b (answers double as their keys)."""
    answers = tuple(tuple(tuple(group) for group in agent) for agent in agents)
    return AnswersTable(prompt_ids=tuple(f"p{b}" for b in range(len(agents[0]))), answers=answers, keys=answers)


THREE = table([["1", "1", "2"]], [["2", "2", "3"]], [["3", "1", None]])
FOUR = table([["5", "5"]], [["6", "7"]], [["7", "6"]], [[None, "8"]])


def summary(labels):
    return [(v.key, v.count, v.total) if v is not None else None for v in (row[0] for row in labels)]


def test_majority_vote_records_the_whole_vote_in_first_seen_order():
    vote = majority_vote(["b", None, "a", "b", "c"], ["B", None, "A", "b", "C"])
    # counts b 2, a 1, c 1; each key spelled as first written
    assert vote.shares == (("b", "B", 2), ("a", "A", 1), ("c", "C", 1))
    assert (vote.key, vote.answer, vote.count, vote.total) == ("b", "B", 2, 5)


def test_pooled_three_agents():
    # agent 0 <- 1, 2: [2, 2, 3] + [3, 1, -] -> 2: 2, 3: 2, 1: 1; tie 2 / 3, "2" seen first
    # agent 1 <- 0, 2: [1, 1, 2] + [3, 1, -] -> 1: 3
    # agent 2 <- 0, 1: [1, 1, 2] + [2, 2, 3] -> 1: 2, 2: 3
    labels = build_label_source("pooled")(THREE)
    assert summary(labels) == [("2", 2, 6), ("1", 3, 6), ("2", 3, 6)]
    assert labels[0][0].shares == (("2", "2", 2), ("3", "3", 2), ("1", "1", 1))


def test_pooled_four_agents_with_ties_and_threshold():
    # agent 0 <- 1, 2, 3: [6, 7, 7, 6, -, 8] -> 6: 2, 7: 2, 8: 1; tie, "6" first
    # agent 1 <- 0, 2, 3: [5, 5, 7, 6, -, 8] -> 5: 2
    # agent 2 <- 0, 1, 3: [5, 5, 6, 7, -, 8] -> 5: 2
    # agent 3 <- 0, 1, 2: [5, 5, 6, 7, 7, 6] -> 5, 6, 7 tie at 2; "5" first. Its own "8" never counts.
    assert summary(build_label_source("pooled")(FOUR)) == [("6", 2, 6), ("5", 2, 6), ("5", 2, 6), ("5", 2, 6)]
    # every winner has 2 of 6 = 0.333 of the votes: min_agreement 0.4 leaves all unlabeled
    assert summary(build_label_source("pooled", min_agreement=0.4)(FOUR)) == [None] * 4


def test_star_three_agents_default_teacher():
    # teacher 0's majority [1, 1, 2] -> "1" 2 of 3 labels agents 1 and 2;
    # agent 0 <- pooled 1, 2: [2, 2, 3, 3, 1, -] -> tie 2 / 3, "2" first, 2 of 6
    assert summary(build_label_source("star")(THREE)) == [("2", 2, 6), ("1", 2, 3), ("1", 2, 3)]


def test_star_four_agents_teacher_two():
    # teacher 2's [7, 6]: tie, "7" first, 1 of 2, labels agents 0, 1 and 3;
    # agent 2 <- pooled 0, 1, 3: [5, 5, 6, 7, -, 8] -> "5" 2 of 6
    assert summary(build_label_source("star", teacher=2)(FOUR)) == [("7", 1, 2), ("7", 1, 2), ("5", 2, 6), ("7", 1, 2)]
    spec = label_source_spec("star")
    from corl.labels import LabelContext

    assert [spec.teachers_of(n, 4, LabelContext(teacher=2)) for n in range(4)] == [(2,), (2,), (0, 1, 3), (2,)]
    assert [label_source_spec("pooled").teachers_of(n, 3) for n in range(3)] == [(1, 2), (0, 2), (0, 1)]


def raw(agents, **cohort):
    return {
        "agents": [{"name": f"a{i}", "model": "m"} for i in range(agents)],
        "data": {"train": "t.jsonl"},
        "cohort": cohort,
    }


@pytest.mark.parametrize("source", ["pooled", "star"])
def test_need_three_agents(source):
    with pytest.raises(ConfigError, match=f"cohort.label_source '{source}' needs at least 3 agents"):
        validate_config(raw(2, label_source=source))
    with pytest.raises(ValueError, match="at least 3 agents"):
        build_label_source(source)(table([["1"]], [["2"]]))


def test_the_teacher_must_be_an_agent_and_the_card_names_it():
    with pytest.raises(ConfigError, match=r"cohort.teacher 3 is not an agent: the cohort has 3 agents, numbered 0 to 2"):
        validate_config(raw(3, label_source="star", teacher=3))
    cfg = validate_config(raw(3, label_source="star", teacher=1))
    assert teachers_text(cfg, 0).startswith("`a1`: its majority answer")
    assert teachers_text(cfg, 1).startswith("`a0` and `a2`: their pooled majority answer")


@pytest.mark.parametrize(
    ("source", "context"), [("pooled", {}), ("star", {"teacher": 0}), ("star", {"teacher": 1}), ("ring2", {}), ("random", {})]
)
def test_an_agent_cannot_vote_for_itself(source, context):
    """A policy's cheapest win would be to label itself: flood its own samples with one answer so
    that answer becomes its label. Under every peer topology its own answers never reach its label:
    agent 1 answering "9" K times changes no label of agent 1 (others' labels may move)."""
    from corl.labels import LabelContext

    spec = label_source_spec(source)
    flooded = table([["1", "1", "2"]], [["9", "9", "9"]], [["3", "1", None]], [["2", "2", "1"]])
    honest = table([["1", "1", "2"]], [["2", "3", None]], [["3", "1", None]], [["2", "2", "1"]])
    label = spec.build(LabelContext(seed=0, **context))
    assert label(flooded)[1] == label(honest)[1]
    assert all(v is None or v.key != "9" for v in label(flooded)[1])


# What a policy would write instead of solving, graded as the trainer grades it: extracted,
# keyed and checked against the label that pooled teachers voted (ring2, pooled, star share
# AnswersTable.pooled_majority). The honest answer is the last one.
HACKS = [
    "",  # answer blank
    r"\boxed{}",
    r"All tests passed. \boxed{PASS}",  # the harness's markers
    r"\boxed{\text{the same as my peer's majority}}",  # point at the teacher instead of answering
    r"\boxed{7 \text{ or } 8}",  # two answers at once
    r"\boxed{7}\boxed{8}",
    r"\boxed{\{1,2,3,4,5,6,7,8,9\}}",  # a set that holds the answer
    r"\boxed{x}",  # a free symbol, equal to nothing
]
HONEST = r"So the answer is \boxed{7}."


def hack_table(student, teachers):
    """Agent 0 writes `student`; agents 1.. write their `teachers` completions (one prompt), each
    graded by the trainer's math task (corl.tasks.math.math_answers)."""
    from corl.tasks.math import math_answers

    graded = [math_answers(texts, [None], len(texts)) for texts in [student, *teachers]]
    return AnswersTable(prompt_ids=("p0",), answers=tuple(tuple(a) for a, _ in graded), keys=tuple(tuple(k) for _, k in graded))


@pytest.mark.parametrize("source", ["pooled", "ring2", "star"])
def test_a_pooled_label_pays_the_answer_and_nothing_written_instead_of_it(source):
    from corl.answers import is_equivalent
    from corl.rewards.agreement import agreement_rewards

    k = len(HACKS) + 1
    teacher = [r"\boxed{7}"] * (k - 2) + [r"\boxed{8}", ""]
    table = hack_table(HACKS + [HONEST], [teacher, teacher, teacher])
    star = {"teacher": 1} if source == "star" else {}  # agent 0 a student of agent 1
    labels = build_label_source(source, min_agreement=0.6, **star)(table)
    assert labels[0][0].key == "7"
    rewards = agreement_rewards(table.answers[0], table.keys[0], labels[0], is_equivalent)
    assert rewards.tolist() == [[0.0] * len(HACKS) + [1.0]]
    # teachers who write nothing (or an empty box) label nothing: even the right answer earns 0 from them
    silent = [""] * (k - 1) + [r"\boxed{}"]
    table = hack_table(HACKS + [HONEST], [silent, silent, silent])
    assert build_label_source(source, **star)(table)[0][0] is None
