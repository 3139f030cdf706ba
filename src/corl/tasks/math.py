"""The math task kind: the answer is the completion's final stated answer (`corl.answers`)."""

from __future__ import annotations

from collections.abc import Sequence

from corl.answers import answer_key, extract_answer, is_equivalent
from corl.tasks.registry import TaskSpec, register_task


def math_answers(texts: Sequence[str], problems: Sequence, k: int) -> tuple[list[tuple], list[tuple]]:
    """[B*K] completions -> ([B][K] answers as written, [B][K] vote keys); None = no answer."""
    answers = [extract_answer(t) for t in texts]
    keys = [answer_key(a) if a is not None else None for a in answers]
    groups = len(texts) // k
    return (
        [tuple(answers[b * k : (b + 1) * k]) for b in range(groups)],
        [tuple(keys[b * k : (b + 1) * k]) for b in range(groups)],
    )


register_task(TaskSpec("math", math_answers, is_equivalent, answer_key, "final stated answer, mathematical equivalence"))
