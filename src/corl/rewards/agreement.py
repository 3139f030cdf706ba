"""The agreement reward: how a completion is scored against its label.

The binary agreement reward of Co-RL, TTRL and GT-Reward: 1 when the completion's final
answer is equivalent to the label, else 0; a prompt without a label scores 0 for all of
its completions, which gives zero advantage (no gradient) under GRPO.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from corl.labels.vote import Vote

Equivalence = Callable[[str, str], bool]


def agreement_rewards(
    answers: Sequence[Sequence[str | None]],
    keys: Sequence[Sequence[str | None]],
    labels: Sequence[Vote | None],
    equivalent: Equivalence,
) -> torch.Tensor:
    """[B][K] answers and keys, [B] labels -> [B, K] float rewards in {0, 1}.

    Equal canonical keys agree at once; different keys get the careful (slower)
    equivalence check, memoised per (answer, label) since a step repeats few pairs.
    """
    cache: dict[tuple[str, str], bool] = {}
    rows = []
    for group_answers, group_keys, label in zip(answers, keys, labels, strict=True):
        row = []
        for answer, key in zip(group_answers, group_keys, strict=True):
            if label is None or answer is None:
                row.append(0.0)
            elif key == label.key:
                row.append(1.0)
            else:
                pair = (answer, label.answer)
                if pair not in cache:
                    cache[pair] = bool(equivalent(answer, label.answer))
                row.append(float(cache[pair]))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float32)
