"""Named model sources: `<prefix>:<name>` models that a plugin builds on first use.

A model name is a Hugging Face id, a local folder, or `<prefix>:<name>` with a registered
prefix: `gguf:` (a GGUF file, corl.models.gguf; a path ending in .gguf needs no prefix), and
`tiny:` and `tiny-vl:`, which come with `corl.studies` (the embedded tiny families). A
source says how to get the model folder, whether it is a vision-language model, and, for
`corl plan`, its config and tokenizer without building its weights.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corl.registry import MODEL_SOURCES


@dataclass(frozen=True)
class ModelSource:
    """How to get the models `<prefix>:<name>`."""

    resolve: Callable[[str], Any]  # name -> a Hugging Face model folder (built and cached on first use)
    config: Callable[[str], Any]  # name -> its transformers config, without weights (corl plan)
    tokenizer: Callable[[str], Any]  # name -> its tokenizer or processor, without weights (corl plan)
    vision: bool = False  # vision-language models (a processor with images)
    describe: str = ""  # for `corl plan`: "tiny family"
    # The prompt options its models were pretrained with (corl eval's template, instruction,
    # chat), taken by `corl eval` when not given: a model trained on the bare problem scores 0
    # under the default instruction, a wrong number without an error.
    prompt: dict | None = None
    # name -> None, or ValueError naming the names it has (and the close ones): a mistyped
    # name is refused in one line before anything loads, not deep inside `resolve`
    check: Callable[[str], None] | None = None


def register_model_source(prefix: str, source: ModelSource) -> None:
    """Models named `<prefix>:<name>` come from `source` (a prefix is a word: letters, digits, -, _)."""
    MODEL_SOURCES.register(prefix, source)


def split_model_name(model: str) -> tuple[ModelSource, str] | None:
    """(its source, the name after the prefix) for a `<prefix>:<name>` model of a registered
    source, or for a path to a GGUF file (`gguf:` implied); None for a hub id or a folder."""
    prefix, colon, name = model.partition(":")
    if colon and prefix in MODEL_SOURCES:
        return MODEL_SOURCES.get(prefix), name
    if model.lower().endswith(".gguf"):
        return MODEL_SOURCES.get("gguf"), model
    return None
