"""Each task kind grades validation its own way (`TaskSpec.grade`): math by the final answer,
code by the row's hidden tests, run in the sandbox."""

from __future__ import annotations

from corl.data.rows import OPTIONS_INPUT, Problem
from corl.tasks import task_spec

MBPP_ROW = {"text": "add one", "code": "def f(x): return x+1", "test_list": ["assert f(1) == 2", "assert f(5) == 6"]}


def test_math_grades_the_final_answer_against_the_gold_one():
    plain, choice = Problem("p", {"problem": "2+2"}), Problem("q", {"problem": "pick"}, {OPTIONS_INPUT: ["3", "5", "12"]})
    texts = ["so \\boxed{4}", "so \\boxed{5}", "no answer here", "the answer is \\boxed{12}", "\\boxed{4}"]
    problems = [plain, plain, plain, choice, plain]
    gold = ["4", "4", "4", "C", None]  # option C is 12; a row without an answer is never correct
    assert task_spec("math").grade(texts, problems, [{}] * 5, gold) == [True, False, False, True, False]
    assert task_spec("math").grades_answers


def test_code_grades_by_the_hidden_tests_not_by_an_answer():
    texts = [
        "```python\ndef f(x):\n    return x + 1\n```",  # passes both asserts
        "```python\ndef f(x):\n    return x + 2\n```",  # runs, fails them
        "\\boxed{2}",  # a math answer is no program
    ]
    problem = Problem("0", {"text": MBPP_ROW["text"]})
    assert task_spec("code").grade(texts, [problem] * 3, [MBPP_ROW] * 3, [None] * 3) == [True, False, False]
    assert not task_spec("code").grades_answers  # a code validation set needs no answer column


def test_a_training_step_counts_the_checks_that_had_no_verdict(tiny_models, tiny_data, tmp_path):
    """Issue 41: a math check past the grader's last wall guard is unknown, not False; every step's
    metrics say how many there were since the last step (`grading/unknown`, 0 when none)."""
    from corl.answers import unknown_checks, verdict
    from corl.config import validate_config
    from corl.trainer import CohortTrainer
    from tests.helpers import tiny_config

    trainer = CohortTrainer(validate_config(tiny_config(tmp_path, tiny_models, tiny_data)))
    unknown_checks()  # start from zero
    assert verdict("\\sum_{k=1}^{10} k", "55", timeout=1e-6) is None  # a symbolic check with no time at all
    assert trainer.step(0)["grading/unknown"] == 1.0
    assert trainer.step(1)["grading/unknown"] == 0.0
