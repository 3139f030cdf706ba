"""Co-RL under torchrun on CPU (gloo): the same results as one process, data parallelism
whose step equals the whole-batch step, and a stuck rank that fails the run by name.

The multi-process tests run `python -m torch.distributed.run --standalone` (a free port on
localhost) in a subprocess, as a user would. torchrun gives each rank one intra-op thread,
so the single-process reference runs with one thread too: then every number is identical.
"""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from corl.config import AgentConfig, ComputeConfig, ConfigError, GRPOConfig, validate_config
from corl.data.rows import Problem, PromptTemplate
from corl.launch.run import launch
from corl.models import load_policy, prepare_model
from corl.parallel import DataParallel, plan_layout
from corl.rollout import Rollout, SamplingParams
from corl.tracking.metrics import read_metrics
from corl.trainer import Agent, CohortTrainer
from tests.helpers import tiny_config

# -- where agents live ------------------------------------------------------------------------------


def test_layout_one_group_of_ranks_per_agent():
    layout = plan_layout(["a", "b"], 4)  # mesh ("agent", "dp") = (2, 2)
    assert layout.hosts == ((0,), (0,), (1,), (1,)) and layout.dp_size == 2
    assert layout.dp_ranks(3) == (2, 3)
    assert [layout.placement(r).dp_rank for r in range(4)] == [0, 1, 0, 1]
    assert layout.placement(0).is_main and not layout.placement(2).is_main
    assert layout.describe([3]) == "rank 3 (b dp 1)"
    assert plan_layout(["a", "b"], 2).hosts == ((0,), (1,))


def test_layout_several_agents_per_process_and_uneven_worlds():
    names = ["a", "b", "c"]
    assert plan_layout(names, 2, "contiguous").hosts == ((0, 1), (2,))
    assert plan_layout(names, 2, "round_robin").hosts == ((0, 2), (1,))
    assert plan_layout(names, 2).placement(0).dp_size == 1
    assert plan_layout(names, 2).describe([0, 1]) == "ranks 0, 1 (a, b; c)"
    with pytest.raises(ConfigError, match="multiple of 3"):
        plan_layout(names, 4)


def test_fsdp_without_torchrun_and_ema_with_lora_fail_clearly(tmp_path):
    raw = {"device": "cpu", "agents": [{"name": "a", "model": "m"}, {"name": "b", "model": "m"}], "data": {"train": "x.jsonl"}}
    with pytest.raises(ConfigError, match="needs torchrun"):
        launch(validate_config({**raw, "distributed": {"fsdp": True}}), tmp_path)
    with pytest.raises(ConfigError, match="'ema' does not work with compute.lora"):
        validate_config({**raw, "cohort": {"label_source": "ema"}, "compute": {"lora": {"r": 4}}})


def test_lora_without_peft_says_how_to_install_it():
    try:
        import peft  # noqa: F401
    except ModuleNotFoundError:
        with pytest.raises(ModuleNotFoundError, match="pip install peft"):
            prepare_model(torch.nn.Linear(2, 2), ComputeConfig(lora={"r": 4}), DataParallel())
    else:
        pytest.skip("peft is installed")


# -- data parallelism: the step of the whole batch -----------------------------------------------------


class ThreadGroup:
    """Ranks as threads of this process; all-reduce through shared slots (stands in for gloo)."""

    def __init__(self, size: int):
        self.size = size
        self.slots: list = [None] * size
        self.barrier = threading.Barrier(size, timeout=120)


class ThreadDataParallel(DataParallel):
    def __init__(self, group: ThreadGroup, rank: int):
        super().__init__(ranks=range(group.size), rank=rank)
        self.group_ = group

    def _all_reduce(self, tensor, op, what):
        self.group_.slots[self.rank] = tensor.clone()
        self.group_.barrier.wait()
        stacked = torch.stack(self.group_.slots)
        result = stacked.sum(0) if op == torch.distributed.ReduceOp.SUM else stacked.max(0).values
        self.group_.barrier.wait()
        return tensor.copy_(result)


PROMPTS = ["3+4=?", "12*3-5=?", "7=?", "9-2=?"]


def make_agent(path, dp=None, **grpo):
    model, tok = load_policy(str(path))
    agent = Agent(
        AgentConfig(name="a", model=str(path)),
        model,
        tok,
        PromptTemplate("{problem}\n", ""),
        "problem",
        GRPOConfig(max_grad_norm=None, minibatch_size=3, **grpo),
        dp=dp,
    )
    agent.optimizer = torch.optim.SGD(agent.model.parameters(), lr=1.0)  # the step is minus the gradient
    return agent


def shard(rollout: Rollout, prompts: list[int]) -> Rollout:
    """The rows of `prompts`, with the completion width a rank sampling only them would have."""
    k = rollout.num_samples
    rows = torch.cat([torch.arange(p * k, (p + 1) * k) for p in prompts])
    width = int(rollout.completion_mask[rows].sum(1).max())
    end = rollout.prompt_length + width
    return Rollout(
        rollout.input_ids[rows, :end],
        rollout.attention_mask[rows, :end],
        rollout.completion_mask[rows, :width],
        rollout.sampling_logprobs[rows, :width],
        [rollout.texts[i] for i in rows],
        rollout.prompt_length,
        k,
        rollout.eos_ids,
    )


def params_of(model):
    return torch.cat([p.detach().flatten().clone() for p in model.parameters()])


@pytest.mark.parametrize(
    "mode, idle_rank",
    [("grpo", True), ("bnpo", True), ("dr_grpo", False)],  # bnpo: token totals; dr_grpo: the widest padding
    ids=["grpo-rank1-no-signal", "bnpo-rank1-no-signal", "dr_grpo-both-active"],
)
def test_data_parallel_step_equals_the_whole_batch_step(tiny_models, mode, idle_rank):
    """Two ranks with two prompts each take the step one process takes with all four: losses
    scaled by the whole batch's sizes, gradients summed. A rank whose prompts carry no signal
    (all rewards equal) still joins every collective: no deadlock, the same step."""
    whole = make_agent(tiny_models["llama-char"], loss_aggregation=mode)
    torch.manual_seed(3)
    rollout = whole.sample(
        [Problem(id=str(i), texts={"problem": p}) for i, p in enumerate(PROMPTS)],
        4,
        SamplingParams(temperature=1.0, max_new_tokens=10),
    )
    rewards = torch.tensor([[1.0, 0, 0, 1], [0, 1, 1, 1], [0, 0, 1, 0], [1, 0, 0, 0]])
    if idle_rank:
        rewards[1::2] = 1.0  # the prompts of rank 1 (strided: 1 and 3) carry no signal
    before = params_of(whole.model)
    expected = whole.update(rollout, rewards, SamplingParams(temperature=1.0, max_new_tokens=10))

    group = ThreadGroup(2)
    ranks = [make_agent(tiny_models["llama-char"], ThreadDataParallel(group, r), loss_aggregation=mode) for r in range(2)]
    results: dict = {}

    def run(r: int) -> None:
        try:
            positions = list(range(r, len(PROMPTS), 2))  # Placement.prompt_positions
            results[r] = ranks[r].update(
                shard(rollout, positions), rewards[positions], SamplingParams(temperature=1.0, max_new_tokens=10)
            )
        except BaseException as err:  # surfaced below, not lost in the thread
            results[r] = err
            group.barrier.abort()

    threads = [threading.Thread(target=run, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in range(2):
        assert not isinstance(results[r], BaseException), results[r]
        assert results[r].active_sequences == expected.active_sequences
        assert results[r].optimizer_steps == expected.optimizer_steps == 1
        assert results[r].loss == pytest.approx(expected.loss, rel=1e-4, abs=1e-7)
        assert results[r].grad_norm == pytest.approx(expected.grad_norm, rel=1e-4)
    assert torch.equal(params_of(ranks[0].model), params_of(ranks[1].model))  # replicas stay identical
    step = params_of(ranks[0].model) - before
    assert torch.allclose(step, params_of(whole.model) - before, atol=1e-5, rtol=1e-3)
    assert step.abs().max() > 0


# -- real torchrun worlds ----------------------------------------------------------------------------------


def torchrun(tmp_path: Path, raw: dict, run: str, nproc: int = 2, env: dict | None = None, timeout: float = 300):
    config = tmp_path / f"{run}.yaml"
    config.write_text(yaml.safe_dump(raw))
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(nproc),
        "-m",
        "corl",
        "train",
        str(config),
        "-o",
        str(tmp_path / run),
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=timeout)
    return proc, time.monotonic() - start


def single_process(tmp_path: Path, raw: dict, run: str) -> Path:
    """The reference: one process, every agent, one intra-op thread (as each torchrun rank)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        CohortTrainer(validate_config(raw), tmp_path / run).train()
    finally:
        torch.set_num_threads(threads)
    return tmp_path / run


def assert_same_run(a: Path, b: Path, names: list[str]) -> None:
    ra, rb = read_metrics(a), read_metrics(b)
    assert [(r["step"], r["kind"]) for r in ra] == [(r["step"], r["kind"]) for r in rb]
    for x, y in zip(ra, rb):
        x = {k: v for k, v in x.items() if not k.startswith("time/")}
        y = {k: v for k, v in y.items() if not k.startswith("time/")}
        assert x == y, {k: (x.get(k), y.get(k)) for k in x.keys() | y.keys() if x.get(k) != y.get(k)}
    final = sorted((a / "checkpoints").glob("step_*"))[-1].name
    for name in names:
        wa = load_file(str(a / "checkpoints" / final / name / "model.safetensors"))
        wb = load_file(str(b / "checkpoints" / final / name / "model.safetensors"))
        assert all(torch.equal(wa[k], wb[k]) for k in wa), f"{name}: weights differ"


def raw_config(tmp_path, tiny_models, tiny_data, agents: int, **sections) -> dict:
    raw = tiny_config(tmp_path, tiny_models, tiny_data, agents=agents, **sections)
    raw["cohort"]["steps"] = 2
    raw["logging"]["tensorboard"] = False
    return raw


@pytest.mark.slow
def test_two_processes_one_agent_each_match_the_single_process_run(tmp_path, tiny_models, tiny_data):
    raw = raw_config(tmp_path, tiny_models, tiny_data, agents=2)
    proc, _ = torchrun(tmp_path, raw, "world")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (tmp_path / "world" / "failure.json").exists()
    assert_same_run(single_process(tmp_path, raw, "single"), tmp_path / "world", ["agent0", "agent1"])


@pytest.mark.slow
def test_three_agents_on_two_processes_match_the_single_process_run(tmp_path, tiny_models, tiny_data):
    raw = raw_config(tmp_path, tiny_models, tiny_data, agents=3, distributed={"placement": "round_robin"})  # 0, 2 | 1
    proc, _ = torchrun(tmp_path, raw, "world")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_same_run(single_process(tmp_path, raw, "single"), tmp_path / "world", ["agent0", "agent1", "agent2"])


@pytest.mark.slow
def test_one_agent_data_parallel_over_two_ranks(tmp_path, tiny_models, tiny_data):
    """TTRL with one agent on two ranks: each samples half the prompts; gradients are summed
    over gloo; the replicas stay identical (checked at the checkpoint) and the metrics
    describe the whole batch."""
    raw = raw_config(tmp_path, tiny_models, tiny_data, agents=1, cohort={"label_source": "self"})
    proc, _ = torchrun(tmp_path, raw, "world")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = read_metrics(tmp_path / "world", "train")
    assert [r["step"] for r in records] == [1, 2]
    k, batch = raw["cohort"]["samples_per_prompt"], raw["cohort"]["prompts_per_step"]
    for r in records:
        assert r["agent0/active_sequences"] <= k * batch  # counted over both ranks' shards
        assert r["agent0/optimizer_steps"] == (1 if r["agent0/active_sequences"] else 0)
    assert sum(r["agent0/optimizer_steps"] for r in records) >= 1
    assert 0 <= read_metrics(tmp_path / "world", "val")[-1]["agent0/val_accuracy"] <= 1
    weights = load_file(str(tmp_path / "world" / "checkpoints" / "step_000002" / "agent0" / "model.safetensors"))
    initial = load_file(str(Path(raw["agents"][0]["model"]) / "model.safetensors"))
    assert any(not torch.equal(weights[key], initial[key]) for key in weights)


@pytest.mark.slow
def test_a_stuck_rank_fails_the_run_by_name_within_the_timeout(tmp_path, tiny_models, tiny_data):
    """agent1's rank hangs after step 1 (test-only CORL_TEST_FAULT hook); rank 0 waits
    distributed.timeout_s at the exchange, names the peer, writes failure.json, exits non-zero."""
    timeout_s = 10
    raw = raw_config(tmp_path, tiny_models, tiny_data, agents=2, distributed={"timeout_s": timeout_s})
    raw["cohort"]["steps"] = 3
    # a hang would end in torchrun()'s own subprocess timeout; the message says the distributed timeout fired
    proc, _ = torchrun(tmp_path, raw, "world", env={"CORL_TEST_FAULT": "agent1:hang:1"}, timeout=240)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert f"rank 1 (agent1) did not answer within {timeout_s} s" in output
    failure = json.loads((tmp_path / "world" / "failure.json").read_text())
    assert failure["rank"] == 0 and failure["missing"] == [{"rank": 1, "agents": ["agent1"]}]
    assert "agent1" in failure["error"] and failure["where"] == "step 2"  # the step rank 0 waited in
    assert [r["step"] for r in read_metrics(tmp_path / "world", "train")] == [1]


@pytest.mark.slow
def test_a_killed_rank_is_named_by_the_survivor(tmp_path, tiny_models, tiny_data):
    """agent1's rank is SIGKILLed before step 1 (it writes nothing); rank 0 names it in
    failure.json by its stopped heartbeat."""
    raw = raw_config(tmp_path, tiny_models, tiny_data, agents=2)
    raw["cohort"]["steps"] = 3
    proc, _ = torchrun(tmp_path, raw, "world", env={"CORL_TEST_FAULT": "agent1:kill:1"}, timeout=240)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    failure = json.loads((tmp_path / "world" / "failure.json").read_text())
    assert failure["rank"] == 0, failure
    assert failure["missing"] == [{"rank": 1, "agents": ["agent1"]}], failure
    # which words depend on where the survivor was when rank 1 died (inside a collective:
    # "stopped answering"; waiting at a meeting: "while waiting for"); either way it is named
    assert "rank 1 (agent1)" in failure["error"], failure


@pytest.mark.slow
def test_votes_per_prompt_and_a_frozen_peer_on_two_processes_match_the_single_process_run(tmp_path, tiny_models, tiny_data):
    """The answers table gathered from two processes holds every agent's V = 6 samples a prompt,
    each agent trains on its first K = 4 (agent1, frozen, on none): as the single-process run."""
    raw = raw_config(tmp_path, tiny_models, tiny_data, agents=2, cohort={"votes_per_prompt": 6})
    raw["agents"][1]["train"] = False
    proc, _ = torchrun(tmp_path, raw, "world")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_same_run(single_process(tmp_path, raw, "single"), tmp_path / "world", ["agent0", "agent1"])
    assert all(r["agent1/frozen"] == 1.0 for r in read_metrics(tmp_path / "world", "train"))


@pytest.mark.slow
def test_votes_per_prompt_with_one_agent_data_parallel_over_two_ranks(tmp_path, tiny_models, tiny_data):
    """Each rank samples V = 6 of its half of the prompts and trains on the first K = 4 of each."""
    raw = raw_config(tmp_path, tiny_models, tiny_data, agents=1, cohort={"label_source": "self", "votes_per_prompt": 6})
    proc, _ = torchrun(tmp_path, raw, "world")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    k, batch = raw["cohort"]["samples_per_prompt"], raw["cohort"]["prompts_per_step"]
    records = read_metrics(tmp_path / "world", "train")
    assert [r["step"] for r in records] == [1, 2]
    assert all(r["agent0/active_sequences"] <= k * batch for r in records)  # never one of the 2 untrained a prompt
    assert sum(r["agent0/optimizer_steps"] for r in records) >= 1
