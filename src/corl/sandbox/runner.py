"""Run one program in its own process, work dir and namespaces, under limits, and report how it ended."""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import selectors
import signal
import subprocess
import tempfile
import time

from corl.sandbox import commands
from corl.sandbox.cgroups import RunGroup, detect_cgroups
from corl.sandbox.hostfs import remove_tree
from corl.sandbox.isolation import Isolation, acquire_slot, check_isolation, detect, release_slot, uid_for_slot
from corl.sandbox.limits import Limits, apply_rlimits, minimal_env, tasks_of_uid
from corl.sandbox.result import Result, classify
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


def _pump(proc: subprocess.Popen, limits: Limits, deadline: float) -> tuple[bytes, bytes, bool, str | None]:
    """Read stdout/stderr until EOF, the deadline or the output cap; (out, err, truncated, why we killed)."""
    bufs = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    total, why = 0, None
    with selectors.DefaultSelector() as sel:
        for fd in bufs:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map() and why is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                why = "timeout"
                break
            for key, _ in sel.select(timeout=min(remaining, 0.25)):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                room = max(limits.output_bytes - total, 0)
                bufs[key.fd] += chunk[:room]
                total += len(chunk)
                if total > limits.output_bytes:
                    why = "output"
                    break
            # A finished program whose pipes are held open by a leftover child: stop reading soon.
            if why is None and proc.poll() is not None and not sel.select(timeout=0.05):
                break
    out, err = bufs[proc.stdout.fileno()], bufs[proc.stderr.fileno()]
    return bytes(out), bytes(err), total > limits.output_bytes, why


RECORD_BYTES = 64 << 10  # the bootstrap writes one line of at most ~12 KiB


def read_record(fd: int) -> dict | None:
    """The bootstrap's record from the read end of its pipe, once every writer is gone: the last JSON line, bounded."""
    data = bytearray()
    os.set_blocking(fd, False)
    with contextlib.suppress(OSError):  # EAGAIN: a leftover writer (none backend) and nothing more to read
        while len(data) <= RECORD_BYTES and (chunk := os.read(fd, 1 << 16)):
            data += chunk
    lines = bytes(data[:RECORD_BYTES]).splitlines()
    try:
        record = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _stdin_file(stdin: str | None):
    """A real file, not a pipe: a program that never reads its stdin cannot block us on a full pipe."""
    if stdin is None:
        return open(os.devnull, "rb")  # noqa: SIM115 (closed by the caller)
    f = tempfile.TemporaryFile()  # noqa: SIM115 (the caller closes it with `with`)
    f.write(stdin.encode("utf-8"))
    f.seek(0)
    return f


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


def _execute(iso: Isolation, stdin: str | None, limits: Limits, layout: commands.Layout, uid: int | None, source: str) -> Result:
    nproc_base = 0 if uid is not None else tasks_of_uid(os.getuid())
    walled = iso.backend != "none"
    record_r, record_w = os.pipe()
    try:
        with contextlib.ExitStack() as fds:
            source_f = fds.enter_context(commands.source_file(source)) if walled else None
            source_fd = source_f.fileno() if source_f is not None else -1
            argv = commands.argv(iso, layout, uid, limits, source_fd=source_fd, record_fd=record_w, nproc_base=nproc_base)
            stdin_f = fds.enter_context(_stdin_file(stdin))
            group = _group(iso, limits)
            fds.callback(lambda: group is not None and group.remove())
            start = time.monotonic()
            proc = subprocess.Popen(
                argv,
                cwd=layout.base if walled else layout.work,
                env=minimal_env(WORK if walled else layout.work),
                stdin=stdin_f,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(record_w,) if source_fd < 0 else (record_w, source_fd),
                start_new_session=True,  # its own process group, so one killpg reaches every descendant
                preexec_fn=_preexec(limits, uid, iso, nproc_base, group),
            )
            os.close(record_w)
            record_w = -1
            try:
                out, err, truncated, why = _pump(proc, limits, start + limits.wall_s)
                if why is None:
                    try:
                        proc.wait(timeout=max(start + limits.wall_s - time.monotonic(), 0.01))
                    except subprocess.TimeoutExpired:
                        why = "timeout"
            finally:
                # Closed before the kill: a process blocked writing into a full pipe (the program, or a
                # shell printing "Killed" on stderr) then fails at once instead of holding the wait up.
                proc.stdout.close()
                proc.stderr.close()
                _stop(proc, group)
            oom_kills = group.oom_kills() if group is not None else 0
        wall = time.monotonic() - start
        record = read_record(record_r)
    finally:
        for fd in (record_r, record_w):
            if fd >= 0:
                os.close(fd)
    status, kind, message = classify(proc.returncode, record, why, oom_kills)
    text = {"encoding": "utf-8", "errors": "replace"}
    return Result(status, proc.returncode, out.decode(**text), err.decode(**text), wall, kind, message, truncated, iso.backend)


def run_program(
    source: str,
    stdin: str | None = None,
    limits: Limits | None = None,
    backend: str = "auto",
    require_isolation: bool = False,
) -> Result:
    """Run Python `source` as its own program in a fresh temp dir under `limits`; never raises for what the program does.

    Raises SandboxUnavailable before running anything when no backend gives walls here and
    `none` was not named (`backend="none"` or CORL_SANDBOX=none), or when require_isolation
    is set and the backend is none.
    """
    limits = limits or Limits()
    iso = detect(backend)
    check_isolation(iso, require_isolation, backend)
    slot = acquire_slot()
    try:
        uid = uid_for_slot(slot) if iso.drops_uid else None
        base = tempfile.mkdtemp(prefix="corl-sbx-")
        try:
            layout = commands.Layout.make(base, source, uid, walled=iso.backend != "none")
            return _execute(iso, stdin, limits, layout, uid, source)
        finally:
            if not remove_tree(base):
                log.warning("corl.sandbox: %s could not be removed completely", base)
    finally:
        release_slot(slot)
