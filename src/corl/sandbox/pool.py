"""Many programs in parallel: a bounded pool of threads, each waiting on one sandboxed subprocess."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from corl.sandbox.isolation import check_isolation, detect
from corl.sandbox.limits import Limits
from corl.sandbox.result import Result
from corl.sandbox.runner import run_program


def default_workers() -> int:
    """One program per CPU this process may use: the children, not the threads, do the work."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:
        return max(os.cpu_count() or 1, 1)


class SandboxPool:
    """Runs programs concurrently, at most `workers` at a time; results come back in input order."""

    def __init__(
        self,
        workers: int | None = None,
        limits: Limits | None = None,
        backend: str = "auto",
        require_isolation: bool = False,
    ) -> None:
        self.workers = workers or default_workers()
        self.limits = limits or Limits()
        self.backend = backend
        self.require_isolation = require_isolation
        self.isolation = detect(backend)
        check_isolation(self.isolation, require_isolation, backend)  # refuse now, not on the first program
        self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="corl-sandbox")

    def submit(self, source: str, stdin: str | None = None, limits: Limits | None = None) -> Future[Result]:
        """Schedule one program; the future's result is its Result."""
        return self._executor.submit(run_program, source, stdin, limits or self.limits, self.backend, self.require_isolation)

    def map(
        self, sources: Sequence[str], stdins: Sequence[str | None] | None = None, limits: Limits | None = None
    ) -> list[Result]:
        """Run every program; results[i] belongs to sources[i]."""
        stdins = stdins if stdins is not None else [None] * len(sources)
        futures = [self.submit(s, i, limits) for s, i in zip(sources, stdins, strict=True)]
        return [f.result() for f in futures]

    def close(self) -> None:
        """Wait for running programs (each bounded by its wall limit) and stop the threads."""
        self._executor.shutdown(wait=True)

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_default: SandboxPool | None = None
_default_lock = threading.Lock()


def default_pool() -> SandboxPool:
    """The process-wide pool, created on first use (auto backend, default limits)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = SandboxPool()
        return _default


def close_default_pool() -> None:
    """Shut the process-wide pool down; the next default_pool() makes a fresh one."""
    global _default
    with _default_lock:
        pool, _default = _default, None
    if pool is not None:
        pool.close()
