"""`corl grade FILE`: score completions from any generator (a vLLM server, an API, another framework).

    corl grade samples.jsonl                                   # math: completion(s) + answer per row
    corl grade records.jsonl --completion-field samples --answer-field gold   # corl eval --records, again
    corl grade he_samples.jsonl --task code --tests ../shared/data/humaneval/test.jsonl
    corl grade programs.csv --task code --program-field program              # rows with their own tests
    corl grade batch_output.jsonl --format openai-batch --answers ../shared/data/gsm8k/test.jsonl
    corl grade samples_gsm8k_2026-12-05.jsonl --format lm-eval           # lm-eval --log_samples
    corl grade dump.jsonl --completion-field outputs.*.text              # any JSON shape, by a dotted path

    corl grade results.jsonl --answers ../shared/data/math500/test.jsonl   # vllm run-batch: format told from the keys
    corl grade OUTPUT_DIR/completions --answers train.jsonl                # TRL's completion logs, graded per step

Math rows: a completion (or a list of samples) and a gold answer -> each sample's extracted
answer and verdict, avg@k / maj@k / pass@k, each with its standard error and 95% interval.
The format of OpenAI, Batch API, vLLM, lm-eval and TRL files is told from their keys (or given:
`--format`) and said; rows that share a problem id, an id with a sample suffix, a prompt, or K
consecutive rows are one problem's samples (`corl.evaluation.grade_run`). Code rows:
completions or programs and tests -> sandbox results, pass@1 / pass@k. Same records
(`--records`) and summary (`--json`) as `corl eval`.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

CODE_STYLES = ("humaneval", "humaneval_instruct", "mbpp", "mbpp_instruct")


def grade_command(
    file: str = typer.Argument(
        ...,
        help="JSONL / JSON / Parquet / CSV file of completions, a W&B table (*.table.json), a folder of such files "
        "(TRL's OUTPUT_DIR/completions), or a Hugging Face dataset.",
    ),
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
        help="The generator's file format: openai, openai-batch, vllm, lm-eval, trl, corl (sets the completion path, id and "
        "gold; default: told from the rows' keys, and said).",
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
    samples_per_problem: int | None = typer.Option(
        None,
        "--samples-per-problem",
        min=1,
        help="Rows with no id or prompt: each K consecutive rows are one problem's samples (default with --answers: "
        "rows / problems).",
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
    from corl.evaluation.grade_run import GradeOptions, grade_file
    from corl.files import NotWritten, write_jsonl

    err = make_console(stderr=True)
    options = GradeOptions(
        file, task, completion_field, program_field, answer_field, options_field, id_field, model_field, name, extract,
        tests, style, k, fmt, answers, samples_per_problem,
    )  # fmt: skip
    try:
        results, per_row = grade_file(options, lambda note: err.print(f"[yellow]note:[/yellow] {escape(note)}"))
    except GradeError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(2) from None
    if records is not None:
        try:
            write_jsonl(records, per_row)  # whole or not at all: a kill leaves no shorter file
        except NotWritten as e:
            err.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
            raise typer.Exit(1) from None
    if as_json:
        print(json.dumps(results))
    else:
        _print_table(results)


INTERVAL_NOTE = "value ± standard error [95% interval]: over problems, a problem's k samples one cluster (docs/evaluation.md)"


def cell(entry: dict, name: str) -> str:
    """A figure with its standard error and 95% interval, as a table shows it."""
    se, ci = entry.get("se", {}).get(name), entry.get("ci95", {}).get(name)
    if se is None or ci is None:
        return f"{entry[name]:.3f}"
    return f"{entry[name]:.3f} ± {se:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def _print_table(results: dict) -> None:
    from rich.table import Table

    from corl.cli.output import console as make_console

    k = results["k"]
    extra = results["style"] if results["task"] == "code" else f"extract={results['extract']}"
    table = Table(title=f"{results['data']} ({results['n']} problems, k={k}, {extra})", caption=INTERVAL_NOTE)
    metrics = ["pass@1", f"pass@{k}"] if results["task"] == "code" else [f"avg@{k}", f"maj@{k}", f"pass@{k}"]
    metrics = list(dict.fromkeys(metrics))
    for column in ("model", "problems", *metrics):
        table.add_column(column)
    for model, entry in results["models"].items():
        table.add_row(model, str(entry["n"]), *(cell(entry, m) for m in metrics))
    out = make_console()
    out.print(table)
    for key in results:
        if key.startswith("pooled_"):
            out.print(f"{key} over all models: {cell(results, key)}")


def register(app: typer.Typer) -> None:
    app.command("grade")(grade_command)
