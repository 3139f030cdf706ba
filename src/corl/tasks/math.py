"""The math task kind: the answer is the completion's final stated answer (`corl.answers`).

A multiple-choice row (its options in Problem.inputs["options"], option A first) answers
with the letter it picks: "\\boxed{C}", "(C)", "option C" and option C's value are one
answer and one vote (`corl.answers.choice`); a gold letter then agrees with either form.
"""

from __future__ import annotations

from collections.abc import Sequence

from corl.answers import answer_key, extract_answer, is_equivalent
from corl.answers.choice import choice_key, choice_letter_or_answer
from corl.data.rows import OPTIONS_INPUT
from corl.tasks.registry import TaskSpec, register_task


def completion_answer(text: str, options: Sequence[str] | None = None, mode: str = "strict") -> tuple[str | None, str | None]:
    """(answer as written, vote key) of one completion; with options the answer is the picked letter.
    `mode`: the extraction mode of `corl.answers.extract_answer` (strict: the reward policy)."""
    if options:
        answer = choice_letter_or_answer(text, options, mode)  # a value that is no option still votes
        return answer, choice_key(answer, options) if answer is not None else None
    answer = extract_answer(text, mode)
    return answer, answer_key(answer) if answer is not None else None


def math_answers(texts: Sequence[str], problems: Sequence, k: int) -> tuple[list[tuple], list[tuple]]:
    """[B*K] completions -> ([B][K] answers as written, [B][K] vote keys); None = no answer."""
    answers, keys = [], []
    for b, problem in enumerate(problems):
        options = problem.inputs.get(OPTIONS_INPUT) if hasattr(problem, "inputs") else None
        pairs = [completion_answer(t, options) for t in texts[b * k : (b + 1) * k]]
        answers.append(tuple(a for a, _ in pairs))
        keys.append(tuple(key for _, key in pairs))
    return answers, keys


def math_grade(texts: Sequence[str], problems: Sequence, rows: Sequence, gold: Sequence[str | None]) -> list[bool]:
    """[B] completions -> [B] whether each one's final answer is equivalent to its gold answer."""
    out = []
    for text, problem, answer in zip(texts, problems, gold, strict=True):
        written, _ = completion_answer(text, problem.inputs.get(OPTIONS_INPUT) if hasattr(problem, "inputs") else None)
        out.append(written is not None and answer is not None and is_equivalent(written, answer))
    return out


register_task(
    TaskSpec(
        "math",
        math_answers,
        is_equivalent,
        answer_key,
        "final stated answer, mathematical equivalence (the picked option's letter on multiple-choice rows)",
        input_fields=(OPTIONS_INPUT,),
        grade=math_grade,
    )
)
