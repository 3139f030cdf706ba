"""Several training files mixed with weights (`corl.data.mix`): each batch's share per file by hand,
each file's rows once per pass, the order a pure function of the step, and ids across files."""

from __future__ import annotations

import pytest

from corl.data.mix import Mix, TrainPart, join_files
from corl.data.rows import DataError, batch_indices, build_problems


def test_each_batch_takes_the_files_by_their_weights():
    # weights 3 : 1, B = 4. Sainte-Laguë deals each seat to the smallest (seats + 1/2) / share:
    # shares 3/4, 1/4 -> keys A 0.5/0.75 = 0.67, B 0.5/0.25 = 2. Seat 1: A (A's key -> 1.5/0.75 = 2);
    # seat 2: A and B tie at 2, the first file wins (A -> 3.33); seat 3: B (-> 6); seat 4: A (-> 4.67).
    mix = Mix([6, 2], [3.0, 1.0])
    assert mix.counts(0, 4) == [3, 1]
    # step 1: A 4.67 -> 6.0; A and B tie at 6 (A first) -> 7.33; B 6 -> 10; A 7.33 -> 8.67: again 3 and 1
    assert mix.counts(1, 4) == [3, 1]
    order = mix.batch(0, 4, seed=0)
    assert [i < 6 for i in order] == [True, True, False, True]  # the seats' files, in the order dealt


def test_counts_stay_within_a_row_of_each_files_share():
    mix = Mix([50, 50, 50], [0.1, 0.3, 0.6])
    drawn = [0, 0, 0]
    for step in range(200):
        drawn = [d + c for d, c in zip(drawn, mix.counts(step, 5))]
        assert all(abs(d - 5 * (step + 1) * w) < 1 for d, w in zip(drawn, mix.shares)), (step, drawn)


def test_every_row_of_a_file_comes_once_per_pass_over_it():
    mix = Mix([6, 2], [3.0, 1.0])
    first = [i for step in (0, 1) for i in mix.batch(step, 4, seed=5) if i < 6]  # A gives 3 rows a step
    assert sorted(first) == [0, 1, 2, 3, 4, 5]
    second = [i - 6 for step in (0, 1) for i in mix.batch(step, 4, seed=5) if i >= 6]  # B: 1 a step, 2 rows
    assert sorted(second) == [0, 1]


def test_the_order_is_a_pure_function_of_the_step():
    walked = Mix([7, 5, 3], [2.0, 1.0, 1.0])
    seen = [walked.batch(step, 6, seed=3) for step in range(9)]
    assert Mix([7, 5, 3], [2.0, 1.0, 1.0]).batch(8, 6, seed=3) == seen[8]  # a resumed run, asked for step 8 first
    assert walked.batch(2, 6, seed=3) == seen[2]  # and going back
    assert Mix([7, 5, 3], [2.0, 1.0, 1.0]).batch(8, 6, seed=4) != seen[8]


def test_one_file_draws_what_batch_indices_draws():
    mix = Mix([10], [1.0])
    for step in range(6):
        assert mix.batch(step, 4, seed=7) == batch_indices(step, 10, 4, 7)


def _part(source, rows, answers=True):
    problems, gold = build_problems(rows, source, ["problem"], answer_field="answer" if answers else None)
    return TrainPart(source, problems, gold, rows)


def test_files_join_with_their_ids_and_rows_without_one_are_numbered_by_file():
    a = _part("a.jsonl", [{"id": "x", "problem": "1+1", "answer": "2"}, {"problem": "2+2", "answer": "4"}])
    b = _part("b.jsonl", [{"problem": "3+3", "answer": "6"}])
    problems, gold, rows = join_files([a, b], "id")
    assert [p.id for p in problems] == ["x", "0/1", "1/0"]
    assert gold == {"x": "2", "0/1": "4", "1/0": "6"} and [r["problem"] for r in rows] == ["1+1", "2+2", "3+3"]
    unlabeled = _part("c.jsonl", [{"problem": "5+5"}], answers=False)
    assert join_files([a, unlabeled], "id")[1] == {}  # one file without answers: the mix is label-free


def test_an_id_in_two_files_is_refused_naming_both():
    a = _part("a.jsonl", [{"id": "x", "problem": "1+1", "answer": "2"}])
    b = _part("b.jsonl", [{"id": "y", "problem": "2+2", "answer": "4"}, {"id": "x", "problem": "3+3", "answer": "6"}])
    with pytest.raises(DataError, match=r"dataset 'b.jsonl' row 2: id 'x' is also in 'a.jsonl'"):
        join_files([a, b], "id")
