"""Where agents live and how the answers table travels between them.

One process hosts every agent (the CPU default). Multi-process runs under torchrun
split the world into one group of ranks per agent; see `launch`.
"""

from __future__ import annotations

import os
from pathlib import Path

from corl.config import RunConfig


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def launch(cfg: RunConfig, run_dir: str | Path, resume: bool = False, progress_factory=None) -> dict | None:
    """Run a cohort in this process (or this torchrun world); returns the last metrics."""
    if world_size() > 1:
        raise NotImplementedError(
            "multi-process training (torchrun) is not implemented yet; run `corl train` in a single process"
        )
    from corl.cohort import CohortTrainer

    trainer = CohortTrainer(cfg, run_dir, resume=resume)
    if progress_factory is None:
        return trainer.train()
    with progress_factory(trainer) as progress:
        return trainer.train(on_step=progress)
