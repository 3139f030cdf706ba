"""`corl train` with logging.select and cohort.stop, run as a user runs it (tiny models)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from safetensors.torch import load_file

from corl.checkpoints.checkpoint import verify_checkpoint
from corl.tracking.metrics import read_metrics
from tests.helpers import tiny_config


def corl_train(tmp_path: Path, raw: dict, name: str) -> tuple[subprocess.CompletedProcess, Path]:
    raw = raw | {"output_dir": str(tmp_path / name)}
    config = tmp_path / f"{name}.yaml"
    config.write_text(yaml.safe_dump(raw))
    done = subprocess.run([sys.executable, "-m", "corl", "train", str(config)], capture_output=True, text=True)
    return done, tmp_path / name


def without_answers(path: Path, out: Path) -> Path:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert all("answer" in r for r in rows)
    out.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "answer"}) + "\n" for r in rows))
    return out


def test_label_free_selection_reads_no_answer(tmp_path, tiny_models, tiny_data):
    """The same run with and without the validation answers records the same label-free scores and
    choice; a best folder is a checkpoint like the others; the truth rule, which needs answers, is
    only there with them. The fixture's tiny models answer (nearly) every validation prompt alike:
    every point is collapsed, so label_free chooses none and no RUN/best/ is written, and says so."""
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"steps": 3})
    raw["logging"] |= {"eval_every": 1, "select": "label_free", "select_samples": 2}
    with_answers, run_a = corl_train(tmp_path, raw | {"logging": raw["logging"] | {"select_also": ["truth"]}}, "a")
    assert with_answers.returncode == 0, with_answers.stdout + with_answers.stderr
    raw["data"] = raw["data"] | {"val": str(without_answers(tiny_data["test"], tmp_path / "val.jsonl"))}
    blind, run_b = corl_train(tmp_path, raw, "b")
    assert blind.returncode == 0, blind.stdout + blind.stderr

    a, b = (json.loads((run / "selection.json").read_text()) for run in (run_a, run_b))
    assert [p["step"] for p in a["points"]] == [1, 2, 3]  # named as metrics and checkpoints name them
    assert a["chosen"]["label_free"] == b["chosen"]["label_free"]
    for pa, pb in zip(a["points"], b["points"], strict=True):
        assert {k: v for k, v in pa.items() if k != "val_accuracy"} == {k: v for k, v in pb.items() if k != "val_accuracy"}
        assert pa["val_accuracy"] is not None and pb["val_accuracy"] is None
    assert b["chosen"]["truth"] is None and a["chosen"]["truth"] is not None
    assert not any("val_accuracy" in r for r in read_metrics(run_b, "val"))
    assert all("select/agreement" in r and "select/variety_kept" in r for r in read_metrics(run_b, "val"))
    # every point carries the concentration terms label_free reads, and says whether it collapsed
    for p in a["points"]:
        assert {"chance_agreement", "variety", "variety_kept", "collapsed"} <= set(p)
        beyond = p["agreement"] - p["chance_agreement"]
        assert p["label_free"] == pytest.approx(beyond * p["variety_kept"])

    # a collapsed point is never chosen nor published
    assert all(p["collapsed"] == (p["top_answer_share"] >= 0.9) for p in a["points"])
    assert all(p["collapsed"] for p in a["points"])  # the fixture's models: see the docstring
    for run, done in ((run_a, with_answers), (run_b, blind)):
        assert json.loads((run / "selection.json").read_text())["chosen"]["label_free"] is None
        assert not (run / "best").exists()
        assert "label_free chose no point" in done.stdout
        # their first point already shows answers the score cannot read: the run says so, once
        trust = json.loads((run / "selection.json").read_text())["label_free_trust"]
        assert not trust["trusted"] and trust["measured_at"] == 1 and "chance_agreement" in trust["failed"]
        assert done.stdout.count("corl: label-free selection cannot tell on this data (measured at step 1)") == 1
        assert [r["select/trusted"] for r in read_metrics(run, "val")] == [0.0, 0.0, 0.0]

    truth = a["chosen"]["truth"]["checkpoint_step"]
    best = run_a / "best-truth"
    verify_checkpoint(best)  # its manifest holds: a checkpoint like the others
    assert json.loads((best / "state.json").read_text())["step"] == truth
    assert json.loads((best / "selection.json").read_text())["chosen"] == a["chosen"]
    assert not (run_b / "best-truth").exists()
    # a best folder holds the chosen step's weights: the same files as that checkpoint while it is kept
    kept = run_a / "checkpoints" / f"step_{truth:06d}"
    if kept.is_dir():
        wa, wb = (load_file(str(f / "agent0" / "model.safetensors")) for f in (best, kept))
        assert wa.keys() == wb.keys() and all(wa[k].equal(wb[k]) for k in wa)
