"""Scoring completions from any generator (`corl grade FILE`) with corl's grader and sandbox.

Math: each row holds a completion, or a list of K samples, and a gold answer; every sample's
answer is extracted (`corl.answers`, strict or flexible, as `corl eval --extract`) and
checked for equivalence with the gold answer; avg@k, maj@k (corl's vote) and pass@k follow,
per row and overall (`corl.evaluation.evaluate`). Code: each row holds completions (or whole programs)
and the tests, in the row (HumanEval / MBPP fields) or in another file joined by id; programs
run in the sandbox and pass@k is Chen et al.'s unbiased estimator (`corl.evaluation.code_eval`).

Records and summary have the form of `corl eval`'s, so `corl eval --records` output can be
graded again (`--completion-field samples --answer-field gold`), and rows from several
generators are told apart by a model field (then the summary also has the pooled maj@k).
A row that lacks what is needed is an error naming its file and line and the option to set.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

COMPLETION_FIELDS = ("completions", "completion", "samples", "responses", "response", "outputs", "output")
ANSWER_FIELDS = ("answer", "gold")
ID_FIELDS = ("id", "task_id", "problem_id")


class GradeError(ValueError):
    """A file or row that cannot be graded; the message names the file, the line and the option to set."""


@dataclass
class Rows:
    """A file's rows and where each comes from ("FILE line 3" for JSONL and CSV, "FILE row 3" otherwise)."""

    source: str
    rows: list[dict]
    where: list[str]
    samples: list[list[str]] | None = None  # each row's samples, once `corl.evaluation.grade_groups.gather` has read them
    keys: list[str] | None = None  # each problem's id (or prompt) after grouping: records and joins use it


def pick_field(rows: Rows, given: str | None, candidates: Sequence[str], option: str, what: str) -> str:
    """The field named by `option`, else the first of `candidates` the first row has."""
    first = rows.rows[0]
    if given is not None:
        return given
    for name in candidates:
        if name in first:
            return name
    columns = ", ".join(sorted(first)) or "none"
    raise GradeError(f"{rows.where[0]}: no {what} field ({', '.join(candidates)}) (columns: {columns}); set {option}")


def field_value(rows: Rows, i: int, name: str, option: str, empty_ok: bool = True):
    """Row i's field `name`; a missing one (or an empty one, unless `empty_ok`: a CSV's blank cell) names the row."""
    row = rows.rows[i]
    value = row.get(name)
    if value is None or (not empty_ok and isinstance(value, str) and not value.strip()):
        columns = ", ".join(sorted(row)) or "none"
        state = "missing" if value is None else "empty"
        raise GradeError(f"{rows.where[i]}: field {name!r} is {state} (columns: {columns}); set {option}")
    return value


def is_csv(where: str) -> bool:
    """A row read from a CSV file (its cells are text: a list of samples there is written as JSON)."""
    return where.lower().rsplit(" line ", 1)[0].endswith(".csv")


def samples_of(rows: Rows, i: int, name: str, option: str) -> list[str]:
    """A row's completions: a text, a list of texts, or {"completion": text} objects (corl eval's records)."""
    if rows.samples is not None:
        return rows.samples[i]
    value = field_value(rows, i, name, option)
    if isinstance(value, str) and is_csv(rows.where[i]) and value.lstrip().startswith("["):
        with contextlib.suppress(ValueError):  # a CSV cell holds a list of samples as JSON
            value = json.loads(value)
    items = value if isinstance(value, (list, tuple)) else [value]
    texts = [item.get("completion") if isinstance(item, dict) else item for item in items]
    if not texts or not all(isinstance(t, str) for t in texts):
        raise GradeError(
            f"{rows.where[i]}: field {name!r} must hold a completion (text), a list of them, or objects with a "
            f"'completion' text; got {type(value).__name__}; set {option}"
        )
    return texts


def group_by_model(rows: Rows, model_field: str | None, name: str) -> dict[str, list[int]]:
    """{generator: its row indices}: by the model field when there is one, else all rows under `name`."""
    if model_field is None:
        return {name: list(range(len(rows.rows)))}
    groups: dict[str, list[int]] = {}
    for i in range(len(rows.rows)):
        groups.setdefault(str(field_value(rows, i, model_field, "--model-field")), []).append(i)
    return groups


def row_ids(rows: Rows, id_field: str | None) -> list[str]:
    """Each problem's id: the id field's value, else its group's key (a sample suffix stripped), else its index."""
    if rows.keys is not None:
        return list(rows.keys)
    return [str(r[id_field]) if id_field and r.get(id_field) is not None else str(i) for i, r in enumerate(rows.rows)]


# -- math -----------------------------------------------------------------------------------------------


def grade_math(
    rows: Rows,
    completion_field: str,
    answer_field: str,
    id_field: str | None,
    groups: dict[str, list[int]],
    extract: str = "strict",
    options_field: str | None = None,
) -> tuple[dict, list[dict]]:
    """(summary as `corl eval`'s, per-row records): extracted answers, verdicts, avg@k / maj@k / pass@k."""
    from corl.evaluation.evaluate import INTERVALS, extract_all, grade, majority_correct, pooled, problem_scores, score, spread

    ids = row_ids(rows, id_field)
    results: dict = {"data": rows.source, "task": "math", "extract": extract, "intervals": INTERVALS, "models": {}}
    records: list[dict] = []
    by_model: dict[str, dict[str, tuple]] = {}
    k = None
    for model, indices in groups.items():
        texts = [samples_of(rows, i, completion_field, "--completion-field") for i in indices]
        k = _same_count(rows, indices, texts, k)
        gold = [str(field_value(rows, i, answer_field, "--answer-field", empty_ok=False)) for i in indices]
        options = [rows.rows[i].get(options_field) if options_field else None for i in indices]
        answers = extract_all(texts, extract, options)
        verdicts, majority = grade(answers, gold), majority_correct(answers, gold)
        figures = score(answers, gold).as_dict()
        results["models"][model] = {**figures, "n": len(indices), **spread(figures, problem_scores(verdicts, majority))}
        by_model[model] = {ids[i]: (answers[j], gold[j]) for j, i in enumerate(indices)}
        for j, i in enumerate(indices):
            samples = [{"completion": t, "answer": a, "correct": c} for t, a, c in zip(texts[j], answers[j], verdicts[j])]
            records.append(
                {
                    "model": model,
                    "id": ids[i],
                    "gold": gold[j],
                    "samples": samples,
                    f"avg@{k}": sum(verdicts[j]) / k,
                    f"maj@{k}": majority[j],
                    f"pass@{k}": any(verdicts[j]),
                    "where": rows.where[i],
                }
            )
    results["n"] = max(len(v) for v in groups.values())
    results["k"] = k
    shared = _shared_ids(by_model)
    if len(by_model) > 1 and shared:  # the generators answered the same problems: one vote over all their samples
        pooled_answers = pooled([[by_model[m][pid][0] for pid in shared] for m in by_model])
        gold = [next(iter(by_model.values()))[pid][1] for pid in shared]
        right = [float(c) for c in majority_correct(pooled_answers, gold)]
        figure = {f"pooled_maj@{k * len(by_model)}": sum(right) / len(right)}
        results.update(figure)
        results.update(spread(figure, dict.fromkeys(figure, right)))
    return results, records


def _same_count(rows: Rows, indices: list[int], texts: list[list[str]], k: int | None) -> int:
    """avg@k and maj@k need the same K on every row."""
    first = k if k is not None else len(texts[0])
    for i, t in zip(indices, texts):
        if len(t) != first:
            raise GradeError(
                f"{rows.where[i]}: {len(t)} completion(s), but the rows before have {first}; "
                "every row needs the same number of samples for avg@k and maj@k"
            )
    return first


def _shared_ids(by_model: dict[str, dict]) -> list[str]:
    """The problem ids every generator answered, when they all answered the same ones; else []."""
    sets = [set(v) for v in by_model.values()]
    return sorted(sets[0]) if sets and all(s == sets[0] for s in sets) else []


# -- code -----------------------------------------------------------------------------------------------


def attach_tests(rows: Rows, tests: Rows | None, id_field: str) -> list[dict]:
    """Each row's problem with its tests: the row itself, or the row of `tests` with the same id."""
    from corl.tasks.code.task import is_humaneval, is_mbpp, mbpp_view

    if tests is None:
        problems = list(rows.rows)
    else:
        by_id = {str(r.get(id_field)): r for r in tests.rows}
        problems = []
        for i in range(len(rows.rows)):
            key = rows.keys[i] if rows.keys is not None else str(field_value(rows, i, id_field, "--id-field"))
            if key not in by_id:
                raise GradeError(f"{rows.where[i]}: {id_field} {key!r} has no row in --tests {tests.source}; set --id-field")
            problems.append(by_id[key])
    kinds = ["humaneval" if is_humaneval(p) else "mbpp" if is_mbpp(p) else None for p in problems]
    for i, kind in enumerate(kinds):
        if kind is None or kind != kinds[0]:
            what = (
                "has no tests: not a HumanEval (prompt, test, entry_point) or MBPP (text, test_list) row; give --tests FILE"
                if kind is None
                else f"is a {kind} row among {kinds[0]} rows"
            )
            raise GradeError(f"{rows.where[i]}: {what}")
    return [mbpp_view(p) if kinds[0] == "mbpp" else dict(p) for p in problems]


def code_kind(problems: list[dict]) -> str:
    return "humaneval" if "entry_point" in problems[0] else "mbpp"


def grade_code(
    rows: Rows,
    problems: list[dict],
    field: str,
    groups: dict[str, list[int]],
    style: str,
    k: int | None = None,
    programs: bool = False,
) -> tuple[dict, list[dict]]:
    """(summary as `corl eval --task code`'s, per-row records): sandbox results and unbiased pass@k.

    `programs`: the field holds whole programs, tested as they are (else completions in `style`)."""
    from corl.evaluation.code_eval import evaluate
    from corl.evaluation.evaluate import INTERVALS, spread
    from corl.tasks.code.execute import close

    option = "--program-field" if programs else "--completion-field"
    texts = {i: samples_of(rows, i, field, option) for i in range(len(rows.rows))}
    k = k or min(len(t) for t in texts.values())
    ks = sorted({1, k})
    # why "mbpp" for programs: that style tests the text as it stands (cut only at MBPP's "[DONE]" marker)
    run_style = "mbpp" if programs else style
    results: dict = {"data": rows.source, "task": "code", "style": "program" if programs else style, "intervals": INTERVALS}
    results["models"] = {}
    records: list[dict] = []
    try:
        for model, indices in groups.items():
            report = evaluate([problems[i] for i in indices], [texts[i] for i in indices], run_style, ks=ks, plus=True)
            plus = {f"pass@{j}+": report.pass_plus[j] for j in ks if j in report.pass_plus}  # MBPP rows: corl.tasks.code.plus
            figures = {f"pass@{j}": report.pass_at[j] for j in ks} | plus
            per_problem = {name: [entry[name] for entry in report.per_problem] for name in figures}
            results["models"][model] = figures | {"n": len(indices)} | spread(figures, per_problem)
            start = 0
            for i, entry in zip(indices, report.per_problem, strict=True):
                outcomes = report.records[start : start + entry["n"]]  # records are in (problem, sample) order
                start += entry["n"]
                samples = [
                    {"completion": t, "passed": r.passed, "status": r.status, "error": r.error}
                    for t, r in zip(texts[i], outcomes, strict=True)
                ]
                records.append({"model": model, **entry, "style": results["style"], "samples": samples, "where": rows.where[i]})
    finally:
        close()  # the sandbox pool's workers
    results["n"] = max(len(v) for v in groups.values())
    results["k"] = k
    return results, records
