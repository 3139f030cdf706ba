"""The vLLM engine with vision-language models, for real (vLLM's CPU build).

vLLM's multimodal models import torchvision; CI's vLLM venv loads PyPI's torchvision with
`PYTHONPATH=tests/vllm_cpu_shim` (see its sitecustomize). The tiny families get 2 text heads
of 32 (vLLM's CPU attention has no kernel for head_dim 16).

Reference points, both architectures (Qwen2-VL: packed patches, M-RoPE; LLaVA + SigLIP):
  (a) the engine's sampling log-probs == corl's training forward over the HF processor's
      prompt and pixels (vLLM expands the placeholders with its own processor copy)
  (b) after an optimizer step and `sync_weights`, the same holds for the new weights
      (and the image embeddings are recomputed: no stale encoder cache)
  (c) `corl train` with rollout.engine=vllm: a Qwen2-VL + LLaVA cohort trains on the image task.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

try:
    import vllm  # noqa: F401
    from transformers.models.siglip import image_processing_siglip  # noqa: F401  (imports torchvision)
except Exception as err:  # noqa: BLE001 - a broken torchvision raises RuntimeError
    pytest.skip(
        f"vLLM's multimodal models do not import here ({type(err).__name__}: {err}); on CPU run with "
        "PYTHONPATH=tests/vllm_cpu_shim (README, 'Rollouts with vLLM')",
        allow_module_level=True,
    )

from corl.config import AgentConfig, GRPOConfig, RolloutConfig, validate_config
from corl.data.rows import IMAGES_INPUT, Problem, PromptTemplate
from corl.launch.run import launch
from corl.rollout import SamplingParams
from corl.studies.tiny_vl.families import build_vl_family, get_vl_family, save_vl
from corl.studies.tiny_vl.task import make_split
from corl.tracking.metrics import read_metrics
from corl.trainer import Agent
from corl.trainer.logprobs import sequence_logprobs

FAMILIES = ("qwen2vl-bpe", "llava-siglip-char")
# vLLM preprocesses images with transformers' torchvision image processor, corl with the PIL one:
# their pixels differ by up to ~0.015, which moves log-probs by up to ~7e-4 (measured; with the same
# processor on both sides the two agree within 1e-6).
LOGPROB_ATOL = 3e-3


def _spec(name: str):
    return dataclasses.replace(get_vl_family(name), heads=2)


def _problems(n: int, seed: int = 3) -> list[Problem]:
    rows = make_split("train", n, seed=seed)
    return [Problem(id=str(r["id"]), texts={"problem": r["problem"]}, inputs={IMAGES_INPUT: r["images"]}) for r in rows]


@pytest.fixture(scope="module", params=FAMILIES)
def agent(request):
    torch.manual_seed(0)
    model, processor = build_vl_family(_spec(request.param))
    config = AgentConfig(name=request.param, model="in-memory", lr=1e-2)
    rollout = RolloutConfig(engine="vllm", max_model_len=256)
    agent = Agent(
        config, model, processor.tokenizer, PromptTemplate("{problem}", ""), "problem", GRPOConfig(), rollout, processor=processor
    )
    yield agent
    agent.close()


def _check_parity(agent, rollout, temperature):
    rows = torch.arange(rollout.input_ids.shape[0])
    with torch.no_grad():
        trained = sequence_logprobs(agent.model, rollout, rows, temperature)
    mask = rollout.completion_mask.bool()
    gap = (trained - rollout.sampling_logprobs).abs()[mask]
    assert gap.numel() > 0 and float(gap.max()) < LOGPROB_ATOL, float(gap.max())
    return float(gap.max())


def test_sampling_logprobs_equal_the_training_forward_with_images(agent):
    torch.manual_seed(1)
    problems = _problems(3)
    rollout = agent.sample(problems, 3, SamplingParams(temperature=1.0, max_new_tokens=10))
    assert rollout.separate_sampler and rollout.vision is not None and len(rollout.vision) == 3
    assert rollout.input_ids.shape[0] == 9 and len(rollout.texts) == 9
    # the trainer's prompt is the HF processor's: placeholders expanded to the tower's token count
    image_token = agent.processor.image_token_id
    assert int((rollout.input_ids[0, : rollout.prompt_length] == image_token).sum()) > 1
    # no placeholder is ever sampled (the engine's allowed ids exclude them)
    completion = rollout.completion_ids[rollout.completion_mask.bool()]
    assert not torch.isin(completion, torch.tensor(rollout.suppressed_ids)).any()
    _check_parity(agent, rollout, 1.0)
    greedy = agent.sample(problems, 1, SamplingParams(temperature=0.0, max_new_tokens=10))
    _check_parity(agent, greedy, 1.0)


def test_after_an_update_and_sync_the_engine_samples_the_new_weights(agent):
    torch.manual_seed(2)
    problems = _problems(2, seed=4)  # the first test's images are in the encoder cache: reuse one of them too
    problems = [*_problems(1), *problems]
    params = SamplingParams(temperature=1.0, max_new_tokens=8)
    rollout = agent.sample(problems, 4, params)
    before = {n: p.detach().clone() for n, p in agent.model.named_parameters()}
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    stats = agent.update(rollout, rewards, params)
    assert stats.optimizer_steps == 1 and stats.sync.bytes > 0
    assert any(not torch.equal(p.detach(), before[n]) for n, p in agent.model.named_parameters())
    after = agent.sample(problems, 3, params)  # would fail on a stale encoder cache ("Encoder cache miss")
    _check_parity(agent, after, 1.0)


def test_corl_train_a_vision_cohort_on_vllm(tmp_path):
    models = {}
    for name in FAMILIES:
        torch.manual_seed(0)
        model, processor = build_vl_family(_spec(name))
        models[name] = save_vl(model, processor, tmp_path / name)
    raw = {
        "output_dir": str(tmp_path / "run"),
        "rollout": {"engine": "vllm", "max_model_len": 256},
        "agents": [{"name": n.split("-")[0], "model": str(p), "lr": 1e-3} for n, p in models.items()],
        "data": {"train": "vtiny:train:16", "template": "{problem}", "instruction": ""},
        "cohort": {
            "steps": 2,
            "prompts_per_step": 2,
            "samples_per_prompt": 3,
            "max_new_tokens": 8,
            "reward": "entropy",
            "truncated_answers": "keep",
        },  # random models rarely end within 8 tokens: keep them in the loss
        "logging": {"tensorboard": False, "progress": False},
    }
    launch(validate_config(raw), tmp_path / "run")
    rows = read_metrics(tmp_path / "run", "train")
    assert [r["step"] for r in rows] == [1, 2]
    for name in ("qwen2vl", "llava"):
        assert rows[-1][f"{name}/sync_bytes"] > 0 and rows[0][f"{name}/optimizer_steps"] == 1
        assert abs(rows[0][f"{name}/mismatch_logratio_max"]) < LOGPROB_ATOL  # the sampler is the trained policy
