"""Policies: loading any Hugging Face causal LM (or a model of a registered source, `corl.models.sources`) and preparing it
for training (LoRA, FSDP2, bf16, gradient checkpointing) and for saving."""

from corl.models.loading import (
    check_model_source,
    is_vision_model,
    load_agent_policy,
    load_policy,
    load_tokenizer,
    load_vision_policy,
    resolve_device,
    resolve_model_path,
)
from corl.models.prepare import (
    ADAPTER_FOLDER,
    add_lora,
    load_adapter,
    prepare_frozen,
    prepare_model,
    prepare_reference,
    save_adapter,
    save_policy,
    shard_with_fsdp,
)
from corl.models.sources import MODEL_SOURCES, ModelSource, register_model_source

__all__ = [
    "MODEL_SOURCES",
    "ModelSource",
    "register_model_source",
    "ADAPTER_FOLDER",
    "add_lora",
    "check_model_source",
    "is_vision_model",
    "load_agent_policy",
    "load_adapter",
    "load_policy",
    "load_tokenizer",
    "load_vision_policy",
    "prepare_frozen",
    "prepare_model",
    "prepare_reference",
    "resolve_device",
    "resolve_model_path",
    "save_adapter",
    "save_policy",
    "shard_with_fsdp",
]
