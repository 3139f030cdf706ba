"""Health checks: a NaN/inf never reaches the weights unnoticed, a checkpoint with one is
refused naming the agent, and a collapsing run says so in its metrics and on the console."""

from __future__ import annotations

import json
import re

import pytest
import torch

from corl.config import AgentConfig, GRPOConfig, validate_config
from corl.data.rows import Problem, PromptTemplate
from corl.models import load_policy
from corl.rewards import REWARDS, RewardSpec, register_reward
from corl.rewards.agreement import agreement_rewards
from corl.rollout import SamplingParams
from corl.tracking.health import CollapseMonitor, HealthError
from corl.tracking.metrics import read_metrics
from corl.trainer import Agent, CohortTrainer
from tests.helpers import tiny_config

PARAMS = SamplingParams(temperature=1.0, max_new_tokens=8)


def tiny_agent(path) -> Agent:
    model, tok = load_policy(str(path))
    return Agent(
        AgentConfig(name="a", model=str(path), lr=1e-2), model, tok, PromptTemplate("{problem}\n", ""), "problem", GRPOConfig()
    )


def test_a_nan_reward_skips_the_optimizer_step(tiny_models):
    agent = tiny_agent(tiny_models["llama-char"])
    problems = [Problem(str(i), {"problem": f"{i}+1="}) for i in range(2)]
    torch.manual_seed(0)
    rollout = agent.sample(problems, 4, PARAMS)
    before = [p.detach().clone() for p in agent.model.parameters()]
    stats = agent.update(rollout, torch.tensor([[1.0, 0, float("nan"), 1], [0, 1, 0, 0]]), PARAMS)
    assert stats.skipped_nonfinite and stats.optimizer_steps == 0
    assert stats.as_dict()["skipped_nonfinite"] == 1.0
    assert all(torch.equal(a, b) for a, b in zip(before, agent.model.parameters()))
    stats = agent.update(rollout, torch.tensor([[1.0, 0, 0, 1], [0, 1, 0, 0]]), PARAMS)  # finite: it steps
    assert not stats.skipped_nonfinite and stats.optimizer_steps == 1
    assert any(not torch.equal(a, b) for a, b in zip(before, agent.model.parameters()))


# -- in a run ------------------------------------------------------------------------------------------


class NaNReward:
    """agreement, except that the second call of each step (agent1's) carries one NaN."""

    calls = 0

    def __call__(self, answers, keys, labels, equivalent):
        rewards = agreement_rewards(answers, keys, labels, equivalent)
        NaNReward.calls += 1
        if NaNReward.calls % 2 == 0:
            rewards[0, 0] = float("nan")
        return rewards


if "test_nan" not in REWARDS:
    register_reward(RewardSpec("test_nan", "agreement with one NaN for every second agent", from_labels=NaNReward()))


def test_a_nan_reward_stops_the_run_naming_agent_and_step(tmp_path, tiny_models, tiny_data):
    NaNReward.calls = 0
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"reward": "test_nan", "steps": 2}, logging={"tensorboard": False})
    with pytest.raises(
        HealthError, match=r"step 1: agent 'agent1': 1 of 16 rewards are NaN/inf \(cohort.reward 'test_nan'\).*on_nonfinite: stop"
    ):
        CohortTrainer(validate_config(raw)).train()


def test_a_nan_reward_with_skip_skips_that_step_only(tmp_path, tiny_models, tiny_data, capfd):
    NaNReward.calls = 0
    raw = tiny_config(
        tmp_path,
        tiny_models,
        tiny_data,
        cohort={"reward": "test_nan", "steps": 2},
        logging={"tensorboard": False},
        health={"on_nonfinite": "skip"},
    )
    raw["data"].pop("val")
    CohortTrainer(validate_config(raw)).train()
    records = read_metrics(tmp_path / "run", "train")
    assert [r["agent1/skipped_nonfinite"] for r in records] == [1.0, 1.0]
    assert all(r["agent1/optimizer_steps"] == 0 for r in records)
    assert "step 1: agent 'agent1': 1 of 16 rewards are NaN/inf" in capfd.readouterr().err


def test_a_checkpoint_with_an_inf_weight_is_refused_naming_the_agent(tmp_path, tiny_models, tiny_data):
    model, tok = load_policy(str(tiny_models["llama-char"]))
    with torch.no_grad():
        next(model.parameters())[0, 0] = float("inf")
    model.save_pretrained(tmp_path / "broken")
    tok.save_pretrained(tmp_path / "broken")
    raw = tiny_config(tmp_path, tiny_models, tiny_data)
    raw["agents"][1]["model"] = str(tmp_path / "broken")
    with pytest.raises(HealthError, match=r"agents.1.model \(agent 'agent1'\) loaded from .*broken': weight '.*' holds NaN/inf"):
        CohortTrainer(validate_config(raw))


def test_rewards_all_zero_raise_the_collapse_alarm(tmp_path, tiny_models, tiny_data, capfd):
    """Ground-truth rewards on problems whose answers the tiny models (digits 0-3) never give."""
    rows = [json.loads(line) for line in tiny_data["train"].read_text().splitlines()]
    (tmp_path / "hard.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["answer"] not in {"0", "1", "2", "3"}))
    raw = tiny_config(
        tmp_path,
        tiny_models,
        tiny_data,
        cohort={"label_source": "truth", "steps": 2},
        logging={"tensorboard": False},
        health={"collapse_steps": 2},
    )
    raw["data"]["train"] = str(tmp_path / "hard.jsonl")
    raw["data"].pop("val")
    CohortTrainer(validate_config(raw)).train()
    records = read_metrics(tmp_path / "run", "train")
    assert [r["health/agent0/reward_all_0_steps"] for r in records] == [1.0, 2.0]
    assert records[0]["health/alarms"] == 0 and records[1]["health/alarms"] >= 2  # both agents
    err = capfd.readouterr().err
    assert "step 2: agent 'agent0': every reward was 0 for 2 consecutive steps" in err


def test_the_collapse_monitor_counts_consecutive_steps_and_warns_once(capfd):
    monitor = CollapseMonitor(["a"], patience=2, binary_reward=True)
    ok = {"a/reward_mean": 0.5, "a/answer_rate": 1.0}
    gone = {"a/reward_mean": 0.0, "a/answer_rate": 0.0}
    same, mixed = [["7", "7", None]], [["7", "8", None]]
    seen = [monitor(s, m, lbl) for s, (m, lbl) in enumerate([(ok, same), (gone, same), (gone, same), (ok, mixed)])]
    assert [h["health/a/no_answers_steps"] for h in seen] == [0, 1, 2, 0]
    assert [h["health/a/same_label_steps"] for h in seen] == [1, 2, 3, 0]
    assert [h["health/alarms"] for h in seen] == [0, 1, 3, 0]
    err = capfd.readouterr().err
    assert err.count("every label was '7' for 2 consecutive steps") == 1
    assert err.count("no completion had an answer for 2 consecutive steps") == 1


# -- a diverging update, as a user meets it ---------------------------------------------------------


def _corl_train(tmp_path, raw: dict, *overrides: str):
    import subprocess
    import sys

    import yaml

    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    sets = [arg for o in overrides for arg in ("--set", o)]
    return subprocess.run(
        [sys.executable, "-m", "corl", "train", str(config), *sets], cwd=tmp_path, capture_output=True, text=True, timeout=900
    )


def test_a_diverging_update_stops_the_run_and_a_normal_one_does_not(tmp_path, tiny_models, tiny_data):
    """lr 1 (allowed: at most 1) multiplies the tiny models' weight norm ~13x in one AdamW step:
    the run stops with exit 1 naming the agent, its lr and the step, instead of ending "done"
    with wrecked weights. The same run at the tests' lr (1e-3) keeps the ratio within 1%."""
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"steps": 2}, logging={"tensorboard": False})
    raw["data"].pop("val")
    normal = _corl_train(tmp_path, raw, "output_dir=normal")
    assert normal.returncode == 0, normal.stderr[-3000:]
    records = read_metrics(tmp_path / "normal", "train")
    assert sum(r["agent0/optimizer_steps"] + r["agent1/optimizer_steps"] for r in records) >= 1  # something stepped
    ratios = [r[f"{a}/weight_norm_ratio"] for r in records for a in ("agent0", "agent1")]
    assert all(0.99 < x < 1.01 for x in ratios), ratios

    wrecked = _corl_train(tmp_path, raw, "output_dir=wrecked", "agents.0.lr=1.0", "agents.1.lr=1.0")
    assert wrecked.returncode == 1, wrecked.stderr[-3000:]
    assert "Traceback" not in wrecked.stderr
    said = " ".join(wrecked.stderr.split())  # the console wraps long lines
    assert re.search(
        r"step 1: agent 'agent\d' \(agents\.\d\.lr 1\): the update diverged: it multiplied the norm of the weights by "
        r"\d+(\.\d+)? \(from [\d.]+ to [\d.]+; health\.max_weight_norm_ratio is 1\.5\)\. Lower this agent's lr",
        said,
    ), said
    assert "a resume keeps the run's lr, so start a new run (-o NEW_DIR)" in said and "resume from" not in said


def test_the_advice_after_a_divergence_is_one_a_resume_accepts(tmp_path, tiny_models, tiny_data):
    """The messages once said "lower its lr and resume": a resume refuses a changed lr. The advice is a
    new run from the last good weights; what it names is what a resume would refuse."""
    from corl.config import ConfigError, check_resume_config, validate_config
    from corl.tracking.health import HealthError, check_weight_growth

    with pytest.raises(HealthError) as stop:
        check_weight_growth(13.0, 13.0, 1.5, "step 1: agent 'a' (agents.0.lr 1)")
    said = str(stop.value)
    assert "Lower this agent's lr: a resume keeps the run's lr, so start a new run (-o NEW_DIR)" in said
    assert "RUN/checkpoints/step_K/AGENT" in said and "and resume" not in said
    raw = tiny_config(tmp_path, tiny_models, tiny_data)
    lowered = {**raw, "agents": [{**raw["agents"][0], "lr": 1e-4}, *raw["agents"][1:]]}
    with pytest.raises(ConfigError, match="agents.0.lr"):  # why the advice is a new run, not a resume
        check_resume_config(validate_config(raw), validate_config(lowered), "the run's record")


def test_an_lr_that_overflows_adamw_is_a_config_error(tmp_path, tiny_models, tiny_data):
    raw = tiny_config(tmp_path, tiny_models, tiny_data, logging={"tensorboard": False})
    result = _corl_train(tmp_path, raw, "agents.0.lr=1.0e+38")
    assert result.returncode == 2, result.stderr[-3000:]
    said = " ".join(result.stderr.split())
    assert "agents.0.lr: must be a number with 0 < lr <= 1" in said and "Traceback" not in said
