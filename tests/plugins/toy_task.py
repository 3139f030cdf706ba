"""A task kind from outside corl (docs/architecture.md, "Add a task kind").

`last_number`: a completion's answer is the last integer it writes (no \\boxed{} needed);
answers agree when they are the same integer. It grades validation against the answer
column, refuses a run without one, and `corl eval` scores it as math.
"""

from __future__ import annotations

import re

from corl.tasks import TaskSpec, register_task

INTEGER = re.compile(r"-?\d+")
EXTRACTED: list[int] = []  # completions it read: evidence that the loop used it


def last_integer(text: str) -> str | None:
    found = INTEGER.findall(text)
    return str(int(found[-1])) if found else None


def answers(texts, problems, k):
    """[B*K] completions -> ([B][K] answers, [B][K] vote keys)."""
    EXTRACTED.append(len(texts))
    written = [last_integer(t) for t in texts]
    groups = [tuple(written[b * k : (b + 1) * k]) for b in range(len(problems))]
    return groups, groups


def grade(texts, problems, rows, gold):
    """[B] greedy completions -> [B] whether each one's last integer is the gold answer."""
    return [
        last_integer(t) is not None and g is not None and last_integer(t) == last_integer(str(g)) for t, g in zip(texts, gold)
    ]


def check_config(cfg) -> None:
    if cfg.data.val and not cfg.data.answer_field:
        raise ValueError("data.task 'last_number' validates against an answer column: set data.answer_field")


register_task(
    TaskSpec(
        "last_number",
        answers,
        equivalent=lambda a, b: a == b,
        key=lambda answer: last_integer(answer) or answer,
        description="the last integer a completion writes, integer equality",
        grade=grade,
        check_config=check_config,
        evaluate_as="math",
    )
)
