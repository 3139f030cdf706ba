"""`run_suite`: every (checkpoint, benchmark) cell, reusing finished ones, then the report."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from corl.evaluation.suite import report
from corl.evaluation.suite.external import NotRun
from corl.evaluation.suite.protocol import Benchmark
from corl.evaluation.suite.runner import Checkpoint, compute_cell, finished_cell, preflight, resolve_engine
from corl.files import write_whole


@dataclass
class SuiteOutcome:
    results: dict
    computed: list[tuple[str, str]] = field(default_factory=list)  # (checkpoint, benchmark) run now
    reused: list[tuple[str, str]] = field(default_factory=list)  # finished before, read back
    not_run: list[tuple[str, str]] = field(default_factory=list)
    generate_calls: int = 0  # engine.generate calls made by this invocation


def run_suite(
    suite: str,
    benches: Sequence[Benchmark],
    checkpoints: Sequence[str],
    out: Path,
    *,
    engine: str = "auto",
    resamples: int = 1000,
    bootstrap_seed: int = 0,
    batch_prompts: int = 32,
    console=None,
) -> SuiteOutcome:
    """Run (or resume) a suite into `out`; writes results.json and results.md there."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from corl.sandbox import SandboxPool

    console = console or Console(stderr=True)
    out.mkdir(parents=True, exist_ok=True)
    engine_name = resolve_engine(engine)
    outcome = SuiteOutcome(results={})
    cells: dict[tuple[str, str], dict | str] = {}
    blocked = {b.name: preflight(b) for b in benches}
    pool = SandboxPool() if any(b.grader == "code" for b in benches) else None
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, console=console, transient=True) as bar:
            overall = bar.add_task("suite cells", total=len(benches) * len(checkpoints))
            for name in checkpoints:
                ckpt = Checkpoint(name, engine_name)
                for b in benches:
                    key = (name, b.name)
                    done = finished_cell(out, name, b)
                    if done is not None:
                        cells[key] = done
                        outcome.reused.append(key)
                    elif blocked[b.name]:
                        cells[key] = blocked[b.name]
                        if not any(k[1] == b.name for k in outcome.not_run):  # said once, not per checkpoint
                            console.print(f"[yellow]{b.title}: not run[/yellow] ({blocked[b.name]})")
                        outcome.not_run.append(key)
                    else:
                        task = bar.add_task(f"{b.title} · {Path(name).name}", total=None)

                        def advance(m: int, total: int | None = None, task=task) -> None:  # prompts done (x seeds)
                            bar.update(task, advance=m, **({"total": total} if total is not None else {}))

                        try:
                            cells[key] = compute_cell(b, ckpt, out, pool, batch_prompts, advance)
                            outcome.computed.append(key)
                            outcome.generate_calls += cells[key]["generate_calls"]
                        except NotRun as err:
                            cells[key] = str(err)
                            outcome.not_run.append(key)
                            console.print(f"[yellow]{b.title} on {name}: not run[/yellow] ({err})")
                        bar.remove_task(task)
                    bar.advance(overall)
                ckpt.close()
    finally:
        if pool is not None:
            pool.close()
    outcome.results = report.build(suite, benches, checkpoints, cells, out, resamples, bootstrap_seed, engine_name)
    write_whole(out / "results.json", json.dumps(outcome.results, ensure_ascii=False, indent=1))
    write_whole(out / "results.md", report.markdown(outcome.results))
    return outcome
