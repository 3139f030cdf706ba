"""Evaluating code generation: pass@k (Chen et al. 2021), per-problem records, HumanEval/MBPP loaders and prompts.

Prompts follow lm-evaluation-harness (tasks humaneval, humaneval_instruct, mbpp, mbpp_instruct):
- humaneval: the prompt as-is; the completion continues the function; program = prompt + completion
  cut at the first stop sequence.
- humaneval_instruct: a user turn asking for a solution with the prompt fenced, then the
  assistant starts with "Here is the completed function:" and the opened fence + prompt; program =
  prompt + completion up to its first ```.
- mbpp: "You are an expert Python programmer, and here is your task: {text} Your code should pass
  these tests:\\n\\n{3 tests}\\n[BEGIN]\\n", 3-shot with solutions ending "\\n[DONE]"; cut at [DONE].
- mbpp_instruct: the same words as a user turn, the assistant starts with "\\n```python\\n".
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from corl.sandbox import SandboxPool
from corl.tasks.code import extract_code
from corl.tasks.code_exec import run_tests

HUMANEVAL_STOP = ("\nclass", "\ndef", "\n#", "\nif", "\nprint")
MBPP_STOP = ("[DONE]",)
STYLES = ("humaneval", "humaneval_instruct", "mbpp", "mbpp_instruct")
HUMANEVAL_FIELDS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")
MBPP_FIELDS = ("task_id", "text", "code", "test_list")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct: 1 - C(n-c, k) / C(n, k), as a stable product."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def load_jsonl(path: str | Path, required: Sequence[str] = ()) -> list[dict]:
    """Rows of a JSONL file; a row missing a required field is an error naming the line."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            missing = [k for k in required if k not in row]
            if missing:
                raise ValueError(f"{path}:{n}: missing fields {missing}")
            rows.append(row)
    return rows


def load_humaneval(path: str | Path) -> list[dict]:
    """HumanEval rows (task_id, prompt, canonical_solution, test, entry_point) from any JSONL with those fields."""
    return load_jsonl(path, HUMANEVAL_FIELDS)


def load_mbpp(path: str | Path) -> list[dict]:
    """MBPP rows (task_id, text, code, test_list [, test_setup_code]) from any JSONL with those fields."""
    return load_jsonl(path, MBPP_FIELDS)


def reference_solution(row: Mapping) -> str:
    """The dataset's own solution: a HumanEval body (continues the prompt) or MBPP's code."""
    return row["canonical_solution"] if "canonical_solution" in row else row["code"]


def humaneval_prompt(row: Mapping) -> str:
    return row["prompt"]


def humaneval_instruct(row: Mapping) -> tuple[list[dict], str]:
    """(chat messages, assistant gen_prefix) of lm-eval's humaneval_instruct."""
    user = f"Write a solution to the following problem and make sure that it passes the tests:\n```python\n{row['prompt']}\n```\n"
    return [{"role": "user", "content": user}], f"Here is the completed function:\n```python\n{row['prompt']}\n"


def _mbpp_text(row: Mapping, sep: str) -> str:
    tests = "\n".join(row["test_list"][:3])
    if sep == " ":
        return f"You are an expert Python programmer, and here is your task: {row['text']} Your code should pass these tests:\n\n{tests}\n[BEGIN]\n"
    return (
        f"You are an expert Python programmer, and here is your task:\n{row['text']}\nYour code should pass these tests:\n{tests}"
    )


def mbpp_prompt(row: Mapping, fewshot: Sequence[Mapping] = ()) -> str:
    """lm-eval's mbpp prompt; lm-eval uses MBPP tasks 2, 3, 4 (the prompt split) as its three shots."""
    shots = [_mbpp_text(s, " ") + s["code"] + "\n[DONE]" for s in fewshot]
    return "\n\n".join([*shots, _mbpp_text(row, " ")])


def mbpp_instruct(row: Mapping, fewshot: Sequence[Mapping] = ()) -> tuple[list[dict], str]:
    """(chat messages, gen_prefix) of lm-eval's mbpp_instruct; shots become user/assistant turns."""
    messages = []
    for s in fewshot:
        messages += [
            {"role": "user", "content": _mbpp_text(s, "\n")},
            {"role": "assistant", "content": f"\n```python\n{s['code']}\n```"},
        ]
    return [*messages, {"role": "user", "content": _mbpp_text(row, "\n")}], "\n```python\n"


def chat_prompt(tokenizer, messages: list[dict], gen_prefix: str = "") -> str:
    """The model's text: the chat template with the assistant turn opened, then the gen_prefix."""
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + gen_prefix


def cut_at_stop(text: str, stops: Sequence[str]) -> str:
    """Text before the earliest stop sequence (what generate_until returns)."""
    cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=len(text))
    return text[:cut]


def program_for(row: Mapping, completion: str, style: str) -> str | None:
    """The program lm-eval would test for this completion in `style`."""
    if style == "humaneval":
        return row["prompt"] + cut_at_stop(completion, HUMANEVAL_STOP)
    if style == "humaneval_instruct":
        return row["prompt"] + cut_at_stop(completion, ("```",))
    if style == "mbpp":
        return cut_at_stop(completion, MBPP_STOP)
    if style == "mbpp_instruct":
        return extract_code(completion, opened_fence=True)
    raise ValueError(f"unknown style {style!r}; choose from {', '.join(STYLES)}")


@dataclass(frozen=True)
class SampleRecord:
    """One completion's test outcome."""

    task_id: str
    sample: int
    passed: bool
    status: str  # ok, error, timeout, exit, malformed, memory, killed, output_limit, judge (corl.tasks.code_judge), or no_code
    wall_s: float
    error: str | None


@dataclass
class EvalReport:
    """pass@k over problems, with the records behind it."""

    pass_at: dict[int, float]
    per_problem: list[dict] = field(default_factory=list)  # task_id, n, c, pass@k[, pass@k+]
    pass_plus: dict[int, float] = field(default_factory=dict)  # pass@k on the extended tests (evaluate's plus)
    records: list[SampleRecord] = field(default_factory=list)


def _record(task_id: str, sample: int, run) -> SampleRecord:
    if run is None:
        return SampleRecord(task_id, sample, False, "no_code", 0.0, "no program")
    return SampleRecord(task_id, sample, run.passed, run.status, round(run.wall_s, 4), run.error)


def evaluate(
    rows: Sequence[Mapping],
    completions: Sequence[Sequence[str]],
    style: str,
    ks: Sequence[int] = (1,),
    pool: SandboxPool | None = None,
    plus: bool = False,
) -> EvalReport:
    """Test completions[i][j] (sample j of problem i) in `style`; pass@k averaged over problems.

    plus: also pass@k+ (`pass_plus`, and "pass@k+" per problem) on the MBPP rows' tests extended
    with calls the prompt does not show (corl.tasks.code_plus, as EvalPlus's MBPP+); empty when no
    row gets extra tests. pass@k stays lm-eval's, comparable with published numbers.
    """
    flat = [(i, j, program_for(row, c, style)) for i, row in enumerate(rows) for j, c in enumerate(completions[i])]
    results = run_tests([p for _, _, p in flat], [rows[i] for i, _, _ in flat], pool)
    report = EvalReport(pass_at={})
    passed_plus = _passed_plus(rows, flat, results, pool) if plus else None
    if passed_plus is not None:
        counts_plus = [0] * len(rows)
        for (i, _, _), ok in zip(flat, passed_plus):
            counts_plus[i] += ok
    counts = [[0, 0] for _ in rows]
    for (i, j, _), result in zip(flat, results):
        rec = _record(str(rows[i]["task_id"]), j, result)
        report.records.append(rec)
        counts[i][0] += 1
        counts[i][1] += rec.passed
    for row, (n, c) in zip(rows, counts):
        entry = {"task_id": str(row["task_id"]), "n": n, "c": c}
        entry.update({f"pass@{k}": pass_at_k(n, c, k) for k in ks if k <= n})
        report.per_problem.append(entry)
    if passed_plus is not None:
        for entry, c_plus in zip(report.per_problem, counts_plus):
            entry.update({f"pass@{k}+": pass_at_k(entry["n"], c_plus, k) for k in ks if k <= entry["n"]})
    for k in ks:
        scores = [p[f"pass@{k}"] for p in report.per_problem if f"pass@{k}" in p]
        report.pass_at[k] = sum(scores) / len(scores) if scores else 0.0
        if passed_plus is not None:
            scores = [p[f"pass@{k}+"] for p in report.per_problem if f"pass@{k}+" in p]
            report.pass_plus[k] = sum(scores) / len(scores) if scores else 0.0
    return report


def _passed_plus(rows: Sequence[Mapping], flat: list, results: list, pool: SandboxPool | None) -> list[bool] | None:
    """Per sample: passed its row's tests and the row's extra ones (only samples that passed are run again); None
    when no row has extra tests (HumanEval, rows without a reference `code`)."""
    from corl.tasks.code_plus import plus_tests

    extra = plus_tests(rows, pool)
    if not any(extra):
        return None
    plus_rows = [{**r, "test_list": list(r["test_list"]) + e} if e else r for r, e in zip(rows, extra)]
    passed = [r is not None and r.passed for r in results]
    again = [n for n, (i, _, _) in enumerate(flat) if passed[n] and extra[i]]
    for n, run in zip(again, run_tests([flat[n][2] for n in again], [plus_rows[flat[n][0]] for n in again], pool)):
        passed[n] = run is not None and run.passed
    return passed
