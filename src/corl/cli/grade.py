"""`corl grade FILE`: score completions from any generator (a vLLM server, an API, another framework).

    corl grade samples.jsonl                                   # math: completion(s) + answer per row
    corl grade records.jsonl --completion-field samples --answer-field gold   # corl eval --records, again
    corl grade he_samples.jsonl --task code --tests ../shared/data/humaneval/test.jsonl
    corl grade programs.csv --task code --program-field program              # rows with their own tests

Math rows: a completion (or a list of samples) and a gold answer -> each sample's extracted
answer and verdict, avg@k / maj@k / pass@k. Code rows: completions or programs and tests ->
sandbox results, pass@1 / pass@k. Same records (`--records`) and summary (`--json`) as `corl eval`.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

CODE_STYLES = ("humaneval", "humaneval_instruct", "mbpp", "mbpp_instruct")


def grade_command(
    file: str = typer.Argument(..., help="JSONL / JSON / Parquet / CSV file of completions (or a Hugging Face dataset)."),
    task: str = typer.Option("math", "--task", help="math (final answers vs gold) or code (programs run against tests)."),
    completion_field: str | None = typer.Option(
        None,
        "--completion-field",
        help="Field of the completion or list of samples (default: completions, completion, samples, ...).",
    ),
    program_field: str | None = typer.Option(None, "--program-field", help="code: field of whole programs, tested as they are."),
    answer_field: str | None = typer.Option(
        None, "--answer-field", help="math: field of the gold answer (default: answer, gold)."
    ),
    options_field: str = typer.Option("options", "--options-field", help="math: multiple-choice options, when rows have them."),
    id_field: str | None = typer.Option(
        None, "--id-field", help="Field of the problem id (default: id, task_id; code joins --tests on it)."
    ),
    model_field: str | None = typer.Option(
        None, "--model-field", help="Field naming the generator of each row (default: model, when present)."
    ),
    name: str | None = typer.Option(
        None, "--name", help="The generator's name when rows have no model field (default: the file's)."
    ),
    extract: str = typer.Option("strict", "--extract", help="math: answer extraction, strict or flexible (see corl.answers)."),
    tests: str | None = typer.Option(None, "--tests", help="code: file of the problems with their tests, joined by --id-field."),
    style: str | None = typer.Option(
        None, "--style", help=f"code: how a completion becomes a program: {', '.join(CODE_STYLES)}."
    ),
    k: int | None = typer.Option(None, "--k", min=1, help="code: pass@k's k (default: the samples per row)."),
    records: Path | None = typer.Option(None, "--records", help="Write per-row records (samples, verdicts) to this JSONL."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object and nothing else on stdout."),
) -> None:
    """Grade completions from any generator: math verdicts and avg@k / maj@k / pass@k, or code in the sandbox."""
    from rich.console import Console
    from rich.markup import escape

    from corl.grade import GradeError

    err = Console(stderr=True)
    try:
        results, per_row = _grade(
            file, task, completion_field, program_field, answer_field, options_field, id_field, model_field, name, extract,
            tests, style, k,
        )  # fmt: skip
    except GradeError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(2) from None
    if records is not None:
        records.parent.mkdir(parents=True, exist_ok=True)
        with records.open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in per_row)
    if as_json:
        print(json.dumps(results))
    else:
        _print_table(results)


def _grade(
    file,
    task,
    completion_field,
    program_field,
    answer_field,
    options_field,
    id_field,
    model_field,
    name,
    extract,
    tests,
    style,
    k,
):
    from corl.answers import EXTRACTION_MODES
    from corl.grade import (
        ANSWER_FIELDS,
        COMPLETION_FIELDS,
        ID_FIELDS,
        GradeError,
        attach_tests,
        code_kind,
        grade_code,
        grade_math,
        group_by_model,
        pick_field,
        read_rows,
    )

    if task not in ("math", "code"):
        raise GradeError(f"--task must be math or code, got {task!r}")
    if style is not None and style not in CODE_STYLES:
        raise GradeError(f"--style must be one of {', '.join(CODE_STYLES)}, got {style!r}")
    rows = read_rows(file)
    first = rows.rows[0]
    model_field = model_field or ("model" if "model" in first else None)
    groups = group_by_model(rows, model_field, name or Path(file).stem)
    if task == "math":
        if extract not in EXTRACTION_MODES:
            raise GradeError(f"--extract must be one of {', '.join(EXTRACTION_MODES)}, got {extract!r}")
        field = pick_field(rows, completion_field, COMPLETION_FIELDS, "--completion-field", "completion")
        answer = pick_field(rows, answer_field, ANSWER_FIELDS, "--answer-field", "gold answer")
        ids = id_field or next((f for f in ID_FIELDS if f in first), None)
        return grade_math(rows, field, answer, ids, groups, extract, options_field if options_field in first else None)
    ids = id_field or next((f for f in ("task_id", *ID_FIELDS) if f in first), "task_id")
    problems = attach_tests(rows, read_rows(tests) if tests else None, ids)
    kind = code_kind(problems)
    if style is not None and not style.startswith(kind):
        raise GradeError(f"--style {style} does not fit the problems: they are {kind} rows")
    if program_field is not None:
        return grade_code(rows, problems, program_field, groups, kind, k, programs=True)
    field = pick_field(rows, completion_field, COMPLETION_FIELDS, "--completion-field", "completion")
    return grade_code(rows, problems, field, groups, style or kind, k)


def _print_table(results: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    k = results["k"]
    extra = results["style"] if results["task"] == "code" else f"extract={results['extract']}"
    table = Table(title=f"{results['data']} ({results['n']} problems, k={k}, {extra})")
    metrics = ["pass@1", f"pass@{k}"] if results["task"] == "code" else [f"avg@{k}", f"maj@{k}", f"pass@{k}"]
    metrics = list(dict.fromkeys(metrics))
    for column in ("model", "problems", *metrics):
        table.add_column(column)
    for model, entry in results["models"].items():
        table.add_row(model, str(entry["n"]), *(f"{entry[m]:.3f}" for m in metrics))
    out = Console()
    out.print(table)
    for key, value in results.items():
        if key.startswith("pooled_"):
            out.print(f"{key} over all models: {value:.3f}")


def register(app: typer.Typer) -> None:
    app.command("grade")(grade_command)
