"""`corl train` and `corl eval` run as a user would: tiny models, a few steps."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file
from typer.testing import CliRunner

from corl.cli import app
from corl.tracking.metrics import read_metrics
from tests.helpers import SHARED_DATA, tiny_config

runner = CliRunner()


def write_config(tmp_path, raw) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def changed(a: Path, b: Path) -> bool:
    wa, wb = weights(a), weights(b)
    return any(not torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.parametrize(
    "label_source, agents",
    [("peer", 2), ("peer", 3), ("self", 1), ("truth", 2)],
    ids=["co-rl-2", "co-rl-3", "ttrl", "gt-reward"],
)
def test_train_cli_updates_every_agent_and_writes_metrics(tmp_path, tiny_models, tiny_data, label_source, agents):
    raw = tiny_config(tmp_path, tiny_models, tiny_data, agents=agents, cohort={"label_source": label_source})
    if label_source == "truth":
        # The fixture models answer with a digit 0-3: keep the problems whose true answer is
        # one, so that ground-truth rewards are not all 0 (which would mean no update at all).
        rows = [json.loads(line) for line in tiny_data["train"].read_text().splitlines()]
        reachable = [r for r in rows if r["answer"] in {"0", "1", "2", "3"}]
        assert len(reachable) >= 4
        (tmp_path / "reachable.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reachable))
        raw["data"]["train"] = str(tmp_path / "reachable.jsonl")
    result = runner.invoke(app, ["train", str(write_config(tmp_path, raw))])
    assert result.exit_code == 0, result.output
    run = tmp_path / "run"
    records = read_metrics(run, "train")
    assert [r["step"] for r in records] == [1, 2, 3]
    names = [a["name"] for a in raw["agents"]]
    for name, agent in zip(names, raw["agents"]):
        assert changed(Path(agent["model"]), run / "checkpoints" / "step_000003" / name), f"{name} did not change"
        assert sum(r[f"{name}/optimizer_steps"] for r in records) >= 1
        assert all(0.0 <= r[f"{name}/reward_mean"] <= 1.0 for r in records)
        assert f"{name}/pseudo_label_accuracy" in records[0] or records[0][f"{name}/labeled_fraction"] == 0
    if agents >= 2:
        assert f"agreement/{names[0]}~{names[1]}" in records[0]
    if label_source == "truth":  # GT-Reward's labels are the answers themselves
        assert all(r[f"{names[0]}/pseudo_label_accuracy"] == 1.0 for r in records)
    val = read_metrics(run, "val")
    assert val and f"{names[0]}/val_accuracy" in val[-1]
    assert list((run / "tensorboard").iterdir())
    assert yaml.safe_load((run / "config.yaml").read_text())["cohort"]["label_source"] == label_source


def test_train_cli_reports_bad_config_values(tmp_path, tiny_models, tiny_data):
    raw = tiny_config(tmp_path, tiny_models, tiny_data)
    result = runner.invoke(app, ["train", str(write_config(tmp_path, raw)), "--set", "cohort.samples_per_prompt=0"])
    assert result.exit_code == 2
    assert "cohort.samples_per_prompt" in result.output


def test_eval_cli_scores_checkpoints_and_pools_votes(tiny_models, tiny_data):
    models = [str(tiny_models["llama-char"]), str(tiny_models["qwen2-bpe"])]
    result = runner.invoke(
        app,
        [
            "eval",
            *models,
            "--data",
            str(tiny_data["test"]),
            "--k",
            "3",
            "--max-new-tokens",
            "12",
            "--template",
            "{problem}\n",
            "--instruction",
            "",
            "--group-by",
            "type",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    # rows are named by labels that tell them apart (issue 29), each with the path it came from
    assert set(out["sources"].values()) == set(models) and set(out["models"]) == set(out["sources"]) and out["n"] == 12
    for entry in out["models"].values():
        assert 0 <= entry["avg@3"] <= entry["pass@3"] <= 1
        assert set(entry["greedy_by_type"]) <= {"arith", "linear", "mod", "digitsum"}
    assert 0 <= out["pooled_maj@6"] <= 1


@pytest.mark.skipif(not (SHARED_DATA / "math500").is_dir(), reason="needs ../shared/data beside the checkout")
def test_math500_plumbing_end_to_end(tmp_path, tiny_models):
    """Real MATH-500 rows through the default prompt; tiny models answer wrongly, but
    every stage (loading, template, rollout, extraction, labels, diagnostics) runs."""
    raw = {
        "output_dir": str(tmp_path / "run"),
        "agents": [{"name": "a", "model": str(tiny_models["llama-char"])}, {"name": "b", "model": str(tiny_models["qwen2-bpe"])}],
        "data": {
            "train": str(SHARED_DATA / "math500" / "test.jsonl"),
            "max_rows": 8,
            "val": str(SHARED_DATA / "math500" / "test.jsonl"),
            "val_size": 4,
        },
        "cohort": {"steps": 2, "prompts_per_step": 2, "samples_per_prompt": 2, "max_new_tokens": 8},
        "logging": {"progress": False, "tensorboard": False},
    }
    result = runner.invoke(app, ["train", str(write_config(tmp_path, raw))])
    assert result.exit_code == 0, result.output
    records = read_metrics(tmp_path / "run", "train")
    assert len(records) == 2 and "a/majority_accuracy" in records[0]


def _cli(*args, cwd):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "corl", *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


def test_kill_and_resume_matches_an_uninterrupted_run(tmp_path, tiny_models, tiny_data):
    raw = tiny_config(
        tmp_path, tiny_models, tiny_data, cohort={"steps": 6}, logging={"checkpoint_every": 2, "tensorboard": False}
    )
    config = write_config(tmp_path, raw)
    # uninterrupted reference
    full = _cli("train", str(config), "-o", str(tmp_path / "full"), cwd=tmp_path)
    assert full.wait(timeout=600) == 0, full.stdout.read().decode()
    # a run killed (SIGKILL: no cleanup) once its step-2 checkpoint exists
    run = tmp_path / "killed"
    proc = _cli("train", str(config), "-o", str(run), cwd=tmp_path)
    deadline = time.time() + 600
    while not (run / "checkpoints" / "latest").exists():
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed = _cli("train", "--resume", str(run), cwd=tmp_path)
    assert resumed.wait(timeout=600) == 0, resumed.stdout.read().decode()

    steps = [r["step"] for r in read_metrics(run, "train")]
    assert steps == list(range(1, 7)), steps  # every step exactly once
    for name in ("agent0", "agent1"):
        a = weights(tmp_path / "full" / "checkpoints" / "step_000006" / name)
        b = weights(run / "checkpoints" / "step_000006" / name)
        assert all(torch.equal(a[k], b[k]) for k in a), f"{name}: resumed weights differ from the uninterrupted run"
    ref = {r["step"]: r for r in read_metrics(tmp_path / "full", "train")}
    for r in read_metrics(run, "train"):
        assert r["agent0/reward_mean"] == ref[r["step"]]["agent0/reward_mean"]


def test_a_misspelt_suite_is_refused_before_training(tmp_path, tiny_models, tiny_data):
    """suite.name runs after the last step: a typo must stop the run before the first (exit 2, one line)."""
    raw = tiny_config(tmp_path, tiny_models, tiny_data)
    raw["suite"] = {"name": "amc23,gsm8kk"}
    done = subprocess.run(
        [sys.executable, "-m", "corl", "train", str(write_config(tmp_path, raw))], capture_output=True, text=True, timeout=300
    )
    said = " ".join(done.stderr.split())
    assert done.returncode == 2 and "suite.name: unknown benchmark(s) gsm8kk" in said and "Traceback" not in said, said
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_an_unlabeled_run_killed_and_ctrl_c_d_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path, tiny_models, tiny_data):
    """The Done-when of issue 51: a train file without answers, SIGKILLed after its step-2
    checkpoint, resumed with nothing to set (the run recorded its data as unlabeled), Ctrl-C'd
    (SIGINT to the process group, as a terminal sends it) with a grace far shorter than a step
    (Ctrl-C has no deadline), resumed again: the same weights as the uninterrupted run, exactly."""
    rows = [json.loads(line) for line in tiny_data["train"].read_text().splitlines()]
    unlabeled = tmp_path / "unlabeled.jsonl"
    unlabeled.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "answer"}) + "\n" for r in rows))
    raw = tiny_config(tmp_path, tiny_models, {**tiny_data, "train": unlabeled}, cohort={"steps": 6})
    raw["logging"] |= {"checkpoint_every": 2, "tensorboard": False}
    raw["distributed"] = {"preempt_grace_s": 0.01}  # SIGTERM's deadline; none for Ctrl-C
    config = write_config(tmp_path, raw)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "400"}

    def start(*args) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "corl", "train", *args],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    full = start(str(config), "-o", "full")
    assert full.wait(timeout=600) == 0, full.stdout.read()
    assert yaml.safe_load((tmp_path / "full" / "config.yaml").read_text())["data"]["answer_field"] is None

    run = tmp_path / "run"
    proc = start(str(config), "-o", str(run))
    deadline = time.time() + 600
    while not (run / "checkpoints" / "latest").exists():
        assert proc.poll() is None, proc.stdout.read()
        assert time.time() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()

    proc = start("--resume", str(run))  # nothing to set: the run says its data is unlabeled
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("step 3/6"):
            os.killpg(proc.pid, signal.SIGINT)
    output = "".join(lines)
    assert proc.wait(timeout=60) == 130, output
    # the signal follows step 3's line: the run may have passed that step's boundary already
    stopped = re.search(
        rf"stopped \(Ctrl-C\) after step ([34]): checkpoint {run}/checkpoints/step_00000(\d) written; "
        rf"continue with corl train --resume {run}\n",
        output,
    )
    assert stopped and stopped.group(1) == stopped.group(2), output

    resumed = start("--resume", str(run))
    assert resumed.wait(timeout=600) == 0, resumed.stdout.read()
    assert [r["step"] for r in read_metrics(run, "train")] == list(range(1, 7))  # every step once
    for name in ("agent0", "agent1"):
        a = weights(tmp_path / "full" / "checkpoints" / "step_000006" / name)
        b = weights(run / "checkpoints" / "step_000006" / name)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), f"{name}: resumed weights differ"
