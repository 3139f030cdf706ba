"""Vision dataset loaders on tiny local files in each dataset's own published fields (hand-written records)."""

from __future__ import annotations

import json

import datasets as hf
import pytest
from PIL import Image

from corl.studies.tiny_vl.task import make_split, write_task
from corl.vision.datasets import DATASETS, export_split, load_rows, options_in_text, rows_from_records
from corl.vision.inputs import load_image


def _write(tmp_path, name: str, records: list[dict], images: list[str]):
    (tmp_path / "images").mkdir(exist_ok=True)
    for i, rel in enumerate(images):
        Image.new("RGB", (20 + i, 10), (i, 0, 0)).save(tmp_path / rel)
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_open_r1_multimodal(tmp_path):
    records = [
        {"image": "images/a.png", "problem": "<image>What is the area?", "solution": "<think>...</think> <answer> 12 </answer>"},
        {"image": "images/b.png", "problem": "Find x.\nChoices:\nA:3\nB:5\nC:7", "solution": "<answer>5</answer>"},
        # The answer names no option: training rows become free-form rather than fail.
        {"image": "images/b.png", "problem": "Find y.\nChoices:\nA:3\nB:5", "solution": "<answer>9</answer>"},
    ]
    rows = load_rows(_write(tmp_path, "train", records, ["images/a.png", "images/b.png"]), "open-r1-mm")
    assert rows[0]["id"] == "open-r1-mm/0"
    assert rows[0]["problem"] == "What is the area?" and rows[0]["answer"] == "12" and rows[0]["options"] is None
    assert rows[0]["images"] == [str(tmp_path / "images/a.png")]
    assert rows[1]["options"] == ["3", "5", "7"] and rows[1]["answer"] == "B"
    assert rows[1]["problem"] == "Find x.\nChoices:\n(A) 3\n(B) 5\n(C) 7"
    assert rows[2]["options"] is None and rows[2]["answer"] == "9" and rows[2]["problem"] == "Find y.\nChoices:\nA:3\nB:5"
    assert load_image(rows[0]["images"][0]).size == (20, 10)


def test_mmr1_with_image_lists(tmp_path):
    records = [{"images": ["images/a.png", "images/b.png"], "problem": "<image><image>Sum of the two numbers?", "answer": "7"}]
    rows = load_rows(_write(tmp_path, "train", records, ["images/a.png", "images/b.png"]), "mmr1")
    assert rows[0]["problem"] == "Sum of the two numbers?" and rows[0]["answer"] == "7"
    assert [load_image(x).size for x in rows[0]["images"]] == [(20, 10), (21, 10)]


def test_mathvista_multi_choice_answer_text_becomes_its_letter(tmp_path):
    records = [
        {"pid": "1", "question": "Which is larger?", "image": "images/1.jpg", "decoded_image": "images/a.png",
         "choices": ["left", "right"], "answer": "right", "question_type": "multi_choice", "answer_type": "text",
         "unit": None, "precision": None},
        {"pid": "2", "question": "How long is it?", "image": "images/a.png", "choices": None, "answer": "1.5",
         "question_type": "free_form", "answer_type": "float", "unit": "cm", "precision": 1.0},
    ]  # fmt: skip
    rows = load_rows(_write(tmp_path, "testmini", records, ["images/a.png"]), "mathvista")
    assert rows[0]["id"] == "mathvista/1" and rows[0]["answer"] == "B" and rows[0]["options"] == ["left", "right"]
    assert rows[0]["images"] == [str(tmp_path / "images/a.png")]  # decoded_image wins over the hub's own path
    assert rows[1]["answer"] == "1.5" and rows[1]["options"] is None
    assert rows[1]["extra"] == {"answer_type": "float", "unit": "cm", "precision": 1.0}


def test_mathverse_options_come_from_the_question_text(tmp_path):
    records = [
        {"sample_index": "7", "problem_index": "3", "problem_version": "Text Lite", "image": "images/a.png",
         "question": "As shown, find the angle.\nChoices:\nA:30°\nB:45°\nC:60°\nD:90°", "answer": "C",
         "question_type": "multi-choice"},
        {"sample_index": "8", "problem_index": "4", "problem_version": "Vision Only", "image": "images/a.png",
         "question": "Find the length.", "answer": "5", "question_type": "free-form"},
    ]  # fmt: skip
    rows = load_rows(_write(tmp_path, "testmini", records, ["images/a.png"]), "mathverse")
    assert rows[0]["options"] == ["30°", "45°", "60°", "90°"] and rows[0]["answer"] == "C"
    assert rows[0]["problem"].startswith("As shown, find the angle.\nChoices:\n(A) 30°")
    assert rows[0]["extra"]["problem_version"] == "Text Lite"
    assert rows[1]["options"] is None and rows[1]["problem"] == "Find the length."


def test_mathvision_strips_image_tags(tmp_path):
    records = [
        {"id": "11", "question": "<image1>\nHow many dots?", "options": ["1", "2", "3", "4", "5"], "image": "images/a.png",
         "answer": "D", "solution": None, "level": 1, "subject": "counting"},
        {"id": "12", "question": "Compute <image1> the sum.", "options": [], "image": "images/a.png", "answer": "17",
         "solution": None, "level": 2, "subject": "arithmetic"},
    ]  # fmt: skip
    rows = load_rows(_write(tmp_path, "test", records, ["images/a.png"]), "mathvision")
    assert rows[0]["problem"].startswith("How many dots?\nChoices:\n(A) 1") and rows[0]["answer"] == "D"
    assert rows[1]["problem"] == "Compute the sum." and rows[1]["options"] is None and rows[1]["answer"] == "17"
    assert rows[1]["extra"] == {"level": 2, "subject": "arithmetic"}


def test_wemath_parses_its_option_string(tmp_path):
    records = [
        {"ID": "3steps_1", "split": "testmini", "knowledge concept": "Area", "question": "What is the area (  )?",
         "option": "A. 200.96;B. 3215.36;C. 6280;D. 32; E. No correct answer", "answer": "B",
         "image_path": "images/a.png", "key": "3steps_3", "question number": 1575},
    ]  # fmt: skip
    rows = load_rows(_write(tmp_path, "testmini", records, ["images/a.png"]), "wemath")
    assert rows[0]["options"] == ["200.96", "3215.36", "6280", "32", "No correct answer"]
    assert rows[0]["answer"] == "B" and rows[0]["extra"]["key"] == "3steps_3"


def test_eval_answers_that_name_no_option_are_errors(tmp_path):
    records = [{"id": "1", "question": "q", "options": ["1", "2"], "image": "images/a.png", "answer": "7"}]
    with pytest.raises(ValueError, match="neither a letter nor one of the options"):
        load_rows(_write(tmp_path, "test", records, ["images/a.png"]), "mathvision")


def test_options_in_text_needs_labels_in_order():
    assert options_in_text("Q?\nChoices:\nA: 1\nB: 2") == ("Q?", ["1", "2"])
    assert options_in_text("Q?\nChoices:\nB: 1\nC: 2") == ("Q?\nChoices:\nB: 1\nC: 2", None)
    assert options_in_text("Q without options") == ("Q without options", None)


def test_hub_records_with_image_features_export_and_reload(tmp_path):
    # An in-memory HF dataset with an Image feature, as load_dataset returns: images decode to PIL.
    data = hf.Dataset.from_dict(
        {"images": [[Image.new("RGB", (8, 6), "red")]], "problem": ["<image>x?"], "answer": ["3"]},
        features=hf.Features({"images": hf.Sequence(hf.Image()), "problem": hf.Value("string"), "answer": hf.Value("string")}),
    )
    direct = rows_from_records("mmr1", data)
    assert isinstance(direct[0]["images"][0], Image.Image) and direct[0]["problem"] == "x?"
    path = export_split(data, tmp_path / "mmr1", "train")
    reloaded = load_rows(path, "mmr1")
    assert reloaded[0]["images"] == [str(tmp_path / "mmr1" / "images/train-0-images-0.png")]
    assert load_image(reloaded[0]["images"][0]).getpixel((0, 0)) == (255, 0, 0)
    assert {k: v for k, v in reloaded[0].items() if k != "images"} == {k: v for k, v in direct[0].items() if k != "images"}


def test_the_synthetic_task_round_trips_through_the_corl_layout(tmp_path):
    rows = make_split("test", 3, seed=5)
    reloaded = load_rows(write_task(rows, tmp_path / "vtiny" / "test.jsonl"), "corl")
    assert [r["answer"] for r in reloaded] == [r["answer"] for r in rows]
    assert load_image(reloaded[0]["images"][0]).tobytes() == rows[0]["images"][0].tobytes()


def test_every_dataset_names_its_hub_source():
    assert {d.name: d.role for d in DATASETS.values()} == {
        "open-r1-mm": "train", "mmr1": "train", "mathvista": "eval", "mathverse": "eval", "mathvision": "eval", "wemath": "eval",
    }  # fmt: skip
