"""Whether the label_free rule can tell on a run's data, and what it picks where it cannot.

The label-free score (`corl.trainer.scores.label_free_score`) rests on two premises that the
answers themselves can test. Both are tested on the run's first validation point: the base
models' with logging.eval_on_start, before training drew the agents' answers together (later,
agreeing agents and a collapsing cohort look alike, which is what the score has to tell apart).

- Agreement is evidence of being right: wrong answers scatter, so the agents rarely agree on a
  wrong one. It fails on a small answer space (multiple choice, yes/no: agents agree by chance,
  and a cohort collapsing onto a few of the answers keeps agreeing beyond chance) and where the
  agents' errors coincide (a wrong answer each of them favours: they agree on it as readily as on
  the right one). Measured: the chance agreement (the answers behave like 1 / chance equally common
  values) and `shared_alternatives` (prompts on which the agents share two answers or more).
- A fall in answer variety is a collapse, not learning: the variety bar stands for the variety of
  the right answers. It fails where the right answers repeat a few values while the bases' wrong
  ones scatter over many: the bar is the scatter, and a cohort that learns loses variety down to
  the right answers' and reads as collapsing. Measured: `kept_if_right`, the share of the bar a
  point would keep if its answers repeated like the ones the agents agree on
  (`corl.trainer.scores.repeat_variety`).

Where agreement is no evidence, label_free falls back to the last checkpoint that kept the answers'
variety (three quarters of the bar or more: a cohort piling onto a few of the answers loses it, one
that learns in a small answer space keeps it); where only the variety bar is, to the label-free
score with the bar lowered to the variety of the answers the agents agree on. Neither reads an
answer, and neither is the best point in general: they are what is left where the score cannot
tell. The verdict, the numbers it read and the fallback are in RUN/selection.json
(`label_free_trust`), in the metrics (`select/trusted`) and on the console.

The limits were set on simulated histories over real answer sets (`python -m
corl.studies.selection_trust`): agreement beyond chance kept its order on math-like keys, where
every check passes, and lost it on 4-option and yes/no keys, shared wrong answers and 10-valued
answers, where each check fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from corl.trainer.scores import label_free_score, variety_kept

CHANCE_LIMIT = 0.15  # about 7 equally common answers; MATH, GSM8K: 0.01-0.03 even when every answer is right
SHARED_LIMIT = 0.25  # a quarter of the prompts with a second answer the agents share
KEPT_LIMIT = 0.3  # GSM8K at 500 validation prompts: 0.20-0.26, and the variety term there preferred a 70% point to a 90% one

VARIED = 0.75  # the "last_varied" fallback's bar: a point that kept at least this share of the variety bar

FALLBACKS = {
    "last_varied": f"the last checkpoint that kept {VARIED:.0%} of the answers' variety",
    "capped_bar": "the best label-free score with the variety bar lowered to the variety of the answers the agents agree on",
}


def verdict(first: Mapping) -> dict:
    """The label_free rule's verdict on a run, from its first validation point's scores."""
    reasons = {}
    chance = first.get("chance_agreement")
    if chance is not None and chance >= CHANCE_LIMIT:
        reasons["chance_agreement"] = (
            f"the answers take few values: chance agreement {chance:.2f} (>= {CHANCE_LIMIT:g}; about {1 / chance:.0f} "
            "equally common answers), so the agents agree by chance and a cohort collapsing onto a few answers keeps "
            "agreeing beyond chance"
        )
    shared = first.get("shared_alternatives")
    if shared is not None and shared >= SHARED_LIMIT:
        reasons["shared_alternatives"] = (
            f"the agents' errors coincide: on {shared:.0%} of the prompts (>= {SHARED_LIMIT:.0%}) they share a second "
            "answer besides the one they agree on, so agreeing does not say which of them is right"
        )
    kept = first.get("kept_if_right")
    if kept is not None and kept < KEPT_LIMIT:
        reasons["kept_if_right"] = (
            f"the variety bar is the bases' scatter: the answers the agents agree on repeat about "
            f"{first['confirmed_variety']:.0f} values, so a point answering like them everywhere would keep {kept:.0%} of "
            f"the bar (< {KEPT_LIMIT:.0%}) and learning would read as a collapse"
        )
    fallback = "last_varied" if {"chance_agreement", "shared_alternatives"} & set(reasons) else "capped_bar" if reasons else None
    return {
        "trusted": not reasons,
        "measured_at": first["done"],
        "checks": {"chance_agreement": chance, "shared_alternatives": shared, "kept_if_right": kept},
        "limits": {"chance_agreement": CHANCE_LIMIT, "shared_alternatives": SHARED_LIMIT, "kept_if_right": KEPT_LIMIT},
        "failed": list(reasons),
        "reasons": list(reasons.values()),
        "fallback": fallback,
    }


def capped_scores(points: Sequence[Mapping]) -> list[float]:
    """Every point's label-free score with the variety bar lowered to the first point's
    `confirmed_variety` (the answers the agents agreed on there repeat about that many values)."""
    cap = points[0].get("confirmed_variety") or float("inf")
    out, reference = [], None
    for p in points:
        variety = p.get("variety") or []
        reference = variety if reference is None or len(reference) != len(variety) else list(map(max, reference, variety))
        capped = [min(r, cap) for r in reference]
        out.append(label_free_score({**p, "variety_kept": variety_kept(variety, capped) if variety else None}))
    return out


def fallback_choice(points: Sequence[Mapping], fallback: str) -> Mapping | None:
    """The point `fallback` picks among the trained points that did not collapse (ties: the later)."""
    kept = [(p, s) for p, s in zip(points, capped_scores(points), strict=True) if p["candidate"] and not p.get("collapsed")]
    if not kept:
        return None
    if fallback == "last_varied":
        varied = [p for p, _ in kept if p.get("variety_kept", 1.0) >= VARIED]
        return varied[-1] if varied else kept[-1][0]
    best = kept[0]
    for p, score in kept[1:]:
        if score >= best[1]:
            best = (p, score)
    return best[0]


def message(trust: Mapping, folder: str) -> str:
    """The console's line for a verdict that cannot tell."""
    return (
        f"label-free selection cannot tell on this data (measured at step {trust['measured_at']}): "
        + "; ".join(trust["reasons"])
        + f". RUN/{folder}/ holds {FALLBACKS[trust['fallback']]} instead (label_free_trust in RUN/selection.json)"
    )
