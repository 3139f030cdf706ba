"""`corl diversity`: how differently do candidate partners err, before any training?

    corl diversity --models Qwen/Qwen2.5-3B meta-llama/Llama-3.2-3B-Instruct \\
        --data math/train.jsonl --filter level=3,4,5 --n 500 --anchor Qwen/Qwen2.5-3B
    corl diversity --models tiny:llama-char tiny:qwen2-bpe tiny:gemma-bpe --data FILE --seed-pairs
    corl diversity --models A B --data FILE --json > study.json    # one JSON object on stdout

One sampled answer per problem and model (cached under OUT/cache, so adding a model to a
study samples only that model), graded with corl.answers; then, for every pair, Cohen's
kappa on correctness, complementarity c, oracle accuracy u and wrong agreement w
(paper, Appendix A, Tables 6-7). Writes OUT/diversity.json and OUT/kappa_heatmap.png.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import typer
from rich.markup import escape  # help texts are rich markup: "corl[vllm]" would lose "[vllm]"


def register(app: typer.Typer) -> None:
    app.command(
        "diversity",
        help="Measure how differently candidate partners err (kappa, c, u, w) before training, and recommend a partner.",
        no_args_is_help=True,
    )(diversity)


def diversity(
    models_args: list[str] | None = typer.Argument(
        None, metavar="MODELS", help="Models to compare (the same as listing them after --models)."
    ),
    models: list[str] | None = typer.Option(
        None, "--models", "-m", help="HF id, local path or tiny:<family>; `--models A B C` or repeat the option."
    ),
    data: str = typer.Option(..., "--data", help="JSONL / Parquet / CSV file or HF dataset name with problem and answer fields."),
    split: str | None = typer.Option(None, help="Split of an HF dataset (default train)."),
    filters: list[str] | None = typer.Option(
        None, "--filter", help="Keep rows whose FIELD, as text, is one of the values: `level=3,4,5`. Repeat to AND."
    ),
    n: int = typer.Option(500, "--n", help="Problems: a fixed uniform subset of the filtered rows (0 = all)."),
    temperature: float = typer.Option(0.8, help="Sampling temperature; 0 = greedy."),
    top_p: float = typer.Option(1.0, help="Nucleus sampling threshold."),
    max_new_tokens: int = typer.Option(1024, help="Longest completion (clipped to the model's context)."),
    seed: int = typer.Option(0, help="Sampling seed of every model; a seed twin uses seed + 1."),
    seed_pairs: bool = typer.Option(
        False, "--seed-pairs", help="Also sample each model with another seed: the paper's 'seed only' pairs."
    ),
    anchor: str | None = typer.Option(None, help="Rank the other models as partners for this one."),
    template: str = typer.Option("{problem}\n{instruction}", help="Prompt text with {problem} and {instruction}."),
    instruction: str | None = typer.Option(None, help="Instruction text (default: reason step by step, answer in \\boxed{})."),
    chat: bool = typer.Option(
        False, "--chat", help="Wrap prompts in each tokenizer's chat template (a model without one: the plain text)."
    ),
    stop: list[str] = typer.Option([], "--stop", help="End each completion at this string (repeatable; few-shot: --stop '\\n')."),
    problem_field: str = typer.Option("problem", help="Dataset field holding the problem."),
    answer_field: str = typer.Option("answer", help="Dataset field holding the reference answer."),
    batch_size: int = typer.Option(32, help="Prompts per generate call."),
    device: str = typer.Option("auto", help="auto, cpu, cuda, cuda:1, ..."),
    engine: str = typer.Option("hf", help=escape("Rollout engine: hf (any device) or vllm (pip install corl[vllm]).")),
    out: Path = typer.Option(Path("runs/diversity"), "--out", help="Folder for diversity.json and kappa_heatmap.png."),
    cache: Path | None = typer.Option(None, "--cache", help="Folder of cached samples (default OUT/cache)."),
    refresh: bool = typer.Option(False, "--refresh", help="Sample again even where a cached sample matches."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object to stdout and nothing else."),
) -> None:
    """Measure error decoupling of every pair of models."""
    from corl.cli.output import console as make_console
    from corl.studies.diversity import StudySettings, parse_filter, run_study

    names = list(models or []) + list(models_args or [])
    err = make_console(stderr=True)
    if temperature < 0 or not 0 < top_p <= 1 or max_new_tokens < 1 or batch_size < 1 or n < 0:
        raise typer.BadParameter("need --temperature >= 0, 0 < --top-p <= 1, --max-new-tokens >= 1, --batch-size >= 1, --n >= 0")
    if "{problem}" not in template:
        raise typer.BadParameter("--template must contain the placeholder {problem}")
    try:
        parsed = tuple(parse_filter(f) for f in filters or [])
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    settings = StudySettings(
        data=data, split=split, filters=parsed, n=n or None, problem_field=problem_field, answer_field=answer_field,
        temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed, template=template,
        instruction=instruction, chat=chat, stop=tuple(stop), batch_size=batch_size, device=device, engine=engine,
    )  # fmt: skip
    # Under --json, stdout carries the JSON object alone: anything a library prints goes to stderr.
    redirect = contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext()
    try:
        with redirect, _progress(err) as progress:
            result = run_study(names, settings, out, cache, seed_pairs, anchor, refresh, progress)
    except (ValueError, OSError) as e:  # bad models / data / anchor, unreachable model: the message says what
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(2) from None
    if as_json:
        sys.stdout.write(json.dumps(result.report, ensure_ascii=False, allow_nan=False) + "\n")
        sys.stdout.flush()
        return
    _print_report(make_console(), result)


@contextlib.contextmanager
def _progress(console):
    """A progress callback (sample name, done, total) drawing one bar per sample on stderr."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("sampling {task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=console, transient=False,
    ) as bars:  # fmt: skip
        tasks: dict[str, int] = {}

        def update(name: str, done: int, total: int) -> None:
            if name not in tasks:
                tasks[name] = bars.add_task(name, total=total)
            bars.update(tasks[name], completed=done)

        yield update


def _print_report(console, result) -> None:
    from rich.table import Table

    report = result.report
    samples = Table(title=f"Samples ({report['problems']['n']} problems)")
    for col in ("sample", "type", "accuracy", "no answer", "cache"):
        samples.add_column(col)
    for s in report["samples"]:
        samples.add_row(s["name"], s["model_type"] or "?", f"{s['accuracy']:.1%}", f"{s['no_answer_rate']:.1%}",
                        "hit" if s["cache_hit"] else "sampled")  # fmt: skip
    console.print(samples)

    pairs = Table(title="Pairs, most decoupled first (kappa ascending)")
    for col in ("A", "B", "✓✓/✓✗/✗✓/✗✗", "acc A/B", "kappa", "c", "u", "w"):
        pairs.add_column(col, justify="left" if col in ("A", "B") else "right", overflow="fold")
    for p in report["pairs"]:
        pairs.add_row(
            p["a"], p["b"], f"{p['both_correct']}/{p['only_a']}/{p['only_b']}/{p['both_wrong']}",
            f"{p['accuracy_a']:.0%}/{p['accuracy_b']:.0%}", f"{p['kappa']:.2f} [{p['kappa_ci95'][0]:.2f}, {p['kappa_ci95'][1]:.2f}]",
            f"{p['c']:.1%}", f"{p['u']:.1%}", f"{p['w']:.1%}",
        )  # fmt: skip
    console.print(pairs)
    console.print("✓✓/✓✗/✗✓/✗✗: both right / only A / only B / both wrong; kappa: agreement on which problems "
                  "are solved, beyond chance [95% bootstrap interval over problems]; c: exactly one right; u: at least one right; "
                  "w: both wrong with the same answer.", style="dim")  # fmt: skip

    if report["anchor"]:
        ranking = Table(title=f"Partners for {report['anchor']['model']}")
        for col in ("rank", "partner", "kappa", "c", "partner accuracy"):
            ranking.add_column(col)
        for i, r in enumerate(report["anchor"]["ranking"], 1):
            ranking.add_row(str(i), r["partner"], f"{r['kappa']:.2f}", f"{r['c']:.1%}", f"{r['partner_accuracy']:.1%}")
        console.print(ranking)
    gap = report.get("kappa_gap")
    if gap:
        low, high = gap["ci95"]
        console.print(
            f"seed-only minus cross-family kappa: {gap['seed_only_minus_cross_family']:+.3f} [{low:+.3f}, {high:+.3f}] "
            "(positive: another family errs more independently than another sample of the same model; paper, Table 6)"
        )
    corr = report["kappa_c_correlation"]
    if corr:
        r = corr["pearson_kappa_c"]
        shown = "undefined (no variance)" if r is None else f"{r:+.2f}"
        console.print(f"Pearson r(kappa, c) over {corr['pairs']} pairs: {shown} (paper: -0.98; they are one measurement)")
    for note in report.get("notes", []):
        console.print(f"note: {note}", style="yellow")
    console.print(f"[bold]recommendation:[/bold] {escape(str(report['recommendation']))}")
    _print_cohort(console, report["cohort"])
    console.print(f"reference: {report['reference']}", style="dim")
    console.print(f"wrote {result.json_path} and {result.heatmap_path}", style="dim")


def _print_cohort(console, cohort) -> None:
    """The recommended cohort as the `agents:` block of a run config (corl.studies.diversity.cohort)."""
    if cohort is None:
        return
    best = cohort["recommended"]
    edges = ", ".join(f"{e['teacher']} -> {e['student']}" for e in best["edges"])
    console.print(
        f"[bold]recommended cohort[/bold] ({best['kind']}, mean u - kappa {best['score']:.3f}: "
        f"kappa {best['kappa']:.2f}, u {best['u']:.1%}; labels {escape(edges)}):"
    )
    console.print(cohort["agents_yaml"], markup=False, highlight=False, soft_wrap=True)
    if cohort["ring"] is not None:
        pair = cohort["pair"]
        console.print(f"best pair: {' + '.join(pair['members'])} (u - kappa {pair['score']:.3f})", markup=False)
    console.print(f"rule: {cohort['rule']}", style="dim")
