"""Preemption: SIGTERM saves a checkpoint and exits 143; torchrun --max-restarts with
resume: auto continues from the last checkpoint by itself. Real processes, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from corl.tracking.metrics import read_metrics
from tests.helpers import tiny_config


def _config(tmp_path, tiny_models, tiny_data, steps: int) -> Path:
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"steps": steps}, logging={"tensorboard": False})
    raw["data"].pop("val")
    raw["resume"] = "auto"
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _start(cmd: list[str], cwd: Path, **env) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "COLUMNS": "400", **env}  # rich: no wrapping
    return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def _wait_for_step(proc, run: Path, step: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not any(r["step"] >= step for r in _rows(run)):
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.05)


def _rows(run: Path) -> list[dict]:
    return read_metrics(run, "train") if (run / "metrics.jsonl").exists() else []


LATE_S = 10  # longer than gloo's connection retries to an address nobody listens on (~4 s)

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def test_sigterm_to_a_single_process_run_saves_and_exits_143(tmp_path, tiny_models, tiny_data):
    config = _config(tmp_path, tiny_models, tiny_data, steps=50)
    run = tmp_path / "run"
    proc = _start([sys.executable, "-m", "corl", "train", str(config)], tmp_path)
    _wait_for_step(proc, run, 0)
    proc.send_signal(signal.SIGTERM)
    output = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 143, output
    done = json.loads((run / "checkpoints" / (run / "checkpoints" / "latest").read_text() / "state.json").read_text())["step"]
    assert done >= 1 and "preempted (SIGTERM)" in output and f"step_{done:06d}" in output
    assert [r["step"] for r in _rows(run)] == list(range(1, done + 1))


@pytest.mark.slow
def test_sigterm_to_torchrun_saves_a_checkpoint_on_every_rank(tmp_path, tiny_models, tiny_data):
    config = _config(tmp_path, tiny_models, tiny_data, steps=50)
    run = tmp_path / "run"
    launcher = [sys.executable, "-m", "corl.launch", *TORCHRUN[3:]]  # torchrun's arguments, SIGTERM read as preemption
    proc = _start([*launcher, "-m", "corl", "train", str(config)], tmp_path)
    _wait_for_step(proc, run, 0)
    os.kill(proc.pid, signal.SIGTERM)  # the launcher, as SLURM or Kubernetes would
    output = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 143, output
    assert output.count("preempted (SIGTERM)") == 2, output  # each rank saved, then exited by itself
    assert "Traceback" not in output and "no checkpoint saved within" not in output, output
    latest = (run / "checkpoints" / "latest").read_text().strip()
    done = int(latest.removeprefix("step_"))
    assert done >= 1 and {"agent0", "agent1"} <= {p.name for p in (run / "checkpoints" / latest).iterdir()}
    assert not (run / "failure.json").exists(), output
    assert [r["step"] for r in _rows(run)] == list(range(1, done + 1))


def _attempt_logs(run: Path, logs: Path, output: str) -> str:
    """Everything a failed torchrun run left: its console, every attempt's per-rank
    stdout/stderr (--log-dir --tee), torchrun's error files, RUN_DIR/failure.json and the
    checkpoints there were: the console alone interleaves the ranks and attempts."""
    parts = [f"== console ==\n{output}"]
    for file in sorted(p for p in logs.rglob("*") if p.is_file()):
        parts.append(f"== {file.relative_to(logs)} ==\n{file.read_text(errors='replace')}")
    failure = run / "failure.json"
    parts.append(f"== failure.json ==\n{failure.read_text() if failure.is_file() else '(none)'}")
    parts.append(f"== checkpoints ==\n{sorted(p.name for p in (run / 'checkpoints').glob('*'))}")
    return "\n".join(parts)


@pytest.mark.slow
def test_a_killed_worker_under_max_restarts_finishes_from_the_last_checkpoint(tmp_path, tiny_models, tiny_data):
    raw = yaml.safe_load(_config(tmp_path, tiny_models, tiny_data, steps=4).read_text())
    raw["logging"]["checkpoint_every"] = 2
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    run, logs = tmp_path / "run", tmp_path / "torchrun_logs"
    # The restart's rank 1 starts late, as a loaded machine once made it by chance: rank 0 then
    # reads the store before rank 1 has written its new keys, and found the dead attempt's
    # (gloo connected to a closed port). Delayed on purpose, that race is decided every time.
    late = tmp_path / "late_rank1.py"
    late.write_text(
        "import os, runpy, sys, time\n"
        "if __name__ == '__main__':  # corl's spawned answer checkers re-run this script\n"
        "    if os.environ.get('TORCHELASTIC_RESTART_COUNT') == '1' and os.environ['RANK'] == '1':\n"
        f"        time.sleep({LATE_S})\n"
        "    sys.argv[0] = 'corl'\n"
        "    runpy.run_module('corl', run_name='__main__')\n"
    )
    # agent1's rank is SIGKILLed before step 3 on the first attempt only; the restart resumes at step 2
    proc = _start(
        [*TORCHRUN, "--max-restarts", "1", "--log-dir", str(logs), "--tee", "3", str(late), "train", str(config)],
        tmp_path,
        CORL_TEST_FAULT="agent1:kill:3",
    )
    output = proc.communicate(timeout=400)[0].decode()
    assert proc.returncode == 0, _attempt_logs(run, logs, output)
    assert [r["step"] for r in _rows(run)] == [1, 2, 3, 4], _attempt_logs(run, logs, output)
    assert (run / "checkpoints" / "step_000004").is_dir()
    # the restarted attempt filed the first one's failure away: failure.json is not stale
    assert not (run / "failure.json").exists()
    first = json.loads((run / "failure-attempt0.json").read_text())
    assert [m["agents"] for m in first["missing"]] == [["agent1"]], first


@pytest.mark.slow
@pytest.mark.parametrize("checkpoint_every, killed_before", [(2, 3), (0, 2)], ids=["from-its-checkpoint", "before-any"])
def test_a_restart_under_torchrun_continues_the_run_by_itself(tmp_path, tiny_models, tiny_data, checkpoint_every, killed_before):
    """Default `resume: never`: a restart of the job is still the same run. With a checkpoint
    it resumes from it; without one it starts again, its rows dropped: every step once."""
    raw = yaml.safe_load(_config(tmp_path, tiny_models, tiny_data, steps=4).read_text())
    raw["resume"] = "never"
    raw["logging"]["checkpoint_every"] = checkpoint_every
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    run, logs = tmp_path / "run", tmp_path / "torchrun_logs"
    proc = _start(
        [*TORCHRUN, "--max-restarts", "1", "--log-dir", str(logs), "-m", "corl", "train", str(config)],
        tmp_path,
        CORL_TEST_FAULT=f"agent1:kill:{killed_before}",  # SIGKILL on the first attempt only
    )
    output = proc.communicate(timeout=400)[0].decode()
    assert proc.returncode == 0, _attempt_logs(run, logs, output)
    assert [r["step"] for r in _rows(run)] == [1, 2, 3, 4], _attempt_logs(run, logs, output)
    assert (run / "checkpoints" / "latest").read_text().strip() == "step_000004"
    assert (run / "failure-attempt0.json").is_file()  # the first attempt did fail


@pytest.mark.slow
def test_restarts_of_a_run_refused_its_folder_stay_refused(tmp_path, tiny_models, tiny_data):
    """The folder holds a finished run: the new run's first attempt is refused, and its
    restart must not take the folder's run for its own."""
    raw = yaml.safe_load(_config(tmp_path, tiny_models, tiny_data, steps=1).read_text())
    raw["resume"] = "never"  # a new run each time it is started
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    run = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "corl", "train", str(config)], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    before = {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}
    proc = _start([*TORCHRUN, "--max-restarts", "1", "-m", "corl", "train", str(config)], tmp_path)
    output = proc.communicate(timeout=400)[0].decode()
    assert proc.returncode != 0, output
    # Both attempts ended on the refusal's exit code 2 (torchrun logs each attempt's first failed
    # rank), and said why; the rank that did not fail first may be stopped before it says so.
    assert output.count("failed (exitcode: 2)") == 2, output
    assert output.count("already holds a run") >= 2, output
    assert {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()} == before
