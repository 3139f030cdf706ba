"""The HF rollout engine and one agent's GRPO update, on tiny models of two families."""

import copy
import dataclasses

import pytest
import torch

import corl.trainer.logprobs as agent_module
from corl.config import AgentConfig, GRPOConfig
from corl.data.rows import Problem, PromptTemplate
from corl.grpo import aggregate_loss, clipped_policy_loss, group_advantages, token_logprobs
from corl.models import load_policy
from corl.rollout import HFGenerateEngine, SamplingParams, completion_mask_from
from corl.rollout.base import pad_right
from corl.trainer import Agent
from corl.trainer.logprobs import sequence_logprobs

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


# -- memory and padding (issue 19): the chunked head and the length buckets change no number


def full_logprobs(model, r, temperature=1.0):
    """The reference computation: every position's logits, then the completion's slice. [N, C]"""
    pos = (r.attention_mask.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=r.input_ids, attention_mask=r.attention_mask, position_ids=pos).logits
    return token_logprobs(logits[:, r.prompt_length - 1 : -1], r.completion_ids, temperature)


def with_lengths(r, lengths):
    """The rollout with completion i cut to lengths[i] tokens (the rest padding), so that
    the length buckets have something to trim."""
    width = max(lengths)  # generation may have stopped earlier: pad the completions out to it
    keep = (torch.arange(width) < torch.tensor(lengths).unsqueeze(1)).long()  # [N, width]
    ids = torch.where(keep.bool(), pad_right(r.completion_ids, width, 0), torch.full_like(keep, 0))
    return dataclasses.replace(
        r,
        input_ids=torch.cat([r.input_ids[:, : r.prompt_length], ids], 1),
        attention_mask=torch.cat([r.attention_mask[:, : r.prompt_length], keep], 1),
        completion_mask=keep,
        sampling_logprobs=pad_right(r.sampling_logprobs, width, 0.0) * keep,
    )


@pytest.fixture(scope="module")
def gemma_model(tiny_models, tmp_path_factory):
    """A random Gemma (the ring's third family's architecture) with qwen2-bpe's tokenizer."""
    from transformers import AutoTokenizer

    from corl.studies.tiny.families import build_random_model

    tok = AutoTokenizer.from_pretrained(tiny_models["qwen2-bpe"])
    folder = tmp_path_factory.mktemp("gemma")
    build_random_model("gemma", tok, hidden=64, layers=2, heads=4, ffn=128, seed=5).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("family", ["llama-char", "qwen2-bpe", "gemma"])
@pytest.mark.parametrize("path", ["chunked head", "plain forward"])
def test_sequence_logprobs_equal_the_full_logits(tiny_models, gemma_model, family, path, monkeypatch):
    folder = gemma_model if family == "gemma" else tiny_models[family]
    agent = make_agent(folder)
    r = rollout_of(agent)
    monkeypatch.setattr(agent_module, "LOGIT_CHUNK_ELEMENTS", 1)  # one position per chunk
    if path == "plain forward":  # a model type the chunked head does not know
        monkeypatch.setattr(agent_module, "PLAIN_HEAD_MODEL_TYPES", frozenset())
    rows = torch.arange(12)
    with torch.no_grad():
        assert (agent_module.completion_hidden(agent.model, r, rows, 3) is None) == (path == "plain forward")
        expected = full_logprobs(agent.model, r, 0.7)
        torch.testing.assert_close(sequence_logprobs(agent.model, r, rows, 0.7), expected, atol=1e-5, rtol=0)
        torch.testing.assert_close(
            sequence_logprobs(agent.model, r, rows[3:7], 0.7, width=5), expected[3:7, :5], atol=1e-5, rtol=0
        )


def test_logit_rewards_equal_the_reward_of_full_logits(tiny_models, monkeypatch):
    from corl.rewards.intrinsic import entropy_rewards

    agent = make_agent(tiny_models["qwen2-bpe"])
    r = rollout_of(agent)
    pos = (r.attention_mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        logits = agent.model(input_ids=r.input_ids, attention_mask=r.attention_mask, position_ids=pos).logits
    expected = entropy_rewards(logits[:, r.prompt_length - 1 : -1] / 0.7, r.completion_mask).view(3, 4)
    monkeypatch.setattr(agent_module, "LOGIT_CHUNK_ELEMENTS", 1)  # one sequence's logits at a time
    torch.testing.assert_close(agent.logit_rewards(r, entropy_rewards, 0.7, batch=5), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("mode", ["grpo", "bnpo"])
def test_length_buckets_and_chunked_head_keep_the_full_batch_step(tiny_models, mode, monkeypatch):
    """Minibatches of sequences sorted by length, each trimmed to its own longest, and the
    head applied one position at a time: still minus the full-batch gradient, and the
    model is never fed a minibatch's padding beyond its longest completion."""
    agent = make_agent(tiny_models["qwen2-bpe"], loss_aggregation=mode, minibatch_size=3)
    lengths = [8, 2, 5, 3, 1, 1, 1, 1, 7, 2, 6, 4]  # group 1 (rows 4-7) has no signal
    r = with_lengths(rollout_of(agent), lengths)
    reference = copy.deepcopy(agent.model)
    adv = group_advantages(REWARDS).flatten()
    lp = full_logprobs(reference, r)
    per_token, _ = clipped_policy_loss(lp, lp.detach(), adv)
    aggregate_loss(per_token, r.completion_mask, mode).backward()
    expected = -torch.cat([p.grad.flatten() for p in reference.parameters()])

    widths = []
    agent.model.register_forward_pre_hook(lambda mod, args, kw: widths.append(kw["input_ids"].shape[1]), with_kwargs=True)
    monkeypatch.setattr(agent_module, "LOGIT_CHUNK_ELEMENTS", 1)
    agent.optimizer = torch.optim.SGD(agent.model.parameters(), lr=1.0)
    before = params_of(agent.model)
    stats = agent.update(r, REWARDS, SAMPLING)
    assert stats.active_sequences == 8 and stats.optimizer_steps == 1
    assert torch.allclose(params_of(agent.model) - before, expected, atol=1e-5, rtol=1e-3)
    # active lengths sorted, in minibatches of 3: 2 2 3 | 4 5 6 | 7 8 -> each trimmed to 3, 6, 8
    # (the model's input stops before the last completion token: P + width - 1 columns)
    assert widths == [r.prompt_length + w - 1 for w in (3, 6, 8)]


class _Broken(RuntimeError):
    pass


@pytest.mark.parametrize("decode", ["compact", "generate"])
@pytest.mark.parametrize("training", [True, False])
def test_an_error_while_sampling_leaves_the_models_mode_as_it_was(tiny_models, decode, training):
    """The engine samples in eval mode and gives the model its mode back, also when a forward fails."""
    model, tok = load_policy(str(tiny_models["llama-char"]))
    engine = HFGenerateEngine(model, tok, decode=decode)
    model.train(training)
    calls = []

    def fail_on_the_third_forward(module, args):  # a fault in the middle of decoding (an OOM, say)
        calls.append(module.training)
        if len(calls) == 3:
            raise _Broken("forward failed")

    handle = model.register_forward_pre_hook(fail_on_the_third_forward)
    with pytest.raises(_Broken):
        engine.generate(PROMPTS, 2, SamplingParams(temperature=1.0, max_new_tokens=8))
    handle.remove()
    assert calls == [False] * 3  # it sampled in eval mode
    assert model.training is training
