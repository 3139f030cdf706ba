"""How a completion is scored against its label.

The binary agreement reward of Co-RL, TTRL and GT-Reward: 1 when the completion's final
answer is equivalent to the label, else 0; a prompt without a label scores 0 for all of
its completions, which gives zero advantage (no gradient) under GRPO.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from corl.labels import Vote

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


# -- intrinsic rewards: scored from the policy's own distribution, no label at all ----------


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """[N, T] values, [N, T] mask -> [N] mean over each row's unmasked tokens (0 if none)."""
    mask = mask.to(values.dtype)
    return (values * mask).sum(1) / mask.sum(1).clamp(min=1.0)


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """[N, T, V] logits -> [N, T] entropy H(p_t) = -sum_v p log p, in nats."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def token_self_certainty(logits: torch.Tensor) -> torch.Tensor:
    """[N, T, V] logits -> [N, T] KL(U || p_t) = -log V - mean_v log p_v (Intuitor's self-certainty).

    The direction matters: KL from the uniform distribution *to* p grows as p
    concentrates and is finite even where p has near-zero mass (Zhao et al. 2025,
    arXiv:2505.19590, eq. 3).
    """
    logp = torch.log_softmax(logits.float(), dim=-1)
    vocab = logits.shape[-1]
    return -torch.log(torch.tensor(float(vocab))) - logp.mean(-1)


def entropy_rewards(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """RENT (Prabhudesai et al. 2025, arXiv:2505.22660): minus the mean token entropy. [N]"""
    return -masked_mean(token_entropy(logits), mask)


def self_certainty_rewards(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Intuitor: the mean token self-certainty KL(U || p) of the completion. [N]"""
    return masked_mean(token_self_certainty(logits), mask)


INTRINSIC_REWARDS = {"entropy": entropy_rewards, "self_certainty": self_certainty_rewards}
