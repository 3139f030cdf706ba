"""Evaluating code generation: pass@k (Chen et al. 2021) and per-problem records.

Each completion becomes the program lm-evaluation-harness would test in its style
(`corl.tasks.code.prompts.program_for`), run in the sandbox against the judge
(`corl.tasks.code.execute`); pass@k is the unbiased estimator, averaged over problems.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from corl.sandbox import SandboxPool
from corl.tasks.code.execute import run_tests
from corl.tasks.code.prompts import program_for


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct: 1 - C(n-c, k) / C(n, k), as a stable product."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


@dataclass(frozen=True)
class SampleRecord:
    """One completion's test outcome."""

    task_id: str
    sample: int
    passed: bool
    status: str  # ok, error, timeout, exit, malformed, memory, killed, output_limit, judge (corl.tasks.code.judge), or no_code
    wall_s: float
    error: str | None


@dataclass
class EvalReport:
    """pass@k over problems, with the records behind it."""

    pass_at: dict[int, float]
    per_problem: list[dict] = field(default_factory=list)  # task_id, n, c, pass@k[, pass@k+]
    pass_plus: dict[int, float] = field(default_factory=dict)  # pass@k on the extended tests (evaluate's plus)
    records: list[SampleRecord] = field(default_factory=list)


def _record(task_id: str, sample: int, run) -> SampleRecord:
    if run is None:
        return SampleRecord(task_id, sample, False, "no_code", 0.0, "no program")
    return SampleRecord(task_id, sample, run.passed, run.status, round(run.wall_s, 4), run.error)


def evaluate(
    rows: Sequence[Mapping],
    completions: Sequence[Sequence[str]],
    style: str,
    ks: Sequence[int] = (1,),
    pool: SandboxPool | None = None,
    plus: bool = False,
) -> EvalReport:
    """Test completions[i][j] (sample j of problem i) in `style`; pass@k averaged over problems.

    plus: also pass@k+ (`pass_plus`, and "pass@k+" per problem) on the MBPP rows' tests extended
    with calls the prompt does not show (corl.tasks.code.plus, as EvalPlus's MBPP+); empty when no
    row gets extra tests. pass@k stays lm-eval's, comparable with published numbers.
    """
    flat = [(i, j, program_for(row, c, style)) for i, row in enumerate(rows) for j, c in enumerate(completions[i])]
    results = run_tests([p for _, _, p in flat], [rows[i] for i, _, _ in flat], pool)
    report = EvalReport(pass_at={})
    passed_plus = _passed_plus(rows, flat, results, pool) if plus else None
    if passed_plus is not None:
        counts_plus = [0] * len(rows)
        for (i, _, _), ok in zip(flat, passed_plus):
            counts_plus[i] += ok
    counts = [[0, 0] for _ in rows]
    for (i, j, _), result in zip(flat, results):
        rec = _record(str(rows[i]["task_id"]), j, result)
        report.records.append(rec)
        counts[i][0] += 1
        counts[i][1] += rec.passed
    for row, (n, c) in zip(rows, counts):
        entry = {"task_id": str(row["task_id"]), "n": n, "c": c}
        entry.update({f"pass@{k}": pass_at_k(n, c, k) for k in ks if k <= n})
        report.per_problem.append(entry)
    if passed_plus is not None:
        for entry, c_plus in zip(report.per_problem, counts_plus):
            entry.update({f"pass@{k}+": pass_at_k(entry["n"], c_plus, k) for k in ks if k <= entry["n"]})
    for k in ks:
        scores = [p[f"pass@{k}"] for p in report.per_problem if f"pass@{k}" in p]
        report.pass_at[k] = sum(scores) / len(scores) if scores else 0.0
        if passed_plus is not None:
            scores = [p[f"pass@{k}+"] for p in report.per_problem if f"pass@{k}+" in p]
            report.pass_plus[k] = sum(scores) / len(scores) if scores else 0.0
    return report


def _passed_plus(rows: Sequence[Mapping], flat: list, results: list, pool: SandboxPool | None) -> list[bool] | None:
    """Per sample: passed its row's tests and the row's extra ones (only samples that passed are run again); None
    when no row has extra tests (HumanEval, rows without a reference `code`)."""
    from corl.tasks.code.plus import plus_tests

    extra = plus_tests(rows, pool)
    if not any(extra):
        return None
    plus_rows = [{**r, "plus_tests": e} if e else r for r, e in zip(rows, extra)]
    passed = [r is not None and r.passed for r in results]
    again = [n for n, (i, _, _) in enumerate(flat) if passed[n] and extra[i]]
    for n, run in zip(again, run_tests([flat[n][2] for n in again], [plus_rows[flat[n][0]] for n in again], pool)):
        passed[n] = run is not None and run.passed
    return passed
