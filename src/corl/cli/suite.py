"""`corl suite CKPT [CKPT ...] --suite paper-text --out DIR`: the paper's protocol, with intervals, resumable."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import typer
from rich.markup import escape  # messages carry user text: "corl[vllm]", "runs[best]" are no markup

SUITE_HELP = "A suite (paper-text, math, code) or benchmark names joined by commas (amc23,humaneval)."


def _plain(value):
    """The value of a parameter, also when called from Python without it (typer leaves its OptionInfo)."""
    from typer.models import ParameterInfo

    return value.default if isinstance(value, ParameterInfo) else value


def suite_command(
    checkpoints: list[str] = typer.Argument(..., help="Checkpoint folders, Hugging Face ids or tiny:<family>."),
    suite: str = typer.Option("paper-text", "--suite", "-s", help=SUITE_HELP),
    out: Path = typer.Option(Path("suite-results"), "--out", help="Folder of cells and results; rerun into it to resume."),
    data: list[str] = typer.Option([], "--data", help="NAME=PATH: another file for one benchmark (repeatable)."),
    data_root: Path | None = typer.Option(
        None, "--data-root", help="Folder of the default files (else ./data as corl data writes it, else ../shared/data)."
    ),
    limit: int | None = typer.Option(None, "--limit", min=1, help="First N problems per benchmark (smoke runs)."),
    engine: str = typer.Option("auto", "--engine", help="auto (vLLM when installed, else hf), hf or vllm."),
    seeds: str | None = typer.Option(None, "--seeds", help="Seeds for every benchmark, e.g. 0,1,2 (default: the table's)."),
    bootstrap: int = typer.Option(1000, "--bootstrap", min=0, help="Bootstrap resamples per figure (0 = no intervals)."),
    bootstrap_seed: int = typer.Option(0, "--bootstrap-seed", help="Seed of the bootstrap's generator."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", min=1, help="Token budget for every benchmark (smoke runs)."),
    chat: bool | None = typer.Option(None, "--chat/--no-chat", help="Chat template for every benchmark (default: table)."),
    batch_prompts: int = typer.Option(32, "--batch-prompts", min=1, help="Prompts per generate call."),
    as_json: bool = typer.Option(False, "--json", help="Print the results JSON on stdout instead of the table."),
):
    """Run a benchmark suite over checkpoints: a Table-1 markdown table, a JSON of every figure with its 95%
    interval, per-problem records per cell, and a pooled maj@k row; an interrupted run resumes."""
    from corl.cli.output import console as make_console
    from corl.evaluation.suite import ProtocolError, default_data_root, effective, parse_data_overrides, resolve_suite, run_suite
    from corl.models import check_model_source

    checkpoints, suite, out, data, data_root, limit = map(_plain, (checkpoints, suite, out, data, data_root, limit))
    engine, seeds, bootstrap, bootstrap_seed = map(_plain, (engine, seeds, bootstrap, bootstrap_seed))
    max_tokens, chat, batch_prompts, as_json = map(_plain, (max_tokens, chat, batch_prompts, as_json))
    err = make_console(stderr=True)
    try:
        benches = resolve_suite(suite)
        overrides = parse_data_overrides(list(data or []), benches)
        try:
            seed_list = tuple(int(s) for s in seeds.split(",") if s.strip()) if seeds else None
        except ValueError:
            raise ProtocolError(f"--seeds {seeds!r}: expected integers joined by commas, e.g. 0,1,2") from None
        if engine not in ("auto", "hf", "vllm"):
            raise ProtocolError(f"--engine {engine!r}: choose auto, hf or vllm")
        if engine == "vllm" and importlib.util.find_spec("vllm") is None:
            raise ProtocolError("--engine vllm: vLLM is not installed (pip install 'corl[vllm]'), or use --engine hf")
        for c in checkpoints:  # fail in milliseconds on a wrong path, before any model loads
            check_model_source(c, f"checkpoint {c!r}")
        root = Path(data_root) if data_root else default_data_root()
        benches = effective(benches, root, overrides, limit, seed_list, max_tokens, chat)
        for b in benches:  # a file named on the command line must exist: a typo is not a "not run"
            if b.name in overrides and b.data.startswith("/") and not Path(b.data).is_file():
                raise ProtocolError(f"--data {b.name}={overrides[b.name]}: file {b.data} not found")
    except ValueError as e:  # ProtocolError, ConfigError (a missing checkpoint)
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(2) from None
    outcome = run_suite(
        suite,
        benches,
        list(checkpoints),
        Path(out),
        engine=engine,
        resamples=bootstrap,
        bootstrap_seed=bootstrap_seed,
        batch_prompts=batch_prompts,
        console=err,
    )
    from corl.checkpoints.model_card import record_suite_results

    for card in record_suite_results(outcome.results):  # a corl checkpoint's model card gains the figures
        err.print(f"model card updated: {card}", soft_wrap=True)
    err.print(
        f"cells: {len(outcome.computed)} computed, {len(outcome.reused)} reused, {len(outcome.not_run)} not run; "
        f"results in {Path(out) / 'results.json'} and {Path(out) / 'results.md'}"
    )
    if as_json:
        print(json.dumps(outcome.results))
    else:
        sys.stdout.write((Path(out) / "results.md").read_text(encoding="utf-8"))  # plain: rich would wrap the table
    return outcome  # a corl.evaluation.suite.SuiteOutcome, for callers in Python (typer ignores it)


def register(app: typer.Typer) -> None:
    app.command("suite")(suite_command)
