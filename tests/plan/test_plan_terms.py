"""The memory plan's terms added after measurement (FSDP2's unsharded root gradient, Qwen3's
q/k norms), a vLLM engine that cannot hold one sequence (refused, with the changes that give
it room before LoRA), and a model whose config cannot be read (refused at once, offline)."""

from __future__ import annotations

import contextlib

import pytest
import torch

from corl.config import AgentConfig, validate_config
from corl.plan import Machine, Planner, check_before_training, plan_run
from corl.plan import arithmetic as a
from corl.plan.advice import Search, Share, TensorParallel, candidates, with_overrides
from corl.plan.models import model_facts
from tests.plan.test_plan import GIB, SMALL_PARAMS, corl, model_folder, paper_run, small_run

# Public config.json of meta-llama/Llama-3.1-8B (untied head) and Qwen/Qwen3-4B (tied).
LLAMA31_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 8.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
        "rope_type": "llama3",
    },
    "tie_word_embeddings": False,
}
QWEN3_4B = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 2560,
    "intermediate_size": 9728,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": True,
}
A100_40GB = Machine(8, 40 * 10**9, "cuda", "8 x 40 GB")


# -- Qwen3's q/k norms -----------------------------------------------------------------------


def test_qk_norm_bytes_by_hand():
    """a = 4 heads x 16 = 64 query values, g = 2 x 16 = 32 key values, normalised per head (16):
    float32 keeps input and output of each (96 x (4 + 4) = 768) and a reciprocal RMS per head
    (6 x 4 = 24): 792 bytes a token; in bf16 the output is a bf16 cast (96 x (4 + 2) + 24 = 600).
    Qwen3-4B (a = 4,096, g = 1,024, head_dim 128) in bf16: 5,120 x 6 + 40 x 4 = 30,880 a token and layer."""
    shape = a.DecoderShape(layers=1, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=256, vocab=100, qk_norm_width=16)
    assert a.qk_norm_bytes_per_token(shape, "fp32") == 792
    assert a.qk_norm_bytes_per_token(shape, "autocast") == a.qk_norm_bytes_per_token(shape, "fsdp_bf16") == 600
    plain = a.DecoderShape(layers=1, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=256, vocab=100)
    assert a.qk_norm_bytes_per_token(plain, "fp32") == 0
    assert a.layer_saved_bytes_per_token(shape, "fp32", 8) == a.layer_saved_bytes_per_token(plain, "fp32", 8) + 792
    qwen3_4b = a.DecoderShape(
        layers=36, hidden=2560, heads=32, kv_heads=8, head_dim=128, intermediate=9728, vocab=151936, qk_norm_width=128
    )
    assert a.qk_norm_bytes_per_token(qwen3_4b, "fsdp_bf16") == 30_880


def saved_bytes_per_token(config_class, precision: str, tokens: int = 32) -> float:
    """Bytes autograd saves inside one decoder layer per token (distinct storages, weights excluded)."""
    torch.manual_seed(0)
    config = config_class(
        vocab_size=100, hidden_size=64, intermediate_size=256, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16,
    )  # fmt: skip
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    if precision == "fsdp_bf16":
        model = model.to(torch.bfloat16)  # FSDP2's bf16 parameters
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def keep(t):
        saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    layer = model.model.layers[0]
    forward = layer.forward
    ids = torch.randint(0, 100, (2, tokens // 2))

    def hooked(*args, **kwargs):
        with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
            return forward(*args, **kwargs)

    layer.forward = hooked
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if precision == "autocast" else contextlib.nullcontext()
    with autocast:
        model(input_ids=ids)
    return sum(n for ptr, n in saved.items() if ptr not in weights) / tokens


@pytest.mark.parametrize("precision", ["fp32", "autocast", "fsdp_bf16"])
def test_qk_norms_are_what_a_qwen3_layer_saves_beyond_a_llama_layer(precision):
    """Counted with saved-tensor hooks: a Qwen3 layer saves exactly the q/k norms' bytes more
    than a Llama layer of the same shape (the rest of the layer is the same arithmetic)."""
    from transformers import LlamaConfig, Qwen3Config

    shape = a.DecoderShape(layers=1, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=256, vocab=100, qk_norm_width=16)
    extra = saved_bytes_per_token(Qwen3Config, precision) - saved_bytes_per_token(LlamaConfig, precision)
    assert extra == a.qk_norm_bytes_per_token(shape, precision)


def test_model_facts_find_the_qk_norms_and_the_head(tmp_path):
    """Qwen3 normalises queries per head (head_dim 128); Qwen2.5 has no such norm. Heads by hand:
    Qwen3-1.7B's is its embedding (tied), 151,936 x 2,048 = 311,164,928; Llama-3.1-8B's its own,
    128,256 x 4,096 = 525,336,576; with LoRA the head is frozen (no gradient)."""
    qwen3 = model_facts(AgentConfig(name="a", model="Qwen/Qwen3-1.7B"), 0, None)
    assert (qwen3.shape.qk_norm_width, qwen3.head_params, qwen3.head_tied) == (128, 311_164_928, True)
    assert model_facts(AgentConfig(name="a", model="Qwen/Qwen2.5-3B"), 0, None).shape.qk_norm_width == 0
    llama = model_facts(AgentConfig(name="a", model=str(model_folder(tmp_path, "llama8b", LLAMA31_8B))), 0, None)
    assert (llama.shape.qk_norm_width, llama.head_params, llama.head_tied) == (0, 525_336_576, False)
    cfg = small_run(tmp_path, compute={"lora": {"r": 2}})
    assert model_facts(cfg.agents[0], 0, cfg.compute.lora).head_params == 0


def test_qwen3_4b_update_plans_its_qk_norms(tmp_path):
    """The paper's run with Qwen3-4B: its checkpointed update keeps one recomputed layer, 30,880 B
    a token more for the q/k norms (bf16): 15 sequences x 4,531 tokens (1,460 + 3,072 - 1) = 67,965
    tokens -> 2,098,759,200 B (1.95 GiB) more than without them."""
    folder = model_folder(tmp_path, "qwen3-4b", QWEN3_4B)
    cfg = paper_run(tmp_path, f"agents.0.model={folder}", "plan.prompt_tokens=1460")
    machine = Machine(8, 80 * GIB, "cuda", "8 x 80 GiB")
    with_norms = Planner(cfg, machine).plan(cfg).ranks[0].agents[0]
    assert with_norms.minibatch == 15 and with_norms.facts.shape.qk_norm_width == 128
    from unittest import mock

    with mock.patch.object(a, "qk_norm_bytes_per_token", lambda *args: 0):
        without = Planner(cfg, machine).plan(cfg).ranks[0].agents[0]
    item = {i.what: i.bytes for i in with_norms.phases["update"]}["activations + logits"]
    before = {i.what: i.bytes for i in without.phases["update"]}["activations + logits"]
    assert item - before == 15 * 4531 * 30_880 == 2_098_759_200


# -- FSDP2's unsharded root gradient ----------------------------------------------------------------


def root_gradient(plan, rank: int = 0) -> int | None:
    items = {i.what: i.bytes for i in plan.ranks[rank].agents[0].phases["update"]}
    return items.get("root gradient")


def test_fsdp_plans_the_unsharded_head_gradient(tmp_path):
    """Under FSDP2 the root unit's gradient is unsharded through the backward: Qwen2.5-3B's tied
    head 2 x 311,164,928 = 622,329,856 B (0.58 GiB) in bf16; Llama-3.1-8B's 2 x 525,336,576 =
    1,050,673,152 B (0.98 GiB), 4 B a parameter in float32. Not without FSDP (the whole
    gradient is a state), nor with LoRA (the head takes none)."""
    machine = Machine(8, 80 * GIB, "cuda", "8 x 80 GiB")
    paper = plan_run(paper_run(tmp_path), machine)
    assert root_gradient(paper) == 622_329_856
    llama = model_folder(tmp_path, "llama8b", LLAMA31_8B)
    eight = plan_run(paper_run(tmp_path, f"agents.1.model={llama}"), machine)
    assert root_gradient(eight, 1) == 1_050_673_152
    fp32 = plan_run(paper_run(tmp_path, f"agents.1.model={llama}", "compute.bf16=false"), machine)
    assert root_gradient(fp32, 1) == 2_101_346_304
    assert root_gradient(plan_run(paper_run(tmp_path, "distributed.fsdp=false"), machine)) is None
    assert root_gradient(plan_run(paper_run(tmp_path, "compute.lora={r: 16}"), machine)) is None
    totals = eight.ranks[1].totals["update"]
    assert totals - 1_050_673_152 == sum(x.bytes for x in eight.ranks[1].agents[0].states) + sum(
        x.bytes for x in eight.ranks[1].agents[0].phases["update"] if x.what != "root gradient"
    )


# -- a vLLM engine that cannot hold one sequence ----------------------------------------------------


def vllm_run(tmp_path, **rollout):
    """Two agents of the small Llama on one rank of a 1,000,000-byte "GPU", vLLM asleep through the
    update, max_model_len 32: its bf16 weights are 2 x 6,288 = 12,576 B, a sequence's KV cache
    32 tokens x 2 layers x 8 x (2 + 2) B = 2,048 B."""
    return small_run(
        tmp_path,
        rollout={"engine": "vllm", "sleep_mode": True, "max_model_len": 32, **rollout},
        plan={"prompt_tokens": 5, "device_memory": "1000000B"},
    )


MACHINE = Machine(1, 1_000_000, "cuda", "1,000,000 B")


def test_a_vllm_engine_that_cannot_hold_its_weights_does_not_fit(tmp_path):
    """Share 0.01: 10,000 B for 12,576 B of weights: no sequence; the peak alone would fit
    (the states, 2 x 16 x 6,288 = 201,216 B, of 900,000 usable), the plan does not. The first
    change: the largest share that fits, 0.65 (201,216 + 650,000 = 851,216; 0.7 would be
    901,216): (650,000 - 12,576) // 2,048 = 311 sequences at once. rollout.max_model_len=16 (the
    5 + 5 a sequence needs, at least its least value 16) is tried before and leaves the engine short."""
    cfg = vllm_run(tmp_path, gpu_memory_utilization=0.01)
    plan = plan_run(cfg, MACHINE)
    agent = plan.ranks[0].agents[0]
    assert agent.engine_sequences == 0 and "no room left for a KV cache" in agent.engine.note
    assert plan.worst.peak <= plan.usable == 900_000 and plan.fits is False
    assert [ag.name for ag in plan.short_engines] == ["a", "b"]
    assert plan.advice[0].startswith("change first: --set rollout.gpu_memory_utilization=0.65 (")
    fixed = plan_run(with_overrides(cfg, ["rollout.gpu_memory_utilization=0.65"]), MACHINE)
    assert fixed.fits and fixed.ranks[0].agents[0].engine_sequences == 311
    assert fixed.ranks[0].totals["sample"] == 2 * 16 * SMALL_PARAMS + 650_000


def test_tensor_parallel_halves_the_engine_on_each_rank(tmp_path):
    """rollout.tensor_parallel_size 2 (2 ranks an agent): 6,288 B of weights and 1,024 B a sequence
    on each rank; at share 0.01 (10,000 B): (10,000 - 6,288) // 1,024 = 3 sequences."""
    cfg = vllm_run(tmp_path, gpu_memory_utilization=0.01, tensor_parallel_size=2)
    plan = Planner(cfg, Machine(4, 1_000_000, "cuda", "x")).plan(cfg)
    assert plan.ranks[0].agents[0].dp == 2 and plan.ranks[0].agents[0].engine_sequences == 3


def test_room_for_the_engine_comes_before_lora(tmp_path):
    """Candidates for a short engine: its share, the update's minibatch, tensor parallel over the
    agent's ranks, all before LoRA (which cannot shrink what vLLM holds)."""
    cfg = vllm_run(tmp_path, gpu_memory_utilization=0.01, sleep_mode=False)
    machine = Machine(4, 1_000_000, "cuda", "x")  # 2 ranks an agent
    plan = Planner(cfg, machine).plan(cfg)
    order = candidates(cfg, plan)
    names = [c.key if isinstance(c, (Search, Share, TensorParallel)) else c[0].split("=")[0] for c in order]
    assert names.index("rollout.sleep_mode") < names.index("rollout.gpu_memory_utilization")
    assert names.index("rollout.gpu_memory_utilization") < names.index("grpo.minibatch_size")
    assert names.index("grpo.minibatch_size") < names.index("rollout.tensor_parallel_size") < names.index("compute.lora")
    assert not any(name == "rollout.gpu_memory_utilization" and isinstance(c, list) for name, c in zip(names, order))


def test_llama_8b_on_40gb_is_refused_and_the_advice_gives_vllm_room(tmp_path):
    """The issue's case: Llama-3.1-8B agents on 8 x 40 GB at the paper's share 0.35: 14.0e9 B for
    2 x 8,030,261,248 = 16,060,522,496 B of bf16 weights. Refused, saying so; the advice raises the
    share (with what else it takes), and what it prints fits with every engine holding sequences."""
    llama = model_folder(tmp_path, "llama8b", LLAMA31_8B)
    cfg = paper_run(tmp_path, f"agents.0.model={llama}", f"agents.1.model={llama}")
    plan = plan_run(cfg, A100_40GB)
    assert plan.fits is False and len(plan.short_engines) == 2
    from corl.plan import render

    text = render(plan, "paper", 0.1)
    assert "vLLM cannot hold one sequence for qwen, llama" in text and "-4 sequences" not in text
    assert "rollout.gpu_memory_utilization=" in plan.advice[0]
    from tests.plan.test_plan import pasted_options

    after = plan_run(with_overrides(cfg, pasted_options(plan.advice[0])), A100_40GB)
    assert after.fits and min(ag.engine_sequences for rank in after.ranks for ag in rank.agents) >= 1


def test_corl_train_refuses_an_engine_without_room_before_loading(tmp_path):
    cfg = vllm_run(tmp_path, gpu_memory_utilization=0.01)
    raw = cfg.model_dump(mode="json")
    raw["device"] = "cuda"  # planned for the 1,000,000-byte device plan.device_memory names
    from corl.plan import PlanDoesNotFit

    said = []
    with pytest.raises(PlanDoesNotFit, match="vLLM cannot hold one sequence") as err:
        check_before_training(validate_config(raw), said.append)
    assert "rollout.gpu_memory_utilization=0.65" in str(err.value)


# -- a model whose config cannot be read ------------------------------------------------------------


@pytest.mark.parametrize("hub", ["offline", "unreachable"])
def test_corl_plan_fails_at_once_for_a_model_it_cannot_read(tmp_path, hub):
    """A hub id neither cached nor in corl's table, with HF_HUB_OFFLINE set or the hub
    unreachable (a closed local port): exit 2 without the hub client's retries, saying how to
    plan from a folder holding the config.json."""
    import yaml

    config = tmp_path / "run.yaml"
    raw = {"agents": [{"name": "a", "model": "someorg/some-unknown-model"}], "data": {"train": "tiny:train:16"}}
    config.write_text(yaml.safe_dump({**raw, "cohort": {"label_source": "self"}}))
    env = {"HF_HUB_OFFLINE": "1"} if hub == "offline" else {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": "http://127.0.0.1:9"}
    out = corl("plan", str(config), env={**env, "HF_HOME": str(tmp_path / "hf")})
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Retrying" not in out.stderr and "Retry" not in out.stdout
    assert "agents.0.model (agent 'a')" in out.stderr
    assert "give that folder as the model (--set agents.0.model=FOLDER)" in out.stderr
