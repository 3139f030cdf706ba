"""How completions are scored: the agreement reward and intrinsic rewards, by name.

A new reward is a module that calls `register_reward(RewardSpec(...))`, imported below
(or named in the config's `plugins`).
"""

from corl.rewards import confidence, tests_pass, vote_share  # noqa: F401  (register "confidence", "tests", "vote_share")
from corl.rewards.agreement import Equivalence, agreement_rewards
from corl.rewards.intrinsic import (
    entropy_rewards,
    masked_mean,
    self_certainty_rewards,
    token_entropy,
    token_self_certainty,
)
from corl.rewards.registry import (
    REWARDS,
    RewardInputs,
    RewardSpec,
    WeightedReward,
    register_reward,
    reward_spec,
    weighted_reward,
)

register_reward(
    RewardSpec("agreement", "1 if the completion's answer is equivalent to its label, else 0", from_labels=agreement_rewards)
)
register_reward(RewardSpec("entropy", "RENT: minus the mean token entropy (arXiv:2505.22660)", from_logits=entropy_rewards))
register_reward(
    RewardSpec(
        "self_certainty", "Intuitor: mean KL(U || p) of the completion (arXiv:2505.19590)", from_logits=self_certainty_rewards
    )
)

__all__ = [
    "REWARDS",
    "Equivalence",
    "RewardInputs",
    "RewardSpec",
    "WeightedReward",
    "agreement_rewards",
    "entropy_rewards",
    "masked_mean",
    "register_reward",
    "reward_spec",
    "self_certainty_rewards",
    "token_entropy",
    "token_self_certainty",
    "weighted_reward",
]
