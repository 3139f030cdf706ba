"""Signals as people and schedulers send them, to `corl train` in its own process group (a
terminal sends Ctrl-C to the whole foreground group): a signal while the models load stops at
once and leaves no folder; a second Ctrl-C stops at once and names the command that continues;
that command continues a run stopped before its first checkpoint. (Ctrl-C without a deadline,
killed and Ctrl-C'd runs resumed to the same weights: tests/cli/test_train_e2e.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from corl.tracking.metrics import read_metrics
from tests.helpers import ROOT, tiny_config

ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "COLUMNS": "400", "PYTHONPATH": str(ROOT)}


def _config(tmp_path: Path, tiny_models, tiny_data, **sections) -> Path:
    raw = tiny_config(tmp_path, tiny_models, tiny_data, **sections)
    raw["logging"]["tensorboard"] = False
    raw["data"].pop("val")
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture
def started():
    """Processes a test started; any still running at its end (a failed test's) is killed, group and all."""
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _start(started: list, *args: str, cwd: Path, **env: str) -> subprocess.Popen:
    """`corl ARGS` as the leader of its own process group, its output (both streams) in one pipe."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "corl", *args],
        cwd=cwd,
        env={**ENV, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    started.append(proc)
    return proc


@pytest.mark.parametrize(
    "sig, code, said", [(signal.SIGTERM, 143, "preempted (SIGTERM)"), (signal.SIGINT, 130, "stopped (Ctrl-C)")]
)
def test_a_signal_while_the_models_load_stops_at_once_and_leaves_no_folder(
    tmp_path, tiny_models, tiny_data, started, sig, code, said
):
    # each model takes 30 s to come and the grace is an hour: only a stop at once ends within the guard,
    # and the run it stopped had not begun, so nothing of it stays (no folder holding only .corl_lock)
    models = {name: f"slow:{path}" for name, path in tiny_models.items()}
    config = _config(tmp_path, models, tiny_data, distributed={"preempt_grace_s": 3600})
    raw = yaml.safe_load(config.read_text())
    raw["plugins"] = ["tests.launch.slow_source"]
    config.write_text(yaml.safe_dump(raw))
    loading = tmp_path / "loading"
    proc = _start(started, "train", str(config), cwd=tmp_path, CORL_TEST_LOADING=str(loading), CORL_TEST_LOAD_S="30")
    deadline = time.monotonic() + 300  # a hang guard, not a speed bound
    while not loading.exists():
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert (tmp_path / "run" / ".corl_lock").is_file()  # the run folder is entered: the models load in it
    os.killpg(proc.pid, sig)
    output = proc.communicate(timeout=50)[0]  # under the 60 s the two models take: stopped while loading
    assert proc.returncode == code, output
    assert (
        f"{said} before step 1, nothing new trained; nothing of the run was kept; start it again with the same command" in output
    )
    assert "Traceback" not in output and "raise it" not in output, output
    assert not (tmp_path / "run").exists()


def test_a_second_ctrl_c_stops_at_once_and_the_resume_it_names_starts_the_run_again(tmp_path, tiny_models, tiny_data, started):
    config = _config(tmp_path, tiny_models, tiny_data, cohort={"steps": 3})  # a checkpoint only after the last step
    proc = _start(started, "train", str(config), "-o", "run", cwd=tmp_path)
    lines, sent = [], 0
    for line in proc.stdout:
        lines.append(line)
        if sent == 0 and line.startswith("step 1/3"):
            os.killpg(proc.pid, signal.SIGINT)
            sent = 1
        elif sent == 1 and line.startswith("corl: Ctrl-C: finishing this step"):
            os.killpg(proc.pid, signal.SIGINT)  # the step is not done: stop now
            sent = 2
    output = "".join(lines)
    assert proc.wait(timeout=60) == 130 and sent == 2, output
    said = "interrupted (Ctrl-C) without a checkpoint of this moment; no checkpoint yet; start it again from step 1 with "
    assert said + "corl train --resume run" in output, output
    assert "Traceback" not in output, output
    assert not list((tmp_path / "run" / "checkpoints").glob("step_*"))

    resumed = subprocess.run(
        [sys.executable, "-m", "corl", "train", "--resume", "run"], cwd=tmp_path, env=ENV, capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "no checkpoint to resume from: the run starts again at step 1" in resumed.stderr
    assert [r["step"] for r in read_metrics(tmp_path / "run", "train")] == [1, 2, 3]  # every step once
