"""What a sandboxed run reports: one status, the (truncated) output and the time it took."""

from __future__ import annotations

import errno as errno_codes
import signal
from dataclasses import dataclass
from enum import Enum


class Status(str, Enum):
    """How a program ended; exactly one applies."""

    OK = "ok"  # exit code 0
    ERROR = "error"  # an exception (error_kind, error_message) or a nonzero exit
    TIMEOUT = "timeout"  # wall or CPU time limit
    MEMORY = "memory"  # MemoryError under the address-space limit, or the run's cgroup went over its memory
    OUTPUT_LIMIT = "output_limit"  # too much stdout/stderr, a file over the size limit, or the disk bound
    KILLED = "killed"  # died by a signal the sandbox did not send (segfault, self-kill)


@dataclass(frozen=True)
class Result:
    """One program's outcome."""

    status: Status
    returncode: int | None
    stdout: str
    stderr: str
    wall_s: float
    error_kind: str | None = None  # exception class name, signal name, or "exit"
    error_message: str | None = None
    truncated: bool = False  # stdout/stderr were cut at Limits.output_bytes
    isolation: str = "none"  # the backend that ran it: bwrap, unshare or none

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


TEXT_LIMIT = 2000  # characters of one program-derived text the host keeps (an error message, a record field)


def clean_text(text: object, limit: int = TEXT_LIMIT) -> str:
    """A text that came from a program, safe for the host to keep, log and write: the one sanitiser at the host boundary.

    Printable characters stay; every other one (control characters, newlines, lone
    surrogates, other non-printables) is written as its escape (`\\n`, `\\ud800`), so the
    result is valid UTF-8 on one line; cut at `limit` characters (the escapes count), with
    "..." when cut. A non-str gives "?".
    """
    if type(text) is not str:
        return "?"
    out, size = [], 0
    for c in text[: limit + 1]:
        piece = c if c.isprintable() else ascii(c)[1:-1]
        size += len(piece)
        if size > limit:
            out.append("...")
            break
        out.append(piece)
    return "".join(out)


def signal_name(signum: int) -> str:
    """SIGKILL for 9; the number for signals Python has no name for."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def classify(
    returncode: int, exc: dict | None, killed_by_us: str | None, oom_kills: int = 0
) -> tuple[Status, str | None, str | None]:
    """(status, error_kind, error_message) from the exit, the bootstrap's record, our own kill and the cgroup's OOM kills.

    The record is written in the program's own process, so the program can forge it: its texts
    are cleaned (clean_text), and callers that must not let the program pick its status (a judged
    program: corl.sandbox.session) pass exc=None, leaving the exit code, the signal, our kill and the cgroup.
    """
    status, kind, message = _classify(returncode, exc, killed_by_us, oom_kills)
    return status, None if kind is None else clean_text(kind, 200), None if message is None else clean_text(message)


def _classify(
    returncode: int, exc: dict | None, killed_by_us: str | None, oom_kills: int = 0
) -> tuple[Status, str | None, str | None]:
    if killed_by_us == "timeout":
        return Status.TIMEOUT, "timeout", "wall time limit"
    if killed_by_us == "output":
        return Status.OUTPUT_LIMIT, "output_limit", "stdout/stderr over the limit"
    if oom_kills:
        # Even when the main process ended well: a child of it died for the memory of the whole.
        return Status.MEMORY, "OOMKilled", f"the program's processes together went over the memory limit ({oom_kills} killed)"
    if exc is not None and exc.get("kind") != "SystemExit":
        kind, message = exc.get("kind"), exc.get("message")
        if kind == "MemoryError":
            return Status.MEMORY, kind, message
        if exc.get("errno") in (errno_codes.EFBIG, errno_codes.ENOSPC):
            return Status.OUTPUT_LIMIT, kind, message
        return Status.ERROR, kind, message
    signum = _signal_of(returncode, exc)
    if signum == signal.SIGXCPU:
        return Status.TIMEOUT, signal_name(signum), "CPU time limit"
    if signum == signal.SIGXFSZ:
        return Status.OUTPUT_LIMIT, signal_name(signum), "file size limit"
    if signum is not None:
        return Status.KILLED, signal_name(signum), None
    if returncode == 0:
        return Status.OK, None, None
    return Status.ERROR, "exit", f"exit code {returncode}"


def _signal_of(returncode: int, exc: dict | None) -> int | None:
    """The signal that ended the program: negative codes, or the shell-style 128+n of wrappers."""
    if returncode < 0:
        return -returncode
    # bwrap reports a child's death by signal n as 128+n; a recorded SystemExit tells a real exit apart.
    if 128 < returncode <= 128 + 64 and exc is None:
        return returncode - 128
    return None
