"""Recipe "Add a reward" (docs/architecture.md): one module outside corl
(tests/plugins/toy_reward.py) that scores from per-sample metadata, composed with agreement
in `cohort.rewards`, trains a step."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from corl.config import ConfigError, validate_config
from corl.trainer import CohortTrainer
from tests.helpers import tiny_config

PLUGINS = Path(__file__).parent


def first_step(tmp_path, tiny_models, tiny_data, cohort) -> tuple[CohortTrainer, dict]:
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort=cohort)
    raw["plugins"] = ["toy_reward"]
    trainer = CohortTrainer(validate_config(raw))
    return trainer, trainer.step(0)


def test_rewards_compose_as_a_weighted_sum(tiny_models, tiny_data, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    _, alone = first_step(tmp_path / "a", tiny_models, tiny_data, {"reward": "agreement"})
    import toy_reward

    weights = [{"name": "agreement", "weight": 1.0}, {"name": "brevity", "weight": 0.5}]
    trainer, both = first_step(tmp_path / "b", tiny_models, tiny_data, {"rewards": weights})
    brevity = toy_reward.SCORED[-len(trainer.agents) :]  # this step's, one [B, K] per agent
    # the same samples (seeded per step and agent): reward = agreement + 0.5 x brevity, per agent
    for agent, part in zip(trainer.agents.values(), brevity):
        expected = alone[f"{agent.name}/reward_mean"] + 0.5 * float(part.mean())
        assert both[f"{agent.name}/reward_mean"] == pytest.approx(expected, abs=1e-6)
    assert sum(both[f"{a.name}/optimizer_steps"] for a in trainer.agents.values()) >= 1


def test_brevity_by_hand(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    from toy_reward import brevity

    from corl.labels import SampleInfo
    from corl.rewards import RewardInputs

    infos = [[SampleInfo(0.0, n, False, 0.0) for n in (2, 4, 8)]]
    out = brevity(RewardInputs([], [], [], [], infos, lambda a, b: a == b, 3))
    assert torch.allclose(out, torch.tensor([[0.75, 0.5, 0.0]]))  # 1 - 2/8, 1 - 4/8, 1 - 8/8


def test_one_reward_setting(monkeypatch):
    monkeypatch.syspath_prepend(str(PLUGINS))
    raw = {"agents": [{"name": "a", "model": "m"}], "data": {"train": "t.jsonl"}, "plugins": ["toy_reward"]}
    raw["cohort"] = {"label_source": "self", "reward": "entropy", "rewards": [{"name": "brevity"}]}
    with pytest.raises(ConfigError, match="set cohort.rewards or cohort.reward, not both"):
        validate_config(raw)
    raw["cohort"] = {"label_source": "self", "rewards": [{"name": "brevity", "weight": 2}]}
    cfg = validate_config(raw)
    assert cfg.cohort.reward_terms() == [("brevity", 2.0)] and cfg.cohort.reward == "brevity"
    assert validate_config({**raw, "cohort": {"label_source": "self"}}).cohort.reward_terms() == [("agreement", 1.0)]
