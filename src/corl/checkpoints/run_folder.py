"""A run folder belongs to one run.

What a process finds in its run folder decides how it enters it (`enter_run_folder`):

    nothing of a run                  start the run
    a run, and a new run was asked    refuse (exit 2): `--resume DIR`, or a new -o
    a run, and continuing was asked   (--resume, `resume: auto`, or a torchrun restart of this job)
        with a checkpoint             resume from it
        without one                   start again from step 0, dropping its rows (`RunEntry.redo`)

A run that ends before its first step (refused by the disk estimate, failed or stopped by a
signal while its models load) leaves the folder as it found it (`RunEntry.leave`): no folder
holding only the lock, no record of a run that never trained to refuse the next start with.

Entering is atomic: the process that runs a folder holds an exclusive lock on
`RUN_DIR/.corl_lock` from before it reads the folder until the run ends (`lock_run_folder`),
so two runs started at the same moment (a double requeue) never both get in: the second is
refused with one line naming the first (its pid and host). Under torchrun the rank that owns
the folder (rank 0) holds it. A new run's record is created exclusively (O_EXCL).

Continuing compares the configuration with the one the run started with, read from the
run's record: `RUN_DIR/.corl_run.json` (hidden; with its own sha256) and a copy inside
every checkpoint's state.pt. `config.yaml` is a copy for people: editing it by hand
changes nothing the check reads.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import socket
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from corl.checkpoints.checkpoint import latest_checkpoint, load_loop_state, verify_checkpoint
from corl.config import ConfigError, RunConfig, check_resume_config, load_config, validate_config

RECORD = ".corl_run.json"
LOCK = ".corl_lock"  # held (fcntl) by the process that runs the folder, for the run's life
RUN_FILES = ("config.yaml", RECORD, "metrics.jsonl", "checkpoints", "tensorboard")  # what a run writes


def run_record(cfg: RunConfig) -> dict:
    """The configuration a run starts with (resolved: every default filled in) and its sha256."""
    config = cfg.model_dump(mode="json")
    return {"config": config, "sha256": _digest(config)}


def _digest(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def write_record(run_dir: Path, record: dict, exclusive: bool = False) -> None:
    """Write the run's record whole (a temporary file, then renamed). `exclusive`: a new run's,
    which must not exist yet: linked into place, which fails where another run's record is."""
    path = run_dir / RECORD
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1))
    if not exclusive:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # atomic and exclusive, like O_EXCL, with the whole content in place
    except FileExistsError:
        raise ConfigError(
            f"output directory {str(run_dir)!r}: another run wrote its record first; give this run a folder of its own (-o NEW_DIR)"
        ) from None
    finally:
        tmp.unlink(missing_ok=True)


class RunLock:
    """An exclusive lock on RUN_DIR/.corl_lock, held until `release` or the process ends.

    fcntl.flock, on a descriptor that no child process inherits (os.open is close-on-exec, and
    corl's workers are spawned, never forked): the kernel drops it when the process ends, however
    it ends (SIGKILL too). flock, not a POSIX record lock: the latter would go at the first close
    of *any* descriptor of the file in the process (a copy of the folder, a test's snapshot).
    One lock per folder and process (`_HELD`): a second flock there would refuse the process itself."""

    def __init__(self, path: Path, fd: int):
        self.path, self.fd = path, fd

    def release(self) -> None:
        if self.fd is not None:
            _HELD.pop(str(self.path), None)
            os.ftruncate(self.fd, 0)  # no holder named any more (and a refused run leaves the folder as it was)
            os.close(self.fd)  # drops the lock
            self.fd = None

    def __del__(self):  # an entry dropped without release (a test's): the lock goes with it
        with contextlib.suppress(OSError, TypeError):
            self.release()


_HELD: weakref.WeakValueDictionary[str, RunLock] = weakref.WeakValueDictionary()


def lock_run_folder(run_dir: Path) -> RunLock:
    """Take the folder's lock (creating the folder), or raise ConfigError naming the run that holds it."""
    path = (Path(run_dir) / LOCK).absolute()
    if str(path) in _HELD:
        return _HELD[str(path)]
    while True:
        fd = _open_lock_file(path, run_dir)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 512).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise ConfigError(
                f"output directory {str(run_dir)!r} is in use by another corl run ({holder}): two runs in one folder would "
                f"interleave their rows; wait for it to end (then continue it with --resume {run_dir}), or give this run "
                "a folder of its own (-o NEW_DIR)"
            ) from None
        if _still_there(path, fd):
            break
        # the run that held it left an unstarted folder and removed the file (RunEntry.leave): a lock
        # on the removed file would guard nothing, so take the one now at that path
        os.close(fd)
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}".encode())
    _HELD[str(path)] = lock = RunLock(path, fd)
    return lock


def _open_lock_file(path: Path, run_dir: Path) -> int:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise ConfigError(f"output directory {str(run_dir)!r} cannot be written: {err.strerror}; choose another (-o)") from None


def _still_there(path: Path, fd: int) -> bool:
    """Whether `path` still names the file `fd` is open on."""
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def run_files(run_dir: Path) -> list[str]:
    """The files and folders of a run that `run_dir` holds (empty for a new or an empty folder)."""
    return [name for name in RUN_FILES if (run_dir / name).exists()]


@dataclass(frozen=True)
class RunEntry:
    """How this process enters its run folder."""

    checkpoint: Path | None  # continue from it
    redo: bool  # no checkpoint yet, but rows of this same run: start again at step 0, dropping them
    record: dict  # the run's record (`run_record` of the configuration it started with)
    lock: RunLock | None = None  # the folder's lock, held by the process that runs it (torchrun: rank 0)
    fresh: bool = False  # nothing of a run was there: the record is created exclusively
    created: bool = False  # the folder did not exist before this process entered it

    def release(self) -> None:
        """The run has ended: another may enter the folder."""
        if self.lock is not None:
            self.lock.release()

    def leave(self) -> None:
        """The run has ended, or never started: release the folder, and where a fresh run wrote no
        row and no checkpoint, remove what it wrote (the folder too, when it made it). Only the
        process that holds the lock removes anything."""
        if self.lock is not None and self.lock.fd is not None and self.fresh and not _started(self.lock.path.parent):
            _remove_unstarted(self.lock.path.parent, self.created)
        self.release()


def _started(run_dir: Path) -> bool:
    """Whether the run in `run_dir` got anywhere: a row in metrics.jsonl, or a checkpoint."""
    metrics = run_dir / "metrics.jsonl"
    return (metrics.is_file() and metrics.stat().st_size > 0) or latest_checkpoint(run_dir) is not None


def _remove_unstarted(run_dir: Path, created: bool) -> None:
    """Remove what a fresh run wrote before its first step (its record, config.yaml, an empty
    metrics.jsonl, TensorBoard's first event file), then the lock file and a folder it made."""
    for name in RUN_FILES:
        path = run_dir / name
        with contextlib.suppress(OSError):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        (run_dir / LOCK).unlink()  # under the lock still held: a process waiting on this file retakes it (lock_run_folder)
        if created:
            run_dir.rmdir()  # only if empty: anything else put there stays


def enter_run_folder(
    cfg: RunConfig, run_dir: str | Path, resume: bool = False, restarted: bool = False, lock: bool = True
) -> RunEntry:
    """Decide how to enter `run_dir` (see the module's table); raise ConfigError (or
    FileNotFoundError for --resume without a checkpoint) where it may not be entered.

    resume: --resume (a checkpoint must exist); restarted: a torchrun restart of the job
    that started this run. With `cfg.resume == "auto"` both continue what is there.
    lock: take the folder's lock first (the process that runs the folder; torchrun's other
    ranks decide from the same files without it); a refusal releases it."""
    run_dir = Path(run_dir)
    created, had_lock = not run_dir.exists(), (run_dir / LOCK).exists()
    # --resume of a folder that is not there: no lock (it would create the folder), the decision refuses
    held = lock_run_folder(run_dir) if lock and not (resume and created) else None
    try:
        entry = _decide(cfg, run_dir, resume, restarted)
    except BaseException:
        if held is not None:  # a refused run leaves the folder as it was: no lock file, no folder it made
            with contextlib.suppress(OSError):
                if not had_lock:
                    (run_dir / LOCK).unlink()
                if created:
                    run_dir.rmdir()
            held.release()
        raise
    return RunEntry(entry.checkpoint, entry.redo, entry.record, held, entry.fresh, created)


def _decide(cfg: RunConfig, run_dir: Path, resume: bool, restarted: bool) -> RunEntry:
    found = run_files(run_dir)
    checkpoint = latest_checkpoint(run_dir) if found else None
    if resume and not found:
        raise FileNotFoundError(
            f"no run to resume in {run_dir} (no checkpoint, no config.yaml): start one there with corl train CONFIG -o {run_dir}"
        )
    if not (resume or restarted or cfg.resume == "auto"):
        if found:
            raise ConfigError(
                f"output directory {str(run_dir)!r} already holds a run ({', '.join(found)}): continue it with "
                f"corl train --resume {run_dir}, or give the new run a folder of its own (-o NEW_DIR, or output_dir)"
            )
        return RunEntry(None, False, run_record(cfg), fresh=True)
    if not found:
        return RunEntry(None, False, run_record(cfg), fresh=True)
    started = started_record(run_dir, checkpoint)
    if started is not None:
        record, source = started
        check_resume_config(validate_config(record["config"], source), cfg, source)
    if checkpoint is None:
        return RunEntry(None, True, run_record(cfg))
    return RunEntry(checkpoint, False, started[0] if started else run_record(cfg))


def started_record(run_dir: Path, checkpoint: Path | None) -> tuple[dict, str] | None:
    """The run's record and where it was read: the checkpoint's (its manifest guards it),
    else RUN_DIR/.corl_run.json, else config.yaml (runs from before records existed)."""
    if checkpoint is not None:
        verify_checkpoint(checkpoint, parts=[])  # state.pt itself, before it is read
        record = load_loop_state(checkpoint).get("run")
        if record is not None:
            return record, f"the run's record in {checkpoint / 'state.pt'}"
    path = run_dir / RECORD
    if path.is_file():
        try:
            record = json.loads(path.read_text())
            intact = _digest(record["config"]) == record["sha256"]
        except (ValueError, KeyError, TypeError):
            intact = False
        if not intact:
            raise ConfigError(
                f"{path}: the run's record was edited or damaged (its sha256 does not match); it is what a resume "
                f"compares with: restore it, or start a new run in another folder (-o NEW_DIR)"
            )
        return record, f"the run's record {path}"
    if (run_dir / "config.yaml").is_file():
        return run_record(load_config(run_dir / "config.yaml")), str(run_dir / "config.yaml")
    return None


def how_to_continue(run_dir: str | Path) -> str:
    """The end of a stopped run's message: the command that continues it, or why none does."""
    run_dir = Path(run_dir)
    checkpoint = latest_checkpoint(run_dir) if run_dir.is_dir() else None
    if checkpoint is not None:
        return f"the last checkpoint is {checkpoint.name}; continue with corl train --resume {run_dir}"
    if run_dir.is_dir() and run_files(run_dir):
        return f"no checkpoint yet; start it again from step 1 with corl train --resume {run_dir}"
    return "nothing of the run was kept; start it again with the same command"


def check_writable(run_dir: Path) -> None:
    """The run folder can be created and written: tried, not inferred from permission bits
    (root passes every os.access test, and /proc or a read-only mount refuse anyway)."""
    folder = next(f for f in (run_dir, *run_dir.parents) if f.exists())
    verb = "written" if folder == run_dir else "created"
    if not folder.is_dir():
        raise ConfigError(
            f"output directory {str(run_dir)!r} cannot be {verb}: {str(folder)!r} is a file, not a folder; "
            "choose another output_dir (or -o)"
        )
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".corl-write-test-", dir=folder))
    except OSError as err:
        raise ConfigError(
            f"output directory {str(run_dir)!r} cannot be {verb}: {str(folder)!r} does not take new files "
            f"({err.strerror}); choose another output_dir (or -o)"
        ) from None
