"""A sandboxed program started with pipes instead of run to completion: a judge talks to it while it runs.

    req_r, req_w = os.pipe(); rep_r, rep_w = os.pipe()
    session = Session(source, stdin=req_r, stdout=rep_w, limits=limits)   # the program reads req, writes rep
    os.close(req_r); os.close(rep_w)                                      # the caller keeps req_w, rep_r
    ... talk to it ...
    result = session.close()                                              # every process of it gone

The walls, limits, per-run uid, cgroup and work folder are those of `run_program`: the same
`corl.sandbox.launch` (run_folder, launch, finish); only the stdio differ: stdin and stdout
are the caller's pipe ends (the caller owns and closes them), stderr goes to /dev/null
(nothing the program writes is buffered by the host). `close()` stops whatever is left of
the program, removes its folder, releases its slot and says how it ended; it never raises
for what the program did. Its status never comes from the bootstrap's record (the program
can write into that pipe): only the exit code or signal and the cgroup's OOM kills count.
"""

from __future__ import annotations

import contextlib
import subprocess
import time

from corl.sandbox.isolation import check_isolation, detect
from corl.sandbox.launch import finish, launch, run_folder
from corl.sandbox.limits import Limits
from corl.sandbox.result import Result, classify

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
        self._closed = False
        with contextlib.ExitStack() as stack:
            layout, uid = stack.enter_context(run_folder(self.iso, source))
            self._running = launch(
                self.iso, layout, uid, self.limits, source, stdin=stdin, stdout=stdout, stderr=subprocess.DEVNULL
            )
            self._folder = stack.pop_all()  # held open until close()

    @property
    def proc(self) -> subprocess.Popen:
        return self._running.proc

    def close(self, grace_s: float = 0.0) -> Result:
        """Stop the program (after up to `grace_s` for it to end by itself) and say how it ended."""
        if self._closed:
            raise RuntimeError("session already closed")
        self._closed = True
        with self._folder:
            if grace_s > 0:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=grace_s)
            stopped = self.proc.poll() is None
            returncode, _record, oom_kills = finish(self._running)
            # The record is the program's to forge (its pipe is an fd of the program's process): a session's
            # status comes only from what the host saw, the exit code or signal and the cgroup's OOM kills.
            status, kind, message = classify(returncode, None, None, oom_kills)
            wall = time.monotonic() - self._running.start
            return Result(status, returncode, "", "", wall, kind, STOPPED if stopped else message, False, self.iso.backend)
