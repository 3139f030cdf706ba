"""Final answers of math completions: extract them, key them for votes, grade them.

* `extract_answer(text, mode="strict")` (`extract`): what did the completion commit to?
* `answer_key(answer)` (`keys`): which vote does it count for? A canonical string from
  string rewrites and exact rationals: tens of microseconds, deterministic, never raises;
  equal keys imply `is_equivalent`.
* `is_equivalent(pred, gold)` (`equivalence`): does the prediction earn the reward? Keys,
  structure, exact numbers and the fast reader (`reader`), then math-verify in a pebble
  pool under a budget of sympy calls (`symbolic`): a verdict is a function of the two
  answers, the same on an idle and a loaded machine. `verdict(pred, gold)` also says when
  the pool's last wall guard passed (None: unknown, counted by `unknown_checks`).
  A hedge (``7 \\approx 8``, ``7 \\to 8``, ``\\neg 7``) equals nothing (`hedges`).
* `grade(completion_text, gold)`: the reward of one completion.
* `extract_choice`, `choice_key`, `grade_choice` (`choice`): the same for multiple-choice
  questions, where a letter and its option's value are one answer.

The rules where graders disagree (order, repeats, rounding, percent, units, named values)
are in `conventions`, in one place.
"""

from __future__ import annotations

from corl.answers.choice import choice_key, extract_choice, grade_choice, option_letter
from corl.answers.equivalence import answer_part, is_equivalent, unknown_checks, verdict
from corl.answers.extract import EXTRACTION_MODES, extract_answer
from corl.answers.keys import MAX_ANSWER_CHARS, answer_key
from corl.answers.reader import MAX_SYMBOLIC_CHARS
from corl.answers.symbolic import DEFAULT_TIMEOUT_S, GUARD_S, MAX_SYMBOLIC_CALLS, POOL, WORKER_STARTUP_S


def grade(completion_text: str | None, gold: str, timeout: float = DEFAULT_TIMEOUT_S, mode: str = "strict") -> bool:
    """Reward of a completion: its extracted final answer is equivalent to `gold`."""
    answer = extract_answer(completion_text, mode)
    return answer is not None and is_equivalent(answer, answer_part(str(gold)), timeout)


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "EXTRACTION_MODES",
    "GUARD_S",
    "MAX_ANSWER_CHARS",
    "MAX_SYMBOLIC_CALLS",
    "MAX_SYMBOLIC_CHARS",
    "POOL",
    "WORKER_STARTUP_S",
    "answer_key",
    "choice_key",
    "extract_answer",
    "extract_choice",
    "grade",
    "grade_choice",
    "is_equivalent",
    "option_letter",
    "unknown_checks",
    "verdict",
]
