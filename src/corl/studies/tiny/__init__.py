"""The embedded default: a procedural reasoning task and a cohort of tiny HF models from different families.

    corl.studies.tiny.task        problems with worked solutions ending in \\boxed{}, seeded disjoint splits
    corl.studies.tiny.tokenizers  per-character and byte-level BPE tokenizers (PreTrainedTokenizerFast)
    corl.studies.tiny.families    random Llama/Qwen2/GPT-2 models and the FAMILIES registry
    corl.studies.tiny.pretrain    supervised pretraining to partial competence, cached by spec

Submodules are imported on use: `corl.studies.tiny.task` needs neither torch nor transformers.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "make_split": "task",
    "prompt_text": "task",
    "write_jsonl": "task",
    "TYPES": "task",
    "char_tokenizer": "tokenizers",
    "bpe_tokenizer": "tokenizers",
    "FAMILIES": "families",
    "FamilySpec": "families",
    "build_random_model": "families",
    "get_family": "families",
    "sibling": "families",
    "ensure_pretrained": "pretrain",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"corl.studies.tiny.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'corl.studies.tiny' has no attribute {name!r}")
