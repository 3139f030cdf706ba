"""Probe a design of the vision study's families on the validation split, over many pretraining seeds.

    python -m corl.studies.tiny_vl.probe --seeds 11 12 13 14 15 16                       # the shipped design
    python -m corl.studies.tiny_vl.probe --seeds 11 12 13 --mixture read=1,plus=2,minus=2 --steps 1000

What makes `corl quickstart --vision` hold on a seed is visible before any RL: each family is
taught one type mostly by the slipping teacher, so its peer must answer that type well (its
majority right) for Co-RL's labels to fix it. Per seed and family this pretrains the seed
sibling (as `corl quickstart --vision --seed S` would, with the design's overrides) and prints
greedy and sampled (T=1, 4 samples) accuracy per type on 200 validation problems, and for each
slip type whether the teacher (the other family) is right greedily on at least half of it and
above the slipping family. The test split is never read. Families are pretrained side by side,
one thread each (corl.studies.jobs), into OUT/cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from pathlib import Path

from corl.studies.probe_report import measure_on_validation, report


def parse_mixture(text: str | None) -> dict[str, float]:
    if not text:
        return {}
    return {k: float(v) for k, v in (part.split("=") for part in text.split(","))}


def probe(name: str, seed: int, mixture: dict, slip: float | None, steps: int, cache: str) -> dict:
    """A job: one family's seed sibling pretrained with the design, measured on validation."""
    from corl.studies.quickstart_cohort import family_specs
    from corl.studies.quickstart_options import QuickstartOptions
    from corl.studies.tiny_vl.pretrain import ensure_pretrained_vl

    spec = family_specs(QuickstartOptions(families=(name,), seed=seed, vision=True))[name]  # as `--vision --seed S`
    changes: dict = {"mixture": mixture} if mixture else {}
    if slip is not None:
        changes["slips"] = {t: slip for t in spec.slips}
    spec = dataclasses.replace(spec, **changes)
    start = time.process_time()
    path = ensure_pretrained_vl(spec, steps=steps, cache_dir=cache)
    return measure_on_validation(name, seed, path, time.process_time() - start, vision=True)


def verdicts(rows: list[dict]) -> list[str]:
    """Per slip type: is the teacher's greedy answer right on >= half of it, and above the slipping family's?"""
    from corl.studies.tiny_vl.families import VL_FAMILIES

    by_family = {r["family"]: r for r in rows}
    out = []
    for name, spec in VL_FAMILIES.items():
        for t in spec.slips:
            teacher = next(n for n in by_family if n != name)
            g_t, g_s = by_family[teacher]["greedy_by_type"][t], by_family[name]["greedy_by_type"][t]
            ok = g_t >= 0.5 and g_t > g_s
            out.append(f"{t}: {teacher} {100 * g_t:.0f}% vs {name} {100 * g_s:.0f}% {'ok' if ok else 'WEAK'}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--mixture", help="type weights after the read-only steps, e.g. read=1,plus=2,minus=2")
    parser.add_argument("--slip", type=float, help="slip share of each family's slip type (default: the spec's)")
    parser.add_argument("--steps", type=int, help="pretraining steps (default: corl.studies.tiny_vl.pretrain.STEPS)")
    parser.add_argument("--out", type=Path, default=Path("runs/vision-design-probe"))
    args = parser.parse_args()
    from corl.studies.jobs import Jobs
    from corl.studies.tiny_vl.families import VL_FAMILIES
    from corl.studies.tiny_vl.pretrain import STEPS

    steps = args.steps or STEPS
    mixture = parse_mixture(args.mixture)
    args.out.mkdir(parents=True, exist_ok=True)
    calls = [(name, s, mixture, args.slip, steps, str(args.out / "cache")) for s in args.seeds for name in VL_FAMILIES]
    with Jobs(int(os.environ.get("CORL_JOBS", 0)) or None) as jobs:
        results = jobs.map(probe, calls)
    design = f"mixture {mixture or 'uniform'}, slip {args.slip or 'spec'}, {steps} steps"
    tag = (args.mixture or "uniform").replace(",", "_").replace("=", "") + f"-slip{args.slip or 'spec'}-{steps}"
    report(results, args.seeds, verdicts, design, "a weak teacher", args.out, tag)


if __name__ == "__main__":
    main()
