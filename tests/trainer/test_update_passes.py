"""`Agent.update` against updates written out by hand: the frozen log-probs (old policy, KL
reference) scored minibatch by minibatch, and sequences left out of the loss (truncated
completions under `cohort.truncated_answers: drop`, as TRL's mask_truncated_completions)."""

from __future__ import annotations

import copy

import pytest
import torch

from corl.config import AgentConfig, GRPOConfig
from corl.data.rows import Problem, PromptTemplate
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


def cut_to(r, lengths: list[int]):
    """The rollout with completion i ending after lengths[i] tokens (as if EOS came there; the rest padding)."""
    import dataclasses

    ids, attention, completion = r.input_ids.clone(), r.attention_mask.clone(), r.completion_mask.clone()
    for i, length in enumerate(lengths):
        completion[i, length:] = 0
        attention[i, r.prompt_length + length :] = 0
        ids[i, r.prompt_length + length :] = 0
    return dataclasses.replace(r, input_ids=ids, attention_mask=attention, completion_mask=completion)


def grads_of_one_step(agent: Agent, r, exclude) -> tuple[torch.Tensor, object]:
    """The gradient the update applied (one SGD step at lr 1, no clipping) and its stats."""
    agent.optimizer = torch.optim.SGD(agent.model.parameters(), lr=1.0)
    before = flat_params(agent.model)
    stats = agent.update(r, REWARDS, SAMPLING, exclude=exclude)
    return before - flat_params(agent.model), stats


@pytest.mark.parametrize(
    ("model", "aggregation"), [("llama-char", "grpo"), ("llama-char", "dapo"), ("llama-char", "dr_grpo"), ("qwen2-bpe", "dapo")]
)
def test_token_budget_micro_batches_packed_or_padded_give_the_padded_update(tiny_models, model, aggregation):
    """grpo.max_tokens_per_microbatch: micro-batches of at most 24 tokens, one packed row each
    (no padding, positions restarting per sequence) or padded, give the loss and gradient of
    the whole batch in one padded forward, with a truncated sequence left out of the loss and
    beta > 0 (every row takes part, the reference scored per micro-batch too)."""
    exclude = torch.zeros(12, dtype=torch.bool)
    exclude[2] = True
    padded = make_agent(tiny_models[model], loss_aggregation=aggregation, beta=0.1)
    r = cut_to(rollout_of(padded), [8, 2, 5, 1, 7, 3, 8, 4, 6, 2, 8, 1])
    assert (r.attention_mask[:, : r.prompt_length] == 0).any()  # left-padded prompts
    expected, expected_stats = grads_of_one_step(padded, r, exclude)
    for padding_free in (True, False):
        agent = make_agent(
            tiny_models[model], loss_aggregation=aggregation, beta=0.1, max_tokens_per_microbatch=24, padding_free=padding_free
        )
        forwards = record_forwards(agent.model)
        got, stats = grads_of_one_step(agent, r, exclude)
        rows = [n for n, _ in forwards]
        if padding_free:
            assert rows == [1] * len(rows) and len(rows) > 2  # one packed row per micro-batch, several micro-batches
        else:
            assert max(rows) < 11 and sum(rows) == 11  # the truncated row takes no forward
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-4)
        assert stats.loss == pytest.approx(expected_stats.loss, rel=1e-5, abs=1e-7)
        assert stats.kl == pytest.approx(expected_stats.kl, rel=1e-4, abs=1e-9)
        assert stats.masked_sequences == 1


def test_token_micro_batches_hold_the_budget():
    """Sorted rows fill each micro-batch up to the budget: packed by their tokens, padded by
    rows x the longest (3 prompt columns + its completion); a row over the budget goes alone."""
    from corl.trainer.packing import token_microbatches

    rows = torch.arange(6)
    lengths = torch.tensor([2, 3, 5, 6, 9, 30])  # completion tokens, sorted
    tokens = lengths + torch.tensor([3, 1, 3, 2, 3, 3])  # + each prompt without its padding
    packed = token_microbatches(rows, lengths, tokens, 12, None, True, 3)
    # tokens 5, 4, 8, 8, 12, 33: 5 + 4 = 9 (+ 8 > 12) | 8 (+ 8 > 12) | 8 | 12 | 33 alone
    assert [b.tolist() for b in packed] == [[0, 1], [2], [3], [4], [5]]
    # padded: 2 x (3 + 3) = 12 | 8 (+ 9 x 2 > 12) | 9 | 12 | 33
    padded = token_microbatches(rows, lengths, tokens, 12, None, False, 3)
    assert [b.tolist() for b in padded] == [[0, 1], [2], [3], [4], [5]]
    assert [b.tolist() for b in token_microbatches(rows, lengths, tokens, 40, 2, True, 3)] == [[0, 1], [2, 3], [4], [5]]
