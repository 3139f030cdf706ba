"""Rewards by name, each with a spec of what it scores from (the loop reads the spec).

A reward scores from one of three things, exactly one of which its spec sets:
- `from_labels`: the step's labels (answers, keys, labels and the task's equivalence
  -> [B, K] in {0, 1}): Co-RL, TTRL, GT-Reward;
- `from_logits`: the policy's own logits ([n, C, V] logits and [n, C] mask -> [n]): RENT, Intuitor;
- `from_gold`: the dataset's own grader (completion texts [B*K], the B gold rows, K ->
  [B, K]), e.g. a code problem's hidden tests. Only such a reward is handed gold rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from corl.registry import Registry


@dataclass(frozen=True)
class RewardSpec:
    name: str
    description: str
    from_labels: Callable | None = None
    from_logits: Callable | None = None
    from_gold: Callable | None = None

    def __post_init__(self) -> None:
        if sum(f is not None for f in (self.from_labels, self.from_logits, self.from_gold)) != 1:
            raise ValueError(f"reward {self.name!r}: set exactly one of from_labels, from_logits, from_gold")

    @property
    def binary(self) -> bool:
        """A 0/1 reward against a label (its mean and std describe label agreement)."""
        return self.from_labels is not None

    @property
    def reads_gold(self) -> bool:
        return self.from_gold is not None


REWARDS: Registry = Registry("reward", package="corl.rewards")


def register_reward(spec: RewardSpec) -> RewardSpec:
    return REWARDS.register(spec.name, spec)


def reward_spec(name: str) -> RewardSpec:
    return REWARDS.get(name)
