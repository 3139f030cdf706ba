"""cohort.votes_per_prompt V > K: the labels are voted from all V samples of a prompt, while the
rewards and the GRPO update see only the first K (in sample order), nothing of the other V - K.

The step is driven by test_cohort_step's scripted engine (fixed completions per agent and prompt)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
import yaml

from corl.config import ConfigError, validate_config
from corl.data.rows import batch_indices
from corl.rollout import Rollout
from corl.tracking.metrics import read_metrics
from corl.trainer import CohortTrainer
from corl.trainer.update import plan_minibatches
from tests.helpers import tiny_config
from tests.trainer import test_cohort_step as scripted

# 6 answers per prompt; the first 2 are the trained ones.
# agent 0: on "1+1=?" its majority of 6 is 2 (4 votes) though its first 2 both say 3;
#          on "2*3=?" its majority is 6 (4 votes), first 2: 6, 5.
# agent 1: on "1+1=?" majority 1 (4 votes), first 2: 2, 1; on "2*3=?" majority 5 (4 votes), first 2: 5, 5.
SCRIPT = {
    0: {"1+1=?": ["3", "3", "2", "2", "2", "2"], "2*3=?": ["6", "5", "5", "6", "6", "6"]},
    1: {"1+1=?": ["2", "1", "1", "1", "1", "2"], "2*3=?": ["5", "5", "5", "5", "6", "6"]},
}
# group_advantages of [1, 0]: mean 0.5, unbiased std sqrt(0.5) = 0.70711, (+-0.5) / (0.70711 + 1e-4) = +-0.70700
A = 0.5 / (0.5**0.5 + 1e-4)


def one_step(tmp_path, tiny_models, label_source):
    """(rewards, advantages, trained texts) per agent in step 0, in the file's problem order."""
    scripted.SCRIPT.clear()
    scripted.SCRIPT.update(SCRIPT)
    scripted.ENGINES.clear()
    scripted.UPDATES[0] = 0
    problems = sorted(SCRIPT[0])  # ["1+1=?", "2*3=?"]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"id": p, "problem": p, "answer": "0"}) + "\n" for p in problems))
    raw = tiny_config(tmp_path, tiny_models, {"train": data, "test": data})
    raw["rollout"] = {"engine": "scripted"}
    raw["cohort"].update(prompts_per_step=2, samples_per_prompt=2, votes_per_prompt=6, label_source=label_source)
    trainer = CohortTrainer(validate_config(raw), tmp_path / "run")
    seen = {}
    for n, agent in trainer.agents.items():

        def spy(rollout, rewards, params, n=n, agent=agent, update=agent.update, **options):
            plan = plan_minibatches(agent, rollout, rewards, options.get("exclude"))  # what the update computes
            seen[n] = (rewards.clone(), plan.advantages.view(-1, rollout.num_samples), list(rollout.texts))
            return update(rollout, rewards, params, **options)

        agent.update = spy
    metrics = trainer.step(0)
    drawn = batch_indices(0, 2, 2, raw["cohort"]["seed"])
    rows = [drawn.index(i) for i in range(2)]  # batch position of each file row
    out = []
    for n in range(2):
        rewards, advantages, texts = seen[n]
        texts = [texts[2 * b : 2 * b + 2] for b in range(2)]
        out.append((rewards[rows], advantages[rows], [texts[b] for b in rows]))
    return out, metrics


def test_ttrl_votes_over_all_v_and_trains_on_the_first_k(tmp_path, tiny_models):
    (r0, a0, t0), (r1, a1, t1) = one_step(tmp_path, tiny_models, "self")[0]
    # agent 0, labels 2 and 6 (its majorities of 6): first 2 are [3, 3] -> [0, 0] (a vote over the
    # first 2 would have labelled 3 and rewarded [1, 1]); [6, 5] -> [1, 0]
    assert r0.tolist() == [[0.0, 0.0], [1.0, 0.0]]
    assert t0 == [["\\boxed{3}", "\\boxed{3}"], ["\\boxed{6}", "\\boxed{5}"]]
    assert torch.allclose(a0, torch.tensor([[0.0, 0.0], [A, -A]]), atol=1e-6)
    # agent 1, labels 1 and 5: [2, 1] -> [0, 1]; [5, 5] -> [1, 1] (no signal)
    assert r1.tolist() == [[0.0, 1.0], [1.0, 1.0]]
    assert t1 == [["\\boxed{2}", "\\boxed{1}"], ["\\boxed{5}", "\\boxed{5}"]]
    assert torch.allclose(a1, torch.tensor([[-A, A], [0.0, 0.0]]), atol=1e-6)


def test_co_rl_votes_over_the_teachers_v(tmp_path, tiny_models):
    agents, metrics = one_step(tmp_path, tiny_models, "peer")
    (r0, a0, _), (r1, a1, _) = agents
    # agent 0 is taught by agent 1's majorities of 6 (1 and 5): [3, 3] -> [0, 0]; [6, 5] -> [0, 1]
    assert r0.tolist() == [[0.0, 0.0], [0.0, 1.0]]
    assert torch.allclose(a0, torch.tensor([[0.0, 0.0], [-A, A]]), atol=1e-6)
    # agent 1 is taught by agent 0's (2 and 6), which agent 0's own first 2 on "1+1=?" do not show:
    # [2, 1] -> [1, 0]; [5, 5] -> [0, 0]
    assert r1.tolist() == [[1.0, 0.0], [0.0, 0.0]]
    assert torch.allclose(a1, torch.tensor([[A, -A], [0.0, 0.0]]), atol=1e-6)
    assert metrics["agent0/reward_mean"] == 0.25  # logged over the 4 trained samples, 1 rewarded


def test_the_update_refuses_rewards_that_do_not_pair_with_its_sequences(tiny_models):
    from corl.config import AgentConfig, GRPOConfig
    from corl.data.rows import PromptTemplate
    from corl.models import load_agent_policy
    from corl.rollout import SamplingParams
    from corl.trainer import Agent

    model, tok, _ = load_agent_policy(str(tiny_models["llama-char"]), None, torch.device("cpu"))
    agent = Agent(AgentConfig(name="a", model="m"), model, tok, PromptTemplate("{problem}\n", ""), "problem", GRPOConfig())
    params = SamplingParams(max_new_tokens=4)
    rollout = agent.engine.generate(["1+1=?\n", "2*3=?\n"], 6, params)  # V = 6
    with pytest.raises(ValueError, match="12 sequences"):
        agent.update(rollout, torch.tensor([[1.0, 0.0], [0.0, 1.0]]), params)  # [B, K] with K = 2
    first = rollout.first_samples(2)
    assert isinstance(first, Rollout) and first.num_samples == 2
    for b in range(2):
        for j in range(2):
            assert torch.equal(first.input_ids[2 * b + j], rollout.input_ids[6 * b + j])
            assert first.texts[2 * b + j] == rollout.texts[6 * b + j]


def test_fewer_votes_than_samples_is_a_config_error(tmp_path, tiny_models, tiny_data):
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"samples_per_prompt": 4, "votes_per_prompt": 3})
    with pytest.raises(ConfigError, match="votes_per_prompt.*samples_per_prompt"):
        validate_config(raw)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    done = subprocess.run([sys.executable, "-m", "corl", "train", str(path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "votes_per_prompt" in done.stderr and "samples_per_prompt" in done.stderr


def test_train_cli_with_votes_per_prompt(tmp_path, tiny_models, tiny_data):
    raw = tiny_config(tmp_path, tiny_models, tiny_data, cohort={"steps": 2, "samples_per_prompt": 2, "votes_per_prompt": 5})
    raw["logging"]["tensorboard"] = False
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    done = subprocess.run([sys.executable, "-m", "corl", "train", str(path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    records = read_metrics(tmp_path / "run", "train")
    assert [r["step"] for r in records] == [1, 2]
    assert (tmp_path / "run" / "checkpoints" / "step_000002" / "agent1" / "model.safetensors").is_file()
