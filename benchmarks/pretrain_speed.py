"""Threads or processes for the tiny families' pretraining, each measured against a baseline of the same run.

    python benchmarks/pretrain_speed.py                    # llama-char and qwen2-bpe, 40 steps each
    python benchmarks/pretrain_speed.py --steps 60 --families llama-char gemma-bpe
    python benchmarks/pretrain_speed.py --families llama-char qwen2-bpe gemma-bpe --only rounds --steps 100

Comparisons on the real pretraining step (corl.studies.tiny.pretrain.training_batches):
1. one thread vs all cores' threads for one process (torch's intra-op parallelism), per family;
2. the study's schedule (corl.studies.jobs): every family at once, a process each on one thread,
   vs one after the other on all threads: the wall time of pretraining the cohort;
3. per family on one thread, each step's batch in one forward pass vs in the length-sorted passes
   of ROWS_PER_PASS rows that pretraining runs (the same gradient, less padding), alternating;
4. ("rounds", with more families than cores, as the three-agent ring on 2 cores) a worker per
   core, the families in rounds, vs the pool the study builds them in
   (corl.studies.quickstart_cohort.builder_pool: a worker per family, started together), alternating;
   the extra workers' start-up costs a few seconds, so short builds (a few steps) come out slower.
Prints ratios; the absolute seconds depend on the machine and its load (printed too).
(Batches grouped by length were tried and dropped: on the tiny task a row's length gives away
its type, so such batches held one type each and the bases learned a fraction of what they do.
The passes of 3. sort rows within each step's batch: every step still sees the whole mixture.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from contextlib import nullcontext
from itertools import islice

import torch


def _steps(name: str, steps: int, threads: int, passes: bool = True) -> float:
    """Median seconds per step of `steps` pretraining steps (after 3 warm-up steps); `passes`:
    the step as pretraining runs it (length-sorted passes), else the batch in one forward pass."""
    import corl.studies.tiny.pretrain as pretrain
    from corl.studies.tiny.families import build_random_model, get_family

    torch.set_num_threads(threads)
    spec = get_family(name)
    tok = pretrain.build_tokenizer(spec)
    model = build_random_model(spec.arch, tok, hidden=spec.hidden, layers=spec.layers, heads=spec.heads, ffn=spec.ffn)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr)
    times = []
    for batch in islice(pretrain.training_batches(spec, tok), steps):
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        if passes:
            pretrain.accumulate_gradients(model, batch)
        else:
            model(**batch).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[3:])


def _job(name: str, steps: int) -> float:
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    _steps(name, steps, 1)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", nargs="+", default=["llama-char", "qwen2-bpe"])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--only", choices=list(COMPARISONS), nargs="+", default=list(COMPARISONS), help="Run these only.")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    print(f"cores {cores}; load average {os.getloadavg()[0]:.2f}; {args.steps} steps per measurement\n")
    for name in args.only:
        COMPARISONS[name](args.families, args.steps, cores)


def _compare_threads(families: list[str], steps: int, cores: int) -> None:
    print(f"| family | step on {cores} threads | on 1 thread | 1 thread / {cores} threads |")
    print("|---|---|---|---|")
    for name in families:
        many = _steps(name, steps, cores)
        one = _steps(name, steps, 1)
        print(f"| {name} | {many * 1000:.0f} ms | {one * 1000:.0f} ms | {one / many:.2f}x |")


def _compare_schedule(families: list[str], steps: int, cores: int) -> None:
    from corl.studies.jobs import Jobs

    t0 = time.perf_counter()
    for name in families:
        _steps(name, steps, cores)
    serial = time.perf_counter() - t0
    t0 = time.perf_counter()
    with Jobs(min(cores, len(families))) as jobs:
        jobs.map(_job, [(name, steps) for name in families])
    side_by_side = time.perf_counter() - t0
    print(
        f"\nthe cohort's {steps} steps each: one after the other on {cores} threads {serial:.1f} s; "
        f"side by side, a process each on 1 thread, {side_by_side:.1f} s (worker start-up included): "
        f"{side_by_side / serial:.2f}x"
    )


def _compare_passes(families: list[str], steps: int, cores: int) -> None:
    from corl.studies.tiny.pretrain import ROWS_PER_PASS

    print(f"\n| family | one pass per step | passes of {ROWS_PER_PASS} rows | passes / one pass (median of 3 alternations) |")
    print("|---|---|---|---|")
    for name in families:
        pairs = [(_steps(name, steps, 1, passes=False), _steps(name, steps, 1)) for _ in range(3)]
        ratio = statistics.median(b / a for a, b in pairs)
        one, parts = statistics.median(a for a, _ in pairs), statistics.median(b for _, b in pairs)
        print(f"| {name} | {one * 1000:.0f} ms | {parts * 1000:.0f} ms | {ratio:.2f}x |")


def _compare_rounds(families: list[str], steps: int, cores: int) -> None:
    from corl.studies.jobs import Jobs
    from corl.studies.quickstart_cohort import builder_pool

    if len(families) <= cores:
        print(f"\nrounds: {len(families)} families on {cores} cores run in one round either way (give more families)")
        return

    def wall(together: bool) -> tuple[float, int]:
        t0 = time.perf_counter()
        with Jobs(cores) as study, builder_pool(study, len(families)) if together else nullcontext(study) as jobs:
            jobs.map(_job, [(name, steps) for name in families])
        return time.perf_counter() - t0, jobs.workers

    pairs = [(wall(False), wall(True)) for _ in range(2)]
    ratio = statistics.median(b[0] / a[0] for a, b in pairs)
    rounds, together = statistics.median(a[0] for a, _ in pairs), statistics.median(b[0] for _, b in pairs)
    print(
        f"\n{len(families)} families, {steps} steps each, a process each on 1 thread (worker start-up included): "
        f"{cores} workers, in rounds, {rounds:.1f} s; the study's builder pool ({pairs[0][1][1]} workers), together, "
        f"{together:.1f} s: {ratio:.2f}x (median of 2 alternations)"
    )


COMPARISONS = {"threads": _compare_threads, "schedule": _compare_schedule, "passes": _compare_passes, "rounds": _compare_rounds}


if __name__ == "__main__":
    main()
