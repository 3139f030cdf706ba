"""The embedded default over several whole-pipeline seeds: are its claims more than one draw?

    python -m corl.studies.seeds                 # seeds 0 1 2, each a first run
    python -m corl.studies.seeds --seeds 0 1 2 3 --out runs/quickstart-seeds
    python -m corl.studies.seeds --seeds 0 1 2 3 4 5 6 7 --parallel 2 -- --vision

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
    """One seed's `corl quickstart --json` in its own process; a failed seed is a row too, never an abort."""
    env = {**os.environ, "CORL_CACHE": str(out / f"cache-seed{seed}")}
    cmd = [sys.executable, "-m", "corl", "quickstart", "--seed", str(seed), "--out", str(out / f"seed{seed}"), "--json", *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = round(time.perf_counter() - start, 1)
    (out / f"seed{seed}.stderr.log").write_text(proc.stderr)
    if proc.returncode != 0:
        return {"failed": f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or ['no output'])[-1]}",
                "process_seconds": seconds}  # fmt: skip
    results = json.loads(proc.stdout)
    results["process_seconds"] = seconds
    return results


def run_seeds(seeds: list[int], out: Path, extra: list[str], parallel: int) -> dict[int, dict]:
    """Every seed, `parallel` at a time (side by side; each reports its own CPU seconds, so sharing
    the cores changes a seed's wall time, not its work or its numbers)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(seed: int) -> dict:
        print(f"seed {seed}: corl quickstart --seed {seed} {' '.join(extra)} ...", file=sys.stderr, flush=True)
        r = run_seed(seed, out, extra)
        state = f"FAILED ({r['failed']})" if "failed" in r else f"{r['wall_time_s']:.0f} s, {r.get('cpu_seconds')} CPU-s"
        print(f"seed {seed}: {state}", file=sys.stderr, flush=True)
        return r

    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        return dict(zip(seeds, pool.map(one, seeds)))


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


def per_seed(runs: dict[int, dict]) -> list[str]:
    """A row per seed, failures included: every claim's verdict, the cohort's greedy averages, wall and CPU seconds."""
    texts = list(dict.fromkeys(c["claim"] for r in runs.values() if "failed" not in r for c in r["claims"]))
    lines = ["Claims per seed (✓ holds, ✗ fails; claims numbered as in the table below):", ""]
    lines += [
        "| seed | "
        + " | ".join(f"c{i + 1}" for i in range(len(texts)))
        + " | method claims held | Base → TTRL / Co-RL / GT (avg %) | wall s | CPU-s |"
    ]
    lines += ["|---|" + "---|" * (len(texts) + 4)]
    for s in sorted(runs):
        r = runs[s]
        if "failed" in r:
            lines.append(
                f"| {s} | " + " | ".join("-" for _ in texts) + f" | failed: {r['failed']} | - | {r['process_seconds']:.0f} | - |"
            )
            continue
        verdicts = {c["claim"]: c["holds"] for c in r["claims"]}
        method = [c for c in r["claims"] if not c["claim"].startswith("Theorem 1")]
        avg = {m: 100 * statistics.fmean(e["greedy"]["mean"] for e in agents.values()) for m, agents in r["methods"].items()}
        accs = f"{avg.get('base', 0):.1f} → {avg.get('ttrl', 0):.1f} / {avg.get('co-rl', 0):.1f} / {avg.get('gt', 0):.1f}"
        cells = ["-" if t not in verdicts else {True: "✓", False: "✗", None: "○"}[verdicts[t]] for t in texts]
        tested = [c for c in method if c["holds"] is not None]  # None: outside the design (its precondition failed)
        outside = len(method) - len(tested)
        held = f"{sum(c['holds'] for c in tested)}/{len(tested)}" + (f" ({outside} ○)" if outside else "")
        lines.append(f"| {s} | " + " | ".join(cells) + f" | {held} | {accs} | {r['wall_time_s']:.0f} | {r.get('cpu_seconds')} |")
    lines += [""] + [f"- c{i + 1}: {t}" for i, t in enumerate(texts)]
    if any(c["holds"] is None for r in runs.values() if "failed" not in r for c in r["claims"]):
        lines += ["", "○: outside the design on that seed (its precondition failed on validation: corl.studies.claims)"]
    return lines


def summary(all_runs: dict[int, dict]) -> str:
    runs = {s: r for s, r in all_runs.items() if "failed" not in r}
    failed = sorted(set(all_runs) - set(runs))
    lines = per_seed(all_runs) + [""]
    if not runs:
        return "\n".join(lines + ["Every seed failed."])
    seeds = sorted(runs)
    lines += [f"Seeds: {', '.join(map(str, seeds))} (a seed's wall time includes pretraining when its cache was empty)"
              + (f"; failed, left out below: {', '.join(map(str, failed))}." if failed else "."), ""]  # fmt: skip
    lines += ["| claim | margin, points (mean ± std) | held in | within noise |", "|---|---|---|---|"]
    texts = list(dict.fromkeys(c["claim"] for r in runs.values() for c in r["claims"]))
    for text in texts:
        found = [c for s in seeds for c in runs[s]["claims"] if c["claim"] == text]
        margins = [c["margin"] for c in found]
        held = f"{sum(c['holds'] is True for c in found)}/{sum(c['holds'] is not None for c in found)}"
        held += f" ({sum(c['holds'] is None for c in found)} outside)" if any(c["holds"] is None for c in found) else ""
        noisy = sum(c["within_noise"] for c in found)
        lines.append(f"| {text} | {_ms(margins)} | {held} | {noisy}/{len(found)} |")
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
    parser.add_argument("--parallel", type=int, default=1, help="seeds run side by side (default 1)")
    parser.add_argument("quickstart_args", nargs="*", help="passed to corl quickstart after --")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.summarize_only:
        runs = {}
        for seed in args.seeds:
            path = args.out / f"seed{seed}" / "results.json"
            runs[seed] = json.loads(path.read_text()) if path.is_file() else {"failed": f"no {path}", "process_seconds": 0}
    else:
        runs = run_seeds(args.seeds, args.out, args.quickstart_args, args.parallel)
    text = summary(runs)
    (args.out / "summary.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
