"""How long an agent's prompts are, in its own tokens: the P of the plan's shapes.

A batch is left-padded to its longest prompt, so the plan takes the longest prompt of the
training data (the worst batch), rendered as the agent renders it (template, instruction,
chat template) and tokenised by its own tokenizer (a vision-language model's processor,
whose image placeholders expand into the image's tokens). Without a tokenizer at hand (a
hub model while the hub is unreachable) the length is estimated from characters and the
report says so; `plan.prompt_tokens` overrides all of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from corl.config import RunConfig
from corl.data.rows import DataError
from corl.trainer.inputs import AgentInputs, agent_inputs

CHARS_PER_TOKEN = 3  # BPE tokenizers average 3-4 characters per token on English and LaTeX: the longer guess
CHAT_TOKENS = 32  # what a chat template adds around a user turn, roughly (the estimate only)
TEXT_ROWS = 20_000  # rows tokenised for the longest prompt (a fast tokenizer takes about a second)
VISION_ROWS = 64  # rows whose images go through the processor
FALLBACK_TOKENS = 512


@dataclass(frozen=True)
class PromptLength:
    tokens: int  # P: the longest prompt
    how: str  # where the number comes from, for the report
    image_patches: int = 0  # per prompt, what the vision tower encodes (vision-language models)


def prompt_length(cfg: RunConfig, index: int) -> PromptLength:
    """The longest prompt agent `index` will see, in its tokens."""
    agent = cfg.agents[index]
    override = cfg.plan.prompt_tokens
    if override is not None and not _vision_config(agent.model):
        return PromptLength(override, "plan.prompt_tokens")
    measured = _measured(cfg, index)
    if override is not None:  # a vision-language model's images are still measured, for its tower
        return PromptLength(override, "plan.prompt_tokens", measured.image_patches)
    return measured


def _measured(cfg: RunConfig, index: int) -> PromptLength:
    agent = cfg.agents[index]
    try:
        inputs = agent_inputs(cfg, index, TEXT_ROWS, _vision_config(agent.model))
    except (DataError, OSError) as err:
        return PromptLength(FALLBACK_TOKENS, f"a guess: the training data could not be read ({err}); set plan.prompt_tokens")
    if not inputs.rows:
        return PromptLength(FALLBACK_TOKENS, f"a guess: no row of {inputs.source!r} has {inputs.field!r}; set plan.prompt_tokens")
    if inputs.reader is None:
        chars = max(len(inputs.template.text(str(r[inputs.field]))) for r in inputs.rows)
        tokens = -(-chars // CHARS_PER_TOKEN) + (CHAT_TOKENS if agent.chat_template else 0)
        return PromptLength(
            tokens,
            f"estimated: longest of {len(inputs.rows):,} prompts, {chars:,} characters / {CHARS_PER_TOKEN} (no tokenizer here)",
        )
    if inputs.is_vision:
        return _vision_length(inputs)
    ids = inputs.reader(inputs.texts(), add_special_tokens=not agent.chat_template)["input_ids"]
    return PromptLength(max(len(x) for x in ids), f"longest of {len(inputs.rows):,} prompts, its tokenizer")


def _vision_config(model: str) -> bool:
    """Whether the plan reads `model`'s config as a vision-language model's (no weights, no hub retries)."""
    from corl.plan.models import hf_config, is_vision_config

    try:
        return is_vision_config(hf_config(model, "model")[0])
    except Exception:  # noqa: BLE001 - an unreadable config: a text model's reader is tried, else the estimate
        return False


def _vision_length(inputs: AgentInputs) -> PromptLength:
    """Prompts with their images through the processor: text and image tokens, and the patches."""
    longest = patches = 0
    for vision_inputs in inputs.image_inputs(VISION_ROWS):
        longest = max(longest, vision_inputs.prompt_length)
        patches = max(patches, _patches(vision_inputs, inputs.reader))
    how = f"longest of {min(len(inputs.rows), VISION_ROWS)} prompts with their images, its processor"
    return PromptLength(longest, how, patches)


def _patches(inputs, processor) -> int:
    """Patches the vision tower encodes for one prompt's images."""
    if inputs.patches_per_image is not None:
        return int(inputs.patches_per_image.sum())
    pixels = inputs.image_inputs.get("pixel_values")
    if pixels is None or pixels.dim() != 4:
        return 0
    patch = getattr(processor, "patch_size", None) or 14
    return int(pixels.shape[0] * (pixels.shape[-1] // patch) * (pixels.shape[-2] // patch))
