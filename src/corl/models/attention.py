"""The attention implementation a policy trains with, and the packed attention it needs.

`grpo.max_tokens_per_microbatch` with `grpo.padding_free` runs a micro-batch as ONE row of
sequences end to end (`corl.trainer.packing`); attention must then stay inside each sequence,
in the forward AND in the backward's recomputation of checkpointed layers
(`compute.gradient_checkpointing`), which calls the attention function again from the model's
config at that time. So the implementation a packed forward uses must be the model's own, not
one switched in for the forward only. What each model gets (`use_training_attention`, called
by `corl.models.prepare` on the policy, the KL reference and the EMA teacher alike, so that all
of them compute one way):

- `flash_attention_2` on a CUDA device, with compute.bf16 and the `flash-attn` package
  installed: its varlen kernel takes the packed row in one call (the sequence boundaries come
  in the call's `cu_seq_lens_*` kwargs, which the recomputation sees too);
- `corl_sdpa` everywhere else (CPU, fp32, no flash-attn): torch's scaled_dot_product_attention,
  exactly transformers' `sdpa` for every padded forward and `generate`, and causal SDPA on each
  sequence's slice of a packed row (torch picks its flash or memory-efficient kernel per slice
  on a GPU). flash-attn needs fp16/bf16 inputs; in fp32 SDPA is the exact choice.

Only decoder-only models of `PACKABLE_MODEL_TYPES` loaded with sdpa (corl's loader, like
transformers, picks it by default) or flash attention are changed: models loaded with eager
attention, and vision-language models, keep what they were loaded with and train on padded
micro-batches. The choice is the runtime's, not the model's: a saved config.json carries none.
"""

from __future__ import annotations

import torch

# Decoder-only models whose layers take rotary positions from position_ids and hand the
# kwargs of the model's forward to transformers' AttentionInterface (checked on llama and
# qwen2; the others share their modeling code).
PACKABLE_MODEL_TYPES = frozenset({"llama", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "mistral", "gemma", "olmo2"})
TRAINING_SDPA = "corl_sdpa"
# The same attention function under a name without a mask function: transformers then builds no
# attention mask for the packed forward (a [T, T] block-diagonal one would be sum(L)^2 bytes).
PACKED_FORWARD = "corl_packed_sdpa"
FLASH = "flash_attention_2"
PACKING_ATTENTION = frozenset({TRAINING_SDPA, PACKED_FORWARD, FLASH, "flash_attention_3"})


def packed_sdpa(module, query, key, value, dropout=0.0, scaling=None, **kwargs):
    """Causal SDPA within each packed sequence of a [1, heads, T, d] row (boundaries: `cu_seq_lens_q`).

    Returns ([1, T, heads, d], None), as transformers' sdpa_attention_forward does."""
    bounds = kwargs["cu_seq_lens_q"].tolist()  # [n + 1] offsets of the sequences in the row
    sizes = [end - start for start, end in zip(bounds[:-1], bounds[1:], strict=True)]
    groups = getattr(module, "num_key_value_groups", 1)
    # split, not slices: a slice's backward writes into a zero tensor of the whole row (n of them
    # per layer), split's is one concatenation
    out = [
        torch.nn.functional.scaled_dot_product_attention(
            q, k, v, dropout_p=dropout, scale=scaling, is_causal=True, enable_gqa=groups > 1
        )
        for q, k, v in zip(query.split(sizes, 2), key.split(sizes, 2), value.split(sizes, 2), strict=True)
    ]
    return torch.cat(out, dim=2).transpose(1, 2).contiguous(), None


def corl_sdpa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
    """transformers' sdpa, except on a packed row (a call with `cu_seq_lens_q`): causal SDPA per sequence.

    The choice is made from the call's own arguments, which a checkpointed layer's recomputation
    receives again: forward and recomputation cannot take different paths."""
    if kwargs.get("cu_seq_lens_q") is not None:
        return packed_sdpa(module, query, key, value, dropout=dropout, scaling=scaling, **kwargs)
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward(
        module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
    )


def register_training_attention() -> None:
    """`corl_sdpa` (with sdpa's masks) and its mask-less alias for packed forwards, in transformers' interfaces."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    if TRAINING_SDPA not in AttentionInterface._global_mapping:
        AttentionInterface.register(TRAINING_SDPA, corl_sdpa)
        AttentionInterface.register(PACKED_FORWARD, corl_sdpa)
        AttentionMaskInterface.register(TRAINING_SDPA, sdpa_mask)


def training_attention(model, bf16: bool) -> str | None:
    """The attention implementation corl trains `model` with (see the module's docstring), or
    None to keep the one it was loaded with."""
    config = getattr(model, "config", None)
    current = getattr(config, "_attn_implementation", None)
    if getattr(config, "model_type", None) not in PACKABLE_MODEL_TYPES or current not in {"sdpa", *PACKING_ATTENTION}:
        return None
    if current.startswith("flash_attention"):
        return current  # asked for explicitly at loading
    if bf16 and _on_cuda(model) and _flash_attn_installed():
        return FLASH
    return TRAINING_SDPA


def use_training_attention(model, bf16: bool) -> None:
    """Set `model`'s attention to `training_attention` (before LoRA and FSDP wrap it)."""
    chosen = training_attention(model, bf16)
    if chosen is None or chosen == model.config._attn_implementation:
        return
    if chosen == TRAINING_SDPA:
        register_training_attention()
    model.set_attn_implementation(chosen)


def _on_cuda(model) -> bool:
    first = next(model.parameters(), None)
    return first is not None and first.device.type == "cuda"


def _flash_attn_installed() -> bool:
    from transformers.utils import is_flash_attn_2_available

    return is_flash_attn_2_available()
