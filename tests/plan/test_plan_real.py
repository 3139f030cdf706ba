"""`corl plan` on the real pretrained pair (SmolLM2-135M-Instruct, Gemma-3-270M from their GGUF files):
the plan's update and sampling peaks against the measured peaks of corl's real Agent.update and of the
HF engine's sampling loop, for each architecture.

Measured as in tests/plan/test_plan.py: the peak of live CPU tensors (torch's profiler, every
allocation of the step), the CPU counterpart of torch.cuda.max_memory_allocated. The model is built
from the file's config (random weights: memory does not depend on their values, and the
profiler sees every one of them allocated); two updates, the second the steady state (gradients and
AdamW moments exist). Sampling is profiled on its own, on a batch small enough for the profiler
(its events grow with every decode step and layer: the whole-step profile of SmolLM2 in
benchmarks/memory_plan.py, 64 sequences x 64 tokens and the update, passed 14 GiB of them) and
large enough that the KV cache and the decode logits the plan counts are most of what it holds."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from corl.config import validate_config
from corl.plan import Machine, Planner

GIB = 2**30
N_PROMPTS, K, PROMPT, COMPLETION = 2, 4, 24, 16


def _peak_above_start(prof) -> int:
    """The highest running total of live CPU tensors while profiled, above the total when profiling
    began: the allocator's running total also counts what the process held before (the model
    sampled from, or the other parametrization's, until the garbage collector frees it)."""
    from torch._C._profiler import _EventType

    allocations = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        if event.tag == _EventType.Allocation:
            allocations.append(event)
        stack.extend(event.children)
    first = min(allocations, key=lambda e: e.start_time_ns)
    before = first.extra_fields.total_allocated - first.extra_fields.alloc_size
    return max(e.extra_fields.total_allocated for e in allocations) - before


def _agent_plan(name: str, gguf, prompts: int, k: int, prompt: int, completion: int):
    """corl plan's agent of a one-agent run of the GGUF file, at this shape (its config read from the header)."""
    cfg = validate_config({
        "device": "cpu",
        "agents": [{"name": name, "model": str(gguf)}],
        "data": {"train": "unused.jsonl"},
        "cohort": {"label_source": "self", "samples_per_prompt": k, "prompts_per_step": prompts, "max_new_tokens": completion},
        "plan": {"prompt_tokens": prompt},
    })  # fmt: skip
    return Planner(cfg, Machine(1, 64 * GIB, "cpu", "test")).plan(cfg).ranks[0].agents[0]


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_the_plans_update_of_a_real_model_against_the_measured_peak(name, request):
    from transformers import AutoModelForCausalLM

    from corl.config import AgentConfig, GRPOConfig
    from corl.data.rows import PromptTemplate
    from corl.models.gguf import config as gguf_config
    from corl.rollout import Rollout, SamplingParams
    from corl.trainer import Agent

    gguf = request.getfixturevalue(f"{name}_gguf")
    config = gguf_config(str(gguf))  # read from the file's header: no weights converted
    n = N_PROMPTS * K
    torch.manual_seed(0)
    tokenizer = type("Tok", (), {"eos_token_id": 1, "pad_token_id": 0})()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model = AutoModelForCausalLM.from_config(config)
        agent = Agent(AgentConfig(name=name, model="m"), model, tokenizer, PromptTemplate(), "problem", GRPOConfig())
        ids = torch.randint(3, 1000, (n, PROMPT + COMPLETION))
        mask = torch.ones_like(ids)
        mask[::2, :3] = 0  # left padding, as a batch of prompts of different lengths has
        rollout = Rollout(ids, mask, torch.ones(n, COMPLETION, dtype=torch.long), None, [""] * n, PROMPT, K)
        for _ in range(2):
            agent.update(rollout, torch.randn(N_PROMPTS, K), SamplingParams(max_new_tokens=COMPLETION))
    measured = _peak_above_start(prof)
    agent_plan = _agent_plan(name, gguf, N_PROMPTS, K, PROMPT, COMPLETION)
    predicted = sum(item.bytes for item in agent_plan.states) + sum(item.bytes for item in agent_plan.phases["update"])
    print(f"\n{name}: plan {predicted / GIB:.3f} GiB, measured {measured / GIB:.3f} GiB, ratio {predicted / measured:.3f}")
    assert 0.75 < predicted / measured < 1.25, (predicted, measured)


S_PROMPTS, S_K, S_PROMPT, S_COMPLETION = 4, 8, 48, 16


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_the_plans_sampling_of_a_real_model_against_the_measured_peak(name, request):
    """The plan's sample phase (KV cache at full length, one layer's more while it grows, each
    decode step's float32 logits) against what corl's HF engine loop (rollout.compact, the CPU
    default) allocates above the model it samples from: every completion runs to the token limit
    (no EOS id can be drawn), as the plan assumes."""
    from transformers import AutoModelForCausalLM

    from corl.models.gguf import config as gguf_config
    from corl.rollout import SamplingParams
    from corl.rollout.compact import sample_compacting

    gguf = request.getfixturevalue(f"{name}_gguf")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(gguf_config(str(gguf))).eval()
    prompts = torch.randint(3, 1000, (S_PROMPTS, S_PROMPT))
    mask = torch.ones_like(prompts)
    mask[::2, :5] = 0  # left padding
    rows = torch.arange(S_PROMPTS * S_K) // S_K
    params = SamplingParams(max_new_tokens=S_COMPLETION, temperature=1.0)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        tokens, _ = sample_compacting(model, prompts, mask, rows, params, eos_ids=[-1], pad_id=0)
    assert tokens.shape == (S_PROMPTS * S_K, S_COMPLETION)  # every sequence ran to the limit
    measured = _peak_above_start(prof)
    agent_plan = _agent_plan(name, gguf, S_PROMPTS, S_K, S_PROMPT, S_COMPLETION)
    assert agent_plan.sampled_at_once == S_PROMPTS * S_K
    predicted = sum(item.bytes for item in agent_plan.phases["sample"])
    print(
        f"\n{name} sampling: plan {predicted / GIB:.3f} GiB, measured {measured / GIB:.3f} GiB, ratio {predicted / measured:.3f}"
    )
    assert 0.75 < predicted / measured < 1.25, (predicted, measured)
