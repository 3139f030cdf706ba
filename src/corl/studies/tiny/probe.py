"""Probe a design of the text study's pair of families on the validation split, over many seeds.

    python -m corl.studies.tiny.probe --seeds 11 12 13 14              # the shipped design
    python -m corl.studies.tiny.probe --seeds 11 12 13 14 --slip 0.7   # each slip type at 70%
    python -m corl.studies.tiny.probe --seeds 11 12 13 14 --gt         # and GT-Reward's learning
    python -m corl.studies.tiny.probe --seeds 11 12 13 14 --gt --steps 60 --lr 4.5e-5  # its RL budget

The text study's GT-Reward claim needs headroom: each family is taught one type mostly by the
slipping teacher (llama-char linear equations, qwen2-bpe digit sums), so its greedy answer on
that type should be the slip's. On text seed 7 both slips leaked (60% and 67% right greedily),
the bases averaged 70% and GT-Reward gained 5.5 points where the bar is 8. Per seed and family
this pretrains the seed sibling (as `corl quickstart --seed S` would, with the design's
override) and prints greedy and sampled (T=1, 4 samples) accuracy per type on 200 validation
problems, and whether each slip held (the slipping family right on under half of its type
greedily) while its peer is right on at least half. A leak is not the only way to miss the bar:
on text seed 1 the slip held and GT-Reward learnt the type slowly. `--gt` also trains each
family with GT-Reward as the study does (40 steps, RL seed = the seed) and measures it again on
the same validation problems: the type's accuracy after it and the average gain over types.
The test split is never read; the seeds should be ones the study's reports do not use.
Families are pretrained side by side into OUT/cache (corl.studies.jobs).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import time
from pathlib import Path

from corl.studies.probe_report import measure_on_validation, report

PAIR = ("llama-char", "qwen2-bpe")


def probe(
    name: str,
    seed: int,
    slip: float | None,
    cache: str,
    gt_runs: str | None = None,
    rl: dict | None = None,
    pretrain_steps: int | None = None,
) -> dict:
    """A job: one family's seed sibling pretrained with the design, measured on validation; with
    `gt_runs` (a folder) also trained by GT-Reward as the study trains it (RL seed = the seed) and
    measured again on the same validation problems: how fast the design's weak types are learnt."""
    from corl.studies.quickstart_cohort import family_specs
    from corl.studies.quickstart_options import QuickstartOptions
    from corl.studies.tiny.pretrain import ensure_pretrained

    spec = family_specs(QuickstartOptions(families=(name,), seed=seed))[name]  # as `corl quickstart --seed S`
    if slip is not None:
        spec = dataclasses.replace(spec, slips={t: slip for t in spec.slips})
    if pretrain_steps is not None:
        spec = dataclasses.replace(spec, steps=pretrain_steps)
    start = time.process_time()
    path = ensure_pretrained(spec, cache_dir=cache, progress=False)
    row = measure_on_validation(name, seed, path, time.process_time() - start, vision=False)
    if gt_runs is not None:
        row["gt_greedy_by_type"] = gt_on_validation(name, path, seed, Path(gt_runs) / f"seed{seed}-{name}", rl or {})
    return row


def gt_on_validation(name: str, path: Path, seed: int, run_dir: Path, rl: dict) -> dict[str, float]:
    """Greedy validation accuracy per type after the study's GT-Reward run of this family, with
    the RL options in `rl` (steps, lr) in place of the study's."""
    from corl.config import validate_config
    from corl.studies.quickstart import evaluate_model, run_config, task_split
    from corl.studies.quickstart_methods import METHODS
    from corl.studies.quickstart_options import QuickstartOptions
    from corl.trainer import CohortTrainer

    opts = dataclasses.replace(QuickstartOptions(progress=False), **rl)
    cfg = validate_config(run_config("gt", METHODS["gt"], [(name, path, 0)], opts, seed, run_dir), "text design probe")
    shutil.rmtree(run_dir, ignore_errors=True)  # a rerun of the probe replaces its run
    trainer = CohortTrainer(cfg, run_dir)
    trainer.train()
    (agent,) = trainer.agents.values()
    r = evaluate_model(agent.model, agent.tokenizer, task_split(opts, "validation", opts.regime_size), opts, seed=0)
    return r["greedy_by_type"]


def verdicts(rows: list[dict]) -> list[str]:
    """Per slip type: did the slip hold (its family under half greedily) with the peer at half or more?"""
    from corl.studies.tiny.families import get_family

    by_family = {r["family"]: r for r in rows}
    out = []
    for name in PAIR:
        peer = next(n for n in PAIR if n != name)
        for t in get_family(name).slips:
            g_s, g_p = by_family[name]["greedy_by_type"][t], by_family[peer]["greedy_by_type"][t]
            ok = g_s < 0.5 <= g_p
            after = by_family[name].get("gt_greedy_by_type")
            learnt = ""
            if after is not None:  # the GT-Reward run: its slip type, and its average over types
                before = by_family[name]["greedy_by_type"]
                gain = 100 * (sum(after.values()) - sum(before.values())) / len(before)
                learnt = f", {100 * after[t]:.0f}% after GT-Reward (average {gain:+.1f} points)"
            mark = "ok" if ok else "LEAK" if g_s >= 0.5 else "WEAK"
            out.append(f"{t}: {name} {100 * g_s:.0f}% vs {peer} {100 * g_p:.0f}%{learnt} {mark}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--slip", type=float, help="slip share of each family's slip type (default: the spec's, 0.6)")
    parser.add_argument("--gt", action="store_true", help="also train each family with GT-Reward and measure it again")
    parser.add_argument("--steps", type=int, help="RL steps of the GT-Reward runs (default: the study's, 40)")
    parser.add_argument("--lr", type=float, help="RL learning rate of the GT-Reward runs (default: the study's, 3e-5)")
    parser.add_argument(
        "--pretrain-steps", action="append", default=[], metavar="FAMILY=N", help="a family's pretraining steps (repeatable)"
    )
    parser.add_argument(
        "--family-slip", action="append", default=[], metavar="FAMILY=SHARE", help="one family's slip share (repeatable)"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/text-design-probe"))
    args = parser.parse_args()
    from corl.studies.jobs import Jobs

    args.out.mkdir(parents=True, exist_ok=True)
    rl = {k: v for k, v in (("steps", args.steps), ("lr", args.lr)) if v is not None}
    steps = dict(_per_family(item, "--pretrain-steps", int, parser) for item in args.pretrain_steps)
    family_slips = dict(_per_family(item, "--family-slip", float, parser) for item in args.family_slip)
    slips = {name: args.slip for name in PAIR if args.slip is not None} | family_slips  # one family's wins
    tag_tail = "".join(f"-{k}{v}" for k, v in rl.items()) + "".join(f"-{k}{v}" for k, v in steps.items())
    tag_tail += "".join(f"-{k}-slip{v}" for k, v in family_slips.items())
    tag = f"slip{args.slip or 'spec'}{tag_tail}"
    gt_runs = str(args.out / f"gt-runs{'' if args.slip is None else f'-slip{args.slip}'}{tag_tail}") if args.gt else None
    cache = str(args.out / "cache")
    calls = [(name, s, slips.get(name), cache, gt_runs, rl, steps.get(name)) for s in args.seeds for name in PAIR]
    with Jobs(int(os.environ.get("CORL_JOBS", 0)) or None) as jobs:
        results = jobs.map(probe, calls)
    failing = "a leaked slip or a weak peer"
    design = f"slip {args.slip or 'spec'}" + "".join(f", GT-Reward {k} {v}" for k, v in rl.items())
    design += "".join(f", {k} pretrained {v} steps" for k, v in steps.items())
    design += "".join(f", {k} slipped {v:.0%}" for k, v in family_slips.items())
    report(results, args.seeds, verdicts, design, failing, args.out, tag)


def _per_family(item: str, flag: str, kind: type, parser: argparse.ArgumentParser) -> tuple[str, int | float]:
    name, _, value = item.partition("=")
    try:
        if name not in PAIR:
            raise ValueError(name)
        return name, kind(value)
    except ValueError:
        parser.error(f"{flag} {item!r}: expected FAMILY=VALUE with FAMILY one of {', '.join(PAIR)}")


if __name__ == "__main__":
    main()
