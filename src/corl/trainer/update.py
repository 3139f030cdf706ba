"""One agent's GRPO update: minibatches of `grpo.policy_loss` summed into one optimizer step per pass.

The data-parallel ranks of an agent (`corl.parallel.DataParallel`) enter only through its
small interface: `sum` / `max` (agree on whole-batch sizes), `loss_scale`, `sum_gradients`,
`clip_grad_norm` and `fsdp` (every forward is then a collective, so ranks stay paired).
In a single process every one of them is the identity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from corl.grpo import group_advantages, importance_weights, mismatch_stats, policy_loss
from corl.rollout import Rollout, SamplingParams, SyncStats
from corl.rollout.base import pad_right
from corl.tracking.health import weight_norm
from corl.trainer.logprobs import sequence_logprobs
from corl.trainer.packing import can_pack, packed_logprobs, sequence_tokens, token_microbatches


@dataclass
class UpdateStats:
    loss: float = 0.0
    clip_fraction: float = 0.0
    kl: float = 0.0
    grad_norm: float = 0.0
    optimizer_steps: int = 0
    active_sequences: int = 0  # sequences with non-zero advantage (the rest carry no gradient)
    masked_sequences: int = 0  # sequences left out of the loss (truncated ones under cohort.truncated_answers: drop)
    sync: SyncStats = field(default_factory=SyncStats)  # pushing the new weights to the rollout engine
    mismatch: dict = field(default_factory=dict)  # sampler vs trainer log-ratio statistics (grpo.mismatch_stats)
    skipped_nonfinite: bool = False  # a pass's loss or gradient was NaN/inf: its optimizer step was skipped
    weight_norm: float = 0.0  # L2 norm of all the model's weights after the update
    weight_norm_ratio: float = 1.0  # that norm over the norm before the update (health.max_weight_norm_ratio)
    frozen: bool = False  # agents[].train: false: no update was attempted
    lr: float | None = None  # the learning rate this update used (grpo.lr_scheduler_type moves it between steps)

    def as_dict(self) -> dict[str, float]:
        if self.frozen:  # a loss of 0 would read as a trained agent's; say what happened instead
            return {"frozen": 1.0, "optimizer_steps": 0}
        out = {
            "loss": self.loss,
            "clip_fraction": self.clip_fraction,
            "kl": self.kl,
            "grad_norm": self.grad_norm,
            "optimizer_steps": self.optimizer_steps,
            "active_sequences": self.active_sequences,
            "masked_sequences": self.masked_sequences,
            "sync_s": self.sync.seconds,
            "sync_bytes": self.sync.bytes,
            "skipped_nonfinite": float(self.skipped_nonfinite),
            "weight_norm": self.weight_norm,
            "weight_norm_ratio": self.weight_norm_ratio,
        }
        out.update({f"mismatch_{k}": v for k, v in self.mismatch.items()})
        if self.lr is not None:
            out["lr"] = self.lr
        return out


@dataclass
class Minibatches:
    """What one update works on: advantages, the loss mask and the rows of each minibatch,
    with the whole batch's sizes agreed over the agent's dp ranks."""

    advantages: torch.Tensor  # [N]
    mask: torch.Tensor  # [N, C] completion tokens that carry loss
    batches: list[torch.Tensor]  # rows of each of this rank's minibatches
    widths: list[int]  # each minibatch's longest completion
    count: int  # minibatches per pass, the same on every rank
    n_total: int  # sequences in the whole batch
    n_active: int  # of which carry signal
    n_masked: int  # of which are left out of the loss
    total_tokens: torch.Tensor  # loss tokens in the whole batch (at least 1)
    packed: bool = False  # each minibatch runs as one packed row without padding (grpo.padding_free)


def plan_minibatches(agent, rollout: Rollout, rewards: torch.Tensor, exclude: torch.Tensor | None) -> Minibatches:
    """Advantages, the loss mask and minibatches of the active rows (collectives: every rank calls it)."""
    cfg, dp = agent.grpo, agent.dp
    device = rollout.input_ids.device
    advantages = group_advantages(rewards, cfg.scale_rewards).flatten().to(device)  # [N]
    keep = torch.ones_like(advantages, dtype=torch.bool) if exclude is None else ~exclude.to(device)  # [N]
    mask = rollout.completion_mask.float() * keep.unsqueeze(1)  # [N, C]
    # With beta = 0 a zero-advantage sequence contributes exactly zero loss and gradient,
    # so it is left out of the forward pass and the loss is rescaled to the full batch.
    # On CPU this often halves the cost of a step. With beta > 0 the KL term needs all.
    active = torch.nonzero(keep if cfg.beta > 0 else keep & (advantages != 0)).flatten()
    # minibatch_size bounds memory only: minibatches accumulate into one optimizer
    # step per pass, so the update is the same whatever its value.
    minibatch = cfg.minibatch_size or max(active.numel(), 1)
    # whole-batch sizes over the dp ranks (identity in a single process)
    counts = [advantages.shape[0], float(mask.sum()), active.numel(), float((~keep).sum())]
    sizes = dp.sum(torch.tensor(counts, dtype=torch.float64))
    lengths = rollout.completion_lengths  # [N]
    budget = cfg.max_tokens_per_microbatch
    if budget is not None:  # micro-batches by tokens (corl.trainer.packing), sorted by length
        packed = cfg.padding_free and can_pack(agent.model, rollout)
        active = active[torch.sort(lengths[active], stable=True).indices]
        tokens = sequence_tokens(rollout)
        batches = token_microbatches(active, lengths, tokens, budget, cfg.minibatch_size, packed, rollout.prompt_length)
        count = int(dp.max(torch.tensor([len(batches)]))[0])  # per pass, the same on every rank
        widths = [max(int(lengths[rows].max()), 1) for rows in batches]
        total_tokens = torch.tensor(float(sizes[1]), device=device).clamp(min=1.0)
        n_total, n_active, n_masked = int(sizes[0]), int(sizes[2]), int(sizes[3])
        return Minibatches(advantages, mask, batches, widths, count, n_total, n_active, n_masked, total_tokens, packed)
    count = int(dp.max(torch.tensor([-(-active.numel() // minibatch)]))[0])  # per pass, the same on every rank
    if count > 1 and active.numel():
        # Length buckets: with the active rows sorted by completion length, each minibatch
        # holds sequences of similar length and is trimmed to its own longest (below). The
        # step is unchanged (minibatches sum into one step), only the padding goes. A single
        # minibatch keeps its order: its loss then sums in the same order as before.
        active = active[torch.sort(lengths[active], stable=True).indices]
    batches = [active[i : i + minibatch] for i in range(0, active.numel(), minibatch)]  # rows of each minibatch
    widths = [max(int(lengths[rows].max()), 1) for rows in batches]  # each minibatch's longest completion
    total_tokens = torch.tensor(float(sizes[1]), device=device).clamp(min=1.0)
    return Minibatches(advantages, mask, batches, widths, count, int(sizes[0]), int(sizes[2]), int(sizes[3]), total_tokens)


def grpo_update(
    agent, rollout: Rollout, rewards: torch.Tensor, params: SamplingParams, exclude: torch.Tensor | None = None
) -> UpdateStats:
    """One GRPO update of `agent` (a `corl.trainer.Agent`) on its rollouts and rewards ([B, K]).

    See `Agent.update` for what `exclude` and data parallelism mean.
    """
    if rewards.numel() != rollout.completion_mask.shape[0]:
        # a reward for each sequence trained on, and no sequence without one (votes_per_prompt:
        # the update is handed the first K of each prompt's V, never all of them)
        raise ValueError(f"{rewards.numel()} rewards for {rollout.completion_mask.shape[0]} sequences: they must pair up")
    cfg = agent.grpo
    plan = plan_minibatches(agent, rollout, rewards, exclude)
    stats = UpdateStats(active_sequences=plan.n_active, masked_sequences=plan.n_masked)
    norm_before = weight_norm(agent.model)  # a collective under FSDP: every rank gets here
    if plan.n_active == 0:  # the loss is identically zero on every rank: no optimizer step
        stats.weight_norm = norm_before
        agent.after_update(stats, stepped=False)
        return stats

    agent.model.train()
    temperature = params.temperature
    # The policy before this update (for passes after the first) and the KL reference, scored
    # minibatch by minibatch as the loss is: one batch-wide forward would hold every row's
    # activations at once ([N, C, V] logits for a model the chunked head does not cover).
    old = frozen_logprobs(agent, agent.model, rollout, plan, temperature) if cfg.num_passes > 1 else None
    ref = None
    if agent.reference is not None:
        # sharded as the policy is under FSDP2 (models.prepare_reference): gathered as the policy is
        ref = frozen_logprobs(agent, agent.reference, rollout, plan, temperature, agent.dp.gathered(agent.reference))
    mismatch: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    losses, clips, kls, norms = [], [], [], []
    for pass_index in range(cfg.num_passes):
        agent.optimizer.zero_grad(set_to_none=True)
        pass_loss, pass_clip, pass_kl = one_pass(agent, rollout, plan, params, old, ref, mismatch if pass_index == 0 else None)
        agent.dp.sum_gradients(agent.model.parameters())
        norm = agent.dp.clip_grad_norm(agent.model.parameters(), cfg.max_grad_norm)
        losses.append(pass_loss)
        clips.append(pass_clip)
        kls.append(pass_kl)
        norms.append(norm)
        # A NaN/inf loss or gradient (a NaN reward, an overflow) would poison every weight:
        # skip the step (the norm is the summed gradient's, the same on every dp rank).
        if not math.isfinite(norm) or (agent.dp.size == 1 and not math.isfinite(pass_loss)):
            stats.skipped_nonfinite = True
            agent.optimizer.zero_grad(set_to_none=True)
            continue
        agent.optimizer.step()
        stats.optimizer_steps += 1
    if mismatch:
        stats.mismatch = mismatch_stats(*(torch.cat(parts) for parts in zip(*mismatch)))
    # each rank measured its share of the whole batch's loss, clipping and KL
    losses, clips, kls = agent.dp.sum(torch.tensor([losses, clips, kls], dtype=torch.float64)).tolist()
    stats.loss = sum(losses) / len(losses)
    stats.clip_fraction = sum(clips) / len(clips)
    stats.kl = sum(kls) / len(kls)
    stats.grad_norm = sum(norms) / len(norms)
    stats.weight_norm = weight_norm(agent.model)
    stats.weight_norm_ratio = stats.weight_norm / norm_before if norm_before > 0 else 1.0
    agent.after_update(stats, stepped=stats.optimizer_steps > 0)
    return stats


def one_pass(agent, rollout: Rollout, plan: Minibatches, params: SamplingParams, old_logprobs, ref_logprobs, mismatch):
    """Forward and backward every minibatch once (gradients accumulate); returns this rank's
    share of the pass's (loss, clip fraction, KL). `mismatch` (first pass only) collects the
    sampler-vs-trainer log-probs."""
    cfg, dp = agent.grpo, agent.dp
    temperature = params.temperature
    # Only a sampler with its own copy of the weights (vLLM) needs the correction; HF
    # generate samples from the trained weights themselves.
    correct = rollout.separate_sampler and rollout.sampling_logprobs is not None and cfg.importance_sampling != "off"
    pass_loss, pass_clip, pass_kl = 0.0, 0.0, 0.0
    for i in range(plan.count):
        if i >= len(plan.batches):
            if dp.fsdp:
                keep_paired(agent.model, rollout, temperature)
            continue
        rows, width = plan.batches[i], plan.widths[i]
        logprobs = minibatch_logprobs(agent.model, rollout, rows, temperature, width, plan.packed)  # [n, width]
        old = old_logprobs[i] if old_logprobs is not None else logprobs.detach()
        m = plan.mask[rows, :width]
        sampled = rollout.sampling_logprobs[rows, :width] if rollout.sampling_logprobs is not None else None
        weights = None
        if sampled is not None and mismatch is not None:
            # widths differ between minibatches: padded back to C (mask 0) to be concatenated
            c = plan.mask.shape[1]
            mismatch.append((pad_right(old.detach(), c, 0.0), pad_right(sampled, c, 0.0), pad_right(m, c, 0.0)))
        if correct:
            weights = importance_weights(old, sampled, m, cfg.importance_sampling, cfg.importance_sampling_cap)
        loss, clipped, kl = policy_loss(
            logprobs,
            old,
            plan.advantages[rows],
            m,
            eps_low=cfg.epsilon_low,
            eps_high=cfg.epsilon_high,
            aggregation=cfg.loss_aggregation,
            max_tokens=params.max_new_tokens,
            beta=cfg.beta,
            ref_logprobs=ref_logprobs[i] if ref_logprobs is not None else None,
            is_weights=weights,
        )
        loss = loss * batch_share(cfg.loss_aggregation, rows, m, plan.n_total, plan.total_tokens)
        (loss * dp.loss_scale).backward()
        pass_loss += float(loss.detach())
        pass_clip += float((clipped.float() * m).sum() / plan.total_tokens)
        pass_kl += float((kl * m).sum() / plan.total_tokens)
    return pass_loss, pass_clip, pass_kl


def keep_paired(model, rollout: Rollout, temperature: float) -> None:
    """Under FSDP every forward/backward is a collective: a rank with fewer minibatches than
    its peers runs a zero-weight one to keep them paired."""
    row = torch.zeros(1, dtype=torch.long, device=rollout.input_ids.device)
    (sequence_logprobs(model, rollout, row, temperature).sum() * 0.0).backward()


def frozen_logprobs(agent, model, rollout: Rollout, plan: Minibatches, temperature: float, context=None) -> list[torch.Tensor]:
    """Log-probs under `model` without autograd, one forward per minibatch: [n_i, widths[i]] each.

    `context` wraps the forwards (default: `agent.generating`, which gathers an FSDP-sharded
    policy, so that each rank may run as many forwards as its own minibatches need).
    """
    with torch.no_grad(), context if context is not None else agent.generating():
        return [
            minibatch_logprobs(model, rollout, rows, temperature, w, plan.packed)
            for rows, w in zip(plan.batches, plan.widths, strict=True)
        ]


def minibatch_logprobs(model, rollout: Rollout, rows: torch.Tensor, temperature: float, width: int, packed: bool):
    """Log-probs of one minibatch's completions: [n, width]; packed into one row where the plan says so
    (0 past each completion, where the padded forward scores padding; the loss mask drops both)."""
    if packed and can_pack(model, rollout):
        return packed_logprobs(model, rollout, rows, temperature, width)
    return sequence_logprobs(model, rollout, rows, temperature, width)


def batch_share(aggregation: str, rows: torch.Tensor, mask: torch.Tensor, n_total: int, total_tokens: torch.Tensor):
    """Scale a minibatch loss so that it equals its part of the full-batch loss."""
    if aggregation == "dapo":  # the whole batch's token count divides every token's loss
        return mask.sum() / total_tokens
    return rows.numel() / n_total
