"""What the vision families' pretraining recipe costs, against the one before, measured in one run.

    python benchmarks/vision_pretrain_cost.py --steps 40 --rounds 3

Version 4 (the arithmetic-heavy mixture: longer solutions per row) against version 3 (equal
mixture), per family: median seconds per step of `pretrain_vl` after the read-only quarter, one
CPU thread, in alternating rounds in one process, so the machine's speed cancels in the ratio.
The whole pretraining's ratio also counts the steps (1,000 against 800). CPU-seconds on a shared
virtual machine vary with what its host runs (the same study measured 427-751 here); a ratio from
one run does not.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import torch


def step_seconds(spec, steps: int) -> float:
    from corl.studies.tiny_vl.pretrain import READ_ONLY_SHARE, pretrain_vl

    stamps: list[float] = []
    # the read-only quarter is the same in both designs: time only the mixed steps after it
    pretrain_vl(spec, steps=steps, batch_size=32, on_step=lambda s, m, p: stamps.append(time.perf_counter()))
    mixed = stamps[round(READ_ONLY_SHARE * steps) :]
    return statistics.median(b - a for a, b in zip(mixed, mixed[1:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from corl.studies.tiny_vl.families import VL_FAMILIES
    from corl.studies.tiny_vl.pretrain import STEPS

    torch.set_num_threads(1)
    for name, spec in VL_FAMILIES.items():
        old = dataclasses.replace(spec, mixture={})
        times: dict[str, list[float]] = {"v3": [], "v4": []}
        for _ in range(args.rounds):
            times["v3"].append(step_seconds(old, args.steps))
            times["v4"].append(step_seconds(spec, args.steps))
        v3, v4 = statistics.median(times["v3"]), statistics.median(times["v4"])
        whole = (v4 * STEPS) / (v3 * 800)
        print(f"{name}: {1000 * v3:.0f} -> {1000 * v4:.0f} ms a mixed step (x{v4 / v3:.2f}); "
              f"whole pretraining x{whole:.2f} with {STEPS} steps against 800 (read-only steps counted as mixed ones)")  # fmt: skip


if __name__ == "__main__":
    main()
