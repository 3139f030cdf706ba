"""Start one sandboxed process and end it: what corl.sandbox.runner and corl.sandbox.session share.

    with run_folder(iso, source) as (layout, uid):          # slot, uid, host folder: always given back
        running = launch(iso, layout, uid, limits, source, stdin=f, stdout=PIPE, stderr=PIPE)
        ...                                                  # talk to it, read its output
        returncode, record, oom_kills = finish(running)      # every process of it gone

The program's source goes in as an unlinked host file (copied onto the run's tmpfs by the
launcher), its exception record comes back on a pipe; the host reads no file the program
made and removes its own folder with corl.sandbox.hostfs.remove_tree.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass

from corl.sandbox import commands
from corl.sandbox.cgroups import RunGroup, detect_cgroups
from corl.sandbox.hostfs import remove_tree
from corl.sandbox.isolation import Isolation, acquire_slot, release_slot, uid_for_slot
from corl.sandbox.limits import Limits, apply_rlimits, minimal_env, tasks_of_uid
from corl.sandbox.result import clean_text
from corl.sandbox.view import WORK

log = logging.getLogger(__name__)
_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1
_EXTRA_TASKS = 4  # launcher, namespace init, bwrap's monitor: inside the cgroup beside the program's nproc


def _preexec(limits: Limits, uid: int | None, iso: Isolation, nproc_base: int, group: RunGroup | None):
    """Runs in the child before exec: join the run's cgroup, die with our thread, limits, then the uid."""
    procs_files = group.procs_files if group is not None else []
    set_limits = iso.backend != "unshare"  # unshare's init sets them on the program alone
    drop_here = iso.backend == "none" and uid is not None

    def run() -> None:
        for path in procs_files:
            with open(path, "w") as f:
                f.write(str(os.getpid()))
        # If the thread that started us dies, the launcher dies, and with it the namespace.
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if set_limits:
            apply_rlimits(limits, nproc_base)
        if drop_here:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)

    return run


def _first_child(pid: int) -> int | None:
    """The launcher's child: the init of the run's PID namespace (bwrap, unshare) or the program (none)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = f.read().split()
        return int(children[0]) if children else None
    except (OSError, ValueError):
        return None


def _stop(proc: subprocess.Popen, group: RunGroup | None) -> None:
    """End every process of the run before returning.

    Killing the namespace's init makes the kernel kill the rest, and the launcher sees the
    init exit only after that: so waiting for the launcher is waiting for all of them.
    A cgroup, where there is one, is emptied on top (it also holds what left the group).
    """
    if proc.poll() is None:
        init = _first_child(proc.pid)
        if init is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(init, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    if group is not None:
        group.kill_all()


RECORD_BYTES = 64 << 10  # the bootstrap writes one line of at most ~12 KiB


def read_record(fd: int) -> dict | None:
    """The bootstrap's record from the read end of its pipe, once every writer is gone; None unless well formed.

    The program can write into the pipe too (it is an fd of its own process): only the last
    line counts, read up to RECORD_BYTES, parsed only if it is a flat object of the bootstrap's
    shape (a deeply nested line raises RecursionError in the parser: refused), its texts through
    corl.sandbox.result.clean_text (escaped, one line, message cut at 2,000).
    """
    data = bytearray()
    os.set_blocking(fd, False)
    with contextlib.suppress(OSError):  # EAGAIN: a leftover writer (none backend) and nothing more to read
        while len(data) <= RECORD_BYTES and (chunk := os.read(fd, 1 << 16)):
            data += chunk
    lines = bytes(data[:RECORD_BYTES]).splitlines()
    if not lines or not lines[-1].startswith(b"{"):
        return None
    try:
        record = json.loads(lines[-1])
    except (ValueError, RecursionError):
        return None
    kind, message, errno = (record.get(k) for k in ("kind", "message", "errno")) if isinstance(record, dict) else (None,) * 3
    if not isinstance(kind, str) or not isinstance(message, str) or not (errno is None or type(errno) is int):
        return None
    return {"kind": clean_text(kind, 200), "message": clean_text(message), "errno": errno}


def _group(iso: Isolation, limits: Limits) -> RunGroup | None:
    """The run's cgroup; None (with a warning) when it cannot be made now, e.g. the host ran out of them."""
    cg = detect_cgroups() if iso.cgroup != "none" else None
    if cg is None:
        return None
    try:
        return RunGroup(cg, limits.memory_mb, limits.nproc + _EXTRA_TASKS)
    except OSError as e:
        log.warning("corl.sandbox: no cgroup for this run (%s): its memory is bounded per process only", e)
        return None


@dataclass
class Launched:
    """A started run: its launcher process, cgroup and the read end of its record pipe."""

    proc: subprocess.Popen
    group: RunGroup | None
    record_fd: int
    start: float  # time.monotonic() just before the launcher started


@contextlib.contextmanager
def run_folder(iso: Isolation, source: str) -> Iterator[tuple[commands.Layout, int | None]]:
    """A slot, its uid and the run's host folder; on leaving, whatever happened, the folder is removed and the slot freed."""
    slot = acquire_slot()
    try:
        uid = uid_for_slot(slot) if iso.drops_uid else None
        base = tempfile.mkdtemp(prefix="corl-sbx-")
        try:
            yield commands.Layout.make(base, source, uid, walled=iso.backend != "none"), uid
        finally:
            if not remove_tree(base):
                log.warning("corl.sandbox: %s could not be removed completely", base)
    finally:
        release_slot(slot)


def launch(
    iso: Isolation, layout: commands.Layout, uid: int | None, limits: Limits, source: str, *, stdin, stdout, stderr
) -> Launched:
    """Start the program (Popen's stdin/stdout/stderr as given) without waiting for it; end it with finish()."""
    nproc_base = 0 if uid is not None else tasks_of_uid(os.getuid())
    walled = iso.backend != "none"
    record_r, record_w = os.pipe()
    group = None
    try:
        with contextlib.ExitStack() as fds:
            source_f = fds.enter_context(commands.source_file(source)) if walled else None
            source_fd = source_f.fileno() if source_f is not None else -1
            filter_f = commands.filter_file(iso.backend)
            seccomp_fd = fds.enter_context(filter_f).fileno() if filter_f is not None else -1
            argv = commands.argv(
                iso, layout, uid, limits, source_fd=source_fd, record_fd=record_w, nproc_base=nproc_base, seccomp_fd=seccomp_fd
            )
            group = _group(iso, limits)
            start = time.monotonic()
            proc = subprocess.Popen(
                argv,
                cwd=layout.base if walled else layout.work,
                env=minimal_env(WORK if walled else layout.work),
                stdin=stdin,
                stdout=stdout,
                stderr=stderr,
                pass_fds=tuple(fd for fd in (record_w, source_fd, seccomp_fd) if fd >= 0),
                start_new_session=True,  # its own process group, so one killpg reaches every descendant
                preexec_fn=_preexec(limits, uid, iso, nproc_base, group),
            )
    except BaseException:
        os.close(record_r)
        if group is not None:
            group.remove()
        raise
    finally:
        os.close(record_w)
    return Launched(proc, group, record_r, start)


def finish(run: Launched) -> tuple[int, dict | None, int]:
    """Stop every process of the run, read its record, remove its cgroup: (returncode, record, OOM kills).

    Close the pipes you read the program's output from first: a writer blocked on a full
    pipe (the program, a shell printing "Killed") then fails at once instead of holding the stop up.
    """
    try:
        _stop(run.proc, run.group)
        oom_kills = run.group.oom_kills() if run.group is not None else 0
        return run.proc.returncode, read_record(run.record_fd), oom_kills
    finally:
        os.close(run.record_fd)
        if run.group is not None:
            run.group.remove()
