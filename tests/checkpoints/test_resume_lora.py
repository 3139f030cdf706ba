"""Resuming a LoRA run: the adapters (unmerged) come back onto the original base model, so a
run stopped after 2 steps and resumed for 1 more ends exactly where 3 uninterrupted steps do."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from corl.checkpoints.checkpoint import CheckpointError
from corl.config import validate_config
from corl.launch.run import launch
from corl.tracking.metrics import read_metrics
from tests.helpers import tiny_config

pytest.importorskip("peft")

AGENTS = ("agent0", "agent1")


def _config(tmp_path, tiny_models, tiny_data, steps: int):
    raw = tiny_config(
        tmp_path,
        tiny_models,
        tiny_data,
        cohort={"steps": steps},
        logging={"tensorboard": False},
        compute={"lora": {"r": 4}},
    )
    raw["data"].pop("val")  # validation adds time, not coverage: the weights and train metrics are compared
    return validate_config(raw)


def _train_metrics(run) -> dict[int, dict]:
    # wall-clock timings differ between any two runs; everything else must be equal
    return {r["step"]: {k: v for k, v in r.items() if not k.startswith("time/")} for r in read_metrics(run, "train")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_models, tiny_data):
    root = tmp_path_factory.mktemp("lora_resume")
    full, resumed = root / "full", root / "resumed"
    launch(_config(root, tiny_models, tiny_data, steps=3), full)
    launch(_config(root, tiny_models, tiny_data, steps=2), resumed)  # its last checkpoint: step_000002
    launch(_config(root, tiny_models, tiny_data, steps=3), resumed, resume=True)
    return full, resumed


def test_two_steps_and_a_resumed_one_equal_three_uninterrupted_steps(runs, tiny_models):
    full, resumed = runs
    assert _train_metrics(resumed) == _train_metrics(full)
    assert sorted(_train_metrics(resumed)) == [1, 2, 3]  # every step once
    base = load_file(str(tiny_models["llama-char"] / "model.safetensors"))
    for name in AGENTS:
        a = load_file(str(full / "checkpoints" / "step_000003" / name / "model.safetensors"))
        b = load_file(str(resumed / "checkpoints" / "step_000003" / name / "model.safetensors"))
        assert a.keys() == b.keys()
        differ = [k for k in a if not torch.equal(a[k], b[k])]
        assert not differ, f"{name}: merged weights of the resumed run differ from the uninterrupted run's: {differ[:5]}"
        adapter_a = load_file(str(full / "checkpoints" / "step_000003" / name / "adapter" / "adapter_model.safetensors"))
        adapter_b = load_file(str(resumed / "checkpoints" / "step_000003" / name / "adapter" / "adapter_model.safetensors"))
        assert adapter_a.keys() == adapter_b.keys() and all(torch.equal(adapter_a[k], adapter_b[k]) for k in adapter_a)
        # LoRA's B starts at zero: a non-zero B shows the adapters trained, so equality above is not vacuous
        assert any(adapter_a[k].abs().sum() > 0 for k in adapter_a if "lora_B" in k), f"{name}: the adapters never trained"
    # and the merge is not a no-op: agent0 (the llama base) moved away from its base weights
    merged = load_file(str(full / "checkpoints" / "step_000003" / "agent0" / "model.safetensors"))
    assert any(not torch.equal(merged[k], base[k]) for k in base)


def test_the_adapter_files_are_in_the_manifest_and_a_corrupted_one_is_named(runs, tiny_models, tiny_data, tmp_path):
    _, resumed = runs
    checkpoint = resumed / "checkpoints" / "step_000003"
    listed = json.loads((checkpoint / "manifest.json").read_text())
    for name in AGENTS:
        assert f"{name}/adapter/adapter_model.safetensors" in listed
        assert f"{name}/adapter/adapter_config.json" in listed
    # a copy of the run whose adapter file is flipped: the resume must refuse it, naming the file
    copy = tmp_path / "copy"
    shutil.copytree(resumed, copy)
    file = copy / "checkpoints" / "step_000003" / "agent1" / "adapter" / "adapter_model.safetensors"
    data = bytearray(file.read_bytes())
    data[-1] ^= 0xFF
    file.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="agent1/adapter/adapter_model.safetensors is corrupted"):
        launch(_config(tmp_path, tiny_models, tiny_data, steps=4), copy, resume=True)
