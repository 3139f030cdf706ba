"""Sandbox throughput: trivial programs per second at pool sizes 1 and 2, the overhead over a bare subprocess,
and the time per judged code program now (program + judge: two processes) against an older commit's in the same run.

    .venv/bin/python benchmarks/sandbox_throughput.py [--programs 40] [--backend auto|bwrap|unshare|none] [--old-rev 2f21024]

The baseline is `python -c pass` as a plain subprocess, measured in the same run, so the
ratio shows what isolation (namespaces, the read-only view, cgroup, rlimits, temp dir,
bootstrap) costs on this host. `--backend unshare` measures the fallback even where bwrap
is installed; `--backend none` (named, so allowed) measures no walls at all.

The judged-program comparison runs one honest MBPP-style program's hidden tests `--programs`
times through `corl.tasks.code.execute.run_tests`, here and (in a subprocess, on a copy of
`--old-rev`'s src/ taken with `git archive` into a temp folder) with the code of that
commit (2f21024: the tests inside the program's own process, audit-hook harness), and
prints the ratio new/old of the time per program.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from corl.sandbox import SandboxPool, Status, detect


def bare_per_program(n: int) -> float:
    """Seconds per `python -c pass`, run one after another."""
    start = time.perf_counter()
    for _ in range(n):
        subprocess.run([sys.executable, "-c", "pass"], check=True)
    return (time.perf_counter() - start) / n


def sandbox_rate(n: int, workers: int, backend: str) -> float:
    """Trivial programs per second through a pool of `workers`."""
    with SandboxPool(workers=workers, backend=backend) as pool:
        pool.map(["pass"])  # warm-up: backend detection and first imports
        start = time.perf_counter()
        results = pool.map(["pass"] * n)
        elapsed = time.perf_counter() - start
    assert all(r.status is Status.OK for r in results), [r for r in results if r.status is not Status.OK][:1]
    return n / elapsed


JUDGED = """
import sys, time
from corl.sandbox import SandboxPool
from corl.tasks.code.execute import run_tests
n, workers, backend = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
row = {"task_id": 1, "text": "Add.", "code": "def add(a, b):\\n    return a + b", "test_setup_code": "",
       "test_list": ["assert add(1, 2) == 3", "assert add(2, 5) == 7", "assert add(-1, 1) == 0"]}
with SandboxPool(workers=workers, backend=backend) as pool:
    run_tests(["def add(a, b):\\n    return a + b\\n"], [row], pool)  # warm-up
    start = time.perf_counter()
    runs = run_tests(["def add(a, b):\\n    return a + b\\n"] * n, [row] * n, pool)
    elapsed = time.perf_counter() - start
assert all(r.passed for r in runs), [r for r in runs if not r.passed][:1]
print(elapsed / n)
"""


def judged_per_program(n: int, workers: int, backend: str, src: str) -> float:
    """Seconds per judged program (wall / n) with the corl under `src`, in a fresh interpreter."""
    env = {"PYTHONPATH": src, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", JUDGED, str(n), str(workers), backend], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"judged run with {src} failed: {done.stderr.strip()[-500:]}")
    return float(done.stdout.strip().splitlines()[-1])


def old_source(rev: str, into: str) -> str:
    """src/ of commit `rev`, extracted into `into`; its path."""
    root = Path(__file__).resolve().parents[1]
    archive = subprocess.run(["git", "-C", str(root), "archive", rev, "src"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    return str(Path(into) / "src")


def compare_judged(n: int, backend: str, rev: str) -> None:
    new_src = str(Path(__file__).resolve().parents[1] / "src")
    with tempfile.TemporaryDirectory(prefix="corl-old-") as tmp:
        old_src = old_source(rev, tmp)
        for workers in (1, 2):
            old = judged_per_program(n, workers, backend, old_src)
            new = judged_per_program(n, workers, backend, new_src)
            print(
                f"judged code program pool={workers}: {rev} {old * 1000:.0f} ms/program, now {new * 1000:.0f} ms/program "
                f"(program + judge process): x{new / old:.2f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=40)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--old-rev", default="2f21024", help="commit whose judged-program time is the baseline")
    args = parser.parse_args()
    iso = detect(args.backend)
    bare = bare_per_program(args.programs)
    print(iso.describe())
    print(f"bare `python -c pass`: {bare * 1000:.1f} ms/program, {1 / bare:.1f} programs/s")
    for workers in (1, 2):
        rate = sandbox_rate(args.programs, workers, args.backend)
        per = workers / rate
        print(
            f"sandbox pool={workers}: {rate:.1f} programs/s, {per * 1000:.1f} ms/program/worker, overhead x{per / bare:.2f} vs bare"
        )
    compare_judged(args.programs, args.backend, args.old_rev)


if __name__ == "__main__":
    main()
