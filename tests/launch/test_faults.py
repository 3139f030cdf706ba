"""Bad configurations and bad inputs fail before any model is loaded, with a message that
names the option, file, row or agent and says what to do."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from corl.checkpoints.checkpoint import CheckpointError
from corl.config import ConfigError, validate_config
from corl.tracking.metrics import MetricsLog, read_metrics
from corl.trainer import CohortTrainer
from tests.helpers import tiny_config

BASE = {"agents": [{"name": "a", "model": "m"}, {"name": "b", "model": "m"}], "data": {"train": "x.jsonl"}}


@pytest.mark.parametrize("label_source", ["peer", "self"])
def test_one_sample_per_prompt_is_refused(label_source):
    with pytest.raises(ConfigError, match=r"cohort.samples_per_prompt: must be at least 2.*every advantage is 0.*\(got 1\)"):
        validate_config({**BASE, "cohort": {"samples_per_prompt": 1, "label_source": label_source}})
    assert validate_config({**BASE, "cohort": {"samples_per_prompt": 2}}).cohort.samples_per_prompt == 2


# -- bad input, before any model loads -------------------------------------------------------------


def test_a_non_utf8_byte_names_the_file_and_line(tmp_path):
    from corl.data.rows import DataError, load_rows

    good = json.dumps({"id": "a", "problem": "1+1", "answer": "2"})
    bad = json.dumps({"id": "b", "problem": "caf\u00e9", "answer": "3"}).replace("\\u00e9", "\xe9")
    for suffix, body in {
        ".jsonl": (good + "\n" + bad + "\n").encode("latin-1"),
        ".json": ("[" + good + ",\n" + bad + "]").encode("latin-1"),
        ".csv": "id,problem\na,1+1\nb,caf\xe9\n".encode("latin-1"),
    }.items():
        path = tmp_path / f"rows{suffix}"
        path.write_bytes(body)
        with pytest.raises(
            DataError, match=rf"rows{suffix}' line {3 if suffix == '.csv' else 2}: byte \d+ \(0xe9\) is not UTF-8"
        ):
            load_rows(str(path))


def test_a_config_that_is_a_folder_or_not_utf8_is_named(tmp_path):
    from corl.config import load_config

    with pytest.raises(ConfigError, match=r"config file '.*' is a folder; give the YAML file itself"):
        load_config(tmp_path)
    # byte 28: 11 of "agents: []\n", 17 of "data: {train: caf"
    (tmp_path / "run.yaml").write_bytes("agents: []\ndata: {train: caf\xe9.jsonl}\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"run.yaml line 2: byte 28 \(0xe9\) is not UTF-8; save the file as UTF-8"):
        load_config(tmp_path / "run.yaml")


def test_a_missing_model_names_the_agent(tmp_path, tiny_models, tiny_data, monkeypatch):
    raw = tiny_config(tmp_path, tiny_models, tiny_data)
    raw["agents"][1]["model"] = str(tmp_path / "no" / "such" / "model")
    with pytest.raises(ConfigError, match=r"agents.1.model \(agent 'agent1'\): model folder .*no/such/model' not found"):
        CohortTrainer(validate_config(raw))
    # a hub id offline: refused by the cache lookup, before any hub request and its retries
    # (tests/models/test_model_source.py: no request reaches a hub for what cannot be on it)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    raw["agents"][1]["model"] = "corl-nobody/no-such-model"
    with pytest.raises(
        ConfigError, match=r"agents.1.model \(agent 'agent1'\): 'corl-nobody/no-such-model' is neither .* HF_HUB_OFFLINE"
    ):
        CohortTrainer(validate_config(raw))


def test_an_output_directory_under_a_file_is_refused(tmp_path, tiny_models, tiny_data):
    (tmp_path / "plain").write_text("not a folder")
    raw = tiny_config(tmp_path, tiny_models, tiny_data)
    raw["agents"][0]["model"] = str(tmp_path / "missing")  # the run directory is checked first: nothing loads
    with pytest.raises(ConfigError, match=r"output directory .*plain/run' cannot be created: .*plain' is a file"):
        CohortTrainer(validate_config(raw), tmp_path / "plain" / "run")


def test_fewer_rows_than_prompts_per_step_warns(tmp_path, tiny_models, tiny_data):
    one = tmp_path / "one.jsonl"
    one.write_text(tiny_data["train"].read_text().splitlines()[0] + "\n")
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"prompts_per_step": 16, "steps": 1})
    raw["data"]["train"] = str(one)
    raw["agents"][0]["model"] = str(tmp_path / "missing")  # the warning comes before any model loads
    warning = "data.train has 1 row but cohort.prompts_per_step is 16: every batch repeats rows"
    with pytest.warns(UserWarning, match=warning), pytest.raises(ConfigError):
        CohortTrainer(validate_config(raw))


# -- a small or full disk: a real tmpfs (needs root to mount) ---------------------------------------


def test_a_disk_too_small_for_a_checkpoint_is_refused_up_front(tmp_path, tiny_models, tiny_data, small_disk):
    disk = small_disk(1)
    raw = tiny_config(tmp_path, tiny_models, tiny_data, logging={"tensorboard": False})
    with pytest.raises(
        CheckpointError, match=r"not enough disk space for 1 checkpoint of every agent in .*: about [\d.]+ MiB needed"
    ):
        CohortTrainer(validate_config(raw), disk / "run")
    assert not (disk / "run").exists()  # stopped before anything was written: no folder holding only .corl_lock


def test_an_error_message_prints_user_text_as_it_is(tmp_path):
    # rich would print ":train:" as an emoji: "tiny:train:2000" came out as "tiny\U0001f68b2000"
    raw = {"agents": [{"name": n, "model": "/nowhere/tiny:train:2000"} for n in "ab"], "data": {"train": "x.jsonl"}}
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    done = subprocess.run([sys.executable, "-m", "corl", "train", str(config)], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and "'/nowhere/tiny:train:2000' not found" in done.stderr, done.stderr


def test_not_enough_disk_space_is_an_input_error(tmp_path, tiny_models, tiny_data, small_disk):
    # nothing ran: exit 2 (an input error, like an output_dir that takes no files), not 1 (a run that failed)
    disk = small_disk(1)
    raw = tiny_config(tmp_path, tiny_models, tiny_data, logging={"tensorboard": False})
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    done = subprocess.run(
        [sys.executable, "-m", "corl", "train", str(config), "-o", str(disk / "run")], capture_output=True, text=True
    )
    said = " ".join(done.stderr.split())
    assert done.returncode == 2 and "not enough disk space for 1 checkpoint" in said and "Traceback" not in said, said


def test_a_full_disk_during_a_checkpoint_leaves_no_half_written_folder(tmp_path, tiny_models, tiny_data, small_disk):
    disk = small_disk(32)
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"steps": 1}, logging={"tensorboard": False})
    raw["data"].pop("val")
    trainer = CohortTrainer(validate_config(raw), disk / "run")

    def fill(step, metrics):  # something else fills the disk during the run: 64 KiB stay free
        free = shutil.disk_usage(disk).free
        (disk / "filler").write_bytes(b"\0" * (free - 64 * 1024))

    with pytest.raises(
        CheckpointError, match=r"could not write checkpoint .*step_000001: the disk is full.*previous checkpoint is intact"
    ):
        trainer.train(on_step=fill)
    assert not list((disk / "run" / "checkpoints").glob(".tmp_step_*"))
    assert not list((disk / "run" / "checkpoints").glob("step_*"))


def test_a_full_disk_is_named_though_removing_the_half_written_folder_frees_it(small_disk):
    # torch.save names no errno ("PytorchStreamWriter failed writing file ...: file write failed",
    # inline_container.cc); the disk was full when it failed, though removing the 1.5 MiB written before
    # frees them again: the documented line, not torch's traceback
    from corl.checkpoints.checkpoint import _cleaned_up_on_failure

    disk = small_disk(3)
    tmp, final = disk / "checkpoints" / ".tmp_step_000001", disk / "checkpoints" / "step_000001"
    (tmp / "agent0").mkdir(parents=True)
    (tmp / "agent0" / "model.safetensors").write_bytes(b"\0" * (3 * 2**19))  # an agent's 1.5 MiB, written
    full = r"step_000001: the disk is full \(0\.\d MiB free\)"
    with pytest.raises(CheckpointError, match=full), _cleaned_up_on_failure(tmp, final):
        torch.save(torch.zeros(2**20), tmp / "state.pt")  # 4 MiB more on a 3 MiB disk
    assert not tmp.exists() and shutil.disk_usage(disk).free > 2**20


def test_a_full_disk_while_a_row_is_written_is_one_line_and_leaves_no_torn_row(tmp_path, tiny_models, tiny_data, small_disk):
    # issue 51: exit 1, three chained tracebacks and a torn last row. After step 1 something fills the disk
    # to its last byte (test-only CORL_TEST_FAULT): the next row of metrics.jsonl cannot be written whole
    disk = small_disk(32)
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"steps": 6})  # TensorBoard on: its events too
    raw["data"].pop("val")
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    env = {**os.environ, "CORL_TEST_FAULT": "agent0:full:1", "COLUMNS": "400"}
    done = subprocess.run(
        [sys.executable, "-m", "corl", "train", str(config), "-o", str(disk / "run")], capture_output=True, text=True, env=env
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1 and "Traceback" not in output, output
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "metrics.jsonl: the disk is full" in errors[0], output
    assert f"corl train --resume {disk / 'run'}" in errors[0], output
    text = (disk / "run" / "metrics.jsonl").read_text()
    assert text.endswith("\n") and [json.loads(line)["step"] for line in text.splitlines()] == list(
        range(1, text.count("\n") + 1)
    )


def test_config_yaml_is_written_whole_or_not_at_all(tmp_path):
    # cut short (here by a file-size limit, as by a kill or a full disk) it is not there, never half
    # there: a half config.yaml would be the one `corl train --resume RUN` reads
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200)); from corl.config import dump_config, "
        "validate_config; dump_config(validate_config({'agents': [{'name': n, 'model': 'm'} for n in 'ab'], 'data': {'train': 'x'}}), "
        "sys.argv[1] + '/config.yaml')"
    )
    failed = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert failed.returncode != 0 and "File too large" in failed.stderr, failed.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_failure_inside_the_resume_rewrite_of_metrics_keeps_every_row(tmp_path):
    # the resume's rewrite of metrics.jsonl stopped half-way (here a file-size limit, as a kill or a full
    # disk would): the old rows stay whole, never a truncated file that a later resume would call done
    rows = "".join(json.dumps({"step": s, "kind": "train", "pad": "x" * 100}) + "\n" for s in range(1, 11))
    (tmp_path / "metrics.jsonl").write_text(rows)
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (300, 300)); from corl.tracking.metrics import MetricsLog; "
        "MetricsLog(sys.argv[1], tensorboard=False, resume_step=6)"
    )
    failed = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert failed.returncode != 0 and "File too large" in failed.stderr, failed.stderr
    assert (tmp_path / "metrics.jsonl").read_text() == rows
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.jsonl"]  # no temporary file left
    MetricsLog(tmp_path, tensorboard=False, resume_step=6).close()
    assert [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3, 4, 5]


def test_a_kill_while_best_is_published_is_finished_by_the_resume(tmp_path, tiny_models, tiny_data):
    # the checkpoint whose record chooses step S is saved, then the kill comes while RUN/best/ is
    # copied: best/ still holds the other step, .tmp_best/ is half-written, selection.json is stale
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"steps": 2})
    raw["logging"] |= {"eval_every": 1, "select": "truth", "tensorboard": False}
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    run = Path(raw["output_dir"])
    done = subprocess.run([sys.executable, "-m", "corl", "train", str(config)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((run / "selection.json").read_text())
    chosen = record["chosen"]["truth"]["checkpoint_step"]
    other = run / "checkpoints" / f"step_{3 - chosen:06d}"
    shutil.rmtree(run / "best")
    shutil.copytree(other, run / "best")
    (run / ".tmp_best").mkdir()
    (run / ".tmp_best" / "state.pt").write_bytes(b"half")
    (run / "selection.json").write_text(json.dumps({**record, "points": record["points"][:1]}))

    done = subprocess.run([sys.executable, "-m", "corl", "train", "--resume", str(run)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((run / "best" / "state.json").read_text())["step"] == chosen
    assert not (run / ".tmp_best").exists() and not (run / ".old_best").exists()
    assert json.loads((run / "selection.json").read_text()) == record
    assert json.loads((run / "best" / "selection.json").read_text())["chosen"] == record["chosen"]


def test_an_early_stop_is_part_of_its_validation_row(tmp_path, tiny_models, tiny_data):
    # the stop once came as a second (step, val) row after the point's own: one step, one row per kind
    from corl.tracking.metrics import read_metrics

    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"steps": 3}, logging={"tensorboard": False, "eval_every": 1})
    raw["cohort"]["stop"] = {"rule": "plateau", "patience": 1, "min_delta": 10.0}  # no point can improve by 10
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    done = subprocess.run([sys.executable, "-m", "corl", "train", str(config)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stopped early" in done.stdout + done.stderr
    rows = read_metrics(Path(raw["output_dir"]), "val")
    steps = [r["step"] for r in rows]
    assert len(steps) == len(set(steps)) == 2, rows
    assert "stop/early" not in rows[0] and rows[1]["stop/early"] == 1.0 and "agent0/val_accuracy" in rows[1]


# -- a completion cut at the budget --------------------------------------------------------------------


def test_a_truncated_completion_has_no_answer_unless_kept(tmp_path, tiny_models, tiny_data):
    from corl.data.rows import Problem
    from corl.rollout import Rollout

    raw = tiny_config(tmp_path, tiny_models, tiny_data, agents=1, cohort={"label_source": "self"})
    trainer = CohortTrainer(validate_config(raw))
    agent = trainer.agents[0]
    eos = agent.tokenizer.eos_token_id
    # one prompt, K = 2: sample 0 ends with EOS, sample 1 closed a \boxed{} and ran on to the budget
    texts = ["\\boxed{3}", "\\boxed{2} and then"]
    ids = [agent.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
    width = max(len(ids[0]) + 1, len(ids[1]))
    completion = torch.full((2, width), eos)
    completion[0, : len(ids[0]) + 1] = torch.tensor([*ids[0], eos])
    completion[1, : len(ids[1])] = torch.tensor(ids[1][:width])
    mask = torch.zeros(2, width)
    mask[0, : len(ids[0]) + 1] = 1
    mask[1, :] = 1
    rollout = Rollout(
        input_ids=torch.cat([torch.full((2, 1), eos), completion], 1),
        attention_mask=torch.cat([torch.ones(2, 1), mask], 1).long(),
        completion_mask=mask,
        sampling_logprobs=None,
        texts=texts,
        prompt_length=1,
        num_samples=2,
        eos_ids=(eos,),
    )
    assert rollout.truncated.tolist() == [False, True]
    problems = [Problem("p", {"problem": "1+2"})]
    assert trainer._answers(agent, rollout, problems, 2)[0].answers == ("3", None)  # the default: drop
    trainer.cfg.cohort.truncated_answers = "keep"
    assert trainer._answers(agent, rollout, problems, 2)[0].answers == ("3", "2")


@pytest.mark.slow
def test_failure_json_names_the_step_of_the_checkpoint_that_failed(tmp_path, tiny_models, tiny_data, small_disk):
    # issue 51: failure.json's "where" said step 2 beside "checkpoint of step 3". Two ranks (one agent each),
    # a checkpoint after every step; after step 1 the disk fills (64 KiB stay free): step 2's checkpoint fails
    disk = small_disk(64)
    raw = tiny_config(
        tmp_path, tiny_models, tiny_data, cohort={"steps": 3}, logging={"tensorboard": False, "checkpoint_every": 1}
    )
    raw["data"].pop("val")
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    run = disk / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "corl", "train"]
    env = {**os.environ, "CORL_TEST_FAULT": "agent0:fill:1", "OMP_NUM_THREADS": "1", "COLUMNS": "400"}
    done = subprocess.run([*cmd, str(config), "-o", str(run)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "step_000002: the disk is full" in output, output
    failure = json.loads((run / "failure.json").read_text())
    assert failure["where"] == "step 2" and "step_000002: the disk is full" in failure["error"], failure
    assert [r["step"] for r in read_metrics(run, "train")] == [1, 2]
