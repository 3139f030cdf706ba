"""`corl plan` on the real pretrained pair (SmolLM2-135M-Instruct, Gemma-3-270M from their GGUF files):
the plan's update peak against the measured peak of corl's real Agent.update, for each architecture.

Measured as in tests/plan/test_plan.py: the peak of live CPU tensors (torch's profiler, every
allocation of the step), the CPU counterpart of torch.cuda.max_memory_allocated. The model is built
from the file's config (random weights: memory does not depend on their values, and the
profiler sees every one of them allocated); two updates, the second the steady state (gradients and
AdamW moments exist). The sampling phase is left out: the whole-step profile of SmolLM2
(benchmarks/memory_plan.py, 64 sequences x 64 sampled tokens, then the update) grew past 14 GiB of
profiler events without finishing (docs/real-models.md)."""

from __future__ import annotations

import pytest
import torch

from corl.config import validate_config
from corl.plan import Machine, Planner

GIB = 2**30
N_PROMPTS, K, PROMPT, COMPLETION = 2, 4, 24, 16


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_the_plans_update_of_a_real_model_against_the_measured_peak(name, request):
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile
    from transformers import AutoModelForCausalLM

    from corl.config import AgentConfig, GRPOConfig
    from corl.data.rows import PromptTemplate
    from corl.models.gguf import config as gguf_config
    from corl.rollout import Rollout, SamplingParams
    from corl.trainer import Agent

    gguf = request.getfixturevalue(f"{name}_gguf")
    cfg = validate_config({
        "device": "cpu",
        "agents": [{"name": name, "model": str(gguf)}],
        "data": {"train": "unused.jsonl"},
        "cohort": {"label_source": "self", "samples_per_prompt": K, "prompts_per_step": N_PROMPTS, "max_new_tokens": COMPLETION},
        "plan": {"prompt_tokens": PROMPT},
    })  # fmt: skip
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
    allocations = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        if event.tag == _EventType.Allocation:
            allocations.append(event)
        stack.extend(event.children)
    # the allocator's running total counts what the process held before the step (the other
    # parametrization's model, until the garbage collector frees it): the step's own peak is above that
    first = min(allocations, key=lambda e: e.start_time_ns)
    before = first.extra_fields.total_allocated - first.extra_fields.alloc_size
    measured = max(e.extra_fields.total_allocated for e in allocations) - before
    plan = Planner(cfg, Machine(1, 64 * GIB, "cpu", "test")).plan(cfg)
    agent_plan = plan.ranks[0].agents[0]
    predicted = sum(item.bytes for item in agent_plan.states) + sum(item.bytes for item in agent_plan.phases["update"])
    print(f"\n{name}: plan {predicted / GIB:.3f} GiB, measured {measured / GIB:.3f} GiB, ratio {predicted / measured:.3f}")
    assert 0.75 < predicted / measured < 1.25, (predicted, measured)
