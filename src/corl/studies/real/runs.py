"""The study's commands, run as a user runs them (`corl train`, `corl eval` in a subprocess), each
with its own CPU-seconds and peak memory (os.wait4's resource usage of that one child)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class Measured:
    """One command: how it ended and what it cost."""

    command: list[str]
    exit_code: int
    cpu_seconds: float  # user + system of the command's process and the children it waited for
    peak_rss_gib: float  # its largest resident set (ru_maxrss)
    wall_seconds: float
    interrupted: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


def corl(*args: str, log: Path, cwd: Path, interrupt_when: Callable[[], bool] | None = None) -> Measured:
    """`python -m corl ARGS`, output appended to `log`; `interrupt_when`: send SIGINT (a user's Ctrl-C)
    once it returns True, then wait for the command to end as Ctrl-C ends it."""
    command = [sys.executable, "-m", "corl", *args]
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with log.open("a") as out:
        out.write(f"\n$ corl {' '.join(args)}\n")
        out.flush()
        proc = subprocess.Popen(
            command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
        interrupted = False
        while interrupt_when is not None and not interrupted:
            if proc.poll() is not None:
                break
            if interrupt_when():
                proc.send_signal(signal.SIGINT)
                interrupted = True
            time.sleep(1.0)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Measured(
        command=[Path(command[0]).name, *command[1:]],
        exit_code=proc.returncode,
        cpu_seconds=round(usage.ru_utime + usage.ru_stime, 1),
        peak_rss_gib=round(usage.ru_maxrss / 2**20, 3),
        wall_seconds=round(time.perf_counter() - start, 1),
        interrupted=interrupted,
    )
