"""Checkpoints that load anywhere and resume exactly.

Layout of `RUN_DIR/checkpoints/step_000120/`:
    <agent>/            save_pretrained model + tokenizer (from_pretrained, eval harnesses); under
                        FSDP2 only at the final step, the steps best/ publishes and on `corl export`
                        (the other steps hold the tokenizer and sharded/, corl.checkpoints.sharded)
    <agent>/trainer.pt  optimizer state
    <agent>/README.md   its Hugging Face model card: method, teacher, data, steps, validation (corl.checkpoints.model_card)
    <agent>/adapter/    with compute.lora: the adapters unmerged, peft's format (a resume loads
                        them onto the original base model; the folder above has them merged in)
    state.pt            step, RNG states, loop state, the run's record (corl.checkpoints.run_folder)
    state.json          the same step, for people
    manifest.json       every file's size and sha256, checked on resume
A checkpoint is written to a hidden temporary folder and renamed into place, and
`checkpoints/latest` is replaced atomically afterwards: an interruption at any moment
leaves the previous checkpoint intact. In a multi-process run (torchrun, FSDP2 shards) every
process learns every other's outcome at the end of each phase of the write (`_Agreement`):
a full disk on any rank, or a rank that died, ends the job with one line said by one rank.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from corl.checkpoints.model_card import write_model_cards
from corl.config import ConfigError
from corl.files import write_whole
from corl.parallel.exchange import Exchange, LocalExchange, PeerFailure


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
    exchange: Exchange | None = None,
    record: dict | None = None,
    gathered: bool = True,
) -> Path:
    """Write `agents` and (if write_state) the loop state for `step` (steps done so far),
    with the run's `record` (the configuration it started with: what a resume compares with).

    `gathered=False`: an FSDP2 agent writes its shards only (what a resume needs), not the
    whole model gathered into a Hugging Face folder (`corl export RUN --step N` writes it
    later); the run writes that folder for best/ and the final step. Without FSDP the
    Hugging Face folder is the checkpoint, and is written either way.

    In a multi-process run every process passes the agents it hosts and the run's `exchange`;
    `Agent.save` lets each agent's dp rank 0 write it, and only the process with write_state
    creates, commits and prunes. A failure on any process (a full disk, a rank that died) is
    agreed on by all of them before anyone acts on it (`_agree`): the half-written folder is
    removed once no one writes into it, and the job says one line, not one per rank.
    """
    exchange = exchange or LocalExchange()
    root = Path(run_dir) / "checkpoints"
    final = root / f"step_{step:06d}"
    tmp = root / f".tmp_step_{step:06d}"
    agreement = _Agreement(exchange, Path(run_dir), step, tmp, final, write_state)

    def create() -> None:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()

    def write_agents() -> None:
        failed = None
        for agent in agents:  # each agent's save is a collective of its ranks: tried even after another failed
            try:
                if gathered:
                    agent.save(tmp / agent.name)  # model + tokenizer (HF format) and trainer.pt
                else:
                    agent.save(tmp / agent.name, gathered=False)  # FSDP2: the shards (and the tokenizer) alone
            except BaseException as err:  # noqa: BLE001 - DCP's CheckpointException is a BaseException
                if isinstance(err, INTERRUPTIONS):
                    raise
                failed = failed or err
        if failed is not None:
            raise failed

    agreement.phase(create if write_state else None)  # the others write into it once it is there
    agreement.phase(write_agents)

    def commit() -> None:
        write_model_cards(tmp, Path(run_dir), step)
        torch.save({"step": step, "rng": rng_state(), "loop": loop_state, "run": record}, tmp / "state.pt")
        (tmp / "state.json").write_text(
            json.dumps({"step": step, "agents": sorted(p.name for p in tmp.iterdir() if p.is_dir())}, indent=1)
        )
        write_whole(tmp / MANIFEST, json.dumps(manifest(tmp), indent=1))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        write_whole(root / "latest", final.name)
        if keep_last:
            _prune(root, final, keep_last)

    agreement.phase(commit if write_state else None)
    return final


def _prune(root: Path, final: Path, keep_last: int) -> None:
    """Keep `final` (just written, named by `latest`) and the newest others up to `keep_last`:
    a checkpoint with a higher step than `final` must not push out the one `latest` names.
    A half-written folder an earlier attempt left (a rank killed inside its write) goes too."""
    others = sorted(p for p in root.glob("step_*") if p.is_dir() and p != final)
    for old in [*others[: max(0, len(others) - (keep_last - 1))], *root.glob(".tmp_step_*")]:
        shutil.rmtree(old, ignore_errors=True)


def _free_space(path: Path) -> int:
    """Free bytes on the disk of `path` (its nearest existing folder)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def _is_disk_full(err: BaseException, free: int) -> bool:
    # torch.save's "file write failed" (inline_container.cc) names no errno, and DCP wraps every
    # rank's OSError in its own exception: the free space is what tells a full disk
    return isinstance(err, OSError) and err.errno == errno.ENOSPC or free < 2**20 or "No space" in str(err)


def _last_line(err: BaseException) -> str:
    """An error in one line: DCP's exception holds every failed rank's traceback, the error last."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[-1] if lines else type(err).__name__


def _disk_full_message(final: Path, free: int) -> str:
    return (
        f"could not write checkpoint {final}: the disk is full ({free / 2**20:.1f} MiB free). "
        f"The half-written folder was removed and the previous checkpoint is intact; free space, then resume "
        f"(corl train --resume {final.parent.parent})"
    )


@contextmanager
def _cleaned_up_on_failure(tmp: Path, final: Path) -> Iterator[None]:
    """A failed write (a full disk above all) removes the half-written folder and says why;
    the previous checkpoint was never touched."""
    try:
        yield
    except Exception as err:  # torch.save and safetensors report a full disk as their own error types
        # measured before the half-written folder goes: removing it frees what it took
        free = shutil.disk_usage(tmp.parent).free if tmp.parent.exists() else 0
        shutil.rmtree(tmp, ignore_errors=True)
        if not _is_disk_full(err, free):
            raise
        raise CheckpointError(_disk_full_message(final, free)) from err


INTERRUPTIONS = (KeyboardInterrupt, SystemExit)  # not a failed write: never held back for the others


class CheckpointFailed(CheckpointError):
    """A checkpoint failure every process of the run has agreed on: one of them says it
    (`speaks`: rank 0, or the survivor that claimed it when ranks died), the others exit
    with the same status in silence. `missing`: the ranks that died."""

    def __init__(self, message: str, speaks: bool, missing: list[int] | None = None):
        super().__init__(message)
        self.speaks = speaks
        self.missing = list(missing or [])


class _Agreement:
    """The phases of one checkpoint, each ended by every process learning every process's
    outcome (an all_gather of small records): no process acts on a failure (removes the
    half-written folder, exits) while another may still write into it or wait for it in a
    collective.

    A process that failed keeps its exception and gives the others its kind (a full disk, with
    the free space measured before anything was removed, or another error's text). A process
    that died is never heard from: the survivors' gathering fails once torchrun stops them
    (or distributed.timeout_s passes), and the ranks whose heartbeat stopped are named."""

    def __init__(self, exchange: Exchange, run_dir: Path, step: int, tmp: Path, final: Path, commits: bool):
        self.exchange, self.run_dir, self.step = exchange, run_dir, step
        self.tmp, self.final, self.commits = tmp, final, commits
        self.failed: tuple[BaseException, dict] | None = None

    def phase(self, work: Callable[[], object] | None) -> None:
        """Run `work` (this process's part of the phase, if any), then agree on the outcome."""
        if work is not None:
            try:
                work()
            except BaseException as err:  # noqa: BLE001 - every kind is gathered; a full disk comes as many types
                if isinstance(err, INTERRUPTIONS):
                    raise
                free = _free_space(self.tmp)  # before anything is removed: removing frees what was written
                self.failed = (err, {"full": _is_disk_full(err, free), "free": free, "error": _last_line(err)})
        self._agree()

    def _agree(self) -> None:
        heartbeat = getattr(self.exchange, "heartbeat", None)
        try:
            views = self.exchange.all_gather(None if self.failed is None else self.failed[1])
        except PeerFailure as err:
            dead = [r for r in err.missing if r in heartbeat.stopped_ranks()]
            if not dead:
                raise  # alive but silent (hung) or failed elsewhere: the peer failure says who
            raise self._died(heartbeat, dead) from err
        failures = [(rank, view) for rank, view in enumerate(views) if view is not None]
        if not failures:
            return
        if self.commits:  # nobody writes into it any more
            shutil.rmtree(self.tmp, ignore_errors=True)
        speaks = heartbeat is None or heartbeat.rank == 0
        full = [view["free"] for _, view in failures if view["full"]]
        mine = self.failed[0] if self.failed is not None else None
        if full:
            raise CheckpointFailed(_disk_full_message(self.final, min(full)), speaks) from mine
        first, view = failures[0]
        if mine is not None and (heartbeat is None or heartbeat.rank == first):
            raise mine  # not a full disk: the rank it happened on shows it as it is (a traceback)
        where = heartbeat.layout.describe([first]) if heartbeat is not None else "a process"
        raise CheckpointFailed(f"{where} could not write its part of checkpoint {self.final}: {view['error']}", False) from mine

    def _died(self, heartbeat, dead: list[int]) -> CheckpointFailed:
        """One survivor says it (the first to claim it in torchrun's store; the others may still
        be writing: the half-written folder is left to the next checkpoint, which removes it)."""
        me = str(heartbeat.rank).encode()
        try:
            speaks = heartbeat.store.compare_set(f"checkpoint/{self.step}/died", "", me) == me
        except RuntimeError:  # the store is gone (torchrun stopped): nobody can claim it
            speaks = heartbeat.rank == min(r for r in range(heartbeat.layout.world) if r not in dead)
        last = latest_checkpoint(self.run_dir)
        previous = f"the last complete checkpoint is {last.name}" if last is not None else "no checkpoint is complete yet"
        return CheckpointFailed(
            f"{heartbeat.layout.describe(dead)} died during the checkpoint of step {self.step} (killed, out of memory?); "
            f"{previous}; resume with corl train --resume {self.run_dir}",
            speaks,
            dead,
        )


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
    against its manifest; a missing, truncated or altered file raises CheckpointError naming it.
    A .safetensors file the manifest does not list (a checkpoint from before manifests, or a
    model folder written later) must at least hold every byte its header describes."""
    path = checkpoint / MANIFEST
    expected = json.loads(path.read_text()) if path.is_file() else {}
    for file in sorted(checkpoint.rglob("*.safetensors")):
        name = str(file.relative_to(checkpoint))
        if name not in expected and (parts is None or name.split("/", 1)[0] in parts):
            _check_safetensors(file, checkpoint)
    if not path.is_file():
        return  # written before manifests existed
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


def _check_safetensors(file: Path, checkpoint: Path) -> None:
    """A safetensors file is an 8-byte header length, a JSON header giving every tensor's byte
    range, then the data: a file cut short (a write killed or out of disk) holds less than that."""
    size, length = file.stat().st_size, 0
    try:
        with file.open("rb") as f:
            length = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(length)) if 8 + length <= size else None
        ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"] if isinstance(header, dict) else None
    except (ValueError, KeyError, TypeError, IndexError):
        ends = None
    if ends is None or size < 8 + length + max(ends, default=0):
        raise CheckpointError(
            f"checkpoint {checkpoint}: file {file.relative_to(checkpoint)} is truncated or damaged ({size} bytes, less than "
            f"its header describes; a write killed or out of disk?). An exported model folder: run corl export again "
            f"(it writes the file whole); else resume from an earlier checkpoint"
        )


def add_to_manifest(checkpoint: Path, files: list[Path]) -> None:
    """Record `files` (written into `checkpoint` after it was committed: an export, a model card)
    in its manifest, so that what a resume or an export checks covers them."""
    path = checkpoint / MANIFEST
    if not path.is_file():
        return  # from before manifests: nothing checks it
    entries = json.loads(path.read_text())
    for file in files:
        entries[str(file.relative_to(checkpoint))] = {"bytes": file.stat().st_size, "sha256": _sha256(file)}
    write_whole(path, json.dumps(dict(sorted(entries.items())), indent=1))


def manifest_lists(checkpoint: Path, names: list[str]) -> bool:
    """Whether the manifest of `checkpoint` lists every one of `names` (True without a manifest)."""
    path = checkpoint / MANIFEST
    return not path.is_file() or set(names) <= json.loads(path.read_text()).keys()


def checkpoint_step(checkpoint: Path) -> int:
    """Steps done when `checkpoint` (RUN_DIR/checkpoints/step_000120) was written."""
    return int(checkpoint.name.removeprefix("step_"))


def load_loop_state(checkpoint: Path) -> dict:
    return torch.load(checkpoint / "state.pt", weights_only=False)
