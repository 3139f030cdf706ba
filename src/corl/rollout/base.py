"""What every rollout engine returns and what a trainer may ask of it.

Shapes: N = len(prompts) * num_samples sequences, grouped by prompt (row b*K + k is the
k-th sample of prompt b); P = padded prompt length; C = completion length.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import torch


@dataclass(frozen=True)
class SamplingParams:
    """Every field the sampler uses, set explicitly: an engine must not fill the rest
    from a checkpoint's own generation defaults (the loss would score another distribution)."""

    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0
    max_new_tokens: int = 256


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
    # Extra per-sequence model inputs the update's forward pass must be given as well
    # (a vision-language model's pixel values): name -> tensor with N rows.
    model_inputs: dict[str, torch.Tensor] = field(default_factory=dict)

    @property
    def completion_ids(self) -> torch.Tensor:  # [N, C]
        return self.input_ids[:, self.prompt_length :]

    @property
    def completion_lengths(self) -> torch.Tensor:  # [N]
        return self.completion_mask.sum(1)

    @property
    def truncated(self) -> torch.Tensor:  # [N] bool: hit the token budget without EOS
        eos = torch.tensor(self.eos_ids, device=self.input_ids.device)
        has_eos = torch.isin(self.completion_ids, eos) & self.completion_mask.bool()
        return ~has_eos.any(1)


@dataclass(frozen=True)
class SyncStats:
    """What one weight sync cost (logged per step)."""

    seconds: float = 0.0
    bytes: int = 0


@runtime_checkable
class RolloutEngine(Protocol):
    """The seam between a trainer and whatever samples for it (HF generate, vLLM)."""

    def generate(self, prompts: list[str], num_samples: int, params: SamplingParams) -> Rollout:
        """K samples of every prompt, grouped by prompt."""
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


def completion_mask_from(ids: torch.Tensor, eos_ids: list[int]) -> torch.Tensor:
    """[N, C] ids -> [N, C] mask of tokens up to and including the first EOS."""
    is_eos = torch.isin(ids, torch.tensor(eos_ids, device=ids.device))
    # Tokens strictly after the first EOS are padding: count EOS seen *before* each position.
    eos_before = torch.cumsum(is_eos.int(), dim=1) - is_eos.int()
    return (eos_before == 0).long()


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
