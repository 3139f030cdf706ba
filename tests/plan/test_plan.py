"""The memory plan (corl.plan, `corl plan`, and `corl train` refusing a run that cannot fit).

The arithmetic is checked against numbers worked out by hand for a small Llama whose every
parameter is known; the paper's 3B agents against their public parameter counts; the
update's activations against the measured peak of corl's real update; the CLI as a user
runs it, in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from corl.config import validate_config
from corl.plan import Machine, Planner, check_before_training, parse_size, plan_run
from corl.plan import arithmetic as a
from corl.plan.models import model_facts

ROOT = Path(__file__).resolve().parents[2]
GIB = 2**30

# A Llama small enough to count by hand: vocabulary 100, hidden 16, 2 layers, 4 heads of
# width 4 with 2 KV heads (k and v project to 8), MLP 32, tied embeddings.
SMALL = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 100,
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "tie_word_embeddings": True,
}
# Public config.json values (huggingface.co/Qwen/Qwen2.5-3B, meta-llama/Llama-3.2-3B).
QWEN25_3B = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 2048,
    "intermediate_size": 11008,
    "num_hidden_layers": 36,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-06,
    "tie_word_embeddings": True,
}
LLAMA32_3B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "num_hidden_layers": 28,
    "num_attention_heads": 24,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 32.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "tie_word_embeddings": True,
}


def model_folder(root: Path, name: str, config: dict) -> Path:
    """A model folder with a config.json only: the plan needs no weights."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def small_run(tmp_path: Path, **sections):
    folder = model_folder(tmp_path, "small", SMALL)
    raw = {
        "device": "cpu",
        "agents": [{"name": "a", "model": str(folder)}, {"name": "b", "model": str(folder)}],
        "data": {"train": "unused.jsonl"},
        "cohort": {"samples_per_prompt": 2, "prompts_per_step": 6, "max_new_tokens": 5},
        "plan": {"prompt_tokens": 5},
    }
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value}
    return validate_config(raw)


# Per layer: q 16x16 = 256, k and v 16x8 = 128 each, o 256, gate / up / down 16x32 = 512 each,
# two norms of 16: 256 + 2*128 + 256 + 3*512 + 32 = 2,336. Two layers 4,672, the embedding
# 100x16 = 1,600 (the head is tied to it), the final norm 16: 6,288 parameters.
SMALL_PARAMS = 6288


def test_small_model_parameters_and_states_by_hand(tmp_path):
    cfg = small_run(tmp_path)
    facts = model_facts(cfg.agents[0], 0, None)
    assert facts.params == SMALL_PARAMS and facts.trainable == SMALL_PARAMS
    plan = Planner(cfg, Machine(1, GIB, "cpu", "test")).plan(cfg)
    states = {item.what: item.bytes for item in plan.ranks[0].agents[0].states}
    # float32: 4 bytes per parameter and per gradient, AdamW 2 x 4 per parameter
    assert states == {"parameters": 4 * 6288, "gradients": 4 * 6288, "AdamW moments": 8 * 6288}


def test_lora_counts_only_the_adapters(tmp_path):
    cfg = small_run(tmp_path, compute={"lora": {"r": 2}})
    facts = model_facts(cfg.agents[0], 0, cfg.compute.lora)
    # r x (in + out) per linear layer: q 2x(16+16) = 64, k and v 2x(16+8) = 48, o 64,
    # gate and up 2x(16+32) = 96, down 2x(32+16) = 96: 512 per layer, 1,024 in two (head excluded)
    assert facts.trainable == 1024
    assert facts.params == SMALL_PARAMS + 1024
    plan = Planner(cfg, Machine(1, GIB, "cpu", "test")).plan(cfg)
    states = {item.what: item.bytes for item in plan.ranks[0].agents[0].states}
    assert states["AdamW moments"] == 8 * 1024 and states["gradients"] == 4 * 1024
    assert states["parameters"] == 4 * (SMALL_PARAMS + 1024)


def test_frozen_log_probs_are_planned_one_update_minibatch_at_a_time(tmp_path):
    """Old and reference log-probs run per update minibatch (Agent.frozen_logprobs), so their
    forward is planned for a minibatch's rows, not for the rank's 12 sequences (6 prompts x 2)."""
    plan = Planner(small_run(tmp_path), Machine(1, GIB, "cpu", "test")).plan(small_run(tmp_path))
    assert plan.ranks[0].agents[0].phases["score"] == []  # beta 0, one pass: no frozen forward
    for grpo in ({"beta": 0.01, "minibatch_size": 3}, {"num_passes": 2, "minibatch_size": 4}, {"beta": 0.01}):
        cfg = small_run(tmp_path, grpo=grpo)
        agent = Planner(cfg, Machine(1, GIB, "cpu", "test")).plan(cfg).ranks[0].agents[0]
        [item] = agent.phases["score"]
        rows = grpo.get("minibatch_size", 12)  # no minibatch_size: one minibatch of all 12
        assert item.note.startswith(f"{rows} sequences x "), (grpo, item.note)


def test_fsdp_shards_pad_the_first_dimension(tmp_path):
    cfg = small_run(tmp_path, distributed={"fsdp": True})
    # 6 ranks, 2 agents: 3 per agent. ceil(dim0 / 3) rows each: embedding 34x16 = 544; per
    # layer q 6x16 = 96, k and v 3x16 = 48, o 96, gate and up 11x16 = 176, down 6x32 = 192,
    # norms 6 + 6: 844, two layers 1,688; final norm 6. 544 + 1,688 + 6 = 2,238 per rank.
    plan = Planner(cfg, Machine(6, GIB, "cuda", "test")).plan(cfg)
    states = {item.what: item.bytes for item in plan.ranks[0].agents[0].states}
    assert plan.ranks[0].agents[0].dp == 3
    assert states["parameters"] == 4 * 2238 and states["AdamW moments"] == 8 * 2238


def test_activation_arithmetic_by_hand():
    shape = a.DecoderShape(layers=2, hidden=16, heads=4, kv_heads=2, head_dim=4, intermediate=32, vocab=100)
    # float32, SDPA: norms 6 x 4 x 16 = 384, attention 4 x 4 x 16 = 256, MLP 4 x 4 x 32 = 512,
    # logsumexp 4 heads x 4 = 16: 1,168 bytes per token and layer
    assert a.layer_saved_bytes_per_token(shape, "fp32", seq=10) == 1168
    # 2 sequences x 10 tokens = 20 tokens x (2 x 1,168 + final norm 3 x 4 x 16 = 192 + int64 inputs 24)
    # = 20 x 2,552 = 51,040; SDPA mask 2 x 10 x 10 x 4 = 800; 1,000 logits (2 x 5 x 100) x 16 = 16,000
    elements = a.head_elements(2, 5, 100, None)
    assert elements == 1000
    assert a.update_peak_bytes(shape, "fp32", 2, 10, False, elements) == 51040 + 800 + 16000
    # checkpointed: 20 x (192 + 24) + 800 = 5,120; each layer keeps its input 20 x 2 x 4 x 16 = 2,560;
    # the recomputed layer 20 x (1,168 + working 4 x 16 + 3 x 4 x 32 / 2 = 256) = 28,480 > 16,000
    assert a.update_peak_bytes(shape, "fp32", 2, 10, True, elements) == 5120 + 2560 + 28480
    # keys and values: 2 layers x 8 wide x (4 + 4) bytes
    assert a.kv_bytes_per_token(shape, "fp32") == 128
    assert a.kv_bytes_per_token(shape, "fsdp_bf16") == 64
    # the chunked head holds at most chunk // (n x V) positions of every sequence
    assert a.head_elements(2, 5, 100, chunk_elements=400) == 2 * 2 * 100
    # images: 10 patches x 12 float32 pixel values = 480; with autograd 10 patches x 2 layers x
    # (10 x 8 + 3 x 16 = 128) x 4 = 10,240; without, one layer's 10 x (3 x 8 + 2 x 16 = 56) x 4 = 2,240
    vision = a.VisionShape(layers=2, hidden=8, intermediate=16, patch_values=12)
    assert a.vision_bytes(vision, "fp32", 10, grad=True) == 480 + 10240
    assert a.vision_bytes(vision, "fp32", 10, grad=False) == 480 + 2240


def test_sizes_parse():
    assert parse_size("80GiB") == 80 * 2**30
    assert parse_size("24GB") == 24 * 10**9
    assert parse_size("512 MiB") == 512 * 2**20


def paper_run(tmp_path, *overrides: str):
    from corl.config import load_config

    qwen = model_folder(tmp_path, "qwen", QWEN25_3B)
    llama = model_folder(tmp_path, "llama", LLAMA32_3B)
    sets = [f"agents.0.model={qwen}", f"agents.1.model={llama}", *overrides]
    return load_config(ROOT / "configs" / "paper-text-3b.yaml", sets)


def test_paper_config_plans_the_public_3b_models(tmp_path):
    cfg = paper_run(tmp_path)
    plan = plan_run(cfg, Machine(8, 80 * GIB, "cuda", "8 x 80 GiB"))
    facts = {ag.name: ag.facts for rank in plan.ranks for ag in rank.agents}
    # the model cards: Qwen2.5-3B 3.09B parameters, Llama-3.2-3B 3.21B
    assert abs(facts["qwen"].params / 3.09e9 - 1) < 0.01
    assert abs(facts["llama"].params / 3.21e9 - 1) < 0.01
    assert [ag.dp for rank in plan.ranks for ag in rank.agents] == [4, 4]  # four ranks per agent
    assert plan.fits and not plan.advice
    # too many sequences per forward: the plan says so, and names the option to change
    too_big = paper_run(tmp_path, "grpo.minibatch_size=64")  # vLLM asleep through the update: 35 fits
    refused = plan_run(too_big, Machine(8, 80 * GIB, "cuda", "8 x 80 GiB"))
    assert refused.fits is False
    assert "grpo.minibatch_size=" in refused.advice[0]


def test_fsdp_plans_the_chunked_head_and_a_sharded_bf16_reference(tmp_path):
    """The paper's run (FSDP2 + bf16, 4 ranks per agent) with a KL term: the update's logits are the
    chunked head's, at most 2**24 at once (16 B each: 0.25 GiB), not [n, 3,072, 151,936] (7 GiB a
    sequence); the KL reference is this rank's bf16 shard, half the bytes of its float32 parameter
    shard (1.44 GiB for Qwen2.5-3B, where a whole float32 copy was 11.5 GiB), and scoring with it
    gathers it whole in bf16 (2 bytes a parameter), as sampling gathers the policy."""
    from corl.trainer.logprobs import LOGIT_CHUNK_ELEMENTS

    plan = plan_run(paper_run(tmp_path, "grpo.beta=0.04"), Machine(8, 80 * GIB, "cuda", "8 x 80 GiB"))
    qwen = plan.ranks[0].agents[0]
    [activations] = [i for i in qwen.phases["update"] if i.what == "activations + logits"]
    assert "(chunked head)" in activations.note
    elements = a.head_elements(qwen.minibatch, 3072, 151_936, LOGIT_CHUNK_ELEMENTS)
    assert elements <= LOGIT_CHUNK_ELEMENTS and a.logit_bytes(elements) <= GIB // 4
    states = {i.what: i.bytes for i in qwen.states}
    assert states["KL reference shard"] * 2 == states["parameters"] == 4 * 771_484_672  # 1/4 of 3,085,938,688
    assert {i.what: i.bytes for i in qwen.phases["score"]}["gathered weights"] == 2 * 3_085_938_688
    fp32 = plan_run(paper_run(tmp_path, "grpo.beta=0.04", "compute.bf16=false"), Machine(8, 80 * GIB, "cuda", "x"))
    assert {i.what: i.bytes for i in fp32.ranks[0].agents[0].states}["KL reference shard"] == 4 * 771_484_672


def test_vllm_samples_without_gathering_and_sleeps_through_the_update(tmp_path):
    """vLLM samples from its own copy: no "gathered weights" while sampling (the HF engine gathers
    the bf16 policy: 2 B a parameter); with rollout.sleep_mode its share of the device
    (0.35 x 80 GiB = 28 GiB) counts in the sample phase only. Llama-3.2-3B on 4 ranks: a rank's
    states are 16 B per parameter of its shard (float32 parameters and gradients, two AdamW
    moments): 16 x 803,187,456 = 12,850,999,296 B = 11.97 GiB; sample peak 39.97 GiB."""
    machine = Machine(8, 80 * GIB, "cuda", "8 x 80 GiB")
    states, engine = 16 * 803_187_456, 28 * GIB
    asleep = plan_run(paper_run(tmp_path), machine)  # as shipped: sleep_mode, 0.35, minibatch 15
    rank = asleep.ranks[1]
    [llama] = rank.agents
    assert llama.name == "llama" and llama.phases["sample"] == []
    assert rank.totals["sample"] == states + engine
    update = sum(i.bytes for i in llama.phases["update"])
    assert rank.totals["update"] == states + update and rank.totals["score"] == states  # the engine asleep
    assert asleep.worst.peak == states + engine <= 40 * GIB
    awake = plan_run(paper_run(tmp_path, "rollout.sleep_mode=false"), machine)
    assert awake.ranks[1].totals["update"] == states + engine + update
    hf = plan_run(paper_run(tmp_path, "rollout.engine=hf"), machine)
    assert {i.what: i.bytes for i in hf.ranks[1].agents[0].phases["sample"]}["gathered weights"] == 2 * 3_212_749_824


def test_warn_goes_on_and_stop_refuses(tmp_path):
    cfg = small_run(tmp_path, plan={"device_memory": "64KiB"})
    said = []
    from corl.plan import PlanDoesNotFit

    with pytest.raises(PlanDoesNotFit, match="plan.check=warn"):
        check_before_training(cfg, said.append)
    warn = small_run(tmp_path, plan={"device_memory": "64KiB", "check": "warn"})
    plan = check_before_training(warn, said.append)
    assert plan is not None and plan.fits is False and "does not fit" in said[-1]


def test_update_arithmetic_against_the_measured_peak(tmp_path):
    """corl's real Agent.update on a small Llama: the plan's update peak within 25% of the
    measured peak of live CPU tensors (torch's profiler, every allocation of the step)."""
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile
    from transformers import AutoConfig, AutoModelForCausalLM

    from corl.config import AgentConfig, GRPOConfig
    from corl.data.rows import PromptTemplate
    from corl.rollout import Rollout, SamplingParams
    from corl.trainer import Agent

    cfg = small_run(tmp_path, cohort={"prompts_per_step": 8, "samples_per_prompt": 4, "max_new_tokens": 48})
    config = AutoConfig.from_pretrained(cfg.agents[0].model)
    n, p, c = 32, 5, 48
    torch.manual_seed(0)
    tokenizer = type("Tok", (), {"eos_token_id": 1, "pad_token_id": 2})()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model = AutoModelForCausalLM.from_config(config)
        agent = Agent(AgentConfig(name="a", model="m"), model, tokenizer, PromptTemplate(), "problem", GRPOConfig())
        ids = torch.randint(3, 100, (n, p + c))
        mask = torch.ones_like(ids)
        mask[::2, :2] = 0  # left padding, as a batch of prompts of different lengths has
        rollout = Rollout(ids, mask, torch.ones(n, c, dtype=torch.long), None, [""] * n, p, 4)
        for _ in range(2):  # the second update is the steady state: gradients and moments exist
            agent.update(rollout, torch.randn(8, 4), SamplingParams(max_new_tokens=c))
    measured = 0
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        if event.tag == _EventType.Allocation:
            measured = max(measured, event.extra_fields.total_allocated)
        stack.extend(event.children)
    plan = Planner(cfg, Machine(1, GIB, "cpu", "test")).plan(cfg)
    agent_plan = plan.ranks[0].agents[0]
    states = sum(item.bytes for item in agent_plan.states)
    predicted = states + sum(item.bytes for item in agent_plan.phases["update"])
    assert 0.75 < predicted / measured < 1.25, (predicted, measured)


def corl(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "corl", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def test_corl_plan_on_the_tiny_configs():
    for config, agents in (("configs/tiny.yaml", ("llama-char", "qwen2-bpe")), ("configs/tiny-vision.yaml", ("qwen2vl-bpe",))):
        out = corl("plan", config)
        assert out.returncode == 0, out.stderr
        assert "\nfits: peak" in out.stdout
        for name in agents:
            assert f"agent {name}:" in out.stdout


def test_corl_plan_on_the_paper_config(tmp_path):
    qwen = model_folder(tmp_path, "qwen", QWEN25_3B)
    llama = model_folder(tmp_path, "llama", LLAMA32_3B)
    args = ["--set", f"agents.0.model={qwen}", "--set", f"agents.1.model={llama}", "--gpus", "8", "--device-memory", "80GiB"]
    out = corl("plan", "configs/paper-text-3b.yaml", *args)
    assert out.returncode == 0, out.stderr
    assert "ranks 0-3 (qwen)" in out.stdout and "ranks 4-7 (llama)" in out.stdout
    assert "3,085,938,688 parameters" in out.stdout  # Qwen2.5-3B, counted on the meta device


def test_corl_train_refuses_a_plan_that_cannot_fit(tmp_path):
    """A device too small for the update: corl train stops before loading anything (exit 2),
    names the option to change first and how to go on anyway."""
    run = tmp_path / "run"
    out = corl("train", "configs/tiny.yaml", "--set", "plan.device_memory=160MiB", "-o", str(run))
    assert out.returncode == 2, out.stdout + out.stderr
    text = out.stdout + out.stderr
    assert "does not fit" in text
    assert "change first: --set grpo.minibatch_size=" in text
    assert "plan.check=warn" in text
    assert not (run / "checkpoints").exists() and not (run / "metrics.jsonl").exists()


def test_votes_are_sampled_and_only_the_trained_samples_are_updated_on(tmp_path):
    """cohort.votes_per_prompt V = 5 > K = 2: the engine samples 6 prompts x 5 = 30 sequences,
    the update and the logit rewards see 6 x 2 = 12."""
    cohort = {"votes_per_prompt": 5, "reward": "entropy"}
    cfg = small_run(tmp_path, cohort=cohort)
    agent = Planner(cfg, Machine(1, GIB, "cpu", "test")).plan(cfg).ranks[0].agents[0]
    assert (agent.sampled, agent.sampled_at_once, agent.sequences, agent.minibatch) == (30, 30, 12, 12)
    [kv] = agent.phases["sample"]
    # KV cache + decode of 30 sequences x (5 + 5) tokens, fp32: per token 2 layers x 8 (k) + 8 (v) x 4 B = 128 B,
    # 30 x 10 x 128 = 38,400; one layer's more while growing: 19,200; decode 4 x 4 B x 30 x 100 vocab = 48,000
    assert kv.bytes == 38_400 + 19_200 + 48_000
    [score] = agent.phases["score"]
    assert score.note.startswith("12 sequences x ")  # entropy rewards: on the 12 trained


def test_a_frozen_agent_holds_no_gradients_optimizer_or_reference(tmp_path):
    cfg = small_run(tmp_path, grpo={"beta": 0.01})
    raw = cfg.model_dump()
    raw["agents"][1]["train"] = False
    cfg = validate_config(raw)
    plan = Planner(cfg, Machine(1, GIB, "cpu", "test")).plan(cfg)
    trained, frozen = plan.ranks[0].agents
    assert [i.what for i in trained.states] == ["parameters", "gradients", "AdamW moments", "KL reference copy"]
    assert {i.what: i.bytes for i in frozen.states} == {"parameters": 4 * SMALL_PARAMS}
    assert frozen.phases["update"] == [] and frozen.phases["optimizer step"] == [] and frozen.phases["score"] == []
    assert trained.phases["update"] and trained.phases["optimizer step"]


# The public parameter counts of the models corl's configs name (their model cards; Qwen3-1.7B and
# Gemma 3 tie the head to the embedding, so the 1.7B counts it once).
PUBLIC_PARAMS = {
    "Qwen/Qwen2.5-3B": 3.09e9,
    "meta-llama/Llama-3.2-3B-Instruct": 3.21e9,
    "Qwen/Qwen2.5-Math-1.5B": 1.54e9,
    "Qwen/Qwen2.5-Coder-1.5B": 1.54e9,
    "Qwen/Qwen3-1.7B": 1.72e9,
    "Qwen/Qwen2.5-VL-3B-Instruct": 3.75e9,
    "google/gemma-3-4b-it": 4.30e9,
}


def hub_models_in_configs() -> set[str]:
    import yaml

    names = set()
    for path in (ROOT / "configs").glob("*.yaml"):
        for agent in yaml.safe_load(path.read_text()).get("agents", []):
            if ":" not in agent["model"]:  # tiny: / tiny-vl: are built here, not read from the hub
                names.add(agent["model"])
    return names


def test_the_models_the_configs_name_are_planned_without_the_hub():
    """No network here: the table of public configs answers for every hub model configs/*.yaml
    names (and Qwen3-1.7B), with their public sizes; the paper's two agents match the config.json
    values written out above, field by field."""
    from corl.config import AgentConfig
    from corl.plan.known_models import KNOWN_CONFIGS, known_config

    named = hub_models_in_configs()
    assert named and named <= set(KNOWN_CONFIGS), named - set(KNOWN_CONFIGS)
    for name in sorted(named | set(PUBLIC_PARAMS)):
        facts = model_facts(AgentConfig(name="a", model=name), 0, None)
        assert abs(facts.params / PUBLIC_PARAMS[name] - 1) < 0.005, (name, facts.params)
        assert "table" in facts.source
    for name, public in (("Qwen/Qwen2.5-3B", QWEN25_3B), ("meta-llama/Llama-3.2-3B-Instruct", LLAMA32_3B)):
        assert {key: KNOWN_CONFIGS[name].get(key) for key in public} == public, name
        assert known_config(name.upper())[0].tie_word_embeddings  # hub ids match whatever their case


def test_a_local_folder_overrides_the_table(tmp_path, monkeypatch):
    from corl.config import AgentConfig

    model_folder(tmp_path / "Qwen", "Qwen2.5-3B", SMALL)
    monkeypatch.chdir(tmp_path)
    facts = model_facts(AgentConfig(name="a", model="Qwen/Qwen2.5-3B"), 0, None)
    assert facts.params == SMALL_PARAMS and facts.source.endswith("config.json")


def test_corl_plan_offline_and_a_size_without_unit():
    """The paper's config as shipped, with the hub out of reach; 80 alone is refused in one line."""
    env = {"HF_HUB_OFFLINE": "1"}
    out = corl("plan", "configs/paper-text-3b.yaml", "--gpus", "8", "--device-memory", "80GiB", env=env)
    assert out.returncode in (0, 1), out.stderr
    assert "3,085,938,688 parameters" in out.stdout and "3,212,749,824 parameters" in out.stdout
    bare = corl("plan", "configs/paper-text-3b.yaml", "--gpus", "8", "--device-memory", "80", env=env)
    assert bare.returncode == 2
    [line] = bare.stderr.strip().splitlines()
    assert "--device-memory: '80' has no unit; write 80GiB" in line


def pasted_options(advice: str) -> list[str]:
    """The `--set ...` part of a line of advice, read as bash reads it (bash -n checks the syntax)."""
    import re
    import shlex

    text = re.search(r"(?:change first|together): (--set .*?) \(peak", advice).group(1)
    check = subprocess.run(["bash", "-n", "-c", f"corl train run.yaml {text}"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    words = shlex.split(text)
    assert words[::2] == ["--set"] * (len(words) // 2) and len(words) % 2 == 0, words
    return words[1::2]


def test_the_advice_pastes_into_a_shell(tmp_path):
    from corl.plan.advice import set_options, with_overrides

    # a value with a space and braces stays one word; the unquoted form would split in two
    assert pasted_options(f"change first: {set_options(['compute.lora={r: 16}', 'grpo.minibatch_size=2'])} (peak") == [
        "compute.lora={r: 16}",
        "grpo.minibatch_size=2",
    ]
    cfg = paper_run(tmp_path)
    machine = Machine(8, 24 * GIB, "cuda", "8 x 24 GiB")
    plan = plan_run(cfg, machine)
    assert plan.fits is False and plan.advice
    changes = pasted_options(plan.advice[0])
    assert plan_run(with_overrides(cfg, changes), machine).fits  # what was printed is what fits


def test_a_token_budget_plans_the_micro_batch_it_holds(tmp_path):
    """grpo.max_tokens_per_microbatch: 5 prompt + 5 completion tokens, 9 of them inputs. A budget of
    20 tokens holds 2 padded rows (2 x 9 = 18), packed ceil(20 / 9) = 3 rows' worth (the third a part
    of one); minibatch_size still caps; a budget under one sequence still runs one."""
    rows = {}
    for name, grpo in {
        "packed": {"max_tokens_per_microbatch": 20},
        "padded": {"max_tokens_per_microbatch": 20, "padding_free": False},
        "capped": {"max_tokens_per_microbatch": 20, "minibatch_size": 2},
        "tiny": {"max_tokens_per_microbatch": 4},
        "none": {},
    }.items():
        cfg = small_run(tmp_path, grpo=grpo)
        agent = Planner(cfg, Machine(1, GIB, "cpu", "test")).plan(cfg).ranks[0].agents[0]
        rows[name] = agent.minibatch
        assert agent.phases["update"][0].note.startswith(f"{agent.minibatch} sequence")
    assert rows == {"packed": 3, "padded": 2, "capped": 2, "tiny": 1, "none": 12}
