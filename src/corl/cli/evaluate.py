"""`corl eval CKPT [CKPT ...] --data FILE`: greedy, avg@k, maj@k, pass@k and pooled maj@k."""

from __future__ import annotations

import json

import typer

from corl.config import DEFAULT_INSTRUCTION


def evaluate(
    models: list[str] = typer.Argument(..., help="Checkpoint folders, Hugging Face ids or tiny:<family>."),
    data: str = typer.Option(..., "--data", help="Dataset with answers: local JSONL/Parquet/CSV or HF name."),
    split: str = typer.Option("test", help="Split for Hugging Face datasets."),
    n: int | None = typer.Option(None, "--n", help="Evaluate the first N problems."),
    k: int = typer.Option(4, "--k", min=1, help="Samples per problem for avg@k / maj@k / pass@k."),
    temperature: float = typer.Option(1.0, min=0.0),
    max_new_tokens: int = typer.Option(512, min=1),
    prompt_field: str = typer.Option("problem"),
    answer_field: str = typer.Option("answer"),
    template: str = typer.Option("{problem}\n{instruction}", help="Prompt text with {problem} and {instruction}."),
    instruction: str = typer.Option(DEFAULT_INSTRUCTION),
    chat: bool = typer.Option(False, help="Wrap prompts in each tokenizer's chat template."),
    group_by: str | None = typer.Option(None, help="Also report accuracy per value of this field (e.g. level, type)."),
    batch_prompts: int = typer.Option(32, min=1, help="Prompts per generate call."),
    seed: int = 0,
    engine_name: str = typer.Option("hf", "--engine", help="Rollout engine: hf (any device) or vllm (pip install corl[vllm])."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object and nothing else on stdout."),
) -> None:
    """Evaluate one or more models; several models are also scored as a pooled-vote ensemble."""
    import torch
    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from corl.config import RolloutConfig
    from corl.data import DataError, PromptTemplate, build_problems, load_rows
    from corl.evaluate import accuracy_by_group, grade, majority_correct, pooled, sample_answers, score
    from corl.models import load_policy
    from corl.rollout import SamplingParams, build_engine

    err = Console(stderr=True)
    try:
        rows = load_rows(data, split)[:n]
        problems, gold_by_id = build_problems(rows, data, [prompt_field], answer_field=answer_field)
    except DataError as e:
        err.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    gold = [gold_by_id[p.id] for p in problems]
    results: dict = {"data": data, "n": len(problems), "k": k, "temperature": temperature, "models": {}}
    all_sampled = []
    with Progress(console=err, transient=True) as bar:
        for name in models:
            model, tok = load_policy(name)
            tmpl = PromptTemplate(template, instruction, chat)
            engine = build_engine(RolloutConfig(engine=engine_name), model, tok, add_special_tokens=not chat)
            prompts = [tmpl.render(p.texts[prompt_field], tok) for p in problems]
            task = bar.add_task(f"{name}", total=2 * len(prompts))
            advance = lambda m, task=task: bar.advance(task, m)  # noqa: E731
            torch.manual_seed(seed)
            greedy, _ = sample_answers(engine, prompts, 1, SamplingParams(0.0, 1.0, max_new_tokens), batch_prompts, advance)
            sampled, lengths = sample_answers(
                engine, prompts, k, SamplingParams(temperature, 1.0, max_new_tokens), batch_prompts, advance
            )
            all_sampled.append(sampled)
            s = score(sampled, gold)
            entry = {"greedy": score(greedy, gold).accuracy, **s.as_dict(), "mean_length": sum(lengths) / len(lengths)}
            if group_by:
                groups = [str(r.get(group_by)) for r in rows]
                entry["greedy_by_" + group_by] = accuracy_by_group([c[0] for c in grade(greedy, gold)], groups)
                entry[f"maj@{k}_by_" + group_by] = accuracy_by_group(majority_correct(sampled, gold), groups)
            results["models"][name] = entry
    if len(models) > 1:
        results[f"pooled_maj@{k * len(models)}"] = sum(majority_correct(pooled(all_sampled), gold)) / len(gold)

    if as_json:
        print(json.dumps(results))
        return
    table = Table(title=f"{data} ({len(problems)} problems, k={k}, T={temperature})")
    for col in ("model", "greedy", f"avg@{k}", f"maj@{k}", f"pass@{k}", "mean length"):
        table.add_column(col)
    for name, e in results["models"].items():
        table.add_row(
            name,
            f"{e['greedy']:.3f}",
            f"{e[f'avg@{k}']:.3f}",
            f"{e[f'maj@{k}']:.3f}",
            f"{e[f'pass@{k}']:.3f}",
            f"{e['mean_length']:.1f}",
        )
    out = Console()
    out.print(table)
    for key, value in results.items():
        if key.startswith("pooled_"):
            out.print(f"{key} over all models: {value:.3f}")


def register(app: typer.Typer) -> None:
    app.command("eval")(evaluate)
