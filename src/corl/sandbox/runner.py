"""Run one program in its own process, work dir and namespaces, under limits, and report how it ended."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import tempfile
import time

from corl.sandbox.bootstrap import BOOTSTRAP
from corl.sandbox.isolation import (
    Isolation,
    acquire_slot,
    bwrap_prefix,
    check_isolation,
    detect,
    release_slot,
    uid_for_slot,
    unshare_prefix,
)
from corl.sandbox.limits import Limits, apply_rlimits, minimal_env, tasks_of_uid
from corl.sandbox.result import Result, classify

_RECORD = ".corl_exception.json"
_PROGRAM = "main.py"


def _command(iso: Isolation, workdir: str, uid: int | None) -> list[str]:
    """The full argv: backend prefix, then the bootstrap that runs main.py."""
    inner_uid = uid if (iso.backend == "bwrap" and uid is not None) else -1
    boot = [iso.python, "-s", "-B", "-c", BOOTSTRAP, str(inner_uid), _RECORD, _PROGRAM]
    if iso.backend == "bwrap":
        return [*bwrap_prefix(workdir), *boot]
    if iso.backend == "unshare":
        return [*unshare_prefix(uid), *boot]
    # No namespaces: a shell in between, so the program's parent (getppid) is not this process.
    return ["/bin/sh", "-c", '"$@"; exit $?', "sh", *boot]


def _preexec(limits: Limits, uid: int | None, drop_here: bool, nproc_base: int):
    """Runs in the child before exec: limits first (they must hold for every descendant), then the uid."""

    def run() -> None:
        apply_rlimits(limits, nproc_base)
        if drop_here and uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)

    return run


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


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


def _read_record(workdir: str) -> dict | None:
    try:
        with open(os.path.join(workdir, _RECORD), encoding="utf-8") as f:
            record = json.load(f)
        return record if isinstance(record, dict) else None
    except (OSError, ValueError):
        return None


def _prepare(workdir: str, source: str, uid: int | None) -> None:
    with open(os.path.join(workdir, _PROGRAM), "w", encoding="utf-8") as f:
        f.write(source)
    if uid is not None:
        os.chown(workdir, uid, uid)


def _stdin_file(stdin: str | None):
    """A real file, not a pipe: a program that never reads its stdin cannot block us on a full pipe."""
    if stdin is None:
        return open(os.devnull, "rb")  # noqa: SIM115 (closed by the caller)
    f = tempfile.TemporaryFile()  # noqa: SIM115 (the caller closes it with `with`)
    f.write(stdin.encode("utf-8"))
    f.seek(0)
    return f


def _execute(iso: Isolation, source: str, stdin: str | None, limits: Limits, workdir: str, uid: int | None) -> Result:
    _prepare(workdir, source, uid)
    nproc_base = 0 if uid is not None else tasks_of_uid(os.getuid())
    drop_here = iso.backend == "none"
    start = time.monotonic()
    with _stdin_file(stdin) as stdin_f:
        proc = subprocess.Popen(
            _command(iso, workdir, uid),
            cwd=workdir,
            env=minimal_env(workdir),
            stdin=stdin_f,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, so one killpg reaches every descendant
            preexec_fn=_preexec(limits, uid, drop_here, nproc_base),
        )
    try:
        out, err, truncated, why = _pump(proc, limits, start + limits.wall_s)
        if why is None:
            try:
                proc.wait(timeout=max(start + limits.wall_s - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                why = "timeout"
    finally:
        _kill_group(proc)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    wall = time.monotonic() - start
    status, kind, message = classify(proc.returncode, _read_record(workdir), why)
    text = {"encoding": "utf-8", "errors": "replace"}
    return Result(status, proc.returncode, out.decode(**text), err.decode(**text), wall, kind, message, truncated, iso.backend)


def run_program(
    source: str,
    stdin: str | None = None,
    limits: Limits | None = None,
    backend: str = "auto",
    require_isolation: bool = False,
) -> Result:
    """Run Python `source` as its own program in a fresh temp dir under `limits`; never raises for what the program does."""
    limits = limits or Limits()
    iso = detect(backend)
    check_isolation(iso, require_isolation)
    slot = acquire_slot()
    uid = uid_for_slot(slot) if iso.drops_uid else None
    workdir = tempfile.mkdtemp(prefix="corl-sbx-")
    try:
        return _execute(iso, source, stdin, limits, workdir, uid)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        release_slot(slot)
