"""A resume finishes what a kill interrupted in the best folders (RUN/best/, RUN/best-truth/).

The point's checkpoint is saved (with the selection state that chose it) before its best folder
is published (`corl.trainer.selection.publish`), so a kill in between leaves a checkpoint whose
record chooses step S while RUN/best/ still holds an older step (or nothing, or a half-copied
RUN/.tmp_best/). The resume continues after S and would never publish S again: it is done here,
from the record the checkpoint carries.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from corl.checkpoints.checkpoint import load_loop_state
from corl.trainer.selection import publish, write_selection


def published_step(folder: Path) -> int | None:
    """The checkpoint step a best folder holds (its state.pt), or None when it is missing or unreadable."""
    try:
        return int(load_loop_state(folder)["step"])
    except Exception:  # a missing or half-written folder: publish it again
        return None


def finish_publishing(run_dir: Path, record: dict) -> list[str]:
    """Publish again every best folder that does not hold its rule's chosen checkpoint (or that left
    a temporary folder behind), and rewrite selection.json; returns the folders published."""
    redone = []
    for name, rule in record.get("folders", {}).items():
        chosen = record["chosen"].get(rule)
        leftovers = [run_dir / f".tmp_{name}", run_dir / f".old_{name}"]
        if chosen is None:
            continue
        step = chosen["checkpoint_step"]
        if published_step(run_dir / name) == step and not any(p.exists() for p in leftovers):
            continue
        source = run_dir / "checkpoints" / f"step_{step:06d}"
        if not source.is_dir():  # pruned: the folder that is there stays (nothing better to put)
            continue
        publish(run_dir, source, name, record)
        redone.append(name)
        for p in leftovers:
            shutil.rmtree(p, ignore_errors=True)
    if record.get("folders"):
        write_selection(run_dir, record, list(record["folders"]))
    return redone
