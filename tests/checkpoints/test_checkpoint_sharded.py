"""Which ranks commit checkpoints where, and which checkpoint a multi-node run resumes from,
when nodes do not share a disk (ranks as threads of this process, each with its own run
directory; the whole runs are in tests/parallel/test_distributed_fsdp.py)."""

from __future__ import annotations

import threading

import torch

from corl.checkpoints.checkpoint import CheckpointError
from corl.checkpoints.sharded import agreed_checkpoint, disks


class ThreadExchange:
    """`all_gather` and `barrier` between threads standing in for ranks (corl.parallel.WorldExchange)."""

    def __init__(self, world: int):
        self.slots: list = [None] * world
        self.gate = threading.Barrier(world, timeout=30)

    def rank(self, r: int) -> RankExchange:
        return RankExchange(self, r)


class RankExchange:
    def __init__(self, shared: ThreadExchange, rank: int):
        self.shared, self.rank = shared, rank

    def all_gather(self, obj) -> list:
        self.shared.slots[self.rank] = obj
        self.shared.gate.wait()
        out = list(self.shared.slots)
        self.shared.gate.wait()
        return out

    def barrier(self) -> None:
        self.shared.gate.wait()


def on_every_rank(run_dirs: list, fn) -> list:
    """fn(run_dir, rank, exchange) on one thread per rank; results (or exceptions) by rank."""
    shared = ThreadExchange(len(run_dirs))
    out: list = [None] * len(run_dirs)

    def run(r: int) -> None:
        try:
            out[r] = fn(run_dirs[r], r, shared.rank(r))
        except BaseException as err:  # surfaced to the test, not lost in the thread
            out[r] = err

    threads = [threading.Thread(target=run, args=(r,)) for r in range(len(run_dirs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_ranks_that_see_one_run_directory_name_its_disk_by_their_lowest_rank(tmp_path):
    node_a, node_b = tmp_path / "a" / "run", tmp_path / "b" / "run"
    assert on_every_rank([node_a, node_a, node_b, node_b], disks) == [[0, 0, 2, 2]] * 4
    assert on_every_rank([node_a] * 3, disks) == [[0, 0, 0]] * 3  # a shared disk: rank 0 commits alone
    assert not (node_a / ".corl-disks").exists() and not (node_b / ".corl-disks").exists()  # the probes are gone


def resume_point(run, rank: int, exchange):
    return agreed_checkpoint(run, exchange)


def write_checkpoint(run, step: int, complete: bool = True) -> None:
    folder = run / "checkpoints" / (f"step_{step:06d}" if complete else f".tmp_step_{step:06d}")
    folder.mkdir(parents=True)
    torch.save({"step": step}, folder / "state.pt")
    if complete:
        (run / "checkpoints" / "latest").write_text(folder.name)


def test_a_resume_takes_the_newest_checkpoint_every_node_holds(tmp_path):
    """Node b was killed after the others committed step 2 but before it did: everyone
    resumes from step 1, each from its own disk."""
    node_a, node_b = tmp_path / "a", tmp_path / "b"
    for step in (1, 2):
        write_checkpoint(node_a, step)
    write_checkpoint(node_b, 1)
    write_checkpoint(node_b, 2, complete=False)
    got = on_every_rank([node_a, node_a, node_b, node_b], resume_point)
    assert got == [node_a / "checkpoints" / "step_000001"] * 2 + [node_b / "checkpoints" / "step_000001"] * 2
    write_checkpoint(node_b, 2)  # both committed: the latest, as on one disk
    assert on_every_rank([node_a, node_b], resume_point) == [
        node_a / "checkpoints" / "step_000002",
        node_b / "checkpoints" / "step_000002",
    ]


def test_no_checkpoint_common_to_every_node_fails_on_every_rank(tmp_path):
    node_a, node_b = tmp_path / "a", tmp_path / "b"
    write_checkpoint(node_a, 1)
    got = on_every_rank([node_a, node_b], resume_point)
    for err in got:
        assert isinstance(err, CheckpointError), got
        assert "no checkpoint step is complete on every node" in str(err) and "rank 1: none" in str(err)


# -- a step between: shards only, and `corl export` writes its model folder ----------------------------------

SAVE_WORKER = """
import faulthandler, gc, os, sys, torch, torch.distributed as dist
from pathlib import Path
from torch.distributed.device_mesh import init_device_mesh
from corl.trainer import Agent
from corl.config import AgentConfig, ComputeConfig, GRPOConfig
from corl.data.rows import Problem, PromptTemplate
from corl.models import load_policy
from corl.parallel import DataParallel, Heartbeat, plan_layout
from corl.rollout import SamplingParams

faulthandler.enable(all_threads=True)
path, out = sys.argv[1], Path(sys.argv[2])


def save(rank, world, heartbeat):
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
    torch.manual_seed(0)
    model, tok = load_policy(path)
    dp = DataParallel(mesh.get_group(), range(world), rank, heartbeat, mesh=mesh)
    agent = Agent(AgentConfig(name="a", model=path), model, tok, PromptTemplate("{problem}\\\\n", ""), "problem",
                  GRPOConfig(max_grad_norm=None), dp=dp, compute=ComputeConfig(lora={"r": 4, "alpha": 16}))
    agent.optimizer = torch.optim.SGD([p for p in agent.model.parameters() if p.requires_grad], lr=1.0)
    problems = [Problem(id=str(i), texts={"problem": p}) for i, p in enumerate(["3+4=?", "12*3-5=?"])]
    torch.manual_seed(3)
    rollout = agent.sample(problems[rank::world], 4, SamplingParams(max_new_tokens=6))
    stats = agent.update(rollout, torch.tensor([[1.0, 0.0, 0.0, 1.0]]), SamplingParams(max_new_tokens=6))
    assert stats.optimizer_steps == 1
    agent.save(out / "run" / "checkpoints" / "step_000001" / "a", gathered=False)
    agent.save(out / "gathered" / "a")


dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
heartbeat = Heartbeat(dist.distributed_c10d._get_default_store(), rank, 120, plan_layout(["a"], world))
save(rank, world, heartbeat)
# Ends as corl.launch.run ends a run, without the interpreter's teardown (tests/rollout/test_vllm_weights.py, WORKER)
gc.collect()
dist.barrier()
heartbeat.stop_beating()
dist.destroy_process_group()
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
"""


def test_a_sharded_step_is_exported_into_the_model_folder_the_gathered_save_writes(tmp_path, tiny_models):
    """Two gloo ranks, FSDP2 + LoRA, one SGD step: `gathered=False` writes the shards and the
    tokenizer, no model (no whole-model gather); `corl eval RUN --step 1` says to export it;
    `corl export RUN --step 1`, one process, then writes the model folder (LoRA merged) and the
    unmerged adapters exactly as the gathered save of the same weights does."""
    import os
    import subprocess
    import sys

    import pytest
    import yaml
    from safetensors.torch import load_file

    from corl.evaluation.run_targets import TargetError, resolve_targets

    pytest.importorskip("peft")
    model = str(tiny_models["llama-char"])
    script = tmp_path / "worker.py"
    script.write_text(SAVE_WORKER)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        str(script),
        model,
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run, gathered = tmp_path / "run", tmp_path / "gathered" / "a"
    step = run / "checkpoints" / "step_000001" / "a"
    assert (step / "sharded" / ".metadata").is_file() and (step / "tokenizer_config.json").is_file()
    assert not (step / "config.json").exists() and not (step / "model.safetensors").exists()
    raw = {
        "agents": [{"name": "a", "model": model}],
        "data": {"train": "unused.jsonl"},
        "cohort": {"label_source": "self"},
        "compute": {"lora": {"r": 4, "alpha": 16}},
    }
    (run / "config.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(TargetError, match=f"corl export {run} --step 1"):
        resolve_targets([str(run)], "1")
    out = subprocess.run(
        [sys.executable, "-m", "corl", "export", str(run), "--step", "1"], capture_output=True, text=True, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    for name in ("model.safetensors", "adapter/adapter_model.safetensors"):
        ours, theirs = load_file(str(step / name)), load_file(str(gathered / name))
        assert ours.keys() == theirs.keys() and ours
        for key in theirs:
            assert torch.equal(ours[key], theirs[key]), (name, key)
    assert [t.source for t in resolve_targets([str(run)], "1")] == [str(step)]  # corl eval RUN --step 1 finds it now
    bad = subprocess.run(
        [sys.executable, "-m", "corl", "export", str(run), "--step", "7"], capture_output=True, text=True, env=env
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "no checkpoint after step 7" in bad.stderr
