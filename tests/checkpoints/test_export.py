"""`corl export` of a multi-agent FSDP2 run, as a user runs it: each agent's model folder written
from its shards exactly as the run gathers it, whole or not at all ("already" means verified),
a model half-written by a killed export found and written again, a full disk in one line.

Two runs of the same two-agent cohort under torchrun (gloo, one rank per agent, FSDP2): one of
1 step (its final checkpoint holds the gathered models: the reference) and one of 2 steps with a
checkpoint after each (step 1 holds each agent's shards alone)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from corl.checkpoints.checkpoint import CheckpointError, verify_checkpoint
from tests.helpers import tiny_config

pytestmark = pytest.mark.slow

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "COLUMNS": "400"}
AGENTS = ("agent0", "agent1")


def _train(tmp_path: Path, tiny_models, tiny_data, name: str, steps: int) -> Path:
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"steps": steps})
    raw["logging"] |= {"tensorboard": False, "checkpoint_every": 1}
    raw["distributed"] = {"fsdp": True, "timeout_s": 120}
    raw["data"].pop("val")
    config = tmp_path / f"{name}.yaml"
    config.write_text(yaml.safe_dump(raw))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "corl", "train"]
    done = subprocess.run([*cmd, str(config), "-o", str(tmp_path / name)], env=ENV, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return tmp_path / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_models, tiny_data) -> tuple[Path, Path]:
    """(the 2-step run, whose step 1 is sharded only; the 1-step run, whose step 1 is gathered)."""
    root = tmp_path_factory.mktemp("export")
    sharded, gathered = _train(root, tiny_models, tiny_data, "sharded", 2), _train(root, tiny_models, tiny_data, "gathered", 1)
    for agent in AGENTS:
        assert not (sharded / "checkpoints" / "step_000001" / agent / "model.safetensors").exists()
        assert (gathered / "checkpoints" / "step_000001" / agent / "model.safetensors").is_file()
    return sharded, gathered


def _copy(run: Path, to: Path) -> Path:
    """What an export reads of a run: its config and the checkpoint of step 1."""
    (to / "checkpoints").mkdir(parents=True)
    shutil.copy2(run / "config.yaml", to / "config.yaml")
    shutil.copytree(run / "checkpoints" / "step_000001", to / "checkpoints" / "step_000001")
    return to


def _export(run: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "corl", "export", str(run), "--step", "1"], env=ENV, capture_output=True, text=True
    )


def _same_weights(a: Path, b: Path) -> bool:
    wa, wb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_export_of_a_multi_agent_run_writes_each_agents_model_as_the_run_gathers_it(runs, tmp_path):
    from transformers import AutoModelForCausalLM

    run = _copy(runs[0], tmp_path / "run")
    step = run / "checkpoints" / "step_000001"
    done = _export(run)
    assert done.returncode == 0, done.stderr
    for agent in AGENTS:
        assert f"{step / agent}: written from {step / agent / 'sharded'}" in done.stdout
        assert _same_weights(step / agent, runs[1] / "checkpoints" / "step_000001" / agent), agent
        AutoModelForCausalLM.from_pretrained(step / agent)
    assert not list(step.glob(".export_*"))
    verify_checkpoint(step)  # the export is in the manifest: what a resume from this step checks
    again = _export(run)
    assert again.returncode == 0 and again.stdout.count("a Hugging Face model folder already") == 2, again.stdout


def test_a_model_half_written_by_a_killed_export_is_found_and_written_again(runs, tmp_path):
    # what a SIGKILL in the middle of an export left before exports were written whole: config.json, half
    # of model.safetensors, nothing in the manifest; and what one left since: a hidden folder beside it
    run = _copy(runs[0], tmp_path / "run")
    step = run / "checkpoints" / "step_000001"
    reference = runs[1] / "checkpoints" / "step_000001" / "agent0"
    shutil.copy2(reference / "config.json", step / "agent0" / "config.json")
    data = (reference / "model.safetensors").read_bytes()
    (step / "agent0" / "model.safetensors").write_bytes(data[: len(data) // 2])
    (step / ".export_agent1.tmp").mkdir()
    (step / ".export_agent1.tmp" / "model.safetensors").write_bytes(b"half")
    with pytest.raises(CheckpointError, match=r"file agent0/model.safetensors is truncated or damaged .*run corl export again"):
        verify_checkpoint(step, ["agent0"])

    done = _export(run)
    assert done.returncode == 0, done.stderr
    assert "already" not in done.stdout and f"{step / 'agent0'}: written from" in done.stdout, done.stdout
    for agent in AGENTS:
        assert _same_weights(step / agent, runs[1] / "checkpoints" / "step_000001" / agent), agent
    assert not list(step.glob(".export_*"))
    verify_checkpoint(step)


def test_a_full_disk_during_an_export_is_one_line_and_never_already(runs, small_disk):
    disk = small_disk(64)
    run = _copy(runs[0], disk / "run")
    step = run / "checkpoints" / "step_000001"
    before = {p: p.read_bytes() for p in sorted(step.rglob("*")) if p.is_file()}
    free = shutil.disk_usage(disk).free
    (disk / "filler").write_bytes(b"\0" * (free - 64 * 1024))  # something else took the disk: 64 KiB stay free
    for _ in range(2):  # and again: the failed export left nothing that reads as done
        done = _export(run)
        assert done.returncode == 1, done.stdout + done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "could not export" in lines[0] and "the disk is full" in lines[0], done.stderr
        assert "already" not in done.stdout and "Traceback" not in done.stderr
        assert {p: p.read_bytes() for p in sorted(step.rglob("*")) if p.is_file()} == before  # as it was
    (disk / "filler").unlink()
    done = _export(run)
    assert done.returncode == 0, done.stderr
    assert _same_weights(step / "agent0", runs[1] / "checkpoints" / "step_000001" / "agent0")
