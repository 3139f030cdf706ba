"""The `tests` reward: GT-Reward for code, 1 when the completion's program passes its row's hidden tests.

Scored from the dataset's own grader (`from_gold`): the loop hands this reward the gold
rows (hidden tests included), which no label-free source ever sees. Programs run in
`corl.sandbox`, cut and assembled as the code task kind does (`corl.tasks.code.task`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from corl.rewards.registry import RewardSpec, register_reward


def tests_rewards(texts: Sequence[str], gold_rows: Sequence[Mapping], k: int) -> torch.Tensor:
    """[B*K] completions (grouped by prompt), B gold rows, K -> [B, K] float rewards in {0, 1}."""
    from corl.tasks.code.task import passes_hidden_tests  # the task kind owns cutting and assembling

    if len(texts) != len(gold_rows) * k:
        raise ValueError(f"tests reward: {len(texts)} completions for {len(gold_rows)} rows x {k} samples")
    return torch.tensor(passes_hidden_tests(texts, gold_rows, k), dtype=torch.float32).view(len(gold_rows), k)


register_reward(
    RewardSpec("tests", "GT-Reward for code: 1 if the program passes the row's hidden tests (sandboxed)", from_gold=tests_rewards)
)
