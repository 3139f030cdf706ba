"""Loading policies: any Hugging Face causal LM and its tokenizer, or an embedded tiny family."""

from __future__ import annotations

from pathlib import Path

import torch

TINY_PREFIX = "tiny:"


def resolve_model_path(model: str) -> str:
    """`tiny:<family>` -> the cached pretrained tiny model (built on first use); else unchanged."""
    if model.startswith(TINY_PREFIX):
        from corl.tiny.pretrain import ensure_pretrained

        return str(ensure_pretrained(model[len(TINY_PREFIX) :]))
    return model


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        # Many base models ship without a pad token; padding is masked out everywhere.
        tok.pad_token = tok.eos_token
    if tok.eos_token is None:
        raise ValueError(f"tokenizer {path!r} has no EOS token: generation could never stop")
    tok.padding_side = "left"
    return tok


def load_policy(model: str, tokenizer: str | None = None, device: str | torch.device = "cpu", dtype: torch.dtype | None = None):
    """Load (model, tokenizer) by Hugging Face id, local path or `tiny:<family>`."""
    from transformers import AutoModelForCausalLM

    path = resolve_model_path(model)
    tok = load_tokenizer(resolve_model_path(tokenizer) if tokenizer else path)
    if Path(path).exists() and not (Path(path) / "config.json").exists():
        raise ValueError(f"model directory {path!r} has no config.json: not a Hugging Face checkpoint")
    policy = AutoModelForCausalLM.from_pretrained(path, dtype=dtype or torch.float32)
    policy.to(device if isinstance(device, torch.device) else resolve_device(device))
    return policy, tok
