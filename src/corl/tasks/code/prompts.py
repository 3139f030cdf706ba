"""HumanEval / MBPP rows and the prompts lm-evaluation-harness renders for them, and the program it tests.

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
from collections.abc import Mapping, Sequence
from pathlib import Path

from corl.tasks.code.programs import extract_code

HUMANEVAL_STOP = ("\nclass", "\ndef", "\n#", "\nif", "\nprint")
MBPP_STOP = ("[DONE]",)
STYLES = ("humaneval", "humaneval_instruct", "mbpp", "mbpp_instruct")
HUMANEVAL_FIELDS = ("task_id", "prompt", "canonical_solution", "test", "entry_point")
MBPP_FIELDS = ("task_id", "text", "code", "test_list")


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
