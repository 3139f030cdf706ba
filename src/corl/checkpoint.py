"""Checkpoints that load anywhere and resume exactly.

Layout of `RUN_DIR/checkpoints/step_000120/`:
    <agent>/            save_pretrained model + tokenizer (from_pretrained, eval harnesses)
    <agent>/trainer.pt  optimizer state
    state.pt            step, RNG states, loop state
    state.json          the same step, for people
A checkpoint is written to a hidden temporary folder and renamed into place, and
`checkpoints/latest` is replaced atomically afterwards: an interruption at any moment
leaves the previous checkpoint intact.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path

import numpy as np
import torch


def rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save_checkpoint(
    run_dir: str | Path, step: int, agents, loop_state: dict, keep_last: int | None = 2, write_state: bool = True, barrier=None
) -> Path:
    """Write `agents` and (if write_state) the loop state for `step` (steps done so far).

    In a multi-process run every process passes the agents it hosts and the same
    `barrier`; `Agent.save` lets each agent's dp rank 0 write it, and only the process
    with write_state creates, commits and prunes.
    """
    barrier = barrier or (lambda: None)
    root = Path(run_dir) / "checkpoints"
    final = root / f"step_{step:06d}"
    tmp = root / f".tmp_step_{step:06d}"
    if write_state:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    barrier()
    for agent in agents:
        agent.save(tmp / agent.name)  # model + tokenizer (HF format) and trainer.pt
    barrier()
    if write_state:
        torch.save({"step": step, "rng": rng_state(), "loop": loop_state}, tmp / "state.pt")
        (tmp / "state.json").write_text(
            json.dumps({"step": step, "agents": sorted(p.name for p in tmp.iterdir() if p.is_dir())}, indent=1)
        )
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        _write_atomic(root / "latest", final.name)
        if keep_last:
            for old in sorted(p for p in root.glob("step_*") if p.is_dir())[:-keep_last]:
                shutil.rmtree(old, ignore_errors=True)
    barrier()
    return final


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    root = Path(run_dir) / "checkpoints"
    pointer = root / "latest"
    if pointer.is_file():
        path = root / pointer.read_text().strip()
        if (path / "state.pt").is_file():
            return path
    candidates = sorted(p for p in root.glob("step_*") if (p / "state.pt").is_file())
    return candidates[-1] if candidates else None


def load_loop_state(checkpoint: Path) -> dict:
    return torch.load(checkpoint / "state.pt", weights_only=False)
