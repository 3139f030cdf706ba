"""What an agent reads: its training prompts, rendered as it renders them, with the tokenizer or
processor that reads them.

The trainer's agents render their prompts with `PromptTemplate.render` and their own tokenizer;
the memory plan (`corl plan`) reads the same rows through the same template with the same reader,
without loading any weights, to measure the longest prompt. This module is where both get them,
so the plan never reaches into data, model sources and vision processors on its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from corl.config import RunConfig
from corl.data.rows import PromptTemplate, load_rows, row_images


@dataclass(frozen=True)
class AgentInputs:
    """Agent `index`'s training rows that hold its prompt field, its template and its reader."""

    source: str  # the file or dataset the rows come from
    field: str  # the agent's prompt field
    rows: list[dict]
    template: PromptTemplate
    reader: Any | None  # its tokenizer, or a vision-language model's processor; None if not to be had without weights
    image_field: str | None

    @property
    def is_vision(self) -> bool:
        return self.reader is not None and hasattr(self.reader, "image_processor")

    def texts(self) -> list[str]:
        """Every prompt as the agent's engine receives it (the chat template applied when it has one)."""
        return [self.template.render(str(r[self.field]), self.reader) for r in self.rows]

    def image_inputs(self, limit: int) -> Iterator:
        """The first `limit` prompts with their images, through the processor (corl.vision.inputs.VisionInputs)."""
        from corl.vision.inputs import build_inputs, image_prompt

        for i, row in enumerate(self.rows[:limit]):
            images = row_images(row, self.image_field, self.source, i + 1) or []
            prompt = image_prompt(self.reader, self.template.text(str(row[self.field])), images)
            yield build_inputs(self.reader, [prompt.text], [list(prompt.images)])


def agent_inputs(cfg: RunConfig, index: int, max_rows: int, vision: bool) -> AgentInputs:
    """Agent `index`'s inputs from the first `max_rows` training rows (DataError, OSError: unreadable
    data); `vision`: its model is a vision-language model (its reader is then a processor)."""
    agent = cfg.agents[index]
    field = cfg.prompt_field(agent)
    files = (
        [(agent.data, cfg.data.split)] if agent.data else [(f.path, f.split or cfg.data.split) for f in cfg.data.train_files()]
    )
    source = files[0][0]  # several files (a mix): their rows together; images are read from the first one's folder
    rows = [r for path, split in files for r in load_rows(path, split)[:max_rows] if r.get(field) is not None]
    template = PromptTemplate(cfg.data.template, cfg.data.instruction, agent.chat_template)
    return AgentInputs(
        source, field, rows, template, reader_without_weights(agent.model, agent.tokenizer, vision), cfg.data.image_field
    )


@lru_cache(maxsize=16)
def reader_without_weights(model: str, tokenizer: str | None, vision: bool):
    """The agent's tokenizer or processor if it can be had without loading weights, else None."""
    from corl.models.sources import split_model_name

    try:
        source = split_model_name(model)
        if source is not None:
            return source[0].tokenizer(source[1])
        if vision:
            from corl.vision.processing import load_processor

            return load_processor(model)
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(tokenizer or model)
        # a folder with a config.json but no tokenizer files yields an empty tokenizer
        return tok if tok("plan a run")["input_ids"] else None
    except Exception:  # noqa: BLE001 - no tokenizer (offline, gated, absent): the plan estimates instead
        return None
