"""A study's jobs side by side (corl.studies.jobs): worker processes on one thread each, results
in the order given, a job's error raised in the caller, one worker = this process."""

import os
from pathlib import Path

import pytest
import torch

from corl.studies.jobs import Jobs, default_workers


def _where(x):
    return x, torch.get_num_threads(), os.getpid()


def _fail(x):
    if x == 1:
        raise ValueError(f"job {x} failed")
    return x


def test_jobs_run_in_worker_processes_on_one_thread_each_and_keep_the_order():
    done = []
    with Jobs(2) as jobs:
        out = jobs.map(_where, [(i,) for i in range(5)], on_done=lambda i, r: done.append((i, r[0])))
    assert [x for x, _, _ in out] == [0, 1, 2, 3, 4]
    assert {threads for _, threads, _ in out} == {1}
    pids = {pid for _, _, pid in out}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert sorted(done) == [(i, i) for i in range(5)]  # each job reported once, with its own index


def test_one_worker_runs_the_jobs_here_on_one_thread_and_restores_the_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with Jobs(1) as jobs:
            out = jobs.map(_where, [(0,), (1,)])
        assert [(x, threads, pid) for x, threads, pid in out] == [(0, 1, os.getpid()), (1, 1, os.getpid())]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_a_failing_job_raises_its_own_error_in_the_caller():
    with pytest.raises(ValueError, match="job 1 failed"), Jobs(2) as jobs:
        jobs.map(_fail, [(0,), (1,), (2,)])


def test_corl_jobs_sets_the_number_of_workers(monkeypatch):
    monkeypatch.setenv("CORL_JOBS", "1")
    assert default_workers() == 1 and Jobs().workers == 1
    monkeypatch.delenv("CORL_JOBS")
    assert default_workers() >= 1


def _study(tmp_path, job: str, inside: str, after: str = "pass") -> list[str]:
    """The command that runs a script importing `job` from this file, then, under `if __name__ ==
    "__main__":`, the line `inside` with `jobs = Jobs(2)` open and the line `after` once it closed
    (the script's argv[1]: tmp_path)."""
    import sys

    script = tmp_path / "study.py"
    script.write_text(
        f"import sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        f"from test_jobs import {job}\nfrom corl.studies.jobs import Jobs\n\n"
        f'if __name__ == "__main__":\n    with Jobs(2) as jobs:\n        {inside}\n    {after}\n'
    )
    return [sys.executable, str(script), str(tmp_path)]


def _check_with_the_answer_pool(x):
    from corl.answers.symbolic import POOL, CheckBudget

    return POOL.check("\\frac{1}{2}", "0.5", CheckBudget(60.0))  # starts this worker's pebble pool


def test_a_worker_that_started_the_answer_checkers_still_exits(tmp_path):
    """A worker's exit joins its children: the answer checkers' pool must be stopped first (a
    multiprocessing finalizer; atexit hooks do not run in workers), or the study never ends."""
    import subprocess

    inside = "print(jobs.map(_check_with_the_answer_pool, [(0,), (1,)]), flush=True)"
    cmd = _study(tmp_path, "_check_with_the_answer_pool", inside, after='print("all workers gone", flush=True)')
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["[True,", "True]", "all", "workers", "gone"], proc.stdout


def _report_and_wait(folder):
    import pathlib
    import time

    (pathlib.Path(folder) / f"{os.getpid()}.pid").write_text("")
    time.sleep(120)


def test_workers_end_when_the_study_is_killed(tmp_path):
    """A study killed outright (SIGKILL: no cleanup runs) leaves no worker training on."""
    import signal
    import subprocess
    import time

    study = subprocess.Popen(_study(tmp_path, "_report_and_wait", "jobs.map(_report_and_wait, [(sys.argv[1],)] * 2)"))
    try:
        deadline = time.time() + 120
        while len(list(tmp_path.glob("*.pid"))) < 2 and time.time() < deadline:
            time.sleep(0.2)
        workers = [int(p.stem) for p in tmp_path.glob("*.pid")]
        assert len(workers) == 2
    finally:
        study.send_signal(signal.SIGKILL)
        study.wait()

    def alive(pid):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    deadline = time.time() + 30
    while any(map(alive, workers)) and time.time() < deadline:
        time.sleep(0.2)
    assert not any(map(alive, workers)), workers
