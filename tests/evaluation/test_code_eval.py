"""Code evaluation: pass@k by hand, prompts in lm-eval's conventions, reference solutions at 100%."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from corl.evaluation.code_eval import evaluate, pass_at_k
from corl.sandbox import SandboxPool
from corl.tasks.code.prompts import (
    humaneval_instruct,
    load_humaneval,
    load_mbpp,
    mbpp_instruct,
    mbpp_prompt,
    program_for,
    reference_solution,
)

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"benchmark data folder {DATA} is absent")


def test_pass_at_k_by_hand():
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(5, 4, 2) == 1.0  # every pair holds a correct sample
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(200, 13, 100) == pytest.approx(1 - math.comb(187, 100) / math.comb(200, 100))
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_evaluate_counts_and_records(tmp_path):
    row = {"task_id": 1, "text": "Add.", "code": "def add(a, b):\n    return a + b", "test_list": ["assert add(1, 2) == 3"]}
    good, bad = "def add(a, b):\n    return a + b\n[DONE]", "def add(a, b):\n    return a - b\n[DONE]"
    with SandboxPool(workers=2) as pool:
        report = evaluate([row, row], [[good, bad, good], [bad, bad, "1/0"]], "mbpp", ks=(1, 2), pool=pool)
    assert [(p["n"], p["c"]) for p in report.per_problem] == [(3, 2), (3, 0)]
    assert report.pass_at[1] == pytest.approx((2 / 3 + 0) / 2)
    assert report.pass_at[2] == pytest.approx((1.0 + 0) / 2)  # 1 - C(1,2)/C(3,2) = 1
    failed = [r for r in report.records if not r.passed]
    assert {r.error.split(":")[0] for r in failed} == {"AssertionError", "ZeroDivisionError"}


def test_mbpp_prompt_matches_lm_eval_template():
    row = {
        "text": "Add two numbers.",
        "code": "def add(a, b):\n    return a + b",
        "test_list": ["assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert add(2, 2) == 4"],
    }
    expected = (
        "You are an expert Python programmer, and here is your task: Add two numbers. Your code should pass these tests:\n\n"
        "assert add(1, 2) == 3\nassert add(0, 0) == 0\nassert add(2, 2) == 4\n[BEGIN]\n"
    )
    assert mbpp_prompt(row) == expected
    assert mbpp_prompt(row, fewshot=[row]) == expected + "def add(a, b):\n    return a + b\n[DONE]\n\n" + expected
    messages, prefix = mbpp_instruct(row)
    assert messages[-1]["content"].startswith("You are an expert Python programmer, and here is your task:\nAdd two numbers.\n")
    assert prefix == "\n```python\n"
    assert (
        program_for(row, "def add(a, b):\n    return a + b\n```\nexplanation", "mbpp_instruct")
        == "def add(a, b):\n    return a + b"
    )


def test_humaneval_instruct_and_stop_sequences():
    row = {"prompt": "def f():\n    ", "entry_point": "f"}
    messages, prefix = humaneval_instruct(row)
    assert messages[0]["content"].endswith("```python\ndef f():\n    \n```\n")
    assert prefix == "Here is the completed function:\n```python\ndef f():\n    \n"
    assert program_for(row, "return 1\n\nprint(f())", "humaneval") == "def f():\n    return 1\n"
    assert program_for(row, "return 1\n```\nbye", "humaneval_instruct") == "def f():\n    return 1\n"


def test_chat_prompt_uses_the_template():
    from corl.tasks.code.prompts import chat_prompt

    class Template:
        def apply_chat_template(self, messages, tokenize, add_generation_prompt):
            assert tokenize is False and add_generation_prompt is True
            return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"

    assert chat_prompt(Template(), [{"role": "user", "content": "hi"}], "```python\n") == "<user>hi<assistant>```python\n"


@needs_data
def test_reference_solutions_pass_the_harness():
    """HumanEval canonical 164/164 and every 4th MBPP problem's test reference code (125) through the judge
    (a check of the judge, not a model), MBPP's also on its extra tests (pass@1+). All 500 MBPP problems run
    in benchmarks/code_reference.py (500/500, 60 s limit); here a fixed quarter of them, for a quarter of the
    CI time. Only a timeout may fail: an MBPP program can pass 15 s on a loaded machine."""
    humaneval, mbpp = load_humaneval(DATA / "humaneval" / "test.jsonl"), load_mbpp(DATA / "mbpp" / "test.jsonl")
    assert (len(humaneval), len(mbpp)) == (164, 500)
    mbpp = mbpp[::4]
    start = time.monotonic()
    with SandboxPool() as pool:
        he = evaluate(humaneval, [[reference_solution(r)] for r in humaneval], "humaneval", pool=pool)
        mb = evaluate(mbpp, [[reference_solution(r) + "\n[DONE]"] for r in mbpp], "mbpp", pool=pool, plus=True)
    failed = [(r.task_id, r.status, r.error) for r in he.records + mb.records if not r.passed]
    assert sum(p["c"] for p in he.per_problem) == 164, failed
    assert [f for f in failed if f[1] != "timeout"] == [], failed
    assert mb.pass_at[1] >= 0.99, failed
    # The extra tests (corl.tasks.code.plus: the vote's mutants and the domain walk) hold the references' own answers.
    assert mb.pass_plus[1] >= mb.pass_at[1] - 0.01, [p["task_id"] for p in mb.per_problem if p["pass@1+"] < p["pass@1"]]
    print(f"reference solutions: HumanEval {he.pass_at[1]:.3f}, MBPP {mb.pass_at[1]:.3f} in {time.monotonic() - start:.1f}s")
