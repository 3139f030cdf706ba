"""Task kinds by name (`data.task`): what an answer is, how answers vote and agree.

A task kind turns a group of completions into answers and vote keys, says when an
answer agrees with a label, grades validation completions, refuses configs it cannot
train, and says how `corl eval` scores it: one module registers all of it. Math reads the final stated answer; code runs the program
on the problem's public inputs and takes its behaviour as the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from corl.registry import TASKS

# texts [B*K] grouped by prompt, the B problems (corl.data.rows.Problem), K -> ([B][K] answers, [B][K] vote keys)
AnswerFn = Callable[[Sequence[str], Sequence, int], tuple[list[tuple], list[tuple]]]
# one completion per problem [B], the B problems, their dataset rows [B] and gold answers [B] (None where the
# data has no answer column) -> [B] whether each completion is correct (what validation measures)
GradeFn = Callable[[Sequence[str], Sequence, Sequence[Mapping], Sequence[str | None]], list[bool]]


@dataclass(frozen=True)
class TaskSpec:
    name: str
    answers: AnswerFn
    equivalent: Callable[[str, str], bool]  # a completion's answer vs a label's answer
    key: Callable[[str], str]  # the vote key of a written answer (a gold label's, say)
    description: str = ""
    input_fields: tuple[str, ...] = ()  # row fields copied into Problem.inputs (public, never the answer)
    grade: GradeFn | None = None  # validation's grader (data.val); None: this task kind cannot be validated
    grades_answers: bool = True  # the grader compares with data.answer_field (math); False: it reads the row (code)
    # a run config this task kind cannot train (a ValueError saying which option to change); None: any
    check_config: Callable[[object], None] | None = None
    # how `corl eval` (and `corl eval RUN`) scores it: "math" (final answers vs an answer column),
    # "code" (programs run against the row's tests), or None (no evaluator for it)
    evaluate_as: str | None = "math"


def register_task(spec: TaskSpec) -> TaskSpec:
    return TASKS.register(spec.name, spec)


def task_spec(name: str) -> TaskSpec:
    return TASKS.get(name)
