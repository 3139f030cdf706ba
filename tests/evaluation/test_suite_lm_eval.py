"""A checkpoint as corl writes it loads in lm-evaluation-harness (`--model hf`) and generates
there what corl's own HF engine generates (greedy, same prompts).

Runs only where `lm_eval` (with its hf extra) is importable in this interpreter:
`pip install "lm-eval[hf]"` (see docs/evaluation.md for its cost); skipped, with the reason,
elsewhere."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

_missing = [m for m in ("lm_eval", "accelerate") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(
    bool(_missing), reason=f"{', '.join(_missing)} not importable here: pip install 'lm-eval[hf]' to run this check"
)

TASK = """\
task: corl_tiny_math
dataset_path: json
dataset_kwargs:
  data_files:
    test: {rows}
test_split: test
output_type: generate_until
doc_to_text: "{{{{problem}}}}\\n"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["<eos>"]
  max_gen_toks: 10
  do_sample: false
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


def test_lm_eval_loads_a_corl_checkpoint_and_generates_what_corl_does(tiny_models, tiny_data, tmp_path):
    from corl.models import load_policy, save_policy
    from corl.rollout import SamplingParams, build_engine

    # Written by the very calls a training run's final save makes (agent.save: save_policy + tokenizer).
    model, tok = load_policy(str(tiny_models["qwen2-bpe"]))
    ckpt = tmp_path / "ckpt"
    save_policy(model, ckpt)
    tok.save_pretrained(ckpt)

    rows = [json.loads(line) for line in tiny_data["test"].read_text().splitlines()[:3]]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "corl_tiny_math.yaml").write_text(TASK.format(rows=tmp_path / "rows.jsonl"))
    out = tmp_path / "lm_eval_out"
    cmd = [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={ckpt},dtype=float32"]
    cmd += ["--tasks", "corl_tiny_math", "--include_path", str(tasks), "--limit", "3", "--device", "cpu"]
    cmd += ["--batch_size", "1", "--output_path", str(out), "--log_samples"]
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]

    results = json.loads(next(out.rglob("results_*.json")).read_text())
    assert "exact_match,none" in results["results"]["corl_tiny_math"]
    samples = [json.loads(line) for line in next(out.rglob("samples_corl_tiny_math_*.jsonl")).read_text().splitlines()]
    assert len(samples) == 3
    theirs = {s["doc"]["id"]: s["resps"][0][0] for s in samples}

    from corl.config import RolloutConfig

    engine = build_engine(RolloutConfig(engine="hf"), model, tok, add_special_tokens=True)
    prompts = [r["problem"] + "\n" for r in rows]
    ours = engine.generate(prompts, 1, SamplingParams(temperature=0.0, max_new_tokens=10)).texts
    # lm-eval stops at "until" and strips nothing else; corl stops at EOS: the same greedy text
    assert [theirs[r["id"]] for r in rows] == [t.split("<eos>")[0] for t in ours]
