"""Code answers: extraction, public inputs, behaviour keys and votes over them, the hidden-test reward.

Expected values are written out by hand from the programs below; every key comes from a
real sandboxed run.
"""

from __future__ import annotations

import json

import pytest

from corl.labels import majority_vote
from corl.sandbox import SandboxPool
from corl.tasks.code import entry_point, extract_code, public_inputs, solution_program
from corl.tasks.code_exec import behaviour_key, code_answers, code_answers_grouped, passes_tests, passes_tests_batch

ADD = {
    "task_id": 900,
    "text": "Write a function to add two values.",
    "code": "def add(a, b):\n    return a + b",
    "test_list": ["assert add(1, 2) == 3", "assert add('a', 'b') == 'ab'", "assert add([1], [2]) == [1, 2]"],
    "test_setup_code": "",
}
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
    assert entry_point(ADD) == "add"
    assert public_inputs(ADD) == ["add(1, 2)", "add('a', 'b')", "add([1], [2])"]
    assert public_inputs(HE) == ["double([1, 2])", "double([])"]
    assert public_inputs({**ADD, "public_inputs": ["add(0, 0)"]}) == ["add(0, 0)"]
    wrapped = {
        **ADD,
        "test_list": ["assert math.isclose(add(0.1, 0.2), 0.3)"],
        "code": "import math\ndef add(a, b):\n    return a + b",
    }
    assert public_inputs(wrapped) == ["add(0.1, 0.2)"]


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


def test_timeouts_on_some_inputs_still_make_a_behaviour(pool):
    slow = fenced("def add(a, b):\n    if isinstance(a, list):\n        while True:\n            pass\n    return a + b")
    _, keys = code_answers([slow], ADD, pool=pool)
    assert json.loads(keys[0]) == [["ok", "3"], ["ok", "'ab'"], ["err", "TimeoutError"]]


def test_all_errors_count_when_asked(pool):
    _, keys = code_answers([fenced("def add(a, b):\n    raise KeyError")], ADD, pool=pool, all_errors_count=True)
    assert json.loads(keys[0]) == [["err", "KeyError"]] * 3


def test_behaviour_key_reads_only_this_runs_lines_and_names_how_a_run_ended():
    from corl.sandbox import Status
    from corl.tasks.code_harness import MARK

    nonce = "ab" * 16
    out = f"hello\n{MARK}{nonce} 0 ok 1\n{MARK}{'cd' * 16} 1 ok 2\n{MARK}{nonce} garbage\n"  # input 1's line: another nonce
    assert json.loads(behaviour_key(out, nonce, 2)) == [["ok", "1"], ["err", "EarlyExit"]]
    assert json.loads(behaviour_key(out, nonce, 2, Status.TIMEOUT)) == [["ok", "1"], ["err", "TimeoutError"]]
    assert behaviour_key(f"{MARK}{nonce} -1 err NameError\n", nonce, 2) is None
    assert behaviour_key("", nonce, 0) is None


def test_a_test_run_passes_only_on_one_verdict_with_its_pass_token():
    from corl.sandbox import Result, Status
    from corl.tasks.code_exec import test_outcome
    from corl.tasks.code_harness import MARK

    nonce, token = "ab" * 16, "cd" * 16

    def run(*payloads: str, status: Status = Status.OK) -> Result:
        return Result(status, 0, "".join(f"\n{MARK}{nonce} {p}\n" for p in payloads), "", 0.1)

    assert test_outcome(run(f"pass {token}"), nonce, token).passed
    assert not test_outcome(run("pass " + "0" * 32), nonce, token).passed  # the nonce without the token
    assert not test_outcome(run("fail AssertionError", f"pass {token}"), nonce, token).passed  # two verdicts
    assert (
        test_outcome(run("fail ZeroDivisionError: division by zero"), nonce, token).error == "ZeroDivisionError: division by zero"
    )
    ended = test_outcome(run(), nonce, token)
    assert (ended.passed, ended.status) == (False, "exit")  # no verdict at all: an exit before the tests ended
    assert test_outcome(run(status=Status.TIMEOUT), nonce, token).status == "timeout"


def test_humaneval_docstring_behaviour_and_grouped_form(pool):
    texts = [
        "    return [2 * x for x in xs]\n",
        fenced("def double(xs):\n    return xs + xs"),
        fenced("def double(xs):\n    return [x * 2 for x in xs]"),
    ]
    answers, keys = code_answers_grouped(texts, [HE], k=3, pool=pool)
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
