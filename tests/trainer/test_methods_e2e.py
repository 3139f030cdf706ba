"""The paper's comparisons, each one config word away, run end to end on tiny models."""

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from corl.cli import app
from corl.data.rows import DataError
from corl.tracking.metrics import read_metrics
from tests.helpers import tiny_config

runner = CliRunner()


def run(tmp_path, raw) -> list[dict]:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    result = runner.invoke(app, ["train", str(path)])
    assert result.exit_code == 0, result.output
    return read_metrics(tmp_path / "run", "train")


@pytest.mark.parametrize("reward", ["entropy", "self_certainty"], ids=["rent", "intuitor"])
def test_intrinsic_reward_baselines(tmp_path, tiny_models, tiny_data, reward):
    raw = tiny_config(tmp_path, tiny_models, tiny_data, agents=1, cohort={"label_source": "self", "reward": reward})
    records = run(tmp_path, raw)
    # continuous rewards: every group has spread, so every step updates
    assert all(r["agent0/optimizer_steps"] == 1 for r in records)
    if reward == "entropy":
        assert all(r["agent0/reward_mean"] < 0 for r in records)  # minus an entropy
    else:
        assert all(r["agent0/reward_mean"] > 0 for r in records)  # a KL divergence


def test_co_rewarding_ii_labels_from_an_ema_teacher(tmp_path, tiny_models, tiny_data):
    raw = tiny_config(tmp_path, tiny_models, tiny_data, agents=1, cohort={"label_source": "ema", "ema_momentum": 0.9})
    records = run(tmp_path, raw)
    assert records[0]["agent0/labeled_fraction"] > 0
    assert sum(r["agent0/optimizer_steps"] for r in records) >= 1


def test_same_family_seed_only_cohort(tmp_path, tiny_models, tiny_data):
    raw = tiny_config(tmp_path, tiny_models, tiny_data)
    same = str(tiny_models["llama-char"])
    raw["agents"] = [{"name": "s0", "model": same, "lr": 1e-3, "seed": 0}, {"name": "s1", "model": same, "lr": 1e-3, "seed": 1}]
    records = run(tmp_path, raw)
    assert "agreement/s0~s1" in records[0]
    # different sampling seeds: the two copies of one checkpoint do not sample identically
    assert any(r["s0/reward_mean"] != r["s1/reward_mean"] or r["agreement/s0~s1"] < 1 for r in records)


def decoupled_rows(tiny_data, tmp_path) -> Path:
    rows = [json.loads(line) for line in tiny_data["train"].read_text().splitlines()]
    for row in rows:  # another wording of the same problem, same answer
        row["problem_story"] = "what is " + row["problem"]
    path = tmp_path / "train_story.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_data_decoupling_two_fields(tmp_path, tiny_models, tiny_data):
    raw = tiny_config(tmp_path, tiny_models, tiny_data)
    raw["data"]["train"] = str(decoupled_rows(tiny_data, tmp_path))
    raw["agents"][1]["prompt_field"] = "problem_story"
    records = run(tmp_path, raw)
    assert len(records) == 3 and "agreement/agent0~agent1" in records[0]


def test_data_decoupling_own_file_aligned_by_id(tmp_path, tiny_models, tiny_data):
    from corl.config import validate_config
    from corl.trainer import load_train_data

    story = decoupled_rows(tiny_data, tmp_path)
    raw = tiny_config(tmp_path, tiny_models, tiny_data)
    raw["agents"][1].update({"data": str(story), "prompt_field": "problem_story"})
    data = load_train_data(validate_config(raw))
    p = data.problems[0]
    assert p.texts[f"{story}#problem_story"] == "what is " + p.texts["problem"]
    run(tmp_path, raw)
    # a wording file whose ids do not cover the training rows is refused, by name
    rows = story.read_text().splitlines()
    short = tmp_path / "short.jsonl"
    short.write_text("\n".join(rows[:-2]) + "\n")
    raw["agents"][1]["data"] = str(short)
    with pytest.raises(DataError, match=r"short.jsonl': 2 of 48 training ids have no row here"):
        load_train_data(validate_config(raw))
