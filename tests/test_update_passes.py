"""`Agent.update` against updates written out by hand: the frozen log-probs (old policy, KL
reference) scored minibatch by minibatch, and sequences left out of the loss (truncated
completions under `cohort.truncated_answers: drop`, as TRL's mask_truncated_completions)."""

from __future__ import annotations

import copy

import pytest
import torch

from corl.config import AgentConfig, GRPOConfig
from corl.data import Problem, PromptTemplate
from corl.grpo import group_advantages, policy_loss, token_logprobs
from corl.models import load_policy
from corl.rollout import SamplingParams
from corl.trainer import Agent

PROMPTS = ["3+4=?", "12*3-5=?", "7=?"]
SAMPLING = SamplingParams(temperature=1.0, max_new_tokens=8)
REWARDS = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0]])  # group 1 carries no signal


def make_agent(path, **grpo) -> Agent:
    model, tok = load_policy(str(path))
    cfg = AgentConfig(name="a", model=str(path), lr=1e-2)
    return Agent(cfg, model, tok, PromptTemplate("{problem}\n", ""), "problem", GRPOConfig(max_grad_norm=None, **grpo))


def rollout_of(agent: Agent, k: int = 4):
    torch.manual_seed(1)
    return agent.sample([Problem(id=str(i), texts={"problem": p}) for i, p in enumerate(PROMPTS)], k, SAMPLING)


def full_logprobs(model, r) -> torch.Tensor:
    """Every sequence in one forward, every position's logits, then the completion's slice: [N, C]."""
    pos = (r.attention_mask.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=r.input_ids, attention_mask=r.attention_mask, position_ids=pos).logits
    return token_logprobs(logits[:, r.prompt_length - 1 : -1], r.completion_ids)


def flat_params(model) -> torch.Tensor:
    return torch.cat([p.detach().flatten().clone() for p in model.parameters()])


def record_forwards(*models) -> list[tuple[int, object]]:
    """(rows, use_cache) of every forward call of these models, in order."""
    seen: list[tuple[int, object]] = []
    for model in models:
        model.register_forward_pre_hook(
            lambda mod, args, kw: seen.append((kw["input_ids"].shape[0], kw.get("use_cache"))), with_kwargs=True
        )
    return seen


@pytest.mark.parametrize("aggregation", ["grpo", "dapo"])
def test_old_and_reference_logprobs_are_scored_per_minibatch_and_the_update_is_unchanged(tiny_models, aggregation):
    """beta > 0 and two passes: both frozen scorings run one forward per minibatch (3 rows, no
    KV cache), never one over the whole batch, and the two steps equal two plain SGD steps
    on the whole batch's loss with the old and reference log-probs of a single forward."""
    agent = make_agent(tiny_models["llama-char"], beta=0.1, num_passes=2, minibatch_size=3, loss_aggregation=aggregation)
    r = rollout_of(agent)  # 12 sequences; beta > 0: all of them take part (the KL term)
    # the expected update, written out on copies: whole-batch forwards, two SGD steps
    model, reference = copy.deepcopy(agent.model), copy.deepcopy(agent.reference)
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    adv, mask = group_advantages(REWARDS).flatten(), r.completion_mask.float()
    with torch.no_grad():
        old, ref = full_logprobs(model, r), full_logprobs(reference, r)
    expected_losses, expected_kls = [], []
    for _ in range(2):
        sgd.zero_grad()
        lp = full_logprobs(model, r)
        loss, _, kl = policy_loss(
            lp, old, adv, mask, aggregation=aggregation, max_tokens=SAMPLING.max_new_tokens, beta=0.1, ref_logprobs=ref
        )
        loss.backward()
        sgd.step()
        expected_losses.append(float(loss.detach()))
        expected_kls.append(float((kl * mask).sum() / mask.sum()))

    forwards = record_forwards(agent.model, agent.reference)
    agent.optimizer = torch.optim.SGD(agent.model.parameters(), lr=0.1)
    stats = agent.update(r, REWARDS, SAMPLING)
    assert stats.optimizer_steps == 2 and stats.active_sequences == 12
    # 12 rows in minibatches of 3: old policy 4 forwards, reference 4, then 4 with gradient per pass
    assert forwards == [(3, False)] * (4 + 4 + 4 * 2)
    torch.testing.assert_close(flat_params(agent.model), flat_params(model), atol=1e-5, rtol=1e-4)
    assert stats.loss == pytest.approx(sum(expected_losses) / 2, rel=1e-4, abs=1e-6)
    assert stats.kl == pytest.approx(sum(expected_kls) / 2, rel=1e-3, abs=1e-7)
    assert expected_kls[1] > 0  # the second pass had moved away from the reference: the KL term is not vacuous


# Group 0's rewards [1, 0, 0, 1]: mean 0.5, unbiased std sqrt(4 * 0.25 / 3) = 0.57735, advantages
# +-0.5 / (0.57735 + 1e-4) = +-0.86588. Group 1 is uniform: 0. Group 2's [0, 0, 1, 0]: mean 0.25,
# std sqrt((3 * 0.0625 + 0.5625) / 3) = 0.5, advantages -0.25 / 0.5001 = -0.49990 and 0.75 / 0.5001 = 1.49970.
# Sequence 2 (reward 0) is truncated: it leaves the loss but its reward stays in group 0's mean and
# std (TRL masks the completion; it does not regroup), so the others keep +-0.86588.
HAND_ADVANTAGES = [0.86588, -0.86588, None, 0.86588, 0.0, 0.0, 0.0, 0.0, -0.49990, -0.49990, 1.49970, -0.49990]


@pytest.mark.parametrize("aggregation", ["grpo", "dapo", "dr_grpo"])
def test_an_excluded_sequence_carries_no_loss_and_keeps_its_groups_advantages(tiny_models, aggregation):
    """One SGD step (lr 1, beta 0) is minus the gradient of the on-policy loss written by hand:
    at ratio 1 the clipped objective's gradient is -A per token, so with m the mask (the
    excluded row all 0), N = 12 sequences and T the kept tokens
      grpo:    L = -(1/N) sum_i A_i mean_t lp_it      (N counts the excluded sequence, as TRL's mean)
      dapo:    L = -(1/T) sum_i A_i sum_t m_it lp_it  (T does not count its tokens)
      dr_grpo: L = -(1/(N * 8)) sum_i A_i sum_t m_it lp_it"""
    agent = make_agent(tiny_models["qwen2-bpe"], loss_aggregation=aggregation, minibatch_size=3)
    r = rollout_of(agent)
    exclude = torch.zeros(12, dtype=torch.bool)
    exclude[2] = True
    reference = copy.deepcopy(agent.model)
    lp = full_logprobs(reference, r)  # [12, C]
    m = r.completion_mask.float().clone()
    m[2] = 0.0
    adv = torch.tensor([a if a is not None else 0.0 for a in HAND_ADVANTAGES])  # the excluded row's advantage: unused
    per_sequence = (m * lp).sum(1)  # [12]
    if aggregation == "grpo":
        loss = -(adv * per_sequence / m.sum(1).clamp(min=1)).sum() / 12
    elif aggregation == "dapo":
        loss = -(adv * per_sequence).sum() / m.sum()
    else:
        loss = -(adv * per_sequence).sum() / (12 * SAMPLING.max_new_tokens)
    loss.backward()
    expected = -torch.cat([p.grad.flatten() for p in reference.parameters()])

    agent.optimizer = torch.optim.SGD(agent.model.parameters(), lr=1.0)
    before = flat_params(agent.model)
    stats = agent.update(r, REWARDS, SAMPLING, exclude=exclude)
    assert stats.masked_sequences == 1 and stats.optimizer_steps == 1
    assert stats.active_sequences == 7  # 8 with signal, less the excluded one
    torch.testing.assert_close(flat_params(agent.model) - before, expected, atol=1e-5, rtol=1e-3)
    kept = ~exclude
    assert group_advantages(REWARDS).flatten()[kept].tolist() == pytest.approx(adv[kept].tolist(), abs=1e-4)  # by hand
