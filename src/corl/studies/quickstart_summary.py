"""The quickstart's results: every method's accuracy over seeds, the per-problem vectors, the
pooled ensembles, the reward-std trend, and the claims checked on them (`corl.studies.claims`)."""

from __future__ import annotations

import dataclasses
import math
import statistics
from pathlib import Path

from corl.studies.quickstart_selection import summarize_selection


def _mean_std(values: list[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "std": statistics.pstdev(values) if len(values) > 1 else 0.0}


def summarize(
    opts,
    cohort,
    pairs,
    per_seed,
    skipped,
    t_cohort,
    elapsed,
    gold: list[str] | None = None,
    regime: dict | None = None,
    types: list[str] | None = None,
) -> dict:
    """Per-method, per-agent test accuracies (mean +- std over seeds), the pooled ensembles and the paper's claims.

    `gold` and `types` are the test problems' answers and types (the ensembles and Theorem 1's split)."""
    methods: dict[str, dict] = {}
    for method in per_seed[0]:
        agents = per_seed[0][method]
        methods[method] = {}
        for agent in agents:
            runs = [s[method][agent] for s in per_seed if method in s]
            kinds = sorted(runs[0]["greedy_by_type"])
            methods[method][agent] = {
                "greedy": _mean_std([r["greedy"] for r in runs]),
                "avg@4": _mean_std([r["avg@4"] for r in runs]),
                "greedy_by_type": {t: _mean_std([r["greedy_by_type"][t] for r in runs]) for t in kinds},
                "mean_length": _mean_std([r["mean_length"] for r in runs]),
                "run_dirs": [r.get("run_dir") for r in runs if r.get("run_dir")],
                "train_seconds": round(statistics.fmean(r.get("train_seconds", 0.0) for r in runs), 1),
            }
            selection = summarize_selection(runs)
            if selection:
                methods[method][agent]["selection"] = selection
    results = {
        "families": {name: str(path) for name, path in cohort.items()},
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(opts).items()},
        "diversity": pairs,
        "methods": methods,
        "vectors": per_problem(per_seed),
        "ensembles": pooled_ensembles(per_seed, gold) if gold is not None else {},
        "regime": regime,
        "skipped": skipped,
        "cohort_seconds": round(t_cohort, 1),
    }
    from corl.studies.claims import check_claims

    sampled = base_sampled(per_seed, gold) if gold is not None else None
    results["claims"] = check_claims(
        results["vectors"], results["ensembles"], pairs, reward_std_trend(results), regime, types, sampled
    )
    return results


def base_sampled(per_seed: list[dict], gold: list[str]) -> dict | None:
    """{"k", "accuracy": agent -> [problems] share of the base's T=1 test samples correct} (Theorem 1 per problem)."""
    from corl.evaluation.evaluate import grade

    base = per_seed[0].get("base", {})
    sets = {agent: e["samples"] for agent, e in base.items() if "samples" in e}
    if not sets:
        return None
    k = min(len(group) for samples in sets.values() for group in samples)
    return {"k": k, "accuracy": {a: [sum(c) / len(c) for c in grade(s, gold)] for a, s in sets.items()}}


def per_problem(per_seed: list[dict]) -> dict[str, dict[str, list[list[int]]]]:
    """method -> agent -> [seeds][problems] greedy correctness (kept per seed: the claims' noise
    is clustered by problem, corl.studies.claims.paired_se)."""
    out: dict[str, dict[str, list[list[int]]]] = {}
    for seed in per_seed:
        for method, agents in seed.items():
            for agent, e in agents.items():
                if "greedy_correct" in e:
                    out.setdefault(method, {}).setdefault(agent, []).append(e["greedy_correct"])
    return out


def pooled_ensembles(per_seed: list[dict], gold: list[str]) -> dict[str, dict]:
    """The paper's Table 10: every method's agents vote together (pooled maj@k over all their
    T=1 samples: the same number of samples for every method, so budget-matched)."""
    from corl.evaluation.evaluate import majority_correct, pooled

    out: dict[str, dict] = {}
    for method in per_seed[0]:
        correct, accs, k = [], [], 0
        for seed in per_seed:
            agents = seed.get(method, {})
            sets = [e["samples"] for e in agents.values() if "samples" in e]
            if len(sets) < 2:
                break
            votes = pooled(sets)
            k = len(votes[0])
            hits = [int(c) for c in majority_correct(votes, gold)]
            correct.append(hits)
            accs.append(sum(hits) / len(hits))
        else:
            out[method] = {"maj": _mean_std(accs), "k": k, "correct": correct}
    return out


def reward_std_trend(results: dict) -> dict[str, float] | None:
    """Mean normalized reward std over the last quarter of training, per method (seed 0)."""
    from corl.tracking.metrics import read_metrics

    out = {}
    for method in ("ttrl", "co-rl"):
        entry = results["methods"].get(method)
        if not entry:
            return None
        values = []
        for agent, e in entry.items():
            run = e["run_dirs"][0]
            records = read_metrics(run, "train")
            tail = records[-max(1, len(records) // 4) :]
            values += [r[f"{agent}/reward_std_normalized"] for r in tail if r.get(f"{agent}/reward_std_normalized") is not None]
        finite = [v for v in values if not math.isnan(v)]
        if not finite:
            return None
        out[method] = statistics.fmean(finite)
    return out
