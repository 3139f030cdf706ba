"""Unlabeled training data with a labeled validation set, and a prompt field per split: settings, not workarounds."""

from __future__ import annotations

import json

import pytest

from corl.config import ConfigError, validate_config
from corl.data.rows import DataError
from corl.trainer import load_train_data
from corl.trainer.setup import load_eval_data
from tests.helpers import tiny_config


def _rows(path, n, **fields):
    path.write_text("".join(json.dumps({"id": f"p{i}", **{k: f(i) for k, f in fields.items()}}) + "\n" for i in range(n)))
    return str(path)


def _cfg(tmp_path, train, val, **data):
    raw = tiny_config(tmp_path, {"a": "unused-a", "b": "unused-b"}, {"train": train, "test": val})
    raw["data"].update(data)
    return validate_config(raw)


def test_an_unlabeled_train_file_with_a_labeled_val_needs_no_setting(tmp_path):
    train = _rows(tmp_path / "train.jsonl", 5, problem=lambda i: f"{i}+1=?")  # no answer column at all
    val = _rows(tmp_path / "val.jsonl", 4, question=lambda i: f"{i}+2=?", answer=lambda i: str(i + 2))
    cfg = _cfg(tmp_path, train, val, val_prompt_field="question")
    data = load_train_data(cfg)
    assert len(data.problems) == 5 and data.gold == {}
    val_data = load_eval_data(cfg)
    assert val_data.gold == {"p0": "2", "p1": "3", "p2": "4", "p3": "5"}
    assert val_data.problems[1].texts == {"question": "1+2=?"}
    # answer_field: null says "the training rows are unlabeled": validation still reads its answers
    cfg = _cfg(tmp_path, train, val, val_prompt_field="question", answer_field=None)
    assert load_eval_data(cfg).gold["p3"] == "5"


def test_a_named_column_must_exist_and_a_partial_column_is_named(tmp_path):
    train = _rows(tmp_path / "train.jsonl", 3, problem=lambda i: "x", gold=lambda i: None if i == 2 else "1")
    val = _rows(tmp_path / "val.jsonl", 2, problem=lambda i: "x", answer=lambda i: "1")
    with pytest.raises(DataError, match=r"train.jsonl' row 1: field 'solution' is missing"):
        load_train_data(_cfg(tmp_path, train, val, answer_field="solution"))  # named by the user: required
    with pytest.raises(DataError, match=r"train.jsonl' row 3: field 'gold' is missing"):
        load_train_data(_cfg(tmp_path, train, val, answer_field="gold"))
    bare = _rows(tmp_path / "bare.jsonl", 2, problem=lambda i: "x")
    with pytest.raises(
        ConfigError, match=r"bare.jsonl' has no answer column 'answer' to measure accuracy: set data.val_answer_field"
    ):
        load_eval_data(_cfg(tmp_path, train, bare))
