"""Putting one run together: this process, or this rank of a torchrun world.

- `run`: `launch(cfg, run_dir)`, the one module that imports both the trainer and the parallel
  pieces (layout, exchange, heartbeat), enters the run folder, and reports failures.
- `preemption`: stopping on a signal (a scheduler's SIGTERM within its grace, Ctrl-C without a
  deadline, either at once while the run starts).
- `progress`: what `corl train` prints while a cohort trains (a terminal or a log file alike).
- `torchrun`: torchrun with SIGTERM read as a preemption (`python -m corl.launch ...`).

Imported by the CLI and the studies; imports the trainer, checkpoints, parallel, models,
data, tracking and the config. `launch` itself is imported on first use, so that
`python -m corl.launch` (torchrun's parent process) does not load the trainer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from corl.launch.run import launch

__all__ = ["launch"]


def __getattr__(name: str):
    if name == "launch":
        from corl.launch.run import launch

        return launch
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
