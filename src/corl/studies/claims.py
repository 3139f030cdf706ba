"""The paper's expectations, checked on the embedded default's measurements, each with the
margin it held (or failed) by and the noise of that margin.

A claim is a dict: {"claim", "holds", "margin", "noise", "within_noise", "numbers"}.
`margin` is the measured quantity minus the claim's threshold (positive = holds); `noise`
is two standard errors of that margin over the test problems (None where there is no
per-problem measurement to estimate it from); `within_noise` is |margin| < noise: the
verdict could flip on another draw of the test set or another seed.

Per-problem runs (0/1 correctness on the same test problems, one list per RL seed) give
paired standard errors clustered by problem (`paired_se`). Kappa's noise is a bootstrap
over problems (fixed resampling seed, so a report is reproducible).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence

GT_GAIN = 0.08  # the bar for "RL moves the bases": GT-Reward gains >= 8 points per agent


Runs = Sequence[Sequence[float]]  # [seeds][problems]: one per-problem score list per seed


def per_problem_differences(x: Runs, y: Runs) -> list[float]:
    """[N] mean over seeds of x - y on each problem: the unit the test set draws is a problem."""
    if len(x) != len(y) or not x:
        raise ValueError(f"paired runs need the same, non-zero number of seeds ({len(x)} vs {len(y)})")
    n = len(x[0])
    if not n or any(len(r) != n for r in [*x, *y]):
        raise ValueError(f"paired runs need the same, non-zero number of problems ({[len(r) for r in [*x, *y]]})")
    return [sum(a[i] - b[i] for a, b in zip(x, y)) / len(x) for i in range(n)]


def paired_se(x: Runs, y: Runs) -> float:
    """Standard error of mean(x) - mean(y), paired over the same problems and clustered by problem.

    Seeds rerun the same problems, so their scores on one problem are not independent draws:
    the differences are averaged over seeds per problem first, and the standard error is that
    of the mean of those N per-problem differences, s_d / sqrt(N) with the sample sd (N - 1).
    This is the paired, question-clustered estimator of Miller, "Adding Error Bars to Evals"
    (arXiv:2411.00640; its sections on clustered standard errors, on resampling answers, where
    scores are averaged per question first, and on paired analysis). Treating the S * N
    (seed, problem) scores as independent would shrink the error by about sqrt(S).
    It leaves out the spread between seeds as a whole (a seed that is better everywhere):
    with a few seeds that cannot be estimated; benchmarks/quickstart_seeds.py reports it.
    """
    d = per_problem_differences(x, y)
    return statistics.stdev(d) / math.sqrt(len(d)) if len(d) > 1 else 0.0


def _mean(v: Sequence[float]) -> float:
    return sum(v) / len(v)


def _runs_mean(runs: Runs) -> float:
    return _mean([_mean(r) for r in runs])


def claim(text: str, margin: float, noise: float | None, numbers: dict, strict: bool = True) -> dict:
    return {
        "claim": text,
        "holds": margin > 0 if strict else margin >= 0,
        "margin": margin,
        "noise": noise,
        "within_noise": noise is not None and abs(margin) < noise,
        "numbers": numbers,
    }


def beats_base(vectors: dict, method: str, text: str, threshold: float = 0.0) -> dict | None:
    """`method` above Base by more than `threshold` for every agent; the margin is the worst agent's."""
    base, new = vectors.get("base", {}), vectors.get(method, {})
    agents = [a for a in new if a in base]
    if not agents:
        return None
    rows = {}
    for a in agents:
        b = base[a]  # per_problem repeats the base once per seed, like every method
        rows[a] = {
            "base": _runs_mean(b),
            method: _runs_mean(new[a]),
            "margin": _runs_mean(new[a]) - _runs_mean(b) - threshold,
            "noise": 2 * paired_se(new[a], b),
        }
    worst = min(rows, key=lambda a: rows[a]["margin"])
    return claim(text, rows[worst]["margin"], rows[worst]["noise"], rows)


def cohort_average(vectors: dict, better: str, worse: str, text: str) -> dict | None:
    """Per-problem accuracy averaged over the cohort's agents: `better` >= `worse`."""
    if better not in vectors or worse not in vectors:
        return None
    x, y = _agents_mean(vectors[better]), _agents_mean(vectors[worse])
    numbers = {better: _runs_mean(x), worse: _runs_mean(y)}
    return claim(text, numbers[better] - numbers[worse], 2 * paired_se(x, y), numbers, strict=False)


def _agents_mean(by_agent: dict[str, Runs]) -> list[list[float]]:
    """[seeds][problems] the agents' mean score on each problem in each seed."""
    per_seed = zip(*by_agent.values())  # each item: one seed's run of every agent
    return [[_mean(col) for col in zip(*runs)] for runs in per_seed]


def ensembles(pooled: dict, better: str, worse: str) -> dict | None:
    """The paper's Table 10: the pooled majority of `better`'s cohort vs `worse`'s (budget-matched)."""
    if better not in pooled or worse not in pooled:
        return None
    x, y = pooled[better]["correct"], pooled[worse]["correct"]
    k = pooled[better]["k"]
    text = f"{better} ensemble beats the {worse} ensemble (pooled maj@{k})"
    return claim(text, _runs_mean(x) - _runs_mean(y), 2 * paired_se(x, y), {better: _runs_mean(x), worse: _runs_mean(y)})


def kappa_gap(diversity: list[dict], bootstrap: int = 200) -> dict | None:
    """Cross-family kappa below every seed-only kappa; noise: 2 bootstrap sds of the gap."""
    from corl.studies.diversity.metrics import cohens_kappa, contingency

    cross = [p for p in diversity if p["kind"] == "models"]
    seed = [p for p in diversity if p["kind"] == "seed"]
    if not cross or not seed:
        return None

    def gap(rows: Sequence[int] | None) -> float:
        def k(p):
            a, b = p["correct_a"], p["correct_b"]
            if rows is not None:
                a, b = [a[i] for i in rows], [b[i] for i in rows]
            return cohens_kappa(contingency(a, b))

        return min(k(p) for p in seed) - max(k(p) for p in cross)

    noise = None
    if all("correct_a" in p for p in cross + seed):
        n = len(cross[0]["correct_a"])
        rng = random.Random(0)
        draws = [gap([rng.randrange(n) for _ in range(n)]) for _ in range(bootstrap)]
        noise = 2 * statistics.pstdev(draws)
    numbers = {"cross_family": [p["kappa"] for p in cross], "seed_only": [p["kappa"] for p in seed]}
    margin = min(numbers["seed_only"]) - max(numbers["cross_family"])
    return claim("cross-family kappa below the seed-only kappa", margin, noise, numbers)


def reward_std(std: dict[str, float] | None) -> dict | None:
    """TTRL's normalized reward std ends below Co-RL's (self-reward collapses its own signal)."""
    if not std:
        return None
    return claim("TTRL's reward std falls faster than Co-RL's", std["co-rl"] - std["ttrl"], None, std)


def in_regime(regime: dict | None) -> dict | None:
    """Theorem 1's condition before RL: every pair's sampled accuracies sum above 1 on every type."""
    if not regime or not regime.get("pair_sums"):
        return None
    sums = {(pair, t): v for pair, by in regime["pair_sums"].items() for t, v in by.items()}
    worst = min(sums, key=sums.get)
    numbers = {"worst": f"{worst[0]} on {worst[1]}", "sum": sums[worst]}
    return claim("bases in Theorem 1's regime (per-type p_A + p_B > 1, validation)", sums[worst] - 1.0, None, numbers)


def check_claims(
    vectors: dict, pooled: dict, diversity: list[dict], std: dict[str, float] | None, regime: dict | None = None
) -> list[dict]:
    """Every claim the measurements can decide, in the report's order.

    Args:
        vectors: method -> agent -> [seeds][problems] greedy correctness (0/1).
        pooled: method -> {"correct": [seeds][problems] pooled-majority correctness, "k": votes}.
        diversity: corl.studies.diversity pair rows (with "correct_a"/"correct_b" for the bootstrap).
        std: method -> mean normalized reward std late in training (or None).
        regime: corl.studies.quickstart.regime's measurement of the bases (or None).
    """
    found = [
        in_regime(regime),
        beats_base(vectors, "gt", f"GT-Reward gains >= {100 * GT_GAIN:.0f} points for every agent", threshold=GT_GAIN),
        beats_base(vectors, "co-rl", "Co-RL above Base for every agent"),
        cohort_average(vectors, "co-rl", "ttrl", "Co-RL >= TTRL on the cohort average"),
        ensembles(pooled, "co-rl", "ttrl"),
        kappa_gap(diversity),
        reward_std(std),
    ]
    return [c for c in found if c is not None]


def describe(c: dict) -> str:
    """One line of the report: verdict, margin, noise."""
    verdict = "reproduced" if c["holds"] else "**not reproduced**"
    if c["noise"] is None:
        size = f"margin {c['margin']:+.3f} (no noise estimate)"
    else:
        size = f"margin {c['margin']:+.3f} ± {c['noise']:.3f}" + (", within noise" if c["within_noise"] else "")
    return f"{c['claim']}: {verdict} — {size}"
