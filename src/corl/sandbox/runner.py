"""Run one program in its own process, work dir and namespaces, under limits, and report how it ended."""

from __future__ import annotations

import os
import selectors
import subprocess
import tempfile
import time

from corl.sandbox import commands
from corl.sandbox.isolation import Isolation, check_isolation, detect
from corl.sandbox.launch import finish, launch, run_folder
from corl.sandbox.limits import Limits
from corl.sandbox.result import Result, classify


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


def _stdin_file(stdin: str | None):
    """A real file, not a pipe: a program that never reads its stdin cannot block us on a full pipe."""
    if stdin is None:
        return open(os.devnull, "rb")  # noqa: SIM115 (closed by the caller)
    f = tempfile.TemporaryFile()  # noqa: SIM115 (the caller closes it with `with`)
    f.write(stdin.encode("utf-8"))
    f.seek(0)
    return f


def _execute(iso: Isolation, stdin: str | None, limits: Limits, layout: commands.Layout, uid: int | None, source: str) -> Result:
    with _stdin_file(stdin) as stdin_f:
        running = launch(iso, layout, uid, limits, source, stdin=stdin_f, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc = running.proc
    try:
        out, err, truncated, why = _pump(proc, limits, running.start + limits.wall_s)
        if why is None:
            try:
                proc.wait(timeout=max(running.start + limits.wall_s - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                why = "timeout"
    finally:
        proc.stdout.close()  # before the kill: see finish()
        proc.stderr.close()
        returncode, record, oom_kills = finish(running)
    wall = time.monotonic() - running.start
    status, kind, message = classify(returncode, record, why, oom_kills)
    text = {"encoding": "utf-8", "errors": "replace"}
    return Result(status, returncode, out.decode(**text), err.decode(**text), wall, kind, message, truncated, iso.backend)


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
    with run_folder(iso, source) as (layout, uid):
        return _execute(iso, stdin, limits, layout, uid, source)
