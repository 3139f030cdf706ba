"""One step numbering for every record of a run: steps count from 1.

Step N is the N-th update. Its training row in metrics.jsonl is `step: N`, and so is its point in
TensorBoard and W&B; the validation after it is `step: N` too (kind val), `checkpoints/step_00000N`
is saved after it, and every message says "step N". A validation before training
(logging.eval_on_start) is step 0. This is the count TRL's and the Hugging Face Trainer's
`global_step` keeps (a checkpoint-500 holds 500 updates, logged at step 500).

Runs written before this numbering logged rows from 0 (the validation before training at -1)
while their checkpoints counted from 1. A resume of such a run renumbers its metrics.jsonl and
the W&B bookkeeping (RUN/wandb.json) once, before it appends a row (`renumber_old_run`); the
TensorBoard events and the W&B points it already wrote cannot be rewritten and stay one step to
the left of the new ones.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def old_numbering(run_dir: Path) -> bool:
    """Whether RUN/metrics.jsonl counts steps from 0: a training row at step 0, or a row at -1."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return False
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
            step = int(row["step"])
        except (ValueError, KeyError, TypeError):
            continue
        if step < 0 or (step == 0 and row.get("kind", "train") == "train"):
            return True
    return False


def renumber_old_run(run_dir: str | Path) -> bool:
    """Renumber a run folder written with steps from 0 (every row and W&B's last steps + 1);
    True when it did. Atomic per file: a crash leaves the old file or the new one."""
    run_dir = Path(run_dir)
    if not old_numbering(run_dir):
        return False
    path = run_dir / "metrics.jsonl"
    lines = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
            row["step"] = int(row["step"]) + 1
        except (ValueError, KeyError, TypeError):
            continue  # a torn last line from a crash
        lines.append(json.dumps(row))
    _write(path, "".join(line + "\n" for line in lines))
    state_path = run_dir / "wandb.json"
    try:
        state = json.loads(state_path.read_text())
        state["last_step"] = {kind: int(step) + 1 for kind, step in state["last_step"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return True  # no W&B run (or an unreadable record: a new W&B run starts)
    _write(state_path, json.dumps(state))
    return True


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.renumber")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
