"""The compacting sampler (corl.rollout.compact) against transformers' generate."""

import pytest
import torch

import corl.rollout.compact as compact
from corl.models import load_policy
from corl.rollout import HFGenerateEngine, SamplingParams
from corl.trainer.logprobs import sequence_logprobs

# Lengths differ by prompt, so the batch is left-padded. The fixtures answer "\\boxed{d}" in one
# length; prompts that already hold part of it make rows of one batch (greedy ones too) stop at
# different steps, so the loop drops some while others go on.
PROMPTS = ["3+4=?\n", "12*3-5=?\n\\boxed{", "7=?\n\\bo", "(81-9)/8+17*2=?\n"]
K = 4


def _pair(path):
    model, tok = load_policy(str(path))
    return HFGenerateEngine(model, tok, decode="compact"), HFGenerateEngine(model, tok, decode="generate", kv_cache="dynamic")


def _rollout(engine, params, seed=0):
    torch.manual_seed(seed)
    return engine.generate(PROMPTS, K, params)


@pytest.mark.parametrize("family", ["llama-char", "qwen2-bpe"])
def test_greedy_completions_equal_generate(tiny_models, family):
    fast, ref = _pair(tiny_models[family])
    params = SamplingParams(temperature=0.0, max_new_tokens=24)
    a, b = _rollout(fast, params), _rollout(ref, params)
    assert a.texts == b.texts
    assert torch.equal(a.completion_mask, b.completion_mask)
    assert torch.equal(a.input_ids, b.input_ids)
    lengths = a.completion_lengths
    assert lengths.min() < lengths.max()  # sequences did leave the batch at different steps


@pytest.mark.parametrize("family", ["llama-char", "qwen2-bpe"])
def test_without_compaction_the_samples_are_generates_draw_for_draw(tiny_models, family, monkeypatch):
    """Same random numbers on the same probabilities: the loop samples exactly what generate
    samples, so its distribution (temperature, top-p) is generate's; compaction only removes rows."""
    fast, ref = _pair(tiny_models[family])
    params = SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=16)
    monkeypatch.setattr(compact, "COMPACT_SHARE", 2.0)  # never drop a row
    a, b = _rollout(fast, params, seed=3), _rollout(ref, params, seed=3)
    assert a.texts == b.texts
    m = a.completion_mask.bool()
    assert torch.allclose(a.sampling_logprobs[m], b.sampling_logprobs[m], atol=1e-5)
    monkeypatch.setattr(compact, "COMPACT_SHARE", 1 / 8)
    c = _rollout(fast, params, seed=3)
    assert c.texts != a.texts  # with compaction the later draws land on other rows: a different sample


@pytest.mark.parametrize("family", ["llama-char", "qwen2-bpe"])
@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.95)])
def test_compacted_sampling_logprobs_equal_a_training_forward(tiny_models, family, temperature, top_p, monkeypatch):
    monkeypatch.setattr(compact, "COMPACT_SHARE", 0.0)  # drop every finished row at once
    model, tok = load_policy(str(tiny_models[family]))
    engine = HFGenerateEngine(model, tok, decode="compact")
    r = _rollout(engine, SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=20), seed=1)
    assert r.completion_lengths.min() < r.completion_lengths.max()
    # every sequence's tokens after its EOS are padding, masked out
    eos = torch.tensor(engine.eos_ids)
    for row, length in zip(r.completion_ids, r.completion_lengths):
        assert (row[length:] == tok.pad_token_id).all()
        if length < row.numel():
            assert torch.isin(row[length - 1], eos)
    with torch.no_grad():
        lp = sequence_logprobs(model, r, torch.arange(r.input_ids.shape[0]), temperature=temperature)
    m = r.completion_mask.bool()
    # top-p < 1: the sampler reports log-probs renormalised over its nucleus (Rollout.top_p), and the
    # training forward scores that same distribution (grpo.nucleus_logits), not the whole softmax
    assert r.top_p == top_p
    assert torch.allclose(lp[m], r.sampling_logprobs[m], atol=1e-4)


def test_compact_is_refused_where_it_cannot_run(tiny_models):
    model, tok = load_policy(str(tiny_models["llama-char"]))
    with pytest.raises(ValueError, match="decode: generate"):
        HFGenerateEngine(model, tok, processor=object(), decode="compact")
    assert HFGenerateEngine(model, tok).decode == "compact"


def test_a_lora_model_samples_through_the_loop_with_its_adapters(tiny_models, monkeypatch):
    """Under peft the loop calls the base model, into which the adapters are injected: its
    samples are the adapted model's (equal to generate's on the PeftModel), not the base's."""
    peft = pytest.importorskip("peft")
    model, tok = load_policy(str(tiny_models["llama-char"]))
    lora = peft.get_peft_model(model, peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    fast = HFGenerateEngine(lora, tok)
    assert fast.decode == "compact"
    ref = HFGenerateEngine(lora, tok, decode="generate", kv_cache="dynamic")
    params = SamplingParams(temperature=1.0, max_new_tokens=16)
    monkeypatch.setattr(compact, "COMPACT_SHARE", 2.0)
    a, b = _rollout(fast, params, seed=5), _rollout(ref, params, seed=5)
    assert a.texts == b.texts
    with lora.disable_adapter():
        plain = _rollout(fast, params, seed=5)
    assert plain.texts != a.texts  # the adapters (random, not zero-initialised) do change the samples
