"""The real-model study's numbers, claims and report, read back from what its commands wrote
(`corl eval --records`, the runs' metrics.jsonl and selection.json)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from corl.evaluation.evaluate import majority_correct, pooled
from corl.studies.claims import check_claims, describe
from corl.studies.diversity.metrics import cohens_kappa, contingency
from corl.studies.real.weights import AGENTS
from corl.tracking.metrics import read_metrics


def records(path: str | Path, models: dict[str, Path]) -> dict[str, list[dict]]:
    """agent -> its per-problem records in test order (a base model's label is its file's name)."""
    by_label: dict[str, list[dict]] = {}
    for line in Path(path).read_text().splitlines():
        row = json.loads(line)
        by_label.setdefault(row["model"], []).append(row)
    names = {Path(p).name: a for a, p in models.items()}
    return {names.get(label, label): rows for label, rows in by_label.items()}


def vectors_and_pools(results: dict, models: dict[str, Path]) -> tuple[dict, dict, dict]:
    """(method -> agent -> [[greedy 0/1 per problem]], method -> pooled votes, method -> agent -> figures)."""
    vectors, pools, figures = {}, {}, {}
    for method, entry in results["eval"].items():
        if method == "base-val" or entry["command"]["exit_code"] != 0:
            continue
        rows = records(entry["records"], models)
        vectors[method] = {a: [[float(r["greedy"]["correct"]) for r in rows[a]]] for a in AGENTS if a in rows}
        answers = [[[s["answer"] for s in r["samples"]] for r in rows[a]] for a in AGENTS if a in rows]
        gold = [r["gold"] for r in rows[AGENTS[0]]]
        votes = [float(c) for c in majority_correct(pooled(answers), gold)]
        pools[method] = {"correct": [votes], "k": sum(len(r["samples"]) for r in (rows[AGENTS[0]][0], rows[AGENTS[1]][0]))}
        figures[method] = {a: _figures(rows[a]) for a in AGENTS if a in rows}
    return vectors, pools, figures


def _figures(rows: list[dict]) -> dict:
    greedy = [float(r["greedy"]["correct"]) for r in rows]
    avg = [statistics.fmean(float(s["correct"]) for s in r["samples"]) for r in rows]
    return {"greedy": statistics.fmean(greedy), f"avg@{len(rows[0]['samples'])}": statistics.fmean(avg), "n": len(rows)}


def regime(results: dict, models: dict[str, Path], types: dict[str, str]) -> dict | None:
    """Theorem 1's condition on validation, before RL: each base's T=1 accuracy per problem type."""
    entry = results["eval"].get("base-val")
    if entry is None or entry["command"]["exit_code"] != 0:
        return None
    rows = records(entry["records"], models)
    out = {"sampled_by_type": {}, "greedy": {}}
    for agent in AGENTS:
        by_type: dict[str, list[float]] = {}
        for r in rows[agent]:
            by_type.setdefault(types[r["id"]], []).extend(float(s["correct"]) for s in r["samples"])
        out["sampled_by_type"][agent] = {t: statistics.fmean(v) for t, v in sorted(by_type.items())}
        out["greedy"][agent] = statistics.fmean(float(r["greedy"]["correct"]) for r in rows[agent])
    out["pair_sums"] = {
        "+".join(AGENTS): {t: sum(out["sampled_by_type"][a][t] for a in AGENTS) for t in out["sampled_by_type"][AGENTS[0]]}
    }
    return out


def decoupling(results: dict, models: dict[str, Path]) -> list[dict]:
    """Error decoupling of the bases on test: the pair's first samples (cross-family) against two
    samples of one model (seed only), as the paper's Table 6 compares them."""
    entry = results["eval"].get("base")
    if entry is None or entry["command"]["exit_code"] != 0:
        return []
    rows = records(entry["records"], models)
    sample = {a: [[bool(s["correct"]) for s in r["samples"]] for r in rows[a]] for a in AGENTS}
    pairs = [("models", f"{AGENTS[0]} ~ {AGENTS[1]}", [x[0] for x in sample[AGENTS[0]]], [x[0] for x in sample[AGENTS[1]]])]
    pairs += [("seed", f"{a} ~ {a} (another sample)", [x[0] for x in sample[a]], [x[1] for x in sample[a]]) for a in AGENTS]
    return [
        {"kind": kind, "pair": name, "kappa": cohens_kappa(contingency(a, b)), "correct_a": a, "correct_b": b}
        for kind, name, a, b in pairs
    ]


def reward_std(out: Path) -> dict[str, float] | None:
    """Mean normalized reward std over the last quarter of training, TTRL and Co-RL."""
    found = {}
    for method in ("ttrl", "co-rl"):
        rows = read_metrics(out / "runs" / method, "train") if (out / "runs" / method).is_dir() else []
        tail = rows[-max(1, len(rows) // 4) :]
        values = [
            r[f"{a}/reward_std_normalized"] for r in tail for a in AGENTS if r.get(f"{a}/reward_std_normalized") is not None
        ]
        values = [v for v in values if v == v]  # NaN: a step whose first std was 0
        if not values:
            return None
        found[method] = statistics.fmean(values)
    return found


def summarize(out: Path, results: dict, models: dict[str, Path]) -> None:
    types = {}
    for split in ("val", "test"):
        for line in (out / "data" / f"{split}.jsonl").read_text().splitlines():
            row = json.loads(line)
            types[row["id"]] = row["type"]
    vectors, pools, figures = vectors_and_pools(results, models)
    test_ids = [json.loads(line)["id"] for line in (out / "data" / "test.jsonl").read_text().splitlines()]
    pairs = decoupling(results, models)
    found_regime = regime(results, models, types)
    claims = check_claims(vectors, pools, pairs, reward_std(out), found_regime, [types[i] for i in test_ids])
    results["figures"], results["regime"], results["claims"] = figures, found_regime, claims
    results["pools"] = {m: statistics.fmean(p["correct"][0]) for m, p in pools.items()}
    results["decoupling"] = [{k: v for k, v in p.items() if not k.startswith("correct")} for p in pairs]
    results["selection"] = {
        method: json.loads((out / "runs" / method / "selection.json").read_text()).get("chosen")
        for method in results["train"]
        if (out / "runs" / method / "selection.json").is_file()
    }
    from corl.studies.real.report import write_report

    write_report(out, results, [describe(c) for c in claims])
