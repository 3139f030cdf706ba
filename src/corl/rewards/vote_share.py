"""`vote_share`: a soft peer reward, the share of the teacher's samples that give the completion's answer.

reward[b][k] = (sum of count_j over the label's vote entries j that agree with answer[b][k]) / total,
where the entries are `label.shares` (key, answer as first written, count) and agreeing is
the agreement reward's rule: equal vote keys, else the task's equivalence of the answer with
the entry's answer. It is the agreement reward averaged over a label drawn uniformly from
the teacher's K samples (an unanswered sample agrees with nothing): the expectation of the
`random` control's reward, without its sampling noise.

So it cannot exceed 1, a completion without an answer or a prompt without a label earns 0,
and a hedge (several answers at once) earns only what the task's equivalence grants it
against each entry, as under agreement. A label from a source that does not record its vote
(`shares` empty) counts as its winner alone: count / total for a match, else 0.
"""

from __future__ import annotations

import torch

from corl.rewards.registry import RewardInputs, RewardSpec, register_reward


def vote_share_rewards(inputs: RewardInputs) -> torch.Tensor:
    """[B][K] answers against [B] labels' votes -> [B, K] shares in [0, 1]."""
    cache: dict[tuple[str, str], bool] = {}  # a step repeats few (answer, entry) pairs; equivalence is slow

    def agrees(answer: str, key: str | None, entry_key: str, entry_answer: str) -> bool:
        if key == entry_key:
            return True
        if (answer, entry_answer) not in cache:
            cache[(answer, entry_answer)] = bool(inputs.equivalent(answer, entry_answer))
        return cache[(answer, entry_answer)]

    rows = []
    for group_answers, group_keys, label in zip(inputs.answers, inputs.keys, inputs.labels, strict=True):
        if label is None or not label.total:
            rows.append([0.0] * len(group_answers))
            continue
        entries = label.shares or ((label.key, label.answer, label.count),)
        rows.append(
            [
                0.0 if answer is None else sum(c for k, a, c in entries if agrees(answer, key, k, a)) / label.total
                for answer, key in zip(group_answers, group_keys, strict=True)
            ]
        )
    return torch.tensor(rows, dtype=torch.float32)


register_reward(
    RewardSpec(
        "vote_share",
        "soft peer reward: the share of the teacher's samples that give the completion's answer",
        from_samples=vote_share_rewards,
    )
)
