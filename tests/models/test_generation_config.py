"""A checkpoint's generation_config.json must not change what the HF engine samples.

transformers fills every generate() option left at its library default from the model's
generation_config, so a repetition penalty or min_p shipped with a checkpoint would
silently sample a distribution the GRPO loss does not score (and the sampler log-probs
would be those of the altered distribution)."""

from __future__ import annotations

import shutil

import pytest
import torch
from transformers import GenerationConfig

from corl.models import load_policy, load_tokenizer
from corl.rollout import SamplingParams
from corl.rollout.hf import HFGenerateEngine

PROMPTS = ["12+3=?\n", "7*2=?\n", "9-4=?\n"]
K = 4

# every field here would change the output if generate() read it: a strong penalty on
# repeated tokens, no repeated bigram, and sampling cut to few tokens (min_p, top_k)
HOSTILE = {"repetition_penalty": 5.0, "no_repeat_ngram_size": 2, "min_p": 0.5, "top_k": 3, "do_sample": True}


@pytest.fixture(scope="module")
def plain_and_hostile(tiny_models, tmp_path_factory):
    """The same weights twice: as saved, and with a hostile generation_config.json."""
    root = tmp_path_factory.mktemp("genconfig")
    plain, hostile = root / "plain", root / "hostile"
    shutil.copytree(tiny_models["llama-char"], plain)
    shutil.copytree(tiny_models["llama-char"], hostile)
    config = GenerationConfig.from_pretrained(plain) if (plain / "generation_config.json").is_file() else GenerationConfig()
    for key, value in HOSTILE.items():
        setattr(config, key, value)
    # a field the engine leaves unset (None) rather than at a default value: generate() fills
    # those too; suppressing the first character of "\\boxed" changes even greedy decoding
    tokenizer = load_tokenizer(str(plain))
    config.suppress_tokens = tokenizer.encode("\\", add_special_tokens=False)
    config.save_pretrained(hostile)
    loaded = [load_policy(str(path)) for path in (plain, hostile)]
    # the hostile fields did reach the loaded model: without that the comparison proves nothing
    assert loaded[1][0].generation_config.repetition_penalty == 5.0
    assert loaded[1][0].generation_config.min_p == 0.5
    return [HFGenerateEngine(model, tok) for model, tok in loaded]


def _rollout(engine, params: SamplingParams, seed: int = 0):
    torch.manual_seed(seed)
    return engine.generate(PROMPTS, K, params)


def test_greedy_outputs_ignore_the_checkpoint_generation_config(plain_and_hostile):
    plain, hostile = plain_and_hostile
    params = SamplingParams(temperature=0.0, top_p=1.0, max_new_tokens=12)
    a, b = _rollout(plain, params), _rollout(hostile, params)
    assert b.texts == a.texts
    assert torch.equal(b.completion_ids, a.completion_ids)


def test_sampled_tokens_and_logprobs_ignore_the_checkpoint_generation_config(plain_and_hostile):
    plain, hostile = plain_and_hostile
    params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=12)
    a, b = _rollout(plain, params), _rollout(hostile, params)
    assert torch.equal(b.completion_ids, a.completion_ids), (a.texts, b.texts)
    assert torch.equal(b.completion_mask, a.completion_mask)
    assert torch.allclose(b.sampling_logprobs, a.sampling_logprobs, atol=1e-6, rtol=0)
    # sampled at temperature 1 over the whole vocabulary: some token was not the likeliest
    # (log-prob below log 0.5), which min_p=0.5 or top_k=3 would have cut
    assert (a.sampling_logprobs[a.completion_mask.bool()] < -0.7).any()


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.0])
def test_the_engine_config_sets_no_flag_transformers_would_ignore(temperature):
    # issue 24: greedy configs carried top_k=0, a sampling-only flag; transformers warned
    # "generation flags are not valid and may be ignored: ['top_k']" on every greedy call
    from corl.rollout.hf import _generation_config

    config = _generation_config(SamplingParams(temperature, 1.0, 8), [1], 0)
    config.validate(strict=True)  # raises where a flag does not apply to the decoding mode
    assert config.top_k == (None if temperature == 0 else 0)  # sampling: still no hidden top-k of 50


@pytest.mark.parametrize("decode", ["compact", "generate"])
def test_greedy_and_sampled_rollouts_log_no_generation_warning(decode):
    import logging

    from corl.models.loading import _ready_for_rollouts
    from corl.studies.tiny.families import build_random_model
    from corl.studies.tiny.tokenizers import char_tokenizer

    tok = _ready_for_rollouts(char_tokenizer(), "char")
    engine = HFGenerateEngine(build_random_model("llama", tok, hidden=32, layers=1, heads=2), tok, decode=decode)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("transformers")
    logging.Logger.warning_once.cache_clear()  # transformers says each warning once per process
    logger.addHandler(handler)
    try:
        for temperature in (0.0, 1.0):
            engine.generate(PROMPTS, 2, SamplingParams(temperature, 1.0, 4))
    finally:
        logger.removeHandler(handler)
    assert not [r.getMessage() for r in records if "generation flags" in r.getMessage()]
