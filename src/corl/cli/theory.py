"""`corl theory`: Proposition 2 and Theorem 1, as ODEs and through corl's real code.

corl theory                          # tables on the terminal; runs/theory/theory.{png,json}
corl theory --json > theory.json     # one JSON object on stdout, nothing else
corl theory --k 3 --steps 120 --no-extras
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import typer


def theory(
    out: Path = typer.Option(Path("runs/theory"), "--out", help="Folder for theory.png and theory.json."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object on stdout and nothing else."),
    seed: int = typer.Option(0, help="Seed of the real-code simulation (the ODEs are deterministic)."),
    k: int = typer.Option(5, "--k", help="Answers per question per step: vote and GRPO group size K (odd: Prop. 2)."),
    steps: int = typer.Option(80, help="SGD steps of the real-code simulation."),
    lr: float = typer.Option(0.5, help="SGD learning rate, the ODE's eta."),
    groups: int = typer.Option(16, help="Times each question is asked per step (groups of K); more = less noise."),
    grid: int = typer.Option(9, help="Starting probabilities per axis, spread over 0.1..0.9."),
    example_questions: int = typer.Option(20, help="Questions in the paper's (0.9, 0.2) / (0.2, 0.9) example."),
    extras: bool = typer.Option(True, help="Also run even K, a ring of 3 agents and several wrong answers."),
) -> None:
    """Reproduce the paper's binary-outcome theory (Prop. 2, Thm. 1) through corl's real code.

    Self-reward drives p < 1/2 to 0; two Co-RL agents reach the correct answer iff p_A + p_B > 1.
    Each claim is checked by the ODE and by toy policies trained with corl's vote, labels and GRPO.
    """
    from corl.cli.output import console as make_console
    from corl.studies.theory import SimSettings, TheorySettings, run_theory
    from corl.studies.theory_plot import plot_theory

    if k < 2 or steps < 1 or groups < 1 or grid < 2 or example_questions < 2 or lr <= 0:
        raise typer.BadParameter("need --k >= 2, --steps >= 1, --groups >= 1, --grid >= 2, --example-questions >= 2 and --lr > 0")
    console = make_console(stderr=as_json)
    settings = TheorySettings(
        sim=SimSettings(k=k, groups=groups, steps=steps, lr=lr, seed=seed),
        grid=grid,
        example_questions=example_questions,
        extras=extras,
    )
    start = time.perf_counter()
    progress = make_console(stderr=True)

    def say(msg: str) -> None:
        progress.print(f"[dim]{time.perf_counter() - start:5.1f}s  {msg}[/dim]")

    report = run_theory(settings, progress=say)
    out.mkdir(parents=True, exist_ok=True)
    png, js = out / "theory.png", out / "theory.json"
    plot_theory(report, str(png))
    report["runtime_s"] = round(time.perf_counter() - start, 2)
    report["files"] = {"plot": str(png), "json": str(js)}
    js.write_text(json.dumps(report, indent=1) + "\n")
    if as_json:
        sys.stdout.write(json.dumps(report) + "\n")
        return
    _print_tables(console, report)


def _mark(verdict: str) -> str:
    return {"correct": "[green]→1[/green]", "wrong": "[red]→0[/red]"}.get(verdict, "[yellow]?[/yellow]")


def _print_tables(console, report: dict) -> None:
    from rich.table import Table

    sim = report["settings"]["sim"]
    console.print(
        f"[bold]K = {sim['k']}, {sim['steps']} SGD steps at lr {sim['lr']}, "
        f"{sim['groups']} groups per question, seed {sim['seed']}[/bold]"
    )

    table = Table(title="Self-reward (Proposition 2): where p ends")
    for col in ("p(0)", "theory", "ODE p(T)", "real code p(T)", "match"):
        table.add_column(col, justify="right")
    for r in report["self_grid"]["rows"]:
        ok = "near 1/2" if r["near_boundary"] else ("yes" if r["sim"] == r["ode"] == r["predicted"] else "[red]NO[/red]")
        table.add_row(f"{r['p0']:.2f}", _mark(r["predicted"]), f"{r['ode_final']:.3f}", f"{r['sim_final']:.3f}", ok)
    console.print(table)

    _print_basin(console, report["peer_grid"], f"Co-RL, two agents (Theorem 1), K={sim['k']}: real code's outcome")

    table = Table(title="The paper's example: half the questions at (0.9, 0.2), half at (0.2, 0.9)")
    for col in ("method", "acc A (start)", "acc A (end)", "acc B (end)", "ODE A", "ODE B"):
        table.add_column(col, justify="right")
    for method, r in report["example"].items():
        ode = [f"{r[key]:.3f}" if key in r else "-" for key in ("ode_accuracy_a", "ode_accuracy_b")]
        table.add_row(method, f"{r['initial_a']:.2f}", f"{r['accuracy_a']:.3f}", f"{r['accuracy_b']:.3f}", *ode)
    console.print(table)

    if "even_k" in report:
        even = report["even_k"]
        console.print(f"\n[bold]Even K = {even['k']}[/bold] (majority_vote's first-occurrence tie-break)")
        console.print(f"  self-reward grid: {even['self_grid']['agreement']}")
        _print_basin(console, even["peer_grid"], f"Co-RL, K={even['k']}: real code's outcome")
        ex = even["example"]
        console.print(
            f"  example: self-reward A {ex['self-reward']['accuracy_a']:.3f} B {ex['self-reward']['accuracy_b']:.3f}; "
            f"Co-RL A {ex['co-rl']['accuracy_a']:.3f} B {ex['co-rl']['accuracy_b']:.3f}"
        )
    if "ring3" in report:
        s = report["ring3"]["summary"]
        console.print("\n[bold]Ring of 3 agents[/bold] (0 <- 2, 1 <- 0, 2 <- 1)")
        console.print(f"  real code vs ODE: {s['sim_matches_ode']} starts agree; mismatches: {s['mismatches']}")
        console.print(f"  runs ending with agents split between right and wrong: {s['sim_mixed_endings']}")
        console.print(f"  ODE basin vs p0+p1+p2 > 3/2: {s['ode_matches_sum_rule']}")
        console.print(f"  ODE from the same skills in two ring orders: {s['ode_orientation']}")
        console.print(f"  farthest ODE counterexamples to the sum rule: {s['ode_farthest_counterexamples']}")
    if "multi_wrong" in report:
        m = report["multi_wrong"]
        rows = m["self_grid"]["rows"]
        console.print(f"\n[bold]{m['wrong_answers']} wrong answers[/bold] (wrong mass split evenly; the vote is a plurality)")
        console.print("  self-reward: " + ", ".join(f"{r['p0']:.1f}{_mark(r['sim'])}" for r in rows))
        console.print(
            f"  lowest p(0) that self-reward confirms: {m['self_grid']['self_threshold']}; the mode rule "
            f"(correct iff it is the likeliest answer) matches {m['self_grid']['mode_rule_matches']}"
        )
        ex = m["example"]
        console.print(
            f"  example: self-reward A {ex['self-reward']['accuracy_a']:.3f}; "
            f"Co-RL A {ex['co-rl']['accuracy_a']:.3f} B {ex['co-rl']['accuracy_b']:.3f}"
        )
    console.print(f"\nwrote {report['files']['plot']} and {report['files']['json']} in {report['runtime_s']:.1f}s")


def _print_basin(console, block: dict, title: str) -> None:
    """A p_A x p_B matrix of the real code's outcomes; * marks a disagreement with the ODE."""
    from rich.table import Table

    rows = block["rows"]
    p_b = sorted({r["p_b"] for r in rows})
    caption = "rows p_A, columns p_B; * = real code disagrees with the ODE; dim = |p_A+p_B-1| <= margin"
    table = Table(title=title, caption=caption)
    table.add_column("p_A \\ p_B", justify="right")
    for b in p_b:
        table.add_column(f"{b:.2f}", justify="center")
    for a in sorted({r["p_a"] for r in rows}, reverse=True):
        cells = []
        for b in p_b:
            r = next(r for r in rows if r["p_a"] == a and r["p_b"] == b)
            cell = _mark(r["sim"]) + ("*" if r["sim"] != r["ode"] else "")
            cells.append(f"[dim]{cell}[/dim]" if r["near_boundary"] else cell)
        table.add_row(f"{a:.2f}", *cells)
    console.print(table)
    console.print(f"  away from the boundary: {block['agreement']}")


def register(app: typer.Typer) -> None:
    app.command("theory")(theory)
