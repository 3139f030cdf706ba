"""Micro-batches by tokens, and forwards without padding (`grpo.max_tokens_per_microbatch`).

At 3,072 tokens a step's completions run from a few dozen tokens to thousands: micro-batches
of a fixed number of sequences either waste memory on the short ones or overflow on the long
ones. With a token budget (verl's `use_dynamic_bsz` / `ppo_max_token_len_per_gpu`) each
micro-batch takes as many sequences, sorted by length, as the budget holds.

Where the model allows it, a micro-batch then runs as ONE packed row without padding: every
sequence's real tokens end to end, position ids restarting at 0 for each (TRL's
`padding_free`, verl's `use_remove_padding`). Attention must not cross sequences, in the
forward nor in a checkpointed layer's recomputation during the backward; the model's own
attention implementation (`corl.models.attention`, set when the model is prepared) sees to
both from the call's `cu_seq_lens_*` kwargs:

- `flash_attention_2` (CUDA, bf16, flash-attn installed): transformers' varlen kernel;
- `corl_sdpa` (everywhere else): causal SDPA on each sequence's slice, so attention costs
  sum(L_i^2), never the (sum L_i)^2 of a block-diagonal mask over the whole row.

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
from corl.models.attention import PACKABLE_MODEL_TYPES, PACKED_FORWARD, PACKING_ATTENTION, TRAINING_SDPA
from corl.rollout import Rollout
from corl.trainer.logprobs import LOGIT_CHUNK_ELEMENTS, PLAIN_HEAD_MODEL_TYPES, _HeadInput


def can_pack(model, rollout: Rollout) -> bool:
    """Whether `packed_logprobs` handles this model and rollout (else: padded micro-batches): a
    packable model prepared with a packing attention (`corl.models.attention.use_training_attention`)."""
    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    lm_head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return (
        rollout.vision is None
        and not rollout.suppressed_ids
        and lm_head is not None
        and model_type in PACKABLE_MODEL_TYPES
        and model_type in PLAIN_HEAD_MODEL_TYPES
        and getattr(config, "_attn_implementation", None) in PACKING_ATTENTION
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
    """The packed forward's attention: `corl_sdpa` under its mask-less name (transformers then
    builds no [T, T] mask), flash attention as it is. A checkpointed layer's recomputation,
    after this context, calls `corl_sdpa` itself: the same function, taking the same path."""
    config = model.config
    current = config._attn_implementation
    if current != TRAINING_SDPA:
        yield
        return
    config._attn_implementation = PACKED_FORWARD
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
