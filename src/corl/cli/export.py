"""`corl export RUN --step N`: a checkpoint's Hugging Face model folders, gathered from its shards.

An FSDP2 run writes the whole model (LoRA merged) only for the final step and the steps best/
publishes; every other checkpoint holds each rank's shards (what a resume needs). This writes
the model folder of such a step beside its shards, in one process on CPU:

    corl export runs/paper --step 40        # checkpoints/step_000040/<agent>/ loads with from_pretrained
    corl eval runs/paper --step 40          # then evaluates it
"""

from __future__ import annotations

from pathlib import Path

import typer


def export(
    run: Path = typer.Argument(..., help="Run folder (with checkpoints/ and config.yaml)."),
    step: str = typer.Option("latest", "--step", help="Checkpoint: a step number, or latest."),
) -> None:
    """Write the Hugging Face model folder (LoRA merged) of every agent of a sharded checkpoint.

    Written whole or not at all (a hidden folder, then renamed); a folder the checkpoint's manifest
    does not vouch for (a killed export's) is written again. Exit 2: not a run, step or checkpoint
    to export; 1: the writing failed (a full disk)."""
    import sys

    from corl.checkpoints.checkpoint import CheckpointError
    from corl.checkpoints.export import ExportFailed, export_checkpoint
    from corl.cli.train import quiet_library_bars
    from corl.config import ConfigError
    from corl.evaluation.run_targets import TargetError, _pick_checkpoint

    quiet_library_bars()
    try:
        if not (run / "config.yaml").is_file():
            raise TargetError(f"{str(run)!r} is not a run folder (no config.yaml); give the folder corl train -o wrote")
        checkpoint = _pick_checkpoint(run, step)
        export_checkpoint(run, checkpoint)
    except ExportFailed as err:  # the input was right, the writing failed (a full disk): exit 1, as a failed run
        print(f"error: {err}", file=sys.stderr)
        raise typer.Exit(1) from None
    except (TargetError, CheckpointError, ConfigError) as err:
        print(f"error: {err}", file=sys.stderr)
        raise typer.Exit(2) from None


def register(app: typer.Typer) -> None:
    app.command("export")(export)
