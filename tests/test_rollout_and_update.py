"""The HF rollout engine and one agent's GRPO update, on tiny models of two families."""

import copy

import pytest
import torch

from corl.agent import Agent, sequence_logprobs
from corl.config import AgentConfig, GRPOConfig
from corl.data import Problem, PromptTemplate
from corl.grpo import aggregate_loss, clipped_policy_loss, group_advantages
from corl.models import load_policy
from corl.rollout import HFGenerateEngine, SamplingParams, completion_mask_from

PROMPTS = ["3+4=?\n", "12*3-5=?\n", "7=?\n"]


def test_completion_mask_stops_after_the_first_eos():
    ids = torch.tensor([[5, 1, 7, 1], [5, 6, 7, 8], [1, 0, 0, 0]])
    assert completion_mask_from(ids, [1]).tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]


@pytest.mark.parametrize("family", ["llama-char", "qwen2-bpe"])
def test_rollout_shapes_texts_and_logprobs_match_a_training_forward(tiny_models, family):
    model, tok = load_policy(str(tiny_models[family]))
    engine = HFGenerateEngine(model, tok, batch_size=4)  # 3 prompts x 3 samples in chunks of 4
    torch.manual_seed(0)
    r = engine.generate(PROMPTS, 3, SamplingParams(temperature=0.7, max_new_tokens=10))
    n = len(PROMPTS) * 3
    assert r.input_ids.shape[0] == n and r.completion_mask.shape == r.sampling_logprobs.shape
    assert len(r.texts) == n
    # texts are the decoded completions up to EOS
    for i in range(n):
        ids = r.completion_ids[i][r.completion_mask[i].bool()]
        assert r.texts[i] == tok.decode(ids, skip_special_tokens=True)
    # log-probs recomputed by a training forward (left padding, position ids) equal the
    # sampling-time ones: the ratio starts at exactly 1 for on-policy updates
    with torch.no_grad():
        lp = sequence_logprobs(model, r, torch.arange(n), temperature=0.7)
    m = r.completion_mask.bool()
    assert torch.allclose(lp[m], r.sampling_logprobs[m], atol=1e-4)


def test_truncation_means_no_eos_within_the_budget(tiny_models):
    model, tok = load_policy(str(tiny_models["llama-char"]))
    engine = HFGenerateEngine(model, tok)
    short = engine.generate(PROMPTS[:1], 2, SamplingParams(temperature=1.0, max_new_tokens=2))
    assert short.truncated.all()  # "\\b..." cannot finish in 2 tokens
    full = engine.generate(PROMPTS, 2, SamplingParams(temperature=0.0, max_new_tokens=24))
    ended = torch.isin(full.completion_ids, torch.tensor([tok.eos_token_id])).any(1)
    assert torch.equal(full.truncated, ~ended)
    assert not full.truncated.all()  # the format-trained model does stop: EOS in the last column is not truncation


def make_agent(path, **grpo):
    model, tok = load_policy(str(path))
    cfg = AgentConfig(name="a", model=str(path), lr=1e-2)
    return Agent(cfg, model, tok, PromptTemplate("{problem}\n", ""), "problem", GRPOConfig(max_grad_norm=None, **grpo))


def rollout_of(agent, k=4):
    problems = [Problem(id=str(i), texts={"problem": p.strip()}) for i, p in enumerate(PROMPTS)]
    torch.manual_seed(1)
    return agent.sample(problems, k, SAMPLING)


SAMPLING = SamplingParams(temperature=1.0, max_new_tokens=8)
REWARDS = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0]])  # group 1 carries no signal


def params_of(model):
    return torch.cat([p.detach().flatten().clone() for p in model.parameters()])


@pytest.mark.parametrize("mode", ["grpo", "bnpo", "dr_grpo"])
def test_update_equals_the_full_batch_gradient_step(tiny_models, mode):
    """Skipping zero-advantage sequences and accumulating minibatches must not change the
    step: with SGD(lr=1), the parameter change is minus the full-batch loss gradient."""
    agent = make_agent(tiny_models["llama-char"], loss_aggregation=mode, minibatch_size=3)
    r = rollout_of(agent)
    reference = copy.deepcopy(agent.model)
    # the full-batch loss, written out directly
    adv = group_advantages(REWARDS).flatten()
    lp = sequence_logprobs(reference, r, torch.arange(12), 1.0)
    per_token, _ = clipped_policy_loss(lp, lp.detach(), adv)
    aggregate_loss(per_token, r.completion_mask, mode, max_tokens=SAMPLING.max_new_tokens).backward()  # dr_grpo: the budget
    expected = -torch.cat([p.grad.flatten() for p in reference.parameters()])

    agent.optimizer = torch.optim.SGD(agent.model.parameters(), lr=1.0)
    before = params_of(agent.model)
    stats = agent.update(r, REWARDS, SAMPLING)
    assert stats.active_sequences == 8 and stats.optimizer_steps == 1
    assert torch.allclose(params_of(agent.model) - before, expected, atol=1e-5, rtol=1e-3)


def test_uniform_rewards_make_no_step_and_mixed_rewards_change_parameters(tiny_models):
    agent = make_agent(tiny_models["qwen2-bpe"])
    r = rollout_of(agent)
    before = params_of(agent.model)
    stats = agent.update(r, torch.ones(3, 4), SAMPLING)
    assert stats.optimizer_steps == 0 and torch.equal(before, params_of(agent.model))
    stats = agent.update(r, REWARDS, SAMPLING)
    assert stats.optimizer_steps == 1 and not torch.equal(before, params_of(agent.model))


def test_kl_to_reference_and_several_passes(tiny_models):
    agent = make_agent(tiny_models["llama-char"], beta=0.1, num_passes=2)
    assert agent.reference is not None
    r = rollout_of(agent)
    stats = agent.update(r, REWARDS, SAMPLING)
    assert stats.optimizer_steps == 2 and stats.active_sequences == 12  # KL needs every sequence
    assert stats.kl > 0  # the second pass moved away from the reference
    assert make_agent(tiny_models["llama-char"]).reference is None  # beta = 0 loads no reference
