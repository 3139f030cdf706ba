"""Resuming a run: its metrics, its configuration and its checkpoints."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from corl.checkpoints.checkpoint import CheckpointError
from corl.config import ConfigError, validate_config
from corl.tracking.metrics import MetricsLog, read_metrics
from corl.trainer import CohortTrainer
from tests.helpers import tiny_config


def test_metrics_after_resume_hold_every_step_once(tmp_path):
    """A checkpoint after 2 steps has seen steps 0 and 1 (and the validations after them);
    rows the interrupted run wrote later are dropped, and the resumed run's rows follow."""
    log = MetricsLog(tmp_path, tensorboard=False)
    log.log(-1, {"a/val_accuracy": 0.1}, kind="val")  # eval_on_start
    for step in range(3):
        log.log(step, {"a/loss": float(step)})
    log.log(1, {"a/val_accuracy": 0.2}, kind="val")  # eval_every 2: after step 1, before checkpoint 2
    log.close()  # killed after step 2, whose checkpoint never came

    log = MetricsLog(tmp_path, tensorboard=False, resume_step=2)
    for step in range(2, 4):
        log.log(step, {"a/loss": float(step)})
    log.close()
    assert [r["step"] for r in read_metrics(tmp_path, "train")] == [0, 1, 2, 3]
    assert [r["step"] for r in read_metrics(tmp_path, "val")] == [-1, 1]


def test_tensorboard_purges_from_the_first_redone_step(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = MetricsLog(tmp_path)
    for step in range(3):
        log.log(step, {"a/loss": float(step)})
    log.close()
    log = MetricsLog(tmp_path, resume_step=2)
    log.log(2, {"a/loss": 20.0})
    log.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("a/loss")] == [(0, 0.0), (1, 1.0), (2, 20.0)]


# -- the configuration a run started with, and checkpoints checked on load ------------------------------


@pytest.fixture
def one_step_run(tmp_path, tiny_models, tiny_data):
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"steps": 1}, logging={"tensorboard": False})
    raw["data"].pop("val")
    CohortTrainer(validate_config(raw)).train()
    return raw, tmp_path / "run"


def test_resume_refuses_a_changed_configuration_naming_each_key(one_step_run):
    raw, run = one_step_run
    changed = copy.deepcopy(raw)
    changed["agents"][0]["lr"] = 0.5
    changed["grpo"] = {"beta": 0.1}
    changed["cohort"]["steps"] = 2  # allowed
    with pytest.raises(ConfigError) as err:
        CohortTrainer(validate_config(changed), resume=True)
    message = str(err.value)
    assert "cannot resume: the configuration differs" in message
    assert "agents.0.lr: 0.001 -> 0.5" in message and "grpo.beta: 0.0 -> 0.1" in message
    assert "cohort.steps" not in message.split("only")[0]
    assert yaml.safe_load((run / "config.yaml").read_text())["agents"][0]["lr"] == 0.001  # the started config stays
    # steps, logging and output paths may change
    allowed = copy.deepcopy(raw)
    allowed["cohort"]["steps"] = 2
    allowed["logging"]["eval_every"] = 1
    trainer = CohortTrainer(validate_config(allowed), resume=True)
    assert trainer.start_step == 1
    assert yaml.safe_load((run / "config.yaml").read_text())["cohort"]["steps"] == 1


def test_a_corrupted_or_truncated_checkpoint_file_is_named(one_step_run):
    raw, run = one_step_run
    checkpoint = run / "checkpoints" / "step_000001"
    listed = json.loads((checkpoint / "manifest.json").read_text())
    assert {"state.pt", "agent0/model.safetensors", "agent1/trainer.pt"} <= set(listed)
    weights = checkpoint / "agent1" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # one flipped bit of a weight: the size is right, the content is not
    weights.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"step_000001: file agent1/model.safetensors is corrupted \(its sha256 differs"):
        CohortTrainer(validate_config(raw), resume=True)
    (checkpoint / "agent0" / "trainer.pt").write_bytes(b"cut")
    with pytest.raises(CheckpointError, match=r"file agent0/trainer.pt is truncated or altered \(3 bytes, \d+ written\)"):
        CohortTrainer(validate_config(raw), resume=True)


class _FileAgent:
    """An agent as save_checkpoint sees it: a name and a save() that writes its folder."""

    def __init__(self, name: str):
        self.name = name

    def save(self, folder):
        folder.mkdir(parents=True)
        (folder / "weights.bin").write_bytes(b"w")


def test_the_checkpoint_just_written_is_never_pruned(tmp_path):
    """Two newest are kept, but one with a higher step (another run's, a lowered cohort.steps)
    must not push out the checkpoint just written: `latest` would name a missing folder."""
    from corl.checkpoints.checkpoint import latest_checkpoint, save_checkpoint

    for step in (4, 6, 3):  # 3 written last: it and the newest other stay
        save_checkpoint(tmp_path, step, [_FileAgent("a")], {})
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("step_*")) == ["step_000003", "step_000006"]
    assert (tmp_path / "checkpoints" / "latest").read_text() == "step_000003"
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoints" / "step_000003"
