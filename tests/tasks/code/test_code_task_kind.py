"""The `code` task kind and the `tests` reward as the loop sees them: rows through the code: source,
Problem.inputs with calls only, behaviour keys as answers, peer labels and agreement rewards, hidden tests."""

from __future__ import annotations

import json

import pytest
import torch

from corl.data.rows import DataError, Problem, build_problems, load_rows
from corl.labels import AnswersTable, peer_labels
from corl.rewards import agreement_rewards, reward_spec
from corl.tasks import task_spec
from corl.tasks.code.inputs import N_MUTANTS
from corl.tasks.code.prompts import mbpp_prompt
from corl.tasks.code.task import INPUT_FIELDS, code_task_answers, completion_code, prepare_row, public_view
from tests.helpers import SHARED_DATA

ADD = {
    "task_id": 7,
    "text": "Add two numbers.",
    "code": "def add(a, b):\n    return a + b",
    "test_list": ["assert add(1, 2) == 3", "assert add(0, 5) == 5"],
    "test_setup_code": "",
}
HUMANEVAL = {
    "task_id": "HumanEval/x",
    "prompt": 'def inc(x: int) -> int:\n    """Add one.\n    >>> inc(1)\n    2\n    >>> inc(-1)\n    0\n    """\n',
    "canonical_solution": "    return x + 1\n",
    "test": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(9) == 10\n",
    "entry_point": "inc",
}
needs_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"benchmark data folder {SHARED_DATA} is absent")


def key(*values: str) -> str:
    """The behaviour key of a program whose calls returned these reprs (corl.tasks.code.execute's format)."""
    return json.dumps([["ok", v] for v in values])


def key_of(fn, name: str, calls: list[str]) -> str:
    """The key a program computing `fn` must have on `calls` (int results: their repr is their key text)."""
    return key(*(repr(eval(call, {name: fn})) for call in calls))


def problems_of(rows: list[dict]) -> list[Problem]:
    """Rows as the loop builds them: prepared (the code: source), then only the task's input fields kept."""
    prepared = [{**prepare_row(r), "prompt_text": r.get("text") or r.get("prompt")} for r in rows]
    return build_problems(prepared, "t", ["prompt_text"], id_field="task_id", input_fields=task_spec("code").input_fields)[0]


def test_problem_inputs_hold_calls_not_expected_values_nor_the_solution():
    (problem,) = problems_of([ADD])
    # Exactly the four public fields: the asserts' *calls*, never "== 3"; the reference
    # solution only lends its function name.
    calls = problem.inputs["code_public_inputs"]
    assert problem.inputs == {"code_entry_point": "add", "code_public_inputs": calls, "code_prefix": "", "code_setup": ""}
    assert calls[-2:] == ["add(1, 2)", "add(0, 5)"] and len(calls) == 2 + N_MUTANTS  # mutants first (corl.tasks.code.inputs)
    assert "==" not in json.dumps(problem.inputs) and "return" not in json.dumps(problem.inputs)


def test_prepare_row_reads_sanitized_mbpp_and_humaneval():
    sanitized = {"prompt": "Root.", "code": "import math\ndef root(x):\n    return math.sqrt(x)", "test_imports": ["import math"],
                 "test_list": ["assert math.isclose(root(4), 2)"]}  # fmt: skip
    row = prepare_row(sanitized)
    # the task text is `prompt` here: it must not become code_prefix (it would be prefixed to the program)
    assert (row["code_entry_point"], row["code_public_inputs"][-1], row["code_prefix"], row["code_setup"]) == (
        "root", "root(4)", "", "import math"
    )  # fmt: skip
    assert row["prompt_mbpp"].startswith("You are an expert Python programmer, and here is your task: Root. Your code")
    he = prepare_row(HUMANEVAL)
    assert he["code_public_inputs"][-2:] == ["inc(1)", "inc(-1)"]  # the docstring's examples, after their mutants
    assert he["code_prefix"] == he["prompt_humaneval"] == HUMANEVAL["prompt"]
    assert he["prompt_humaneval_instruct"].startswith("Write a solution to the following problem and make sure")


def test_prepare_row_names_the_row_that_is_not_code():
    with pytest.raises(DataError, match=r"row 3: not a code problem.*columns: answer, problem"):
        prepare_row({"problem": "1+1?", "answer": "2"}, where="row 3")


@needs_data
def test_code_source_renders_lm_eval_mbpp_prompt_with_its_three_shots():
    train, shots = SHARED_DATA / "mbpp" / "train.jsonl", SHARED_DATA / "mbpp" / "prompt.jsonl"
    rows = load_rows(f"code:{train}:{shots}")
    raw = [json.loads(line) for line in train.read_text().splitlines()]
    shot_rows = {r["task_id"]: r for r in map(json.loads, shots.read_text().splitlines())}
    assert len(rows) == len(raw) == 374
    assert rows[5]["prompt_mbpp"] == mbpp_prompt(raw[5], [shot_rows[2], shot_rows[3], shot_rows[4]])
    assert rows[5]["prompt_mbpp"].count("[DONE]") == 3 and rows[5]["prompt_mbpp"].endswith("[BEGIN]\n")
    assert all(r["code_public_inputs"] and r["code_entry_point"] for r in rows)
    with pytest.raises(DataError, match="code:<file>"):
        load_rows("code:/nonexistent/mbpp.jsonl")


def test_answers_are_behaviour_keys_and_none_without_a_program():
    (problem,) = problems_of([ADD])
    texts = [
        "```python\ndef add(a, b):\n    return a + b\n```",  # fenced, correct
        "def add(x, y):\n    return y + x\n[DONE]\nmore text",  # lm-eval mbpp style: cut at [DONE]; same behaviour
        "def add(a, b):\n    return a - b",  # another behaviour
        "I cannot write code.",  # prose: no program
        "def add(a, b):\n    return 1 / 0",  # every input errors: no answer
        "def plus(a, b):\n    return a + b",  # the entry point is missing
    ]
    answers, keys = code_task_answers(texts, [problem], k=len(texts))
    calls = problem.inputs["code_public_inputs"]
    plus, minus = key_of(lambda a, b: a + b, "add", calls), key_of(lambda a, b: a - b, "add", calls)
    assert keys == [(plus, plus, minus, None, None, None)]
    assert answers == keys  # an answer is its behaviour key
    spec = task_spec("code")
    assert spec.equivalent(plus, plus) and not spec.equivalent(plus, minus)
    assert not spec.equivalent(None, None) and spec.key(key("3")) == key("3")


def test_humaneval_continuation_is_cut_at_a_stop_sequence():
    view = public_view(prepare_row(HUMANEVAL))
    text = "    return x + 1\n\nprint(inc(1)"  # a base model runs on past the function; the tail does not parse
    assert completion_code(text, view) == "    return x + 1\n"
    (problem,) = problems_of([HUMANEVAL])
    _, keys = code_task_answers([text, "    return x + 2\n"], [problem], k=2)
    calls = problem.inputs["code_public_inputs"]
    assert keys == [(key_of(lambda x: x + 1, "inc", calls), key_of(lambda x: x + 2, "inc", calls))]


def test_peer_labels_and_agreement_rewards_on_code_answers():
    (problem,) = problems_of([ADD])
    good, bad = "def add(a, b):\n    return a + b", "def add(a, b):\n    return a * b"
    a0 = code_task_answers([good, good, bad], [problem], 3)  # agent 0: majority = good's behaviour
    a1 = code_task_answers([bad, bad, good], [problem], 3)  # agent 1: majority = bad's behaviour
    table = AnswersTable(("7",), (tuple(a0[0]), tuple(a1[0])), (tuple(a0[1]), tuple(a1[1])))
    labels = peer_labels(table)  # ring: agent 1 is taught by agent 0, agent 0 by agent 1
    calls = problem.inputs["code_public_inputs"]
    assert labels[1][0].key == key_of(lambda a, b: a + b, "add", calls) and labels[0][0].key == key_of(
        lambda a, b: a * b, "add", calls
    )
    spec = task_spec("code")
    r1 = agreement_rewards(a1[0], a1[1], labels[1], spec.equivalent)
    r0 = agreement_rewards(a0[0], a0[1], labels[0], spec.equivalent)
    assert r1.tolist() == [[0.0, 0.0, 1.0]] and r0.tolist() == [[0.0, 0.0, 1.0]]


def test_tests_reward_runs_the_hidden_tests():
    spec = reward_spec("tests")
    assert spec.reads_gold and not spec.binary
    he_ok, he_bad = "    return x + 1\n", "    return x\n"
    sanitized = {"prompt": "Root.", "code": "", "test_imports": ["import math"], "test_list": ["assert math.isclose(root(4), 2)"]}
    texts = [
        "def add(a, b):\n    return a + b\n[DONE]",
        "def add(a, b):\n    return a * b",  # passes neither assert... add(0, 5) == 0
        he_ok,
        he_bad,
        "def root(x):\n    return x ** 0.5",  # needs the sanitized row's test_imports (math) to pass
        "no code here",
    ]
    # raw rows (prepared on the fly) and a row through the code: source give the same rewards
    rewards = spec.from_gold(texts, [ADD, HUMANEVAL, sanitized], 2)
    assert rewards.dtype == torch.float32 and rewards.tolist() == [[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]
    assert spec.from_gold(texts[:2], [prepare_row(ADD)], 2).tolist() == [[1.0, 0.0]]


def test_answers_refuse_problems_loaded_without_the_code_source():
    problem = Problem("mbpp/7", {"problem": "Add."}, inputs={})
    with pytest.raises(DataError, match=r"'mbpp/7'.*code:<file>"):
        code_task_answers(["def add(a, b): return a + b"], [problem], 1)
    assert set(INPUT_FIELDS) == set(task_spec("code").input_fields)


@needs_data
def test_real_model_code_config_loads_its_rows_and_prompt_fields(monkeypatch, tmp_path):
    from pathlib import Path

    from corl.config import load_config

    root = Path(__file__).resolve().parents[3]
    # the config reads data/ (as `corl data` writes it) relative to where corl runs: here, the shared copy
    (tmp_path / "data").symlink_to(SHARED_DATA.resolve())
    monkeypatch.chdir(tmp_path)
    cfg = load_config(root / "configs" / "code-mbpp-qwen-llama.yaml")
    assert (cfg.data.task, cfg.data.answer_field) == ("code", None)
    rows = load_rows(cfg.data.train)
    assert len(rows) == 374 and all(cfg.prompt_field(a) in rows[0] for a in cfg.agents)
    assert rows[0]["prompt_mbpp"].count("[DONE]") == 3  # the 3 lm-eval shots came along
    assert load_config(root / "configs" / "code-mbpp-qwen-llama.yaml", ["cohort.reward=tests"]).cohort.reward == "tests"
