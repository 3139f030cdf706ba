"""Faults during a sharded (FSDP2) checkpoint, under real torchrun (gloo, CPU): a full disk (a
real tmpfs, filled between two checkpoints) and a rank SIGKILLed inside DCP's write. Either way
the job says one line (not a traceback per rank), exits non-zero, leaves the previous
checkpoint the last complete one, and `--resume` redoes the lost step exactly.

One agent on two ranks (TTRL): both ranks write shards of the same model in one DCP save, the
collective a failure on one rank must not leave the other hanging in. Each rank's console is
read from torchrun's per-rank log files (--log-dir --redirects 3): what the ranks said, apart
from torchrun's own summary of the failed job.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from corl.tracking.metrics import read_metrics
from tests.helpers import tiny_config

pytestmark = pytest.mark.slow


def _config(tmp_path: Path, tiny_models, tiny_data) -> Path:
    raw = tiny_config(
        tmp_path,
        tiny_models,
        tiny_data,
        agents=1,
        cohort={"steps": 2, "label_source": "self"},
        logging={"tensorboard": False, "checkpoint_every": 1},
        distributed={"fsdp": True, "timeout_s": 60},
    )
    raw["data"].pop("val")
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _torchrun(tmp_path: Path, config: Path, run: Path, *args: str, fault: str | None = None) -> tuple[int, str, list[str]]:
    """`torchrun --nproc-per-node 2 -m corl train ...`: its exit status, torchrun's console and
    the lines the ranks printed (their stdout and stderr, from the per-rank log files)."""
    logs = tmp_path / f"logs-{len(list(tmp_path.glob('logs-*')))}"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    cmd += ["--log-dir", str(logs), "--redirects", "3", "-m", "corl", "train", *args]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "COLUMNS": "400"}
    env.pop("CORL_TEST_FAULT", None)
    if fault is not None:
        env["CORL_TEST_FAULT"] = fault
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    said = [line for f in sorted(logs.rglob("*.log")) for line in f.read_text(errors="replace").splitlines() if line.strip()]
    return done.returncode, done.stdout + done.stderr, [line for line in said if not RUNNING.match(line)]


RUNNING = re.compile(r"memory plan: |step \d+/\d+ ")  # what rank 0 says of a run going well


def _steps(run: Path) -> list[int]:
    return [r["step"] for r in read_metrics(run, "train")]


def _without_times(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith("time/")}


def _resume_redoes_step_2_exactly(tmp_path: Path, config: Path, run: Path) -> None:
    first = {r["step"]: r for r in read_metrics(run, "train")}  # step 2's row was logged before its checkpoint failed
    code, console, said = _torchrun(tmp_path, config, run, "--resume", str(run))
    assert code == 0, console[-3000:] + "\n".join(said)
    assert _steps(run) == [1, 2]
    assert _without_times(read_metrics(run, "train")[1]) == _without_times(first[2])
    assert (run / "checkpoints" / "latest").read_text().strip() == "step_000002"
    assert not list((run / "checkpoints").glob(".tmp_step_*"))


def test_a_full_disk_during_a_sharded_checkpoint_is_one_line_and_the_resume_continues(
    tmp_path,
    tiny_models,
    tiny_data,
    small_disk,
):
    disk = small_disk(64)
    config, run = _config(tmp_path, tiny_models, tiny_data), disk / "run"
    # after step 1's checkpoint agent0's first rank fills the disk (64 KiB stay free): step 2's fails
    code, console, said = _torchrun(tmp_path, config, run, str(config), "-o", str(run), fault="agent0:fill:1")
    everything = console[-3000:] + "\n".join(said)
    assert code != 0, everything
    assert len(said) == 1, everything  # rank 0 says it; rank 1 is silent; no traceback
    assert "could not write checkpoint" in said[0] and "step_000002: the disk is full" in said[0], said
    assert f"corl train --resume {run}" in said[0]
    assert not list((run / "checkpoints").glob(".tmp_step_*")), sorted((run / "checkpoints").iterdir())
    assert (run / "checkpoints" / "latest").read_text().strip() == "step_000001"
    assert json.loads((run / "failure.json").read_text())["where"] == "step 2"
    assert _steps(run) == [1, 2]

    (run / ".test-filler").unlink()  # free space, then resume
    _resume_redoes_step_2_exactly(tmp_path, config, run)


def test_a_rank_killed_inside_a_sharded_write_is_named_in_one_line_and_the_resume_continues(tmp_path, tiny_models, tiny_data):
    config, run = _config(tmp_path, tiny_models, tiny_data), tmp_path / "run"
    # rank 0 (agent0's dp rank 0, the rank that commits) is SIGKILLed once its shards of step 2 are written
    code, console, said = _torchrun(tmp_path, config, run, str(config), "-o", str(run), fault="agent0:kill-writing:2")
    everything = console[-3000:] + "\n".join(said)
    assert code != 0, everything
    assert len(said) == 1, everything  # the survivor says what happened, once; no traceback
    assert "rank 0 (agent0 dp 0) died during the checkpoint of step 2" in said[0], said
    assert ".metadata" not in said[0] and f"--resume {run}" in said[0], said
    assert (run / "checkpoints" / "latest").read_text().strip() == "step_000001"
    failure = json.loads((run / "failure.json").read_text())
    assert failure["missing"] == [{"rank": 0, "agents": ["agent0"]}], failure

    _resume_redoes_step_2_exactly(tmp_path, config, run)


class _FileAgent:
    """An agent as save_checkpoint sees it: a name and a save() that writes its folder."""

    name = "agent0"

    def save(self, folder: Path, gathered: bool = True) -> None:
        folder.mkdir(parents=True)
        (folder / "weights.bin").write_bytes(b"w")


def test_a_half_written_folder_a_dead_rank_left_goes_with_the_next_checkpoint(tmp_path):
    # after a death nobody removes .tmp_step_N (other ranks may still write into it); the next commit does,
    # also when the resumed run never writes step N again (another checkpoint_every)
    from corl.checkpoints.checkpoint import save_checkpoint

    save_checkpoint(tmp_path, 1, [_FileAgent()], {})
    (tmp_path / "checkpoints" / ".tmp_step_000002" / "agent0" / "sharded").mkdir(parents=True)
    save_checkpoint(tmp_path, 3, [_FileAgent()], {})
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["latest", "step_000001", "step_000003"]
