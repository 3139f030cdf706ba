"""Micro-batches by tokens, and forwards without padding (`grpo.max_tokens_per_microbatch`).

At 3,072 tokens a step's completions run from a few dozen tokens to thousands: micro-batches
of a fixed number of sequences either waste memory on the short ones or overflow on the long
ones. With a token budget (verl's `use_dynamic_bsz` / `ppo_max_token_len_per_gpu`) each
micro-batch takes as many sequences, sorted by length, as the budget holds.

Where the model allows it, a micro-batch then runs as ONE packed row without padding: every
sequence's real tokens end to end, position ids restarting at 0 for each (TRL's
`padding_free`, verl's `use_remove_padding`). Attention must not cross sequences:

- a model loaded with flash attention gets transformers' own varlen path (it reads the
  sequence boundaries from the position ids);
- sdpa or eager (CPU) get `packed_sdpa` below, registered with transformers'
  AttentionInterface: causal SDPA on each sequence's slice, so attention costs sum(L_i^2),
  never the (sum L_i)^2 of a block-diagonal mask over the whole row.

Models whose positions are not plain per-token ids (a vision prompt's M-RoPE), whose logits
are not the plain head of the hidden states, or that the packed forward has not been checked
on fall back to padded micro-batches (the same length buckets, each trimmed to its longest).
The log-probs come back in the padded [n, width] layout (0 past each completion), so the loss,
its aggregation and its gradient are those of the padded update.
"""

from __future__ import annotations

import contextlib

import torch

from corl.grpo import chunked_token_logprobs
from corl.rollout import Rollout
from corl.trainer.logprobs import LOGIT_CHUNK_ELEMENTS, PLAIN_HEAD_MODEL_TYPES, _HeadInput

# Decoder-only models whose layers take rotary positions from position_ids and call
# transformers' AttentionInterface with the kwargs of the model's forward (checked here on
# llama and qwen2; the others share their modeling code).
PACKABLE_MODEL_TYPES = frozenset({"llama", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "mistral", "gemma", "olmo2"})
PACKED_ATTENTION = "corl_packed_sdpa"


def packed_sdpa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
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


def _register() -> None:
    from transformers import AttentionInterface

    if PACKED_ATTENTION not in AttentionInterface._global_mapping:
        AttentionInterface.register(PACKED_ATTENTION, packed_sdpa)


def can_pack(model, rollout: Rollout) -> bool:
    """Whether `packed_logprobs` handles this model and rollout (else: padded micro-batches)."""
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    lm_head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return (
        rollout.vision is None
        and not rollout.suppressed_ids
        and lm_head is not None
        and model_type in PACKABLE_MODEL_TYPES
        and model_type in PLAIN_HEAD_MODEL_TYPES
        and getattr(config, "_attn_implementation", None) in {"sdpa", "eager", "flash_attention_2", "flash_attention_3"}
    )


def sequence_tokens(rollout: Rollout) -> torch.Tensor:
    """Tokens each sequence's forward reads once packed: its prompt without padding and its completion: [N]."""
    prompt = rollout.attention_mask[:, : rollout.prompt_length].sum(1)
    return prompt + rollout.completion_lengths.clamp(min=1)


def token_microbatches(
    rows: torch.Tensor, lengths: torch.Tensor, tokens: torch.Tensor, budget: int, max_rows: int | None, packed: bool, prompt: int
) -> list[torch.Tensor]:
    """Split `rows` (sorted by completion length) into micro-batches of at most `budget` tokens.

    Packed, a micro-batch costs the sum of its sequences' tokens ([N] `tokens`); padded, its rows
    times its longest row (prompt columns + longest completion). A sequence longer than the
    budget on its own still gets a micro-batch of its own. `max_rows` (grpo.minibatch_size)
    caps the sequences of each.
    """
    batches: list[list[int]] = []
    current: list[int] = []
    used = 0
    for row in rows.tolist():
        cost = int(tokens[row]) if packed else prompt + max(int(lengths[row]), 1)
        grown = used + cost if packed else (len(current) + 1) * max(cost, used)
        if current and (grown > budget or (max_rows is not None and len(current) >= max_rows)):
            batches.append(current)
            current, used = [], 0
            grown = cost
        current.append(row)
        used = grown if packed else max(cost, used)
    if current:
        batches.append(current)
    return [torch.tensor(b, dtype=torch.long, device=rows.device) for b in batches]


def packed_inputs(rollout: Rollout, rows: torch.Tensor) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """One row holding sequences `rows` end to end: the model's inputs, and where their predictions are.

    Sequence r contributes its real prompt tokens and its first L_r - 1 completion tokens (the
    last one is never an input), at positions 0, 1, ... as in the padded forward. Returns
    (inputs with [1, T] ids and positions, [M] flat positions predicting the completions' tokens,
    [M] their tokens), M = sum of the completion lengths (at least 1 each).
    """
    p = rollout.prompt_length
    lengths = rollout.completion_lengths[rows].clamp(min=1)  # [n]
    ids, predict, targets, bounds = [], [], [], [0]
    for row, length in zip(rows.tolist(), lengths.tolist(), strict=True):
        keep = rollout.attention_mask[row, : p + length - 1].bool()  # real tokens of the input
        seq = rollout.input_ids[row, : p + length - 1][keep]  # [s]
        offset = bounds[-1]
        ids.append(seq)
        # the last `length` inputs (the prompt's last token and the completion's first L - 1) predict the completion
        predict.append(torch.arange(offset + seq.numel() - length, offset + seq.numel(), device=seq.device))
        targets.append(rollout.input_ids[row, p : p + length])
        bounds.append(offset + seq.numel())
    flat = torch.cat(ids)[None]  # [1, T]
    cu = torch.tensor(bounds, dtype=torch.int32, device=flat.device)
    positions = torch.cat([torch.arange(b - a, device=flat.device) for a, b in zip(bounds[:-1], bounds[1:], strict=True)])
    longest = int((cu[1:] - cu[:-1]).max())
    inputs = {
        "input_ids": flat,
        "position_ids": positions[None],  # [1, T], restarting at each sequence
        "use_cache": False,
        # transformers' flash-attention varlen kwargs; packed_sdpa reads the same
        "cu_seq_lens_q": cu,
        "cu_seq_lens_k": cu,
        "max_length_q": longest,
        "max_length_k": longest,
    }
    return inputs, torch.cat(predict), torch.cat(targets)


@contextlib.contextmanager
def packed_attention(model):
    """The model's attention switched to `packed_sdpa` for one forward (flash attention stays:
    transformers packs it from the position ids itself)."""
    config = model.config
    current = config._attn_implementation
    if current.startswith("flash_attention"):
        yield
        return
    _register()
    config._attn_implementation = PACKED_ATTENTION
    try:
        yield
    finally:
        config._attn_implementation = current


def packed_logprobs(model, rollout: Rollout, rows: torch.Tensor, temperature: float, width: int) -> torch.Tensor:
    """`sequence_logprobs` of rows `rows` from one packed forward: [n, width] (0 past each completion)."""
    inputs, predict, targets = packed_inputs(rollout, rows)
    lm_head = model.get_output_embeddings()
    capture = _HeadInput()
    handle = lm_head.register_forward_pre_hook(capture)
    try:
        with packed_attention(model):
            model(**inputs)
    finally:
        handle.remove()
    head = capture.head(lm_head)
    hidden = capture.hidden[0, predict]  # [M, H]
    vocab = getattr(lm_head, "out_features", None) or model.config.vocab_size
    chunk = max(1, LOGIT_CHUNK_ELEMENTS // max(vocab, 1))
    flat = chunked_token_logprobs(hidden[None], head, targets[None], temperature, chunk, rollout.top_p)[0]  # [M]
    lengths = rollout.completion_lengths[rows].clamp(min=1)  # [n]
    out = flat.new_zeros(rows.numel(), width)
    index = torch.arange(width, device=flat.device)[None] < lengths[:, None]  # [n, width], True on each completion
    return out.masked_scatter(index, flat)
