"""What does Co-RL's coupling cost? A two-agent cohort step vs two independent single-agent steps.

Usage:
    python benchmarks/cohort_overhead.py                  # 2 warm-up + 20 measured pairs
    python benchmarks/cohort_overhead.py --pairs 8 --labels peer

Two tiny models (Llama- and Qwen2-style, hidden 128, 4 layers, per-character tokenizer,
taught the synthetic task's worked solutions for a few seconds), 16 prompts x K = 8,
<= 56 new tokens, beta 0. Three trainers in one process, built from the same two model
folders: the cohort (both agents, one `CohortTrainer`) and one single-agent
`CohortTrainer` per model. A pair is one cohort step and one step of each single-agent
trainer, alternating which goes first; printed: cohort / (single 0 + single 1) per pair
and the median.

Equal work: the single-agent trainer of model n draws agent n's sampling seed of the
cohort (`cohort.sampling_seed(seed, step, n)`), and all three draw the same prompts, so
the samples are the same; with `--labels truth` (the default) the labels are the gold
answers on both sides, so the rewards, the active sequences and the updates are the same
too: whatever differs in time is the cohort's own machinery (answers table, exchange,
label source, diagnostics). The script checks that the updates matched (losses equal).
With `--labels peer` the cohort uses Co-RL's peer labels and the single-agent trainers
TTRL's own-majority labels: the real pair of methods, but the rewards then differ and so
does the number of sequences each update trains on (printed). Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from vs_trl import MAX_NEW, PROMPTS, K, build_model, corl_config


def trainer_for(models: list[Path], data: Path, labels: str, out: Path):
    from corl.config import validate_config
    from corl.trainer import CohortTrainer

    raw = corl_config(out, models, data, labels)
    return CohortTrainer(validate_config(raw), out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=20)  # per-pair ratios swing ±20% on a shared 2-core machine
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--labels", choices=("truth", "peer"), default="truth")
    ap.add_argument("--pretrain-steps", type=int, default=300)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/corl-cohort-overhead"))
    args = ap.parse_args()

    import torch

    from corl.studies.tiny.task import make_split, write_jsonl
    from corl.trainer import sampling_seed

    torch.set_flush_denormal(True)
    args.workdir.mkdir(parents=True, exist_ok=True)
    models = [args.workdir / "llama", args.workdir / "qwen2"]
    for i, (folder, arch) in enumerate(zip(models, ("llama", "qwen2"), strict=True)):
        if not (folder / "config.json").exists():
            build_model(folder, args.pretrain_steps, arch, seed=i)
    data = write_jsonl(make_split("train", 2000, seed=0), args.workdir / "train.jsonl")

    cohort = trainer_for(models, data, "truth" if args.labels == "truth" else "peer", args.workdir / "cohort")
    single_labels = "truth" if args.labels == "truth" else "self"
    singles = [trainer_for([m], data, single_labels, args.workdir / f"single{i}") for i, m in enumerate(models)]
    for n, single in enumerate(singles):
        # agent n of the cohort and this trainer's only agent draw the same samples
        single._seed = lambda step, _agent, n=n: sampling_seed(0, step, n, 0)

    def run_cohort(step: int) -> tuple[float, list[float], list[float], list[float]]:
        t0 = time.perf_counter()
        m = cohort.step(step)
        return (
            time.perf_counter() - t0,
            [m.get(f"m{n}/loss") for n in range(2)],
            [m.get(f"m{n}/active_sequences") for n in range(2)],
            [m["time/sample_s"], m["time/update_s"]],
        )

    def run_singles(step: int) -> tuple[float, list[float], list[float], list[float]]:
        seconds, losses, active, phases = 0.0, [], [], [0.0, 0.0]
        for single in singles:
            t0 = time.perf_counter()
            m = single.step(step)
            seconds += time.perf_counter() - t0
            name = single.cfg.agents[0].name
            losses.append(m.get(f"{name}/loss"))
            active.append(m.get(f"{name}/active_sequences"))
            phases = [phases[0] + m["time/sample_s"], phases[1] + m["time/update_s"]]
        return seconds, losses, active, phases

    step = 0
    for _ in range(args.warmup):
        run_cohort(step), run_singles(step)
        step += 1
    print(f"load average {os.getloadavg()[0]:.1f}; labels {args.labels}; {PROMPTS} prompts x K={K}, <= {MAX_NEW} tokens")
    print(
        f"{'pair':>4} {'first':>7} {'cohort s':>9} {'singles s':>10} {'ratio':>6}  {'sample':>6} {'update':>6} "
        f"{'rest s':>13}  active (cohort | singles)  same update"
    )
    ratios, same = [], True
    phase_ratios: list[tuple[float, float]] = []
    for i in range(args.pairs):
        if i % 2 == 0:
            c, s = run_cohort(step), run_singles(step)
        else:
            s, c = run_singles(step), run_cohort(step)
        equal = c[1] == s[1]
        same &= equal
        ratios.append(c[0] / s[0])
        phase_ratios.append((c[3][0] / s[3][0], c[3][1] / s[3][1]))
        # rest: everything of a step outside sampling and the update (answers, exchange, labels,
        # rewards, diagnostics), cohort | singles
        rest = f"{c[0] - sum(c[3]):.3f} | {s[0] - sum(s[3]):.3f}"
        print(
            f"{i:>4} {'cohort' if i % 2 == 0 else 'singles':>7} {c[0]:9.2f} {s[0]:10.2f} {ratios[-1]:6.3f}  "
            f"{phase_ratios[-1][0]:6.3f} {phase_ratios[-1][1]:6.3f} {rest:>13}  {c[2]} | {s[2]}  {equal}"
        )
        step += 1
    print(f"median cohort / (two single-agent steps): {statistics.median(ratios):.3f}x over {len(ratios)} pairs")
    print(
        f"  sampling {statistics.median(r[0] for r in phase_ratios):.3f}x, "
        f"update {statistics.median(r[1] for r in phase_ratios):.3f}x (medians of the per-pair phase ratios)"
    )
    # whichever side runs first in a pair tends to be slower (caches, allocator): a cohort-first
    # and a singles-first pair together cancel that bias
    balanced = [(ratios[i] * ratios[i + 1]) ** 0.5 for i in range(0, len(ratios) - 1, 2)]
    if balanced:
        print(f"  order-balanced (geometric mean of consecutive pairs): {statistics.median(balanced):.3f}x")
    if args.labels == "truth":
        print(f"every pair's updates identical (losses equal): {same}")


if __name__ == "__main__":
    main()
