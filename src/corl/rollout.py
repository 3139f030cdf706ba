"""Rollout engines: prompts in, sampled completions and their log-probs out.

`HFGenerateEngine` runs Hugging Face `generate` and works on any device; a vLLM engine
implements the same `RolloutEngine` protocol on GPUs (see `VLLMEngine`).
Shapes: N = len(prompts) * num_samples sequences, grouped by prompt (row b*K + k is the
k-th sample of prompt b); P = padded prompt length; C = completion length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    max_new_tokens: int = 256


@dataclass
class Rollout:
    """Sampled completions of a batch of prompts, ready to score and to train on."""

    input_ids: torch.Tensor  # [N, P + C] left-padded prompt, then completion (right-padded)
    attention_mask: torch.Tensor  # [N, P + C] 1 on real prompt and completion tokens
    completion_mask: torch.Tensor  # [N, C] 1 on completion tokens up to and including EOS
    sampling_logprobs: torch.Tensor  # [N, C] log-probs under the sampling distribution
    texts: list[str]  # [N] decoded completions, special tokens removed
    prompt_length: int  # P
    num_samples: int  # K

    @property
    def completion_ids(self) -> torch.Tensor:  # [N, C]
        return self.input_ids[:, self.prompt_length :]

    @property
    def completion_lengths(self) -> torch.Tensor:  # [N]
        return self.completion_mask.sum(1)

    eos_ids: tuple[int, ...] = ()

    @property
    def truncated(self) -> torch.Tensor:  # [N] bool: hit the token budget without EOS
        has_eos = (
            torch.isin(self.completion_ids, torch.tensor(self.eos_ids, device=self.input_ids.device))
            & self.completion_mask.bool()
        )
        return ~has_eos.any(1)


class RolloutEngine(Protocol):
    def generate(self, prompts: list[str], num_samples: int, params: SamplingParams) -> Rollout: ...


def completion_mask_from(ids: torch.Tensor, eos_ids: list[int]) -> torch.Tensor:
    """[N, C] ids -> [N, C] mask of tokens up to and including the first EOS."""
    is_eos = torch.isin(ids, torch.tensor(eos_ids, device=ids.device))
    # Tokens strictly after the first EOS are padding: count EOS seen *before* each position.
    eos_before = torch.cumsum(is_eos.int(), dim=1) - is_eos.int()
    return (eos_before == 0).long()


class HFGenerateEngine:
    """Batched sampling with `model.generate`; the same weights that train."""

    def __init__(self, model, tokenizer, batch_size: int | None = None, add_special_tokens: bool = True):
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.add_special_tokens = add_special_tokens
        eos = model.generation_config.eos_token_id if model.generation_config.eos_token_id is not None else tokenizer.eos_token_id
        self.eos_ids = [eos] if isinstance(eos, int) else list(eos)
        if tokenizer.eos_token_id not in self.eos_ids:
            self.eos_ids.append(tokenizer.eos_token_id)

    @torch.no_grad()
    def generate(self, prompts: list[str], num_samples: int, params: SamplingParams) -> Rollout:
        from transformers import GenerationConfig

        tok = self.tokenizer
        tok.padding_side = "left"
        device = next(self.model.parameters()).device
        enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=self.add_special_tokens)
        prompt_ids = enc["input_ids"].repeat_interleave(num_samples, dim=0).to(device)  # [N, P]
        prompt_mask = enc["attention_mask"].repeat_interleave(num_samples, dim=0).to(device)  # [N, P]
        greedy = params.temperature == 0
        config = GenerationConfig(
            do_sample=not greedy,
            temperature=None if greedy else params.temperature,
            top_p=None if greedy else params.top_p,
            top_k=None if greedy else 0,  # no hidden top-k when sampling (the library default is 50)
            max_new_tokens=params.max_new_tokens,
            eos_token_id=self.eos_ids,
            pad_token_id=tok.pad_token_id,
            return_dict_in_generate=True,
            output_scores=True,
        )
        was_training = self.model.training
        self.model.eval()
        chunks = []
        step = self.batch_size or prompt_ids.shape[0]
        for start in range(0, prompt_ids.shape[0], step):
            out = self.model.generate(
                input_ids=prompt_ids[start : start + step],
                attention_mask=prompt_mask[start : start + step],
                generation_config=config,
            )
            completion = out.sequences[:, prompt_ids.shape[1] :]  # [n, c]
            scores = torch.stack(out.scores, dim=1).float()  # [n, c, V] processed logits
            logprobs = torch.gather(torch.log_softmax(scores, -1), -1, completion.unsqueeze(-1)).squeeze(-1)
            chunks.append((completion, logprobs))
        self.model.train(was_training)

        width = max(c.shape[1] for c, _ in chunks)
        completion = torch.cat([_pad_right(c, width, tok.pad_token_id) for c, _ in chunks])  # [N, C]
        sampling_logprobs = torch.cat([_pad_right(lp, width, 0.0) for _, lp in chunks])  # [N, C]
        mask = completion_mask_from(completion, self.eos_ids)
        completion = torch.where(mask.bool(), completion, torch.full_like(completion, tok.pad_token_id))
        texts = tok.batch_decode(completion.masked_fill(~mask.bool(), tok.pad_token_id), skip_special_tokens=True)
        return Rollout(
            input_ids=torch.cat([prompt_ids, completion], dim=1),
            attention_mask=torch.cat([prompt_mask, mask], dim=1),
            completion_mask=mask,
            sampling_logprobs=sampling_logprobs * mask,
            texts=texts,
            prompt_length=prompt_ids.shape[1],
            num_samples=num_samples,
            eos_ids=tuple(self.eos_ids),
        )


def _pad_right(t: torch.Tensor, width: int, value) -> torch.Tensor:
    if t.shape[1] == width:
        return t
    pad = torch.full((t.shape[0], width - t.shape[1]), value, dtype=t.dtype, device=t.device)
    return torch.cat([t, pad], dim=1)


class VLLMEngine:
    """Rollouts with vLLM on GPUs. Not available in this release: it needs weight syncing
    from the training model after every update, which is not written yet."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            "the vLLM rollout engine is not implemented yet; use rollout engine 'hf' (Hugging Face generate)"
        )
