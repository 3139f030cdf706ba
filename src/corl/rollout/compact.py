"""A sampling loop that drops each sequence from the batch as soon as it ends.

Why by hand: `model.generate` keeps every sequence of a batch in every forward until the
last one stops (the finished ones are fed padding), so a batch whose completions are
mostly short pays for its longest at full width. RL rollouts are exactly that batch: K
samples of a prompt end at very different lengths. On CPU, where a decode step's cost grows
with the batch (benchmarks/vs_trl.py's job: 0.86 s for 128 sequences x 56 tokens, 0.49 s for
64), dropping them cuts sampling time roughly by the share of the token budget left unused.
transformers' continuous batching (`generate_batch`) also drops finished sequences, with a
paged cache and a scheduler thread; on that job on CPU it took 17.7x this loop's time per
batch and 8 GB of RSS for its cache (benchmarks/rollout_engines.py, engine generate-batch),
and returns no log-probs by default. vLLM is the engine for serving-scale batches.

The distribution is generate's with the same settings: the logits of the last position,
then temperature, then top-p (transformers' own warpers), one
`torch.multinomial` draw per sequence (argmax when greedy); position ids from the
left-padded attention mask as generate computes them. tests/rollout/test_rollout_compact.py holds
it to generate: draw for draw the same samples until the first sequence leaves the batch
(the same random numbers on the same probabilities), the same greedy completions after, and
sampled log-probs equal to the training forward's. Each distinct prompt is prefilled once
for its K samples.
"""

from __future__ import annotations

import inspect

import torch

from corl.rollout.base import SamplingParams

# Compact when this share of the batch has finished since the last compaction: selecting
# the KV cache's rows copies every layer's keys and values, so doing it at every finished
# row would cost more than it saves once the batch is small.
COMPACT_SHARE = 1 / 8


def sampling_warpers(params: SamplingParams) -> list:
    """Temperature, then top-p: transformers' own warpers, in generate's order."""
    from transformers import TemperatureLogitsWarper, TopPLogitsWarper

    steps = []
    if params.temperature not in (0, 1.0):
        steps.append(TemperatureLogitsWarper(params.temperature))
    if params.temperature != 0 and params.top_p < 1.0:
        steps.append(TopPLogitsWarper(params.top_p))
    return steps


def decoder_of(model):
    """The module to call: under a peft LoRA wrapper, its base model, into whose layers the
    adapters are injected (PeftModel's own forward takes no position ids)."""
    if hasattr(model, "get_base_model"):
        configs = getattr(model, "peft_config", {}).values()
        if any(getattr(c, "is_prompt_learning", False) for c in configs):
            return model  # virtual tokens live in the wrapper's forward: no compact loop
        return model.get_base_model()
    return model


def supports_compact_sampling(model) -> bool:
    """A decoder-only model whose forward takes a `cache` / `past_key_values` and position ids."""
    model = decoder_of(model)
    if getattr(model.config, "is_encoder_decoder", False):
        return False
    names = set(inspect.signature(model.forward).parameters)
    return "position_ids" in names and bool({"cache", "past_key_values"} & names)


@torch.no_grad()
def sample_compacting(
    model,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    prompt_of: torch.Tensor,
    params: SamplingParams,
    eos_ids: list[int],
    pad_id: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, P] left-padded prompts and [n] the prompt of each sequence -> ([n, c] completions
    padded with `pad_id` after EOS, [n, c] log-probs of each sampled token under the
    distribution it was drawn from).

    Each distinct prompt is read once: its K samples start from copies of one prefill's keys
    and values (generate prefills all K copies)."""
    from transformers import DynamicCache, LogitsProcessorList

    model = decoder_of(model)
    n, device = prompt_of.shape[0], prompt_ids.device
    names = set(inspect.signature(model.forward).parameters)
    cache_key = "cache" if "cache" in names else "past_key_values"
    keep_last = {"logits_to_keep": 1} if "logits_to_keep" in names else {}
    warp = LogitsProcessorList(sampling_warpers(params))
    eos = torch.tensor(eos_ids, device=device)

    distinct, copy_of = torch.unique(prompt_of, return_inverse=True)  # prefill rows, and each sequence's
    mask = prompt_mask[distinct].long()
    position = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)  # [b, P], as generate's
    cache = DynamicCache(config=model.config)

    def last_logits(ids: torch.Tensor, mask: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        out = model(input_ids=ids, attention_mask=mask, position_ids=position, use_cache=True, **{cache_key: cache}, **keep_last)
        return out.logits[:, -1, :]

    logits = last_logits(prompt_ids[distinct], mask, position)
    copy_of = copy_of.to(device)
    cache.batch_select_indices(copy_of)
    logits, mask, position = logits[copy_of], mask[copy_of], position[copy_of, -1:]

    tokens = torch.full((n, params.max_new_tokens), pad_id, dtype=torch.long, device=device)
    logprobs = torch.zeros((n, params.max_new_tokens), dtype=torch.float32, device=device)
    rows = torch.arange(n, device=device)  # the original row of each sequence still in the batch
    done = torch.zeros(n, dtype=torch.bool, device=device)  # ended, not yet dropped
    width = 0
    for t in range(params.max_new_tokens):
        scores = warp(None, logits.float())  # [b, V]
        logp = torch.log_softmax(scores, dim=-1)
        if params.temperature == 0:
            picked = scores.argmax(dim=-1)
        else:
            picked = torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1).squeeze(1)  # as generate draws
        live = ~done
        tokens[rows[live], t] = picked[live]
        logprobs[rows[live], t] = logp.gather(-1, picked.unsqueeze(-1)).squeeze(-1)[live]
        width = t + 1
        done |= torch.isin(picked, eos)
        if bool(done.all()) or width == params.max_new_tokens:
            break
        if int(done.sum()) >= max(1, int(COMPACT_SHARE * done.numel())):
            keep = (~done).nonzero().squeeze(1)
            cache.batch_select_indices(keep)
            rows, mask, position, picked, done = rows[keep], mask[keep], position[keep], picked[keep], done[keep]
        mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
        position = position + 1
        logits = last_logits(picked.unsqueeze(1), mask, position)
    return tokens[:, :width], logprobs[:, :width]
