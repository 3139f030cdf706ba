"""Model selection and early stopping at the validation points (logging.select, cohort.stop).

At each validation point the run records its label-free scores (`corl.trainer.scores`: the
agents' greedy agreement and its chance level, one agent's agreement with its own samples,
their majority share, stability since the last point, the reward std of the steps since then,
the top answer share) beside the validation accuracy when the data has answers. A rule picks
one point:

    label_free  the highest `label_free_score`: agreement beyond chance (greedy agreement minus
                the agreement of agents answering independently of the prompt; one agent: its
                samples' agreement with its greedy answer, minus the same by chance), times the
                share the agent that kept least keeps of the cohort's variety bar (effective
                number of distinct answers; the bar: the smallest of the agents' largest so
                far, `corl.trainer.scores.variety_kept`). A collapsed point (one agent gives one
                answer on >= cohort.stop.collapse_share of the prompts) is never chosen, whatever
                its score. It reads only the scores above: never an answer.
    truth       the highest cohort validation accuracy (a diagnostic: it needs answers).
    last        the last point (no best/ folder: the final checkpoint is the result).

Ties go to the later step. Only points after a training step are candidates (the one before
step 0, logging.eval_on_start, is the base model: recorded, never chosen, and not the bar the
plateau rule measures improvement against).
Where the first point's answers show that label_free cannot tell on the run's data (a small answer
space, errors the agents share, right answers that repeat a few values while the bases scatter:
`corl.trainer.selection_trust`), its folder holds a stated fallback's point instead, and the run
says so (selection.json's `label_free_trust`, `select/trusted`, the console). `choose` is the
score's own pick, whatever the verdict.
RUN/best/ (and RUN/best-<rule>/ for logging.select_also) is a checkpoint folder like those in
RUN/checkpoints/, hard-linked from it and renamed into place; RUN/selection.json records every
point, each rule's choice and why the run stopped early, if it did.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from corl.trainer import selection_trust
from corl.trainer.scores import (
    answer_variety,
    chance_agreement,
    confirmed_answers,
    greedy_agreement,
    label_free_score,
    majority_share,
    mean_reward_std,
    repeat_variety,
    self_agreement,
    self_chance_agreement,
    shared_alternatives,
    stability,
    top_answer_share,
    variety_kept,
)

RULE_METRIC = {"label_free": "label_free", "truth": "val_accuracy"}  # what each rule maximizes in a point
FLAT_REWARD_STD = 1e-3  # cohort.stop collapse: every sample of the last steps earned the same reward
FULL_AGREEMENT = 0.99


def point_scores(
    keys, samples, previous, recent_steps: Sequence[Mapping[str, float]], names: Sequence[str], earlier_variety=()
) -> dict:
    """The label-free scores of one validation point (keys [N][B] greedy vote keys, samples
    [N][B][M] sampled ones, previous: the last point's keys or None, earlier_variety: the
    earlier points' per-agent `answer_variety`)."""
    several = len(keys) > 1
    variety = [answer_variety(agent) for agent in keys]
    reference = [max(column) for column in zip(variety, *earlier_variety, strict=True)]
    bar = min((r for r in reference if r > 0), default=0.0)
    confirmed = repeat_variety(confirmed_answers(keys, samples))
    scores = {
        "agreement": greedy_agreement(keys),
        "self_agreement": self_agreement(keys, samples) if samples else None,
        "chance_agreement": chance_agreement(keys) if several else self_chance_agreement(keys, samples) if samples else None,
        "majority_share": majority_share(samples) if samples else None,
        "stability": stability(previous, keys),
        "reward_std": mean_reward_std(recent_steps, names),
        "top_answer_share": top_answer_share(keys),
        "variety": variety,
        "variety_kept": variety_kept(variety, reference),
        # what selection_trust reads on the first point: do the agents share wrong answers, do the right ones repeat
        "shared_alternatives": shared_alternatives(keys, samples) if several else None,
        "confirmed_variety": confirmed,
        "kept_if_right": min(confirmed / bar, 1.0) if confirmed is not None and bar > 0 else None,
    }
    scores["label_free"] = label_free_score(scores)
    return scores


def raw_agreement(point: Mapping) -> float:
    """A point's agreement before the chance term: greedy agreement, one agent: its majority share."""
    value = point.get("agreement")
    if value is None:
        value = point.get("majority_share")
    return float(value) if value is not None else 0.0


def choose(points: Sequence[Mapping], rule: str) -> Mapping | None:
    """The point `rule` selects among the candidates (ties: the later one); None when no point
    has the rule's metric (truth without answers). label_free never takes a collapsed point."""
    candidates = [p for p in points if p["candidate"] and not (rule == "label_free" and p.get("collapsed"))]
    if rule == "last":
        return candidates[-1] if candidates else None
    metric = RULE_METRIC[rule]
    best = None
    for p in candidates:
        if p.get(metric) is not None and (best is None or p[metric] >= best[metric]):
            best = p
    return best


def stop_reason(points: Sequence[Mapping], rule: str, patience: int, min_delta: float, collapse_share: float) -> str | None:
    """Why cohort.stop ends the run at the last point, or None. Reads label-free scores only."""
    trained = [p for p in points if p["candidate"]]  # the base model's point is no bar to beat
    if rule == "plateau" and len(trained) > patience:
        before = max(p["label_free"] for p in trained[:-patience])
        recent = max(p["label_free"] for p in trained[-patience:])
        if recent <= before + min_delta:
            return (
                f"plateau: the label-free score has not improved on {before:.4f} for {patience} validation points "
                f"(best since: {recent:.4f}; cohort.stop.patience {patience}, min_delta {min_delta:g})"
            )
    if rule == "collapse" and points:
        last = points[-1]
        if last["top_answer_share"] >= collapse_share:
            return (
                f"collapse: one agent gives one and the same greedy answer on {last['top_answer_share']:.0%} of the "
                f"validation prompts (cohort.stop.collapse_share {collapse_share:g})"
            )
        std, agreement = last["reward_std"], raw_agreement(last)
        if std is not None and std <= FLAT_REWARD_STD and agreement >= FULL_AGREEMENT:
            return (
                f"collapse: the reward std of the last steps is {std:.2g} and the agreement {agreement:.3f}: "
                "every sample gives the same answer"
            )
    return None


class Selector:
    """The run's selection state, kept in the loop state (it resumes with the run)."""

    def __init__(self, cfg, names: Sequence[str], loop_state: dict):
        self.cfg = cfg
        self.names = list(names)
        self.rules = [r for r in dict.fromkeys([cfg.logging.select, *cfg.logging.select_also]) if r != "last"]
        self.active = bool(self.rules) or cfg.cohort.stop.rule != "none"
        self.state = loop_state.setdefault("selection", {"points": [], "recent": [], "previous": None, "stopped": None})
        self._told = False

    @property
    def samples(self) -> int:
        return self.cfg.logging.select_samples if self.active else 0

    def record_step(self, metrics: Mapping[str, float]) -> None:
        if self.active:
            self.state["recent"].append({k: v for k, v in metrics.items() if k.endswith("/reward_std")})

    def observe(self, step: int, keys, samples, accuracy: float | None) -> dict[str, float]:
        """Record the point after `step` (-1: before training); its scores as metrics."""
        if not self.active:
            return {}
        earlier = [p["variety"] for p in self.state["points"] if len(p.get("variety") or ()) == len(keys)]
        scores = point_scores(keys, samples, self.state["previous"], self.state["recent"], self.names, earlier)
        collapsed = scores["top_answer_share"] >= self.cfg.cohort.stop.collapse_share
        point = {"step": step, "done": step + 1, "candidate": step >= 0, "collapsed": collapsed, "val_accuracy": accuracy}
        self.state["points"].append(point | scores)
        self.state["previous"] = [list(k) for k in keys]
        self.state["recent"] = []
        if self.state.get("trust") is None:  # the first point: before training drew the agents' answers together
            self.state["trust"] = selection_trust.verdict(self.state["points"][0])
        scores["trusted"] = float(self.state["trust"]["trusted"])
        return {f"select/{k}": float(v) for k, v in scores.items() if isinstance(v, (int, float))}

    def choice(self, rule: str) -> Mapping | None:
        """The point `rule` chooses; label_free where it cannot tell on this run: its fallback's point."""
        trust = self.state.get("trust")
        if rule == "label_free" and trust is not None and not trust["trusted"]:
            return selection_trust.fallback_choice(self.state["points"], trust["fallback"])
        return choose(self.state["points"], rule)

    def stop_reason(self) -> str | None:
        stop = self.cfg.cohort.stop
        if stop.rule == "none":
            return None
        return stop_reason(self.state["points"], stop.rule, stop.patience, stop.min_delta, stop.collapse_share)

    def folders_at(self, done: int) -> list[str]:
        """The best folders whose rule now chooses the point `done` steps in."""
        out = []
        for rule in self.rules:
            chosen = self.choice(rule)
            if chosen is not None and chosen["done"] == done:
                out.append(folder_name(rule, self.cfg.logging.select))
        return out

    def unchosen(self) -> str | None:
        """Why the label_free rule holds no point, where it was asked for and every candidate collapsed."""
        if "label_free" not in self.rules:
            return None
        candidates = [p for p in self.state["points"] if p["candidate"]]
        if not candidates or self.choice("label_free") is not None:
            return None
        folder = folder_name("label_free", self.cfg.logging.select)
        return (
            f"logging.select label_free chose no point: all {len(candidates)} validation points collapsed (one agent "
            f"gives one answer on >= cohort.stop.collapse_share {self.cfg.cohort.stop.collapse_share:g} of the prompts); "
            f"RUN/{folder}/ is not written"
        )

    def notes(self) -> list[str]:
        """What the console has not been told yet about the label_free rule: that it cannot tell on
        this run (once), that it chose no point."""
        out = []
        trust = self.state.get("trust")
        if "label_free" in self.rules and trust is not None and not trust["trusted"] and not self._told:
            self._told = True  # once per process (a resumed run says it again)
            out.append(selection_trust.message(trust, folder_name("label_free", self.cfg.logging.select)))
        if note := self.unchosen():
            out.append(note)
        return out

    def record(self) -> dict:
        """RUN/selection.json: every point, each rule's chosen step, the stop, whether label_free can tell."""
        chosen = {}
        trust = self.state.get("trust")
        for rule in ("last", "label_free", "truth"):
            point = self.choice(rule)
            chosen[rule] = None if point is None else {"step": point["done"], "checkpoint_step": point["done"]}
            if rule == "label_free" and point is not None and trust is not None and not trust["trusted"]:
                chosen[rule]["fallback"] = trust["fallback"]
        # in the run's one numbering (metrics, checkpoints, messages): a point is named by the updates before it
        points = [{"step": p["done"], **{k: v for k, v in p.items() if k not in ("step", "done")}} for p in self.state["points"]]
        return {
            "select": self.cfg.logging.select,
            "folders": {folder_name(r, self.cfg.logging.select): r for r in self.rules},
            "chosen": chosen,
            "stopped": self.state["stopped"],
            "label_free_trust": trust,
            "points": points,
        }


def folder_name(rule: str, select: str) -> str:
    return "best" if rule == select else f"best-{rule}"


def publish(run_dir: Path, checkpoint: Path, name: str, record: dict) -> Path:
    """RUN/<name>/ := `checkpoint`, hard-linked (checkpoint files are never rewritten in place, so
    a link is a copy that costs no disk; copied where links are refused), with selection.json.
    Written to a hidden folder and renamed into place: an interruption leaves the old one or
    (between the two renames) none, never a half-written one."""
    final, tmp, old = run_dir / name, run_dir / f".tmp_{name}", run_dir / f".old_{name}"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    shutil.copytree(checkpoint, tmp, copy_function=_link_or_copy)
    (tmp / "selection.json").write_text(json.dumps(record, indent=1))
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def write_selection(run_dir: Path, record: dict, folders: Sequence[str] = ()) -> None:
    """RUN/selection.json, and the same record in each best folder (it is no part of the
    checkpoint's manifest: it grows with every point)."""
    for folder in [run_dir, *(run_dir / name for name in folders if (run_dir / name).is_dir())]:
        tmp = folder / ".selection.json.tmp"
        tmp.write_text(json.dumps(record, indent=1))
        os.replace(tmp, folder / "selection.json")


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
