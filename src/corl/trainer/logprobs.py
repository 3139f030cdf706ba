"""A policy's log-probs and logits of its own completions, without [N, C, V] logits where it can.

The output projection runs in chunks of positions (`completion_hidden` hands back the hidden
states and the head): a step's peak then grows with the hidden states, not the vocabulary.
"""

from __future__ import annotations

import inspect

import torch

from corl.grpo import chunked_token_logprobs, token_logprobs
from corl.rollout import Rollout

# Logits held at once by the chunked output projection: 2**24 floats are 64 MB in float32.
# A step's peak then grows with the hidden states ([n, C, H]), not with the vocabulary.
LOGIT_CHUNK_ELEMENTS = 2**24

# Causal LMs whose logits are exactly lm_head(final hidden state): no soft-capping or
# scaling after the head, so applying the head ourselves, in chunks, changes nothing.
# Any other model takes the plain forward (only the completion positions' logits kept).
PLAIN_HEAD_MODEL_TYPES = frozenset(
    {
        "llama",
        "qwen2",
        "qwen2_moe",
        "qwen3",
        "qwen3_moe",
        "mistral",
        "mixtral",
        "gpt2",
        "gemma",
        "phi3",
        "olmo2",
        "smollm3",
        "starcoder2",
    }
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

    def head(self, lm_head):
        """The output projection, applied in the autocast state the forward ran in: [..., H] -> [..., V]."""
        device, dtype, enabled = self.autocast

        def apply(h: torch.Tensor) -> torch.Tensor:
            with torch.autocast(device, dtype=dtype, enabled=enabled):
                return lm_head(h)

        return apply


def completion_hidden(model, rollout: Rollout, rows: torch.Tensor, width: int):
    """Final hidden states before the completion tokens, and the head that maps them to logits.

    Returns ([n, width, H] hidden states, head: [..., H] -> [..., V], V), or None for a model
    whose logits are not the plain head of its hidden states.

    Under FSDP2 the head belongs to the root unit (corl.models.prepare.shard_with_fsdp), whose
    parameters stay gathered from its forward to the end of its backward (FSDP2 reshards the
    root only in its post-backward callback): the head applied here, and again for each chunk's
    recomputation in the backward, sees the gathered weight, and its gradient is reduce-scattered
    with the root's.
    """
    lm_head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if rollout.vision is not None or lm_head is None or getattr(model.config, "model_type", None) not in PLAIN_HEAD_MODEL_TYPES:
        return None
    capture = _HeadInput()
    handle = lm_head.register_forward_pre_hook(capture)
    try:
        model(**_forward_inputs(rollout, rows, width))
    finally:
        handle.remove()
    head = capture.head(lm_head)
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
    The distribution scored is the one sampled: temperature, then the rollout's top-p nucleus
    (`Rollout.top_p`), renormalised, as vLLM's processed_logprobs and the HF engine report it.
    """
    width = width or rollout.completion_ids.shape[1]
    tokens = rollout.input_ids[rows, rollout.prompt_length : rollout.prompt_length + width]  # [n, width]
    split = completion_hidden(model, rollout, rows, width)
    if split is None:
        logits = completion_logits(model, rollout, rows, width)  # [n, width, V]
        if rollout.suppressed_ids:  # the sampler's distribution had them at -inf: score the same one
            logits = logits.index_fill(-1, torch.tensor(rollout.suppressed_ids, device=logits.device), float("-inf"))
        return token_logprobs(logits, tokens, temperature, rollout.top_p)
    hidden, head, vocab = split
    chunk = max(1, LOGIT_CHUNK_ELEMENTS // max(hidden.shape[0] * vocab, 1))
    return chunked_token_logprobs(hidden, head, tokens, temperature, chunk, rollout.top_p)


@torch.no_grad()
def logit_rewards(model, rollout: Rollout, reward_fn, temperature: float, batch: int = 64) -> torch.Tensor:
    """Rewards scored from `model`'s own logits (RENT, Intuitor): [B, K].

    reward_fn: [n, C, V] logits, [n, C] mask -> [n] (a reward's `from_logits`). The caller
    holds the model ready for a no-grad pass (`Agent.generating`).
    """
    out = []
    n, width = rollout.completion_mask.shape
    mask = rollout.completion_mask
    for start in range(0, n, batch):  # the backbone's activations: `batch` rows at a time
        rows = torch.arange(start, min(start + batch, n), device=rollout.input_ids.device)
        split = completion_hidden(model, rollout, rows, width)
        if split is None:
            out.append(reward_fn(completion_logits(model, rollout, rows).float() / temperature, mask[rows]))
            continue
        hidden, head, vocab = split  # [n, C, H]
        # reward_fn wants whole sequences' logits: as many rows at once as the logit budget
        # allows (at least one, [1, C, V]), not `batch` rows' [batch, C, V].
        step = max(1, LOGIT_CHUNK_ELEMENTS // max(width * vocab, 1))
        for i in range(0, rows.numel(), step):
            logits = head(hidden[i : i + step]).float() / temperature  # [step, C, V]
            out.append(reward_fn(logits, mask[rows[i : i + step]]))
    return torch.cat(out).view(-1, rollout.num_samples).cpu()
