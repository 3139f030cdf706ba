"""Rewards by name, each with a spec of what it scores from (the loop reads the spec).

A reward scores either from the step's labels (`from_labels`: answers, keys, labels and
the task's equivalence -> [B, K] in {0, 1}) or from the policy's own logits
(`from_logits`: [n, C, V] logits and [n, C] mask -> [n]); exactly one is set.
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

    def __post_init__(self) -> None:
        if (self.from_labels is None) == (self.from_logits is None):
            raise ValueError(f"reward {self.name!r}: set exactly one of from_labels, from_logits")

    @property
    def binary(self) -> bool:
        """A 0/1 reward against a label (its mean and std describe label agreement)."""
        return self.from_labels is not None


REWARDS: Registry = Registry("reward", package="corl.rewards")


def register_reward(spec: RewardSpec) -> RewardSpec:
    return REWARDS.register(spec.name, spec)


def reward_spec(name: str) -> RewardSpec:
    return REWARDS.get(name)
