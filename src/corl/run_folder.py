"""A run folder belongs to one run.

What a process finds in its run folder decides how it enters it (`enter_run_folder`):

    nothing of a run                  start the run
    a run, and a new run was asked    refuse (exit 2): `--resume DIR`, or a new -o
    a run, and continuing was asked   (--resume, `resume: auto`, or a torchrun restart of this job)
        with a checkpoint             resume from it
        without one                   start again from step 0, dropping its rows (`RunEntry.redo`)

Continuing compares the configuration with the one the run started with, read from the
run's record: `RUN_DIR/.corl_run.json` (hidden; with its own sha256) and a copy inside
every checkpoint's state.pt. `config.yaml` is a copy for people: editing it by hand
changes nothing the check reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from corl.checkpoint import latest_checkpoint, load_loop_state, verify_checkpoint
from corl.config import ConfigError, RunConfig, check_resume_config, load_config, validate_config

RECORD = ".corl_run.json"
RUN_FILES = ("config.yaml", RECORD, "metrics.jsonl", "checkpoints", "tensorboard")  # what a run writes


def run_record(cfg: RunConfig) -> dict:
    """The configuration a run starts with (resolved: every default filled in) and its sha256."""
    config = cfg.model_dump(mode="json")
    return {"config": config, "sha256": _digest(config)}


def _digest(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def write_record(run_dir: Path, record: dict) -> None:
    path = run_dir / RECORD
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, path)


def run_files(run_dir: Path) -> list[str]:
    """The files and folders of a run that `run_dir` holds (empty for a new or an empty folder)."""
    return [name for name in RUN_FILES if (run_dir / name).exists()]


@dataclass(frozen=True)
class RunEntry:
    """How this process enters its run folder."""

    checkpoint: Path | None  # continue from it
    redo: bool  # no checkpoint yet, but rows of this same run: start again at step 0, dropping them
    record: dict  # the run's record (`run_record` of the configuration it started with)


def enter_run_folder(cfg: RunConfig, run_dir: str | Path, resume: bool = False, restarted: bool = False) -> RunEntry:
    """Decide how to enter `run_dir` (see the module's table); raise ConfigError (or
    FileNotFoundError for --resume without a checkpoint) where it may not be entered.

    resume: --resume (a checkpoint must exist); restarted: a torchrun restart of the job
    that started this run. With `cfg.resume == "auto"` both continue what is there."""
    run_dir = Path(run_dir)
    found = run_files(run_dir)
    checkpoint = latest_checkpoint(run_dir) if found else None
    if resume and checkpoint is None:
        hint = ""
        if found:
            hint = (
                f": the run stopped before its first checkpoint; start it again (its rows are redone) with "
                f"corl train CONFIG -o {run_dir} --resume auto"
            )
        raise FileNotFoundError(f"no checkpoint to resume in {run_dir}/checkpoints{hint}")
    if not (resume or restarted or cfg.resume == "auto"):
        if found:
            raise ConfigError(
                f"output directory {str(run_dir)!r} already holds a run ({', '.join(found)}): continue it with "
                f"corl train --resume {run_dir}, or give the new run a folder of its own (-o NEW_DIR, or output_dir)"
            )
        return RunEntry(None, False, run_record(cfg))
    if not found:
        return RunEntry(None, False, run_record(cfg))
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
