"""A sandboxed program started with pipes instead of run to completion: a judge talks to it while it runs.

    req_r, req_w = os.pipe(); rep_r, rep_w = os.pipe()
    session = Session(source, stdin=req_r, stdout=rep_w, limits=limits)   # the program reads req, writes rep
    os.close(req_r); os.close(rep_w)                                      # the caller keeps req_w, rep_r
    ... talk to it ...
    result = session.close()                                              # every process of it gone

The walls, limits, per-run uid, cgroup and work folder are those of `corl.sandbox.runner`
(the same argv, preexec and stop); only the stdio differ: stdin and stdout are the caller's
pipe ends (the caller owns and closes them), stderr goes to /dev/null (nothing the program
writes is buffered by the host). `close()` stops whatever is left of the program, removes its
folder, releases its slot and says how it ended; it never raises for what the program did.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import tempfile
import time

from corl.sandbox import commands
from corl.sandbox.hostfs import remove_tree
from corl.sandbox.isolation import acquire_slot, check_isolation, detect, release_slot, uid_for_slot
from corl.sandbox.limits import Limits, minimal_env, tasks_of_uid
from corl.sandbox.result import Result, classify
from corl.sandbox.runner import _group, _preexec, _stop, read_record
from corl.sandbox.view import WORK

log = logging.getLogger(__name__)
STOPPED = "stopped by the caller"  # Result.error_message of a program still running at close(): its status is our kill


class Session:
    """One sandboxed program, running, with the caller's pipe ends as its stdin and stdout."""

    def __init__(
        self,
        source: str,
        stdin: int,
        stdout: int,
        limits: Limits | None = None,
        backend: str = "auto",
        require_isolation: bool = False,
    ) -> None:
        self.limits = limits or Limits()
        self.iso = detect(backend)
        check_isolation(self.iso, require_isolation, backend)
        self.proc: subprocess.Popen | None = None
        self._group = None
        self._base: str | None = None
        self._record_r = -1
        self._closed = False
        self._slot = acquire_slot()
        try:
            self._start(source, stdin, stdout)
        except BaseException:
            self._cleanup()
            raise

    def _start(self, source: str, stdin: int, stdout: int) -> None:
        """runner._execute's launch, with the caller's fds as stdin and stdout."""
        iso, limits = self.iso, self.limits
        uid = uid_for_slot(self._slot) if iso.drops_uid else None
        walled = iso.backend != "none"
        self._base = tempfile.mkdtemp(prefix="corl-sbx-")
        layout = commands.Layout.make(self._base, source, uid, walled=walled)
        nproc_base = 0 if uid is not None else tasks_of_uid(os.getuid())
        self._record_r, record_w = os.pipe()
        try:
            with contextlib.ExitStack() as fds:
                source_f = fds.enter_context(commands.source_file(source)) if walled else None
                source_fd = source_f.fileno() if source_f is not None else -1
                argv = commands.argv(iso, layout, uid, limits, source_fd=source_fd, record_fd=record_w, nproc_base=nproc_base)
                self._group = _group(iso, limits)
                self.start = time.monotonic()
                self.proc = subprocess.Popen(
                    argv,
                    cwd=layout.base if walled else layout.work,
                    env=minimal_env(WORK if walled else layout.work),
                    stdin=stdin,
                    stdout=stdout,
                    stderr=subprocess.DEVNULL,
                    pass_fds=(record_w,) if source_fd < 0 else (record_w, source_fd),
                    start_new_session=True,
                    preexec_fn=_preexec(limits, uid, iso, nproc_base, self._group),
                )
        finally:
            os.close(record_w)

    def close(self, grace_s: float = 0.0) -> Result:
        """Stop the program (after up to `grace_s` for it to end by itself) and say how it ended."""
        if self._closed:
            raise RuntimeError("session already closed")
        self._closed = True
        try:
            if grace_s > 0:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=grace_s)
            stopped = self.proc.poll() is None
            _stop(self.proc, self._group)
            oom_kills = self._group.oom_kills() if self._group is not None else 0
            status, kind, message = classify(self.proc.returncode, read_record(self._record_r), None, oom_kills)
            wall = time.monotonic() - self.start
            message = STOPPED if stopped else message
            return Result(status, self.proc.returncode, "", "", wall, kind, message, False, self.iso.backend)
        finally:
            self._cleanup()

    def _cleanup(self) -> None:
        try:
            if self._group is not None:
                self._group.remove()
            if self._record_r >= 0:
                os.close(self._record_r)
                self._record_r = -1
            if self._base is not None and not remove_tree(self._base):
                log.warning("corl.sandbox: %s could not be removed completely", self._base)
        finally:
            release_slot(self._slot)
