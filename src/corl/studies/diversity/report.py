"""The diversity study's report: a recommendation, the JSON report and the kappa heatmap.

`samples` are the study's `{model: [Sample]}` (`corl.studies.diversity.study`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from corl.studies.diversity.cohort import agents_yaml, recommend_cohort
from corl.studies.diversity.metrics import PairStats, kappa_gap, pearson, rank_partners

# Paper, Appendix A, Tables 6-7: the measured ranges of its coupled and decoupled pairs.
PAPER_REFERENCE = (
    "paper (Appendix A): cross-family pairs kappa <= 0.42, c >= 29.4%; same-family and seed-only pairs kappa >= 0.51, c <= 24.6%"
)
NOTHING_SOLVED = "no model solves any of these problems"
WEAK_PARTNER_RATIO = 0.5  # warn when a recommended partner is less than half as accurate


def recommend(pairs: Sequence[PairStats], samples: dict[str, list], anchor: str | None) -> str:
    """One sentence a user can act on: the most decoupled partner (or pair), with caveats."""
    accuracy = {s.name: s.accuracy for group in samples.values() for s in group}
    if accuracy and not any(accuracy.values()):
        # every kappa here is the degenerate 1.0 and every u is 0: a ranking would still name a
        # "best" pair, but every majority a peer could teach is wrong, so no cohort learns from these
        return (NOTHING_SOLVED + ": every label a peer's majority gives is wrong, so no cohort can learn from them "
                "without labels; measure on problems the models solve sometimes (an easier split, a few-shot "
                "prompt, more new tokens)")  # fmt: skip
    if anchor is not None:
        ranked = rank_partners(pairs, anchor)
        if not ranked:
            return f"no pairs include the anchor {anchor!r}"
        best = ranked[0]
        partner = best.partner_of(anchor)
        if best.kind == "seed":
            text = (f"no other model errs more differently from {anchor} than {anchor} itself with another seed "
                    f"(kappa {best.kappa:.2f}); try a partner from another model family")  # fmt: skip
        else:
            text = f"best partner for {anchor}: {partner} (kappa {best.kappa:.2f}, c {best.complementarity:.1%})"
        weak, strong = accuracy[partner], accuracy[anchor]
    else:
        candidates = [p for p in pairs if p.kind == "models"] or list(pairs)
        best = candidates[0]
        text = f"most decoupled pair: {best.a} + {best.b} (kappa {best.kappa:.2f}, c {best.complementarity:.1%})"
        weak, strong = sorted((accuracy[best.a], accuracy[best.b]))
    if best.table.chance_agreement >= 1.0 - 1e-12:
        text += "; but no pair differs at all: each pair is right and wrong on exactly the same problems"
    elif {best.accuracy_a, best.accuracy_b} & {0.0, 1.0}:
        text += ("; caution: one of the two is always right or always wrong here, which makes kappa 0 whatever "
                 "the other does: measure on problems both solve sometimes")  # fmt: skip
    elif strong > 0 and weak < WEAK_PARTNER_RATIO * strong:
        text += (f"; caution: accuracies {weak:.1%} vs {strong:.1%}: a much weaker partner's labels are mostly "
                 "wrong, and a low kappa partly reflects that")  # fmt: skip
    return text


def _finite_or_none(value: float) -> float | None:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def build_report(
    settings: Any,
    problems: Sequence[dict],
    dropped: int,
    samples: dict[str, list],
    pairs: Sequence[PairStats],
    anchor: str | None,
) -> dict[str, Any]:
    """The study as one JSON-serialisable object (NaN written as null)."""
    accuracy = {s.name: s.accuracy for group in samples.values() for s in group}
    correlation = None
    if len(pairs) >= 4:
        r = pearson([p.kappa for p in pairs], [p.complementarity for p in pairs])
        correlation = {"pearson_kappa_c": _finite_or_none(r), "pairs": len(pairs)}
    report: dict[str, Any] = {
        "settings": {k: v for k, v in asdict(settings).items() if k != "filters"}
        | {"filters": {k: list(v) for k, v in settings.filters}},
        "problems": {"n": len(problems), "dropped_empty_answer": dropped, "ids": [p["id"] for p in problems]},
        "samples": [
            {
                "name": s.name,
                "model": s.model,
                "seed": s.seed,
                "model_type": s.model_type,
                "accuracy": s.accuracy,
                "no_answer_rate": sum(a is None for a in s.answers) / len(s.answers),
                "cache_hit": s.cache_hit,
                "cache_file": s.cache_file,
            }
            for group in samples.values()
            for s in group
        ],  # fmt: skip
        "pairs": [{k: _finite_or_none(v) for k, v in p.as_dict().items()} for p in pairs],
        "kappa_c_correlation": correlation,
        "kappa_gap": kappa_gap(pairs),
        "anchor": None,
        "recommendation": recommend(pairs, samples, anchor),
        # no cohort to recommend when no model solves anything (recommend says why)
        "cohort": recommend_cohort(pairs, list(samples)) if any(accuracy.values()) else None,
        "reference": PAPER_REFERENCE,
    }
    if report["cohort"] is not None:
        report["cohort"]["agents_yaml"] = agents_yaml(report["cohort"]["recommended"])
    if anchor is not None:
        report["anchor"] = {
            "model": anchor,
            "ranking": [
                {"partner": p.partner_of(anchor), "kind": p.kind, "kappa": p.kappa, "c": p.complementarity,
                 "u": p.oracle_accuracy, "w": p.wrong_agreement, "partner_accuracy": accuracy[p.partner_of(anchor)]}
                for p in rank_partners(pairs, anchor)
            ],
        }  # fmt: skip
    return report


def plot_kappa_heatmap(pairs: Sequence[PairStats], models: Sequence[str], path: Path) -> Path:
    """A models x models heatmap of kappa; the diagonal shows a model against its own
    seed twin (the seed-only baseline) when measured, else stays blank."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure  # no pyplot: no global backend switch, no GUI

    index = {m: i for i, m in enumerate(models)}
    grid = np.full((len(models), len(models)), np.nan)
    for p in pairs:
        if p.kind == "seed":
            grid[index[p.a], index[p.a]] = p.kappa
        else:
            grid[index[p.a], index[p.b]] = grid[index[p.b], index[p.a]] = p.kappa
    labels = _short_labels(models)
    size = 1.2 + 0.9 * len(models)
    fig = Figure(figsize=(size + 1.5, size))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    lowest = float(np.nanmin(grid)) if np.isfinite(grid).any() else 0.0
    image = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis_r", vmin=min(0.0, lowest), vmax=1.0)
    for (i, j), value in np.ndenumerate(grid):
        if np.isfinite(value):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", color="white" if value > 0.6 else "black", fontsize=9)
    ax.set_xticks(range(len(models)), labels, rotation=45, ha="right")
    ax.set_yticks(range(len(models)), labels)
    diagonal = "\ndiagonal: same model, another seed" if any(p.kind == "seed" for p in pairs) else ""
    ax.set_title(f"Cohen's kappa on correctness\nlower = errors more decoupled{diagonal}", fontsize=9)
    fig.colorbar(image, ax=ax, label="kappa")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    return path


def _short_labels(models: Sequence[str]) -> list[str]:
    short = [m.rstrip("/").split("/")[-1] or m for m in models]
    return short if len(set(short)) == len(short) else list(models)
