"""`corl quickstart`: the embedded default, a tiny cohort learning without labels on a CPU."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import typer
from rich.markup import escape  # messages carry user text: "corl[vllm]", "runs[best]" are no markup


def quickstart(
    out: Path = typer.Option(Path("runs/quickstart"), "--out", help="Where the runs, results.json and report.md go."),
    methods: str = typer.Option(
        "base,ttrl,co-rl,gt",
        help="Comma-separated: base, ttrl, co-rl, gt, rent, intuitor, co-rewarding-ii, co-rl-same-family; the controls "
        "ttrl-matched (TTRL voting over N x K samples), co-rl-frozen-a / co-rl-frozen-b (the first / second family frozen), "
        "co-rl-votes (labels voted from 2K samples, trained on K); label variants random-label, co-rl-confidence, co-rl-soft, co-rl-pooled (3 agents).",
    ),
    families: str = typer.Option("llama-char,qwen2-bpe", help="Comma-separated tiny families (corl.studies.tiny.families)."),
    agents: int | None = typer.Option(
        None, min=2, max=3, help="Cohort size with the built-in families: 2 (llama-char, qwen2-bpe) or 3 (+ gemma-bpe: a ring)."
    ),
    seeds: int = typer.Option(1, min=1, help="Repeat the RL runs with N seeds; report mean ± std."),
    seed: int = typer.Option(
        0,
        min=0,
        help="Seed of the whole pipeline: 0 is the embedded default; S > 0 pretrains every family anew (its seed sibling).",
    ),
    # None = the default of corl.studies.quickstart.QuickstartOptions (not imported here: it loads torch).
    steps: int | None = typer.Option(None, min=1, help="RL steps of every method (equal budgets). Default: 40."),
    lr: float | None = typer.Option(None, min=0.0, help="AdamW learning rate of every agent. Default: 3e-5."),
    min_agreement: float | None = typer.Option(
        None, min=0.0, max=1.0, help="Share of the K votes a voting method's label needs (0 = plain majority). Default: 0.6."
    ),
    budget_minutes: float = typer.Option(
        10.0, help="Wall-time budget: methods beyond base/ttrl/co-rl/gt run only if predicted to finish within it."
    ),
    smoke: bool = typer.Option(False, help="A few steps of every stage (CI): checks the plumbing, not the result."),
    vision: bool = typer.Option(
        False,
        "--vision",
        help="Vision-language agents: a tiny Qwen2-VL and a LLaVA/SigLIP model (different vision encoders) on an image task.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object with every measured number, nothing else."),
) -> None:
    """Pretrain a tiny cohort, measure error decoupling, train Base/TTRL/Co-RL/GT-Reward, report."""
    import contextlib
    import sys

    from corl.cli.output import console as make_console
    from corl.studies.quickstart import METHODS, QuickstartOptions, run_quickstart
    from corl.studies.quickstart_options import vision_defaults
    from corl.studies.tiny.families import FAMILIES

    console = make_console(stderr=True)
    if agents is not None:
        families = ",".join(list(FAMILIES)[:agents])  # the registry's order is the ring's: agent n learns from n-1
    chosen = {k: v for k, v in {"steps": steps, "lr": lr, "min_agreement": min_agreement}.items() if v is not None}
    opts = dataclasses.replace(
        QuickstartOptions.smoke(out) if smoke else QuickstartOptions(out=out),
        methods=tuple(m.strip() for m in methods.split(",") if m.strip()),
        families=tuple(f.strip() for f in families.split(",") if f.strip()),
        seeds=seeds,
        seed=seed,
        budget_s=budget_minutes * 60,
        **chosen,
    )
    if vision:
        opts = vision_defaults(opts)
    unknown = [m for m in opts.methods if m not in METHODS]
    if unknown:
        console.print(f"[red]error:[/red] unknown method(s) {escape(', '.join(unknown))}; choose from {', '.join(METHODS)}")
        raise typer.Exit(2)
    if len(opts.families) < 2 and any(m.startswith("co-rl") and m != "co-rl-same-family" for m in opts.methods):
        console.print("[red]error:[/red] co-rl needs at least 2 families")
        raise typer.Exit(2)
    from corl.labels import label_source_spec

    for m in opts.methods:  # a topology for larger cohorts (co-rl-pooled: 3 agents)
        spec = METHODS[m]
        if spec is not None and spec.together and label_source_spec(spec.label_source).min_agents > len(opts.families):
            need = label_source_spec(spec.label_source).min_agents
            console.print(f"[red]error:[/red] {m} needs at least {need} agents: add --agents {need} (or more --families)")
            raise typer.Exit(2)
    # With --json, stdout carries the JSON object alone: progress goes to stderr.
    redirect = contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext()
    with redirect:
        results = run_quickstart(opts, say=lambda msg: console.print(msg, highlight=False))
    if as_json:
        print(json.dumps(results))
        return
    from corl.studies.claims import describe
    from corl.studies.quickstart_selection import selection_table
    from corl.studies.report import diversity_table, ensembles_table, results_table

    # Markdown tables print as they are (a console would wrap them): they paste into notes.
    print(results_table(results), diversity_table(results["diversity"]), ensembles_table(results["ensembles"]), sep="\n\n")
    if selected := selection_table(results):
        print(
            "\ncheckpoint selection (test accuracy %: last | label-free selected | truth selected, diagnostic)",
            selected,
            sep="\n",
        )
    for claim in results["claims"]:
        print("- " + describe(claim).replace("**not reproduced**", "NOT reproduced"))
    cpu = f" (CPU time {results['cpu_seconds']} s)" if results.get("cpu_seconds") is not None else ""
    print(f"\nwall time {results['wall_time_s']} s{cpu}; report: {results['report']}")


def register(app: typer.Typer) -> None:
    app.command("quickstart")(quickstart)
