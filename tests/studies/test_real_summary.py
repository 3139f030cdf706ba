"""The real-model study's numbers, read back from what its commands wrote (corl.studies.real.summary):
hand-made `corl eval --records` files of four test problems, whose figures are counted by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corl.studies.real.summary import summarize

MODELS = {"smollm2": Path("/m/SmolLM2-135M-Instruct.Q4_1.gguf"), "gemma3": Path("/m/gemma-3-270m-q4_k_m.gguf")}
GOLD = ["3", "59", "36", "12"]
TYPES = ["add11", "add12", "mul11", "three1"]


def _records(path: Path, label: dict[str, str], answers: dict[str, list[tuple[str, list[str]]]]) -> str:
    """One records file: per agent (labelled as corl eval labels it) and problem, (greedy, samples)."""
    lines = []
    for agent, per_problem in answers.items():
        for i, (greedy, samples) in enumerate(per_problem):
            lines.append({
                "model": label[agent], "id": f"test-{i}", "gold": GOLD[i],
                "greedy": {"completion": f" {greedy}", "answer": greedy, "correct": greedy == GOLD[i]},
                "samples": [{"completion": f" {s}", "answer": s, "correct": s == GOLD[i]} for s in samples],
            })  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return str(path)


def _command(exit_code: int = 0) -> dict:
    return {
        "command": ["corl"],
        "exit_code": exit_code,
        "cpu_seconds": 10.0,
        "peak_rss_gib": 1.5,
        "wall_seconds": 9.0,
        "interrupted": False,
    }


@pytest.fixture
def study(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for split in ("val", "test"):
        rows = [{"id": f"{split}-{i}", "problem": "p", "type": TYPES[i], "answer": GOLD[i]} for i in range(4)]
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    base_label = {a: p.name for a, p in MODELS.items()}  # a base model is labelled by its file's name
    run_label = {a: a for a in MODELS}  # a run's agents by their names
    right = GOLD
    evals = {
        # base: smollm2 right on problems 0, 1; gemma3 on 0, 2 (greedy); two samples each
        "base": (base_label, {
            "smollm2": [(right[0], [right[0], "1"]), (right[1], [right[1], right[1]]), ("5", ["5", "5"]), ("7", ["7", right[3]])],
            "gemma3": [(right[0], [right[0], right[0]]), ("8", ["8", right[1]]), (right[2], [right[2], "4"]), ("6", ["6", "6"])],
        }),
        # TTRL collapsed: every answer "9"
        "ttrl": (run_label, {a: [("9", ["9", "9"])] * 4 for a in MODELS}),
        # Co-RL: smollm2 right on 0, 1, 2; gemma3 on everything
        "co-rl": (run_label, {
            "smollm2": [(right[i], [right[i], right[i]]) for i in range(3)] + [("7", ["7", right[3]])],
            "gemma3": [(right[i], [right[i], right[i]]) for i in range(4)],
        }),
    }  # fmt: skip
    options = {"steps": 12, "prompts_per_step": 8, "samples_per_prompt": 8, "lr": {"smollm2": 1e-5, "gemma3": 3e-6},
               "val_size": 4, "test_size": 4, "k_eval": 2}  # fmt: skip
    results = {"options": options, "train": {}, "eval": {}}
    for method, (label, answers) in evals.items():
        results["eval"][method] = {
            "command": _command(),
            "records": _records(tmp_path / "eval" / method / "records.jsonl", label, answers),
        }
    results["eval"]["gt"] = {
        "command": _command(exit_code=1),
        "records": str(tmp_path / "missing.jsonl"),
    }  # a failed eval: left out
    for method in ("ttrl", "co-rl"):
        run = tmp_path / "runs" / method
        run.mkdir(parents=True)
        std = 0.2 if method == "ttrl" else 0.8
        rows = [{"step": s, "split": "train", **{f"{a}/reward_std_normalized": std for a in MODELS}} for s in range(1, 5)]
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (run / "selection.json").write_text(json.dumps({"chosen": {"label_free": {"step": 4}, "truth": {"step": 8}}}))
        results["train"][method] = {"plan": 9.24, "plan_exit": 0, "commands": [_command()]}
    return tmp_path, results


def test_the_figures_and_the_report_are_the_records_counted(study):
    out, results = study
    summarize(out, results, MODELS)
    figures = results["figures"]
    assert set(figures) == {"base", "ttrl", "co-rl"}  # gt's eval failed: no figures made up for it
    assert figures["base"]["smollm2"]["greedy"] == 0.5 and figures["base"]["gemma3"]["greedy"] == 0.5
    # avg@2: smollm2 (1/2 + 2/2 + 0 + 1/2) / 4; gemma3 (2/2 + 1/2 + 1/2 + 0) / 4
    assert figures["base"]["smollm2"]["avg@2"] == pytest.approx(0.5)
    assert figures["base"]["gemma3"]["avg@2"] == pytest.approx(0.5)
    assert figures["ttrl"]["smollm2"]["greedy"] == 0.0 and figures["co-rl"]["gemma3"]["greedy"] == 1.0
    # pooled majority of the pair's 4 samples per problem: co-rl's is right on all four (problem 3: 3 of 4)
    # base: 3 of 4 right on problems 0 and 1; "5" and "6" win problems 2 and 3
    assert results["pools"] == {"base": 0.5, "ttrl": 0.0, "co-rl": 1.0}
    # kappa of the bases' first samples: smollm2 right on {0, 1}, gemma3 on {0, 2}: both 1, one each, neither 1
    # p_o = 1/2, p_e = 1/2: kappa 0
    cross = next(p for p in results["decoupling"] if p["kind"] == "models")
    assert cross["kappa"] == pytest.approx(0.0)
    assert results["selection"] == {m: {"label_free": {"step": 4}, "truth": {"step": 8}} for m in ("ttrl", "co-rl")}
    report = (out / "report.md").read_text()
    assert "| co-rl | 75.0 | 87.5 | 100.0 | 100.0 | 100.0 |" in report
    assert "lr smollm2 1e-05, gemma3 3e-06" in report
    assert "| ttrl | 0.0 | 0.0 | 0.0 | 0.0 | 0.0 |" in report
    assert "- ttrl: label_free step 4, truth step 8" in report
    assert "| ttrl | train exit 0 | 10 | 1.50 | 9.24 |" in report
    json.dumps(results, allow_nan=False)  # results.json is plain JSON
