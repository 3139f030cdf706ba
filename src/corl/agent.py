"""One cohort member: a policy with its own weights, optimizer and prompt wording.

Agents never share parameters, gradients or optimizer state; the only thing that
crosses between them is the answers table (see `corl.cohort`).
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from corl.checkpoint_sharded import SHARDED_FOLDER, load_sharded, save_sharded
from corl.config import AgentConfig, ComputeConfig, GRPOConfig, RolloutConfig
from corl.data import IMAGES_INPUT, Problem, PromptTemplate
from corl.grpo import (
    chunked_token_logprobs,
    group_advantages,
    importance_weights,
    mismatch_stats,
    policy_loss,
    token_logprobs,
)
from corl.health import weight_norm
from corl.models import prepare_frozen, prepare_model, save_policy
from corl.parallel import DataParallel
from corl.rollout import Rollout, SamplingParams, SyncStats, build_engine
from corl.rollout.base import Prompt, pad_right

# Logits held at once by the chunked output projection: 2**24 floats are 64 MB in float32.
# A step's peak then grows with the hidden states ([n, C, H]), not with the vocabulary.
LOGIT_CHUNK_ELEMENTS = 2**24

# Causal LMs whose logits are exactly lm_head(final hidden state): no soft-capping or
# scaling after the head, so applying the head ourselves, in chunks, changes nothing.
# Any other model takes the plain forward (only the completion positions' logits kept).
PLAIN_HEAD_MODEL_TYPES = frozenset(
    {"llama", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "mistral", "mixtral", "gpt2", "phi3", "olmo2", "smollm3", "starcoder2"}
)


def _forward_inputs(rollout: Rollout, rows: torch.Tensor, width: int) -> dict[str, torch.Tensor]:
    """Model inputs that predict the first `width` completion tokens of rows `rows`.

    Causal attention: a position never sees later ones, so columns past the last token to
    predict can be cut (the last completion token itself is never an input).
    """
    end = rollout.prompt_length + width - 1
    if rollout.vision is not None:
        # The prompts' own images and processor inputs (sequence r is prompt r // K); the model
        # derives its positions (Qwen2-VL's M-RoPE) from them, as generate did.
        completion = rollout.input_ids[rows, rollout.prompt_length : end]  # [n, width - 1]
        mask = rollout.attention_mask[rows, rollout.prompt_length : end]
        prompts = rollout.vision.select(rows.cpu() // rollout.num_samples)
        return {**prompts.model_kwargs(completion, mask), "use_cache": False}
    input_ids = rollout.input_ids[rows, :end]  # [n, P + width - 1]
    attention_mask = rollout.attention_mask[rows, :end]
    # Left padding shifts positions; count them from the first real token, as generate does.
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    # use_cache=False: a scoring forward never decodes further, so a KV cache would be held for nothing
    return {"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": position_ids, "use_cache": False}


def _root(model):
    return model.get_base_model() if hasattr(model, "get_base_model") else model  # under a peft wrapper


def _sharded(model) -> bool:
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # a torch built without distributed
        return False
    return isinstance(_root(model), FSDPModule)


class _HeadInput:
    """A forward pre-hook on the output projection: it keeps the hidden states it is given
    and passes the head an empty slice, so the model's own forward computes no logits.
    It also notes the autocast state (bf16 training wraps forward), to apply the head in it."""

    def __init__(self) -> None:
        self.hidden: torch.Tensor | None = None  # [n, S, H]
        self.autocast: tuple[str, torch.dtype, bool] | None = None

    def __call__(self, module, args):
        (hidden,) = args
        device = hidden.device.type
        self.hidden = hidden
        self.autocast = (device, torch.get_autocast_dtype(device), torch.is_autocast_enabled(device))
        return (hidden[:, :0],)


def completion_hidden(model, rollout: Rollout, rows: torch.Tensor, width: int):
    """Final hidden states before the completion tokens, and the head that maps them to logits.

    Returns ([n, width, H] hidden states, head: [..., H] -> [..., V], V), or None for a model
    whose logits are not the plain head of its hidden states (or whose head is FSDP-sharded).
    """
    lm_head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if (
        rollout.vision is not None
        or lm_head is None
        or getattr(model.config, "model_type", None) not in PLAIN_HEAD_MODEL_TYPES
        or _sharded(model)
    ):
        return None
    capture = _HeadInput()
    handle = lm_head.register_forward_pre_hook(capture)
    try:
        model(**_forward_inputs(rollout, rows, width))
    finally:
        handle.remove()
    device, dtype, enabled = capture.autocast

    def head(h: torch.Tensor) -> torch.Tensor:  # [..., H] -> [..., V]
        with torch.autocast(device, dtype=dtype, enabled=enabled):
            return lm_head(h)

    vocab = getattr(lm_head, "out_features", None) or model.config.vocab_size
    return capture.hidden[:, -width:], head, vocab


def completion_logits(model, rollout: Rollout, rows: torch.Tensor, width: int | None = None) -> torch.Tensor:
    """Logits that predict the first `width` (default: all C) completion tokens of rows `rows`: [n, width, V].

    Holds [n, width, V]: the update and the logit rewards go through `completion_hidden`
    where they can, and come here only for models it does not handle.
    """
    width = width or rollout.completion_ids.shape[1]
    inputs = _forward_inputs(rollout, rows, width)
    if "logits_to_keep" in inspect.signature(_root(model).forward).parameters:
        inputs["logits_to_keep"] = width  # transformers' causal LMs: only these positions go through the head
    return model(**inputs).logits[:, -width:]  # [n, width, V]


def sequence_logprobs(model, rollout: Rollout, rows: torch.Tensor, temperature: float, width: int | None = None) -> torch.Tensor:
    """Log-probs of the first `width` (default: all C) completion tokens of rows `rows` under `model`: [n, width].

    The head runs in chunks of positions (grpo.chunked_token_logprobs): no [n, C, V] logits.
    """
    width = width or rollout.completion_ids.shape[1]
    tokens = rollout.input_ids[rows, rollout.prompt_length : rollout.prompt_length + width]  # [n, width]
    split = completion_hidden(model, rollout, rows, width)
    if split is None:
        logits = completion_logits(model, rollout, rows, width)  # [n, width, V]
        if rollout.suppressed_ids:  # the sampler's distribution had them at -inf: score the same one
            logits = logits.index_fill(-1, torch.tensor(rollout.suppressed_ids, device=logits.device), float("-inf"))
        return token_logprobs(logits, tokens, temperature)
    hidden, head, vocab = split
    chunk = max(1, LOGIT_CHUNK_ELEMENTS // max(hidden.shape[0] * vocab, 1))
    return chunked_token_logprobs(hidden, head, tokens, temperature, chunk)


def vision_parameters(model) -> list[torch.nn.Parameter]:
    """A vision-language model's vision encoder and projector: every parameter outside its
    language model (`get_decoder()`) and output head."""
    language = {id(p) for p in model.get_decoder().parameters()} | {id(p) for p in model.get_output_embeddings().parameters()}
    return [p for p in model.parameters() if id(p) not in language]


@torch.no_grad()
def ema_update(ema_model: torch.nn.Module, model: torch.nn.Module, momentum: float) -> None:
    """ema <- momentum * ema + (1 - momentum) * online, parameter by parameter."""
    for e, p in zip(ema_model.parameters(), model.parameters(), strict=True):
        e.lerp_(p.detach(), 1.0 - momentum)


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

    def as_dict(self) -> dict[str, float]:
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
        return out


class Agent:
    """A policy plus everything it needs to sample and to update itself."""

    def __init__(
        self,
        config: AgentConfig,
        model,
        tokenizer,
        template: PromptTemplate,
        prompt_field: str,
        grpo: GRPOConfig,
        rollout: RolloutConfig | None = None,
        ema_momentum: float | None = None,
        dp: DataParallel | None = None,
        compute: ComputeConfig | None = None,
        processor=None,
    ):
        self.config = config
        self.name = config.name
        self.tokenizer = tokenizer
        self.processor = processor  # a vision-language model's (images + text); None for a text model
        self.template = template
        self.prompt_field = prompt_field  # key into Problem.texts: this agent's wording
        self.grpo = grpo
        self.dp = dp or DataParallel()  # the ranks that share this agent's model (size 1: just this one)
        rollout = rollout or RolloutConfig()
        # Frozen copies come first, from the plain model: they never train, shard or carry adapters.
        self.reference = None
        if grpo.beta > 0:
            # Only with a KL term is a frozen copy of the initial policy worth its memory.
            self.reference = prepare_frozen(copy.deepcopy(model).eval().requires_grad_(False), compute)
        self.ema_momentum = ema_momentum
        self.teacher = None  # Co-rewarding-II: a slowly moving copy of this agent labels it
        self.teacher_engine = None
        if ema_momentum is not None:
            self.teacher = prepare_frozen(copy.deepcopy(model).eval().requires_grad_(False), compute)
            self.teacher_engine = build_engine(
                rollout, self.teacher, tokenizer, add_special_tokens=not template.chat, processor=processor
            )
        if config.freeze_vision:
            if processor is None:
                raise ValueError(f"agent {config.name!r}: freeze_vision is set but its model is not a vision-language model")
            for parameter in vision_parameters(model):
                parameter.requires_grad_(False)
        # Gradient checkpointing, LoRA, FSDP sharding, bf16 (compute: / distributed:), then the optimizer.
        self.model = model = prepare_model(model, compute, self.dp)
        # Chat templates already contain BOS; adding special tokens again would double it.
        self.engine = build_engine(rollout, model, tokenizer, add_special_tokens=not template.chat, processor=processor)
        trainable = [p for p in model.parameters() if p.requires_grad]  # all of them, or only the LoRA adapters
        self.optimizer = torch.optim.AdamW(trainable, lr=config.lr, weight_decay=config.weight_decay)

    def prompts(self, problems: list[Problem], text_key: str | None = None) -> list[Prompt]:
        """Rendered prompts in this agent's wording (or in the wording `text_key`).

        A vision-language agent's prompts are ImagePrompts: the problem's images (Problem.inputs
        "images", none for a text-only row) before the text, in its processor's chat template.
        """
        key = text_key or self.prompt_field
        if self.processor is None:
            return [self.template.render(p.texts[key], self.tokenizer) for p in problems]
        from corl.vision.inputs import image_prompt

        return [image_prompt(self.processor, self.template.text(p.texts[key]), p.inputs.get(IMAGES_INPUT)) for p in problems]

    def generating(self):
        """Context for generation and no-grad passes: under FSDP it gathers the whole model
        (every rank of the agent enters together); otherwise it does nothing."""
        return self.dp.gathered(self.model)

    def sample(self, problems: list[Problem], num_samples: int, params: SamplingParams) -> Rollout:
        with self.generating():
            rollout = self.engine.generate(self.prompts(problems), num_samples, params)
        # vLLM's sleep mode (GPUs) frees the engine's memory while the agent trains; the weight
        # sync and the next generate wake it. The HF engine shares the weights: nothing to free.
        self.engine.sleep()
        return rollout

    def sample_teacher(self, problems: list[Problem], num_samples: int, params: SamplingParams) -> Rollout:
        """Samples of the EMA teacher (Co-rewarding-II); only agents built with ema_momentum have one."""
        if self.teacher_engine is None:
            raise RuntimeError(f"agent {self.name!r} has no EMA teacher (label source 'ema' builds one)")
        rollout = self.teacher_engine.generate(self.prompts(problems), num_samples, params)
        self.teacher_engine.sleep()
        return rollout

    def close(self) -> None:
        """Release the rollout engines (a vLLM engine holds memory until closed)."""
        for engine in (self.engine, self.teacher_engine):
            if engine is not None:
                engine.close()

    @torch.no_grad()
    def logit_rewards(self, rollout: Rollout, reward_fn, temperature: float, batch: int = 64) -> torch.Tensor:
        """Rewards scored from this policy's own logits (RENT, Intuitor): [B, K].

        reward_fn: [n, C, V] logits, [n, C] mask -> [n] (a reward's `from_logits`).
        """
        self.model.eval()
        out = []
        n, width = rollout.completion_mask.shape
        mask = rollout.completion_mask
        with self.generating():
            for start in range(0, n, batch):  # the backbone's activations: `batch` rows at a time
                rows = torch.arange(start, min(start + batch, n), device=rollout.input_ids.device)
                split = completion_hidden(self.model, rollout, rows, width)
                if split is None:
                    out.append(reward_fn(completion_logits(self.model, rollout, rows).float() / temperature, mask[rows]))
                    continue
                hidden, head, vocab = split  # [n, C, H]
                # reward_fn wants whole sequences' logits: as many rows at once as the logit budget
                # allows (at least one, [1, C, V]), not `batch` rows' [batch, C, V].
                step = max(1, LOGIT_CHUNK_ELEMENTS // max(width * vocab, 1))
                for i in range(0, rows.numel(), step):
                    logits = head(hidden[i : i + step]).float() / temperature  # [step, C, V]
                    out.append(reward_fn(logits, mask[rows[i : i + step]]))
        return torch.cat(out).view(-1, rollout.num_samples).cpu()

    def update(
        self, rollout: Rollout, rewards: torch.Tensor, params: SamplingParams, exclude: torch.Tensor | None = None
    ) -> UpdateStats:
        """One GRPO update on this agent's own rollouts and rewards ([B, K]), then the new
        weights go to the rollout engine.

        `exclude` ([N] bool) leaves sequences out of the loss (cohort.truncated_answers: drop),
        as TRL's mask_truncated_completions: their tokens are masked (no loss, no KL, not counted
        by dapo's token total), while their rewards still count in their group's advantages
        and they still count as sequences for grpo's and dr_grpo's divisor.

        With data parallelism (`self.dp`: D ranks, each holding a shard of the batch) every
        rank scales its loss by the *whole* batch's sizes and the ranks' gradients are summed,
        so the step is the single-process step on the whole batch. The ranks first agree on
        those sizes, so all of them run the same collectives even when some have no sequence
        with signal.
        """
        cfg = self.grpo
        dp = self.dp
        temperature = params.temperature
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
        minibatches = int(dp.max(torch.tensor([-(-active.numel() // minibatch)]))[0])  # per pass, the same on every rank
        n_total, n_active = int(sizes[0]), int(sizes[2])
        total_tokens = torch.tensor(float(sizes[1]), device=device).clamp(min=1.0)
        stats = UpdateStats(active_sequences=n_active, masked_sequences=int(sizes[3]))
        norm_before = weight_norm(self.model)  # a collective under FSDP: every rank gets here
        if n_active == 0:  # the loss is identically zero on every rank: no optimizer step
            stats.weight_norm = norm_before
            self._after_step(stats, stepped=False)
            return stats

        self.model.train()
        lengths = rollout.completion_lengths  # [N]
        if minibatches > 1 and active.numel():
            # Length buckets: with the active rows sorted by completion length, each minibatch
            # holds sequences of similar length and is trimmed to its own longest (below). The
            # step is unchanged (minibatches sum into one step), only the padding goes. A single
            # minibatch keeps its order: its loss then sums in the same order as before.
            active = active[torch.sort(lengths[active], stable=True).indices]
        batches = [active[i : i + minibatch] for i in range(0, active.numel(), minibatch)]  # rows of each minibatch
        widths = [max(int(lengths[rows].max()), 1) for rows in batches]  # each minibatch's longest completion
        # The policy before this update (for passes after the first) and the KL reference, scored
        # minibatch by minibatch as the loss is: one batch-wide forward would hold every row's
        # activations at once ([N, C, V] logits for a model the chunked head does not cover).
        old_logprobs = self._frozen_logprobs(self.model, rollout, batches, widths, temperature) if cfg.num_passes > 1 else None
        ref_logprobs = None
        if self.reference is not None:
            ref_logprobs = self._frozen_logprobs(self.reference, rollout, batches, widths, temperature, contextlib.nullcontext())
        # Only a sampler with its own copy of the weights (vLLM) needs the correction; HF
        # generate samples from the trained weights themselves.
        correct = rollout.separate_sampler and rollout.sampling_logprobs is not None and cfg.importance_sampling != "off"
        mismatch: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

        losses, clips, kls, norms = [], [], [], []
        for pass_index in range(cfg.num_passes):
            self.optimizer.zero_grad(set_to_none=True)
            pass_loss, pass_clip, pass_kl = 0.0, 0.0, 0.0
            for i in range(minibatches):
                if i >= len(batches):
                    # Under FSDP every forward/backward is a collective: a rank with fewer
                    # minibatches than its peers runs zero-weight ones to keep them paired.
                    if dp.fsdp:
                        row = torch.zeros(1, dtype=torch.long, device=device)
                        (sequence_logprobs(self.model, rollout, row, temperature).sum() * 0.0).backward()
                    continue
                rows, width = batches[i], widths[i]
                logprobs = sequence_logprobs(self.model, rollout, rows, temperature, width)  # [n, width]
                old = old_logprobs[i] if old_logprobs is not None else logprobs.detach()
                m = mask[rows, :width]
                sampled = rollout.sampling_logprobs[rows, :width] if rollout.sampling_logprobs is not None else None
                weights = None
                if sampled is not None and pass_index == 0:
                    # widths differ between minibatches: padded back to C (mask 0) to be concatenated
                    c = mask.shape[1]
                    mismatch.append((pad_right(old.detach(), c, 0.0), pad_right(sampled, c, 0.0), pad_right(m, c, 0.0)))
                if correct:
                    weights = importance_weights(old, sampled, m, cfg.importance_sampling, cfg.importance_sampling_cap)
                loss, clipped, kl = policy_loss(
                    logprobs,
                    old,
                    advantages[rows],
                    m,
                    eps_low=cfg.epsilon_low,
                    eps_high=cfg.epsilon_high,
                    aggregation=cfg.loss_aggregation,
                    max_tokens=params.max_new_tokens,
                    beta=cfg.beta,
                    ref_logprobs=ref_logprobs[i] if ref_logprobs is not None else None,
                    is_weights=weights,
                )
                loss = loss * self._batch_share(rows, m, n_total, total_tokens)
                (loss * dp.loss_scale).backward()
                pass_loss += float(loss.detach())
                pass_clip += float((clipped.float() * m).sum() / total_tokens)
                pass_kl += float((kl * m).sum() / total_tokens)
            dp.sum_gradients(self.model.parameters())
            norm = dp.clip_grad_norm(self.model.parameters(), cfg.max_grad_norm)
            losses.append(pass_loss)
            clips.append(pass_clip)
            kls.append(pass_kl)
            norms.append(norm)
            # A NaN/inf loss or gradient (a NaN reward, an overflow) would poison every weight:
            # skip the step (the norm is the summed gradient's, the same on every dp rank).
            if not math.isfinite(norm) or (dp.size == 1 and not math.isfinite(pass_loss)):
                stats.skipped_nonfinite = True
                self.optimizer.zero_grad(set_to_none=True)
                continue
            self.optimizer.step()
            stats.optimizer_steps += 1
        if mismatch:
            stats.mismatch = mismatch_stats(*(torch.cat(parts) for parts in zip(*mismatch)))
        # each rank measured its share of the whole batch's loss, clipping and KL
        losses, clips, kls = dp.sum(torch.tensor([losses, clips, kls], dtype=torch.float64)).tolist()
        stats.loss = sum(losses) / len(losses)
        stats.clip_fraction = sum(clips) / len(clips)
        stats.kl = sum(kls) / len(kls)
        stats.grad_norm = sum(norms) / len(norms)
        stats.weight_norm = weight_norm(self.model)
        stats.weight_norm_ratio = stats.weight_norm / norm_before if norm_before > 0 else 1.0
        self._after_step(stats, stepped=stats.optimizer_steps > 0)
        return stats

    def _frozen_logprobs(
        self, model, rollout: Rollout, batches: list[torch.Tensor], widths: list[int], temperature: float, context=None
    ) -> list[torch.Tensor]:
        """Log-probs under `model` without autograd, one forward per minibatch: [n_i, widths[i]] each.

        `context` wraps the forwards (default: `generating`, which gathers an FSDP-sharded
        policy, so that each rank may run as many forwards as its own minibatches need).
        """
        with torch.no_grad(), context if context is not None else self.generating():
            return [sequence_logprobs(model, rollout, rows, temperature, w) for rows, w in zip(batches, widths, strict=True)]

    def _after_step(self, stats: UpdateStats, stepped: bool) -> None:
        """The EMA teacher follows the policy; the rollout engines get the new weights."""
        if self.teacher is not None:
            ema_update(self.teacher, self.model, self.ema_momentum)
            self.teacher_engine.sync_weights(self.teacher)
        if stepped:
            stats.sync = self.engine.sync_weights(self.model)

    def _batch_share(
        self, rows: torch.Tensor, mask: torch.Tensor, n_total: int, total_tokens: torch.Tensor
    ) -> torch.Tensor | float:
        """Scale a minibatch loss so that it equals its part of the full-batch loss."""
        if self.grpo.loss_aggregation == "dapo":  # the whole batch's token count divides every token's loss
            return mask.sum() / total_tokens
        return rows.numel() / n_total

    def state_dict(self) -> dict:
        """The optimizer's (and an EMA teacher's) state, whole: without FSDP every rank holds it all."""
        state = {"optimizer": self.optimizer.state_dict()}
        if self.teacher is not None:
            state["teacher"] = self.teacher.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        if self.teacher is not None:
            self.teacher.load_state_dict(state["teacher"])
            # its engine was built from the policy's weights (the teacher's copy before this load)
            self.teacher_engine.sync_weights(self.teacher)

    def save(self, folder: Path) -> None:
        """Write this agent: a Hugging Face model folder (weights, tokenizer), with LoRA its
        unmerged adapters in folder/adapter/, and what a resume needs: trainer.pt, or under
        FSDP each rank's shards of the model and optimizer in folder/sharded/.

        Every rank of the agent's dp group calls it (gathering a sharded model is a
        collective); its dp rank 0 writes the folder.
        """
        self.dp.check_replicas(self.model)
        weights = self.dp.full_model_state(self.model)
        if self.dp.fsdp:
            save_sharded(self.model, self.optimizer, folder / SHARDED_FOLDER, self.dp.group)
        if self.dp.rank != 0:
            return
        save_policy(self.model, folder, weights)
        if hasattr(self.model, "get_base_model"):  # a peft model
            from corl.models import ADAPTER_FOLDER, save_adapter

            save_adapter(self.model, folder / ADAPTER_FOLDER, weights)
        # A processor writes its tokenizer and image processor: the folder loads with AutoProcessor.
        (self.processor or self.tokenizer).save_pretrained(folder)
        if not self.dp.fsdp:
            torch.save(self.state_dict(), folder / "trainer.pt")

    def load(self, folder: Path) -> None:
        """Resume from what `save` wrote (the weights themselves came with the model folder or
        the adapters), then hand the rollout engines the restored weights: an engine holding
        its own copy (vLLM) was built before they were loaded."""
        if (folder / SHARDED_FOLDER).is_dir():
            load_sharded(self.model, self.optimizer, folder / SHARDED_FOLDER, self.dp.group)
        else:
            self.load_state_dict(torch.load(folder / "trainer.pt", weights_only=False))
        self.engine.sync_weights(self.model)
        if self.teacher_engine is not None:
            self.teacher_engine.sync_weights(self.teacher)
