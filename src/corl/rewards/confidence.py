"""`confidence`: the agreement reward scaled by how sure the label's voters were.

reward[b][k] = agreement(answer[b][k], label[b]) x label[b].count / label[b].total: a
completion that matches a label 7 of 8 teacher samples gave earns 0.875, one that matches a
4-of-8 label 0.5, one without an answer or a label 0.

The factor is the same for every completion of a prompt, and GRPO's default advantage divides
each group by its own std (`grpo.group_advantages`, scale "group"): (c r - c mean) / (c std)
is the binary advantage again (up to the std's eps), so the weighting would change nothing.
It acts only with grpo.scale_rewards: none (Dr. GRPO's centred reward), where a group's
advantages are c times the binary ones: prompts with confident labels move the policy more.
The config refuses the combination (`check_config`).
"""

from __future__ import annotations

import torch

from corl.rewards.agreement import agreement_rewards
from corl.rewards.registry import RewardInputs, RewardSpec, register_reward


def label_confidence(label) -> float:
    """The label's vote share count / total (0 for no label)."""
    return label.count / label.total if label is not None and label.total else 0.0


def confidence_rewards(inputs: RewardInputs) -> torch.Tensor:
    """[B][K] answers against [B] labels -> [B, K] agreement x the label's vote share, in [0, 1]."""
    agree = agreement_rewards(inputs.answers, inputs.keys, inputs.labels, inputs.equivalent)  # [B, K] in {0, 1}
    scale = torch.tensor([label_confidence(label) for label in inputs.labels], dtype=torch.float32)  # [B]
    return agree * scale.unsqueeze(1)


def needs_unscaled_advantages(cfg) -> None:
    """A per-prompt factor cancels when advantages are divided by the group std: refuse that."""
    if cfg.grpo.scale_rewards == "group":
        raise ValueError(
            "cohort.reward 'confidence' scales each prompt's rewards by its label's vote share, a per-prompt "
            "constant that grpo.scale_rewards: group divides out again (each group is divided by its own std); "
            "set grpo.scale_rewards: none"
        )


register_reward(
    RewardSpec(
        "confidence",
        "confidence-weighted agreement: agreement with the label x the label's vote share (count / K); "
        "needs grpo.scale_rewards: none",
        from_samples=confidence_rewards,
        check_config=needs_unscaled_advantages,
    )
)
