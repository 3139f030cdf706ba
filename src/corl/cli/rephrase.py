"""`corl rephrase`: reword a dataset's problems, answers kept, for data decoupling.

    export OPENAI_API_KEY=...
    corl rephrase data/math/train.jsonl -o math_rephrased.jsonl --model gpt-4o-mini
    corl rephrase data.jsonl -o out.jsonl --model qwen --base-url http://localhost:8000/v1 --api-key-env VLLM_KEY
    corl rephrase data.jsonl -o out.jsonl --backend hf --model Qwen/Qwen2.5-1.5B-Instruct --batch-size 8
    corl rephrase data.jsonl -o out.jsonl --model gpt-4o-mini --check --check-model Qwen/Qwen2.5-Math-1.5B

The output has the input's rows, in order, with every field kept and the rewrite in
`--new-field`; a training config then points one agent's `prompt_field` at it. Finished
rows go to `<output>.journal.jsonl` as they arrive, so an interrupted or partly failed
run continues where it stopped when the same command is run again (corl.studies.rephrase
explains the format). The command exits 1 while any row is unfinished.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

PAPER_NOTE = "Co-RL data decoupling: the paper rewrote MATH problems as real-world scenarios, answers kept."


def register(app: typer.Typer) -> None:
    app.command("rephrase", help=f"Rewrite a dataset's problems in another wording that keeps the answer. {PAPER_NOTE}")(rephrase)


def rephrase(
    data: Annotated[str, typer.Argument(help="Local JSONL/JSON/Parquet/CSV file or Hugging Face dataset name.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Output .jsonl file (row-aligned with the input).")],
    model: Annotated[str, typer.Option(help="Model name at the endpoint (--backend openai) or HF id/path (--backend hf).")],
    split: Annotated[str | None, typer.Option(help="Split of a Hugging Face dataset (default train).")] = None,
    field: Annotated[str, typer.Option(help="Field holding the problem to rewrite.")] = "problem",
    id_field: Annotated[str, typer.Option(help="Field holding the row id (row index where absent).")] = "id",
    new_field: Annotated[str, typer.Option(help="Field that receives the rewrite.")] = "problem_rephrased",
    backend: Annotated[
        str, typer.Option(help="openai: any OpenAI-compatible /chat/completions endpoint; hf: a local model.")
    ] = "openai",
    base_url: Annotated[str, typer.Option(help="Endpoint base URL, up to and including /v1.")] = "https://api.openai.com/v1",
    api_key_env: Annotated[
        str, typer.Option(help="Environment variable holding the API key ('' for a server without authentication).")
    ] = "OPENAI_API_KEY",
    instruction: Annotated[
        str | None,
        typer.Option(help="Rewrite instruction: the system message, or a user-message template if it contains {problem}."),
    ] = None,
    instruction_file: Annotated[Path | None, typer.Option(help="Read the instruction from this file instead.")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Requests in flight at once (openai backend).")] = 8,
    timeout: Annotated[float, typer.Option(min=0.001, help="Seconds to wait for the server before retrying.")] = 120.0,
    max_retries: Annotated[int, typer.Option(min=0, help="Retries per row after the first attempt.")] = 6,
    retry_base_delay: Annotated[float, typer.Option(min=0.0, help="First backoff delay in seconds; doubles per retry.")] = 1.0,
    retry_max_delay: Annotated[float, typer.Option(min=0.0, help="Longest wait between retries, Retry-After included.")] = 60.0,
    temperature: Annotated[float, typer.Option(min=0.0, help="Sampling temperature of the rewriter (0 = greedy).")] = 0.7,
    max_tokens: Annotated[int, typer.Option(min=1, help="Token budget of one rewrite; a cut-off rewrite fails its row.")] = 1024,
    extra_body: Annotated[
        str | None, typer.Option(help="JSON merged into each request body, e.g. '{\"top_p\": 0.9}'; null removes a key.")
    ] = None,
    device: Annotated[str, typer.Option(help="Device of local models: auto, cpu, cuda, cuda:1, ...")] = "auto",
    batch_size: Annotated[int, typer.Option(min=1, help="Prompts per generate call of local models.")] = 8,
    seed: Annotated[int, typer.Option(help="Seed of local models' sampling (--backend hf and --check).")] = 0,
    check: Annotated[
        bool, typer.Option("--check", help="Solve both wordings K times with a local model and report majority-answer agreement.")
    ] = False,
    check_model: Annotated[
        str | None, typer.Option(help="HF model that solves for --check (default: --model with --backend hf).")
    ] = None,
    check_samples: Annotated[int, typer.Option(min=1, help="K samples per wording for --check.")] = 8,
    check_rows: Annotated[int, typer.Option(min=0, help="Check a seeded random sample of this many rows (0 = all).")] = 0,
    check_temperature: Annotated[float, typer.Option(min=0.0, help="Sampling temperature for --check.")] = 1.0,
    check_max_tokens: Annotated[int, typer.Option(min=1, help="Completion budget per solution for --check.")] = 1024,
    check_template: Annotated[
        str,
        typer.Option(
            help="Solver prompt for --check, like data.template of a run config ({problem}, {instruction}; \\n = newline)."
        ),
    ] = r"{problem}\n{instruction}",
    check_instruction: Annotated[str | None, typer.Option(help="{instruction} of --check-template (default: corl's).")] = None,
    check_report: Annotated[Path | None, typer.Option(help="Per-row check results (default <output stem>.check.jsonl).")] = None,
) -> None:
    from corl.cli.output import console as make_console
    from corl.config import DEFAULT_INSTRUCTION
    from corl.data.rows import PromptTemplate, load_rows
    from corl.studies.rephrase import (
        DEFAULT_REPHRASE_INSTRUCTION,
        RephraseError,
        dropped_numbers,
        http_rewriter,
        journal_path,
        rephrase_rows,
        row_ids,
    )

    # markup off: problems and server answers contain [brackets]; soft wrap keeps paths whole.
    console = make_console(stderr=True, markup=False, highlight=False, soft_wrap=True)
    if backend not in ("openai", "hf"):
        raise typer.BadParameter(f"unknown backend {backend!r}; choose openai or hf", param_hint="--backend")
    if instruction is not None and instruction_file is not None:
        raise typer.BadParameter("give --instruction or --instruction-file, not both", param_hint="--instruction")
    text = instruction_file.read_text(encoding="utf-8").strip() if instruction_file else instruction
    text = text or DEFAULT_REPHRASE_INSTRUCTION
    if Path(data).expanduser().resolve() == output.expanduser().resolve():
        raise typer.BadParameter("the output must not overwrite the input", param_hint="--output")
    if check and not (check_model or backend == "hf"):
        raise typer.BadParameter("--check needs a local model to solve with: give --check-model", param_hint="--check-model")
    check_template = check_template.replace("\\n", "\n")  # a typed \n is a newline, as in YAML
    if "{problem}" not in check_template:
        raise typer.BadParameter("must contain the placeholder {problem}", param_hint="--check-template")
    template = PromptTemplate(
        format=check_template, instruction=DEFAULT_INSTRUCTION if check_instruction is None else check_instruction
    )

    try:
        rows = load_rows(data, split)
    except ValueError as err:
        _exit(console, str(err), 2)
    if backend == "openai":
        client = _openai_client(
            console, model, base_url, api_key_env, extra_body, timeout=timeout, max_retries=max_retries,
            base_delay=retry_base_delay, max_delay=retry_max_delay, temperature=temperature, max_tokens=max_tokens,
        )  # fmt: skip
        rewriter = http_rewriter(client, concurrency)
    else:
        rewriter = _hf_rewriter(model, device, temperature, max_tokens, batch_size, seed)

    progress = _progress(console)
    task = progress.add_task("rephrasing", total=None)

    def on_start(todo: int, reused: int) -> None:
        where = base_url if backend == "openai" else f"local, {device}"
        console.print(f"{len(rows)} rows: {reused} already done, {todo} to rewrite with {model} ({where})")
        progress.update(task, total=todo)

    failed = 0

    def on_outcome(row_id: str, error: str | None) -> None:
        nonlocal failed
        failed += error is not None
        progress.update(task, advance=1, description=f"rephrasing ({failed} failed)" if failed else "rephrasing")

    try:
        with progress:
            report = rephrase_rows(
                rows, output, rewriter, instruction=text, field=field, id_field=id_field, new_field=new_field,
                model_name=model, source=f"dataset {data!r}", on_start=on_start, on_outcome=on_outcome,
            )  # fmt: skip
    except RephraseError as err:
        _exit(console, str(err), 2)
    except KeyboardInterrupt:
        console.print(f"interrupted: finished rows are kept in {journal_path(output)}; rerun the same command to continue")
        # Worker threads blocked in a request would hold the process until their timeout;
        # every finished row is already fsynced and the output is written only atomically.
        sys.stderr.flush()
        os._exit(130)

    _print_report(console, report, output)
    if not report.output_written:
        raise typer.Exit(1)

    written = _read_jsonl(output)
    dropped = {rid: dropped_numbers(row[field], row[new_field]) for rid, row in zip(row_ids(written, id_field), written)}
    flagged = {rid: nums for rid, nums in dropped.items() if nums}
    console.print(f"numbers check: {len(flagged)}/{len(written)} rewrites lack a number of their original")
    for rid, nums in list(flagged.items())[:10]:
        console.print(f"  row {rid}: missing {', '.join(nums)}")
    if check:
        _check(console, output, field, id_field, new_field, check_model or model, device, batch_size, check_samples,
               check_rows, check_temperature, check_max_tokens, template, check_report, seed)  # fmt: skip


def _exit(console, message: str, code: int):
    console.print(f"error: {message}", style="red")
    raise typer.Exit(code)


def _progress(console):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
        console=console,
    )  # fmt: skip


def _openai_client(console, model: str, base_url: str, api_key_env: str, extra_body: str | None, **client_opts):
    """The HTTP client, with the API key read from the environment (never from the command line)."""
    from corl.studies.rephrase import OpenAIChatClient

    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            hint = "export it, or pass --api-key-env '' for a server without authentication"
            _exit(console, f"environment variable {api_key_env} is not set; {hint}", 2)
    extra = None
    if extra_body:
        try:
            extra = json.loads(extra_body)
        except json.JSONDecodeError as err:
            raise typer.BadParameter(f"not valid JSON ({err.msg})", param_hint="--extra-body") from None
        if not isinstance(extra, dict):
            raise typer.BadParameter("must be a JSON object", param_hint="--extra-body")
    return OpenAIChatClient(base_url, model, api_key, extra_body=extra, **client_opts)


def _hf_rewriter(model: str, device: str, temperature: float, max_tokens: int, batch_size: int, seed: int):
    import torch

    from corl.models import load_policy
    from corl.studies.rephrase import hf_rewriter

    torch.manual_seed(seed)
    policy, tokenizer = load_policy(model, device=device)
    return hf_rewriter(policy, tokenizer, temperature=temperature, max_new_tokens=max_tokens, batch_size=batch_size)


def _print_report(console, report, output: Path) -> None:
    from corl.studies.rephrase import journal_path

    console.print(f"{report.reused + report.rewritten}/{report.total} rows done ({report.rewritten} in this run)")
    if report.stopped:
        console.print(f"stopped: {report.stopped}", style="red")
    if report.failures:
        console.print(f"{len(report.failures)} rows failed (ids: {', '.join(report.failures)})", style="red")
        for row_id, error in list(report.failures.items())[:20]:
            console.print(f"  row {row_id}: {error}")
    if report.output_written:
        console.print(f"wrote {output}")
    else:
        console.print(f"{output} not written: {report.unfinished} rows unfinished, finished rows are kept in "
                      f"{journal_path(output)}; rerun the same command to do the rest")  # fmt: skip


def _read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _check(console, output: Path, field: str, id_field: str, new_field: str, model: str, device: str, batch_size: int,
           samples: int, limit: int, temperature: float, max_tokens: int, template, report_path: Path | None, seed: int) -> None:  # fmt: skip
    """Answer preservation: majority answers of both wordings, K samples each, by a local model."""
    import dataclasses

    import torch

    from corl.config import RolloutConfig
    from corl.models import load_policy
    from corl.rollout import SamplingParams, build_engine
    from corl.studies.rephrase import answer_agreement, dropped_numbers, row_ids, sample_indices

    rows = _read_jsonl(output)
    ids = row_ids(rows, id_field)
    picked = sample_indices(len(rows), limit, seed)
    torch.manual_seed(seed)
    policy, tokenizer = load_policy(model, device=device)
    template = dataclasses.replace(template, chat=bool(getattr(tokenizer, "chat_template", None)))
    engine = build_engine(RolloutConfig(), policy, tokenizer, add_special_tokens=not template.chat)
    params = SamplingParams(temperature=temperature, top_p=1.0, max_new_tokens=max_tokens)
    progress = _progress(console)
    task = progress.add_task(f"checking with {model}", total=len(picked))
    with progress:
        agreement = answer_agreement(
            engine,
            [template.render(rows[i][field], tokenizer) for i in picked],
            [template.render(rows[i][new_field], tokenizer) for i in picked],
            [ids[i] for i in picked], samples, params, batch_size=batch_size,
            on_batch=lambda n: progress.update(task, advance=n),
        )  # fmt: skip

    report_path = report_path or output.with_name(output.stem + ".check.jsonl")
    with report_path.open("w", encoding="utf-8") as f:
        for i, row in zip(picked, agreement):
            rec = dataclasses.asdict(row) | {"dropped_numbers": dropped_numbers(rows[i][field], rows[i][new_field])}
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    both = [r for r in agreement if r.original_answer is not None and r.rephrased_answer is not None]
    agreed = sum(r.agree for r in agreement)
    console.print(
        f"answer check ({model}, K={samples}): majority answers agree on {agreed}/{len(both)} rows where both wordings "
        f"got an answer ({_pct(agreed, len(both))}); {agreed}/{len(agreement)} of all checked rows ({_pct(agreed, len(agreement))})"
    )
    console.print(f"per-row results: {report_path}")


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}%" if b else "n/a"
