"""How a policy is held for training: its attention (`corl.models.attention`), gradient
checkpointing, LoRA adapters, FSDP2 sharding, bf16; and how it is written back as a plain
Hugging Face folder."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from corl.config import ComputeConfig, LoRAConfig
from corl.models.attention import use_training_attention


def prepare_model(model, compute: ComputeConfig | None, dp):
    """The trainable policy as configured: its training attention, gradient checkpointing, LoRA
    adapters, then FSDP2 sharding over the agent's own dp ranks (or bf16 autocast, without FSDP)."""
    compute = compute or ComputeConfig()
    use_training_attention(model, compute.bf16)
    if compute.gradient_checkpointing:
        # Non-reentrant: works with frozen inputs (LoRA) and with FSDP2. HF turns the KV cache
        # off only in training mode, so generation keeps it.
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5 renamed it
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if compute.lora is not None:
        model = add_lora(model, compute.lora)
    disable_dropout(model)
    if dp.fsdp:
        shard_with_fsdp(model, dp.mesh, compute.bf16)
    elif compute.bf16:
        _autocast_bf16(model)
    return model


def disable_dropout(model) -> None:
    """Every dropout of the policy set to 0, as TRL's `disable_dropout_in_model`: the update runs
    in train mode, so with dropout (compute.lora.dropout, or a model config's attention/hidden
    dropout) the old and the new log-probs of one sequence would differ before any update
    (ratios != 1, spurious clipping, a mismatch against the sampler that is not there). The
    nn.Dropout modules (peft's lora_dropout among them) get p = 0, and float `*dropout` attributes
    that attention modules read in train mode (Llama, Qwen2, Gemma: `attention_dropout`) 0.0;
    the model's config is left as it is, so a saved checkpoint keeps its own settings."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
        for name, value in list(vars(module).items()):
            if name.endswith("dropout") and isinstance(value, float):
                setattr(module, name, 0.0)


def prepare_frozen(model, compute: ComputeConfig | None):
    """A frozen copy (KL reference, EMA teacher) computes in the policy's precision, with its attention."""
    use_training_attention(model, compute is not None and compute.bf16)
    if compute is not None and compute.bf16:
        _autocast_bf16(model)
    return model


def prepare_reference(model, compute: ComputeConfig | None, dp):
    """The frozen KL reference (grpo.beta > 0), held as the policy computes.

    Under FSDP2 it is sharded over the policy's dp ranks with the policy's mixed precision
    (`shard_with_fsdp`): each rank keeps 1/D of it, and its forward runs the policy's own
    numerical path, so at step 0 the KL is exactly 0. With compute.bf16 its shards are kept
    in bfloat16, the dtype FSDP2 gathers them in anyway (a float32 shard would be cast to the
    same values before every gather): half the memory, the same forward. Buffers (RoPE's
    inverse frequencies) keep their dtype, as the policy's do. Without FSDP: `prepare_frozen`.
    """
    if not dp.fsdp:
        return prepare_frozen(model, compute)
    bf16 = compute is not None and compute.bf16
    use_training_attention(model, bf16)
    if bf16:
        for parameter in model.parameters():  # tied weights are one parameter: cast once
            parameter.data = parameter.data.to(torch.bfloat16)
    shard_with_fsdp(model, dp.mesh, bf16)
    return model


def _autocast_bf16(model) -> None:
    # float32 master weights, bfloat16 matmuls: wrap forward, which generate() also calls
    device_type = next(model.parameters()).device.type
    model.forward = torch.autocast(device_type=device_type, dtype=torch.bfloat16)(model.forward)


def add_lora(model, lora: LoRAConfig):
    try:
        from peft import LoraConfig, get_peft_model
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "compute.lora needs the `peft` package: pip install peft (or pip install 'corl[gpu]')"
        ) from None
    config = LoraConfig(
        r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout, target_modules=lora.target_modules, task_type="CAUSAL_LM"
    )
    return get_peft_model(model, config)


def shard_with_fsdp(model, mesh, bf16: bool) -> None:
    """FSDP2 over the 1-D `mesh` (this agent's dp ranks): each transformer block, then the rest."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    if mesh.ndim != 1:
        raise ValueError("FSDP must shard over one agent's 1-D 'dp' mesh; a 2-D mesh would average gradients across agents")
    # The root is the Hugging Face model even under a peft wrapper: generate() calls its
    # forward directly, and FSDP needs the first forward to enter through the root.
    root = model.get_base_model() if hasattr(model, "get_base_model") else model
    block_names = set(getattr(root, "_no_split_modules", None) or ())
    blocks = [m for m in root.modules() if type(m).__name__ in block_names]
    if not blocks:
        raise ValueError(f"cannot find the transformer blocks of {type(root).__name__} to shard (its _no_split_modules is empty)")
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 else MixedPrecisionPolicy()
    for block in blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(root, mesh=mesh, mp_policy=policy)


def save_policy(model, folder: Path, state: dict | None = None) -> None:
    """Write a plain Hugging Face model folder (from_pretrained and eval harnesses load it).

    `state` is the whole state dict when the live model is sharded. LoRA adapters are merged
    into the weights they adapt (W + scale * B @ A), computed on the saved tensors so the
    live weights stay untouched.
    """
    if not hasattr(model, "get_base_model"):  # not a peft model
        with _writes_on_this_rank(model):
            model.save_pretrained(folder, state_dict=state)
        return
    state = dict(state if state is not None else {k: v.detach().cpu() for k, v in model.state_dict().items()})
    prefix = "base_model.model."
    for name, module in model.named_modules():
        if not hasattr(module, "lora_A") or f"{name}.base_layer.weight" not in state:
            continue
        for adapter in module.lora_A:  # "default"
            a = state.pop(f"{name}.lora_A.{adapter}.weight").float()  # [r, in]
            b = state.pop(f"{name}.lora_B.{adapter}.weight").float()  # [out, r]
            delta = (b @ a) * module.scaling[adapter]  # [out, in]
            if getattr(module, "fan_in_fan_out", False):  # GPT-2's Conv1D stores [in, out]
                delta = delta.T
            weight = state[f"{name}.base_layer.weight"]
            state[f"{name}.base_layer.weight"] = (weight.float() + delta).to(weight.dtype)
    clean = {}
    for key, value in state.items():
        if "lora_" in key:
            continue
        clean[key.removeprefix(prefix).replace(".base_layer.", ".")] = value
    with _writes_on_this_rank(model.get_base_model()) as base:
        base.save_pretrained(folder, state_dict=clean)


ADAPTER_FOLDER = "adapter"  # <agent>/adapter/: the LoRA adapters alone, in peft's format


def save_adapter(model, folder: Path, state: dict | None = None) -> None:
    """Write a peft model's adapters unmerged (adapter_config.json + adapter_model.safetensors).

    The merged folder cannot be resumed from: new adapters on merged weights are a different
    model, and the optimizer's moments belong to the old adapters. `state`: as in save_policy."""
    state = state if state is not None else {k: v.detach().cpu() for k, v in model.state_dict().items()}
    model.save_pretrained(folder, state_dict=state, save_embedding_layers=False)


def load_adapter(model, folder: Path) -> None:
    """Load adapters written by `save_adapter` into the adapters of `model` (a peft model built
    with the same LoRA settings on the run's original base model), in place: the parameters stay
    the same objects, so the optimizer (and the state it is about to load) still points at them.
    Every adapter tensor must be there with its shape; FSDP-sharded parameters are re-sharded."""
    from peft.utils import get_peft_model_state_dict
    from safetensors.torch import load_file

    file = Path(folder) / "adapter_model.safetensors"
    if not file.is_file():
        raise FileNotFoundError(f"{file} not found: the checkpoint holds no LoRA adapters to resume from")
    saved = load_file(str(file))
    # peft's own mapping from parameter names to saved keys (it drops the adapter name);
    # handed the parameters themselves, it returns them, so each key finds its parameter.
    params = dict(model.named_parameters())
    live = get_peft_model_state_dict(model, state_dict=params, save_embedding_layers=False)
    missing, unexpected = sorted(set(live) - set(saved)), sorted(set(saved) - set(live))
    if missing or unexpected:
        raise ValueError(
            f"adapters in {folder} do not match the model's: missing {missing[:3]}, unexpected {unexpected[:3]} "
            "(was compute.lora changed?)"
        )
    with torch.no_grad():
        for key, param in live.items():
            value = saved[key]
            shape = tuple(getattr(param, "shape", ()))
            if tuple(value.shape) != shape:
                raise ValueError(f"adapter {key} in {folder} has shape {tuple(value.shape)}, the model's {shape}")
            if hasattr(param, "device_mesh"):  # an FSDP2 DTensor: keep only this rank's shard
                from torch.distributed.tensor import distribute_tensor

                value = distribute_tensor(value.to(param.device), param.device_mesh, param.placements)
            param.copy_(value.to(param.device, param.dtype))


@contextmanager
def _writes_on_this_rank(model) -> Iterator:
    """transformers >= 5 writes a model only on *global* rank 0 once torch.distributed is up
    (`should_save_on_this_rank`); here each agent's own dp rank 0 writes its agent."""
    if not hasattr(model, "should_save_on_this_rank"):
        yield model
        return
    model.should_save_on_this_rank = lambda is_main_process: is_main_process
    try:
        yield model
    finally:
        del model.should_save_on_this_rank
