"""The procedural tiny task: answers correct by construction, disjoint and seeded splits."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from corl.studies.tiny.task import SPLITS, TYPES, make_split, prompt_text, slipped, split_of, write_jsonl

ROW_KEYS = {"id", "problem", "answer", "source", "solution", "type"}


def recompute(row: dict) -> int:
    """The answer of a problem, computed from its text alone (independently of the generator)."""
    p, kind = row["problem"], row["type"]
    if kind == "arith":
        expr = p.removesuffix("=?")
        assert re.fullmatch(r"\d+([-+*]\d+)+", expr), p
        return eval(expr)  # noqa: S307 - digits and + - * only, checked above
    if kind == "linear":
        a, sign, b, c = re.fullmatch(r"(\d+)x([-+])(\d+)=(-?\d+), x=\?", p).groups()
        rhs = int(c) - int(b) if sign == "+" else int(c) + int(b)
        assert rhs % int(a) == 0, p
        return rhs // int(a)
    if kind == "mod":
        n, d = re.fullmatch(r"(\d+)%(\d+)=\?", p).groups()
        return int(n) % int(d)
    if kind == "digitsum":
        (digits,) = re.fullmatch(r"digitsum\((\d+)\)=\?", p).groups()
        return sum(int(ch) for ch in digits)
    raise AssertionError(f"unknown type {kind}")


@pytest.mark.parametrize("difficulty", [1, 2, 3])
def test_answers_correct_by_construction(difficulty):
    rows = make_split("train", 400, seed=3, difficulty=difficulty)
    for row in rows:
        assert set(row) == ROW_KEYS
        assert row["answer"] == str(recompute(row)), row
        assert row["solution"].endswith("\\boxed{" + row["answer"] + "}"), row
        assert row["solution"].count("\\boxed{") == 1
        assert row["source"] == "tiny"


def test_solution_steps_are_true_equations():
    # Every "lhs=rhs." step (chains like 3x=20-5=15 included) holds arithmetically.
    for row in make_split("validation", 300, seed=0):
        for step in row["solution"].split(". ")[:-1]:
            parts = step.rstrip(".").split("=")
            if "x" in step:  # linear: 3x=20-5=15 / x=15/3=5 — check the numeric part
                parts = parts[1:]
            values = [eval(part.replace("/", "//")) for part in parts]  # noqa: S307
            assert len(set(values)) == 1, (row["problem"], step)


def test_splits_disjoint_across_seeds():
    texts = {s: {r["problem"] for seed in (0, 1) for r in make_split(s, 300, seed=seed)} for s in SPLITS}
    assert not texts["train"] & texts["test"]
    assert not texts["train"] & texts["validation"]
    assert not texts["validation"] & texts["test"]
    for split, problems in texts.items():
        assert all(split_of(p) == split for p in problems)


def test_seeded_determinism_and_ids():
    a = make_split("test", 50, seed=7)
    assert a == make_split("test", 50, seed=7)
    assert a != make_split("test", 50, seed=8)
    assert [r["id"] for r in a] == [f"tiny/test/{i}" for i in range(50)]
    assert len({r["problem"] for r in a}) == 50  # distinct within a split
    assert make_split("test", 20, seed=7) == a[:20]  # a prefix of the longer list


def test_types_mix_and_filter():
    counts = Counter(r["type"] for r in make_split("test", 400))
    assert set(counts) == set(TYPES)
    assert min(counts.values()) > 50
    only = make_split("test", 50, types=["mod", "linear"])
    assert {r["type"] for r in only} == {"mod", "linear"}
    weighted = Counter(r["type"] for r in make_split("train", 400, weights={"arith": 3, "digitsum": 1}))
    assert set(weighted) == {"arith", "digitsum"} and weighted["arith"] > 2 * weighted["digitsum"]


def test_lengths_fit_tiny_models():
    for row in make_split("train", 500, difficulty=1):
        assert len(prompt_text(row["problem"]) + row["solution"]) <= 60
    assert prompt_text("1+2=?") == "1+2=?\n"


def test_bad_arguments_explain_themselves():
    with pytest.raises(ValueError, match="unknown split"):
        make_split("dev", 3)
    with pytest.raises(ValueError, match="unknown problem type"):
        make_split("test", 3, types=["calculus"])
    with pytest.raises(ValueError, match="ran out of distinct problems"):
        make_split("validation", 10_000, types=["mod"])


def test_write_jsonl(tmp_path):
    rows = make_split("test", 5)
    path = write_jsonl(rows, tmp_path / "sub" / "test.jsonl")
    assert [json.loads(line) for line in path.read_text().splitlines()] == rows


@pytest.mark.parametrize(
    ("problem", "solution", "slip"),
    [
        ("47%5=?", "5*9=45. 47-45=2. \\boxed{2}", "5*9=45. \\boxed{45}"),
        ("2x-9=3, x=?", "2x=3+9=12. x=12/2=6. \\boxed{6}", "2x=3+9=12. \\boxed{12}"),
        ("digitsum(1233)=?", "1+2=3. 3+3=6. 6+3=9. \\boxed{9}", "1+2=3. 3+3=6. \\boxed{6}"),
        ("7+6*3=?", "6*3=18. 7+18=25. \\boxed{25}", "6*3=18. \\boxed{18}"),
        ("6-8=?", "6-8=-2. \\boxed{-2}", "\\boxed{6}"),  # one step: the problem's first number
        ("9-4-8=?", "9-4=5. 5-8=-3. \\boxed{-3}", "9-4=5. \\boxed{5}"),
    ],
)
def test_slipped_stops_one_step_short(problem, solution, slip):
    row = {"id": "x", "problem": problem, "answer": "?", "source": "tiny", "solution": solution, "type": "t"}
    out = slipped(row)
    assert out["solution"] == slip
    assert {k: v for k, v in out.items() if k != "solution"} == {k: v for k, v in row.items() if k != "solution"}


def test_slipped_answers_are_wrong_but_for_coincidences():
    rows = make_split("train", 800, seed=1)
    wrong = Counter()
    for row in rows:
        slip = slipped(row)["solution"]
        boxed_value = re.search(r"\\boxed\{(-?\d+)\}", slip).group(1)
        wrong[row["type"]] += boxed_value != row["answer"]
        assert row["solution"].startswith(slip.rsplit(" ", 1)[0] if " " in slip else "")  # a prefix of the true steps
    totals = Counter(r["type"] for r in rows)
    assert wrong["mod"] == totals["mod"] and wrong["linear"] == totals["linear"]  # d*q > r; a*x != x for a >= 2
    assert wrong["digitsum"] >= 0.8 * totals["digitsum"] and wrong["arith"] >= 0.8 * totals["arith"]
