"""What the design probes of the studies' families share (corl.studies.tiny.probe,
corl.studies.tiny_vl.probe): measuring one pretrained family on the validation split,
and the per-seed report. Each probe owns what differs: its families, its overrides, its verdicts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path


def measure_on_validation(family: str, seed: int, path: Path, pretrain_cpu_s: float, vision: bool) -> dict:
    """Greedy and sampled (T=1, 4 samples) accuracy per type of a pretrained family on the
    study's validation problems (the regime's 200; the test split is never read)."""
    from corl.models import load_agent_policy
    from corl.studies.quickstart import evaluate_model, task_split
    from corl.studies.quickstart_options import QuickstartOptions

    opts = QuickstartOptions(vision=vision)
    model, tok, processor = load_agent_policy(str(path))
    r = evaluate_model(model, tok, task_split(opts, "validation", opts.regime_size), opts, seed=0, processor=processor)
    return {
        "family": family,
        "seed": seed,
        "greedy_by_type": r["greedy_by_type"],
        "sampled_by_type": r["sampled_by_type"],
        "pretrain_cpu_s": round(pretrain_cpu_s, 1),
    }


def report(
    results: list[dict],
    seeds: list[int],
    verdicts: Callable[[list[dict]], list[str]],
    design: str,
    failing: str,
    out: Path,
    tag: str,
) -> None:
    """One line per seed (every family's accuracies per type, then the verdicts), and how many seeds
    had a verdict other than ok; printed and written to OUT/<tag>.md with the rows in OUT/<tag>.json."""
    lines = [f"Design: {design}", ""]
    failed = 0
    for s in seeds:
        rows = [r for r in results if r["seed"] == s]
        cells = []
        for r in rows:
            g, p = r["greedy_by_type"], r["sampled_by_type"]
            per_type = " ".join(f"{t} {100 * g[t]:.0f}/{100 * p[t]:.0f}" for t in sorted(g))
            cells.append(
                f"{r['family']}: {per_type} (greedy avg {100 * sum(g.values()) / len(g):.0f}; {r['pretrain_cpu_s']:.0f} CPU-s)"
            )
        v = verdicts(rows)
        failed += any(not x.endswith(" ok") for x in v)
        lines.append(f"seed {s}: " + "; ".join(cells) + " | " + "; ".join(v))
    lines += ["", f"(greedy/sampled % per type, validation) seeds with {failing}: {failed}/{len(seeds)}"]
    text = "\n".join(lines)
    print(text)
    (out / f"{tag}.json").write_text(json.dumps(results, indent=1))
    (out / f"{tag}.md").write_text(text + "\n")
