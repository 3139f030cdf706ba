"""`corl eval` as a user runs it: `--task code` on HumanEval / MBPP rows through the sandbox (records and
table; tiny random models score ~0, so the score itself is not asserted) and `--extract` on math.

The harness's scores are tested where a "model" can be a replay: `code_eval.evaluate` with the
reference solutions (tests/evaluation/test_code_eval.py, 164/164 and 500/500).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from corl.answers import extract_answer
from corl.cli import app
from corl.evaluation.evaluate import extract_all
from tests.helpers import SHARED_DATA

runner = CliRunner()
needs_data = pytest.mark.skipif(not (SHARED_DATA / "humaneval").is_dir(), reason="needs ../shared/data beside the checkout")


@pytest.fixture(scope="module")
def random_models(tmp_path_factory) -> dict[str, str]:
    """Untrained tiny models (the eval path, not a score, is under test): qwen2 + byte BPE, llama + characters."""
    from corl.studies.tiny.families import build_random_model
    from corl.studies.tiny.tokenizers import bpe_tokenizer, char_tokenizer

    root = tmp_path_factory.mktemp("eval-models")
    corpus = ["def f(x):\n    return x + 1\n", "assert f(1) == 2\n", "The answer is 42.\n"] * 20
    out = {}
    for i, (name, arch, tok) in enumerate(
        (("qwen2-bpe", "qwen2", bpe_tokenizer(corpus, vocab_size=300)), ("llama-char", "llama", char_tokenizer()))
    ):
        model = build_random_model(arch, tok, hidden=32, layers=1, heads=2, ffn=64, seed=i)
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
        out[name] = str(root / name)
    return out


def said(result) -> str:
    """The CLI's output with rich's line wrapping undone."""
    return " ".join(result.output.split())


def _head(path, rows: int, out):
    out.write_text("".join(path.read_text().splitlines(keepends=True)[:rows]))
    return out


@needs_data
def test_eval_code_humaneval_writes_records_and_the_table(tmp_path, random_models):
    data = _head(SHARED_DATA / "humaneval" / "test.jsonl", 3, tmp_path / "he3.jsonl")
    records = tmp_path / "out" / "records.jsonl"
    args = ["eval", random_models["qwen2-bpe"], "--data", str(data), "--task", "code", "--k", "2", "--max-new-tokens", "8"]
    result = runner.invoke(app, [*args, "--records", str(records)])
    assert result.exit_code == 0, result.output
    for column in ("greedy", "pass@1", "pass@2", "humaneval"):
        assert column in result.stdout
    lines = [json.loads(line) for line in records.read_text().splitlines()]
    assert [r["task_id"] for r in lines] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    for r in lines:
        assert r["style"] == "humaneval" and r["n"] == 2 and 0 <= r["c"] <= 2 and len(r["samples"]) == 2
        assert set(r["greedy"]) == {"completion", "passed", "status", "error"}
        assert r["pass@1"] == pytest.approx(r["c"] / 2)  # unbiased pass@1 with n = 2 is c / n
        # a failing sample says why: the sandbox status and, when it ran, its error
        assert all(s["passed"] or s["status"] != "ok" for s in r["samples"])


@needs_data
def test_eval_code_mbpp_few_shot_json(tmp_path, random_models):
    data = _head(SHARED_DATA / "mbpp" / "test.jsonl", 2, tmp_path / "mbpp2.jsonl")
    shots = SHARED_DATA / "mbpp" / "prompt.jsonl"
    args = ["eval", random_models["qwen2-bpe"], "--data", str(data), "--task", "code", "--k", "1", "--max-new-tokens", "6"]
    result = runner.invoke(app, [*args, "--shots", str(shots), "--json", "--records", str(tmp_path / "r.jsonl")])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["task"], out["style"], out["n"], out["k"]) == ("code", "mbpp", 2, 1)
    entry = out["models"]["qwen2-bpe"]  # a model is named by its folder (the shortest tail that tells models apart)
    assert out["sources"] == {"qwen2-bpe": random_models["qwen2-bpe"]}
    # pass@1+: MBPP's shown asserts extended by tests the prompt does not show (corl.tasks.code.plus)
    assert set(entry) == {"greedy", "pass@1", "pass@1+", "mean_length", "se", "ci95"}
    assert 0 <= entry["pass@1+"] <= entry["pass@1"] <= 1
    assert set(entry["se"]) == set(entry["ci95"]) == {"greedy", "pass@1", "pass@1+"}  # beside every figure
    assert [json.loads(line)["task_id"] for line in (tmp_path / "r.jsonl").read_text().splitlines()] == ["11", "12"]


def test_eval_code_names_what_is_wrong(tmp_path, random_models):
    math_rows = tmp_path / "math.jsonl"
    math_rows.write_text(json.dumps({"problem": "1+1?", "answer": "2"}) + "\n")
    base = ["eval", random_models["qwen2-bpe"], "--data", str(math_rows)]
    result = runner.invoke(app, [*base, "--task", "code"])
    assert result.exit_code == 2 and "row 0: not a HumanEval" in said(result)
    assert runner.invoke(app, [*base, "--task", "prose"]).exit_code == 2
    result = runner.invoke(app, [*base, "--extract", "loose"])
    assert result.exit_code == 2 and "--extract must be one of strict, flexible" in said(result)
    he = tmp_path / "he.jsonl"
    he.write_text(json.dumps({"task_id": "t", "prompt": "def f():\n", "test": "", "entry_point": "f"}) + "\n")
    result = runner.invoke(app, ["eval", random_models["qwen2-bpe"], "--data", str(he), "--task", "code", "--style", "mbpp"])
    assert result.exit_code == 2 and "its rows are humaneval rows" in said(result)
    # --chat picks humaneval_instruct, which needs the chat template these tiny tokenizers lack
    result = runner.invoke(app, ["eval", random_models["qwen2-bpe"], "--data", str(he), "--task", "code", "--chat"])
    assert result.exit_code == 2 and "--style humaneval_instruct needs a tokenizer with a chat template" in said(result)


def test_extract_all_threads_the_mode():
    texts = [["The answer is \\boxed{4}.", "so we get 7 apples", "no number here"]]
    assert extract_all(texts, "strict") == [["4", None, None]]
    assert extract_all(texts, "flexible") == [["4", "7", None]]  # flexible falls back to the last number


def test_eval_math_extract_flexible_differs_where_nothing_is_stated(tmp_path, random_models):
    rows = tmp_path / "math.jsonl"
    rows.write_text("".join(json.dumps({"id": f"p{i}", "problem": f"{i}+{i}=", "answer": str(2 * i)}) + "\n" for i in range(4)))
    answers = {}
    for mode in ("strict", "flexible"):
        records = tmp_path / f"{mode}.jsonl"
        args = ["eval", random_models["llama-char"], "--data", str(rows), "--k", "3", "--max-new-tokens", "16", "--seed", "1"]
        result = runner.invoke(app, [*args, "--template", "{problem}", "--extract", mode, "--records", str(records), "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["extract"] == mode
        lines = [json.loads(line) for line in records.read_text().splitlines()]
        samples = [s for r in lines for s in [r["greedy"], *r["samples"]]]
        assert all(s["answer"] == extract_answer(s["completion"], mode) for s in samples)
        answers[mode] = [(s["completion"], s["answer"]) for s in samples]
    # the same seed samples the same completions; random text states no answer, yet holds digits
    assert [c for c, _ in answers["strict"]] == [c for c, _ in answers["flexible"]]
    assert any(s is None and f is not None for (_, s), (_, f) in zip(answers["strict"], answers["flexible"]))


@needs_data
def test_eval_code_instruct_style_with_a_chat_template(tmp_path, random_models):
    """--chat: lm-eval's humaneval_instruct (a user turn, then the opened fence as the assistant's gen_prefix)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(random_models["qwen2-bpe"])
    tok.chat_template = (
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    model_dir = tmp_path / "chat-model"
    AutoModelForCausalLM.from_pretrained(random_models["qwen2-bpe"]).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    data = _head(SHARED_DATA / "humaneval" / "test.jsonl", 2, tmp_path / "he2.jsonl")
    args = ["eval", str(model_dir), "--data", str(data), "--task", "code", "--chat", "--k", "1", "--max-new-tokens", "6"]
    result = runner.invoke(app, [*args, "--json", "--records", str(tmp_path / "r.jsonl")])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["style"] == "humaneval_instruct"
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 2


@needs_data
def test_eval_suite_runs_the_named_suite_as_corl_suite_does(tmp_path, random_models):
    out = tmp_path / "suite"
    args = ["eval", random_models["qwen2-bpe"], "--suite", "humaneval", "--n", "1", "--out", str(out), "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    figures = json.loads((out / "results.json").read_text())
    assert "humaneval" in json.dumps(figures).lower()
    assert (out / "results.md").read_text().count("|") > 4  # the Table-1-shaped markdown
    assert list((out / "cells").glob("*/humaneval.jsonl"))  # per-problem records of the one cell


def test_eval_needs_data_or_a_suite(random_models):
    result = runner.invoke(app, ["eval", random_models["qwen2-bpe"]])
    assert result.exit_code == 2 and "--suite" in said(result)


def _se(x: list[float]) -> float:
    """sqrt(sum((x - mean)^2) / (n - 1) / n), written out."""
    mean = sum(x) / len(x)
    return (sum((v - mean) ** 2 for v in x) / (len(x) - 1) / len(x)) ** 0.5


def test_eval_math_reports_standard_errors_and_intervals_beside_every_figure(tmp_path, random_models):
    """Gold set to a first run's greedy answers on half the problems (an untrained model repeats a prompt's last
    character: digits) and to its first sample's on the others: the second run (same seed, same completions) has
    greedy accuracy 1/2 by construction, and every figure's se and interval follow from the records."""
    models = [random_models["llama-char"], random_models["qwen2-bpe"]]
    args = ["--k", "3", "--max-new-tokens", "16", "--seed", "1", "--template", "{problem}", "--extract", "flexible"]

    def run(rows, name):
        data = tmp_path / f"{name}.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        records = tmp_path / f"{name}-records.jsonl"
        result = runner.invoke(app, ["eval", *models, "--data", str(data), *args, "--records", str(records), "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout), [json.loads(line) for line in records.read_text().splitlines()]

    rows = [{"id": f"p{i}", "problem": f"{i}+{i}, {i}", "answer": "0"} for i in range(1, 9)]
    _, first = run(rows, "first")
    greedy = [r["greedy"]["answer"] for r in first if r["model"] == "llama-char"]
    sampled = [r["samples"][0]["answer"] for r in first if r["model"] == "llama-char"]  # right in the second run
    assert None not in greedy[:4] and not set(greedy[:4]) & set(sampled[4:]), (greedy, sampled)
    gold = greedy[:4] + [a or "987654321" for a in sampled[4:]]
    rows = [{**r, "answer": g} for r, g in zip(rows, gold)]
    out, records = run(rows, "second")
    entry = out["models"]["llama-char"]
    p, n = 0.5, 8
    assert 0 < entry["avg@3"] < entry["pass@3"]  # the figures differ: a list taken for another's would show
    assert entry["greedy"] == p and entry["se"]["greedy"] == pytest.approx((p * (1 - p) / (n - 1)) ** 0.5)  # 0/1 scores
    mine = [r for r in records if r["model"] == "llama-char"]
    avg = [sum(s["correct"] for s in r["samples"]) / 3 for r in mine]
    passed = [float(any(s["correct"] for s in r["samples"])) for r in mine]
    assert entry["se"]["avg@3"] == pytest.approx(_se(avg)) and entry["se"]["pass@3"] == pytest.approx(_se(passed))
    m = entry["maj@3"]
    assert entry["se"]["maj@3"] == pytest.approx((m * (1 - m) / (n - 1)) ** 0.5)
    for name in ("greedy", "avg@3", "maj@3", "pass@3"):
        lo, hi = entry["ci95"][name]
        assert lo == pytest.approx(max(0.0, entry[name] - 1.959964 * entry["se"][name]))
        assert hi == pytest.approx(min(1.0, entry[name] + 1.959964 * entry["se"][name]))
    pooled = out["pooled_maj@6"]
    assert out["se"]["pooled_maj@6"] == pytest.approx((pooled * (1 - pooled) / (n - 1)) ** 0.5)
    assert "lm-eval's stderr" in out["intervals"]
    table = runner.invoke(app, ["eval", *models, "--data", str(tmp_path / "second.jsonl"), *args])
    assert table.exit_code == 0, table.output
    shown = " ".join(table.stdout.split())
    greedy_cell = f"{entry['greedy']:.3f} ± {entry['se']['greedy']:.3f} [{entry['ci95']['greedy'][0]:.3f}, {entry['ci95']['greedy'][1]:.3f}]"
    assert greedy_cell in shown and "pooled_maj@6 over all models: " + f"{pooled:.3f} ±" in shown


def _run_folder(tmp_path, tiny_models, tiny_data, chat: list[bool], stop: list[str]) -> Path:
    """A run folder as corl train leaves it (config.yaml, checkpoints/step_000001/<agent>), its agents the fixture's models."""
    import yaml

    from tests.helpers import tiny_config

    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"stop_strings": stop})
    for agent, flag in zip(raw["agents"], chat, strict=True):
        agent["chat_template"] = flag
    run = tmp_path / "run"
    step = run / "checkpoints" / "step_000001"
    step.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump(raw))
    for agent in raw["agents"]:
        (step / agent["name"]).symlink_to(agent["model"])
    return run


def test_a_runs_agents_are_each_prompted_as_they_trained(tmp_path, tiny_models, tiny_data):
    """A cohort may pair an instruct model (its chat template) with a base model (plain text): corl eval RUN
    prompts each agent its own way. Here agent1 asks for a chat template its tokenizer lacks, which only
    an evaluation that reads agent1's own setting can notice; agent0's plain prompt evaluates."""
    run = _run_folder(tmp_path, tiny_models, tiny_data, chat=[False, True], stop=[])
    result = runner.invoke(app, ["eval", str(run), "--k", "1", "--max-new-tokens", "4", "--json"])
    assert result.exit_code != 0 and "chat_template is on but the tokenizer has no chat template" in str(result.exception)
    both_plain = runner.invoke(app, ["eval", str(run), "--k", "1", "--max-new-tokens", "4", "--no-chat", "--json"])
    assert both_plain.exit_code == 0, both_plain.output  # --chat / --no-chat given: every agent as told


def test_eval_of_a_run_ends_completions_at_its_stop_strings(tmp_path, tiny_models, tiny_data):
    run = _run_folder(tmp_path, tiny_models, tiny_data, chat=[False, False], stop=["{"])
    records = tmp_path / "records.jsonl"
    result = runner.invoke(app, ["eval", str(run), "--k", "2", "--max-new-tokens", "12", "--records", str(records), "--json"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in records.read_text().splitlines()]
    texts = [r["greedy"]["completion"] for r in rows] + [s["completion"] for r in rows for s in r["samples"]]
    assert texts and not any("{" in t for t in texts)  # the fixture models write \boxed{d}: cut before the brace
    assert any(t.endswith("boxed") for t in texts)
