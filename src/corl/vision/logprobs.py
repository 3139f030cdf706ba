"""Per-token log-probs of completions under a vision-language model, and generation with images.

`vision_sequence_logprobs` is the update's forward pass: it scores the exact tokens a
rollout sampled, with the same images, the same left-padded prompt and the same positions
(Qwen2-VL's M-RoPE is recomputed from the full sequence and `mm_token_type_ids`), so on
the same weights it equals the log-softmax of the logits `generate` used (tested).
"""

from __future__ import annotations

import torch

from corl.grpo import token_logprobs
from corl.vision.inputs import VisionInputs


def vision_sequence_logprobs(
    model,
    batch: VisionInputs,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor | None = None,
    temperature: float = 1.0,
) -> torch.Tensor:
    """[N, C] log-probs of `completion_ids` given `batch` (N rows: repeat prompts first).

    Args:
        batch: N left-padded prompts with their images (`VisionInputs.select` / `repeat_interleave`).
        completion_ids: [N, C] sampled tokens, right-padded after EOS.
        completion_mask: [N, C] 1 on tokens up to and including EOS; padding positions are
            attended to by nothing and their log-probs are meaningless (mask them in the loss).
        temperature: the sampler's temperature (log-probs of softmax(logits / T)).
    """
    if len(batch) != completion_ids.shape[0]:
        raise ValueError(f"{len(batch)} prompt rows for {completion_ids.shape[0]} completions")
    width = completion_ids.shape[1]  # C
    kwargs = batch.model_kwargs(completion_ids, completion_mask)
    # Only the last C + 1 positions' logits are needed: position P - 1 + t predicts token t.
    logits = model(**kwargs, logits_to_keep=width + 1, use_cache=False).logits  # [N, C + 1, V]
    return token_logprobs(logits[:, :-1], completion_ids, temperature)  # [N, C]


@torch.no_grad()
def generate_with_images(model, batch: VisionInputs, **generate_kwargs):
    """`model.generate` on a VisionInputs batch; returns (completion_ids [N, C], per-step logits [N, C, V]).

    Logits come back raw (`output_logits`), before any sampling processors, so their
    log-softmax is the policy's distribution at temperature 1.
    """
    out = model.generate(**batch.model_kwargs(), return_dict_in_generate=True, output_logits=True, **generate_kwargs)
    completion = out.sequences[:, batch.prompt_length :]  # [N, C]
    logits = torch.stack(out.logits, dim=1)  # [N, C, V]
    return completion, logits
