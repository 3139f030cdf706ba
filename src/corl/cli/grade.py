"""`corl grade FILE`: score completions from any generator (a vLLM server, an API, another framework).

    corl grade samples.jsonl                                   # math: completion(s) + answer per row
    corl grade records.jsonl --completion-field samples --answer-field gold   # corl eval --records, again
    corl grade he_samples.jsonl --task code --tests ../shared/data/humaneval/test.jsonl
    corl grade programs.csv --task code --program-field program              # rows with their own tests
    corl grade batch_output.jsonl --format openai-batch --answers ../shared/data/gsm8k/test.jsonl
    corl grade samples_gsm8k_2026-12-05.jsonl --format lm-eval           # lm-eval --log_samples
    corl grade dump.jsonl --completion-field outputs.*.text              # any JSON shape, by a dotted path

Math rows: a completion (or a list of samples) and a gold answer -> each sample's extracted
answer and verdict, avg@k / maj@k / pass@k. Rows that share a problem id (or a prompt) are one
problem's samples (`corl.evaluation.grade_formats`); `--format` reads OpenAI, Batch API, vLLM, lm-eval and
TRL files as those tools write them. Code rows: completions or programs and tests ->
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
        help="Field of the completion or list of samples (default: completions, completion, samples, ...), or a dotted "
        "path: choices.*.message.content, outputs.*.text, resps.*.* ('*': every item of a list).",
    ),
    fmt: str | None = typer.Option(
        None,
        "--format",
        help="The generator's file format: openai, openai-batch, vllm, lm-eval, trl (sets the completion path, id and gold).",
    ),
    answers: str | None = typer.Option(
        None, "--answers", help="math: file of the gold answers, joined on the problem id (or by line order without ids)."
    ),
    program_field: str | None = typer.Option(None, "--program-field", help="code: field of whole programs, tested as they are."),
    answer_field: str | None = typer.Option(
        None, "--answer-field", help="math: field of the gold answer (default: answer, gold; lm-eval: target)."
    ),
    options_field: str = typer.Option("options", "--options-field", help="math: multiple-choice options, when rows have them."),
    id_field: str | None = typer.Option(
        None,
        "--id-field",
        help="Field of the problem id (default: id, task_id; rows sharing it are one problem's samples; "
        "--tests and --answers join on it).",
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
    from rich.markup import escape

    from corl.cli.output import console as make_console
    from corl.evaluation.grade import GradeError

    err = make_console(stderr=True)
    try:
        results, per_row = _grade(
            file, task, completion_field, program_field, answer_field, options_field, id_field, model_field, name, extract,
            tests, style, k, fmt, answers, lambda note: err.print(f"[yellow]note:[/yellow] {escape(note)}"),
        )  # fmt: skip
    except GradeError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(2) from None
    if records is not None:
        records.parent.mkdir(parents=True, exist_ok=True)
        with records.open("w", encoding="utf-8", errors="backslashreplace") as f:
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
    fmt=None,
    answers=None,
    warn=print,
):
    from corl.answers import EXTRACTION_MODES
    from corl.evaluation.grade import (
        ANSWER_FIELDS,
        COMPLETION_FIELDS,
        ID_FIELDS,
        GradeError,
        attach_tests,
        code_kind,
        grade_code,
        read_rows,
    )
    from corl.evaluation.grade_formats import PRESETS, PROMPT_FIELDS, Preset, check_same_gold, gather, pick_path

    if task not in ("math", "code"):
        raise GradeError(f"--task must be math or code, got {task!r}")
    if style is not None and style not in CODE_STYLES:
        raise GradeError(f"--style must be one of {', '.join(CODE_STYLES)}, got {style!r}")
    if fmt is not None and fmt not in PRESETS:
        raise GradeError(f"--format must be one of {', '.join(PRESETS)}, got {fmt!r}")
    if answers is not None and task != "math":
        raise GradeError("--answers is for math (code problems bring their tests: --tests)")
    preset = PRESETS[fmt] if fmt else Preset((), None)
    rows = read_rows(file)
    first = rows.rows[0]
    model_field = model_field or ("model" if "model" in first else None)
    if program_field is not None:
        path = program_field
    elif completion_field is not None:
        path = completion_field
    elif fmt is not None:
        path = pick_path(rows, preset)
    else:
        path = _first_field(rows, COMPLETION_FIELDS, None, "--completion-field")
    candidates = ("task_id", *ID_FIELDS) if task == "code" else ID_FIELDS
    ids = id_field or preset.id_field or (None if fmt else next((f for f in candidates if f in first), None))
    key = ids or next((f for f in PROMPT_FIELDS if f in first and task == "math"), None)
    if task == "math" and answers is None:  # rows of one problem must agree on its gold before they are merged
        check_same_gold(rows, key, _first_field(rows, ANSWER_FIELDS, answer_field or preset.answer_field, "--answer-field"))
    rows, note = gather(rows, path, key, model_field, preset.one_filter)
    if note:
        warn(note)
    groups = _groups(rows, model_field, name or Path(file).stem)
    if task == "math":
        if extract not in EXTRACTION_MODES:
            raise GradeError(f"--extract must be one of {', '.join(EXTRACTION_MODES)}, got {extract!r}")
        return _grade_math(rows, path, groups, ids, answer_field or preset.answer_field, answers, extract, options_field, fmt)
    problems = attach_tests(rows, read_rows(tests) if tests else None, ids or "task_id")
    kind = code_kind(problems)
    if style is not None and not style.startswith(kind):
        raise GradeError(f"--style {style} does not fit the problems: they are {kind} rows")
    if program_field is not None:
        return grade_code(rows, problems, path, groups, kind, k, programs=True)
    return grade_code(rows, problems, path, groups, style or kind, k)


def _first_field(rows, candidates, given, option) -> str:
    from corl.evaluation.grade import pick_field

    what = "completion" if option == "--completion-field" else "gold answer"
    return pick_field(rows, given, candidates, option, what)


def _groups(rows, model_field, name):
    from corl.evaluation.grade import group_by_model

    return group_by_model(rows, model_field, name)


def _grade_math(rows, path, groups, ids, answer_field, answers, extract, options_field, fmt):
    from corl.evaluation.grade import ANSWER_FIELDS, ID_FIELDS, grade_math, pick_field, read_rows
    from corl.evaluation.grade_formats import gsm8k_target, join_answers

    if answers is not None:
        gold_rows = read_rows(answers)
        field = pick_field(gold_rows, answer_field, ANSWER_FIELDS, "--answer-field", "gold answer")
        answer_id = next((f for f in (ids, *ID_FIELDS) if f and f in gold_rows.rows[0]), None)
        rows = join_answers(rows, gold_rows, ids, field, answer_id)
    else:
        field = pick_field(rows, answer_field, ANSWER_FIELDS, "--answer-field", "gold answer")
    if fmt == "lm-eval":
        rows.rows = [{**r, field: gsm8k_target(str(r[field]))} if r.get(field) is not None else r for r in rows.rows]
    first = rows.rows[0]
    return grade_math(rows, path, field, ids, groups, extract, options_field if options_field in first else None)


def _print_table(results: dict) -> None:
    from rich.table import Table

    from corl.cli.output import console as make_console

    k = results["k"]
    extra = results["style"] if results["task"] == "code" else f"extract={results['extract']}"
    table = Table(title=f"{results['data']} ({results['n']} problems, k={k}, {extra})")
    metrics = ["pass@1", f"pass@{k}"] if results["task"] == "code" else [f"avg@{k}", f"maj@{k}", f"pass@{k}"]
    metrics = list(dict.fromkeys(metrics))
    for column in ("model", "problems", *metrics):
        table.add_column(column)
    for model, entry in results["models"].items():
        table.add_row(model, str(entry["n"]), *(f"{entry[m]:.3f}" for m in metrics))
    out = make_console()
    out.print(table)
    for key, value in results.items():
        if key.startswith("pooled_"):
            out.print(f"{key} over all models: {value:.3f}")


def register(app: typer.Typer) -> None:
    app.command("grade")(grade_command)
