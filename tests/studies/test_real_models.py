"""A real pretrained model through the paths a user takes, as a user runs them: `corl train` on
unlabeled prompts with label-free selection, killed and resumed to the same weights, `corl export`,
and the exported folder loading with transformers. SmolLM2-135M-Instruct from its GGUF file
(tests/conftest.py fetches it); two agents of it stand for a cohort (each its own copy, optimizer
and seed), so that the test fits CI's minutes; the study pairs it with Gemma-3
(python -m corl.studies.real)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
import yaml
from safetensors.torch import load_file

from corl.models import resolve_model_path
from corl.tracking.metrics import read_metrics


def _config(tmp_path: Path, model: Path) -> Path:
    """Two agents of the model on the real study's task: its prompt (bare equations), its stop string."""
    from corl.studies.real import task

    raw = {
        "output_dir": str(tmp_path / "run"),
        "agents": [
            {"name": "smol-a", "model": str(model), "lr": 1e-5, "seed": 1},
            {"name": "smol-b", "model": str(model), "lr": 2e-5, "seed": 2},
        ],
        "data": {
            "train": str(task.write(tmp_path / "train.jsonl", task.rows("train", 16, labeled=False))),  # unlabeled
            "val": str(task.write(tmp_path / "val.jsonl", task.rows("val", 4))),
            "val_size": 4,
            "template": task.template(),
            "instruction": "",
        },
        "cohort": {
            "steps": 2, "prompts_per_step": 2, "samples_per_prompt": 4, "max_new_tokens": 6, "stop_strings": [task.STOP],
            "seed": 0,
        },
        "logging": {"tensorboard": False, "progress": False, "checkpoint_every": 1, "eval_every": 1, "select": "label_free"},
    }  # fmt: skip
    path = tmp_path / "real.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _corl(*args, cwd) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "corl", *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


def _finish(proc: subprocess.Popen) -> str:
    out = proc.communicate(timeout=1800)[0].decode()
    assert proc.returncode == 0, out[-4000:]
    return out


def test_a_real_cohort_trains_resumes_to_the_same_weights_selects_and_exports(tmp_path, smollm2_gguf):
    config = _config(tmp_path, smollm2_gguf)
    _finish(_corl("train", str(config), "-o", str(tmp_path / "full"), cwd=tmp_path))

    run = tmp_path / "killed"
    proc = _corl("train", str(config), "-o", str(run), cwd=tmp_path)
    deadline = time.time() + 1800
    while not (run / "checkpoints" / "step_000001").is_dir():  # committed: renamed into place
        assert proc.poll() is None, proc.stdout.read().decode()[-4000:]
        assert time.time() < deadline
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    _finish(_corl("train", "--resume", str(run), cwd=tmp_path))

    assert [r["step"] for r in read_metrics(run, "train")] == [1, 2]  # every step exactly once
    for name in ("smol-a", "smol-b"):
        a = load_file(str(tmp_path / "full" / "checkpoints" / "step_000002" / name / "model.safetensors"))
        b = load_file(str(run / "checkpoints" / "step_000002" / name / "model.safetensors"))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), f"{name}: the resumed run differs"
        base = load_file(str(Path(resolve_model_path(str(smollm2_gguf))) / "model.safetensors"))
        assert any(not torch.equal(a[k], base[k]) for k in a), f"{name} never changed"

    # label-free selection published a checkpoint it chose without reading an answer of the training data
    chosen = json.loads((run / "best" / "selection.json").read_text())
    assert chosen["select"] == "label_free" and chosen["chosen"]["label_free"]["step"] in (0, 1, 2)
    assert (run / "best" / "smol-a" / "config.json").is_file()

    said = _finish(_corl("export", str(run), cwd=tmp_path))
    assert "a Hugging Face model folder already" in said
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = run / "checkpoints" / "step_000002" / "smol-b"
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    assert type(model).__name__ == "LlamaForCausalLM" and tokenizer.chat_template  # loads anywhere, chat template kept
