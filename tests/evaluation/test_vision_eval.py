"""Evaluating vision-language checkpoints: the vision grader by hand-computed cases, and
`corl suite --suite paper-vision` run as a user would on local files of the four benchmarks
in their own published fields (MathVista, MathVerse, MathVision, We-Math)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from PIL import Image

from corl.evaluation.suite import BENCHMARKS, SUITES, graders
from corl.evaluation.suite.graders import Item
from corl.studies.tiny_vl.families import build_vl_family, save_vl

MCQ = Item("q1", "Find x.\n(A) 3\n(B) 5\n(C) 7", "B", {"options": ["3", "5", "7"], "images": []})
FREE = Item("q2", "How long?", "12", {"options": None, "images": []})


@pytest.mark.parametrize(
    "text, answer, correct",
    [
        ("x is 5. \\boxed{B}", "B", True),
        ("\\boxed{(B)}", "B", True),
        ("so x = 5. \\boxed{5}", "B", True),  # the option's value is the pick of its letter
        ("The answer is option C", "C", False),
        ("\\boxed{9}", "9", False),  # a value that is no option: an answer, not a pick, and wrong
        ("I cannot tell", None, False),
    ],
)
def test_mcq_picks_in_every_form_are_graded_against_the_gold_letter(text, answer, correct):
    (verdict,) = graders.grade_vision([MCQ], [[text]])
    assert verdict.answers == [answer] and verdict.correct == [correct]


def test_free_form_answers_go_by_equivalence_and_votes_cluster_letter_and_value():
    (free,) = graders.grade_vision([FREE], [["\\boxed{12.0}", "\\boxed{13}", "no"]])
    assert free.correct == [True, False, False]
    (mcq,) = graders.grade_vision([MCQ], [["\\boxed{B}", "\\boxed{5}", "\\boxed{C}"]])
    assert mcq.keys[0] == mcq.keys[1] != mcq.keys[2]  # "B" and option B's value are one vote
    bench = BENCHMARKS["mathvista"]
    assert graders.vote_correct(bench, mcq.answers, mcq.keys, "B") is True
    (wrong,) = graders.grade_vision([MCQ], [["\\boxed{C}", "\\boxed{7}", "\\boxed{B}"]])
    assert graders.vote_correct(bench, wrong.answers, wrong.keys, "B") is False


def test_the_paper_vision_suite_is_the_four_benchmarks_greedy():
    assert SUITES["paper-vision"] == ("mathvista", "mathverse", "mathvision", "wemath")
    for name in SUITES["paper-vision"]:
        b = BENCHMARKS[name]
        assert b.grader == "vision" and b.format == name and b.temperature == 0.0 and b.samples == 1


def _image(path, shade: int):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (40, 30), (shade, 255 - shade, 90)).save(path)


def _data_root(root):
    """Two problems per benchmark, one multiple choice and one free-form, in each one's own fields."""
    records = {
        "mathvista": [
            {"pid": "1", "question": "Which is larger?", "image": "images/a.png", "choices": ["left", "right"],
             "answer": "right", "question_type": "multi_choice", "answer_type": "text", "unit": None, "precision": None},
            {"pid": "2", "question": "How long is it?", "image": "images/b.png", "choices": None, "answer": "1.5",
             "question_type": "free_form", "answer_type": "float", "unit": "cm", "precision": 1.0},
        ],
        "mathverse": [
            {"sample_index": "7", "problem_index": "3", "problem_version": "Text Lite", "image": "images/a.png",
             "question": "Find the angle.\nChoices:\nA:30°\nB:45°\nC:60°\nD:90°", "answer": "C",
             "question_type": "multi-choice"},
            {"sample_index": "8", "problem_index": "4", "problem_version": "Vision Only", "image": "images/b.png",
             "question": "Find the length.", "answer": "5", "question_type": "free-form"},
        ],
        "mathvision": [
            {"id": "11", "question": "<image1>\nHow many dots?", "options": ["1", "2", "3", "4", "5"],
             "image": "images/a.png", "answer": "D", "solution": None, "level": 1, "subject": "counting"},
            {"id": "12", "question": "Compute <image1> the sum.", "options": [], "image": "images/b.png", "answer": "17",
             "solution": None, "level": 2, "subject": "arithmetic"},
        ],
        "wemath": [
            {"ID": "3steps_1", "split": "testmini", "knowledge concept": "Area", "question": "What is the area (  )?",
             "option": "A. 200.96;B. 3215.36;C. 6280;D. 32", "answer": "B", "image_path": "images/a.png",
             "key": "3steps_3", "question number": 1575},
            {"ID": "3steps_2", "split": "testmini", "knowledge concept": "Area", "question": "What is the side (  )?",
             "option": "A. 2;B. 4", "answer": "A", "image_path": "images/b.png", "key": "3steps_3", "question number": 1576},
        ],
    }  # fmt: skip
    for name, rows in records.items():
        _image(root / name / "images" / "a.png", 10)
        _image(root / name / "images" / "b.png", 200)
        (root / name / "testmini.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


@pytest.fixture(scope="module")
def vl_checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    model, processor = build_vl_family("llava-siglip-char")
    return save_vl(model, processor, tmp_path_factory.mktemp("vl") / "llava")


def _suite(*args, cwd):
    return subprocess.run([sys.executable, "-m", "corl", "suite", *args], capture_output=True, text=True, timeout=600, cwd=cwd)


def test_corl_suite_paper_vision_reports_each_benchmark_and_the_average(tmp_path, vl_checkpoint, tiny_models):
    root = _data_root(tmp_path / "data")
    out = tmp_path / "eval"
    common = ["--suite", "paper-vision", "--data-root", str(root), "--out", str(out), "--max-tokens", "12", "--bootstrap", "0"]
    done = _suite(str(vl_checkpoint), str(tiny_models["llama-char"]), *common, "--json", "--engine", "hf", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    text = json.dumps(results)
    for name in SUITES["paper-vision"]:
        records = [json.loads(line) for line in next(out.glob(f"cells/llava-*/{name}.jsonl")).read_text().splitlines()]
        assert len(records) == 2 and all(r["prompt"].count("<image>") == 1 for r in records), records[0]["prompt"]
        assert {r["gold"] for r in records} <= {"B", "1.5", "C", "5", "D", "17", "A"}
        assert name in text
    assert "average" in text
    # the text-only checkpoint is named as not run, with the reason, instead of failing the suite
    assert "text-only" in text or "text-only" in done.stderr


def test_corl_eval_reads_a_vision_dataset_and_shows_the_images(tmp_path, vl_checkpoint):
    root = _data_root(tmp_path / "data")
    records = tmp_path / "records.jsonl"
    data = f"vision:mathvision:{root / 'mathvision' / 'testmini.jsonl'}"
    done = subprocess.run(
        [sys.executable, "-m", "corl", "eval", str(vl_checkpoint), "--data", data, "--k", "2", "--max-new-tokens", "8",
         "--json", "--records", str(records)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    assert results["n"] == 2 and list(results["sources"].values()) == [str(vl_checkpoint)]  # rows are named by label
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    assert [r["gold"] for r in rows] == ["D", "17"] and all(len(r["samples"]) == 2 for r in rows)
