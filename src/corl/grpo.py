"""GRPO as pure tensor functions (Shao et al. 2024, DeepSeekMath, arXiv:2402.03300).

Shapes: B prompts, K completions per prompt, N = B*K sequences, T completion tokens.
Every function here is tensor-in / tensor-out so that a test can check it against
numbers worked out by hand; the training loop only selects and composes them.
"""

from __future__ import annotations

import torch

LOSS_AGGREGATIONS = ("grpo", "dapo", "dr_grpo")
# corl's earlier name for "dapo" (TRL's own "bnpo" divides by each micro-batch's tokens,
# which is "dapo" when the whole batch is one micro-batch; corl's minibatches never change
# the step, so only the batch-wide divisor exists here).
LOSS_AGGREGATION_ALIASES = {"bnpo": "dapo"}
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


def nucleus_logits(logits: torch.Tensor, top_p: float, keep: torch.Tensor | None = None) -> torch.Tensor:
    """Top-p (nucleus) truncation: logits outside the nucleus set to -inf (Holtzman et al. 2020).

    Exactly vLLM's `apply_top_k_top_p_pytorch` (vllm/v1/sample/ops/topk_topp_sampler.py) and
    transformers' TopPLogitsWarper: sort ascending, and drop each token whose cumulative
    probability, counted from the least likely, is at most 1 - top_p; the most likely token
    always stays. The kept set is a constant for autograd (the kept logits keep their gradient).

    Args:
        logits: [..., V] temperature-scaled logits (float32).
        top_p: the nucleus mass, in (0, 1].
        keep: [...] token ids kept whatever their rank (the tokens actually sampled: a recomputed
            forward that differs from the sampler's in the last bits must not drop a sampled token
            at the nucleus edge to probability 0).
    Returns:
        [..., V] logits, -inf outside the nucleus.
    """
    if top_p >= 1.0:
        return logits
    with torch.no_grad():
        ascending, order = logits.sort(dim=-1)  # [..., V]
        drop = ascending.softmax(dim=-1).cumsum(dim=-1) <= 1 - top_p
        drop[..., -1] = False  # at least one
        drop = drop.scatter(-1, order, drop)  # back to vocabulary order
        if keep is not None:
            drop.scatter_(-1, keep.unsqueeze(-1), False)
    return logits.masked_fill(drop, float("-inf"))


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0, top_p: float = 1.0) -> torch.Tensor:
    """Log-probability of each chosen token under temperature-scaled (and top-p truncated) logits.

    Args:
        logits: [N, T, V] logits that predict tokens[:, t] at position t.
        tokens: [N, T] token ids.
        temperature: the sampling temperature; the policy that produced the samples is
            softmax(logits / temperature), so its log-probs are scored the same way.
        top_p: the sampler's nucleus: below 1 the distribution sampled is softmax over the
            nucleus of logits / temperature, renormalised (`nucleus_logits`), the one vLLM's
            processed_logprobs and the HF engine report, so the trainer scores that one too.
    Returns:
        [N, T] log-probs.
    """
    logits = nucleus_logits(logits.float() / temperature, top_p, tokens)
    # log_softmax(x)[y] = x[y] - logsumexp(x); avoids materialising [N, T, V] log-probs twice.
    chosen = torch.gather(logits, -1, tokens.unsqueeze(-1)).squeeze(-1)  # [N, T]
    return chosen - torch.logsumexp(logits, dim=-1)


def chunked_token_logprobs(
    hidden: torch.Tensor, head, tokens: torch.Tensor, temperature: float = 1.0, chunk: int | None = None, top_p: float = 1.0
) -> torch.Tensor:
    """`token_logprobs(head(hidden), tokens, temperature, top_p)` without holding [N, T, V] logits.

    At a 151k vocabulary the logits of 128 sequences x 512 tokens are 40 GB in float32;
    the hidden states they come from are a few hundred MB. The output projection is
    therefore applied `chunk` positions at a time, and with autograd on each chunk is
    checkpointed: its logits are freed after the forward and recomputed, one chunk at a
    time, in the backward. Peak memory is O(N * chunk * V); the price is one extra
    output-projection forward per chunk in the backward.

    Args:
        hidden: [N, T, H] final hidden states; position t predicts tokens[:, t].
        head: the output projection, [..., H] -> [..., V] (a model's lm_head).
        tokens: [N, T] token ids.
        temperature: as in `token_logprobs`.
        chunk: positions per chunk; None (or >= T) computes all at once, exactly `token_logprobs`.
        top_p: as in `token_logprobs`.
    Returns:
        [N, T] log-probs.
    """

    def piece(h: torch.Tensor, t: torch.Tensor) -> torch.Tensor:  # [N, c, H], [N, c] -> [N, c]
        return token_logprobs(head(h), t, temperature, top_p)

    width = hidden.shape[1]
    if chunk is None or chunk >= width:
        return piece(hidden, tokens)
    from torch.utils.checkpoint import checkpoint

    recompute = torch.is_grad_enabled()  # without autograd nothing is kept past a chunk anyway
    out = []
    for start in range(0, width, chunk):
        h, t = hidden[:, start : start + chunk], tokens[:, start : start + chunk]  # [N, c, H], [N, c]
        out.append(checkpoint(piece, h, t, use_reentrant=False) if recompute else piece(h, t))
    return torch.cat(out, dim=1)


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
    """Reduce a per-token loss to a scalar, as TRL's GRPOTrainer does for its `loss_type`.

    Args:
        per_token: [N, T] loss per token.
        mask: [N, T] 1 for completion tokens, 0 for padding (and for a sequence left out of the loss).
        mode: "grpo" averages tokens within each sequence, then over the N sequences (the
            original GRPO; long answers weigh less per token). "dapo" sums every token and
            divides by the batch's token count (DAPO's token-level loss, Yu et al. 2025,
            arXiv:2503.14476; "bnpo" is accepted as its alias). "dr_grpo" sums tokens and
            divides by N * max_tokens, a constant, removing the length bias (Liu et al. 2025,
            arXiv:2503.20783).
        max_tokens: the completion budget for "dr_grpo" (defaults to T).
    Returns:
        scalar loss.
    """
    mode = LOSS_AGGREGATION_ALIASES.get(mode, mode)
    mask = mask.to(per_token.dtype)
    if mode == "grpo":
        per_seq = (per_token * mask).sum(1) / mask.sum(1).clamp(min=1.0)  # [N]
        return per_seq.mean()
    if mode == "dapo":
        return (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    if mode == "dr_grpo":
        denom = per_token.shape[0] * (max_tokens if max_tokens is not None else per_token.shape[1])
        return (per_token * mask).sum() / denom
    raise ValueError(f"loss aggregation must be one of {LOSS_AGGREGATIONS} (or bnpo, an alias of dapo), got {mode!r}")


IMPORTANCE_SAMPLING = ("token_truncate", "token_mask", "sequence_mask", "off")


def importance_weights(
    old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, mask: torch.Tensor, mode: str = "token_truncate", cap: float = 3.0
) -> torch.Tensor:
    """Truncated importance sampling for a sampler that is not the trained model (vLLM).

    The rollout engine's probabilities differ slightly from the trainer's (kernels,
    precision): the policy-gradient estimate is corrected per token by
    w_t = pi_train_old(y_t) / pi_rollout(y_t), truncated at `cap` (Yao et al. 2025,
    "Your efficient RL framework secretly brings you off-policy RL training"; TRL's and
    the paper's default, cap 3).

    Args:
        old_logprobs: [N, T] log-probs of the sampled tokens under the trainer before the update.
        rollout_logprobs: [N, T] the same tokens' log-probs as the sampler computed them.
        mask: [N, T] 1 on completion tokens.
        mode: "token_truncate" min(w_t, cap); "token_mask" w_t where w_t <= cap, else 0;
            "sequence_mask" the sequence's ratio W = prod_t w_t on each of its tokens where
            W <= cap, else 0; "off" 1. The mask modes are TRL's `vllm_importance_sampling_mode`
            (trl/trainer/grpo_trainer.py: a kept ratio stays the ratio, one outside the bound
            becomes 0; verl's docs/advance/rollout_is.md keeps the true ratio the same way).
    Returns:
        [N, T] weights, no gradient.
    """
    if mode not in IMPORTANCE_SAMPLING:
        raise ValueError(f"importance sampling must be one of {IMPORTANCE_SAMPLING}, got {mode!r}")
    if mode == "off":
        return torch.ones_like(old_logprobs)
    log_ratio = (old_logprobs - rollout_logprobs).detach() * mask  # [N, T]
    if mode == "sequence_mask":
        log_ratio = log_ratio.sum(1, keepdim=True).expand_as(old_logprobs)  # [N, T]: log W of its sequence
    ratio = torch.exp(log_ratio)
    if mode == "token_truncate":
        return torch.clamp(ratio, max=cap)
    return torch.where(ratio <= cap, ratio, torch.zeros_like(ratio))


def mismatch_stats(old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """Per-token log-ratio log pi_train - log pi_rollout over real tokens: its mean, its
    largest magnitude, and the k3 estimate of KL(pi_rollout || pi_train) (a diagnostic)."""
    m = mask.bool()
    if not m.any():
        return {"logratio_mean": 0.0, "logratio_max": 0.0, "kl": 0.0}
    d = (old_logprobs - rollout_logprobs).detach()[m]  # [tokens]
    return {
        "logratio_mean": float(d.mean()),
        "logratio_max": float(d.abs().max()),
        "kl": float((torch.exp(d) - d - 1.0).mean()),
    }


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    aggregation: str = "grpo",
    max_tokens: int | None = None,
    beta: float = 0.0,
    ref_logprobs: torch.Tensor | None = None,
    is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The GRPO loss of one minibatch (clipped objective, optional KL, importance weights).

    Args:
        logprobs: [n, T] under the policy being optimised (with grad).
        old_logprobs: [n, T] under the policy before this update (no grad).
        advantages: [n] one per sequence.
        mask: [n, T] 1 on completion tokens.
        max_tokens: the divisor of "dr_grpo" (the completion budget, a constant).
        ref_logprobs: [n, T] under the frozen reference, needed when beta > 0.
        is_weights: [n, T] importance weights of an off-policy sampler (`importance_weights`).
    Returns:
        (scalar loss, [n, T] bool clip-active mask, [n, T] per-token k3 KL (zeros when beta = 0)).
    """
    per_token, clipped = clipped_policy_loss(logprobs, old_logprobs, advantages, eps_low, eps_high)  # [n, T]
    if is_weights is not None:
        per_token = per_token * is_weights
    kl = torch.zeros_like(per_token)
    if beta > 0:
        if ref_logprobs is None:
            raise ValueError("beta > 0 needs the reference model's log-probs")
        kl = kl_k3(logprobs, ref_logprobs)
        per_token = per_token + beta * kl
    return aggregate_loss(per_token, mask, aggregation, max_tokens=max_tokens), clipped, kl.detach()
