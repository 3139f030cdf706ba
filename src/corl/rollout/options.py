"""The built-in rollout engines' option blocks (`rollout.hf`, `rollout.vllm`), apart from both the
config and the engines: the config reads them flat as well, and the engines declare them as their
`Options` without importing the config (or the config the engines, which load torch)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class HFOptions(_Block):
    """The `hf` engine's options (Hugging Face models sampled in the trainer's process):
    `rollout.hf: {...}`, or the same keys flat under `rollout:`."""

    batch_size: int | None = Field(None, ge=1, description="hf: sequences per generate call (memory cap); None = all.")
    kv_cache: Literal["auto", "dynamic", "static"] = Field(
        "auto",
        description="hf, where it samples through generate (decode: generate, vision-language models): generate's KV "
        "cache. static preallocates prompt + max_new_tokens and writes in place (on CPU ~16% less sampling time for "
        "small text models: no per-token concatenation); dynamic grows it; auto = static on CPU for text models, "
        "dynamic elsewhere. The compact loop always grows its cache (it drops rows).",
    )
    decode: Literal["auto", "compact", "generate"] = Field(
        "auto",
        description="hf: the sampling loop. compact drops each sequence from the batch when it ends (corl.rollout."
        "compact; text decoder-only models); generate is transformers' generate, which keeps every sequence until "
        "the last one ends; auto = compact where it applies.",
    )


class VLLMOptions(_Block):
    """The `vllm` engine's options (a colocated vLLM engine per agent): `rollout.vllm: {...}`,
    or the same keys flat under `rollout:`."""

    gpu_memory_utilization: float | None = Field(
        None,
        gt=0,
        le=1,
        description="vllm: share of accelerator memory (on CPU: of system RAM, for the KV cache) each agent's engine "
        "may take; None = 0.45 on GPUs (as the paper's colocated runs), on CPU a share that fits every agent's engine.",
    )
    max_model_len: int | None = Field(
        None,
        ge=16,
        description="vllm: longest prompt + completion the engine takes; None = the model's context length "
        "(max_position_embeddings), at most 8192. A prompt plus cohort.max_new_tokens must fit in it.",
    )
    enforce_eager: bool = Field(True, description="vllm: no CUDA graphs / compilation (faster start-up; needed on CPU).")
    sleep_mode: bool = Field(False, description="vllm on GPUs: free the engine's memory while the agent trains.")
    tensor_parallel_size: int = Field(1, ge=1, description="vllm: shard each agent's engine over this many of its ranks.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="vllm: weight dtype of the engine; auto = float32 on CPU, bfloat16 "
        "on GPUs that support it (the usual rollout precision; the update's importance weights correct the difference), "
        "else the trained weights' dtype. float32 gives log-prob parity with the trainer.",
    )
    max_images_per_prompt: int = Field(
        4, ge=1, description="vllm, vision-language models: images one prompt may hold (vLLM reserves memory for them)."
    )
