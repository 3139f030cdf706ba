"""Weights & Biases logging, read back from the files of offline runs (WANDB_MODE=offline, no network).

An offline run writes RUN/wandb/offline-run-*/run-<id>.wandb: W&B's transaction log, a
LevelDB-style log of protobuf `Record`s (wandb 0.31 no longer ships a Python reader for it,
so `wandb_records` below reads the framing: a 7-byte ":W&B" header, then 32 KiB blocks of
chunks with a 7-byte header of crc32, length and type FULL/FIRST/MIDDLE/LAST).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from corl.config import ConfigError, validate_config
from tests.helpers import tiny_config

needs_wandb = pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="needs wandb (pip install 'corl[wandb]')")

BLOCK = 32768
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def wandb_records(path: Path):
    """Every protobuf Record of one .wandb file, in order (a tail torn by a kill ends it)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B transaction log"
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:  # a block's tail too short for a header is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind != 0 and pos + 7 + length > len(data):
            return  # torn
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 0:  # zero padding up to the next block
            pos += BLOCK - pos % BLOCK if pos % BLOCK else 0
            continue
        pending = chunk if kind in (FULL, FIRST) else pending + chunk
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


def offline_runs(run_dir: Path, killed: bool = False) -> list[Path]:
    """The run's offline segments, each read once W&B's service has written all of it: `finish()`
    returns before the service (a process of its own) has flushed a resumed segment's log.
    `killed`: the segments before the last were SIGKILLed (they never get their exit record)."""
    paths = sorted((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    for path in paths[-1:] if killed else paths:
        deadline = time.monotonic() + 120  # a hang guard, not a speed bound
        while not any(r.WhichOneof("record_type") == "exit" for r in wandb_records(path)):
            assert time.monotonic() < deadline, f"{path}: W&B never finished writing it (no exit record)"
            time.sleep(0.2)
    return paths


def history(run_dir: Path, killed: bool = False) -> list[dict]:
    """Every history row of every offline segment of the run (a resume adds a segment)."""
    rows = []
    for path in offline_runs(run_dir, killed):
        for record in wandb_records(path):
            if record.WhichOneof("record_type") == "history":
                rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item})
    return rows


def run_ids(run_dir: Path) -> set[str]:
    ids = set()
    for path in offline_runs(run_dir):
        for record in wandb_records(path):
            if record.WhichOneof("record_type") == "run":
                ids.add(record.run.run_id)
    return ids


def rows_by_kind(rows: list[dict]) -> dict[str, list[int]]:
    """corl's steps of the training rows and of the validation rows, in the order W&B got them."""
    out: dict[str, list[int]] = {"train": [], "val": []}
    for row in rows:
        metrics = [k for k in row if not k.startswith("_") and k not in ("step", "corl/row")]
        if metrics:
            out["val" if all(k.endswith("val_accuracy") for k in metrics) else "train"].append(row["step"])
    return out


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")


def _config(tmp_path, **logging):
    models = {"a": tmp_path / "a", "b": tmp_path / "b"}  # never loaded here
    data = {"train": tmp_path / "train.jsonl", "test": tmp_path / "test.jsonl"}
    raw = tiny_config(tmp_path, models, data, cohort={"steps": 4})
    raw["logging"].update({"report_to": ["jsonl", "wandb"], **logging})
    return validate_config(raw)


def test_report_to_decides_the_sinks_and_keeps_reading_logging_tensorboard(tmp_path):
    cfg = _config(tmp_path)
    assert [cfg.logging.reports_to(s) for s in ("jsonl", "tensorboard", "wandb")] == [True, False, True]
    cfg = _config(tmp_path, report_to=None, tensorboard=False)
    assert [cfg.logging.reports_to(s) for s in ("jsonl", "tensorboard", "wandb")] == [True, False, False]
    cfg = _config(tmp_path, report_to=None)  # the default: jsonl and TensorBoard, as before report_to
    assert [cfg.logging.reports_to(s) for s in ("jsonl", "tensorboard", "wandb")] == [True, True, False]
    with pytest.raises(ConfigError, match="logging.report_to"):
        _config(tmp_path, report_to=["mlflow"])


@needs_wandb
def test_a_resumed_w_and_b_run_holds_every_step_once(tmp_path, offline):
    """The interrupted run sent steps 1-3; its checkpoint had seen 1-2, so the resume redoes step 3:
    W&B must not get it again. Without the guard step 3 would be there twice. (Steps count from 1,
    the validation before training is 0: corl.tracking.step_numbering.)"""
    from corl.tracking.metrics import MetricsLog
    from corl.tracking.wandb_run import wandb_mirrors

    cfg = _config(tmp_path)
    run = tmp_path / "run"
    log = MetricsLog(run, tensorboard=False, mirrors=wandb_mirrors(cfg, run, resumed=False))
    log.log(0, {"agent0/val_accuracy": 0.1}, kind="val")
    for step in range(3):
        log.log(step + 1, {"agent0/loss": float(step), "agent1/loss": 10.0 + step})
    log.log(2, {"agent0/val_accuracy": 0.2}, kind="val")
    log.close()

    log = MetricsLog(run, tensorboard=False, resume_step=3, mirrors=wandb_mirrors(cfg, run, resumed=True))
    for step in range(2, 4):
        log.log(step + 1, {"agent0/loss": float(step), "agent1/loss": 10.0 + step})
    log.log(4, {"agent0/val_accuracy": 0.4, "cohort/val_accuracy": 0.4}, kind="val")
    log.close()

    assert len(offline_runs(run)) == 2  # a resume writes its own offline segment ...
    assert run_ids(run) == {json.loads((run / "wandb.json").read_text())["id"]}  # ... of the same W&B run
    rows = history(run)
    assert rows_by_kind(rows) == {"train": [1, 2, 3, 4], "val": [0, 2, 4]}
    assert [r["agent0/loss"] for r in rows if "agent0/loss" in r] == [0.0, 1.0, 2.0, 3.0]
    assert [r["agent1/loss"] for r in rows if "agent1/loss" in r] == [10.0, 11.0, 12.0, 13.0]
    # the run finished all 4 steps: the final table (agents x last figures) is in the summary files
    tables = list((run / "wandb").glob("offline-run-*/files/media/table/final/agents*.table.json"))
    assert len(tables) == 1
    table = json.loads(tables[0].read_text())
    assert table["columns"] == ["agent", "loss", "val_accuracy"]
    assert table["data"] == [["agent0", 3.0, 0.4], ["agent1", 13.0, None], ["cohort", None, 0.4]]


@needs_wandb
def test_rows_w_and_b_never_stored_are_sent_by_the_resume(tmp_path, offline):
    """A SIGKILL after corl logged the rows of steps 3 and 4 (metrics.jsonl and wandb.json hold them)
    but before W&B's service stored them: the resume sends them from metrics.jsonl, once."""
    from corl.tracking.metrics import MetricsLog
    from corl.tracking.wandb_run import wandb_mirrors

    cfg = _config(tmp_path)
    run = tmp_path / "run"
    log = MetricsLog(run, tensorboard=False, mirrors=wandb_mirrors(cfg, run, resumed=False))
    for step in (1, 2):
        log.log(step, {"agent0/loss": float(step)})
    log.close()
    with (run / "metrics.jsonl").open("a") as f:  # what the killed run wrote beyond what W&B got
        for step in (3, 4):
            f.write(json.dumps({"step": step, "kind": "train", "agent0/loss": float(step)}) + "\n")
    state = json.loads((run / "wandb.json").read_text())
    (run / "wandb.json").write_text(json.dumps({**state, "last_step": {"train": 4}}))  # advanced when corl logged

    log = MetricsLog(run, tensorboard=False, resume_step=5, mirrors=wandb_mirrors(cfg, run, resumed=True))
    log.log(5, {"agent0/loss": 5.0})
    log.close()
    rows = history(run)
    assert [r["agent0/loss"] for r in rows] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert [r["corl/row"] for r in rows] == [0, 1, 2, 3, 4] and [r["step"] for r in rows] == [1, 2, 3, 4, 5]


@needs_wandb
def test_rows_of_a_run_killed_before_w_and_b_stored_any_are_sent_by_the_resume(tmp_path, offline):
    """A SIGKILL before W&B's service stored a single row (issue 51: train steps 1-3 and the
    validation of step 2 never reached W&B): metrics.jsonl holds them, wandb.json the W&B run's id
    and the steps corl handed it, W&B's log no row (removed here, as the kill left it). The resume
    must send them all, once: a W&B run holding no row is not one from before row numbers."""
    from corl.tracking.metrics import MetricsLog, read_metrics
    from corl.tracking.wandb_run import wandb_mirrors

    cfg = _config(tmp_path)
    run = tmp_path / "run"
    log = MetricsLog(run, tensorboard=False, mirrors=wandb_mirrors(cfg, run, resumed=False))
    for step in (1, 2):
        log.log(step, {"agent0/loss": float(step)})
    log.log(2, {"agent0/val_accuracy": 0.5}, kind="val")
    log.log(3, {"agent0/loss": 3.0})
    log.close()
    for segment in offline_runs(run):
        shutil.rmtree(segment.parent)  # what W&B's service never wrote
    assert json.loads((run / "wandb.json").read_text())["last_step"] == {"train": 3, "val": 2}

    log = MetricsLog(run, tensorboard=False, resume_step=4, mirrors=wandb_mirrors(cfg, run, resumed=True))
    log.log(4, {"agent0/loss": 4.0})
    log.close()
    rows = history(run)
    assert [(r["corl/row"], r["step"]) for r in rows] == [(0, 1), (1, 2), (2, 2), (3, 3), (4, 4)]
    assert [r.get("agent0/loss", r.get("agent0/val_accuracy")) for r in rows] == [1.0, 2.0, 0.5, 3.0, 4.0]
    assert len(read_metrics(run)) == 5


@needs_wandb
@pytest.mark.slow
def test_a_sigkilled_training_run_sends_every_row_of_metrics_jsonl_once(tmp_path, tiny_models, tiny_data, offline):
    """`corl train` SIGKILLed (its process group: W&B's service too) once step 3's row is written
    (train steps 1-3 and the validation of step 2 logged, its checkpoint of step 2), then
    `corl train --resume`: every row of metrics.jsonl is in W&B's logs exactly once, in order,
    whatever the service had stored when the kill came."""
    from corl.tracking.metrics import read_metrics

    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"steps": 4}, logging={"tensorboard": False})
    raw["logging"].update({"report_to": ["wandb"], "eval_every": 2, "checkpoint_every": 2})
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    run = tmp_path / "run"
    # each `corl train` starts its own W&B service, as from a shell: one this test process started (the
    # tests above log in-process) would outlive the killed run and hold its W&B run id "in use"
    env = {k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"} | {"PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "corl", "train", str(config)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 600  # a hang guard, not a speed bound
        while not any(r["step"] == 3 for r in (read_metrics(run, "train") if (run / "metrics.jsonl").exists() else [])):
            assert proc.poll() is None, proc.stdout.read().decode()
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    done = subprocess.run(
        [sys.executable, "-m", "corl", "train", "--resume", str(run)], cwd=tmp_path, env=env, capture_output=True
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]

    written = read_metrics(run)
    rows = history(run, killed=True)
    assert sorted(r["corl/row"] for r in rows) == list(range(len(written))), [r["corl/row"] for r in rows]
    for row in rows:  # each W&B row is the metrics.jsonl row its number says
        assert row["step"] == written[row["corl/row"]]["step"]
        assert rows_by_kind([row])[written[row["corl/row"]]["kind"]] == [row["step"]]
    assert {(r["kind"], r["step"]) for r in written} >= {("train", 3), ("val", 2), ("train", 4), ("val", 4)}


def test_a_missing_wandb_package_names_the_extra(tmp_path):
    """`corl train` as a user runs it, in an environment without wandb: exit 2 before any model loads."""
    from corl.studies.tiny.task import make_split, write_jsonl

    data = {"train": write_jsonl(make_split("train", 8, seed=0), tmp_path / "train.jsonl"), "test": tmp_path / "t.jsonl"}
    raw = tiny_config(tmp_path, {"a": tmp_path / "nowhere-a", "b": tmp_path / "nowhere-b"}, data)
    raw["data"].pop("val")
    raw["logging"]["report_to"] = ["wandb"]
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(raw))
    block = "import sys; sys.modules['wandb'] = None; from corl.cli import app; app(prog_name='corl')"
    done = subprocess.run(
        [sys.executable, "-c", block, "train", str(tmp_path / "run.yaml")], capture_output=True, text=True, env=os.environ
    )
    assert done.returncode == 2, done.stderr
    said = " ".join(done.stderr.split())
    assert "the wandb package is not installed: pip install 'corl[wandb]'" in said
    assert "nowhere" not in said  # refused before the (missing) models were looked at


@needs_wandb
@pytest.mark.slow
def test_training_interrupted_and_resumed_sends_each_step_once(tmp_path, tiny_models, tiny_data, offline):
    """A real cohort: stopped after step 2 (checkpoint after step 1), resumed to the end."""
    from corl.tracking.metrics import read_metrics
    from corl.trainer import CohortTrainer

    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"steps": 4}, logging={"tensorboard": False})
    raw["logging"].update({"report_to": ["wandb"], "eval_every": 1, "checkpoint_every": 2, "eval_on_start": True})
    raw["logging"]["wandb"] = {"project": "corl-test", "group": "peer", "tags": ["tiny"]}
    cfg = validate_config(raw)

    class Crash(Exception):
        pass

    def crash_after_step_2(step, metrics):
        if step == 2:
            raise Crash

    with pytest.raises(Crash):
        CohortTrainer(cfg).train(on_step=crash_after_step_2)
    CohortTrainer(cfg, resume=True).train()

    run = tmp_path / "run"
    sent = rows_by_kind(history(run))
    written = {kind: [r["step"] for r in read_metrics(run, kind)] for kind in ("train", "val")}
    assert written == {"train": [1, 2, 3, 4], "val": [0, 1, 2, 3, 4]}
    assert sent == written  # every step once: the redone step 2 (and the validation after it) not twice
    assert len(offline_runs(run)) == 2 and len(run_ids(run)) == 1
    steps = Counter(r["step"] for r in history(run) if "agent0/reward_mean" in r)
    assert steps == Counter({1: 1, 2: 1, 3: 1, 4: 1})
    # the run's configuration and W&B's own fields came from the config
    first = next(wandb_records(offline_runs(run)[0]))
    records = [r for r in wandb_records(offline_runs(run)[0]) if r.WhichOneof("record_type") == "run"]
    assert first.WhichOneof("record_type") == "header"
    info = records[0].run
    assert (info.project, info.run_group, list(info.tags), info.display_name) == ("corl-test", "peer", ["tiny"], "run")
    config = {item.key: json.loads(item.value_json) for item in info.config.update}
    assert config["cohort"]["steps"] == 4 and config["agents"][1]["name"] == "agent1"
