"""Checkpoints that load anywhere and resume exactly.

Layout of `RUN_DIR/checkpoints/step_000120/`:
    <agent>/            save_pretrained model + tokenizer (from_pretrained, eval harnesses); under
                        FSDP2 only at the final step, the steps best/ publishes and on `corl export`
                        (the other steps hold the tokenizer and sharded/, corl.checkpoint_sharded)
    <agent>/trainer.pt  optimizer state
    <agent>/README.md   its Hugging Face model card: method, teacher, data, steps, validation (corl.model_card)
    <agent>/adapter/    with compute.lora: the adapters unmerged, peft's format (a resume loads
                        them onto the original base model; the folder above has them merged in)
    state.pt            step, RNG states, loop state, the run's record (corl.run_folder)
    state.json          the same step, for people
    manifest.json       every file's size and sha256, checked on resume
A checkpoint is written to a hidden temporary folder and renamed into place, and
`checkpoints/latest` is replaced atomically afterwards: an interruption at any moment
leaves the previous checkpoint intact.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from corl.config import ConfigError
from corl.model_card import write_model_cards


def rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    """Restore what `rng_state` saved. CUDA: the states of the devices this process sees, in
    order (a process resumed with fewer GPUs than the one that saved skips the rest; the
    sampling reseeds at every step, so nothing a run draws depends on them)."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        for device, cuda_state in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cuda_state, device)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class CheckpointError(RuntimeError):
    """A checkpoint could not be written (full disk, ...) or read (a missing or corrupted file)."""


class NotEnoughSpace(CheckpointError, ConfigError):
    """Refused up front, before anything ran: an input error (exit 2), like an output_dir that takes no files."""


def checkpoint_bytes(agents) -> int:
    """About how many bytes one checkpoint of `agents` takes: the saved weights (LoRA adapters
    merged: the full model), AdamW's two moments per trainable parameter, an EMA teacher's
    copy, plus 10% and 1 MiB for tokenizers and the loop state. Under FSDP the trainable
    weights are written once more (with the moments, as shards). An agent with several
    data-parallel ranks is counted by its first (FSDP parameters report their whole size)."""
    total = 0
    for agent in agents:
        if agent.dp.rank != 0:
            continue
        params = list(agent.model.parameters())
        weights = sum(p.numel() * p.element_size() for p in params)  # LoRA's own few are counted too: a margin
        trainable = sum(p.numel() * p.element_size() for p in params if p.requires_grad)
        teacher = sum(p.numel() * p.element_size() for p in agent.teacher.parameters()) if agent.teacher is not None else 0
        total += weights + (3 if agent.dp.fsdp else 2) * trainable + teacher
    return int(total * 1.1) + 2**20


def check_free_space(run_dir: str | Path, needed: int, what: str) -> None:
    """Refuse up front a run whose checkpoints cannot fit: better now than after hours."""
    folder = Path(run_dir)
    while not folder.exists():
        folder = folder.parent
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise NotEnoughSpace(
            f"not enough disk space for {what} in {run_dir}: about {needed / 2**20:.1f} MiB needed, "
            f"{free / 2**20:.1f} MiB free; free space there, choose another output_dir (-o), or checkpoint less often"
        )


KEEP_LAST = 2  # checkpoints kept; while the next one is written there is one more


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    agents,
    loop_state: dict,
    keep_last: int | None = KEEP_LAST,
    write_state: bool = True,
    barrier=None,
    record: dict | None = None,
    gathered: bool = True,
) -> Path:
    """Write `agents` and (if write_state) the loop state for `step` (steps done so far),
    with the run's `record` (the configuration it started with: what a resume compares with).

    `gathered=False`: an FSDP2 agent writes its shards only (what a resume needs), not the
    whole model gathered into a Hugging Face folder (`corl export RUN --step N` writes it
    later); the run writes that folder for best/ and the final step. Without FSDP the
    Hugging Face folder is the checkpoint, and is written either way.

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
    with _cleaned_up_on_failure(tmp, final):
        for agent in agents:
            if gathered:
                agent.save(tmp / agent.name)  # model + tokenizer (HF format) and trainer.pt
            else:
                agent.save(tmp / agent.name, gathered=False)  # FSDP2: the shards (and the tokenizer) alone
    barrier()
    if write_state:
        with _cleaned_up_on_failure(tmp, final):
            write_model_cards(tmp, Path(run_dir), step)
            torch.save({"step": step, "rng": rng_state(), "loop": loop_state, "run": record}, tmp / "state.pt")
            (tmp / "state.json").write_text(
                json.dumps({"step": step, "agents": sorted(p.name for p in tmp.iterdir() if p.is_dir())}, indent=1)
            )
        with _cleaned_up_on_failure(tmp, final):
            _write_atomic(tmp / MANIFEST, json.dumps(manifest(tmp), indent=1))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        _write_atomic(root / "latest", final.name)
        if keep_last:
            _prune(root, final, keep_last)
    barrier()
    return final


def _prune(root: Path, final: Path, keep_last: int) -> None:
    """Keep `final` (just written, named by `latest`) and the newest others up to `keep_last`:
    a checkpoint with a higher step than `final` must not push out the one `latest` names."""
    others = sorted(p for p in root.glob("step_*") if p.is_dir() and p != final)
    for old in others[: max(0, len(others) - (keep_last - 1))]:
        shutil.rmtree(old, ignore_errors=True)


@contextmanager
def _cleaned_up_on_failure(tmp: Path, final: Path) -> Iterator[None]:
    """A failed write (a full disk above all) removes the half-written folder and says why;
    the previous checkpoint was never touched."""
    try:
        yield
    except Exception as err:  # torch.save and safetensors report a full disk as their own error types
        # measured before the half-written folder goes: removing it frees what it took (torch.save's
        # "file write failed" names no errno, so the free space is what tells a full disk)
        free = shutil.disk_usage(tmp.parent).free if tmp.parent.exists() else 0
        shutil.rmtree(tmp, ignore_errors=True)
        full = isinstance(err, OSError) and err.errno == errno.ENOSPC or free < 2**20 or "No space" in str(err)
        if not full:
            raise
        raise CheckpointError(
            f"could not write checkpoint {final}: the disk is full ({free / 2**20:.1f} MiB free). "
            f"The half-written folder was removed and the previous checkpoint is intact; free space, then resume "
            f"(corl train --resume {final.parent.parent})"
        ) from err


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    root = Path(run_dir) / "checkpoints"
    pointer = root / "latest"
    if pointer.is_file():
        path = root / pointer.read_text().strip()
        if (path / "state.pt").is_file():
            return path
    candidates = sorted(p for p in root.glob("step_*") if (p / "state.pt").is_file())
    return candidates[-1] if candidates else None


MANIFEST = "manifest.json"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def manifest(folder: Path) -> dict[str, dict]:
    """{relative path: {bytes, sha256}} of every file of a checkpoint folder."""
    return {
        str(p.relative_to(folder)): {"bytes": p.stat().st_size, "sha256": _sha256(p)}
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != MANIFEST
    }


def verify_checkpoint(checkpoint: Path, parts: list[str] | None = None) -> None:
    """Check the files of `checkpoint` (those under `parts`, plus its own state files)
    against its manifest; a missing, truncated or altered file raises CheckpointError naming it."""
    path = checkpoint / MANIFEST
    if not path.is_file():
        return  # written before manifests existed
    expected = json.loads(path.read_text())
    advice = f"resume from an earlier checkpoint: delete {checkpoint} (and fix checkpoints/latest)"
    for name, entry in expected.items():
        top = name.split("/", 1)[0]
        if parts is not None and "/" in name and top not in parts:
            continue  # another process's agent: it checks its own
        file = checkpoint / name
        if not file.is_file():
            raise CheckpointError(f"checkpoint {checkpoint}: file {name} is missing; {advice}")
        size = file.stat().st_size
        if size != entry["bytes"]:
            raise CheckpointError(
                f"checkpoint {checkpoint}: file {name} is truncated or altered ({size} bytes, {entry['bytes']} written); {advice}"
            )
        if _sha256(file) != entry["sha256"]:
            raise CheckpointError(
                f"checkpoint {checkpoint}: file {name} is corrupted (its sha256 differs from the one written); {advice}"
            )


def checkpoint_step(checkpoint: Path) -> int:
    """Steps done when `checkpoint` (RUN_DIR/checkpoints/step_000120) was written."""
    return int(checkpoint.name.removeprefix("step_"))


def load_loop_state(checkpoint: Path) -> dict:
    return torch.load(checkpoint / "state.pt", weights_only=False)
