"""Policies: loading any Hugging Face causal LM (or a tiny embedded family) and preparing it
for training (LoRA, FSDP2, bf16, gradient checkpointing) and for saving."""

from corl.models.loading import TINY_PREFIX, check_model_source, load_policy, load_tokenizer, resolve_device, resolve_model_path
from corl.models.prepare import (
    ADAPTER_FOLDER,
    add_lora,
    load_adapter,
    prepare_frozen,
    prepare_model,
    save_adapter,
    save_policy,
    shard_with_fsdp,
)

__all__ = [
    "ADAPTER_FOLDER",
    "TINY_PREFIX",
    "add_lora",
    "check_model_source",
    "load_adapter",
    "load_policy",
    "load_tokenizer",
    "prepare_frozen",
    "prepare_model",
    "resolve_device",
    "resolve_model_path",
    "save_adapter",
    "save_policy",
    "shard_with_fsdp",
]
