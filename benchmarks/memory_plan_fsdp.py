"""The memory plan against measurement under FSDP2: benchmarks/memory_plan.py's method, 2 gloo ranks.

Usage:
    python benchmarks/memory_plan_fsdp.py                        # every shape (torchrun, 2 ranks each)
    python benchmarks/memory_plan_fsdp.py --shapes llama-fsdp-gc

Each shape starts `torchrun --nproc-per-node 2` on this file: both ranks build one agent with
corl's own loader and preparation (corl.trainer.build_agent with a DataParallel over a 1-D "dp"
mesh: FSDP2, the chunked log-prob head on the sharded model, the KL reference sharded as the
policy), then two steps of the real `Agent.sample` and `Agent.update`, each rank on its half of
the prompts (as under `corl train`). Rank 0's peak of live CPU tensor bytes (torch's profiler,
as memory_plan.py measures it) is compared with `corl.plan.Planner` on the same config for a
machine of 2 ranks. Prints a table; not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from memory_plan import SHAPES as BASE_SHAPES  # noqa: E402
from memory_plan import (  # noqa: E402
    TERMS,
    family_folder,
    mapped_parameter_bytes,
    peaks,
    predicted_peaks,
    run_config,
    table_rows,
    with_mapped,
)

# name -> (memory_plan.py's shape it extends, grpo.beta, compute.bf16)
SHAPES = {
    "llama-fsdp-gc": ("llama-gc", 0.0, False),
    "qwen2-fsdp-bf16-kl": ("qwen2-minibatch", 0.04, True),
    "qwen3-fsdp-bf16": ("qwen3-gc", 0.0, True),
    "llama-wide-fsdp": ("llama-wide", 0.0, False),
    "llama-wide-fsdp-bf16": ("llama-wide", 0.0, True),
}


def fsdp_config(shape: str, folders: list[Path], prompt_tokens: int | None = None):
    from corl.config import validate_config

    base, beta, bf16 = SHAPES[shape]
    raw = run_config(base, folders, prompt_tokens).model_dump()
    raw["distributed"] = {**raw.get("distributed", {}), "fsdp": True}
    raw["grpo"] = {**raw["grpo"], "beta": beta}
    raw["compute"] = {**raw["compute"], "bf16": bf16}
    return validate_config(raw, shape)


def worker(shape: str, root: Path, out: Path) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.profiler import ProfilerActivity, profile, record_function

    from corl.data.rows import build_problems, load_rows
    from corl.parallel import DataParallel, Heartbeat, plan_layout
    from corl.plan import Machine
    from corl.plan.machine import system_ram
    from corl.rollout import SamplingParams
    from corl.trainer import build_agent

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    base = SHAPES[shape][0]
    families = BASE_SHAPES[base][0]
    folders = [family_folder(f, root) for f in families]
    cfg = fsdp_config(shape, folders)
    rows = load_rows(cfg.data.train)[: cfg.cohort.prompts_per_step]
    problems, _ = build_problems(rows, cfg.data.train, [cfg.data.prompt_field], answer_field=None)
    mine = problems[rank::world]  # Placement.prompt_positions: strided shards
    params = SamplingParams(temperature=1.0, max_new_tokens=cfg.cohort.max_new_tokens)
    k = cfg.cohort.samples_per_prompt
    layout = plan_layout([a.name for a in cfg.agents], world)
    heartbeat = Heartbeat(dist.distributed_c10d._get_default_store(), rank, 600, layout)
    prompt_tokens = 0
    torch.manual_seed(rank)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("dp",))
        dp = DataParallel(mesh.get_group(), range(world), rank, heartbeat, mesh=mesh)
        agent = build_agent(cfg, 0, torch.device("cpu"), dp=dp)
        agent.engine.eos_ids = [len(agent.tokenizer) + 7]  # never drawn: every completion is full length
        for _ in range(2):
            with record_function("phase:sample"):
                rollout = agent.sample(mine, k, params)
            with record_function("phase:update"):
                agent.update(rollout, torch.randn(len(mine), k), params)
            prompt_tokens = rollout.prompt_length
    measured = with_mapped(peaks(prof), mapped_parameter_bytes(prof, [agent.model]))  # 0: FSDP2 copied them into shards
    sizes = [None] * world
    dist.all_gather_object(sizes, prompt_tokens)
    if rank == 0:
        planned = fsdp_config(shape, folders, max(sizes))
        machine = Machine(world, system_ram(), "cpu", "this machine")
        predicted, without = predicted_peaks(planned, machine), predicted_peaks(planned, machine, without=TERMS)
        record = {"shape": shape, "measured": measured, "predicted": predicted, "without": without, "prompt_tokens": max(sizes)}
        out.write_text(json.dumps(record))
    dist.destroy_process_group()


def describe(shape: str) -> str:
    from memory_plan import describe as base_describe

    base, beta, bf16 = SHAPES[shape]
    _, prompts, k, _, minibatch, _, _ = BASE_SHAPES[base]
    text = base_describe(base).replace(", bf16 autocast", "").replace(f"minibatch {minibatch or prompts * k}", "")
    per_rank = f"minibatch {min(minibatch or prompts * k // 2, prompts * k // 2)} a rank"
    return (
        text.replace(", , ", ", ").rstrip(", ") + f", FSDP2 x 2, {per_rank}" + ", bf16" * bf16 + f", KL beta {beta}" * (beta > 0)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated names: " + ", ".join(SHAPES))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, Path(args.root), Path(args.out))
        return
    print(f"{'shape':<20} {'what':<84} {'phase':<7} {'predicted':>10} {'measured':>10} {'ratio':>6}")
    with tempfile.TemporaryDirectory(prefix="corl-memory-plan-fsdp-") as root:
        for shape in args.shapes.split(","):
            out = Path(root) / f"{shape}.json"
            for family in BASE_SHAPES[SHAPES[shape][0]][0]:
                family_folder(family, Path(root))  # here, once: two ranks writing one folder collide
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", __file__]
            run = subprocess.run(
                [*cmd, "--worker", shape, "--root", root, "--out", str(out)],
                capture_output=True,
                text=True,
                check=False,
                env={**os.environ, "OMP_NUM_THREADS": "1"},
            )
            if run.returncode or not out.is_file():
                print(f"{shape}: failed\n{run.stderr[-3000:]}", file=sys.stderr)
                continue
            r = json.loads(out.read_text())
            print("\n".join(table_rows(shape, describe(shape) + f", P={r['prompt_tokens']}", r, 20)), flush=True)


if __name__ == "__main__":
    main()
