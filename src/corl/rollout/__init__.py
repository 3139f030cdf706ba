"""Rollout engines: prompts in, sampled completions and their log-probs out.

One seam (`RolloutEngine`), engines chosen by name (`rollout.engine` in the config):
`hf` (Hugging Face generate, any device) and `vllm` (vLLM, colocated with its trainer).
Everything that samples builds its engine with `build_engine`.
"""

from corl.rollout import hf as _hf  # noqa: F401  (registers "hf")
from corl.rollout import vllm as _vllm  # noqa: F401  (registers "vllm"; vLLM itself is imported only when an engine is built)
from corl.rollout.base import Rollout, RolloutEngine, SamplingParams, SyncStats, completion_mask_from
from corl.rollout.hf import HFGenerateEngine
from corl.rollout.registry import ENGINES, build_engine, register_engine

__all__ = [
    "ENGINES",
    "HFGenerateEngine",
    "Rollout",
    "RolloutEngine",
    "SamplingParams",
    "SyncStats",
    "build_engine",
    "completion_mask_from",
    "register_engine",
]
