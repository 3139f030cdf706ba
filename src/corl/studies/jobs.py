"""A study's independent pieces side by side: worker processes on one CPU thread each.

Why processes: the tiny models are too small for torch's intra-op threads to pay off. On
2 cores, one process on 2 threads runs a tiny model's step ~1.3x faster than on 1 thread,
while two processes on 1 thread each do two steps in the time of one
(benchmarks/quickstart_time.py prints what the workers bought). Why one thread whatever the
machine: float sums in another order give other weights, and pretraining amplifies it, so a
job's numbers depend on its thread count and not on how many cores ran the study.

Jobs are top-level functions with picklable arguments, run by `spawn`ed workers (a fork of a
process whose OpenMP pool has run can hang). With one worker, or one job, they run in this
process (on one thread too): no start-up cost where parallelism buys nothing.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

_PARENT = 0  # in a worker: the pid of the process that started it


def default_workers() -> int:
    """CPU cores this process may use (`CORL_JOBS` overrides: 1 runs every job in-process)."""
    if os.environ.get("CORL_JOBS"):
        return max(1, int(os.environ["CORL_JOBS"]))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _die_with_parent() -> None:
    """Linux: the kernel sends this worker SIGTERM when its parent dies (killed, not only Ctrl-C,
    which reaches the whole process group), so no orphan goes on training for minutes."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)
    if os.getppid() != _PARENT:  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _init_worker(parent: int) -> None:
    global _PARENT
    _PARENT = parent
    _die_with_parent()
    import torch

    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # dozens of tiny checkpoint loads would each print a bar


class Jobs:
    """`with Jobs(workers) as jobs: results = jobs.map(fn, [args, ...])`; results in the order given.

    Args:
        workers: processes at most (default: `default_workers()`); the pool starts on the first
            map that has more than one job, and lives until the block ends.
    """

    def __init__(self, workers: int | None = None):
        self.workers = workers if workers is not None else default_workers()
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> Jobs:
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def map(self, fn: Callable[..., Any], calls: Sequence[tuple], on_done: Callable[[int, Any], None] | None = None) -> list:
        """fn(*args) for each args of `calls`, longest first if the caller ordered them so;
        on_done(index, result) as each finishes (in this process: progress lines)."""
        results: list[Any] = [None] * len(calls)
        if self.workers <= 1 or len(calls) <= 1:
            with one_thread():
                for i, args in enumerate(calls):
                    results[i] = fn(*args)
                    if on_done is not None:
                        on_done(i, results[i])
            return results
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
                initargs=(os.getpid(),),
            )
        futures = {self._pool.submit(fn, *args): i for i, args in enumerate(calls)}
        for future in as_completed(futures):
            i = futures[future]
            results[i] = future.result()  # a job's exception is raised here, with its traceback
            if on_done is not None:
                on_done(i, results[i])
        return results
