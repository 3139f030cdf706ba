"""Where metrics go: a JSONL file (the record), TensorBoard events (the curves), and mirrors such as
Weights & Biases (`corl.tracking.wandb_run`) that receive every row as it is written."""

from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path

from corl.files import cannot_write


class RunFileError(RuntimeError):
    """A file of the run could not be written (a full disk): the message names it, says what is
    intact and what to do. Said in one line by `corl train` (exit 1)."""


def write_error(path: Path, err: OSError, run_dir: Path) -> RunFileError:
    return RunFileError(
        f"could not write {path}: {cannot_write(path, err)}; what it held before is intact. Free space, then continue "
        f"the run with corl train --resume {run_dir} (from its last checkpoint)"
    )


class MetricsLog:
    """Append-only `metrics.jsonl` plus TensorBoard scalars, safe to reopen on resume. A metric
    has one name in every sink (`agent0/reward_mean`, `agent0/val_accuracy`): validation
    metrics are named so (val_...) and the row's `kind` is no part of the name.

    Rows count steps from 1 (corl.tracking.step_numbering): on resume from a checkpoint taken after S
    steps, `resume_step` S + 1 drops the records at step >= S + 1 (written by the interrupted
    run after its last checkpoint) and every step appears exactly once. A validation row is
    logged at the step it follows (0 before the first), so the same cut keeps exactly the ones
    the checkpoint had seen; `resume_step=0` (a run with no checkpoint started again) drops them all.
    """

    def __init__(self, run_dir: str | Path, tensorboard: bool = True, resume_step: int | None = None, mirrors=()):
        self.mirrors = list(mirrors)  # objects with log(step, metrics, kind) and close()
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_step is not None and self.path.exists():
            kept = [
                line for line in self.path.read_text().splitlines() if _step_of(line) is not None and _step_of(line) < resume_step
            ]
            try:
                replace_file(self.path, "".join(line + "\n" for line in kept))
            except OSError as err:
                raise write_error(self.path, err, self.path.parent) from None
        # rows go in with one write each, on a descriptor of our own (no buffer to flush at close): a
        # failed write is cut back off (`_append`), so the file never holds a torn row
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.failed = False
        for mirror in self.mirrors:  # the rows already here: a mirror sends those it lacks
            if hasattr(mirror, "catch_up"):
                mirror.catch_up(read_metrics(self.path.parent) if self.path.exists() else [])
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            # purge_step drops events at step >= purge_step: the first step the resumed run redoes
            self._tb = SummaryWriter(str(Path(run_dir) / "tensorboard"), purge_step=resume_step)

    def log(self, step: int, metrics: dict[str, float], kind: str = "train") -> None:
        record = {"step": step, "kind": kind, **{k: _clean(v) for k, v in metrics.items()}}
        self._append((json.dumps(record) + "\n").encode())
        if self._tb is not None:
            try:
                for key, value in metrics.items():
                    if isinstance(value, (int, float)) and math.isfinite(value):
                        self._tb.add_scalar(key, value, step)  # the name metrics.jsonl and W&B use
            except OSError as err:  # its writer thread's failure, raised here
                self.failed = True
                raise write_error(self.path.parent / "tensorboard", err, self.path.parent) from None
        for mirror in self.mirrors:
            mirror.log(step, metrics, kind)

    def _append(self, data: bytes) -> None:
        """Append one whole row, or nothing: a short write or a failure is cut back off."""
        size = os.fstat(self._fd).st_size
        try:
            done = 0
            while done < len(data):
                done += os.write(self._fd, data[done:])
        except OSError as err:
            self.failed = True
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size)
            raise write_error(self.path, err, self.path.parent) from None

    def close(self) -> None:
        if self._fd is None:
            return
        os.close(self._fd)
        self._fd = None
        if self._tb is not None:
            try:
                self._tb.close()
            except OSError:  # events it could not flush: the failure that stopped the run is said already
                if not self.failed:
                    raise
        for mirror in self.mirrors:
            mirror.close()


def replace_file(path: Path, text: str) -> None:
    """Write `path` whole or not at all: a new file, flushed to disk, renamed over the old one (a kill
    at any moment leaves the old rows or the new ones, never a truncated file)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # the rename itself, on disk (not possible on every platform)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _step_of(line: str) -> int | None:
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return None  # a torn last line from a crash


def read_metrics(run_dir: str | Path, kind: str | None = None) -> list[dict]:
    path = Path(run_dir) / "metrics.jsonl"
    records = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if kind is None or record.get("kind") == kind:
            records.append(record)
    return records
