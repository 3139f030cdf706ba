"""Recipe "Add a task kind" (docs/architecture.md): one module outside corl
(tests/plugins/toy_task.py: answers, vote keys, equivalence, grading, a config check),
named in `plugins:`, trains a step and validates."""

from __future__ import annotations

from pathlib import Path

import pytest

from corl.config import ConfigError, validate_config
from corl.trainer import CohortTrainer
from tests.helpers import tiny_config

PLUGINS = Path(__file__).parent


def test_a_task_kind_from_outside_trains_and_validates(tiny_models, tiny_data, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    raw = tiny_config(tmp_path, tiny_models, tiny_data)
    raw["data"]["task"] = "last_number"
    raw["plugins"] = ["toy_task"]
    trainer = CohortTrainer(validate_config(raw))
    import toy_task

    metrics = trainer.step(0)
    assert toy_task.EXTRACTED  # the loop read answers through it
    assert sum(metrics[f"{a.name}/optimizer_steps"] for a in trainer.agents.values()) >= 1
    val = trainer.validate()  # graded by its own grader
    assert set(val) == {f"{a.name}/val_accuracy" for a in trainer.agents.values()} | {"cohort/val_accuracy"}
    with pytest.raises(ConfigError, match="data.task 'last_number' validates against an answer column"):
        validate_config({**raw, "data": {**raw["data"], "answer_field": None}})


def test_its_answers_by_hand(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    from toy_task import answers, grade

    groups, keys = answers(["so 3 + 4 = 7", "no number", "-02"], [object()], 3)
    assert groups == [("7", None, "-2")] and keys == groups
    assert grade(["it is 12", "it is 12"], [None, None], [{}, {}], ["12", "13"]) == [True, False]
