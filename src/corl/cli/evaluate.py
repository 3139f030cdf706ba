"""`corl eval CKPT [CKPT ...] --data FILE`: math (greedy, avg@k, maj@k, pass@k, pooled maj@k) or code (pass@1, pass@k).

Math: answers extracted with `--extract strict` (the reward policy: None when nothing is
stated) or `flexible` (else the last number, for parity with graders that fall back so).
Code (`--task code`): HumanEval / MBPP rows in lm-eval's prompt conventions (`--style`,
inferred from the rows; `--chat` picks the instruct variant), programs run in the sandbox
against the hidden tests, unbiased pass@k (Chen et al. 2021) over `--k` samples.
`--records FILE` writes one JSON line per (model, problem) with every completion and its outcome.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape  # help texts are rich markup: "corl[vllm]" would lose "[vllm]"

from corl.config import DEFAULT_INSTRUCTION
from corl.files import NotWritten, write_jsonl

CODE_STYLES = ("humaneval", "humaneval_instruct", "mbpp", "mbpp_instruct")


def evaluate(
    ctx: typer.Context,
    models: list[str] = typer.Argument(
        ...,
        help="Run folders (every agent of a checkpoint), checkpoint folders, model folders, Hugging Face ids or tiny:<family>.",
    ),
    step: str | None = typer.Option(
        None, "--step", help="A run folder's checkpoint: a step number, latest (default), best (RUN/best) or best-<rule>."
    ),
    data: str | None = typer.Option(
        None, "--data", help="Dataset with answers (math) or tests (code): local JSONL/Parquet/CSV or HF name."
    ),
    split: str = typer.Option("test", help="Split for Hugging Face datasets."),
    n: int | None = typer.Option(None, "--n", help="Evaluate the first N problems."),
    k: int = typer.Option(4, "--k", min=1, help="Samples per problem for avg@k / maj@k / pass@k."),
    temperature: float = typer.Option(1.0, min=0.0),
    max_new_tokens: int = typer.Option(512, min=1),
    prompt_field: str = typer.Option("problem", help="math: the field holding the problem text."),
    answer_field: str = typer.Option("answer", help="math: the field holding the answer."),
    template: str = typer.Option("{problem}\n{instruction}", help="math: prompt text with {problem} and {instruction}."),
    instruction: str = typer.Option(DEFAULT_INSTRUCTION),
    chat: bool = typer.Option(
        False, help="Wrap prompts in each tokenizer's chat template (code: the instruct style); a run's agents: their own."
    ),
    stop: list[str] = typer.Option(
        [], "--stop", help="End each completion at this string (repeatable): a base model prompted few-shot, --stop '\\n'."
    ),
    group_by: str | None = typer.Option(None, help="math: also report accuracy per value of this field (e.g. level, type)."),
    batch_prompts: int = typer.Option(32, min=1, help="Prompts per generate call."),
    seed: int = 0,
    engine_name: str = typer.Option(
        "hf", "--engine", help=escape("Rollout engine: hf (any device) or vllm (pip install corl[vllm]).")
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object and nothing else on stdout."),
    task: str = typer.Option(
        "math",
        "--task",
        help="A task kind (corl.tasks): math (final answers), code (programs run against the tests), or a plugin's.",
    ),
    style: str | None = typer.Option(
        None, "--style", help=f"code: prompt convention, one of {', '.join(CODE_STYLES)}; default from the rows and --chat."
    ),
    shots: str | None = typer.Option(
        None, "--shots", help="code, mbpp style: few-shot rows (MBPP's prompt split; task_ids 2-4)."
    ),
    records: Path | None = typer.Option(
        None, "--records", help="Write per-problem records (completions, outcomes) to this JSONL."
    ),
    extract: str = typer.Option("strict", "--extract", help="math: answer extraction, strict or flexible (see corl.answers)."),
    suite: str | None = typer.Option(
        None, "--suite", help="Run a named benchmark suite instead (paper-text, math, code): `corl suite` with its defaults."
    ),
    out: Path = typer.Option(Path("suite-results"), "--out", help="--suite: the folder of cells and results (rerun to resume)."),
) -> None:
    """Evaluate one or more models; several models are also scored as a pooled-vote ensemble (math)."""
    from rich.markup import escape

    from corl.answers import EXTRACTION_MODES
    from corl.cli.output import console as make_console
    from corl.evaluation.run_targets import DATA_OPTIONS, PROMPT_OPTIONS, TargetError, resolve_targets, run_defaults

    err = make_console(stderr=True)  # "tiny:train:2000" is a data source, not an emoji code
    try:  # a run folder means every agent of its checkpoint, each named by its agent
        targets = resolve_targets(models, step)
        taken, note = run_defaults(targets, _given(ctx))
    except TargetError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
        raise typer.Exit(2) from None
    models = [t.source for t in targets]
    if suite is not None:  # the paper's protocol, one command: the suite runner with its own table of settings
        from corl.cli.suite import suite_command

        suite_command(checkpoints=models, suite=suite, out=out, limit=n, engine="auto", as_json=as_json)
        return
    data, split, n, prompt_field, answer_field = (
        taken.get(k, v) for k, v in zip(DATA_OPTIONS, (data, split, n, prompt_field, answer_field))
    )
    template, instruction, max_new_tokens, stop, task = (
        taken.get(k, v) for k, v in zip(PROMPT_OPTIONS, (template, instruction, max_new_tokens, stop, task))
    )
    # a run's agent is prompted as it trained (agents[].chat_template), unless --chat is given
    chats = {t.source: t.chat if t.chat is not None and "chat" not in _given(ctx) else taken.get("chat", chat) for t in targets}
    if note:
        err.print(f"corl eval: {', '.join(t.label for t in targets)}; {note}")
    if data is None:
        err.print("[red]error:[/red] give --data FILE (or --suite NAME for a benchmark suite, or a run folder with data.val)")
        raise typer.Exit(2)
    from corl.tasks import TASKS

    kinds = [name for name in TASKS.names() if TASKS.get(name).evaluate_as is not None]
    if task not in kinds:
        err.print(
            f"[red]error:[/red] --task must be a task kind corl eval can score ({', '.join(kinds)}), got {escape(repr(task))}"
        )
        raise typer.Exit(2)
    evaluate_as = TASKS.get(task).evaluate_as  # the task kind says how it is scored: final answers or programs
    if extract not in EXTRACTION_MODES:
        err.print(f"[red]error:[/red] --extract must be one of {', '.join(EXTRACTION_MODES)}, got {escape(repr(extract))}")
        raise typer.Exit(2)
    if style is not None and style not in CODE_STYLES:
        err.print(f"[red]error:[/red] --style must be one of {', '.join(CODE_STYLES)}, got {escape(repr(style))}")
        raise typer.Exit(2)
    common = dict(
        models=models, data=data, split=split, n=n, k=k, temperature=temperature, max_new_tokens=max_new_tokens,
        chats=chats, stop=tuple(stop), batch_prompts=batch_prompts, seed=seed, engine_name=engine_name, err=err,
    )  # fmt: skip
    if evaluate_as == "code":
        results, per_problem = _evaluate_code(style=style, shots=shots, **common)
    else:
        results, per_problem = _evaluate_math(
            prompt_field=prompt_field, answer_field=answer_field, template=template, instruction=instruction,
            group_by=group_by, extract=extract, **common,
        )  # fmt: skip
    _relabel(results, per_problem, targets)
    if records is not None:
        try:
            write_jsonl(records, per_problem)  # whole or not at all: a kill leaves no shorter file
        except NotWritten as e:
            err.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
            raise typer.Exit(1) from None
    if as_json:
        print(json.dumps(results))
        return
    _print_table(results, evaluate_as, k)


def _given(ctx: typer.Context) -> frozenset[str]:
    """The options given on the command line (the rest may come from the run or the model source)."""
    # by name: typer carries its own copy of click, whose ParameterSource is another class
    sources = {k: getattr(ctx.get_parameter_source(k), "name", "DEFAULT") for k in ctx.params}
    return frozenset(k for k, source in sources.items() if source not in ("DEFAULT", "DEFAULT_MAP"))


def _relabel(results: dict, per_problem: list[dict], targets) -> None:
    """Key results and records by each model's label (agent names, distinct tails of paths), not its path."""
    label = {t.source: t.label for t in targets}
    results["models"] = {label.get(name, name): entry for name, entry in results["models"].items()}
    results["sources"] = {t.label: t.source for t in targets}
    for record in per_problem:
        record["model"] = label.get(record["model"], record["model"])


def _greedy_and_sampled(engine, prompts, bar, name, seed, k, temperature, max_new_tokens, batch_prompts, stop=()):
    """One greedy completion and K sampled ones per prompt (seeded), advancing `name`'s bar."""
    import torch

    from corl.evaluation.evaluate import sample_completions
    from corl.rollout import SamplingParams

    bar_task = bar.add_task(f"{name}", total=2 * len(prompts))
    advance = lambda m: bar.advance(bar_task, m)  # noqa: E731
    torch.manual_seed(seed)
    greedy = SamplingParams(0.0, 1.0, max_new_tokens, stop)
    greedy_texts, _ = sample_completions(engine, prompts, 1, greedy, batch_prompts, advance)
    texts, lengths = sample_completions(
        engine, prompts, k, SamplingParams(temperature, 1.0, max_new_tokens, stop), batch_prompts, advance
    )
    return greedy_texts, texts, lengths


def _engine(name: str, engine_name: str, chat: bool):
    """(engine, tokenizer, processor): a vision-language checkpoint comes with its processor, else None."""
    from corl.config import RolloutConfig
    from corl.models import load_agent_policy
    from corl.rollout import build_engine

    model, tok, processor = load_agent_policy(name)
    # a chat template writes its own special tokens; the tokenizer must not add a second BOS
    engine = build_engine(RolloutConfig(engine=engine_name), model, tok, add_special_tokens=not chat, processor=processor)
    return engine, tok, processor


def _math_prompts(problems, field: str, template, tok, processor) -> list:
    """Each problem's prompt: a vision-language checkpoint sees the row's images before the text."""
    if processor is None:
        return [template.render(p.texts[field], tok) for p in problems]
    from corl.data.rows import IMAGES_INPUT
    from corl.vision.inputs import image_prompt

    return [image_prompt(processor, template.text(p.texts[field]), p.inputs.get(IMAGES_INPUT)) for p in problems]


def _evaluate_math(
    models, data, split, n, k, temperature, max_new_tokens, prompt_field, answer_field, template, instruction, chats,
    stop, group_by, batch_prompts, seed, engine_name, extract, err,
) -> tuple[dict, list[dict]]:  # fmt: skip
    from rich.progress import Progress

    from corl.data.rows import IMAGES_INPUT, OPTIONS_INPUT, DataError, PromptTemplate, build_problems, load_rows
    from corl.evaluation.evaluate import (
        INTERVALS,
        accuracy_by_group,
        extract_all,
        grade,
        majority_correct,
        pooled,
        problem_scores,
        score,
        spread,
    )

    try:
        rows = load_rows(data, split)[:n]
        problems, gold_by_id = build_problems(
            rows, data, [prompt_field], answer_field=answer_field, input_fields=(OPTIONS_INPUT,), image_field=IMAGES_INPUT
        )
    except DataError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(2) from None
    gold = [gold_by_id[p.id] for p in problems]
    options = [p.inputs.get(OPTIONS_INPUT) for p in problems]  # multiple choice: the answer is the picked letter
    results: dict = {"data": data, "task": "math", "extract": extract, "n": len(problems), "k": k, "temperature": temperature}
    results["intervals"], results["models"] = INTERVALS, {}
    per_problem: list[dict] = []
    all_sampled = []
    with Progress(console=err, transient=True) as bar:
        for name in models:
            engine, tok, processor = _engine(name, engine_name, chats[name])
            tmpl = PromptTemplate(template, instruction, chats[name])
            prompts = _math_prompts(problems, prompt_field, tmpl, tok, processor)
            greedy_texts, texts, lengths = _greedy_and_sampled(
                engine, prompts, bar, name, seed, k, temperature, max_new_tokens, batch_prompts, stop
            )
            greedy, sampled = extract_all(greedy_texts, extract, options), extract_all(texts, extract, options)
            all_sampled.append(sampled)
            greedy_ok, sampled_ok = grade(greedy, gold), grade(sampled, gold)
            figures = {"greedy": score(greedy, gold).accuracy, **score(sampled, gold).as_dict()}
            by_problem = {
                "greedy": [float(c[0]) for c in greedy_ok],
                **problem_scores(sampled_ok, majority_correct(sampled, gold)),
            }
            entry = {**figures, "mean_length": sum(lengths) / len(lengths), **spread(figures, by_problem)}
            if group_by:
                groups = [str(r.get(group_by)) for r in rows]
                entry["greedy_by_" + group_by] = accuracy_by_group([c[0] for c in grade(greedy, gold)], groups)
                entry[f"maj@{k}_by_" + group_by] = accuracy_by_group(majority_correct(sampled, gold), groups)
            results["models"][name] = entry
            for i, p in enumerate(problems):
                per_problem.append(
                    {
                        "model": name,
                        "id": p.id,
                        "gold": gold[i],
                        "greedy": {"completion": greedy_texts[i][0], "answer": greedy[i][0], "correct": greedy_ok[i][0]},
                        "samples": [
                            {"completion": t, "answer": a, "correct": c} for t, a, c in zip(texts[i], sampled[i], sampled_ok[i])
                        ],
                    }
                )
    if len(models) > 1:
        right = [float(c) for c in majority_correct(pooled(all_sampled), gold)]
        figure = {f"pooled_maj@{k * len(models)}": sum(right) / len(right)}
        results.update(figure | spread(figure, dict.fromkeys(figure, right)))
    return results, per_problem


def _code_rows(data: str, split: str, n: int | None, style: str | None, chat: bool, shots: str | None, err):
    """(rows as the harness reads them, the style, the few-shot rows); errors name the row at fault."""
    from corl.data.rows import DataError, load_rows
    from corl.tasks.code.task import is_humaneval, is_mbpp, mbpp_view, shot_rows

    try:
        rows = load_rows(data, split)[:n]
        few = shot_rows(shots, shots) if shots else []
    except DataError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(2) from None
    if not rows:
        err.print(f"[red]error:[/red] dataset {escape(repr(data))} has no rows")
        raise typer.Exit(2)
    kinds = ["humaneval" if is_humaneval(r) else "mbpp" if is_mbpp(r) else None for r in rows]
    for i, kind in enumerate(kinds):
        if kind is None or kind != kinds[0]:
            what = "not a HumanEval (prompt, test, entry_point) or MBPP (text, code, test_list) row" if kind is None else (
                f"a {kind} row among {kinds[0]} rows"
            )  # fmt: skip
            err.print(f"[red]error:[/red] dataset {escape(repr(data))} row {i}: {escape(str(what))}")
            raise typer.Exit(2)
    style = style or (kinds[0] + ("_instruct" if chat else ""))
    if not style.startswith(kinds[0]):
        err.print(
            f"[red]error:[/red] --style {escape(str(style))} does not fit {escape(repr(data))}: its rows are {kinds[0]} rows"
        )
        raise typer.Exit(2)
    if few and style != "mbpp" and style != "mbpp_instruct":
        err.print("[red]error:[/red] --shots is for the mbpp styles")
        raise typer.Exit(2)
    # sanitized MBPP names its text `prompt`: read it as full MBPP, or `prompt` would prefix every program
    rows = [mbpp_view(r) if kinds[0] == "mbpp" else dict(r) for r in rows]
    return rows, style, [mbpp_view(s) for s in few]


def _code_prompt(row, style: str, shots, tok) -> str:
    from corl.tasks.code.prompts import chat_prompt, humaneval_instruct, humaneval_prompt, mbpp_instruct, mbpp_prompt

    if style == "humaneval":
        return humaneval_prompt(row)
    if style == "mbpp":
        return mbpp_prompt(row, shots)
    if not getattr(tok, "chat_template", None):
        raise ValueError(f"--style {style} needs a tokenizer with a chat template")
    messages, prefix = humaneval_instruct(row) if style == "humaneval_instruct" else mbpp_instruct(row, shots)
    return chat_prompt(tok, messages, prefix)


def _evaluate_code(
    models, data, split, n, k, temperature, max_new_tokens, chats, stop, batch_prompts, seed, engine_name, style, shots, err
) -> tuple[dict, list[dict]]:
    from rich.progress import Progress

    from corl.evaluation.code_eval import evaluate as run_tests_on
    from corl.evaluation.evaluate import INTERVALS, spread
    from corl.tasks.code.execute import close

    rows, style, few = _code_rows(data, split, n, style, any(chats.values()), shots, err)
    ks = sorted({1, k})
    results: dict = {"data": data, "task": "code", "style": style, "n": len(rows), "k": k, "temperature": temperature}
    results["intervals"], results["models"] = INTERVALS, {}
    per_problem: list[dict] = []
    try:
        with Progress(console=err, transient=True) as bar:
            for name in models:
                engine, tok, _ = _engine(name, engine_name, style.endswith("_instruct"))
                try:
                    prompts = [_code_prompt(r, style, few, tok) for r in rows]
                except ValueError as e:
                    err.print(f"[red]error:[/red] {escape(str(name))}: {escape(str(e))}")
                    raise typer.Exit(2) from None
                greedy_texts, texts, lengths = _greedy_and_sampled(
                    engine, prompts, bar, name, seed, k, temperature, max_new_tokens, batch_prompts, stop
                )
                greedy = run_tests_on(rows, greedy_texts, style, ks=(1,))
                sampled = run_tests_on(rows, texts, style, ks=ks, plus=True)  # MBPP rows: pass@k+ too (corl.tasks.code.plus)
                figures = {
                    "greedy": greedy.pass_at[1],
                    **{f"pass@{j}": sampled.pass_at[j] for j in ks},
                    **{f"pass@{j}+": sampled.pass_plus[j] for j in ks if j in sampled.pass_plus},
                }
                by_problem = {"greedy": [e["pass@1"] for e in greedy.per_problem]}
                by_problem |= {m: [e[m] for e in sampled.per_problem] for m in figures if m != "greedy"}
                results["models"][name] = figures | {"mean_length": sum(lengths) / len(lengths)} | spread(figures, by_problem)
                per_problem.extend(_code_records(name, style, rows, greedy_texts, greedy, texts, sampled, k))
    finally:
        close()  # the sandbox pool's workers
    return results, per_problem


def _code_records(name, style, rows, greedy_texts, greedy, texts, sampled, k) -> list[dict]:
    def outcome(text, rec) -> dict:
        return {"completion": text, "passed": rec.passed, "status": rec.status, "error": rec.error}

    out = []
    for i, (row, problem) in enumerate(zip(rows, sampled.per_problem, strict=True)):
        samples = sampled.records[i * k : (i + 1) * k]  # records are in (problem, sample) order
        out.append(
            {
                "model": name,
                "task_id": str(row["task_id"]),
                "style": style,
                "greedy": outcome(greedy_texts[i][0], greedy.records[i]),
                **problem,  # n, c, pass@1, pass@k
                "samples": [outcome(t, rec) for t, rec in zip(texts[i], samples, strict=True)],
            }
        )
    return out


def _print_table(results: dict, task: str, k: int) -> None:
    from rich.table import Table

    from corl.cli.grade import INTERVAL_NOTE, cell
    from corl.cli.output import console as make_console

    title = f"{results['data']} ({results['n']} problems, k={k}, T={results['temperature']}"
    title += f", {results['style']})" if task == "code" else f", extract={results['extract']})"
    table = Table(title=title, caption=INTERVAL_NOTE)
    metrics = ["greedy", "pass@1", f"pass@{k}"] if task == "code" else ["greedy", f"avg@{k}", f"maj@{k}", f"pass@{k}"]
    metrics = list(dict.fromkeys(metrics))  # k = 1: pass@1 once
    for col in ("model", *metrics, "mean length"):
        table.add_column(col)
    for name, e in results["models"].items():
        table.add_row(name, *(cell(e, m) for m in metrics), f"{e['mean_length']:.1f}")
    out = make_console()
    out.print(table)
    for key in results:
        if key.startswith("pooled_"):
            out.print(f"{key} over all models: {cell(results, key)}")


def register(app: typer.Typer) -> None:
    app.command("eval")(evaluate)
