"""The keys researchers expect of a GRPO trainer, read from YAML: several training files with weights,
a prompt-length limit, a learning-rate schedule with warm-up, completions logging."""

import pytest
import yaml

from corl.config import ConfigError, load_config

BASE = {"agents": [{"name": "a", "model": "m1"}, {"name": "b", "model": "m2"}], "data": {"train": "x.jsonl"}}


def _load(tmp_path, overrides=(), **data):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({**BASE, "data": {**BASE["data"], **data}}))
    return load_config(path, list(overrides))


def test_data_train_is_one_file_or_several_with_weights(tmp_path):
    one = _load(tmp_path).data
    assert [(f.path, f.weight, f.split) for f in one.train_files()] == [("x.jsonl", 1.0, None)]
    mixed = _load(tmp_path, train=[{"path": "a.jsonl", "weight": 3}, {"path": "org/set", "split": "extra"}]).data
    assert [(f.path, f.weight, f.split) for f in mixed.train_files()] == [("a.jsonl", 3.0, None), ("org/set", 1.0, "extra")]
    assert _load(tmp_path, ["data.train=y.jsonl"]).data.train_files()[0].path == "y.jsonl"


@pytest.mark.parametrize(
    "data, message",
    [
        ({"train": [{"path": "a.jsonl", "weight": 0}]}, "data.train.list[TrainFile].0.weight"),
        ({"train": []}, "data.train"),
        ({"max_prompt_tokens": 0}, "data.max_prompt_tokens"),
    ],
)
def test_bad_training_data_keys_are_named(tmp_path, data, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        _load(tmp_path, **data)


def test_the_schedule_and_completions_keys_read_from_yaml(tmp_path):
    cfg = _load(tmp_path, ["grpo.lr_scheduler_type=cosine", "grpo.warmup_steps=0.1", "logging.log_completions=true"])
    assert cfg.grpo.lr_scheduler_type == "cosine" and cfg.grpo.warmup(100) == 10 and cfg.logging.log_completions
    with pytest.raises(ConfigError, match="grpo.lr_scheduler_type: Input should be 'constant'"):
        _load(tmp_path, ["grpo.lr_scheduler_type=polynomial"])
