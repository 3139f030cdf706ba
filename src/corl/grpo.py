"""GRPO as pure tensor functions (Shao et al. 2024, DeepSeekMath, arXiv:2402.03300).

Shapes: B prompts, K completions per prompt, N = B*K sequences, T completion tokens.
Every function here is tensor-in / tensor-out so that a test can check it against
numbers worked out by hand; the training loop only selects and composes them.
"""

from __future__ import annotations

import torch

LOSS_AGGREGATIONS = ("grpo", "bnpo", "dr_grpo")
REWARD_SCALINGS = ("group", "none")


def group_advantages(rewards: torch.Tensor, scale: str = "group", eps: float = 1e-4) -> torch.Tensor:
    """Group-relative advantages: each completion's reward minus its prompt's mean.

    Args:
        rewards: [B, K] rewards of the K completions of each of B prompts.
        scale: "group" divides by the group's (unbiased) std, as in GRPO; "none" keeps
            the raw centred reward, as in Dr. GRPO (Liu et al. 2025, arXiv:2503.20783).
        eps: added to the std so that a group whose rewards are all equal (std 0) gets
            advantage exactly 0 rather than 0/0.
    Returns:
        [B, K] advantages.
    """
    if scale not in REWARD_SCALINGS:
        raise ValueError(f"scale must be one of {REWARD_SCALINGS}, got {scale!r}")
    rewards = rewards.float()
    centred = rewards - rewards.mean(dim=1, keepdim=True)  # [B, K]
    if scale == "none":
        return centred
    k = rewards.shape[1]
    std = rewards.std(dim=1, keepdim=True) if k > 1 else torch.zeros_like(centred[:, :1])
    return centred / (std + eps)


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Log-probability of each chosen token under temperature-scaled logits.

    Args:
        logits: [N, T, V] logits that predict tokens[:, t] at position t.
        tokens: [N, T] token ids.
        temperature: the sampling temperature; the policy that produced the samples is
            softmax(logits / temperature), so its log-probs are scored the same way.
    Returns:
        [N, T] log-probs.
    """
    logits = logits.float() / temperature
    # log_softmax(x)[y] = x[y] - logsumexp(x); avoids materialising [N, T, V] log-probs twice.
    chosen = torch.gather(logits, -1, tokens.unsqueeze(-1)).squeeze(-1)  # [N, T]
    return chosen - torch.logsumexp(logits, dim=-1)


def clipped_policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token PPO-clip objective, negated into a loss (Schulman et al. 2017).

    loss_t = -min(r_t * A, clip(r_t, 1 - eps_low, 1 + eps_high) * A), r_t = exp(lp - old_lp).
    Separate eps_low / eps_high allow DAPO's clip-higher (Yu et al. 2025, arXiv:2503.14476).

    Args:
        logprobs: [N, T] log-probs under the policy being optimised (with grad).
        old_logprobs: [N, T] log-probs under the policy that sampled (no grad).
        advantages: [N] one advantage per sequence, broadcast over its tokens.
    Returns:
        ([N, T] per-token loss, [N, T] bool mask of tokens where the clip was active).
    """
    ratio = torch.exp(logprobs - old_logprobs)  # [N, T]
    adv = advantages.unsqueeze(1)  # [N, 1]
    unclipped = ratio * adv
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * adv
    loss = -torch.minimum(unclipped, clipped)
    return loss, clipped < unclipped


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || pi_ref), per token: exp(d) - d - 1, d = ref - lp.

    Unbiased and always >= 0 (http://joschu.net/blog/kl-approx.html).
    Shapes: [N, T] -> [N, T].
    """
    delta = ref_logprobs - logprobs
    return torch.exp(delta) - delta - 1.0


def aggregate_loss(
    per_token: torch.Tensor, mask: torch.Tensor, mode: str = "grpo", max_tokens: int | None = None
) -> torch.Tensor:
    """Reduce a per-token loss to a scalar.

    Args:
        per_token: [N, T] loss per token.
        mask: [N, T] 1 for completion tokens, 0 for padding.
        mode: "grpo" averages tokens within each sequence, then sequences (the original
            GRPO; long answers weigh less per token). "bnpo" averages over all tokens of
            the batch (DAPO's token-level loss). "dr_grpo" sums tokens and divides by
            N * max_tokens, a constant, removing the length bias (Liu et al. 2025).
        max_tokens: the completion budget for "dr_grpo" (defaults to T).
    Returns:
        scalar loss.
    """
    mask = mask.to(per_token.dtype)
    if mode == "grpo":
        per_seq = (per_token * mask).sum(1) / mask.sum(1).clamp(min=1.0)  # [N]
        return per_seq.mean()
    if mode == "bnpo":
        return (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    if mode == "dr_grpo":
        denom = per_token.shape[0] * (max_tokens if max_tokens is not None else per_token.shape[1])
        return (per_token * mask).sum() / denom
    raise ValueError(f"loss aggregation must be one of {LOSS_AGGREGATIONS}, got {mode!r}")
