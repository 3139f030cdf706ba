"""Intrinsic rewards: scored from the policy's own distribution, no label at all."""

from __future__ import annotations

import torch


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
