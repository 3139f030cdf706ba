"""Recipe "Add a rollout engine" (docs/architecture.md): one module outside corl
(tests/plugins/toy_engine.py) with its own option block, named in `plugins:`, trains a step."""

from __future__ import annotations

from pathlib import Path

import torch

from corl.config import validate_config
from corl.trainer import CohortTrainer
from tests.helpers import tiny_config

PLUGINS = Path(__file__).parent


def test_an_engine_from_outside_trains_a_step(tiny_models, tiny_data, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    # every completion is cut at 3 tokens: kept in the loss, scored by RENT's label-free reward
    rollout = {"engine": "short_hf", "short_hf": {"max_new_tokens": 3}}
    cohort = {"label_source": "self", "reward": "entropy", "truncated_answers": "keep"}
    raw = tiny_config(tmp_path, tiny_models, tiny_data, rollout=rollout, cohort=cohort)
    raw["plugins"] = ["toy_engine"]
    cfg = validate_config(raw)
    assert cfg.rollout.block("short_hf").max_new_tokens == 3  # its block, checked by its own Options model
    trainer = CohortTrainer(cfg)
    import toy_engine

    before = [p.detach().clone() for agent in trainer.agents.values() for p in agent.model.parameters()]
    metrics = trainer.step(0)
    assert toy_engine.CALLS  # the cohort sampled through it
    for agent in trainer.agents.values():
        assert metrics[f"{agent.name}/completion_length"] <= 3  # the engine's own budget (the cohort asks for 12)
    after = [p.detach() for agent in trainer.agents.values() for p in agent.model.parameters()]
    stepped = sum(metrics[f"{a.name}/optimizer_steps"] for a in trainer.agents.values())
    assert stepped >= 1 and any(not torch.equal(b, a) for b, a in zip(before, after))


def test_the_built_in_engines_declare_their_blocks_and_still_read_flat_keys():
    """rollout.vllm: {...} / rollout.hf: {...} are each engine's own block; the flat keys of old
    configs mean the same, and the two spellings may not disagree."""
    import pytest

    from corl.config import RolloutConfig
    from corl.rollout import ENGINES

    block = RolloutConfig(engine="vllm", vllm={"dtype": "bfloat16", "max_model_len": 512})
    flat = RolloutConfig(engine="vllm", dtype="bfloat16", max_model_len=512)
    assert block.block("vllm") == flat.block("vllm") and (block.dtype, block.max_model_len) == ("bfloat16", 512)
    assert isinstance(block.block("vllm"), ENGINES.get("vllm").Options)
    assert RolloutConfig(hf={"batch_size": 4}).batch_size == 4 and RolloutConfig(batch_size=4).block("hf").batch_size == 4
    with pytest.raises(ValueError, match=r"rollout\.dtype and rollout\.vllm\.dtype differ"):
        RolloutConfig(engine="vllm", dtype="float32", vllm={"dtype": "bfloat16"})
    with pytest.raises(ValueError, match=r"rollout\.hf\.beams"):
        RolloutConfig(hf={"beams": 4})  # a key of no built-in engine
    # a written config (both spellings, equal) reads back the same
    again = RolloutConfig.model_validate(block.model_dump())
    assert again.block("vllm") == block.block("vllm")
