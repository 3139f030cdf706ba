"""Sandbox throughput: trivial programs per second at pool sizes 1 and 2, and the overhead over a bare subprocess.

    .venv/bin/python benchmarks/sandbox_throughput.py [--programs 40] [--backend auto|bwrap|unshare|none]

The baseline is `python -c pass` as a plain subprocess, measured in the same run, so the
ratio shows what isolation (namespaces, the read-only view, cgroup, rlimits, temp dir,
bootstrap) costs on this host. `--backend unshare` measures the fallback even where bwrap
is installed; `--backend none` (named, so allowed) measures no walls at all.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=40)
    parser.add_argument("--backend", default="auto")
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


if __name__ == "__main__":
    main()
