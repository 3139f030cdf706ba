"""The policy update's section of a run configuration (`grpo:`): GRPO's clipping, KL, loss aggregation,
micro-batches and importance sampling, and the learning-rate schedule."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator, model_validator

from corl.config.sections import _Strict


class GRPOConfig(_Strict):
    """The policy update (DeepSeekMath GRPO; defaults follow TRL and the reference runs)."""

    epsilon_low: float = Field(0.2, ge=0, description="Lower clip: ratio >= 1 - epsilon_low.")
    epsilon_high: float = Field(0.2, ge=0, description="Upper clip; > epsilon_low is DAPO's clip-higher.")
    beta: float = Field(0.0, ge=0, description="k3 KL to a frozen reference; 0 loads no reference model.")
    loss_aggregation: Literal["grpo", "dapo", "dr_grpo", "bnpo"] = Field(
        "grpo",
        description="How per-token losses become the batch loss, as TRL's loss_type: grpo = mean over sequences of "
        "each sequence's token mean; dapo = sum over every token / the batch's token count (DAPO); dr_grpo = sum "
        "over tokens / (sequences x max_new_tokens) (Dr. GRPO). bnpo is read as dapo (corl's earlier name for it; "
        "TRL's bnpo divides by each micro-batch's tokens, the same when the batch is one micro-batch).",
    )

    @field_validator("loss_aggregation")
    @classmethod
    def _dapo_by_its_name(cls, name: str) -> str:
        from corl.grpo import LOSS_AGGREGATION_ALIASES

        return LOSS_AGGREGATION_ALIASES.get(name, name)

    scale_rewards: Literal["group", "none"] = Field(
        "group", description="Divide advantages by the group std (GRPO) or not (Dr. GRPO)."
    )
    num_passes: int = Field(1, ge=1, description="Optimization passes over each step's rollouts (PPO epochs).")
    minibatch_size: int | None = Field(
        None, ge=1, description="Sequences per forward/backward (gradient accumulation, bounds memory); None = all at once."
    )
    max_tokens_per_microbatch: int | None = Field(
        None,
        ge=1,
        description="Micro-batches by tokens instead of sequences (verl's use_dynamic_bsz / ppo_max_token_len_per_gpu): "
        "each forward/backward takes sequences, sorted by length, up to this many tokens (prompt + completion; "
        "minibatch_size, if set, still caps the sequences). Where the model allows it (padding_free) the micro-batch "
        "runs as one packed row without padding; the update (loss, gradients, one optimizer step per pass) is the "
        "same whatever its value. None = micro-batches of minibatch_size sequences.",
    )
    padding_free: bool = Field(
        True,
        description="With max_tokens_per_microbatch: pack each micro-batch's sequences into one row, position ids "
        "restarting per sequence (TRL's padding_free, verl's use_remove_padding; flash-attention varlen on a GPU in "
        "bf16 with flash-attn installed, causal SDPA per sequence otherwise; also under gradient checkpointing). Models "
        "it cannot pack (vision prompts, non-RoPE families, eager attention) and false take padded micro-batches, each "
        "trimmed to its longest sequence.",
    )
    max_grad_norm: float | None = Field(
        1.0,
        gt=0,
        description="Clip the gradient's global L2 norm to this before each optimizer step (TRL's default); null = no clipping.",
    )
    lr_scheduler_type: Literal["constant", "constant_with_warmup", "linear", "cosine"] = Field(
        "constant",
        description="How every agent's lr (agents[].lr) moves over cohort.steps, through transformers.get_scheduler "
        "(TRL's and transformers' lr_scheduler_type): constant; constant_with_warmup (warm-up, then constant); linear "
        "(warm-up, then down to 0 at the last step); cosine (warm-up, then half a cosine down to 0). transformers "
        "defaults to linear; corl keeps the lr constant unless asked. The scheduler steps once per training step "
        "(after all num_passes), its state is in every checkpoint, and the lr each step used is logged as <agent>/lr. "
        "Raising cohort.steps on resume stretches a decaying schedule from there on.",
    )
    warmup_steps: float = Field(
        0,
        ge=0,
        description="Linear warm-up from 0 to the lr: over this many steps (a whole number), or over this share of "
        "cohort.steps (below 1, rounded up), as transformers' warmup_steps. As there, the first step of a warm-up "
        "trains with lr 0.",
    )

    @model_validator(mode="after")
    def _a_warmup_that_happens(self) -> GRPOConfig:
        if self.warmup_steps >= 1 and not float(self.warmup_steps).is_integer():
            raise ValueError(
                f"grpo.warmup_steps {self.warmup_steps:g} is neither a whole number of steps nor a share of cohort.steps below 1"
            )
        if self.warmup_steps > 0 and self.lr_scheduler_type == "constant":
            # transformers' constant schedule ignores a warm-up without a word
            raise ValueError(
                "grpo.warmup_steps is set but grpo.lr_scheduler_type is constant, which has no warm-up: "
                "set lr_scheduler_type: constant_with_warmup (or linear, cosine)"
            )
        return self

    def warmup(self, total_steps: int) -> int:
        """Warm-up steps of a run of `total_steps` (transformers' TrainingArguments.get_warmup_steps)."""
        if self.warmup_steps >= 1:
            return int(self.warmup_steps)
        return math.ceil(total_steps * self.warmup_steps)

    importance_sampling: Literal["token_truncate", "token_mask", "sequence_mask", "off"] = Field(
        "token_truncate",
        description="Correction for a sampler with its own copy of the weights (vLLM): weight each token by "
        "pi_train_old / pi_rollout, truncated at importance_sampling_cap (token_truncate), or drop tokens "
        "(token_mask) or sequences (sequence_mask) above it. Not applied to the hf engine, which samples from "
        "the trained weights. As TRL (vllm_importance_sampling_correction) and Yao et al. 2025 (truncated IS).",
    )
    importance_sampling_cap: float = Field(3.0, ge=1.0, description="Truncation cap of the importance weights.")
