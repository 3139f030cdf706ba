"""How soon a flood of output is cut, on stdout against stderr, per sandbox backend (ratio in one run).

    python benchmarks/sandbox_flood.py [--backend unshare|bwrap|none] [--reps 3]

The host once waited a fixed 10 s for a launcher blocked on a full stderr pipe while stdout was
cut in 0.3 s; the ratio stderr / stdout should be near 1.
"""

from __future__ import annotations

import argparse
import statistics

from corl.sandbox import Limits, run_program

FLOOD = "import sys, time\nsys.{stream}.write('x' * (8 << 20))\nsys.{stream}.flush()\ntime.sleep(60)\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    limits = Limits(wall_s=60, cpu_s=60, output_bytes=100_000)
    walls = {"stdout": [], "stderr": []}
    for _ in range(args.reps):
        for stream in walls:  # alternated, so load changes fall on both
            result = run_program(FLOOD.format(stream=stream), limits=limits, backend=args.backend)
            walls[stream].append(result.wall_s)
    out, err = (statistics.median(walls[s]) for s in ("stdout", "stderr"))
    print(f"median wall: stdout flood {out:.2f} s, stderr flood {err:.2f} s; stderr / stdout x{err / out:.2f}")


if __name__ == "__main__":
    main()
