"""Packed micro-batches (`grpo.max_tokens_per_microbatch` with `grpo.padding_free`) under
activation checkpointing, and what the packed path scores: each sequence's own positions and
the sampler's top-p nucleus.

A checkpointed layer recomputes its forward during the backward with the attention function
its config names at that time; the packed forward's attention (one causal SDPA per sequence)
must be that function, or the recomputation attends across sequences and torch's checkpoint
stops the backward (`CheckpointError`: a different number of saved tensors). Compared against
the padded update without checkpointing (one process, and two FSDP2 ranks on gloo): the same
loss and gradient up to float summation order.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import torch
import yaml

from corl.config import AgentConfig, ComputeConfig, GRPOConfig
from corl.data.rows import Problem, PromptTemplate
from corl.models import load_policy
from corl.models.attention import FLASH, TRAINING_SDPA, training_attention
from corl.rollout import SamplingParams
from corl.tracking.metrics import read_metrics
from corl.trainer import Agent
from corl.trainer.logprobs import sequence_logprobs
from corl.trainer.packing import can_pack, packed_inputs, packed_logprobs
from tests.helpers import tiny_config

PROMPTS = ["3+4=?", "12*3-5=?", "7=?"]
SAMPLING = SamplingParams(temperature=1.0, max_new_tokens=8)
REWARDS = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0]])
LENGTHS = [8, 2, 5, 1, 7, 3, 8, 4, 6, 2, 8, 1]


def agent_of(path, compute: ComputeConfig, **grpo) -> Agent:
    model, tok = load_policy(str(path))
    cfg = AgentConfig(name="a", model=str(path), lr=1.0)
    grpo = GRPOConfig(max_grad_norm=None, **grpo)
    agent = Agent(cfg, model, tok, PromptTemplate("{problem}\n", ""), "problem", grpo, compute=compute)
    agent.optimizer = torch.optim.SGD(agent.model.parameters(), lr=1.0)  # the step is minus the gradient
    return agent


def cut_to(r, lengths: list[int]):
    """The rollout with completion i ending after lengths[i] tokens (the rest padding)."""
    ids, attention, completion = r.input_ids.clone(), r.attention_mask.clone(), r.completion_mask.clone()
    for i, length in enumerate(lengths):
        completion[i, length:] = 0
        attention[i, r.prompt_length + length :] = 0
        ids[i, r.prompt_length + length :] = 0
    return dataclasses.replace(r, input_ids=ids, attention_mask=attention, completion_mask=completion)


def mixed_rollout(path):
    sampler = agent_of(path, ComputeConfig())
    torch.manual_seed(1)
    problems = [Problem(id=str(i), texts={"problem": p}) for i, p in enumerate(PROMPTS)]
    return cut_to(sampler.sample(problems, 4, SAMPLING), LENGTHS)


def step_of(agent: Agent, rollout) -> tuple[torch.Tensor, object]:
    before = torch.cat([p.detach().flatten().clone() for p in agent.model.parameters()])
    stats = agent.update(rollout, REWARDS, SAMPLING)
    after = torch.cat([p.detach().flatten() for p in agent.model.parameters()])
    return before - after, stats


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
def test_packed_micro_batches_under_activation_checkpointing_give_the_padded_update(tiny_models, bf16):
    """Packed micro-batches of at most 24 tokens with gradient checkpointing (and beta > 0: the
    reference scored packed too) take the step of the padded, uncheckpointed update: fp32 to
    float summation order. In bf16 (autocast) rounding hides a wrong attention (the padded bf16
    step is 0.6% from fp32's, one attending across sequences 0.8% from the padded one): there
    the checkpointed step must equal the packed uncheckpointed one exactly (the recomputation
    is the forward's own arithmetic) and stay within 2% of the padded bf16 step."""
    path = tiny_models["llama-char"]
    rollout = mixed_rollout(path)
    expected, expected_stats = step_of(agent_of(path, ComputeConfig(bf16=bf16), beta=0.1), rollout)
    compute = ComputeConfig(bf16=bf16, gradient_checkpointing=True)
    agent = agent_of(path, compute, beta=0.1, max_tokens_per_microbatch=24)
    assert agent.model.config._attn_implementation == TRAINING_SDPA and can_pack(agent.model, rollout)
    rows = []
    agent.model.register_forward_pre_hook(lambda m, a, kw: rows.append(kw["input_ids"].shape[0]), with_kwargs=True)
    got, stats = step_of(agent, rollout)
    assert rows == [1] * len(rows) and len(rows) > 2  # one packed row per micro-batch, several of them
    assert stats.optimizer_steps == 1 and float(got.abs().max()) > 1e-3
    if not bf16:
        torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-4)
        assert stats.loss == pytest.approx(expected_stats.loss, rel=1e-5, abs=1e-7)
        assert stats.kl == pytest.approx(expected_stats.kl, rel=1e-4, abs=1e-9)
        return
    unchecked, _ = step_of(agent_of(path, ComputeConfig(bf16=True), beta=0.1, max_tokens_per_microbatch=24), rollout)
    assert torch.equal(got, unchecked)
    assert float((got - expected).norm() / expected.norm()) < 2e-2


def test_training_attention_by_device_and_precision(tiny_models, monkeypatch):
    """corl_sdpa on CPU (any precision) and in fp32; flash_attention_2 only on CUDA in bf16 with
    flash-attn installed; eager-loaded models keep eager (and pad), as do unpackable ones."""
    import corl.models.attention as attention

    model, _ = load_policy(str(tiny_models["llama-char"]))
    assert model.config._attn_implementation == "sdpa"  # how corl loads it
    assert training_attention(model, bf16=False) == TRAINING_SDPA
    assert training_attention(model, bf16=True) == TRAINING_SDPA  # CPU: no flash-attn kernels
    monkeypatch.setattr(attention, "_on_cuda", lambda model: True)
    monkeypatch.setattr(attention, "_flash_attn_installed", lambda: True)
    assert training_attention(model, bf16=True) == FLASH
    assert training_attention(model, bf16=False) == TRAINING_SDPA  # flash-attn takes no fp32
    monkeypatch.setattr(attention, "_flash_attn_installed", lambda: False)
    assert training_attention(model, bf16=True) == TRAINING_SDPA
    model.config._attn_implementation = "eager"
    assert training_attention(model, bf16=True) is None
    model.config._attn_implementation = "sdpa"
    model.config.model_type = "qwen2_vl"
    assert training_attention(model, bf16=False) is None


def test_training_attention_is_sdpa_on_padded_forwards_and_saves_no_trace(tiny_models, tmp_path):
    """Outside a packed row corl_sdpa IS transformers' sdpa: the same logits bit for bit on a
    left-padded batch, and the saved config.json names no attention implementation."""
    model, tok = load_policy(str(tiny_models["qwen2-bpe"]))
    batch = tok(["3+4=?", "12*3-5=?"], return_tensors="pt", padding=True)
    assert (batch["attention_mask"] == 0).any()
    before = model(**batch).logits
    agent = Agent(AgentConfig(name="a", model="m"), model, tok, PromptTemplate(), "problem", GRPOConfig())
    assert agent.model.config._attn_implementation == TRAINING_SDPA
    assert torch.equal(agent.model(**batch).logits, before)
    agent.model.save_pretrained(tmp_path)
    assert "corl" not in (tmp_path / "config.json").read_text()


def test_packed_inputs_restart_positions_at_each_sequence(tiny_models):
    """Two rows, prompts left-padded to 3 columns: row 0 holds prompt [5, 6] (one pad) and
    completion [7, 8, 9]; row 1 prompt [4, 5, 6] and completion [3]. Packed: row 0's inputs are
    its prompt and completion less the last token (4 tokens, positions 0-3), row 1's its prompt
    (3 tokens, positions 0-2): ids [5 6 7 8 4 5 6], positions [0 1 2 3 0 1 2], boundaries
    [0 4 7]; predicting positions 1-3 (row 0's 3 completion tokens) and 6 (row 1's one)."""
    from corl.rollout import Rollout

    ids = torch.tensor([[0, 5, 6, 7, 8, 9], [4, 5, 6, 3, 0, 0]])
    mask = torch.tensor([[0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])
    completion = torch.tensor([[1, 1, 1], [1, 0, 0]])
    rollout = Rollout(ids, mask, completion, None, ["", ""], 3, 2)
    inputs, predict, targets = packed_inputs(rollout, torch.tensor([0, 1]))
    assert inputs["input_ids"].tolist() == [[5, 6, 7, 8, 4, 5, 6]]
    assert inputs["position_ids"].tolist() == [[0, 1, 2, 3, 0, 1, 2]]
    assert inputs["cu_seq_lens_q"].tolist() == [0, 4, 7] and inputs["max_length_q"] == 4
    assert predict.tolist() == [1, 2, 3, 6]
    assert targets.tolist() == [7, 8, 9, 3]


def dynamic_rope_agent(tmp_path):
    """A Llama whose rotary frequencies depend on the largest position id of a forward (dynamic
    NTK scaling past 16 positions): positions counted over the whole packed row (29 tokens here)
    instead of per sequence (at most 12) would change every sequence's log-probs."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=16, rope_scaling={"rope_type": "dynamic", "factor": 4.0},
    )  # fmt: skip
    model = AutoModelForCausalLM.from_config(config)
    tok = type("Tok", (), {"eos_token_id": 1, "pad_token_id": 2})()
    return Agent(AgentConfig(name="a", model="m"), model, tok, PromptTemplate(), "problem", GRPOConfig())


def test_packed_logprobs_use_each_sequences_own_positions(tmp_path):
    """On the dynamic-RoPE model, the packed row's log-probs equal the padded forward's."""
    from corl.rollout import Rollout

    agent = dynamic_rope_agent(tmp_path)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 40, (3, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, :2] = 0  # a left-padded prompt
    completion = torch.ones(3, 6, dtype=torch.long)
    completion[2, 4:] = 0
    mask[2, 10:] = 0
    rollout = Rollout(ids, mask, completion, None, [""] * 3, 6, 3)
    rows = torch.arange(3)
    with torch.no_grad():
        padded = sequence_logprobs(agent.model, rollout, rows, 1.0) * completion
        packed = packed_logprobs(agent.model, rollout, rows, 1.0, 6)
    torch.testing.assert_close(packed, padded, atol=1e-5, rtol=1e-5)


def test_packed_logprobs_score_the_samplers_top_p_nucleus(tiny_models):
    """A rollout sampled with top_p 0.7: the packed log-probs are the nucleus's (renormalised),
    as the padded path's are, and not the full distribution's."""
    agent = agent_of(tiny_models["qwen2-bpe"], ComputeConfig())
    rollout = dataclasses.replace(mixed_rollout(tiny_models["qwen2-bpe"]), top_p=0.7)
    rows = torch.arange(12)
    mask = rollout.completion_mask.float()
    with torch.no_grad():
        padded = sequence_logprobs(agent.model, rollout, rows, 1.0) * mask
        packed = packed_logprobs(agent.model, rollout, rows, 1.0, mask.shape[1])
        full = sequence_logprobs(agent.model, dataclasses.replace(rollout, top_p=1.0), rows, 1.0) * mask
    torch.testing.assert_close(packed, padded, atol=1e-5, rtol=1e-5)
    assert float((packed - full).abs().max()) > 1e-2  # the nucleus changes the scores


@pytest.mark.slow
def test_corl_train_packs_under_checkpointing_as_it_trains_padded(tmp_path, tiny_models, tiny_data):
    """`corl train` with compute.gradient_checkpointing and grpo.max_tokens_per_microbatch (the
    paper config plus a token budget) trains its first steps, logging the loss and gradient
    norm of the run without either (same samples: packing changes no sampling)."""
    runs = {}
    for name, extra in (("padded", {}), ("packed", {"max_tokens_per_microbatch": 48})):
        raw = tiny_config(tmp_path, tiny_models, tiny_data, agents=2, grpo={"max_grad_norm": None, **extra})
        raw["cohort"]["steps"] = 2
        raw["logging"]["tensorboard"] = False
        if extra:
            raw["compute"] = {"gradient_checkpointing": True}
        config = tmp_path / f"{name}.yaml"
        config.write_text(yaml.safe_dump(raw))
        done = subprocess.run(
            [sys.executable, "-m", "corl", "train", str(config), "-o", str(tmp_path / name)],
            capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"},
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
        runs[name] = read_metrics(tmp_path / name, "train")
    assert [r["step"] for r in runs["packed"]] == [1, 2]
    for packed, padded in zip(runs["packed"], runs["padded"], strict=True):
        for agent in ("agent0", "agent1"):
            for key in (f"{agent}/loss", f"{agent}/grad_norm"):
                assert packed[key] == pytest.approx(padded[key], rel=1e-4, abs=1e-7), key


FSDP_WORKER = """
import json, sys, torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from corl.trainer import Agent
from corl.config import AgentConfig, ComputeConfig, GRPOConfig
from corl.data.rows import Problem, PromptTemplate
from corl.models import load_policy
from corl.parallel import DataParallel, Heartbeat, plan_layout
from corl.rollout import SamplingParams
from corl.rollout.vllm_weights import iter_full_weights
from tests.trainer.test_packing_checkpointing import LENGTHS, PROMPTS, REWARDS, SAMPLING, cut_to

path, out = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
heartbeat = Heartbeat(dist.distributed_c10d._get_default_store(), rank, 120, plan_layout(["a"], world))
mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
problems = [Problem(id=str(i), texts={"problem": p}) for i, p in enumerate(PROMPTS)]

def agent(compute, sharded, **grpo):
    model, tok = load_policy(path)
    dp = DataParallel(mesh.get_group(), range(world), rank, heartbeat, mesh=mesh) if sharded else None
    a = Agent(AgentConfig(name="a", model=path), model, tok, PromptTemplate("{problem}\\\\n", ""), "problem",
              GRPOConfig(max_grad_norm=None, beta=0.1, **grpo), dp=dp, compute=compute)
    a.optimizer = torch.optim.SGD(a.model.parameters(), lr=1.0)
    return a

def weights(model):
    return torch.cat([t.flatten().float() for _, t in iter_full_weights(model)])

torch.manual_seed(1)
rollout = cut_to(agent(ComputeConfig(), False).sample(problems, 4, SAMPLING), LENGTHS)
mine = list(range(rank, len(problems), world))  # rank 0: prompts 0 and 2, rank 1: prompt 1

def step(a, sharded):
    before = weights(a.model)
    stats = a.update(rollout.select_prompts(mine), REWARDS[mine], SAMPLING) if sharded else a.update(rollout, REWARDS, SAMPLING)
    return weights(a.model) - before, stats

results = {}
for label, bf16 in (("fp32", False), ("bf16", True)):
    whole, expected = step(agent(ComputeConfig(bf16=bf16), False), False)  # one process, padded, not checkpointed
    packed = agent(ComputeConfig(bf16=bf16, gradient_checkpointing=True), True, max_tokens_per_microbatch=24)
    rows = []
    packed.model.register_forward_pre_hook(lambda m, a, kw: rows.append(kw["input_ids"].shape[0]), with_kwargs=True)
    delta, stats = step(packed, True)
    unchecked, _ = step(agent(ComputeConfig(bf16=bf16), True, max_tokens_per_microbatch=24), True)
    results[label] = {"exact": bool(torch.equal(delta, unchecked)), "error": float((delta - whole).abs().max()), "relative": float((delta - whole).norm() / whole.norm()),
                      "size": float(whole.abs().max()), "loss": [stats.loss, expected.loss], "rows": rows}
with open(f"{out}/rank{rank}.json", "w") as f:
    json.dump(results, f)
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_packed_checkpointed_fsdp2_update_equals_the_padded_single_process_update(tmp_path, tiny_models):
    """Two FSDP2 ranks on gloo, each with its prompts of one rollout packed into micro-batches
    of at most 24 tokens, with activation checkpointing and a KL reference: the sharded step
    equals one process's padded, uncheckpointed step on the whole batch (fp32: to 1e-6 of the
    step; bf16, FSDP2's mixed precision: within 5% of the step's norm, and exactly the sharded
    packed step without checkpointing)."""
    script = tmp_path / "worker.py"
    script.write_text(FSDP_WORKER)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script)]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": root}
    proc = subprocess.run(
        [*cmd, str(tiny_models["llama-char"]), str(tmp_path)], capture_output=True, text=True, timeout=600, env=env
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    for rank in range(2):
        results = json.loads((tmp_path / f"rank{rank}.json").read_text())
        for label, r in results.items():
            assert r["size"] > 1e-3 and r["rows"] and set(r["rows"]) == {1}, (label, r)  # packed rows, a step taken
        assert results["fp32"]["error"] <= 1e-6 * max(1.0, results["fp32"]["size"]), results["fp32"]
        assert results["fp32"]["loss"][0] == pytest.approx(results["fp32"]["loss"][1], rel=1e-4, abs=1e-7)
        assert results["bf16"]["relative"] < 5e-2 and results["bf16"]["exact"], results["bf16"]
