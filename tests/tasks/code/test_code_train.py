"""`corl train` on code, as a user runs it: Co-RL (peer labels on behaviour keys) and GT-Reward
(`tests`, the hidden tests) on a tiny generated code task with tiny models of two families.

A random tiny model never writes a program, so the fixture format-SFTs each model (as
conftest's `_format_sft` does for `\\boxed{}`) on completions `def f(x): return x+d`
with a random digit d: its samples then hold programs whose behaviours differ (votes with
a majority, mixed rewards), some of which pass a row's tests (row d0 asks for x+d0).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from corl.cli import app
from corl.rewards import RewardSpec, agreement_rewards, register_reward
from corl.tracking.metrics import read_metrics
from tests.helpers import SHARED_DATA

runner = CliRunner()
PROBE: list[dict] = []  # what the probe reward saw, step by step (this process runs the CLI)


def _probe_rewards(answers, keys, labels, equivalent):
    """The agreement reward itself, recording its inputs and outputs for the test to check."""
    rewards = agreement_rewards(answers, keys, labels, equivalent)
    PROBE.append({"keys": [list(k) for k in keys], "labels": [lbl.key if lbl else None for lbl in labels], "rewards": rewards})
    return rewards


register_reward(
    RewardSpec("agreement_probe", "agreement, recorded by tests/tasks/code/test_code_train.py", from_labels=_probe_rewards)
)


def toy_rows() -> list[dict]:
    """MBPP-shaped rows: 'add d' asks for f(x) = x + d; hidden tests f(1), f(5), public calls their mutants then them."""
    rows = []
    for i, (word, d) in enumerate((w, d) for w in ("add", "plus") for d in range(4)):
        rows.append(
            {
                "id": f"toy/{i}",
                "task_id": i,
                "text": f"{word} {d}",
                "code": f"def f(x): return x+{d}",
                "test_list": [f"assert f(1) == {1 + d}", f"assert f(5) == {5 + d}"],
                "test_setup_code": "",
            }
        )
    return rows


def _code_sft(model, tokenizer, prompts: list[str], steps: int, seed: int) -> None:
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    model.train()
    for _ in range(steps):
        batch = [rng.choice(prompts) for _ in range(16)]
        texts = [p + "\n" + f"def f(x): return x+{rng.randint(0, 3)}" + tokenizer.eos_token for p in batch]
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        loss = model(**enc, labels=enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


@pytest.fixture(scope="module")
def code_setup(tmp_path_factory) -> dict:
    from corl.studies.tiny.families import build_random_model
    from corl.studies.tiny.tokenizers import bpe_tokenizer, char_tokenizer

    root = tmp_path_factory.mktemp("code")
    rows = toy_rows()
    data = root / "toy.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    prompts = [r["text"] for r in rows]
    corpus = [p + "\n" + f"def f(x): return x+{d}" for p in prompts for d in range(4)] * 4
    models = {}
    for i, (name, arch, tok) in enumerate(
        (("llama-char", "llama", char_tokenizer()), ("qwen2-bpe", "qwen2", bpe_tokenizer(corpus, vocab_size=300)))
    ):
        model = build_random_model(arch, tok, hidden=64, layers=2, heads=4, ffn=128, seed=i)
        _code_sft(model, tok, prompts, steps=60, seed=i)
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
        models[name] = root / name
    return {"data": data, "models": models}


def code_config(tmp_path: Path, setup: dict, **cohort) -> Path:
    raw = {
        "output_dir": str(tmp_path / "run"),
        "device": "cpu",
        "agents": [{"name": name, "model": str(path), "lr": 1e-3} for name, path in setup["models"].items()],
        "data": {
            "train": f"code:{setup['data']}",  # the code source: public calls into Problem.inputs
            "task": "code",
            "prompt_field": "text",  # the tiny models know bare problems; real runs use prompt_mbpp
            "template": "{problem}\n",
            "instruction": "",
            "answer_field": None,  # code rows have no answer column: graded by tests, not by a string
        },
        "cohort": {"steps": 3, "prompts_per_step": 4, "samples_per_prompt": 4, "max_new_tokens": 28, "seed": 0, **cohort},
        "logging": {"tensorboard": False, "progress": False},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_co_rl_on_code_rewards_agreement_with_the_peer_majority_behaviour(tmp_path, code_setup):
    PROBE.clear()
    result = runner.invoke(app, ["train", str(code_config(tmp_path, code_setup, label_source="peer", reward="agreement_probe"))])
    assert result.exit_code == 0, result.output
    records = read_metrics(tmp_path / "run", "train")
    assert [r["step"] for r in records] == [1, 2, 3]
    for name in code_setup["models"]:
        for metric in ("answer_rate", "labeled_fraction", "reward_mean", "reward_std", "uniform_reward_fraction"):
            assert all(f"{name}/{metric}" in r for r in records), metric
        assert f"{name}/pseudo_label_accuracy" not in records[0]  # no answer column: no label accuracy
        # the SFT'd models write runnable programs: many samples have a behaviour, most prompts a label
        assert sum(r[f"{name}/answer_rate"] for r in records) / 3 > 0.3
        assert sum(r[f"{name}/labeled_fraction"] for r in records) / 3 > 0.5
    assert "agreement/llama-char~qwen2-bpe" in records[0]
    # 3 steps x 2 agents; every rewarded completion's behaviour key is its label's, every other's is not
    assert len(PROBE) == 6
    rewarded = 0
    for seen in PROBE:
        for keys, label, rewards in zip(seen["keys"], seen["labels"], seen["rewards"].tolist(), strict=True):
            for k, r in zip(keys, rewards, strict=True):
                assert r == float(label is not None and k == label), (k, label, r)
                rewarded += r == 1.0
                if k is not None:
                    assert {tag for tag, _ in json.loads(k)} == {"ok"}  # f(1), f(5) and their mutants ran
    assert rewarded > 0


def test_gt_reward_on_code_scores_the_hidden_tests(tmp_path, code_setup):
    result = runner.invoke(app, ["train", str(code_config(tmp_path, code_setup, reward="tests"))])
    assert result.exit_code == 0, result.output
    records = read_metrics(tmp_path / "run", "train")
    assert [r["step"] for r in records] == [1, 2, 3]
    for name in code_setup["models"]:
        assert all(0.0 <= r[f"{name}/reward_mean"] <= 1.0 for r in records)
        assert all(f"{name}/labeled_fraction" in r for r in records)  # label statistics still reported
        # d is uniform over the 4 digits a row may ask for: some samples pass, not all
        assert 0.0 < sum(r[f"{name}/reward_mean"] for r in records) / 3 < 1.0
        assert sum(r[f"{name}/optimizer_steps"] for r in records) >= 1


@pytest.mark.skipif(not (SHARED_DATA / "mbpp").is_dir(), reason="needs ../shared/data beside the checkout")
def test_mbpp_rows_through_the_code_source_end_to_end(tmp_path, code_setup):
    """Real MBPP rows (real entry points, calls, hidden tests); tiny models fail them, but every stage runs."""
    cfg = yaml.safe_load(code_config(tmp_path, code_setup, reward="tests", steps=1, prompts_per_step=2).read_text())
    cfg["data"].update({"train": f"code:{SHARED_DATA / 'mbpp' / 'train.jsonl'}", "max_rows": 4})
    (tmp_path / "mbpp.yaml").write_text(yaml.safe_dump(cfg))
    result = runner.invoke(app, ["train", str(tmp_path / "mbpp.yaml")])
    assert result.exit_code == 0, result.output
    (record,) = read_metrics(tmp_path / "run", "train")
    assert record["llama-char/reward_mean"] == 0.0 and "llama-char/answer_rate" in record


def test_validation_of_a_code_run_runs_the_hidden_tests(tmp_path, code_setup):
    """data.val on a code run: each agent's greedy program per row, graded by the row's hidden
    tests (the task kind's grader), not by a math answer; the logged val accuracy equals the
    pass rate of the final weights' greedy programs, recomputed here."""
    from corl.data.rows import PromptTemplate
    from corl.models import load_policy
    from corl.rollout import HFGenerateEngine, SamplingParams
    from corl.tasks.code.task import passes_hidden_tests

    raw = yaml.safe_load(code_config(tmp_path, code_setup, steps=1).read_text())
    raw["data"].update({"val": f"code:{code_setup['data']}", "val_size": 8})
    (tmp_path / "val.yaml").write_text(yaml.safe_dump(raw))
    result = runner.invoke(app, ["train", str(tmp_path / "val.yaml")])
    assert result.exit_code == 0, result.output
    (record,) = read_metrics(tmp_path / "run", "val")
    rows = toy_rows()
    template = PromptTemplate("{problem}\n", "", False)
    passed = 0
    for name in code_setup["models"]:
        model, tok = load_policy(str(tmp_path / "run" / "checkpoints" / "step_000001" / name))
        prompts = [template.render(r["text"], tok) for r in rows]
        texts = HFGenerateEngine(model, tok).generate(prompts, 1, SamplingParams(temperature=0.0, max_new_tokens=28)).texts
        correct = [ok for (ok,) in passes_hidden_tests(texts, rows, 1, plus=False)]  # val: the rows' own tests
        assert record[f"{name}/val_accuracy"] == sum(correct) / len(rows), (name, texts)
        passed += sum(correct)
    assert 0 < passed < 2 * len(rows)  # the greedy programs pass some rows' tests and fail others
