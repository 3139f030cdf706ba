"""FSDP2 inside `corl train` under torchrun on CPU (gloo), as on GPUs (NCCL): 2 agents x 2
ranks equal the single-process run step for step, also with LoRA and activation
checkpointing; sharded checkpoints (torch.distributed.checkpoint) resume onto 1 and back
onto 2 ranks per agent; two torchrun launchers with separate run directories (two nodes
without a shared disk) equal the one-node run, also across a node killed and resumed.

`distributed.sampling: replicated` makes every rank of an agent draw the whole batch from
one seed, as a single process does, and train on its share: the runs then see the same
samples, and what is compared is the sharded update itself (FSDP2's reduce-scatter against
one process's backward). A gradient averaged instead of summed over the 2 ranks (the
symptom of pytorch#162338) halves the logged gradient norm of every step, and halves the
SGD step of the one-update test below.

Tolerance (fp32) against the single process: the same samples, so rewards, labels and
agreement are equal exactly; the update's numbers differ only by the order of float sums
(two ranks' partial gradients, then AdamW): metrics within 1e-5 + 1e-4 x value, weights
after 3 steps within 1e-5 (measured 2026-12-02: metrics within 8.3e-7, weights within
1.2e-6; with LoRA + activation checkpointing both were equal exactly). Runs with the same
layout (two nodes against one, resumed against uninterrupted) compute the same sums in
the same order: they are compared exactly.

Cost: every test here starts torchrun worlds of 2-4 processes (4 processes on 2 cores);
the module shares two such runs (and their single-process references) between its tests.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from corl.tracking.metrics import read_metrics
from tests.parallel.test_distributed import raw_config, single_process

pytestmark = pytest.mark.slow

AGENTS = ["agent0", "agent1"]
PARAM_ATOL = 1e-5
METRIC_ATOL, METRIC_RTOL = 1e-5, 1e-4
EXACT = ("reward", "agreement", "label", "answer", "accuracy", "active_sequences", "optimizer_steps", "length")
ENV = {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}  # one thread per rank, as the single-process reference


def corl_train(cwd: Path, config: Path, out: str, nproc: int, *args: str, launcher=None, env=None) -> subprocess.Popen:
    """`torchrun ... -m corl train CONFIG -o OUT ARGS` in `cwd`, as a user types it (not waited for)."""
    rdzv = launcher or ["--standalone"]
    cmd = [sys.executable, "-m", "torch.distributed.run", *rdzv, "--nproc-per-node", str(nproc), "-m", "corl", "train"]
    return subprocess.Popen(
        [*cmd, str(config), "-o", out, *args],
        cwd=cwd,
        env={**os.environ, **ENV, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(proc: subprocess.Popen, timeout: float = 900) -> str:
    output, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, output[-5000:]
    return output


def write_config(folder: Path, raw: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "run.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@dataclass
class Runs:
    raw: dict
    config: Path
    sharded: Path  # 2 agents x 2 ranks, FSDP2, 3 steps, checkpoints after steps 2 and 3
    single: Path  # the same config in one process, a checkpoint after every step
    seconds: float


def fsdp_runs(root: Path, tiny_models, tiny_data, lr: float | None = None, reference_steps: int = 3, **sections) -> Runs:
    raw = raw_config(root, tiny_models, tiny_data, agents=2, **sections)
    if lr is not None:
        raw["agents"] = [{**agent, "lr": lr} for agent in raw["agents"]]
    raw["cohort"]["steps"] = 3
    raw["logging"]["checkpoint_every"] = 2
    raw.setdefault("distributed", {}).update(fsdp=True, sampling="replicated")
    config = write_config(root, raw)
    start = time.monotonic()
    finish(corl_train(root, config, "sharded", 4))
    seconds = time.monotonic() - start
    steps = {**raw["cohort"], "steps": reference_steps}
    reference = {**raw, "cohort": steps, "logging": {**raw["logging"], "checkpoint_every": 1}}
    return Runs(raw, config, root / "sharded", single_process(root, reference, "single"), seconds)


@pytest.fixture(scope="module")
def full(tmp_path_factory, tiny_models, tiny_data) -> Runs:
    return fsdp_runs(tmp_path_factory.mktemp("full"), tiny_models, tiny_data)


@pytest.fixture(scope="module")
def lora(tmp_path_factory, tiny_models, tiny_data) -> Runs:
    pytest.importorskip("peft")
    compute = {"lora": {"r": 4, "alpha": 16}, "gradient_checkpointing": True}
    # the adapters start at zero (B = 0): a larger lr, so that 3 steps move the weights visibly
    # 4 reference steps: the resumed runs go on to step 4
    return fsdp_runs(tmp_path_factory.mktemp("lora"), tiny_models, tiny_data, lr=1e-2, reference_steps=4, compute=compute)


def weights(run: Path, step: int, name: str) -> dict[str, torch.Tensor]:
    return load_file(str(run / "checkpoints" / f"step_{step:06d}" / name / "model.safetensors"))


def compare(reference: Path, run: Path, step: int, exact: bool = False) -> dict[str, float]:
    """Assert that `run`'s train metrics (every step it logged) and its weights after `step`
    steps equal `reference`'s, within the tolerances (or exactly); returns the largest gaps."""
    ours = read_metrics(run, "train")
    theirs = {r["step"]: r for r in read_metrics(reference, "train")}
    assert ours and all(r["step"] in theirs for r in ours), [r["step"] for r in ours]
    worst = {"metric": 0.0, "weight": 0.0}
    for x in ours:
        y = theirs[x["step"]]
        for key, value in x.items():
            if key.startswith("time/") or not isinstance(value, float):
                continue
            other = y[key]
            if math.isnan(value) or math.isnan(other) or exact or any(word in key for word in EXACT):
                assert value == other or (math.isnan(value) and math.isnan(other)), (x["step"], key, value, other)
                continue
            worst["metric"] = max(worst["metric"], abs(value - other))
            assert abs(value - other) <= METRIC_ATOL + METRIC_RTOL * abs(value), (x["step"], key, value, other)
    for name in AGENTS:
        wa, wb = weights(reference, step, name), weights(run, step, name)
        assert wa.keys() == wb.keys()
        gap = max(float((wa[k] - wb[k]).abs().max()) for k in wa)
        worst["weight"] = max(worst["weight"], gap)
        assert gap <= (0.0 if exact else PARAM_ATOL), f"{name}: weights after step {step} differ by {gap:.1e}"
    return worst


def moved(run: Path, step: int, initial: Path) -> float:
    """How far training moved agent0's weights: the comparison must be able to see a wrong step."""
    start, end = load_file(str(initial / "model.safetensors")), weights(run, step, "agent0")
    return max(float((end[k] - start[k]).abs().max()) for k in start)


def test_fsdp2_two_agents_two_ranks_equal_the_single_process_run(full, tiny_models):
    worst = compare(full.single, full.sharded, 3)
    print(f"\nFSDP2 2x2 vs one process: {worst}; torchrun {full.seconds:.0f} s")
    assert moved(full.single, 3, tiny_models["llama-char"]) > 100 * PARAM_ATOL
    assert (full.sharded / "checkpoints" / "step_000003" / "agent0" / "sharded" / ".metadata").is_file()


def test_fsdp2_with_lora_and_activation_checkpointing_equals_the_single_process_run(lora, tiny_models):
    worst = compare(lora.single, lora.sharded, 3)
    print(f"\nFSDP2 2x2 + LoRA + checkpointing vs one process: {worst}; torchrun {lora.seconds:.0f} s")
    assert moved(lora.single, 3, tiny_models["llama-char"]) > 100 * PARAM_ATOL


def resumable_copy(run: Path, to: Path, step: int) -> Path:
    """A copy of `run` whose newest checkpoint is `step` (as if it had stopped there)."""
    shutil.copytree(run, to)
    for later in (to / "checkpoints").glob("step_*"):
        if int(later.name.removeprefix("step_")) > step:
            shutil.rmtree(later)
    (to / "checkpoints" / "latest").write_text(f"step_{step:06d}")
    return to


def test_sharded_checkpoints_resume_onto_one_and_back_onto_two_ranks_per_agent(lora):
    """The 2-rank LoRA run's step-2 checkpoint resumes on 1 rank per agent (DCP reads both
    ranks' shards into one) for steps 2-3; that run's step-3 checkpoint resumes on 2 ranks
    per agent for step 4. Every resumed step equals the single-process run's."""
    root = lora.sharded.parent
    one = resumable_copy(lora.sharded, root / "one", 2)
    # a step between holds the shards alone (no whole-model gather); the final step also the model folder
    assert not (one / "checkpoints" / "step_000002" / "agent0" / "model.safetensors").exists()
    assert (lora.sharded / "checkpoints" / "step_000003" / "agent0" / "model.safetensors").is_file()
    finish(
        corl_train(
            root, lora.config, "one", 2, "--resume", "one", "--set", "cohort.steps=4", "--set", "logging.checkpoint_every=1"
        )
    )
    assert [r["step"] for r in read_metrics(one, "train")] == [1, 2, 3, 4]
    compare(lora.single, one, 4)
    two = resumable_copy(one, root / "two", 3)
    finish(corl_train(root, lora.config, "two", 4, "--resume", "two", "--set", "cohort.steps=4"))
    compare(lora.single, two, 4)
    assert (two / "checkpoints" / "step_000004" / "agent1" / "sharded" / "__1_0.distcp").is_file()


# -- two nodes, no shared disk -------------------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def kill_node(launcher: subprocess.Popen) -> None:
    """SIGKILL a node: its torchrun launcher and every worker it started (torchrun starts each
    in its own session, so killing the launcher alone would leave them running)."""
    children = Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children").read_text().split()
    launcher.kill()
    for pid in map(int, children):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    launcher.communicate()


def two_nodes(nodes: list[Path], config_raw: dict, port: int, env: dict | None = None) -> list[subprocess.Popen]:
    """One torchrun launcher per node folder, meeting at 127.0.0.1:`port` (c10d rendezvous)."""
    rdzv = ["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "corl-test"]
    launchers = []
    for node in nodes:
        config = write_config(node, config_raw)  # each node its own copy: nothing on a shared disk
        launchers.append(corl_train(node, config, "run", 2, launcher=rdzv, env=env))
        time.sleep(1.0)  # the first launcher hosts the rendezvous store
    return launchers


def test_two_nodes_without_a_shared_disk_equal_one_node_also_after_one_is_killed(full, tmp_path):
    """Two torchrun launchers (--nnodes 2, c10d rendezvous on 127.0.0.1), each in its own
    folder: agent0's two ranks on one node, agent1's on the other. Each node commits its own
    agents' checkpoint parts (and a loop state); metrics.jsonl is the main rank's node's.
    agent1's node is killed (launcher and workers, SIGKILL) after step 2's checkpoint, while
    a rank of it hangs before step 3 (test hook); the other node's ranks give up after
    distributed.timeout_s. Both launchers start again (resume: auto): the run continues from
    the step both nodes hold and ends exactly where the one-node run ended."""
    raw = {**full.raw, "resume": "auto", "logging": {**full.raw["logging"], "checkpoint_every": 1}}
    raw["distributed"] = {**raw["distributed"], "timeout_s": 20}
    nodes = [tmp_path / "node-a", tmp_path / "node-b"]
    port = free_port()
    launchers = two_nodes(nodes, raw, port, env={"CORL_TEST_FAULT": "agent1:hang:2"})
    deadline = time.monotonic() + 900
    while not any((node / "run" / "checkpoints" / "step_000002" / "agent1").is_dir() for node in nodes):
        assert time.monotonic() < deadline and all(p.poll() is None for p in launchers), "the first attempt ended early"
        time.sleep(0.2)
    agent1_node = next(i for i, node in enumerate(nodes) if (node / "run" / "checkpoints" / "step_000002" / "agent1").is_dir())
    main = 1 - agent1_node
    kill_node(launchers[agent1_node])
    survivor = launchers[main].communicate(timeout=600)[0]
    assert launchers[main].returncode != 0, survivor[-3000:]
    assert (nodes[main] / "run" / "metrics.jsonl").is_file() and not (nodes[agent1_node] / "run" / "metrics.jsonl").exists()
    for node, agent in ((nodes[main], "agent0"), (nodes[agent1_node], "agent1")):
        held = node / "run" / "checkpoints" / "step_000002"
        assert (held / "state.pt").is_file() and (held / agent / "sharded" / ".metadata").is_file(), sorted(held.rglob("*"))
        other = "agent1" if agent == "agent0" else "agent0"
        assert not (held / other).exists()  # each node holds only what it owns

    resumed = two_nodes(nodes, raw, free_port())
    for launcher in resumed:
        finish(launcher)
    main_run, agent1_run = nodes[main] / "run", nodes[agent1_node] / "run"
    assert [r["step"] for r in read_metrics(main_run, "train")] == [1, 2, 3]
    ours = {r["step"]: r for r in read_metrics(main_run, "train")}
    for r in read_metrics(full.sharded, "train"):
        same = {k: v for k, v in r.items() if not k.startswith("time/")}
        assert same == {k: v for k, v in ours[r["step"]].items() if not k.startswith("time/")}, r["step"]
    for run, name in ((main_run, "agent0"), (agent1_run, "agent1")):
        a, b = weights(full.sharded, 3, name), weights(run, 3, name)
        assert all(torch.equal(a[k], b[k]) for k in a), name


# -- one update, real gloo: the sharded step against the whole-batch step ------------------------------------

UPDATE_WORKER = """
import json, sys, torch, torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from corl.trainer import Agent, logprobs
from corl.config import AgentConfig, ComputeConfig, GRPOConfig
from corl.data.rows import Problem, PromptTemplate
from corl.models import load_policy
from corl.parallel import DataParallel, Heartbeat, plan_layout
from corl.rollout import SamplingParams
from corl.rollout.vllm_weights import iter_full_weights

path, out = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
layout = plan_layout(["a"], world)
heartbeat = Heartbeat(dist.distributed_c10d._get_default_store(), rank, 120, layout)
mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
params = SamplingParams(temperature=1.0, max_new_tokens=10)
problems = [Problem(id=str(i), texts={"problem": p}) for i, p in enumerate(["3+4=?", "12*3-5=?", "7=?", "9-2=?"])]
rewards = torch.tensor([[1.0, 0, 0, 1], [0, 1, 1, 1], [0, 0, 1, 0], [1, 0, 0, 0]])
mine = list(range(rank, len(problems), world))  # Placement.prompt_positions
# One position of logits a chunk: the chunked head (logprobs.completion_hidden) splits every
# minibatch, here and in the single process alike, and its chunks must add up to the same step.
logprobs.LOGIT_CHUNK_ELEMENTS = 1

def agent(compute, dp=None, beta=0.0):
    torch.manual_seed(0)  # LoRA's initial adapters: the same in every agent built here
    model, tok = load_policy(path)
    a = Agent(AgentConfig(name="a", model=path), model, tok, PromptTemplate("{problem}\\\\n", ""), "problem",
              GRPOConfig(max_grad_norm=None, minibatch_size=3, beta=beta), dp=dp, compute=compute)
    a.optimizer = torch.optim.SGD([p for p in a.model.parameters() if p.requires_grad], lr=1.0)  # the step is -gradient
    return a

def weights(model):
    return torch.cat([t.flatten().float() for _, t in iter_full_weights(model)])

sampler = agent(ComputeConfig())
torch.manual_seed(3)
rollout = sampler.sample(problems, 4, params)  # the same whole batch on every rank, for every check

def dp_group():
    return DataParallel(mesh.get_group(), range(world), rank, heartbeat, mesh=mesh)

def step(compute, sharded):
    a = agent(compute, dp_group() if sharded else None)
    widest = [0]  # the most positions the output head was handed at once (forward and recomputation)
    a.model.get_output_embeddings().register_forward_hook(lambda m, i, o: widest.__setitem__(0, max(widest[0], o.shape[-2])))
    before = weights(a.model)
    if sharded:
        stats = a.update(rollout.select_prompts(mine), rewards[mine], params)
    else:
        stats = a.update(rollout, rewards, params)
    return weights(a.model) - before, stats, widest[0]

results = {}
for label, compute in [("fp32", ComputeConfig()),
                       ("lora+checkpointing", ComputeConfig(lora={"r": 4, "alpha": 16}, gradient_checkpointing=True))]:
    whole, expected, _ = step(compute, sharded=False)
    delta, stats, widest = step(compute, sharded=True)
    results[label] = {"error": float((delta - whole).abs().max()), "size": float(whole.abs().max()),
                      "grad_norm": [stats.grad_norm, expected.grad_norm], "loss": [stats.loss, expected.loss],
                      "head_positions": widest}
bf16, _, _ = step(ComputeConfig(bf16=True), sharded=True)
fp32, _, _ = step(ComputeConfig(), sharded=True)
results["bf16"] = {"error": float((bf16 - fp32).norm() / fp32.norm()), "size": float(fp32.abs().max())}
# The KL reference under FSDP2 + bf16: sharded, in bf16, on the policy's path (KL 0 before any step).
a = agent(ComputeConfig(bf16=True), dp_group(), beta=0.04)
stats = a.update(rollout.select_prompts(mine), rewards[mine], params)
ref = list(a.reference.parameters())
results["reference"] = {"kl": stats.kl, "steps": stats.optimizer_steps, "sharded": all(hasattr(p, "to_local") for p in ref),
                        "held": sum(p.to_local().numel() * p.element_size() for p in ref if hasattr(p, "to_local")),
                        "whole_fp32": sum(4 * p.numel() for p in ref)}
with open(f"{out}/rank{rank}.json", "w") as f:
    json.dump(results, f)
dist.destroy_process_group()
"""


def test_one_sharded_update_equals_the_whole_batch_update_and_bf16_stays_near_fp32(tmp_path, tiny_models):
    """Two gloo ranks, each with half the prompts of one rollout, take one FSDP2 GRPO step with
    SGD (lr 1: the step is minus the gradient, so a gradient averaged instead of summed
    shows as a step half as long); it must equal one process's step on the whole batch. The
    same with LoRA + activation checkpointing. Both go through the chunked head (one position
    of logits at a time, checkpointed): under FSDP2 the output head is never handed more than
    one position, so no [n, C, V] logits exist. bf16 (FSDP2's mixed precision: bf16 compute,
    fp32 reduce and master weights) against fp32 on the same rollout: relative error of the
    step (norm) below 5e-2: bf16 keeps 8 significant bits (relative rounding 2^-9, about
    2e-3 per operation), and the error grows through the forward and backward of each layer.
    The KL reference (grpo.beta > 0) under FSDP2 + bf16 is sharded over the 2 ranks in bf16
    (a quarter of a whole float32 copy, up to the shards' padding) and computes as the policy
    does: its KL before any step is exactly 0 (a whole float32 copy under autocast gave 1e-7)."""
    pytest.importorskip("peft")
    script = tmp_path / "worker.py"
    script.write_text(UPDATE_WORKER)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script)]
    proc = subprocess.run(
        [*cmd, str(tiny_models["llama-char"]), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    for rank in range(2):
        results = json.loads((tmp_path / f"rank{rank}.json").read_text())
        print(f"\nrank {rank}: {results}")
        for label in ("fp32", "lora+checkpointing"):
            r = results[label]
            assert r["size"] > 1e-3, r  # a step was taken
            assert r["error"] <= 1e-6 * max(1.0, r["size"]), (label, r)
            assert r["grad_norm"][0] == pytest.approx(r["grad_norm"][1], rel=1e-5), (label, r)
            assert r["loss"][0] == pytest.approx(r["loss"][1], rel=1e-4, abs=1e-7), (label, r)
            assert r["head_positions"] == 1, (label, r)  # the chunked head ran under FSDP2
        assert results["bf16"]["error"] < 5e-2, results["bf16"]
        ref = results["reference"]
        assert ref["steps"] == 1 and ref["kl"] == 0.0, ref
        assert ref["sharded"] and ref["held"] <= 1.1 * ref["whole_fp32"] / 4, ref
