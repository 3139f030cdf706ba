"""A run folder belongs to one run: a new run never writes into another's folder, a run
started again keeps every step once, and what a resume compares with cannot be edited by
accident. `corl train` runs as a user would (a subprocess); the decision table itself is
checked on `enter_run_folder` directly (no model loads)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from corl.checkpoints.run_folder import LOCK, RECORD, enter_run_folder, lock_run_folder, run_record, write_record
from corl.config import ConfigError, validate_config
from corl.tracking.metrics import read_metrics
from tests.helpers import tiny_config


def _config(tmp_path: Path, tiny_models, tiny_data, name: str = "run.yaml", val: bool = False, **sections) -> Path:
    raw = tiny_config(tmp_path, tiny_models, tiny_data, **sections)
    raw["logging"].setdefault("tensorboard", False)
    if not val:
        raw["data"].pop("val")
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw))
    return path


def _corl(*args, cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "COLUMNS": "400"}  # rich: no wrapping
    return subprocess.Popen(
        [sys.executable, "-m", "corl", *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


def _run(*args, cwd: Path) -> tuple[int, str]:
    proc = _corl(*args, cwd=cwd)
    output = proc.communicate(timeout=600)[0].decode()
    return proc.returncode, output


def _snapshot(run: Path) -> dict[str, bytes]:
    """Every file of a run folder, by path: what must not change."""
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def _steps(run: Path, kind: str = "train") -> list[int]:
    return [r["step"] for r in read_metrics(run, kind)]


# -- as a user runs it ---------------------------------------------------------------------------------


def test_a_new_run_into_a_folder_that_holds_a_run_is_refused_and_the_run_stays(tmp_path, tiny_models, tiny_data):
    config = _config(tmp_path, tiny_models, tiny_data, cohort={"steps": 2})
    run = tmp_path / "run"
    code, output = _run("train", str(config), "-o", str(run), cwd=tmp_path)
    assert code == 0, output
    before = _snapshot(run)
    # the same command again (a new run): refused before anything is written, naming both ways on
    code, output = _run("train", str(config), "-o", str(run), "--set", "cohort.steps=3", cwd=tmp_path)
    assert code == 2, output
    assert "already holds a run" in output and f"--resume {run}" in output and "-o NEW_DIR" in output, output
    assert _snapshot(run) == before
    # the run itself goes on where it stopped: every step once, its final checkpoint kept
    code, output = _run("train", "--resume", str(run), "--set", "cohort.steps=3", cwd=tmp_path)
    assert code == 0, output
    assert _steps(run) == [1, 2, 3]
    assert (run / "checkpoints" / "latest").read_text().strip() == "step_000003"
    assert {p.name for p in (run / "checkpoints").glob("step_*")} == {"step_000002", "step_000003"}


def test_resume_auto_after_a_kill_before_the_first_checkpoint_logs_every_step_once(tmp_path, tiny_models, tiny_data):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    config = _config(
        tmp_path,
        tiny_models,
        tiny_data,
        val=True,
        cohort={"steps": 4},
        logging={"eval_on_start": True, "tensorboard": True},  # checkpoint only at the end
    )
    raw = yaml.safe_load(config.read_text())
    raw["resume"] = "auto"
    config.write_text(yaml.safe_dump(raw))
    run = tmp_path / "run"
    proc = _corl("train", str(config), cwd=tmp_path)
    deadline = time.monotonic() + 600
    while not (run / "metrics.jsonl").exists() or 2 not in _steps(run):
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)  # no cleanup, no checkpoint yet
    proc.wait()
    assert not list((run / "checkpoints").glob("step_*")) and _steps(run)[:2] == [1, 2]

    code, output = _run("train", str(config), cwd=tmp_path)  # requeued: the same command
    assert code == 0, output
    assert _steps(run) == [1, 2, 3, 4]
    assert _steps(run, "val") == [0, 4]  # before the first step, and after the last
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("agent0/reward_mean")] == [1, 2, 3, 4]
    assert [e.step for e in events.Scalars("agent0/val_accuracy")] == [0, 4]


def test_a_hand_edited_config_yaml_does_not_bypass_the_resume_check(tmp_path, tiny_models, tiny_data):
    config = _config(tmp_path, tiny_models, tiny_data, cohort={"steps": 1})
    run = tmp_path / "run"
    code, output = _run("train", str(config), cwd=tmp_path)
    assert code == 0, output
    started = (run / "config.yaml").read_text()
    edited = yaml.safe_load(started)
    edited["agents"][0]["lr"] = 0.5  # by hand, then --resume reads it
    (run / "config.yaml").write_text(yaml.safe_dump(edited, sort_keys=False))
    code, output = _run("train", "--resume", str(run), "--set", "cohort.steps=2", cwd=tmp_path)
    assert code == 2, output
    assert "cannot resume: the configuration differs" in output and "agents.0.lr: 0.001 -> 0.5" in output, output
    assert _steps(run) == [1]
    # what may change on resume still may, in config.yaml too
    edited["agents"][0]["lr"] = 0.001
    edited["cohort"]["steps"] = 2
    (run / "config.yaml").write_text(yaml.safe_dump(edited, sort_keys=False))
    code, output = _run("train", "--resume", str(run), cwd=tmp_path)
    assert code == 0, output
    assert _steps(run) == [1, 2]


@pytest.mark.parametrize("folder", ["/proc", "/proc/corl-run", "/sys/corl-run"])
def test_an_output_folder_that_takes_no_files_is_a_clear_input_error(tmp_path, tiny_models, tiny_data, folder):
    config = _config(tmp_path, tiny_models, tiny_data)
    code, output = _run("train", str(config), "-o", folder, cwd=tmp_path)
    assert code == 2, output
    verb = "written" if folder == "/proc" else "created"
    root = "/" + folder.split("/")[1]
    assert f"output directory '{folder}' cannot be {verb}: '{root}' does not take new files" in output, output
    assert "disk space" not in output


def test_a_run_folder_in_use_is_refused_in_one_line_and_left_as_it_was(tmp_path, tiny_models, tiny_data):
    # a double requeue: the first job holds the folder (as a running `corl train` does) when the
    # second, the same command with --resume auto, arrives; it must not get in beside it
    config = _config(tmp_path, tiny_models, tiny_data, cohort={"steps": 2})
    run = tmp_path / "run"
    first = lock_run_folder(run)
    before = _snapshot(run)
    code, output = _run("train", str(config), "-o", str(run), "--resume", "auto", cwd=tmp_path)
    assert code == 2, output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "is in use by another corl run (pid " in errors[0] and "-o NEW_DIR" in errors[0], output
    assert f"pid {os.getpid()} on " in output and "Traceback" not in output
    assert _snapshot(run) == before  # nothing written
    first.release()  # the first job ends (every run of this file takes and releases the lock the same way)
    assert (run / LOCK).read_text() == ""


def test_a_new_runs_record_is_created_exclusively(tmp_path, cfg):
    run = tmp_path / "run"
    run.mkdir()
    write_record(run, run_record(cfg), exclusive=True)
    with pytest.raises(ConfigError, match="another run wrote its record first"):
        write_record(run, run_record(cfg), exclusive=True)
    assert [p.name for p in run.iterdir()] == [RECORD]  # no temporary file left


# -- the decision table, without loading a model -----------------------------------------------------------


@pytest.fixture
def cfg(tmp_path, tiny_models, tiny_data):
    return validate_config(tiny_config(tmp_path, tiny_models, tiny_data))


def _partial_run(run: Path, cfg) -> None:
    """A run killed after two steps, before its first checkpoint."""
    run.mkdir()
    write_record(run, run_record(cfg))
    (run / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "kind": "train"}) + "\n" for s in (0, 1)))


def test_entering_a_run_folder(tmp_path, cfg):
    run = tmp_path / "run"
    fresh = enter_run_folder(cfg, run)
    assert fresh.checkpoint is None and not fresh.redo and fresh.fresh
    assert (run / LOCK).is_file() and fresh.lock is not None  # entered under the folder's lock
    fresh.release()
    (run / "notes.txt").write_text("mine")  # not a run's file: the folder may take a run
    assert not enter_run_folder(cfg, run).redo
    shutil.rmtree(run)

    _partial_run(run, cfg)
    with pytest.raises(ConfigError, match=r"already holds a run \(config.yaml, .corl_run.json, metrics.jsonl\)"):
        enter_run_folder(cfg, run)
    # --resume of a run stopped before its first checkpoint: the same run again, from step 0 (what a
    # stopped run's message says to type); of a folder with nothing of a run, refused
    assert enter_run_folder(cfg, run, resume=True).redo
    with pytest.raises(FileNotFoundError, match=r"no run to resume in .*empty \(no checkpoint, no config.yaml\)"):
        enter_run_folder(cfg, tmp_path / "empty", resume=True)
    (tmp_path / "bare").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no run to resume in .*bare"):
        enter_run_folder(cfg, tmp_path / "bare", resume=True)
    assert sorted(p.name for p in (tmp_path / "bare").iterdir()) == []  # left as it was
    # resume: auto, or a torchrun restart of the job that started it: the same run again, from step 0
    auto = validate_config({**cfg.model_dump(mode="json"), "resume": "auto", "cohort": {**cfg.cohort.model_dump(), "steps": 9}})
    assert enter_run_folder(auto, run).redo
    assert enter_run_folder(cfg, run, restarted=True).redo
    # ... but not another run's rows
    other = validate_config({**auto.model_dump(mode="json"), "grpo": {"beta": 0.1}})
    with pytest.raises(ConfigError, match=r"cannot resume: the configuration differs .*\n  grpo.beta: 0.0 -> 0.1"):
        enter_run_folder(other, run)


def test_the_runs_record_is_what_a_resume_compares_with_and_an_edit_of_it_is_named(tmp_path, cfg):
    run = tmp_path / "run"
    _partial_run(run, cfg)
    edited = yaml.safe_load((run / "config.yaml").read_text())
    edited["agents"][0]["lr"] = 0.5
    (run / "config.yaml").write_text(yaml.safe_dump(edited))  # config.yaml is for people: not read
    assert enter_run_folder(cfg, run, restarted=True).redo
    record = json.loads((run / RECORD).read_text())
    record["config"]["agents"][0]["lr"] = 0.5  # the record by hand: its sha256 tells
    (run / RECORD).write_text(json.dumps(record))
    with pytest.raises(ConfigError, match=r"\.corl_run\.json: the run's record was edited or damaged"):
        enter_run_folder(cfg, run, restarted=True)


def test_a_resume_takes_null_for_the_default_answer_column_of_a_label_free_run(tmp_path, cfg):
    # A run records data.answer_field null when its train file has no answer column (corl.trainer.setup
    # .answers_as_found); one started before that recorded 'answer', and under torchrun the folder is
    # entered before the data is read. For a label source that reads no answers the two are one run:
    # the answers feed only diagnostics, and validation reads the column 'answer' either way.
    run = tmp_path / "run"
    _partial_run(run, cfg)  # recorded: answer_field 'answer'
    raw = cfg.model_dump(mode="json")
    unlabeled = validate_config({**raw, "data": {**raw["data"], "answer_field": None}})
    assert enter_run_folder(unlabeled, run, restarted=True).redo
    other = validate_config({**raw, "data": {**raw["data"], "answer_field": "solution"}})
    with pytest.raises(ConfigError, match=r"data.answer_field: 'answer' -> 'solution'"):  # another column: refused
        enter_run_folder(other, run, restarted=True)
