"""`corl plan CONFIG`: will the run fit its devices? Per rank, before any weight loads.

corl plan configs/tiny.yaml                                  # this machine
corl plan configs/paper-text-3b.yaml --gpus 8 --device-memory 80GiB
"""

from __future__ import annotations

from pathlib import Path

import typer


def plan(
    config: Path = typer.Argument(..., help="Run config (YAML)."),
    set_: list[str] = typer.Option([], "--set", help="Override a config value: --set grpo.minibatch_size=8 (repeatable)."),
    ranks: int | None = typer.Option(
        None,
        "--gpus",
        "--ranks",
        min=1,
        help="Ranks (GPUs, or CPU processes) of the torchrun world to plan for (default: WORLD_SIZE, else 1).",
    ),
    device_memory: str | None = typer.Option(
        None,
        "--device-memory",
        help="Memory of one rank's device with its unit, e.g. 80GiB or 80GB (default: plan.device_memory, else this machine's).",
    ),
) -> None:
    """Print the memory plan of a run: per rank, its states and each phase's peak, and whether it fits."""
    from rich.markup import escape

    from corl.cli.output import console as make_console
    from corl.config import ConfigError, load_config
    from corl.plan import plan_run, render, this_machine

    console = make_console(stderr=True)
    try:
        cfg = load_config(config, set_)
        result = plan_run(cfg, this_machine(cfg, ranks, device_memory))
    except ConfigError as err:
        # one line, however narrow the terminal; the message printed as written (no markup read in it)
        console.print(f"[red]error:[/red] {escape(str(err))}", soft_wrap=True, highlight=False)
        raise typer.Exit(2) from None
    print(render(result, str(config), cfg.plan.headroom))
    if result.fits is False:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
