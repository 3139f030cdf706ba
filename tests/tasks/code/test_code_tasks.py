"""Code answers: extraction, public inputs, behaviour keys and votes over them, the hidden-test reward.

Expected values are written out by hand from the programs below; every key comes from a
real sandboxed run.
"""

from __future__ import annotations

import ast
import json
import random

import pytest

from corl.labels import majority_vote
from corl.sandbox import SandboxPool
from corl.tasks.code.execute import behaviour_key, code_answers, code_answers_grouped, passes_tests, passes_tests_batch
from corl.tasks.code.inputs import N_MUTANTS, mutate
from corl.tasks.code.programs import entry_point, extract_code, public_inputs, shown_calls, solution_program

SHOWN = {
    "task_id": 900,
    "text": "Write a function to add two values.",
    "code": "def add(a, b):\n    return a + b",
    "test_list": ["assert add(1, 2) == 3", "assert add('a', 'b') == 'ab'", "assert add([1], [2]) == [1, 2]"],
    "test_setup_code": "",
}
ADD = {**SHOWN, "public_inputs": ["add(1, 2)", "add('a', 'b')", "add([1], [2])"]}  # keys by hand on known inputs
HE = {
    "task_id": "HumanEval/900",
    "prompt": 'from typing import List\n\n\ndef double(xs: List[int]) -> List[int]:\n    """Double each.\n    >>> double([1, 2])\n    [2, 4]\n    >>> double([])\n    []\n    """\n',
    "canonical_solution": "    return [2 * x for x in xs]\n",
    "test": "def check(candidate):\n    assert candidate([3]) == [6]\n    assert candidate([]) == []\n",
    "entry_point": "double",
}


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(workers=2) as p:
        yield p


def fenced(code: str, tag: str = "python") -> str:
    return f"Here is my solution:\n```{tag}\n{code}\n```\nIt adds them."


def test_extract_takes_the_last_python_block():
    text = "```python\ndef add(a, b):\n    return 0\n```\nbetter:\n```python\ndef add(a, b):\n    return a + b\n```\n```text\nnot code\n```"
    assert extract_code(text) == "def add(a, b):\n    return a + b"


def test_extract_bare_code_unclosed_fence_opened_fence_and_prose():
    assert extract_code("def f():\n    return 1") == "def f():\n    return 1"
    assert extract_code("```python\ndef f():\n    return 2") == "def f():\n    return 2"  # truncated generation
    assert extract_code("def f():\n    return 3\n```\nDone.", opened_fence=True) == "def f():\n    return 3"
    assert extract_code("```\nx = 1\n```") == "x = 1"  # untagged block when none is tagged python
    assert extract_code("The answer is to add them.") is None
    assert extract_code("") is None


def test_entry_point_and_public_inputs():
    assert entry_point(SHOWN) == "add"
    assert shown_calls(SHOWN) == ["add(1, 2)", "add('a', 'b')", "add([1], [2])"]
    assert shown_calls(HE) == ["double([1, 2])", "double([])"]
    assert public_inputs({**SHOWN, "public_inputs": ["add(0, 0)"]}) == ["add(0, 0)"]
    wrapped = {
        **SHOWN,
        "test_list": ["assert math.isclose(add(0.1, 0.2), 0.3)"],
        "code": "import math\ndef add(a, b):\n    return a + b",
    }
    assert shown_calls(wrapped) == ["add(0.1, 0.2)"]


def test_public_inputs_are_mutants_of_the_shown_calls_then_the_shown_calls():
    inputs = public_inputs(SHOWN)
    shown = shown_calls(SHOWN)
    assert inputs == public_inputs(dict(SHOWN))  # deterministic
    assert inputs[-3:] == shown and len(inputs) == 3 + N_MUTANTS
    mutants = inputs[:-3]
    assert not set(mutants) & set(shown) and len(set(mutants)) == N_MUTANTS
    kinds = {"add(1, 2)": (int, int), "add('a', 'b')": (str, str), "add([1], [2])": (list, list)}
    for call in mutants:  # every mutant keeps the types of one shown call's arguments
        args = tuple(type(ast.literal_eval(a)) for a in ast.parse(call, mode="eval").body.args)
        assert args in kinds.values(), call
    assert public_inputs({**SHOWN, "test_list": ["assert add(x, 2) == 3"]}) == ["add(x, 2)"]  # no literal: shown only


def test_mutations_keep_types_and_move_by_small_steps():
    rng = random.Random(0)
    for value in (5, -3, 2.5, "abc", "", [1, 2, 3], (1, "x"), {"a": 1}, True, None, [[1, 2], [3]]):
        for _ in range(20):
            m = mutate(value, rng)
            assert type(m) is type(value)
            if type(value) is int:
                assert 0 < abs(m - value) <= 3
            if type(value) is str:
                assert abs(len(m) - len(value)) <= 1 and set(m) <= set(value or "a")
            if type(value) is list and value and type(value[0]) is int:
                assert abs(len(m) - len(value)) <= 1 and all(type(x) is int for x in m)


def test_solution_program_needs_the_entry_point():
    assert solution_program(fenced("def plus(a, b):\n    return a + b"), ADD) is None
    assert solution_program("    return [2 * x for x in xs]\n", HE) == HE["prompt"] + "    return [2 * x for x in xs]\n\n"
    assert solution_program(fenced("def double(xs):\n    return xs"), HE).startswith("from typing import List")


def test_behaviour_keys_by_hand(pool):
    texts = [
        fenced("def add(a, b):\n    return a + b"),  # 3, 'ab', [1, 2]
        "def add(a, b):\n    return b + a",  # 3, 'ba', [2, 1]
        fenced("def add(a, b):\n    return int(a) + int(b)"),  # 3, ValueError, TypeError
        fenced("def add(a, b):\n    while True:\n        pass"),  # loops on every input: only errors -> None
        fenced("def plus(a, b):\n    return a + b"),  # no entry point -> None
        "I would add them.",  # no code -> None
        fenced("def add(a, b):\n    print('noise')\n    return a + b"),  # same behaviour as the first; prints are not answers
    ]
    answers, keys = code_answers(texts, ADD, pool=pool)
    assert json.loads(keys[0]) == [["ok", "3"], ["ok", "'ab'"], ["ok", "[1, 2]"]]
    assert json.loads(keys[1]) == [["ok", "3"], ["ok", "'ba'"], ["ok", "[2, 1]"]]
    assert json.loads(keys[2]) == [["ok", "3"], ["err", "ValueError"], ["err", "TypeError"]]
    assert keys[3:6] == [None, None, None] and answers[3:6] == [None, None, None]
    assert keys[6] == keys[0] and answers[6] is not None
    vote = majority_vote(keys, answers)
    assert (vote.key, vote.count, vote.total) == (keys[0], 2, 7)
    assert vote.answer == answers[0]


def test_a_timeout_on_one_input_costs_that_input_and_leaves_no_vote_answer(pool):
    """The tests ask a timed-out call again (a slow call may finish within their wall), so a key holding a timeout
    could not be held to what the tests check: it is no answer. The other inputs still answer (the plus tests'
    reference runs keep them)."""
    from corl.tasks.code import stub
    from corl.tasks.code.execute import behaviour_job, behaviour_limits, judge

    slow = "def add(a, b):\n    if isinstance(a, list):\n        while True:\n            pass\n    return a + b"
    _, keys = code_answers([fenced(slow)], ADD, pool=pool)
    assert keys == [None]
    verdict, _ = judge(stub.program(slow + "\n"), behaviour_job(ADD["public_inputs"], ADD), behaviour_limits(3), pool)
    assert verdict["outcome"] == [["ok", "3"], ["ok", "'ab'"], ["err", "TimeoutError"]]


def test_all_errors_count_when_asked(pool):
    texts = [fenced("def add(a, b):\n    raise KeyError"), fenced("undefined_name\ndef add(a, b):\n    return a + b")]
    _, keys = code_answers(texts, ADD, pool=pool, all_errors_count=True)
    assert json.loads(keys[0]) == [["err", "KeyError"]] * 3
    assert json.loads(keys[1]) == [["err", "NameError"]] * 3  # the solution did not load: every input reads so


def test_behaviour_key_from_the_judges_outcome():
    assert json.loads(behaviour_key({"outcome": [["ok", "1"], ["err", "EarlyExit"]]}, 2)) == [["ok", "1"], ["err", "EarlyExit"]]
    assert behaviour_key({"outcome": [["err", "NameError"]] * 2}, 2) is None  # only errors: no answer
    assert (
        json.loads(behaviour_key({"outcome": [["err", "NameError"]] * 2}, 2, all_errors_count=True)) == [["err", "NameError"]] * 2
    )
    assert json.loads(behaviour_key({"status": "judge"}, 2, all_errors_count=True)) == [["err", "Judge"]] * 2
    assert behaviour_key({"outcome": []}, 0) is None


def test_a_test_run_passes_only_on_the_judges_ok():
    from corl.sandbox import Result, Status
    from corl.tasks.code.execute import test_outcome

    ended = Result(Status.OK, 0, "", "", 0.1)
    assert test_outcome({"status": "ok"}, ended).passed
    assert not test_outcome({"status": "pass"}, ended).passed
    failed = test_outcome({"status": "error", "error": "ZeroDivisionError: division by zero"}, ended)
    assert (failed.passed, failed.status, failed.error) == (False, "error", "ZeroDivisionError: division by zero")
    assert test_outcome({"status": "exit", "error": "gone"}, ended).status == "exit"
    killed = test_outcome({"status": "exit", "error": "gone"}, Result(Status.KILLED, -9, "", "", 0.1, "SIGKILL"))
    assert (killed.passed, killed.status) == (False, "killed")  # an exit the sandbox saw as a kill is named so
    assert test_outcome({}, ended).status == "judge"


def test_humaneval_docstring_behaviour_and_grouped_form(pool):
    texts = [
        "    return [2 * x for x in xs]\n",
        fenced("def double(xs):\n    return xs + xs"),
        fenced("def double(xs):\n    return [x * 2 for x in xs]"),
    ]
    answers, keys = code_answers_grouped(texts, [{**HE, "public_inputs": shown_calls(HE)}], k=3, pool=pool)
    assert json.loads(keys[0][0]) == [["ok", "[2, 4]"], ["ok", "[]"]]
    assert json.loads(keys[0][1]) == [["ok", "[1, 2, 1, 2]"], ["ok", "[]"]]
    assert keys[0][2] == keys[0][0] and len(answers[0]) == 3


def test_passes_tests_gold_reward(pool):
    assert passes_tests(fenced("def add(a, b):\n    return a + b"), ADD, pool=pool)
    assert not passes_tests("def add(a, b):\n    return b + a", ADD, pool=pool)
    assert not passes_tests("no code here", ADD, pool=pool)
    batch = passes_tests_batch(["    return [2 * x for x in xs]\n", "    return xs\n"], [HE, HE], pool=pool)
    assert batch == [True, False]


def test_main_block_of_a_solution_does_not_run(pool):
    # A solution's `if __name__ == "__main__": input()` would block or crash a script; it is defined, not run.
    text = fenced("def add(a, b):\n    return a + b\nif __name__ == '__main__':\n    print(input())")
    assert passes_tests(text, ADD, pool=pool)
