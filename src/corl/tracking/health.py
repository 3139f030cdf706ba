"""Health checks run every step: NaN/inf never reaches the weights unnoticed, and a run
that is collapsing says so.

- Non-finite rewards, losses, gradients (`Agent.update` skips such an optimizer step and
  reports it) or weights: `health.on_nonfinite` stop (default) raises `HealthError` naming
  the agent and the step; skip logs the skipped step and goes on (weights that are already
  non-finite always stop the run: there is nothing left to skip to).
- A diverging update: one update that multiplies the norm of all of an agent's weights by
  more than `health.max_weight_norm_ratio` (default 1.5) stops the run, naming the agent,
  its lr, the step and the norms. The ratio is a lower bound of the step's relative weight
  change (| ||w'|| - ||w|| | <= ||w' - w||) that needs no copy of the weights. AdamW moves
  each weight by about lr per step: on the tests' tiny models (weights' norm ~22) lr 1e-3
  gave at most 1.0004, lr 1e-2 (the highest lr any test uses; configs use 3e-5 and 1e-6)
  1.008, while lr 0.1 gave 1.66 and lr 1 13.3, after which the models wrote no answer
  again. Like non-finite weights it always stops: the update has already been applied,
  there is no step left to skip.
- Collapse alarms, logged as `health/...` metrics and printed once as a warning when they
  start: every reward of an agent 0 (or every one 1) for `health.collapse_steps`
  consecutive steps, no answer in any completion, or every label the same string.
"""

from __future__ import annotations

import sys

import torch


class HealthError(RuntimeError):
    """The run stopped because a number went NaN/inf; the message names the agent and step."""


def nonfinite_weight(model) -> str | None:
    """The name of the first parameter holding a NaN/inf, or None."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not bool(torch.isfinite(p).all()):
                return name
    return None


# A resume keeps the run's configuration (agents.N.lr and grpo.* may not change: corl.config.files
# RESUME_MAY_CHANGE), so the advice after a divergence is a new run from the last good weights.
AFTER_DIVERGENCE = (
    "a resume keeps the run's lr, so start a new run (-o NEW_DIR) with a lower agents.N.lr (or grpo.max_grad_norm) whose "
    "agents' models are the last good checkpoint's agent folders (agents.N.model: RUN/checkpoints/step_K/AGENT)"
)


def check_weights(model, where: str) -> None:
    name = nonfinite_weight(model)
    if name is not None:
        raise HealthError(f"{where}: weight {name!r} holds NaN/inf values; the model cannot sample. {AFTER_DIVERGENCE}")


def weight_norm(model) -> float:
    """The L2 norm of all the model's parameters (a collective over FSDP-sharded ones)."""
    with torch.no_grad():
        norm = torch.nn.utils.get_total_norm([p.detach() for p in model.parameters()])
    if hasattr(norm, "full_tensor"):  # a DTensor: each rank holds part of the sum of squares
        norm = norm.full_tensor()
    return float(norm)


def check_weight_growth(after: float, ratio: float, limit: float | None, where: str) -> None:
    """Stop when one update multiplied the weights' norm (now `after`) by `ratio` > `limit` (None: never)."""
    if limit is not None and ratio > limit:
        raise HealthError(
            f"{where}: the update diverged: it multiplied the norm of the weights by {ratio:.3g} "
            f"(from {after / ratio:.4g} to {after:.4g}; health.max_weight_norm_ratio is {limit:g}). "
            f"Lower this agent's lr: {AFTER_DIVERGENCE}"
        )


def nonfinite(values: torch.Tensor) -> bool:
    return not bool(torch.isfinite(values).all())


def stop_or_warn(message: str, stop: bool) -> None:
    if stop:
        raise HealthError(message + " (health.on_nonfinite: stop; set skip to skip such steps instead)")
    warn(message + "; the optimizer step was skipped (health.on_nonfinite: skip)")


def warn(message: str) -> None:
    print(f"corl: warning: {message}", file=sys.stderr, flush=True)


class CollapseMonitor:
    """Counts, per agent, the consecutive steps each collapse sign has lasted."""

    def __init__(self, names: list[str], patience: int, binary_reward: bool, console: bool = True):
        self.names = names
        self.console = console  # only the main process prints
        self.patience = patience
        self.binary = binary_reward
        self.runs: dict[str, int] = {}
        self.last_label: dict[str, str | None] = {}

    def __call__(self, step: int, metrics: dict, labels: list[list[str | None]] | None) -> dict[str, float]:
        """The health/ metrics of this step; prints a warning when an alarm starts."""
        out: dict[str, float] = {}
        for n, name in enumerate(self.names):
            signs = {}
            if self.binary:
                mean = metrics.get(f"{name}/reward_mean")
                signs["reward_all_0"] = mean is not None and mean == 0.0
                signs["reward_all_1"] = mean is not None and mean == 1.0
            rate = metrics.get(f"{name}/answer_rate")
            signs["no_answers"] = rate is not None and rate == 0.0
            if labels is not None:
                given = {getattr(lbl, "key", lbl) for lbl in labels[n] if lbl is not None}  # a Vote's canonical key
                same = len(given) == 1 and len(labels[n]) > 1 and self.last_label.get(name, next(iter(given))) in given
                self.last_label[name] = next(iter(given)) if len(given) == 1 else None
                signs["same_label"] = same
            for sign, now in signs.items():
                key = f"{name}/{sign}"
                self.runs[key] = self.runs.get(key, 0) + 1 if now else 0
                out[f"health/{key}_steps"] = float(self.runs[key])
                if self.runs[key] == self.patience and self.console:
                    warn(f"step {step}: agent {name!r}: {_describe(sign, self.patience, self.last_label.get(name))}")
        out["health/alarms"] = float(sum(1 for count in self.runs.values() if count >= self.patience))
        return out

    def state_dict(self) -> dict:
        """The running counts (a resumed run goes on counting where the checkpoint stopped)."""
        return {"runs": dict(self.runs), "last_label": dict(self.last_label)}

    def load_state_dict(self, state: dict) -> None:
        self.runs = dict(state.get("runs", {}))
        self.last_label = dict(state.get("last_label", {}))


def _describe(sign: str, steps: int, label: str | None) -> str:
    span = f"for {steps} consecutive step{'s' * (steps > 1)}"
    return {
        "reward_all_0": f"every reward was 0 {span}: no completion agrees with its label, so nothing is learned",
        "reward_all_1": f"every reward was 1 {span}: every completion agrees, so nothing is learned (collapse?)",
        "no_answers": f"no completion had an answer {span} (cohort.max_new_tokens too small? output format lost?)",
        "same_label": f"every label was {label!r} {span}: the cohort may have collapsed onto one answer",
    }[sign]
