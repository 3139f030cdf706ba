"""The GPU paths of corl in one short run: bf16, gradient checkpointing, FSDP2, LoRA.

    python scripts/gpu_check.py --out /tmp/corl-gpu-check     # (scripts/gpu_check.sh calls this)

Nothing is downloaded: two tiny models (Llama-style, per-character tokenizer; Qwen2-style,
BPE) are built here with corl.studies.tiny and taught the answer format in a few seconds. Then:

  A  one process: 2 agents, bf16 autocast + gradient checkpointing, 3 Co-RL steps
  B  torchrun, 1 GPU: FSDP2 (+ bf16 mixed precision, gradient checkpointing), 2 agents on
     the one rank: 2 steps and a sharded checkpoint (DCP), then a resume from it to step 4
  C  FSDP2 parity: the same GRPO update with and without FSDP2 (fp32, clipping on)
  D  LoRA (if peft imports) under FSDP2 + bf16 + gradient checkpointing: 2 steps with
     sharded (DCP) checkpoints, a resume to step 3; the saved folder (adapters merged into
     the weights) loads with from_pretrained and differs from the base model
  E  vLLM (if vLLM's CUDA build imports; scripts/gpu_check_vllm.py): the colocated rollout
     engine, weight sync, sleep mode, LoRA, FSDP2 under torchrun, corl train on it
  F  the sharded paths (scripts/gpu_check_sharded.py, torchrun, 1 GPU): the chunked head under FSDP2,
     vLLM sampling without unsharding (gathers counted), vLLM asleep during the update (memory
     freed), the sharded KL reference (KL 0 at step 0), token-budget packing == padded update

Each check prints one PASS or FAIL line; the exit status is the number of failures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import traceback
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
results: list[tuple[str, bool, str]] = []


def report(name: str, ok: bool, detail: str = "") -> None:
    results.append((name, ok, detail))
    print(f"{'PASS' if ok else 'FAIL'}  {name}  {detail}", flush=True)


def build_models(out: Path) -> tuple[dict[str, Path], dict[str, Path]]:
    """Two tiny families and the task's train/test files, on the GPU (seconds)."""
    import torch

    from corl.studies.tiny.families import build_random_model
    from corl.studies.tiny.task import make_split, write_jsonl
    from corl.studies.tiny.tokenizers import bpe_tokenizer, char_tokenizer

    data = {
        "train": write_jsonl(make_split("train", 64, seed=0), out / "train.jsonl"),
        "test": write_jsonl(make_split("test", 16, seed=0), out / "test.jsonl"),
    }
    problems = [json.loads(line)["problem"] for line in data["train"].read_text().splitlines()]
    corpus = [p + "\n\\boxed{" + str(i % 10) + "}" for i, p in enumerate(problems * 4)]
    models = {}
    for i, (name, arch, tok) in enumerate(
        (("llama-char", "llama", char_tokenizer()), ("qwen2-bpe", "qwen2", bpe_tokenizer(corpus, vocab_size=300)))
    ):
        model = build_random_model(arch, tok, hidden=128, layers=4, heads=4, ffn=256, seed=i).cuda()
        rng = random.Random(i)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        model.train()
        for _ in range(80):  # teach the format "\boxed{d}" so that rewards are mixed
            texts = [p + "\n\\boxed{" + str(rng.randint(0, 3)) + "}" + tok.eos_token for p in rng.sample(problems, 32)]
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to("cuda")
            loss = model(**enc, labels=enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.cpu().save_pretrained(out / name)
        tok.save_pretrained(out / name)
        models[name] = out / name
    return models, data


def config(out: Path, models: dict, data: dict, run: str, **sections) -> Path:
    raw = {
        "output_dir": str(out / run),
        "device": "cuda",
        "agents": [
            {"name": "llama", "model": str(models["llama-char"]), "lr": 1e-3},
            {"name": "qwen", "model": str(models["qwen2-bpe"]), "lr": 1e-3},
        ],
        "data": {
            "train": str(data["train"]),
            "val": str(data["test"]),
            "val_size": 8,
            "template": "{problem}\n",
            "instruction": "",
        },
        "cohort": {"steps": 3, "prompts_per_step": 8, "samples_per_prompt": 8, "max_new_tokens": 16, "seed": 0},
        "logging": {"tensorboard": False, "progress": False},
    }
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    path = out / f"{run}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def corl(*args: str, torchrun: bool = False, timeout: int = 240) -> subprocess.CompletedProcess:
    launcher = (
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1"] if torchrun else [sys.executable]
    )
    return subprocess.run(
        [*launcher, "-m", "corl", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def trained(run: Path, steps: int, names=("llama", "qwen")) -> str:
    """'' if the run logged every step with finite numbers and updated every agent, else why not."""
    import math

    from corl.tracking.metrics import read_metrics

    records = read_metrics(run, "train")
    if [r["step"] for r in records] != list(range(steps)):
        return f"steps logged: {[r['step'] for r in records]}"
    for name in names:
        if not sum(r[f"{name}/optimizer_steps"] for r in records):
            return f"{name} made no optimizer step"
        bad = [
            k
            for r in records
            for k, v in r.items()
            if k.startswith(name)
            and isinstance(v, float)
            and not math.isfinite(v)
            and "normalized" not in k
            and "accuracy" not in k
        ]
        if bad:
            return f"non-finite metrics: {bad[:3]}"
    return ""


def check_bf16_checkpointing(out: Path, models, data) -> None:
    cfg = config(out, models, data, "A", compute={"bf16": True, "gradient_checkpointing": True})
    t = time.perf_counter()
    proc = corl("train", str(cfg))
    why = proc.stderr[-2000:] if proc.returncode else trained(out / "A", 3)
    report("A bf16 + gradient checkpointing, 1 process", not why, why or f"{time.perf_counter() - t:.0f} s")


def check_fsdp_and_resume(out: Path, models, data) -> None:
    cfg = config(
        out,
        models,
        data,
        "B",
        cohort={"steps": 4},
        logging={"checkpoint_every": 2},
        compute={"bf16": True, "gradient_checkpointing": True},
        distributed={"fsdp": True, "timeout_s": 120},
    )
    t = time.perf_counter()
    first = corl("train", str(cfg), "--set", "cohort.steps=2", torchrun=True)
    if first.returncode:
        report("B FSDP2 + bf16 + checkpointing under torchrun", False, first.stdout[-1500:] + first.stderr[-2500:])
        return
    why = trained(out / "B", 2) or sharded_missing(out / "B", 2)
    try:
        from transformers import AutoModelForCausalLM

        AutoModelForCausalLM.from_pretrained(out / "B" / "checkpoints" / "step_000002" / "llama")
    except Exception as err:  # noqa: BLE001 - reported
        why = why or f"checkpoint does not load: {err}"
    report(
        "B FSDP2 + bf16 + checkpointing under torchrun (2 steps, checkpoint)", not why, why or f"{time.perf_counter() - t:.0f} s"
    )
    resumed = corl("train", str(cfg), "--resume", str(out / "B"), torchrun=True)  # cfg: 4 steps; the run's own says 2
    why = resumed.stderr[-2500:] if resumed.returncode else trained(out / "B", 4)
    report("B resume an FSDP2 run from its checkpoint (steps 2-3)", not why, why)


def sharded_missing(run: Path, step: int, names=("llama", "qwen")) -> str:
    """'' if every agent of the checkpoint after `step` steps holds its FSDP2 shards (DCP), else which does not."""
    folder = run / "checkpoints" / f"step_{step:06d}"
    missing = [n for n in names if not (folder / n / "sharded" / ".metadata").is_file()]
    return f"no sharded (DCP) checkpoint for {missing} in {folder}" if missing else ""


def check_fsdp_parity(out: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "1",
            __file__,
            "--parity-worker",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    line = [x for x in proc.stdout.splitlines() if x.startswith("PARITY ")]
    if proc.returncode or not line:
        report("C FSDP2 update equals the unsharded update", False, proc.stdout[-1500:] + proc.stderr[-2500:])
        return
    diff, scale = map(float, line[-1].split()[1:3])
    ok = diff <= 1e-4 * max(scale, 1e-3)
    report("C FSDP2 update equals the unsharded update", ok, f"max |delta| diff {diff:.2e}, step size {scale:.2e}")


def parity_worker(out: Path) -> None:
    """Under torchrun (world 1): one GRPO update of the same rollout, plain vs FSDP2 (fp32)."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor

    from corl.config import AgentConfig, GRPOConfig
    from corl.data.rows import Problem, PromptTemplate
    from corl.models import load_policy
    from corl.parallel import DataParallel
    from corl.rollout import SamplingParams
    from corl.trainer import Agent

    torch.cuda.set_device(0)
    dist.init_process_group("nccl", timeout=timedelta(seconds=120))
    mesh = init_device_mesh("cuda", (1,), mesh_dim_names=("dp",))
    path = out / "llama-char"
    grpo = GRPOConfig(max_grad_norm=0.5, minibatch_size=8, num_passes=2)

    def agent(dp=None):
        model, tok = load_policy(str(path), device="cuda")
        a = Agent(AgentConfig(name="a", model=str(path)), model, tok, PromptTemplate("{problem}\n", ""), "problem", grpo, dp=dp)
        a.optimizer = torch.optim.SGD([p for p in a.model.parameters() if p.requires_grad], lr=1.0)
        return a

    def flat(model):
        return torch.cat(
            [(p.full_tensor() if isinstance(p, DTensor) else p).detach().float().flatten() for p in model.parameters()]
        )

    plain = agent()
    sharded = agent(DataParallel(group=mesh.get_group(), ranks=(0,), rank=0, mesh=mesh, device=torch.device("cuda")))
    problems = [Problem(id=str(i), texts={"problem": p}) for i, p in enumerate(["3+4=?", "12*3-5=?", "7=?", "9-2=?"])]
    torch.manual_seed(0)
    rollout = plain.sample(problems, 8, SamplingParams(temperature=1.0, max_new_tokens=12))
    rewards = torch.tensor([[1.0, 0, 0, 1, 0, 1, 1, 0], [1.0] * 8, [0, 0, 1, 0, 0, 0, 0, 1.0], [1.0, 0, 1, 0, 1, 0, 1, 0]])
    before = flat(plain.model)
    plain.update(rollout, rewards, SamplingParams(temperature=1.0, max_new_tokens=12))
    sharded.update(rollout, rewards, SamplingParams(temperature=1.0, max_new_tokens=12))
    a, b = flat(plain.model) - before, flat(sharded.model) - before
    print(f"PARITY {float((a - b).abs().max()):.6e} {float(a.abs().max()):.6e}", flush=True)
    dist.destroy_process_group()


def check_lora(out: Path, models, data) -> None:
    try:
        import peft  # noqa: F401
    except ModuleNotFoundError:
        report("D LoRA", True, "SKIPPED: peft is not installed (pip install peft)")
        return
    cfg = config(
        out,
        models,
        data,
        "D",
        cohort={"steps": 3},
        logging={"checkpoint_every": 1},
        compute={"bf16": True, "gradient_checkpointing": True, "lora": {"r": 8, "alpha": 16}},
        distributed={"fsdp": True, "timeout_s": 120},
    )
    proc = corl("train", str(cfg), "--set", "cohort.steps=2", torchrun=True)
    why = proc.stdout[-1000:] + proc.stderr[-2500:] if proc.returncode else trained(out / "D", 2) or sharded_missing(out / "D", 2)
    if not why:  # the sharded adapters and optimizer resume (from the step-2 checkpoint) to step 3
        resumed = corl("train", str(cfg), "--resume", str(out / "D"), torchrun=True)
        why = resumed.stdout[-1000:] + resumed.stderr[-2500:] if resumed.returncode else trained(out / "D", 3)
    if not why:
        from transformers import AutoModelForCausalLM

        merged = AutoModelForCausalLM.from_pretrained(out / "D" / "checkpoints" / "step_000002" / "llama")
        base = AutoModelForCausalLM.from_pretrained(models["llama-char"])
        moved = max(float((a - b).abs().max()) for a, b in zip(merged.parameters(), base.parameters()))
        why = "" if moved > 0 else "the merged checkpoint equals the base model: the adapters did not train or merge"
    report("D LoRA + FSDP2 + bf16 + checkpointing under torchrun: sharded checkpoint, resume, merged folder", not why, why)


def check_vllm(out: Path, models, data) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_check_vllm import check_vllm as run_vllm_section

    run_vllm_section(out, models, data, report, config, corl, trained)


def check_sharded(out: Path) -> None:
    """Section F: scripts/gpu_check_sharded.py under torchrun (world 1); its CHECK lines become PASS/FAIL."""
    script = Path(__file__).resolve().parent / "gpu_check_sharded.py"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1", str(script), "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    for line in proc.stdout.splitlines():
        if line.startswith("CHECK "):
            ok, rest = line.removeprefix("CHECK ").split(" ", 1)
            name, _, detail = rest.partition(" | ")
            report(name, ok == "1", detail)
    if proc.returncode:
        report(f"F worker exited {proc.returncode}", False, proc.stdout[-1500:] + proc.stderr[-3000:])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("/tmp/corl-gpu-check"))
    parser.add_argument("--parity-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.parity_worker:
        parity_worker(args.out)
        return
    import torch

    args.out.mkdir(parents=True, exist_ok=True)
    if not torch.cuda.is_available():
        report("CUDA available", False, f"torch {torch.__version__} sees no GPU")
        sys.exit(1)
    gpu = torch.cuda.get_device_name(0)
    report("CUDA available", True, f"torch {torch.__version__}, {gpu}, bf16 {torch.cuda.is_bf16_supported()}")
    t = time.perf_counter()
    models, data = build_models(args.out)
    report("tiny models built", True, f"{time.perf_counter() - t:.0f} s")
    checks = (
        lambda: check_bf16_checkpointing(args.out, models, data),
        lambda: check_fsdp_and_resume(args.out, models, data),
        lambda: check_fsdp_parity(args.out),
        lambda: check_lora(args.out, models, data),
        lambda: check_vllm(args.out, models, data),
        lambda: check_sharded(args.out),
    )
    for check in checks:
        try:
            check()
        except Exception:  # noqa: BLE001 - one broken check must not hide the others
            report("check crashed", False, traceback.format_exc()[-2000:])
    failures = sum(not ok for _, ok, _ in results)
    print(f"\n{len(results) - failures} passed, {failures} failed", flush=True)
    sys.exit(failures)


if __name__ == "__main__":
    main()
