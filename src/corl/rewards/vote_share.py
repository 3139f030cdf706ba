"""`vote_share`: a soft peer reward, the share of the teacher's answered samples that give the completion's answer.

reward[b][k] = (sum of count_j over the label's vote entries j that agree with answer[b][k]) / answered,
where the entries are `label.shares` (key, answer as first written, count), answered = the sum
of all entries' counts (the teacher's samples that have an answer), and agreeing is the
agreement reward's rule: equal vote keys, else the task's equivalence of the answer with the
entry's answer. It is the agreement reward averaged over a label drawn uniformly from the
teacher's answered samples: exactly the expectation of the `random` control's reward (that
control draws among the answered samples only), without its sampling noise. Teacher 1, 1, 2,
(none): answer 1 earns 2/3 and answer 2 earns 1/3, as `random` labels 1 with probability 2/3.

So it cannot exceed 1, a completion without an answer or a prompt without a label earns 0,
and a hedge (several answers at once) earns only what the task's equivalence grants it
against each entry, as under agreement. Whether a label is given at all is the label source's
business (cohort.min_agreement counts the unanswered samples: `Vote.agreement`). A label from
a source that does not record its vote (`shares` empty) counts as its winner alone:
count / total for a match, else 0 (its answered count is unknown).

Abstaining does not pay where a group is its own teacher (one agent): with counts c_j over its
K samples (A = sum c_j answered, S = sum c_j^2), the group's mean reward is S / (A K) <= A / K,
and giving the majority answer c* in one more sample raises it ((S + 2c* + 1) A >= S (A + 1),
since S <= c* A): a smaller denominator never makes leaving samples unanswered worth it.
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
        answered = sum(c for _, _, c in label.shares) if label.shares else label.total
        rows.append(
            [
                0.0 if answer is None else sum(c for k, a, c in entries if agrees(answer, key, k, a)) / answered
                for answer, key in zip(group_answers, group_keys, strict=True)
            ]
        )
    return torch.tensor(rows, dtype=torch.float32)


register_reward(
    RewardSpec(
        "vote_share",
        "soft peer reward: the share of the teacher's answered samples that give the completion's answer",
        from_samples=vote_share_rewards,
    )
)
