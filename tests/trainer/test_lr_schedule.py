"""The learning-rate schedule (grpo.lr_scheduler_type, grpo.warmup_steps): transformers' schedules,
one step per training step, the lr each step used in metrics.jsonl, and a resume that continues
the schedule where it stopped (its state is in the checkpoint), to the same weights."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from corl.config import GRPOConfig, validate_config
from corl.tracking.metrics import read_metrics
from corl.trainer import CohortTrainer
from corl.trainer.run import Preempted
from tests.helpers import tiny_config

LR = 1e-3


def _config(tmp_path, tiny_models, tiny_data, run: str, **grpo):
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"steps": 4}, logging={"tensorboard": False}, grpo=grpo)
    raw["output_dir"] = str(tmp_path / run)
    raw["data"].pop("val")  # the weights and the train rows are compared; validation adds only time
    return validate_config(raw)


def _lrs(run, agent: str = "agent0") -> list[float]:
    return [row[f"{agent}/lr"] for row in read_metrics(run, "train")]


def test_warmup_steps_counts_steps_or_a_share_of_them():
    assert GRPOConfig(lr_scheduler_type="linear", warmup_steps=3).warmup(100) == 3
    assert GRPOConfig(lr_scheduler_type="linear", warmup_steps=0.25).warmup(10) == 3  # ceil(2.5), as transformers
    assert GRPOConfig().warmup(10) == 0


def test_a_warmup_the_schedule_would_ignore_is_refused():
    with pytest.raises(ValueError, match="set lr_scheduler_type: constant_with_warmup"):
        GRPOConfig(warmup_steps=2)  # transformers' constant schedule has no warm-up
    with pytest.raises(ValueError, match="neither a whole number of steps nor a share"):
        GRPOConfig(lr_scheduler_type="linear", warmup_steps=2.5)


@pytest.fixture(scope="module")
def schedule_runs(tmp_path_factory, tiny_models, tiny_data):
    """Linear with one warm-up step over 4 steps: uninterrupted, and stopped after 2 (SIGTERM's
    path: a checkpoint, then Preempted) and resumed for the other 2."""
    root = tmp_path_factory.mktemp("lr_schedule")
    grpo = {"lr_scheduler_type": "linear", "warmup_steps": 1}
    CohortTrainer(_config(root, tiny_models, tiny_data, "full", **grpo)).train()
    steps = iter([False, True])  # asked after steps 1 and 2
    with pytest.raises(Preempted):
        CohortTrainer(_config(root, tiny_models, tiny_data, "resumed", **grpo)).train(should_stop=lambda: next(steps))
    CohortTrainer(_config(root, tiny_models, tiny_data, "resumed", **grpo), resume=True).train()
    return root / "full", root / "resumed"


def test_each_step_trains_with_the_linear_schedules_lr(schedule_runs):
    full, _ = schedule_runs
    # transformers' linear schedule, 1 warm-up step of 4: step s (from 0) has lr x s / 1 while s < 1,
    # then lr x (4 - s) / (4 - 1): 0, 1, 2/3, 1/3
    for agent in ("agent0", "agent1"):
        assert _lrs(full, agent) == pytest.approx([0.0, LR, LR * 2 / 3, LR / 3], rel=1e-12)


def test_a_resumed_run_continues_the_schedule_to_the_same_weights(schedule_runs):
    full, resumed = schedule_runs
    assert _lrs(resumed) == _lrs(full)
    for agent in ("agent0", "agent1"):
        a = load_file(str(full / "checkpoints" / "step_000004" / agent / "model.safetensors"))
        b = load_file(str(resumed / "checkpoints" / "step_000004" / agent / "model.safetensors"))
        differ = [k for k in a if not torch.equal(a[k], b[k])]
        assert not differ, f"{agent}: the resumed run's weights differ from the uninterrupted run's: {differ[:3]}"
        state = torch.load(resumed / "checkpoints" / "step_000004" / agent / "trainer.pt", weights_only=False)
        assert state["scheduler"]["last_epoch"] == 4  # the schedule's state is part of the checkpoint
