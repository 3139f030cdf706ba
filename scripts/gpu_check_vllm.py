"""scripts/gpu_check.py's vLLM section (E): the colocated rollout engine on a GPU.

Needs vLLM's CUDA build in the venv (pip install 'corl[vllm]'); without it, or when vLLM
sees no CUDA device, the section prints one PASS line saying it was skipped.

  E1 engine built from the in-memory model (fp32): its sampled log-probs equal the
     training forward's; greedy completions agree with the HF engine's
  E2 sync_weights after an optimizer step: the engine scores like the updated model
  E3 sleep mode: sleep frees GPU memory; a sync while asleep, then generate, wake it
     with the new weights
  E4 LoRA (if peft imports): an engine built from the peft model samples the merged
     weights; after a step on the adapters and a sync it follows them
  E5 torchrun (world 1) + FSDP2, then + LoRA: the external_launcher engine, DTensor shards
     gathered by the sync; close() leaves the trainer's process group up
  E6 corl train with rollout.engine=vllm: 2 agents, 2 steps + checkpoint, resume to 3;
     then under torchrun with FSDP2 + LoRA + bf16 + gradient checkpointing on NCCL: sharded
     checkpoints, a resume whose engines must sample from the restored weights

The engine checks run in child processes (a crash or a leak there cannot take the other
checks down). Log-prob tolerance on the GPU: 5e-3 per token (fp32 with TF32 off, but
vLLM's attention and matmul kernels are not the trainer's).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

GPU_ATOL = 5e-3
MEMORY = "0.2"  # gpu_memory_utilization per engine: two agents' engines and their trainers share one GPU


def vllm_usable() -> str:
    """'' when vLLM imports and sees CUDA, else why not."""
    try:
        import vllm  # noqa: F401
        from vllm.platforms import current_platform
    except Exception as err:  # noqa: BLE001 - a broken install raises all sorts
        return f"vLLM does not import ({type(err).__name__}: {err}); pip install 'corl[vllm]' to check it"
    if not current_platform.is_cuda():
        return f"vLLM's platform is {type(current_platform).__name__}, not CUDA (the CPU build?)"
    return ""


def _emit(ok: bool, name: str, detail: str = "") -> None:
    print(f"CHECK {int(bool(ok))} {name} | {detail}", flush=True)


def _hf_token_logprobs(model, ids: list[int]):
    import torch

    with torch.no_grad():
        x = torch.tensor([ids], device="cuda")  # [1, L]
        logp = torch.log_softmax(model(input_ids=x).logits[0, :-1].float(), dim=-1)  # [L-1, V]
        return logp.gather(-1, x[0, 1:, None])[:, 0].cpu()


def _max_diff(a, b) -> float:
    return float((a.cpu() - b.cpu()).abs().max())


def _one_step(model, tok, texts: list[str], lr: float) -> None:
    import torch

    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=lr)
    enc = tok(texts, return_tensors="pt", padding=True).to("cuda")
    model.train()
    model(**enc, labels=enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)).loss.backward()
    opt.step()
    model.eval()


PROMPTS = ["3+4=?\n", "12*3-5=?\n", "7=?\n", "9-2=?\n", "8*8=?\n", "5+5+5=?\n"]
TARGETS = [p + "\\boxed{1}" for p in PROMPTS]


def engine_worker(out: Path) -> None:
    """E1-E4 in one process on the GPU."""
    import copy

    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    from corl.models import load_policy
    from corl.rollout import HFGenerateEngine, SamplingParams
    from corl.rollout.vllm import VLLMEngine
    from corl.trainer.logprobs import sequence_logprobs

    model, tok = load_policy(str(out / "llama-char"), device="cuda")
    model.eval()
    engine = VLLMEngine(model, tok, gpu_memory_utilization=float(MEMORY), dtype="float32", sleep_mode=True)
    _emit(True, "E1 engine built from the in-memory model", f"start-up {engine.startup_seconds:.0f} s")

    torch.manual_seed(0)
    r = engine.generate(PROMPTS, 8, SamplingParams(temperature=1.0, max_new_tokens=24))
    with torch.no_grad():
        lp = sequence_logprobs(model, r, torch.arange(r.input_ids.shape[0], device="cuda"), 1.0)
    m = r.completion_mask.bool()
    err = float((lp[m] - r.sampling_logprobs[m]).abs().max())
    _emit(err < GPU_ATOL, "E1 sampled log-probs == training forward (fp32)", f"max |error| {err:.1e} over {int(m.sum())} tokens")
    greedy = SamplingParams(temperature=0.0, max_new_tokens=24)
    ours, ref = engine.generate(PROMPTS, 1, greedy).texts, HFGenerateEngine(model, tok).generate(PROMPTS, 1, greedy).texts
    agree = sum(a == b for a, b in zip(ours, ref))
    _emit(agree >= len(PROMPTS) - 1, "E1 greedy == HF engine", f"{agree}/{len(PROMPTS)} completions identical")

    seq = tok(TARGETS[0] + tok.eos_token)["input_ids"]
    old = _hf_token_logprobs(model, seq)
    _one_step(model, tok, TARGETS, lr=0.5)
    new = _hf_token_logprobs(model, seq)
    stats = engine.sync_weights(model)
    got = engine.token_logprobs([seq])[0]
    ok = _max_diff(got, new) < GPU_ATOL and _max_diff(got, old) > 10 * GPU_ATOL
    _emit(
        ok,
        "E2 sync after a step",
        f"|engine - new| {_max_diff(got, new):.1e}, |engine - old| {_max_diff(got, old):.1e}, {stats.seconds:.3f} s",
    )

    torch.cuda.synchronize()
    free = torch.cuda.mem_get_info()[0]
    engine.sleep()
    freed = torch.cuda.mem_get_info()[0] - free
    _one_step(model, tok, TARGETS, lr=0.5)
    newer = _hf_token_logprobs(model, seq)
    engine.sync_weights(model)  # wakes the weights only
    got = engine.token_logprobs([seq])[0]  # wakes the KV cache
    engine.wake()
    ok = freed > 2**30 and _max_diff(got, newer) < GPU_ATOL
    _emit(
        ok,
        "E3 sleep frees memory, sync + generate wake it",
        f"freed {freed / 2**30:.1f} GiB; after wake |engine - model| {_max_diff(got, newer):.1e}",
    )
    engine.close()

    try:
        import peft
    except ModuleNotFoundError:
        _emit(True, "E4 LoRA", "SKIPPED: peft is not installed")
        return
    pm = peft.get_peft_model(copy.deepcopy(model), peft.LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, p in pm.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.3)
    lora = VLLMEngine(pm, tok, gpu_memory_utilization=float(MEMORY), dtype="float32")
    start_err = _max_diff(lora.token_logprobs([seq])[0], _hf_token_logprobs(pm, seq))
    _one_step(pm, tok, TARGETS, lr=1.0)
    lora.sync_weights(pm)
    sync_err = _max_diff(lora.token_logprobs([seq])[0], _hf_token_logprobs(pm, seq))
    merged = any(getattr(mod, "merged", False) for mod in pm.modules())
    ok = start_err < GPU_ATOL and sync_err < GPU_ATOL and not merged
    _emit(ok, "E4 LoRA: merged weights at start and after a sync", f"|engine - peft model| {start_err:.1e} / {sync_err:.1e}")
    lora.close()


def fsdp_worker(out: Path, with_lora: bool) -> None:
    """E5 under torchrun (world 1): FSDP2-sharded policy, engine on vLLM's external_launcher."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    torch.backends.cuda.matmul.allow_tf32 = False
    from corl.config import LoRAConfig
    from corl.models import load_policy
    from corl.models.prepare import add_lora, shard_with_fsdp
    from corl.rollout.vllm import VLLMEngine
    from corl.rollout.vllm_weights import iter_full_weights

    tag = "E5 FSDP2 + LoRA" if with_lora else "E5 FSDP2"
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", timeout=timedelta(seconds=120))
    mesh = init_device_mesh("cuda", (1,), mesh_dim_names=("dp",))
    path = str(out / "llama-char")
    model, tok = load_policy(path, device="cuda")
    if with_lora:
        model = add_lora(model, LoRAConfig(r=8, alpha=16))
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.3)
    shard_with_fsdp(model, mesh, bf16=False)
    engine = VLLMEngine(model, tok, gpu_memory_utilization=float(MEMORY), dtype="float32")
    _emit(engine.external, f"{tag}: engine on external_launcher", f"start-up {engine.startup_seconds:.0f} s")

    def plain():
        """The policy as a plain HF model, from the gathered (and merged) weights."""
        reference, _ = load_policy(path, device="cuda")
        reference.load_state_dict(dict(iter_full_weights(model)))
        return reference.eval()

    seq = tok(TARGETS[0] + tok.eos_token)["input_ids"]
    start_err = _max_diff(engine.token_logprobs([seq])[0], _hf_token_logprobs(plain(), seq))
    _one_step(model, tok, TARGETS, lr=1.0 if with_lora else 0.5)
    stats = engine.sync_weights(model)
    updated = _hf_token_logprobs(plain(), seq)
    sync_err = _max_diff(engine.token_logprobs([seq])[0], updated)
    ok = start_err < GPU_ATOL and sync_err < GPU_ATOL
    _emit(
        ok,
        f"{tag}: shards gathered into the engine",
        f"|engine - model| {start_err:.1e} at start, {sync_err:.1e} after a step + sync ({stats.bytes / 2**20:.1f} MiB)",
    )
    engine.close()
    try:
        dist.barrier()
        kept = dist.is_initialized()
    except Exception:  # noqa: BLE001 - reported
        kept = False
    _emit(kept, f"{tag}: close() keeps the trainer's process group")
    dist.destroy_process_group()


def _run_worker(args: list[str], report, torchrun: bool = False, timeout: int = 900) -> None:
    launcher = (
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1"] if torchrun else [sys.executable]
    )
    proc = subprocess.run(
        [*launcher, __file__, *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("CHECK ")]
    for line in lines:
        ok, rest = line.removeprefix("CHECK ").split(" ", 1)
        name, _, detail = rest.partition(" | ")
        report(name, ok == "1", detail)
    if proc.returncode:
        report(f"E worker {' '.join(args)} exited {proc.returncode}", False, proc.stdout[-1500:] + proc.stderr[-3000:])


def check_vllm(out: Path, models: dict, data: dict, report, config, corl, trained) -> None:
    """The vLLM section; `report`, `config`, `corl`, `trained` are gpu_check.py's own helpers."""
    why = vllm_usable()
    if why:
        report("E vLLM", True, f"SKIPPED: {why}")
        return
    checks = (
        lambda: _run_worker(["--worker", "engine", "--out", str(out)], report),
        lambda: _run_worker(["--worker", "fsdp", "--out", str(out)], report, torchrun=True),
        lambda: _run_worker(["--worker", "fsdp-lora", "--out", str(out)], report, torchrun=True),
        lambda: _check_train(out, models, data, report, config, corl, trained),
    )
    for check in checks:
        try:
            check()
        except Exception:  # noqa: BLE001 - one broken check must not hide the others
            report("E check crashed", False, traceback.format_exc()[-2000:])


def _check_train(out: Path, models, data, report, config, corl, trained) -> None:
    engine = ["--set", "rollout.engine=vllm", "--set", f"rollout.gpu_memory_utilization={MEMORY}"]
    cfg = config(out, models, data, "E6", logging={"checkpoint_every": 2})
    t = time.perf_counter()
    first = corl("train", str(cfg), *engine, "--set", "cohort.steps=2", timeout=900)
    why = first.stdout[-1000:] + first.stderr[-2500:] if first.returncode else trained(out / "E6", 2)
    if not why:
        resumed = corl("train", str(cfg), "--resume", str(out / "E6"), *engine, timeout=900)
        why = resumed.stdout[-1000:] + resumed.stderr[-2500:] if resumed.returncode else trained(out / "E6", 3)
    report("E6 corl train on vLLM: 2 agents, 2 steps, resume to 3", not why, why or f"{time.perf_counter() - t:.0f} s")

    cfg = config(
        out,
        models,
        data,
        "E6-fsdp",
        cohort={"steps": 3},
        logging={"checkpoint_every": 1},
        compute={"bf16": True, "gradient_checkpointing": True, "lora": {"r": 8, "alpha": 16}},
        distributed={"fsdp": True, "timeout_s": 300},
    )
    t = time.perf_counter()
    proc = corl("train", str(cfg), *engine, "--set", "cohort.steps=2", torchrun=True, timeout=900)
    run = out / "E6-fsdp"
    why = proc.stdout[-1000:] + proc.stderr[-2500:] if proc.returncode else trained(run, 2)
    if not why and not (run / "checkpoints" / "step_000002" / "llama" / "sharded" / ".metadata").is_file():
        why = "no sharded (DCP) checkpoint after step 2"
    if not why:  # the engines are built before the checkpoint loads: the resume must sync them to it
        resumed = corl("train", str(cfg), "--resume", str(run), *engine, torchrun=True, timeout=900)
        why = resumed.stdout[-1000:] + resumed.stderr[-2500:] if resumed.returncode else trained(run, 3)
    if not why:
        from corl.tracking.metrics import read_metrics

        last = read_metrics(run, "train")[-1]
        gaps = {k: v for k, v in last.items() if k.endswith("mismatch_logratio_mean") and abs(v) > 0.05}
        why = f"after the resume the engine samples from other weights than the trainer's: {gaps}" if gaps else ""
    report(
        "E6 corl train on vLLM under torchrun + FSDP2 + LoRA + bf16 + checkpointing: sharded checkpoint, resume",
        not why,
        why or f"{time.perf_counter() - t:.0f} s",
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--worker", choices=["engine", "fsdp", "fsdp-lora"], required=True)
    args = parser.parse_args()
    if args.worker == "engine":
        engine_worker(args.out)
    else:
        fsdp_worker(args.out, with_lora=args.worker == "fsdp-lora")


if __name__ == "__main__":
    main()
