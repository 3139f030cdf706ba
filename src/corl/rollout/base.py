"""What every rollout engine returns and what a trainer may ask of it.

Shapes: N = len(prompts) * num_samples sequences, grouped by prompt (row b*K + k is the
k-th sample of prompt b); P = padded prompt length; C = completion length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

import torch

from corl.vision.prompt import ImagePrompt


@dataclass(frozen=True)
class SamplingParams:
    """Every field the sampler uses, set explicitly: an engine must not fill the rest
    from a checkpoint's own generation defaults (the loss would score another distribution)."""

    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    max_new_tokens: int = 256
    # A completion ends at the first of these strings, which is dropped from its text (vLLM's
    # `stop`, generate's `stop_strings`): a base model prompted few-shot goes on to write the
    # next question, and its answer is the text before it.
    stop: tuple[str, ...] = ()


Prompt = str | ImagePrompt


@dataclass
class Rollout:
    """Sampled completions of a batch of prompts, ready to score and to train on."""

    input_ids: torch.Tensor  # [N, P + C] left-padded prompt, then completion (right-padded)
    attention_mask: torch.Tensor  # [N, P + C] 1 on real prompt and completion tokens
    completion_mask: torch.Tensor  # [N, C] 1 on completion tokens up to and including EOS
    sampling_logprobs: torch.Tensor | None  # [N, C] log-probs under the sampler, or None when not kept
    texts: list[str]  # [N] decoded completions, special tokens removed
    prompt_length: int  # P
    num_samples: int  # K
    eos_ids: tuple[int, ...] = ()
    # True when the sampler holds its own copy of the weights (vLLM): its log-probs then
    # differ from the trainer's, and the update corrects for it (grpo.importance_weights).
    separate_sampler: bool = False
    # A vision-language rollout's prompts with their images (corl.vision.VisionInputs), one
    # row per *prompt* (B rows, not N): sequence r is prompt r // K, so a minibatch gathers
    # only its own prompts' pixels and no image is stored K times.
    vision: object | None = None
    # Tokens the sampler never samples (a vision-language model's image placeholders: one in
    # a completion would ask the model for an image that is not there); the update scores
    # the same restricted distribution.
    suppressed_ids: tuple[int, ...] = ()
    # The sampler's nucleus (SamplingParams.top_p; 1 for greedy): below 1 the tokens were drawn
    # from softmax(logits / T) renormalised over the nucleus, and both engines report that
    # distribution's log-probs (vLLM's processed_logprobs, the HF engine's warped scores); the
    # update scores the same one (grpo.nucleus_logits).
    top_p: float = 1.0
    # [N] bool: the completion ended at a stop string (SamplingParams.stop), not at EOS; None: none did
    stopped: torch.Tensor | None = None

    @property
    def completion_ids(self) -> torch.Tensor:  # [N, C]
        return self.input_ids[:, self.prompt_length :]

    @property
    def completion_lengths(self) -> torch.Tensor:  # [N]
        return self.completion_mask.sum(1)

    def select_prompts(self, prompts: list[int]) -> Rollout:
        """The K samples of the prompts `prompts` (indices into this rollout's B), in that order.
        Prompt and completion widths stay: each row is exactly the row it was here."""
        k = self.num_samples
        rows = self._rows([p * k + j for p in prompts for j in range(k)])
        return replace(rows, vision=self.vision.select(prompts) if self.vision is not None else None)

    def first_samples(self, k: int) -> Rollout:
        """The first k samples of every prompt, in sample order (cohort.votes_per_prompt: the
        table votes over all V, the update trains on these k). A prompt's samples are i.i.d.
        draws, so the first k are an unbiased subset of them."""
        if not 1 <= k <= self.num_samples:
            raise ValueError(f"cannot keep {k} of {self.num_samples} samples per prompt")
        if k == self.num_samples:
            return self
        v = self.num_samples
        prompts = self.completion_mask.shape[0] // v
        return replace(self._rows([b * v + j for b in range(prompts) for j in range(k)]), num_samples=k)

    def _rows(self, index: list[int]) -> Rollout:
        """These sequences (rows), each exactly the row it was here; widths stay."""
        rows = torch.tensor(index, dtype=torch.long, device=self.input_ids.device)
        return replace(
            self,
            input_ids=self.input_ids[rows],
            attention_mask=self.attention_mask[rows],
            completion_mask=self.completion_mask[rows],
            sampling_logprobs=self.sampling_logprobs[rows] if self.sampling_logprobs is not None else None,
            texts=[self.texts[i] for i in index],
            stopped=self.stopped[rows] if self.stopped is not None else None,
        )

    @property
    def truncated(self) -> torch.Tensor:  # [N] bool: hit the token budget without EOS or a stop string
        eos = torch.tensor(self.eos_ids, device=self.input_ids.device)
        has_eos = torch.isin(self.completion_ids, eos) & self.completion_mask.bool()
        ended = has_eos.any(1)
        return ~(ended | self.stopped) if self.stopped is not None else ~ended


@dataclass(frozen=True)
class SyncStats:
    """What one weight sync cost (logged per step)."""

    seconds: float = 0.0
    bytes: int = 0


@runtime_checkable
class RolloutEngine(Protocol):
    """The seam between a trainer and whatever samples for it (HF generate, vLLM)."""

    def generate(self, prompts: list[Prompt], num_samples: int, params: SamplingParams) -> Rollout:
        """K samples of every prompt (text, or an ImagePrompt for a vision-language model), grouped by prompt."""
        ...

    def sync_weights(self, model) -> SyncStats:
        """Make the engine sample from `model`'s current weights (after an optimizer step)."""
        ...

    def sleep(self) -> None:
        """Free what the engine holds between rollouts (GPU memory), if it can."""
        ...

    def wake(self) -> None:
        """Undo `sleep` before the next `generate`."""
        ...

    def close(self) -> None:
        """Release the engine for good."""
        ...


def finish_completions(
    completion: torch.Tensor, eos_ids: list[int], tokenizer, stop: tuple[str, ...] = ()
) -> tuple[torch.Tensor, torch.Tensor, list[str], torch.Tensor | None]:
    """[N, C] sampled ids -> (ids with padding after each completion's end, [N, C] mask of its
    tokens, [N] texts, [N] whether it ended at a stop string or None without `stop`).

    A completion ends at its first EOS (kept), or at the token that completes the first stop
    string (kept: it was sampled, and the update scores every sampled token of the completion);
    its text is what comes before the stop string. Both engines end completions here, so the
    rule is one whatever sampled them.
    """
    pad = tokenizer.pad_token_id
    mask = completion_mask_from(completion, eos_ids)
    completion = torch.where(mask.bool(), completion, torch.full_like(completion, pad))
    texts = tokenizer.batch_decode(completion, skip_special_tokens=True)
    if not stop:
        return completion, mask, texts, None
    stopped = torch.zeros(completion.shape[0], dtype=torch.bool)
    for i, text in enumerate(texts):
        found = [text.find(s) for s in stop if s and s in text]
        if not found:
            continue
        length = int(mask[i].sum())
        ids = completion[i, :length].tolist()
        # the fewest tokens whose text holds a stop string (a prefix's decoded text only grows)
        low, high = 1, length
        while low < high:
            mid = (low + high) // 2
            if any(s and s in tokenizer.decode(ids[:mid], skip_special_tokens=True) for s in stop):
                high = mid
            else:
                low = mid + 1
        mask[i, low:] = 0
        completion[i, low:] = pad
        texts[i] = text[: min(found)]
        stopped[i] = True
    return completion, mask, texts, stopped.to(completion.device)


def completion_mask_from(ids: torch.Tensor, eos_ids: list[int]) -> torch.Tensor:
    """[N, C] ids -> [N, C] mask of tokens up to and including the first EOS."""
    is_eos = torch.isin(ids, torch.tensor(eos_ids, device=ids.device))
    # Tokens strictly after the first EOS are padding: count EOS seen *before* each position.
    eos_before = torch.cumsum(is_eos.int(), dim=1) - is_eos.int()
    return (eos_before == 0).long()


_MULTIMODAL_TOKEN = re.compile(
    r"^(image|video|vision|audio|boi|eoi|boa|eoa)_.*token_(id|index)$|^(image|video|audio)_token_(id|index)$"
)


def multimodal_token_ids(model) -> list[int]:
    """Placeholder and delimiter tokens of a vision-language model's config (image_token_id,
    vision_start_token_id, LLaVA's image_token_index, ...): not text, never to be sampled."""
    config = model.config.to_dict()
    ids = {v for k, v in config.items() if _MULTIMODAL_TOKEN.match(k) and isinstance(v, int) and v >= 0}
    return sorted(ids)


def eos_ids_of(model, tokenizer) -> list[int]:
    """The model's EOS ids (its generation config's, which may list several) plus the tokenizer's."""
    eos = model.generation_config.eos_token_id if model.generation_config.eos_token_id is not None else tokenizer.eos_token_id
    ids = [eos] if isinstance(eos, int) else list(eos)
    if tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids


def pad_right(t: torch.Tensor, width: int, value) -> torch.Tensor:
    """[n, c] -> [n, width], padded on the right with `value`."""
    if t.shape[1] == width:
        return t
    pad = torch.full((t.shape[0], width - t.shape[1]), value, dtype=t.dtype, device=t.device)
    return torch.cat([t, pad], dim=1)
