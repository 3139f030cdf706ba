"""Health checks: a NaN/inf never reaches the weights unnoticed, a checkpoint with one is
refused naming the agent, and a collapsing run says so in its metrics and on the console."""

from __future__ import annotations

import torch

from corl.agent import Agent
from corl.config import AgentConfig, GRPOConfig
from corl.data import Problem, PromptTemplate
from corl.models import load_policy
from corl.rollout import SamplingParams

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
