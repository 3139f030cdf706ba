"""`corl train` as a new user meets it in a log file (no TTY, 80 columns): a line per step and per
validation, Ctrl-C that saves, a resume that says where it resumed, a summary with the next
command, steps counted from 1 in every record, and input errors in one line with exit 2."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from corl.cli import app
from corl.tracking.metrics import read_metrics
from tests.helpers import tiny_config

ENV = {**os.environ, "COLUMNS": "80", "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}


def corl(*args: str, cwd: Path, stop_at: str | None = None) -> tuple[int, str]:
    """Run `corl ARGS` with its output in a pipe (as under SLURM); SIGINT (Ctrl-C) once a line starts with `stop_at`."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "corl", *args], cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if stop_at is not None and line.startswith(stop_at):
            proc.send_signal(signal.SIGINT)
            stop_at = None
    return proc.wait(timeout=600), "".join(lines)


@pytest.fixture(scope="module")
def console_run(tmp_path_factory, tiny_models, tiny_data):
    """A 3-step run stopped by Ctrl-C after its first step line, then resumed to 4 steps."""
    root = tmp_path_factory.mktemp("console")
    logging = {"eval_every": 1, "select": "truth", "progress": True, "tensorboard": True}
    raw = tiny_config(root, tiny_models, tiny_data, cohort={"steps": 3}, logging=logging)
    config = root / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    first = corl("train", str(config), "-o", "run", cwd=root, stop_at="step 1/3")
    resumed = corl("train", "--resume", "run", "--set", "cohort.steps=4", cwd=root)
    return root / "run", first, resumed


def test_ctrl_c_finishes_the_step_saves_a_checkpoint_and_says_how_to_resume(console_run):
    run, (code, output), _ = console_run
    assert code == 130, output
    stopped = re.search(
        r"stopped \(Ctrl-C\) after step (\d): checkpoint (\S+) written; continue with corl train --resume run", output
    )
    assert stopped, output
    done = int(stopped.group(1))
    assert stopped.group(2) == f"run/checkpoints/step_{done:06d}"  # the resume starts from it (the next test)
    assert "Traceback" not in output


def test_without_a_tty_every_step_and_validation_is_a_line_and_the_counter_is_readable(console_run):
    _, (_, first), (code, output) = console_run
    assert code == 0, output
    assert "…" not in first + output  # nothing cut to fit 80 columns
    assert re.search(r"^step 1/3  agent0 reward \d\.\d\d .*\| agent1 reward", first, re.M), first
    assert re.search(r"^val after step 1: agent0 \d\.\d{3} \| agent1 \d\.\d{3} \| cohort \d\.\d{3}$", first, re.M), first
    done = int(re.search(r"after step (\d): checkpoint", first).group(1))
    assert f"resumed from step {done} (run/checkpoints/step_{done:06d}); steps {done + 1}-4 to go" in output
    shown = [int(s) for s in re.findall(r"^step (\d+)/4 ", output, re.M)]
    assert shown == list(range(done + 1, 5)), output  # never "step 5/4"
    assert re.search(r"^val after step 4: ", output, re.M), output


def test_the_summary_names_each_agents_accuracy_the_best_checkpoint_and_the_next_command(console_run):
    run, _, (_, output) = console_run
    summary = output[output.index("done: run") :]
    last = read_metrics(run, "val")[-1]
    assert f"  agent0       val_accuracy {last['agent0/val_accuracy']:.3f} (step 4)" in summary
    assert re.search(r"agent1 +val_accuracy \d\.\d{3} \(step 4\), selected \d\.\d{3} \(step \d, best/\)", summary), summary
    assert "checkpoints: run/checkpoints/ (latest: step_000004)" in summary
    assert "next: corl eval run --step best" in summary


def test_steps_count_from_1_in_metrics_checkpoints_and_tensorboard(console_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run, _, _ = console_run
    train = read_metrics(run, "train")
    assert [r["step"] for r in train] == [1, 2, 3, 4]  # each step once, across the interruption
    assert [r["step"] for r in read_metrics(run, "val")] == [1, 2, 3, 4]
    assert (run / "checkpoints" / "step_000004" / "state.json").is_file()
    assert all(r["agent0/lr"] == 1e-3 and r["time/tokens_per_s"] > 0 for r in train)
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert "agent0/reward_mean" in tags and "agent0/val_accuracy" in tags  # the names metrics.jsonl uses
    assert not [t for t in tags if t.startswith(("train/", "val/"))]
    assert [e.step for e in events.Scalars("agent0/reward_mean")][-1] == 4


def test_eval_step_best_and_the_best_folder_keep_the_runs_prompt(console_run, tiny_data, tmp_path):
    import shutil

    from corl.evaluation.run_targets import TargetError, resolve_targets, run_defaults

    run, _, _ = console_run
    best = resolve_targets([str(run)], "best")
    assert [t.checkpoint for t in best] == [run / "best", run / "best"]
    alone = resolve_targets([str(run / "best")])
    taken, note = run_defaults(alone, frozenset({"data"}))
    assert taken["template"] == "{problem}\n" and taken["instruction"] == "" and "the run's prompt" in note
    moved = tmp_path / "moved"
    shutil.copytree(run / "best", moved)
    taken, note = run_defaults(resolve_targets([str(moved)]), frozenset({"data"}))
    assert taken == {} and "a checkpoint outside its run folder" in note and "--template" in note
    with pytest.raises(TargetError, match="has no best-label_free/ \\(it has best\\)"):
        resolve_targets([str(run)], "best-label_free")


def test_an_old_run_logged_from_step_0_is_renumbered_once_on_resume(tmp_path):
    from corl.tracking.step_numbering import renumber_old_run

    rows = [{"step": -1, "kind": "val"}, {"step": 0, "kind": "train"}, {"step": 1, "kind": "train"}, {"step": 1, "kind": "val"}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 2, "ki')  # torn line
    (tmp_path / "wandb.json").write_text(json.dumps({"id": "abc", "last_step": {"train": 1, "val": 1}}))
    assert renumber_old_run(tmp_path)
    assert [(r["step"], r["kind"]) for r in read_metrics(tmp_path)] == [(0, "val"), (1, "train"), (2, "train"), (2, "val")]
    assert json.loads((tmp_path / "wandb.json").read_text())["last_step"] == {"train": 2, "val": 2}
    assert not renumber_old_run(tmp_path)  # once


runner = CliRunner()


def _train_error(tmp_path, tiny_models, tiny_data, *sets: str, env: dict | None = None):
    raw = tiny_config(tmp_path, tiny_models, tiny_data)
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    result = runner.invoke(app, ["train", str(config), *[a for s in sets for a in ("--set", s)]], env=env)
    return result.exit_code, result.output.strip()


@pytest.mark.parametrize(
    "override, message",
    [
        ("cohort.step=3", "cohort.step: unknown key; did you mean cohort.steps or cohort.stop?"),
        ("grpo.lr=1e-5", "grpo.lr: unknown key: the learning rate is per agent: agents[].lr"),
        (
            "agents.0.model=tiny:lama-char",
            "agents.0.model (agent 'agent0'): unknown tiny family 'lama-char'; did you mean llama-char?",
        ),
    ],
)
def test_a_mistyped_key_or_family_is_one_line_with_exit_2(tmp_path, tiny_models, tiny_data, override, message):
    code, output = _train_error(tmp_path, tiny_models, tiny_data, override)
    assert code == 2 and message in output and len(output.splitlines()) == 1, output
    assert not (tmp_path / "run").exists()


def test_a_missing_wandb_key_is_found_before_anything_is_written(tmp_path, tiny_models, tiny_data, monkeypatch):
    pytest.importorskip("wandb")
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    code, output = _train_error(tmp_path, tiny_models, tiny_data, "logging.report_to=[wandb]")
    assert code == 2 and "no W&B API key is set" in output and "WANDB_MODE=offline" in output, output
    assert not (tmp_path / "run").exists()  # the next start is not refused by a half-made folder
