"""The `ring2` label source, by hand: agent n taught by the pooled votes of n-1 and n-2."""

import pytest

from corl.config import ConfigError, validate_config
from corl.labels import AnswersTable, build_label_source


def table(*agents):
    """agents[n][b] = agent n's K answers for prompt b (answers double as their keys)."""
    answers = tuple(tuple(tuple(group) for group in agent) for agent in agents)
    return AnswersTable(prompt_ids=tuple(str(b) for b in range(len(agents[0]))), answers=answers, keys=answers)


def test_pooled_majority_of_the_two_predecessors():
    t = table(
        [["1", "1", "2"]],  # agent 0
        [["3", "3", "3"]],  # agent 1
        [["1", "2", "2"]],  # agent 2
    )
    labels = build_label_source("ring2")(t)
    # agent 0 <- agents 2 and 1: [1, 2, 2] + [3, 3, 3] -> "3" (3 votes of 6)
    # agent 1 <- agents 0 and 2: [1, 1, 2] + [1, 2, 2] -> "1" and "2" tie at 3; "1" seen first
    # agent 2 <- agents 1 and 0: [3, 3, 3] + [1, 1, 2] -> "3"
    assert [row[0].answer for row in labels] == ["3", "1", "3"]
    assert [(row[0].count, row[0].total) for row in labels] == [(3, 6), (3, 6), (3, 6)]


def test_own_answers_never_count_and_threshold_applies():
    t = table([["5", "5"]], [[None, "7"]], [["7", "8"]], [["9", "9"]])  # None: no answer
    labels = build_label_source("ring2", min_agreement=0.5)(t)
    # agent 3 <- agents 2 and 1: [7, 8] + [-, 7] -> "7" with 2 of 4 samples (agreement 0.5: kept)
    assert labels[3][0].answer == "7"
    # agent 0 <- agents 3 and 2: [9, 9] + [7, 8] -> "9" with 2 of 4; agent 0's own "5"s never count
    assert labels[0][0].answer == "9"
    # agent 1 <- agents 0 and 3: [5, 5] + [9, 9] -> tie, "5" first; still 2 of 4
    assert labels[1][0].answer == "5"
    strict = build_label_source("ring2", min_agreement=0.75)(t)
    assert all(row[0] is None for row in strict)


def test_needs_three_agents_and_is_offered_by_the_config():
    with pytest.raises(ValueError, match="at least 3 agents"):
        build_label_source("ring2")(table([["1"]], [["2"]]))
    raw = {"agents": [{"name": "a", "model": "m"}, {"name": "b", "model": "m"}], "data": {"train": "t.jsonl"}}
    with pytest.raises(ConfigError, match="needs at least 3 agents"):
        validate_config({**raw, "cohort": {"label_source": "ring2"}})
    three = {**raw, "agents": raw["agents"] + [{"name": "c", "model": "m"}], "cohort": {"label_source": "ring2"}}
    assert validate_config(three).cohort.label_source == "ring2"
