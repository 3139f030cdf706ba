"""agents[].train: false: a frozen peer samples, teaches and is validated, but never updates:
no optimizer state, no KL reference, its weights (plain or LoRA) bit-identical after the run."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from corl.config import ConfigError, validate_config
from corl.launch.run import launch
from corl.tracking.metrics import read_metrics
from corl.trainer import CohortTrainer
from tests.helpers import tiny_config


def _raw(tmp_path, tiny_models, tiny_data, steps=2, **sections):
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"steps": steps}, logging={"tensorboard": False}, **sections)
    raw["agents"][1]["train"] = False  # agent1 (the qwen2-bpe model) is the frozen peer
    return raw


def _had_signal(run, name: str) -> bool:
    """Some step gave `name` rewards that differ within a prompt: an update would have moved it."""
    return any(r[f"{name}/uniform_reward_fraction"] < 1.0 for r in read_metrics(run, "train"))


def test_a_frozen_peer_teaches_is_validated_and_keeps_its_weights_across_a_resume(tmp_path, tiny_models, tiny_data):
    raw = _raw(tmp_path, tiny_models, tiny_data, grpo={"beta": 0.01})
    run = tmp_path / "run"
    launch(validate_config(raw), run)  # steps 0-1, checkpoint step_000002
    raw["cohort"]["steps"] = 3
    launch(validate_config(raw), run, resume=True)  # step 2 from the frozen agent's checkpoint
    base = load_file(str(tiny_models["qwen2-bpe"] / "model.safetensors"))
    for step in ("step_000002", "step_000003"):
        saved = load_file(str(run / "checkpoints" / step / "agent1" / "model.safetensors"))
        assert saved.keys() == base.keys() and all(torch.equal(saved[k], base[k]) for k in base), step
        assert torch.load(run / "checkpoints" / step / "agent1" / "trainer.pt", weights_only=False)["optimizer"] is None
    trained = load_file(str(run / "checkpoints" / "step_000003" / "agent0" / "model.safetensors"))
    first = load_file(str(tiny_models["llama-char"] / "model.safetensors"))
    assert any(not torch.equal(trained[k], first[k]) for k in first)  # the other agent did learn
    assert _had_signal(run, "agent1")  # ... and so would agent1 have, had it trained
    records = read_metrics(run, "train")
    assert [r["step"] for r in records] == [1, 2, 3]
    for r in records:
        assert r["agent1/frozen"] == 1.0 and r["agent1/optimizer_steps"] == 0
        assert "agent1/loss" not in r and "agent0/loss" in r
        assert "agent1/labeled_fraction" in r and "agent0/labeled_fraction" in r  # agent1's labels, for diagnostics
    assert all("agent1/val_accuracy" in r for r in read_metrics(run, "val"))


def test_a_frozen_lora_peer_keeps_its_base_and_adapters(tmp_path, tiny_models, tiny_data):
    pytest.importorskip("peft")
    raw = _raw(tmp_path, tiny_models, tiny_data, compute={"lora": {"r": 4}})
    raw["data"].pop("val")
    trainer = CohortTrainer(validate_config(raw), tmp_path / "run")
    frozen = trainer.agents[1]
    assert frozen.optimizer is None and frozen.reference is None
    assert not any(p.requires_grad for p in frozen.model.parameters())
    before = {k: v.clone() for k, v in frozen.model.state_dict().items()}  # base weights and LoRA adapters
    other = {k: v.clone() for k, v in trainer.agents[0].model.state_dict().items()}
    trainer.train()
    after = frozen.model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert any(not torch.equal(other[k], v) for k, v in trainer.agents[0].model.state_dict().items())
    assert _had_signal(tmp_path / "run", "agent1")
    base = load_file(str(tiny_models["qwen2-bpe"] / "model.safetensors"))
    merged = load_file(str(tmp_path / "run" / "checkpoints" / "step_000002" / "agent1" / "model.safetensors"))
    assert all(torch.equal(merged[k], base[k]) for k in base)  # its zero-initialised B merges to nothing


def test_at_least_one_agent_trains(tmp_path, tiny_models, tiny_data):
    raw = _raw(tmp_path, tiny_models, tiny_data)
    raw["agents"][0]["train"] = False
    with pytest.raises(ConfigError, match="at least one agent must train"):
        validate_config(raw)
