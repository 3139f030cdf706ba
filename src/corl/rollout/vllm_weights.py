"""The weights a rollout engine must sample from, as plain (Hugging Face name, tensor) pairs.

A training model is not always a plain `PreTrainedModel`: under `compute.lora` it is a
peft wrapper whose state dict holds frozen base weights and low-rank adapters under
renamed keys, and under FSDP2 every tensor is a DTensor shard. An inference engine
knows none of that; it wants the checkpoint names and whole tensors of the model as if
it had been saved and loaded again. This module produces exactly that, one tensor at a
time (a generator: at most one gathered tensor is alive beyond the model itself), and
never changes the training model (peft's `merge_and_unload` would merge in place).

No vLLM import here: the same stream can feed any engine, and it is tested without one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import torch

PEFT_PREFIX = "base_model.model."


def is_peft_model(model) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "get_base_model")


def hf_model_of(model):
    """The Hugging Face model inside a peft wrapper (with its adapters still injected), or `model`."""
    return model.get_base_model() if is_peft_model(model) else model


def _whole(t: torch.Tensor) -> torch.Tensor:
    """A DTensor shard gathered whole (a collective: every rank of the mesh must call it, in
    the same order), or the tensor itself."""
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def _lora_layers(model) -> dict[str, torch.nn.Module]:
    """Adapter-carrying modules by their state-dict prefix, e.g. 'base_model.model.model.layers.0.self_attn.q_proj'."""
    out = {}
    for name, module in model.named_modules():
        if hasattr(module, "lora_A") and hasattr(module, "base_layer"):
            if getattr(module, "use_dora", {}) and any(module.use_dora.values()):
                raise NotImplementedError(f"{name}: DoRA adapters cannot be merged for a rollout engine yet (use plain LoRA)")
            if len(getattr(module, "lora_embedding_A", {})):
                raise NotImplementedError(f"{name}: LoRA on embeddings cannot be merged for a rollout engine yet")
            out[name] = module
    return out


def _merged(module, weight: torch.Tensor) -> torch.Tensor:
    """W + scale * B @ A for every active adapter of a peft LoRA layer not yet folded into W
    (peft's own `merge` does that in place): what its forward computes. [out, in]"""
    if getattr(module, "disable_adapters", False):  # the forward runs the base layer alone
        return weight
    out = weight.float()
    for adapter in module.active_adapters:
        if adapter not in module.lora_A or adapter in getattr(module, "merged_adapters", ()):
            continue
        a = _whole(module.lora_A[adapter].weight).float()  # [r, in]
        b = _whole(module.lora_B[adapter].weight).float()  # [out, r]
        delta = (b @ a) * module.scaling[adapter]  # [out, in]
        if getattr(module, "fan_in_fan_out", False):  # GPT-2's Conv1D stores [in, out]
            delta = delta.T
        out = out + delta.to(out.device)
    return out.to(weight.dtype)


def _storage_of(t: torch.Tensor) -> tuple:
    """Where a tensor's data lives (a DTensor: its local shard), to recognise tied weights."""
    from torch.distributed.tensor import DTensor

    local = t._local_tensor if isinstance(t, DTensor) else t
    return (local.untyped_storage().data_ptr(), local.storage_offset(), tuple(local.shape))


def iter_full_weights(model, dtype: torch.dtype | None = None, skip_tied: bool = False) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) for every tensor of `model`'s state dict, named as in a saved Hugging
    Face checkpoint of the plain model: LoRA merged, peft names stripped, DTensors whole.

    `dtype` casts floating tensors (the engine's dtype; halves the bytes pushed for bf16).
    `skip_tied` yields a tensor that shares storage with one already yielded (lm_head tied
    to the embedding) only once, under its first name. The tensors are detached; a merged or cast one is a new tensor, the others may share
    storage with the live parameters (copy them before changing the model).
    """
    peft = is_peft_model(model)
    layers = _lora_layers(model) if peft else {}
    seen: set[tuple] = set()
    with torch.no_grad():
        for key, value in model.state_dict().items():
            if skip_tied and value.numel():
                where = _storage_of(value)
                if where in seen:
                    continue
                seen.add(where)
            name = key
            if peft:
                if ".lora_" in key or ".original_module." in key:
                    continue  # adapters are merged below; modules_to_save replaces its original
                name = key.removeprefix(PEFT_PREFIX).replace(".base_layer.", ".")
                name = re.sub(r"\.modules_to_save\.[^.]+\.", ".", name)
            owner, _, leaf = key.rpartition(".")
            lora = peft and owner.endswith(".base_layer") and leaf == "weight" and owner.removesuffix(".base_layer") in layers
            tensor = value.detach()
            if dtype is not None and not lora and tensor.is_floating_point() and tensor.dtype != dtype:
                # cast the shard, then gather: the same values, in `dtype`'s bytes over the wire
                # (a LoRA layer is merged in float32 first, then cast)
                tensor = tensor.to(dtype)
            tensor = _whole(tensor)
            if lora:
                tensor = _merged(layers[owner.removesuffix(".base_layer")], tensor)
            if dtype is not None and tensor.is_floating_point() and tensor.dtype != dtype:
                tensor = tensor.to(dtype)
            yield name, tensor
