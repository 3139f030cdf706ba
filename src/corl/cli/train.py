"""`corl train CONFIG [--set key=value ...]` and `corl train --resume RUN_DIR`."""

from __future__ import annotations

import gc
from pathlib import Path

import typer
from rich.markup import escape  # messages carry user text: "corl[vllm]", "runs[best]" are no markup


def train(
    config: Path | None = typer.Argument(None, help="Run config (YAML). Not needed with --resume."),
    set_: list[str] = typer.Option([], "--set", help="Override a config value: --set grpo.beta=0.01 (repeatable)."),
    resume: Path | None = typer.Option(
        None,
        "--resume",
        help="Continue the run in this directory from its last checkpoint; 'auto' (with CONFIG): continue the config's "
        "run if it has a checkpoint, else start it (torchrun --max-restarts, requeued jobs).",
    ),
    output_dir: Path | None = typer.Option(None, "--output-dir", "-o", help="Run directory (default: the config's output_dir)."),
) -> None:
    """Train a cohort with Co-RL (label_source peer), TTRL (self) or GT-Reward (truth)."""
    from rich.console import Console

    from corl.config import ConfigError, load_config
    from corl.launch.progress import StepProgress, summary

    console = Console(stderr=True, emoji=False)  # "tiny:train:2000" is a data source, not an emoji code
    if resume is not None and str(resume) == "auto":
        if config is None:
            raise typer.BadParameter("--resume auto needs a CONFIG file")
        set_, resume = [*set_, "resume=auto"], None
    if resume is None and config is None:
        raise typer.BadParameter("give a CONFIG file, or --resume RUN_DIR")
    if resume is not None:
        config = config or resume / "config.yaml"
        run_dir = resume
    try:
        cfg = load_config(config, set_)
    except ConfigError as err:
        _say_input_error(console, err)
        raise typer.Exit(2) from None
    if cfg.suite.name:  # a typo must stop the run before training, not after its last step
        from corl.evaluation.suite.protocol import ProtocolError, resolve_suite

        try:
            resolve_suite(cfg.suite.name)
        except ProtocolError as err:
            _say_input_error(console, ConfigError(f"suite.name: {str(err).removeprefix(f'--suite {cfg.suite.name!r}: ')}"))
            raise typer.Exit(2) from None
    if resume is None:
        run_dir = output_dir or Path(cfg.output_dir)
    from corl.checkpoints.checkpoint import CheckpointError
    from corl.launch.run import INPUT_ERRORS, launch
    from corl.parallel import PeerFailure
    from corl.plan import check_before_training
    from corl.tracking.health import HealthError
    from corl.tracking.metrics import RunFileError
    from corl.tracking.wandb_run import check_wandb_ready
    from corl.trainer import Preempted
    from corl.trainer.setup import check_models

    quiet_library_bars()
    try:
        check_wandb_ready(cfg)  # a missing package or key first: before the plan reads every model's config
        check_models(cfg)  # a model that cannot be found: named at once, not after the plan's hub retries
        check_before_training(cfg, console.out)  # before any weight loads: exit 2 when it cannot fit
        last = launch(cfg, run_dir, resume=resume is not None, progress_factory=lambda trainer: StepProgress(trainer, console))
    except INPUT_ERRORS as err:
        _say_input_error(console, err)
        raise typer.Exit(2) from None
    except (CheckpointError, HealthError, RunFileError) as err:  # a full disk, a NaN: the message says where and what to do
        if getattr(err, "speaks", True):  # a failure all ranks agreed on is said by one of them (CheckpointFailed)
            console.print(f"[red]error:[/red] {escape(str(err))}", soft_wrap=True)
        raise typer.Exit(1) from None
    except Preempted as err:  # SIGTERM (143 tells a scheduler it may requeue) or Ctrl-C (130): it says how to continue
        console.print(f"[yellow]corl:[/yellow] {escape(str(err))}", soft_wrap=True)
        # why: the launcher's SIGKILL follows its SIGTERM within ~30 s. The interpreter's own
        # teardown (garbage collection of every model and library object) took 5-20 s on a
        # loaded machine; frozen objects are not collected, so the process ends at once.
        gc.freeze()
        raise typer.Exit(err.exit_code) from None
    except KeyboardInterrupt:  # a second Ctrl-C, or one before the run began: no checkpoint of this moment
        from corl.checkpoints.run_folder import how_to_continue

        said = f"interrupted (Ctrl-C) without a checkpoint of this moment; {how_to_continue(run_dir)}"
        console.print(f"[yellow]corl:[/yellow] {escape(said)}", soft_wrap=True)
        raise typer.Exit(130) from None
    except PeerFailure:  # torchrun: the rank has printed which peer failed and written RUN_DIR/failure.json
        raise typer.Exit(1) from None
    if last is not None:
        summary(Path(run_dir), cfg, console)
        if cfg.suite.name:
            _suite_after_training(cfg, Path(run_dir), console)


def _say_input_error(console, err: Exception) -> None:
    """An input error in one line for the whole job: under torchrun every rank met the same one,
    and the first to claim it in the launcher's store says it (corl.parallel.once)."""
    from corl.parallel.once import first_to_say

    line = str(err)
    if first_to_say(line):
        console.print(f"[red]error:[/red] {escape(line)}", soft_wrap=True)


# torchrun's variables: the suite's process is a single process, not a rank of the training job
_TORCHRUN_ENV = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "MASTER_ADDR", "MASTER_PORT")


def _suite_after_training(cfg, run_dir: Path, console) -> None:
    """`suite.name`: run `corl suite` on every agent of the final checkpoint, in a process of its own
    (the trainer's memory and process group are gone; on a GPU the suite gets the whole device).
    A failed suite leaves the run intact: exit 1, with the command that finishes it."""
    import os
    import shlex
    import subprocess
    import sys

    from corl.checkpoints.checkpoint import latest_checkpoint

    checkpoint = latest_checkpoint(run_dir)
    s = cfg.suite
    args = ["suite", *(str(checkpoint / a.name) for a in cfg.agents), "--suite", s.name, "--out", str(run_dir / "suite")]
    args += ["--engine", s.engine, "--bootstrap", str(s.bootstrap)]
    args += [f"--data={name}={path}" for name, path in s.data.items()]
    for flag, value in (("--data-root", s.data_root), ("--limit", s.limit), ("--max-tokens", s.max_tokens)):
        if value is not None:
            args += [flag, str(value)]
    console.print(f"suite {s.name} on {checkpoint}: corl {shlex.join(args)}", soft_wrap=True)
    env = {k: v for k, v in os.environ.items() if k not in _TORCHRUN_ENV}
    if "torch" in sys.modules:  # the trainer's cached GPU memory goes back before the suite starts
        gc.collect()
        sys.modules["torch"].cuda.empty_cache()
    if subprocess.run([sys.executable, "-m", "corl", *args], env=env).returncode != 0:
        console.print(f"[red]error:[/red] the suite failed; the run is intact. Finish it with: corl {escape(shlex.join(args))}")
        raise typer.Exit(1)


def quiet_library_bars() -> None:
    """transformers' "Loading weights" / "Writing model shards" bars: two lines per agent and
    checkpoint, carriage returns in a log file; corl's own lines say what happens."""
    import os

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:
        pass


def register(app: typer.Typer) -> None:
    app.command("train")(train)
