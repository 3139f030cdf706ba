"""Files written whole or not at all: a temporary name beside the target, renamed into place.

A run killed mid-write (SIGKILL, a full disk, a preempted node) must leave the old file or all
of the new one, never a prefix: a cut JSON file fails to parse far from its cause, and a cut JSONL
file parses as a shorter, wrong result (`corl grade --records` read back with fewer rows). The
rename is atomic on POSIX within one directory, so the temporary file sits beside the target; its
name carries the writer's host and pid, so processes writing the same name (ranks, nodes on a shared
disk, a resumed run beside a dying one) never write into each other's, and a leftover of a killed
writer is removed by the next writer to that name: at once where that process is gone from this
host, after a day where it ran on another (whose processes this one cannot see). A target that is not a regular file (`/dev/stdout`,
a named pipe) is written in place: renaming over it would replace the device, not write to it.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

_TMP = ".tmp."
OTHER_HOSTS_AFTER_S = 24 * 3600


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}{_TMP}{socket.gethostname()}.{os.getpid()}")


def _remove_leftovers(path: Path) -> None:
    """Temporary files of this target whose writer is gone (see the module's docstring)."""
    prefix = f".{path.name}{_TMP}"
    host = socket.gethostname()
    for stale in path.parent.glob(f"{glob.escape(prefix)}*"):
        writer, _, pid = stale.name[len(prefix) :].rpartition(".")
        gone = False
        if writer == host and pid.isdigit():
            gone = int(pid) == os.getpid() or not _running(int(pid))
        else:
            with contextlib.suppress(FileNotFoundError):
                gone = time.time() - stale.stat().st_mtime > OTHER_HOSTS_AFTER_S
        if gone:
            stale.unlink(missing_ok=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: running
        return True
    return True


@contextlib.contextmanager
def writing_whole(path: str | Path, mode: str = "w", **open_kwargs) -> Iterator[IO]:
    """Open `path` to write a file that appears only when the block ends without an error.

    >>> with writing_whole("records.jsonl", encoding="utf-8") as f: f.write(...)  # doctest: +SKIP
    """
    path = Path(path)
    if path.exists() and not path.is_file():  # a device or a pipe: there is no whole to keep
        with path.open(mode, **open_kwargs) as f:
            yield f
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(path)
    tmp = _temporary(path)
    try:
        with tmp.open(mode, **open_kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())  # the data on disk before the name points at it
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_whole(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    """Write `text` so that `path` is absent, the old file, or all of the new one."""
    with writing_whole(path, encoding=encoding) as f:
        f.write(text)


class NotWritten(RuntimeError):
    """A file could not be written (a full disk, no permission): the message names it, says why,
    and that what it held before is intact. Said in one line by the command that wrote it."""


def cannot_write(path: str | Path, err: OSError) -> str:
    """Why `path` could not be written, for that one line: a full disk says how much is free."""
    if err.errno != errno.ENOSPC:
        return err.strerror or str(err)
    free = 0.0
    with contextlib.suppress(OSError):
        free = shutil.disk_usage(Path(path).parent).free / 2**20
    return f"the disk is full ({free:.1f} MiB free)"


def write_jsonl(path: str | Path, rows) -> None:
    """One JSON line per row, written whole (`--records` of corl eval and corl grade): text as
    it is (unpaired surrogates a model wrote escaped, not an error). Raises NotWritten."""
    path = Path(path)
    try:
        with writing_whole(path, encoding="utf-8", errors="backslashreplace") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    except OSError as err:
        held = "what it held before is intact" if path.exists() else "nothing was written"
        raise NotWritten(f"could not write {path}: {cannot_write(path, err)}; {held}") from None
