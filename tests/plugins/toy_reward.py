"""A reward from outside corl (docs/architecture.md, "Add a reward").

`brevity`: 1 - length / longest completion of the prompt's group, from the per-sample
metadata; meant as a small weighted term beside agreement:
`cohort.rewards: [{name: agreement, weight: 1.0}, {name: brevity, weight: 0.1}]`.
"""

from __future__ import annotations

import torch

from corl.rewards import RewardInputs, RewardSpec, register_reward

SCORED: list[torch.Tensor] = []  # what it returned: evidence that the loop called it


def brevity(inputs: RewardInputs) -> torch.Tensor:
    """[B][K] SampleInfo -> [B, K] in [0, 1]: shorter than the group's longest earns more."""
    lengths = torch.tensor([[info.length for info in group] for group in inputs.samples], dtype=torch.float32)  # [B, K]
    out = 1.0 - lengths / lengths.max(dim=1, keepdim=True).values.clamp(min=1.0)
    SCORED.append(out)
    return out


register_reward(RewardSpec("brevity", "1 - length / the group's longest completion", from_samples=brevity))
