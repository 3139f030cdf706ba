"""The embedded default over several whole-pipeline seeds: are its claims more than one draw?

    python benchmarks/quickstart_seeds.py                 # seeds 0 1 2, each a first run
    python benchmarks/quickstart_seeds.py --seeds 0 1 2 3 --out runs/quickstart-seeds

Each seed runs `corl quickstart --seed S --json` as a user would, in its own process, with
an empty tiny-model cache (CORL_CACHE under --out): pretraining included, so each seed's
wall time is a first run's. Seed 0 is exactly the embedded default; seed S > 0 pretrains
every family as its seed sibling and trains with RL seed S.

Prints, as markdown: every claim's margin as mean ± std over seeds, how many seeds it held
in and how many of those were within noise (two standard errors of that seed's margin);
every per-problem claim once more over all seeds together, its margin ± two standard errors
paired over the same test problems (corl.studies.claims.paired_se: seeds averaged per problem, so
seeds x problems are not counted as independent draws); each method's greedy test accuracy per agent
(mean ± std); the pooled ensembles; and each seed's wall time. Writes the same to
OUT/summary.md and every seed's results to OUT/seed<S>/results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def run_seed(seed: int, out: Path, extra: list[str]) -> dict:
    env = {**os.environ, "CORL_CACHE": str(out / f"cache-seed{seed}")}
    cmd = [sys.executable, "-m", "corl", "quickstart", "--seed", str(seed), "--out", str(out / f"seed{seed}"), "--json", *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"seed {seed} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    results = json.loads(proc.stdout)
    results["process_seconds"] = round(time.perf_counter() - start, 1)
    return results


def _ms(values: list[float], scale: float = 100.0) -> str:
    mean = statistics.fmean(values) * scale
    std = statistics.pstdev(values) * scale if len(values) > 1 else 0.0
    return f"{mean:.1f} ± {std:.1f}"


def _as_runs(v: list) -> list[list[int]]:
    """A results.json vector as [seeds][problems] (files written before per-seed vectors were flat)."""
    return v if v and isinstance(v[0], list) else [v]


def pooled_claims(runs: dict[int, dict]) -> list[dict]:
    """The per-problem claims over every seed's runs together (every seed tests the same problems)."""
    from corl.studies.claims import check_claims

    vectors: dict[str, dict[str, list]] = {}
    pooled: dict[str, dict] = {}
    for r in runs.values():
        for method, agents in r.get("vectors", {}).items():
            for agent, v in agents.items():
                vectors.setdefault(method, {}).setdefault(agent, []).extend(_as_runs(v))
        for method, e in r.get("ensembles", {}).items():
            pooled.setdefault(method, {"k": e["k"], "correct": []})["correct"].extend(_as_runs(e["correct"]))
    return check_claims(vectors, pooled, [], None)


def summary(runs: dict[int, dict]) -> str:
    seeds = sorted(runs)
    lines = [f"Seeds: {', '.join(map(str, seeds))} (a seed's wall time includes pretraining when its cache was empty).", ""]
    lines += ["| claim | margin, points (mean ± std) | held in | within noise |", "|---|---|---|---|"]
    texts = list(dict.fromkeys(c["claim"] for r in runs.values() for c in r["claims"]))
    for text in texts:
        found = [c for s in seeds for c in runs[s]["claims"] if c["claim"] == text]
        margins = [c["margin"] for c in found]
        held = sum(c["holds"] for c in found)
        noisy = sum(c["within_noise"] for c in found)
        lines.append(f"| {text} | {_ms(margins)} | {held}/{len(found)} | {noisy}/{len(found)} |")
    together = pooled_claims(runs)
    if together:
        lines += ["", "Over all seeds together (margin ± two standard errors paired per problem, points):", ""]
        lines += ["| claim | margin | holds | within noise |", "|---|---|---|---|"]
        for c in together:
            noise = f"{100 * c['margin']:+.1f} ± {100 * c['noise']:.1f}"
            lines.append(f"| {c['claim']} | {noise} | {'yes' if c['holds'] else 'no'} | {'yes' if c['within_noise'] else 'no'} |")
    lines += ["", "Greedy test accuracy (%), mean ± std over seeds:", ""]
    first = runs[seeds[0]]
    agents = list(first["families"])
    lines += ["| method | " + " | ".join(agents) + " | average |", "|---|" + "---|" * (len(agents) + 1)]
    for method in first["methods"]:
        cells, avgs = [], []
        for a in agents:
            vals = [runs[s]["methods"][method][a]["greedy"]["mean"] for s in seeds if a in runs[s]["methods"].get(method, {})]
            cells.append(_ms(vals) if vals else "-")
        for s in seeds:
            entry = runs[s]["methods"].get(method, {})
            if entry:
                avgs.append(statistics.fmean(e["greedy"]["mean"] for e in entry.values()))
        lines.append(f"| {method} | " + " | ".join(cells) + f" | {_ms(avgs)} |")
    if first.get("ensembles"):
        lines += ["", "Pooled ensembles (maj@k over the cohort's T=1 samples, %):", "", "| method | maj@k |", "|---|---|"]
        for method in first["ensembles"]:
            vals = [runs[s]["ensembles"][method]["maj"]["mean"] for s in seeds if method in runs[s].get("ensembles", {})]
            lines.append(f"| {method} | {_ms(vals)} |")
    lines += selection_over_seeds(runs)
    walls = [runs[s]["wall_time_s"] for s in seeds]
    lines += ["", "Wall time per seed (s): " + ", ".join(f"{w:.0f}" for w in walls) + f"; max {max(walls):.0f}"]
    cpus = [runs[s].get("cpu_seconds") for s in seeds]
    if all(c is not None for c in cpus):  # the work, whatever the machine's speed (results before 2026-12-03 lack it)
        lines += ["CPU time per seed (s): " + ", ".join(f"{c:.0f}" for c in cpus)]
    return "\n".join(lines)


def selection_over_seeds(runs: dict[int, dict]) -> list[str]:
    """Per label-free method and agent: the test accuracy of the last checkpoint, of the one chosen
    without labels and of the one the validation answers would choose (mean ± std over seeds), and
    the label-free choice's shortfall against the truth choice (points, mean over agents and seeds)."""
    seeds = sorted(runs)
    rows: dict[tuple[str, str], dict[str, list[float]]] = {}
    for s in seeds:
        for method, agents in runs[s]["methods"].items():
            for agent, e in agents.items():
                for rule, entry in (e.get("selection") or {}).items():
                    if entry["mean"] is not None:  # None: label_free chose no point (every point collapsed)
                        rows.setdefault((method, agent), {}).setdefault(rule, []).append(entry["mean"])
    if not rows:
        return []
    lines = ["", "Checkpoint selection (greedy test accuracy %, mean ± std over seeds; truth reads the validation answers):", ""]
    lines += [
        "| method | agent | last | label-free selected | truth selected | label-free - truth |",
        "|---|---|---|---|---|---|",
    ]
    gaps: dict[str, list[float]] = {}
    for (method, agent), by_rule in rows.items():
        cells = [_ms(by_rule[r]) if r in by_rule else "-" for r in ("last", "label_free", "truth")]
        gap = "-"
        if len(by_rule.get("label_free", [])) == len(by_rule.get("truth", [])) > 0:
            diffs = [a - b for a, b in zip(by_rule["label_free"], by_rule["truth"], strict=True)]
            gaps.setdefault(method, []).extend(diffs)
            gap = _ms(diffs)
        lines.append(f"| {method} | {agent} | " + " | ".join(cells) + f" | {gap} |")
    lines += [""] + [f"- {m}: label-free minus truth-selected, {_ms(d)} points over agents x seeds" for m, d in gaps.items()]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=Path("runs/quickstart-seeds"))
    parser.add_argument(
        "--summarize-only", action="store_true", help="only re-read OUT/seed<S>/results.json and print the summary"
    )
    parser.add_argument("quickstart_args", nargs="*", help="passed to corl quickstart after --")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs = {}
    for seed in args.seeds:
        if args.summarize_only:
            runs[seed] = json.loads((args.out / f"seed{seed}" / "results.json").read_text())
            continue
        print(f"seed {seed}: corl quickstart --seed {seed} ...", file=sys.stderr, flush=True)
        runs[seed] = run_seed(seed, args.out, args.quickstart_args)
        print(f"seed {seed}: {runs[seed]['wall_time_s']:.0f} s", file=sys.stderr, flush=True)
    text = summary(runs)
    (args.out / "summary.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
