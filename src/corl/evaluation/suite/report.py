"""From finished cells to figures: every value with its 95% interval, the pooled-vote row,
a Table-1-shaped markdown table and a JSON with all of it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from corl.evaluation.suite import graders, stats
from corl.evaluation.suite.protocol import Benchmark
from corl.evaluation.suite.runner import cell_paths


def _figures(bench: Benchmark, cell: dict, resamples: int, seed: int) -> tuple[dict, np.ndarray]:
    """The headline figure (avg@k / pass@1) and, where defined, maj@k and pass@k."""
    head, reps = stats.summarize(cell["scores"], bench.name, resamples, seed)
    entry = {"status": "ok", "metric": bench.metric, **head, "n": len(cell["ids"]), "seeds": list(bench.seeds)}
    entry["k"] = bench.samples
    if bench.samples > 1 and cell.get("pass") is not None:
        entry[f"pass@{bench.samples}"] = stats.summarize(cell["pass"], bench.name, resamples, seed)[0]
    if cell.get("maj") is not None:
        entry[f"maj@{bench.samples}"] = stats.summarize(cell["maj"], bench.name, resamples, seed)[0]
    entry["mean_length"] = cell.get("mean_length")
    return entry, reps


def _records(out: Path, checkpoint: str, bench: str) -> list[dict]:
    _, path = cell_paths(out, checkpoint, bench)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def pooled_vote(bench: Benchmark, out: Path, checkpoints: Sequence[str], resamples: int, seed: int) -> dict:
    """maj@(k x M): one vote per problem and seed over the k samples of each of the M checkpoints."""
    by_key: dict[tuple[int, str], list[dict]] = {}
    for ckpt in checkpoints:
        for rec in _records(out, ckpt, bench.name):
            by_key.setdefault((rec["seed"], rec["id"]), []).append(rec)
    table = []
    for s in bench.seeds:
        row = []
        for (seed_, _pid), recs in by_key.items():
            if seed_ != s:
                continue
            if len(recs) != len(checkpoints):
                raise ValueError(f"{bench.name}: problem {_pid!r} seed {s} is missing from some checkpoints' records")
            answers = [a for r in recs for a in r["answers"]]
            keys = [k for r in recs for k in r["keys"]]
            row.append(float(graders.vote_correct(bench, answers, keys, recs[0]["gold"])))
        table.append(row)
    k = bench.samples * len(checkpoints)
    return {"status": "ok", "metric": f"maj@{k}", **stats.summarize(table, bench.name, resamples, seed)[0]}


def build(
    suite: str,
    benches: Sequence[Benchmark],
    checkpoints: Sequence[str],
    cells: dict[tuple[str, str], dict | str],
    out: Path,
    resamples: int,
    bootstrap_seed: int,
    engine: str,
) -> dict:
    """cells[(checkpoint, benchmark)] is a finished cell, or the reason it did not run."""
    results: dict = {
        "suite": suite,
        "benchmarks": [b.name for b in benches],
        "checkpoints": list(checkpoints),
        "engine": engine,
        "bootstrap": {"resamples": resamples, "seed": bootstrap_seed, "level": stats.LEVEL, "method": stats.__doc__},
        "protocols": {b.name: b.as_dict() for b in benches},
        "models": {},
        "pooled": {},
    }
    for ckpt in checkpoints:
        row, values, reps = {}, [], []
        for b in benches:
            cell = cells[(ckpt, b.name)]
            if isinstance(cell, str):
                row[b.name] = {"status": "not run", "reason": cell}
                continue
            row[b.name], r = _figures(b, cell, resamples, bootstrap_seed)
            values.append(row[b.name]["value"])
            reps.append(r)
        if values:
            row["average"] = {**stats.average(values, reps), "over": len(values), "of": len(benches)}
        results["models"][ckpt] = row
    if len(checkpoints) > 1:
        for b in benches:
            if b.grader not in ("math", "mcq"):
                results["pooled"][b.name] = {"status": "n/a", "reason": "no vote for code without behaviour probes"}
            elif any(isinstance(cells[(c, b.name)], str) for c in checkpoints):
                results["pooled"][b.name] = {"status": "not run", "reason": "a checkpoint's cell did not run"}
            else:
                results["pooled"][b.name] = pooled_vote(b, out, checkpoints, resamples, bootstrap_seed)
    return results


def _pct(entry: dict) -> str:
    ci = entry.get("ci95")
    text = f"{100 * entry['value']:.1f}"
    return f"{text} [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else text


def markdown(results: dict) -> str:
    """Benchmarks as columns, checkpoints as rows, then the average and the pooled-vote row."""
    protos = results["protocols"]
    names = results["benchmarks"]
    head = ["Model", *(protos[n]["title"] for n in names), "Average"]
    lines = ["| " + " | ".join(head) + " |", "| --- |" + " ---: |" * (len(head) - 1)]
    notes: list[str] = []

    def cell(entry: dict) -> str:
        if entry["status"] == "ok":
            return _pct(entry)
        if entry["status"] == "n/a":
            return "n/a"
        if entry["reason"] not in notes:
            notes.append(entry["reason"])
        return f"not run ({notes.index(entry['reason']) + 1})"

    for ckpt, row in results["models"].items():
        avg = row.get("average")
        avg_text = "—" if avg is None else _pct(avg) + ("" if avg["over"] == avg["of"] else f" ({avg['over']} of {avg['of']})")
        lines.append("| " + " | ".join([f"`{ckpt}`", *(cell(row[n]) for n in names), avg_text]) + " |")
    if results["pooled"]:
        label = f"pooled maj@(k x {len(results['checkpoints'])})"
        lines.append("| " + " | ".join([label, *(cell(results["pooled"][n]) for n in names), "—"]) + " |")
    b = results["bootstrap"]

    def seeds(n: int) -> str:
        return f"{n} seed" + ("s" if n != 1 else "")

    metric = "; ".join(f"{protos[n]['title']} {protos[n]['metric']} x {seeds(len(protos[n]['seeds']))}" for n in names)
    lines += [
        "",
        f"- Percent. Metric: {metric}. Pooled: maj@(k x checkpoints), one vote over every checkpoint's samples.",
        f"- [lo, hi]: 95% percentile bootstrap over problems and seeds, {b['resamples']} resamples, bootstrap seed {b['seed']}.",
    ]
    lines += [f"- ({i}) {reason}" for i, reason in enumerate(notes, 1)]
    return "\n".join(lines) + "\n"
