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
from functools import lru_cache

from corl.config import RunConfig
from corl.data import DataError, PromptTemplate, load_rows, row_images
from corl.model_sources import split_model_name

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


@lru_cache(maxsize=16)
def _tokenizer(model: str, tokenizer: str | None):
    """The agent's tokenizer or processor if it can be had without loading weights, else None."""
    try:
        source = split_model_name(model)
        if source is not None:
            return source[0].tokenizer(source[1])
        from corl.plan.models import hf_config, is_vision_config

        if is_vision_config(hf_config(model, "model")[0]):
            from corl.vision.processing import load_processor

            return load_processor(model)
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(tokenizer or model)
        # a folder with a config.json but no tokenizer files yields an empty tokenizer
        return tok if tok("plan a run")["input_ids"] else None
    except Exception:  # noqa: BLE001 - no tokenizer (offline, gated, absent): the plan estimates instead
        return None


def prompt_length(cfg: RunConfig, index: int) -> PromptLength:
    """The longest prompt agent `index` will see, in its tokens."""
    agent = cfg.agents[index]
    override = cfg.plan.prompt_tokens
    if override is not None and not _vision(agent.model):
        return PromptLength(override, "plan.prompt_tokens")
    measured = _measured(cfg, index)
    if override is not None:  # a vision-language model's images are still measured, for its tower
        return PromptLength(override, "plan.prompt_tokens", measured.image_patches)
    return measured


def _vision(model: str) -> bool:
    from corl.models import is_vision_model

    try:
        return is_vision_model(model)
    except Exception:  # noqa: BLE001 - an unreadable config: not known to be one
        return False


def _measured(cfg: RunConfig, index: int) -> PromptLength:
    agent = cfg.agents[index]
    source, field = agent.data or cfg.data.train, cfg.prompt_field(agent)
    try:
        rows = load_rows(source, cfg.data.split)[:TEXT_ROWS]
    except (DataError, OSError) as err:
        return PromptLength(FALLBACK_TOKENS, f"a guess: the training data could not be read ({err}); set plan.prompt_tokens")
    rows = [r for r in rows if r.get(field) is not None]
    if not rows:
        return PromptLength(FALLBACK_TOKENS, f"a guess: no row of {source!r} has {field!r}; set plan.prompt_tokens")
    template = PromptTemplate(cfg.data.template, cfg.data.instruction, agent.chat_template)
    tok = _tokenizer(agent.model, agent.tokenizer)
    if tok is None:
        chars = max(len(template.text(str(r[field]))) for r in rows)
        tokens = -(-chars // CHARS_PER_TOKEN) + (CHAT_TOKENS if agent.chat_template else 0)
        return PromptLength(
            tokens, f"estimated: longest of {len(rows):,} prompts, {chars:,} characters / {CHARS_PER_TOKEN} (no tokenizer here)"
        )
    if hasattr(tok, "image_processor"):
        return _vision_length(cfg, tok, template, rows[:VISION_ROWS], source, field)
    texts = [template.render(str(r[field]), tok) for r in rows]
    ids = tok(texts, add_special_tokens=not agent.chat_template)["input_ids"]
    return PromptLength(max(len(x) for x in ids), f"longest of {len(rows):,} prompts, its tokenizer")


def _vision_length(cfg: RunConfig, processor, template, rows, source: str, field: str) -> PromptLength:
    """Prompts with their images through the processor: text and image tokens, and the patches."""
    from corl.vision.inputs import build_inputs, image_prompt

    longest = patches = 0
    for i, row in enumerate(rows):
        images = row_images(row, cfg.data.image_field, source, i) or []
        prompt = image_prompt(processor, template.text(str(row[field])), images)
        inputs = build_inputs(processor, [prompt.text], [list(prompt.images)])
        longest = max(longest, inputs.prompt_length)
        patches = max(patches, _patches(inputs, processor))
    how = f"longest of {len(rows)} prompts with their images, its processor"
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
