"""Probe a design of the text study's pair of families on the validation split, over many seeds.

    python benchmarks/text_design_probe.py --seeds 11 12 13 14              # the shipped design
    python benchmarks/text_design_probe.py --seeds 11 12 13 14 --slip 0.7   # each slip type at 70%

The text study's GT-Reward claim needs headroom: each family is taught one type mostly by the
slipping teacher (llama-char linear equations, qwen2-bpe digit sums), so its greedy answer on
that type should be the slip's. On text seed 7 both slips leaked (60% and 67% right greedily),
the bases averaged 70% and GT-Reward gained 5.5 points where the bar is 8. Per seed and family
this pretrains the seed sibling (as `corl quickstart --seed S` would, with the design's
override) and prints greedy and sampled (T=1, 4 samples) accuracy per type on 200 validation
problems, and whether each slip held (the slipping family right on under half of its type
greedily) while its peer is right on at least half. The test split is never read; the seeds
should be ones the study's reports do not use. Families are pretrained side by side into
OUT/cache (corl.studies.jobs).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from pathlib import Path

from design_probe_common import measure_on_validation, report

PAIR = ("llama-char", "qwen2-bpe")


def probe(name: str, seed: int, slip: float | None, cache: str) -> dict:
    """A job: one family's seed sibling pretrained with the design, measured on validation."""
    from corl.studies.tiny.families import get_family, sibling
    from corl.studies.tiny.pretrain import ensure_pretrained

    spec = get_family(name)
    if slip is not None:
        spec = dataclasses.replace(spec, slips={t: slip for t in spec.slips})
    if seed:
        spec = sibling(spec, spec.seed + 100 * seed)
    start = time.process_time()
    path = ensure_pretrained(spec, cache_dir=cache, progress=False)
    return measure_on_validation(name, seed, path, time.process_time() - start, vision=False)


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
            out.append(
                f"{t}: {name} {100 * g_s:.0f}% vs {peer} {100 * g_p:.0f}% {'ok' if ok else 'LEAK' if g_s >= 0.5 else 'WEAK'}"
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--slip", type=float, help="slip share of each family's slip type (default: the spec's, 0.6)")
    parser.add_argument("--out", type=Path, default=Path("runs/text-design-probe"))
    args = parser.parse_args()
    from corl.studies.jobs import Jobs

    args.out.mkdir(parents=True, exist_ok=True)
    calls = [(name, s, args.slip, str(args.out / "cache")) for s in args.seeds for name in PAIR]
    with Jobs(int(os.environ.get("CORL_JOBS", 0)) or None) as jobs:
        results = jobs.map(probe, calls)
    failing = "a leaked slip or a weak peer"
    report(results, args.seeds, verdicts, f"slip {args.slip or 'spec'}", failing, args.out, f"slip{args.slip or 'spec'}")


if __name__ == "__main__":
    main()
