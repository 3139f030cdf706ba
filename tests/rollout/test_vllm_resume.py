"""A resumed run's vLLM engines start from the restored weights, with a real vLLM (CPU build).

The engine is built from the model object before the checkpoint's state is loaded into it:
a LoRA resume loads the adapters after, an EMA teacher's state comes with the trainer state.
Unless they are synced, the policy engine would sample one step from the base model and the
teacher engine from the policy's weights. Checked two ways: the resumed engine scores a
sequence as the restored HF model does (and not as the base / the policy), and its first
samples equal what the uninterrupted run's engine samples from the same seed.
"""

from __future__ import annotations

import json
import random

import pytest
import torch

try:
    import vllm  # noqa: F401
except Exception as err:  # noqa: BLE001 - a broken install (torchvision mismatch) raises RuntimeError
    pytest.skip(f"vLLM does not import ({type(err).__name__}: {err})", allow_module_level=True)

from corl.config import validate_config
from corl.models import load_policy
from corl.rollout import SamplingParams
from corl.studies.tiny.families import build_random_model
from corl.studies.tiny.tokenizers import char_tokenizer
from corl.trainer import CohortTrainer
from tests.helpers import tiny_config

LOGPROB_ATOL = 1e-4  # float32 on CPU: the engine's and the HF forward's log-probs agree to ~2e-6 per token
PARAMS = SamplingParams(temperature=1.0, max_new_tokens=10)


@pytest.fixture(scope="module")
def model_dir(tiny_data, tmp_path_factory) -> dict[str, str]:
    """A tiny Llama taught the answer format (vLLM's CPU attention needs head_dim 32: 2 heads of 32)."""
    problems = [json.loads(line)["problem"] for line in tiny_data["train"].read_text().splitlines()]
    tok = char_tokenizer()
    model = build_random_model("llama", tok, hidden=64, layers=2, heads=2, ffn=128, seed=0)
    rng = random.Random(0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(50):
        texts = [p + "\n\\boxed{" + str(rng.randint(0, 3)) + "}" + tok.eos_token for p in rng.sample(problems, 16)]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        loss = model(**enc, labels=enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    root = tmp_path_factory.mktemp("vllm-resume")
    model.save_pretrained(root / "llama-char")
    tok.save_pretrained(root / "llama-char")
    return {"llama-char": str(root / "llama-char")}


def hf_token_logprobs(model, ids: list[int]) -> torch.Tensor:
    """log p(ids[t] | ids[:t]) under the HF model, t = 1..L-1: [L - 1]."""
    with torch.no_grad():
        x = torch.tensor([ids])
        logp = torch.log_softmax(model(input_ids=x).logits[0, :-1].float(), dim=-1)
        return logp.gather(-1, x[0, 1:, None])[:, 0]


def first_samples(agent, engine, problems, seed: int = 7) -> torch.Tensor:
    """The engine's samples of `problems` (4 each) from a fixed seed: [N, P + C] ids."""
    torch.manual_seed(seed)
    return engine.generate(agent.prompts(problems), 4, PARAMS).input_ids


def _config(tmp_path, model_dir, tiny_data, **sections):
    raw = tiny_config(
        tmp_path,
        model_dir,
        tiny_data,
        agents=1,
        cohort={"steps": 2, "label_source": "self", **sections.pop("cohort", {})},
        rollout={"engine": "vllm", "max_model_len": 128},
        logging={"tensorboard": False},
        **sections,
    )
    raw["agents"][0]["lr"] = 1e-2  # one step moves the adapters / the policy away from its teacher measurably
    raw["data"].pop("val")
    return validate_config(raw)


def stop_and_resume(cfg, run_dir, engines_of):
    """One step and a checkpoint, then the run resumed from it. For each (the uninterrupted run
    right after its checkpoint, the resumed run as it starts) and each engine in engines_of:
    its first samples from a fixed seed, its log-probs of a fixed sequence and the HF model's."""
    seen = []
    for resume in (False, True):
        trainer = CohortTrainer(cfg, run_dir, resume=resume)
        agent = trainer.agents[0]
        if not resume:
            trainer.step(0)
            trainer.checkpoint(1)
        problems = trainer.train_data.problems[:3]
        seq = agent.tokenizer(agent.prompts(problems[:1])[0] + "\\boxed{2}" + agent.tokenizer.eos_token)["input_ids"]
        seen.append(
            {
                name: (first_samples(agent, engine, problems), engine.token_logprobs([seq])[0], hf_token_logprobs(model, seq))
                for name, (engine, model) in engines_of(agent).items()
            }
        )
        agent.close()
    return (*seen, seq)


def test_a_lora_resume_samples_from_the_restored_adapters(tmp_path, model_dir, tiny_data):
    pytest.importorskip("peft")
    cfg = _config(tmp_path, model_dir, tiny_data, compute={"lora": {"r": 4}})
    full, resumed, seq = stop_and_resume(cfg, tmp_path / "run", lambda agent: {"policy": (agent.engine, agent.model)})
    samples, engine_lp, restored_lp = resumed["policy"]
    assert float((engine_lp - restored_lp).abs().max()) < LOGPROB_ATOL  # the engine holds base + restored adapters
    assert torch.equal(samples, full["policy"][0])  # and samples what the uninterrupted run's engine samples
    # a stale engine would hold the base model (fresh adapters add nothing), which scores the sequence otherwise
    base, _ = load_policy(model_dir["llama-char"])
    assert float((hf_token_logprobs(base, seq) - restored_lp).abs().max()) > 1e-3


def test_an_ema_teacher_resume_samples_from_the_restored_teacher(tmp_path, model_dir, tiny_data):
    cfg = _config(tmp_path, model_dir, tiny_data, cohort={"label_source": "ema", "ema_momentum": 0.5})
    full, resumed, _ = stop_and_resume(
        cfg,
        tmp_path / "run",
        lambda agent: {"policy": (agent.engine, agent.model), "teacher": (agent.teacher_engine, agent.teacher)},
    )
    for name in ("policy", "teacher"):
        samples, engine_lp, restored_lp = resumed[name]
        assert float((engine_lp - restored_lp).abs().max()) < LOGPROB_ATOL, name
        assert torch.equal(samples, full[name][0]), name
    # the teacher is not the policy (momentum 0.5 after one step): a teacher engine left with the
    # policy's weights would have scored the sequence as the policy does
    assert float((resumed["teacher"][2] - resumed["policy"][2]).abs().max()) > 1e-3
