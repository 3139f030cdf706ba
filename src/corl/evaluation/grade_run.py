"""`corl grade FILE` put together: read the file, tell its format, group its rows, join the gold, grade.

Every assumption made on the user's behalf (the format, the grouping, the join) is said in a
note, with the option that says otherwise; every error names the file, the line and the option.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from corl.evaluation.grade import ANSWER_FIELDS, COMPLETION_FIELDS, ID_FIELDS, GradeError, Rows, group_by_model
from corl.evaluation.grade_files import read_rows
from corl.evaluation.grade_formats import PRESETS, Preset, detect_format, pick_path
from corl.evaluation.grade_groups import Grouping, check_same_gold, first_filter, gather, gsm8k_target, problem_keys

CODE_STYLES = ("humaneval", "humaneval_instruct", "mbpp", "mbpp_instruct")
GENERIC = Preset((), None)


@dataclass(frozen=True)
class GradeOptions:
    """`corl grade`'s options (None: found in the file, or the default)."""

    file: str
    task: str = "math"
    completion_field: str | None = None
    program_field: str | None = None
    answer_field: str | None = None
    options_field: str = "options"
    id_field: str | None = None
    model_field: str | None = None
    name: str | None = None
    extract: str = "strict"
    tests: str | None = None
    style: str | None = None
    k: int | None = None
    fmt: str | None = None
    answers: str | None = None
    samples_per_problem: int | None = None


def _check(o: GradeOptions) -> None:
    from corl.answers import EXTRACTION_MODES

    if o.task not in ("math", "code"):
        raise GradeError(f"--task must be math or code, got {o.task!r}")
    if o.style is not None and o.style not in CODE_STYLES:
        raise GradeError(f"--style must be one of {', '.join(CODE_STYLES)}, got {o.style!r}")
    if o.fmt is not None and o.fmt not in PRESETS:
        raise GradeError(f"--format must be one of {', '.join(PRESETS)}, got {o.fmt!r}")
    if o.answers is not None and o.task != "math":
        raise GradeError("--answers is for math (code problems bring their tests: --tests)")
    if o.extract not in EXTRACTION_MODES:
        raise GradeError(f"--extract must be one of {', '.join(EXTRACTION_MODES)}, got {o.extract!r}")


def grade_file(o: GradeOptions, warn=print) -> tuple[dict, list[dict]]:
    """(summary, per-problem records) of `corl grade` with these options; `warn` receives the notes."""
    _check(o)
    rows = read_rows(o.file, warn)
    fmt, preset = _format(rows, o, warn)
    if preset.one_filter:
        rows, note = first_filter(rows)
        _say(warn, [note])
    path = o.program_field or o.completion_field or (pick_path(rows, preset, fmt) if fmt else _generic_path(rows))
    first = rows.rows[0]
    model_field = o.model_field or next((f for f in (preset.model_field, "model") if f and f in first), None)
    gold_rows = read_rows(o.answers) if o.answers else None
    test_rows = read_rows(o.tests) if o.tests else None
    id_field = o.id_field or _id_field(first, preset, o.task)
    gold_field = _gold_in_rows(rows, o, preset) if gold_rows is None and o.task == "math" else None
    grouping = problem_keys(
        rows, id_field, o.id_field is not None, _known_ids(gold_rows, test_rows, id_field), gold_field,
        o.samples_per_problem, len(gold_rows.rows) if gold_rows is not None else None, model_field,
    )  # fmt: skip
    if gold_field is not None:  # rows of one problem must agree on its gold before they are merged
        check_same_gold(rows, grouping, gold_field)
    rows, notes = gather(rows, path, grouping, model_field)
    _say(warn, notes)
    groups = _generators(rows, model_field, preset, o.name or Path(o.file.rstrip("/")).stem)
    if o.task == "math":
        return _math(rows, path, groups, grouping, gold_field, gold_rows, o, preset, fmt, warn)
    return _code(rows, path, groups, test_rows, grouping.field if grouping.by == "id" else None, o)


def _say(warn, notes) -> None:
    for note in notes:
        if note:
            warn(note)


def _format(rows: Rows, o: GradeOptions, warn) -> tuple[str | None, Preset]:
    """The format given, or the one the first row's keys tell (unless a field was named: then none)."""
    if o.fmt is not None:
        return o.fmt, PRESETS[o.fmt]
    if o.completion_field or o.program_field:
        return None, GENERIC
    found = detect_format(rows.rows[0])
    if found is None:
        return None, GENERIC
    warn(f"read as --format {found[0]} ({found[1]}); give --format or --completion-field to read it otherwise")
    return found[0], PRESETS[found[0]]


def _generic_path(rows: Rows) -> str:
    first = rows.rows[0]
    field = next((f for f in COMPLETION_FIELDS if f in first), None)
    if field is None:
        columns = ", ".join(sorted(first)) or "none"
        raise GradeError(
            f"{rows.where[0]}: no completion field ({', '.join(COMPLETION_FIELDS)}) (columns: {columns}); "
            f"set --completion-field (a field, or a dotted path such as choices.*.message.content), "
            f"or --format ({', '.join(PRESETS)})"
        )
    return field


def _id_field(first: dict, preset: Preset, task: str) -> str | None:
    if preset.id_field and preset.id_field in first:
        return preset.id_field
    candidates = ("task_id", *ID_FIELDS) if task == "code" else ID_FIELDS
    return next((f for f in candidates if f in first and f not in preset.not_ids), None)


def _answer_id(gold_rows: Rows, id_field: str | None) -> str | None:
    return next((f for f in (id_field, *ID_FIELDS) if f and f in gold_rows.rows[0]), None)


def _known_ids(gold_rows: Rows | None, test_rows: Rows | None, id_field: str | None) -> set[str] | None:
    """The problem ids of --answers or --tests: a sample suffix is stripped only to reach them."""
    if gold_rows is not None:
        other, field = gold_rows, _answer_id(gold_rows, id_field)
    elif test_rows is not None:
        other, field = test_rows, id_field or "task_id"
    else:
        return None
    return {str(r[field]) for r in other.rows if r.get(field) is not None} if field else None


def _gold_in_rows(rows: Rows, o: GradeOptions, preset: Preset) -> str:
    given = o.answer_field or preset.answer_field
    if given is not None:
        return given
    first = rows.rows[0]
    field = next((f for f in ANSWER_FIELDS if f in first), None)
    if field is None:
        columns = ", ".join(sorted(first)) or "none"
        raise GradeError(
            f"{rows.where[0]}: no gold answer field ({', '.join(ANSWER_FIELDS)}) (columns: {columns}); "
            "set --answer-field, or give --answers FILE (a dataset with the gold answers)"
        )
    return field


def _generators(rows: Rows, model_field: str | None, preset: Preset, name: str) -> dict[str, list[int]]:
    """{generator: its problems}; a policy's training step is named "step N" (TRL's logs)."""
    groups = group_by_model(rows, model_field, name)
    if model_field is not None and model_field == preset.model_field == "step":
        return {f"step {value}": indices for value, indices in groups.items()}
    return groups


def _math(rows, path, groups, grouping: Grouping, gold_field, gold_rows, o: GradeOptions, preset, fmt, warn):
    from corl.evaluation.grade import grade_math, pick_field
    from corl.evaluation.grade_join import join_answers

    if gold_rows is not None:
        field = pick_field(gold_rows, o.answer_field, ANSWER_FIELDS, "--answer-field", "gold answer")
        key_field = grouping.field if grouping.by == "id" else None
        prompt_field = grouping.field if grouping.by == "prompt" else None
        rows, note = join_answers(rows, gold_rows, field, _answer_id(gold_rows, key_field), key_field, prompt_field)
        _say(warn, [note])
    else:
        field = gold_field
    if fmt == "lm-eval":
        rows.rows = [{**r, field: gsm8k_target(str(r[field]))} if r.get(field) is not None else r for r in rows.rows]
    options = o.options_field if o.options_field in rows.rows[0] else None
    return grade_math(rows, path, field, None, groups, o.extract, options)


def _code(rows, path, groups, test_rows, id_field, o: GradeOptions):
    from corl.evaluation.grade import attach_tests, code_kind, grade_code

    problems = attach_tests(rows, test_rows, id_field or "task_id")
    kind = code_kind(problems)
    if o.style is not None and not o.style.startswith(kind):
        raise GradeError(f"--style {o.style} does not fit the problems: they are {kind} rows")
    if o.program_field is not None:
        return grade_code(rows, problems, path, groups, kind, o.k, programs=True)
    return grade_code(rows, problems, path, groups, o.style or kind, o.k)
