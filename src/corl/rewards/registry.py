"""Rewards by name, each with a spec of what it scores from (the loop reads the spec).

A reward scores from one of four things, exactly one of which its spec sets:
- `from_labels`: the step's labels (answers, keys, labels and the task's equivalence
  -> [B, K] in {0, 1}): Co-RL, TTRL, GT-Reward;
- `from_logits`: the policy's own logits ([n, C, V] logits and [n, C] mask -> [n]): RENT, Intuitor;
- `from_gold`: the dataset's own grader (completion texts [B*K], the B gold rows, K ->
  [B, K]), e.g. a code problem's hidden tests. Only such a reward is handed gold rows;
- `from_samples`: anything label-free the step knows of its samples (`RewardInputs`: texts,
  answers, keys, labels and per-sample metadata -> [B, K]), e.g. a format or length bonus.

`cohort.rewards` combines several as a weighted sum (`WeightedReward`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from corl.registry import REWARDS


@dataclass(frozen=True)
class RewardInputs:
    """What a reward may read of one agent's share of a step: B prompts x K samples (no gold rows)."""

    texts: Sequence[str]  # [B*K] completions, grouped by prompt
    answers: Sequence[Sequence[str | None]]  # [B][K] answers as written (None: none, or truncated and dropped)
    keys: Sequence[Sequence[str | None]]  # [B][K] vote keys
    labels: Sequence  # [B] the label (a corl.labels.Vote) of each prompt, or None
    samples: Sequence[Sequence]  # [B][K] corl.labels.SampleInfo: log-prob sum, length, truncated, vote share
    equivalent: Callable[[str, str], bool]  # the task kind's: an answer vs a label's answer
    k: int


@dataclass(frozen=True)
class RewardSpec:
    name: str
    description: str
    from_labels: Callable | None = None
    from_logits: Callable | None = None
    from_gold: Callable | None = None
    from_samples: Callable[[RewardInputs], torch.Tensor] | None = None
    # a RunConfig this reward cannot train as meant -> ValueError naming the option to change
    check_config: Callable | None = None

    def __post_init__(self) -> None:
        if sum(f is not None for f in (self.from_labels, self.from_logits, self.from_gold, self.from_samples)) != 1:
            raise ValueError(f"reward {self.name!r}: set exactly one of from_labels, from_logits, from_gold, from_samples")

    @property
    def binary(self) -> bool:
        """A 0/1 reward against a label (its mean and std describe label agreement)."""
        return self.from_labels is not None

    @property
    def reads_gold(self) -> bool:
        return self.from_gold is not None

    def score(self, inputs: RewardInputs, gold_rows: Callable[[], list], logit_scores: Callable) -> torch.Tensor:
        """[B, K] rewards. `gold_rows()` -> the B dataset rows (called only for a from_gold reward);
        `logit_scores(fn)` scores the samples from the policy's logits with fn (from_logits)."""
        if self.from_labels is not None:
            return self.from_labels(inputs.answers, inputs.keys, inputs.labels, inputs.equivalent)
        if self.from_gold is not None:
            return self.from_gold(inputs.texts, gold_rows(), inputs.k)
        if self.from_logits is not None:
            return logit_scores(self.from_logits)
        return self.from_samples(inputs)


@dataclass(frozen=True)
class WeightedReward:
    """The step's reward: sum over `cohort.rewards` of weight x that reward ([B, K])."""

    terms: tuple[tuple[RewardSpec, float], ...]  # (spec, weight)

    @property
    def binary(self) -> bool:
        """One label-agreement reward of weight 1: its mean and std describe label agreement."""
        return len(self.terms) == 1 and self.terms[0][0].binary and self.terms[0][1] == 1.0

    @property
    def reads_gold(self) -> bool:
        return any(spec.reads_gold for spec, _ in self.terms)

    @property
    def reads_logits(self) -> bool:
        return any(spec.from_logits is not None for spec, _ in self.terms)

    @property
    def name(self) -> str:
        return " + ".join(spec.name if w == 1.0 else f"{w:g} x {spec.name}" for spec, w in self.terms)

    def __call__(self, inputs: RewardInputs, gold_rows: Callable[[], list], logit_scores: Callable) -> torch.Tensor:
        total = None
        for spec, weight in self.terms:
            part = weight * spec.score(inputs, gold_rows, logit_scores)  # x 1.0 is exact: one term is that reward
            total = part if total is None else total + part
        return total


def register_reward(spec: RewardSpec) -> RewardSpec:
    return REWARDS.register(spec.name, spec)


def reward_spec(name: str) -> RewardSpec:
    return REWARDS.get(name)


def weighted_reward(terms: Sequence[tuple[str, float]]) -> WeightedReward:
    """[(name, weight)] -> the weighted sum of those registered rewards."""
    return WeightedReward(tuple((reward_spec(name), float(weight)) for name, weight in terms))
