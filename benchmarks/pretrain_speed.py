"""What makes the tiny families' pretraining cheaper, each measured against a baseline of the same run.

    python benchmarks/pretrain_speed.py                    # llama-char and qwen2-bpe, 40 steps each
    python benchmarks/pretrain_speed.py --steps 60 --families llama-char gpt2-char

Three comparisons, per family, on the real pretraining step (corl.studies.tiny.pretrain):
1. batches by length (training_batches, BUCKET_BATCHES) vs batches drawn one by one: seconds
   per step and padded tokens per step (the same rows, only grouped otherwise);
2. one thread vs all cores' threads for one process (torch's intra-op parallelism);
3. the study's schedule (corl.studies.jobs): every family at once, a process each on one thread,
   vs one after the other on all threads: the wall time of pretraining the cohort.
Prints ratios; the absolute seconds depend on the machine and its load (printed too).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from itertools import islice

import torch


def _steps(name: str, steps: int, bucketed: bool, threads: int) -> tuple[float, float]:
    """(median seconds per step, mean padded tokens per step) of `steps` pretraining steps."""
    import corl.studies.tiny.pretrain as pretrain
    from corl.studies.tiny.families import build_random_model, get_family

    torch.set_num_threads(threads)
    spec = get_family(name)
    tok = pretrain.build_tokenizer(spec)
    model = build_random_model(spec.arch, tok, hidden=spec.hidden, layers=spec.layers, heads=spec.heads, ffn=spec.ffn)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr)
    saved = pretrain.BUCKET_BATCHES
    pretrain.BUCKET_BATCHES = saved if bucketed else 1  # one batch per draw: batches as drawn
    try:
        batches = list(islice(pretrain.training_batches(spec, tok), steps))
    finally:
        pretrain.BUCKET_BATCHES = saved
    times = []
    for batch in batches:
        t0 = time.perf_counter()
        loss = model(**batch).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[3:]), statistics.fmean(b["input_ids"].numel() for b in batches)


def _job(name: str, steps: int) -> float:
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    _steps(name, steps, True, 1)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--families", nargs="+", default=["llama-char", "qwen2-bpe"])
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    print(f"cores {cores}; load average {os.getloadavg()[0]:.2f}; {args.steps} steps per measurement\n")
    print("| family | step, as drawn | step, by length | ratio | padded tokens, as drawn | by length | ratio |")
    print("|---|---|---|---|---|---|---|")
    for name in args.families:
        drawn, tokens_drawn = _steps(name, args.steps, False, cores)
        bucketed, tokens_bucketed = _steps(name, args.steps, True, cores)
        print(
            f"| {name} | {drawn * 1000:.0f} ms | {bucketed * 1000:.0f} ms | {bucketed / drawn:.2f}x "
            f"| {tokens_drawn:.0f} | {tokens_bucketed:.0f} | {tokens_bucketed / tokens_drawn:.2f}x |"
        )
    print(f"\n| family | step on {cores} threads | on 1 thread | 1 thread / {cores} threads |")
    print("|---|---|---|---|")
    for name in args.families:
        many, _ = _steps(name, args.steps, True, cores)
        one, _ = _steps(name, args.steps, True, 1)
        print(f"| {name} | {many * 1000:.0f} ms | {one * 1000:.0f} ms | {one / many:.2f}x |")

    from corl.studies.jobs import Jobs

    t0 = time.perf_counter()
    for name in args.families:
        _steps(name, args.steps, True, cores)
    serial = time.perf_counter() - t0
    t0 = time.perf_counter()
    with Jobs(min(cores, len(args.families))) as jobs:
        jobs.map(_job, [(name, args.steps) for name in args.families])
    side_by_side = time.perf_counter() - t0
    print(
        f"\nthe cohort's {args.steps} steps each: one after the other on {cores} threads {serial:.1f} s; "
        f"side by side, a process each on 1 thread, {side_by_side:.1f} s (worker start-up included): "
        f"{side_by_side / serial:.2f}x"
    )


if __name__ == "__main__":
    main()
