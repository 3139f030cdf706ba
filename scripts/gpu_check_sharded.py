"""scripts/gpu_check.py's sharded section (F): the paths that size the paper's run, on one GPU.

    python -m torch.distributed.run --standalone --nproc-per-node 1 scripts/gpu_check_sharded.py --out DIR
    (scripts/gpu_check.sh runs it through gpu_check.py; `--device cpu` runs it over gloo, as CI can)

One rank (NCCL on the GPU), corl's own Agent on a tiny local model (DIR/llama-char when
gpu_check.py built it, else a random one), FSDP2 over a 1-rank "dp" mesh:

  F1 chunked head under FSDP2: the head never sees more than one position at a time
     (LOGIT_CHUNK_ELEMENTS = 1), and the log-probs and gradients equal the unchunked ones
  F2 vLLM sampling without unsharding: Agent.sample gathers nothing (FSDP2 unshards and
     DTensor.full_tensor calls counted); the sync after the update gathers each tensor once
  F3 vLLM sleep mode during the update: torch.cuda.mem_get_info before/after the sampling
     call (which ends asleep); the update, sync and the next sample run with it asleep/awake
  F4 sharded KL reference (grpo.beta 0.04, bf16): its parameters are DTensors, KL exactly 0
     at step 0
  F5 token-budget packing (grpo.max_tokens_per_microbatch): the packed update's weights
     equal the padded update's (fp32)

Each check prints one line `CHECK 1|0 name | detail` (gpu_check.py turns them into PASS/FAIL).
"""

from __future__ import annotations

import argparse
import os
import traceback
from pathlib import Path

MEMORY = 0.2  # vLLM's gpu_memory_utilization: the trainer shares the GPU
PROMPTS = ["3+4=?", "12-5=?", "2*3=?", "9+1=?"]


def emit(ok: bool, name: str, detail: str = "") -> None:
    print(f"CHECK {int(bool(ok))} {name} | {detail}", flush=True)


class Gathers:
    """Counts every gather of a sharded model: FSDP2 unsharding a unit, a DTensor made whole."""

    def __init__(self) -> None:
        from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup
        from torch.distributed.tensor import DTensor

        self.counts = {"unshard": 0, "full_tensor": 0}
        for cls, name in ((FSDPParamGroup, "unshard"), (DTensor, "full_tensor")):
            self._wrap(cls, name)

    def _wrap(self, cls, name: str) -> None:
        original, counts = getattr(cls, name), self.counts

        def wrapper(obj, *args, **kwargs):
            counts[name] += 1
            return original(obj, *args, **kwargs)

        setattr(cls, name, wrapper)

    def during(self, fn):
        """(fn(), the gathers it made)"""
        before = dict(self.counts)
        out = fn()
        return out, {k: self.counts[k] - before[k] for k in self.counts}


def vllm_reason(device) -> str:
    """'' when vLLM imports and runs on `device`'s platform, else why not."""
    try:
        from vllm.platforms import current_platform
    except Exception as err:  # noqa: BLE001 - a broken install raises all sorts
        return f"vLLM does not import ({type(err).__name__}: {err})"
    if device.type == "cuda" and not current_platform.is_cuda():
        return f"vLLM's platform is {type(current_platform).__name__}, not CUDA"
    return ""


class Setup:
    def __init__(self, out: Path, device_name: str):
        import torch
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        from corl.parallel import DataParallel

        self.device = torch.device(device_name)
        cuda = self.device.type == "cuda"
        if cuda:
            torch.cuda.set_device(0)
            torch.backends.cuda.matmul.allow_tf32 = False
        dist.init_process_group("nccl" if cuda else "gloo")
        mesh = init_device_mesh(self.device.type, (dist.get_world_size(),), mesh_dim_names=("dp",))
        self.dp = DataParallel(mesh.get_group(), range(dist.get_world_size()), dist.get_rank(), mesh=mesh, device=self.device)
        self.folder = out / "llama-char"
        if not (self.folder / "config.json").is_file():  # gpu_check.py did not build it: a random tiny model
            from corl.studies.tiny.families import build_random_model
            from corl.studies.tiny.tokenizers import char_tokenizer

            tok = char_tokenizer()
            build_random_model("llama", tok, hidden=64, layers=2, heads=2, ffn=128, seed=0).save_pretrained(self.folder)
            tok.save_pretrained(self.folder)
        self.gathers = Gathers()

    def agent(self, engine: str = "hf", grpo: dict | None = None, compute: dict | None = None, rollout: dict | None = None):
        import torch

        from corl.config import AgentConfig, ComputeConfig, GRPOConfig, RolloutConfig
        from corl.data.rows import PromptTemplate
        from corl.models import load_policy
        from corl.trainer.agent import Agent

        torch.manual_seed(0)
        model, tok = load_policy(str(self.folder), device=self.device)
        options = dict(engine=engine, max_model_len=256, **(rollout or {}))
        if engine == "vllm" and self.device.type == "cuda":
            options["gpu_memory_utilization"] = MEMORY
        return Agent(
            AgentConfig(name="a", model=str(self.folder), lr=1e-3),
            model,
            tok,
            PromptTemplate(format="{problem}\n{instruction}", instruction=""),
            "problem",
            GRPOConfig(**(grpo or {})),
            RolloutConfig(**options),
            dp=self.dp,
            compute=ComputeConfig(**(compute or {})),
        )

    @staticmethod
    def problems():
        from corl.data.rows import Problem

        return [Problem(id=str(i), texts={"problem": p}) for i, p in enumerate(PROMPTS)]

    @staticmethod
    def params(tokens: int = 24):
        from corl.rollout import SamplingParams

        return SamplingParams(temperature=1.0, max_new_tokens=tokens)


def check_chunked_head(s: Setup) -> None:
    import torch

    from corl.trainer import logprobs

    agent = s.agent()
    rollout = agent.sample(s.problems(), 4, s.params())
    rows = torch.arange(rollout.input_ids.shape[0], device=rollout.input_ids.device)
    widest = [0]
    agent.model.get_output_embeddings().register_forward_hook(lambda m, i, o: widest.__setitem__(0, max(widest[0], o.shape[-2])))

    def scored(chunk: int):
        logprobs.LOGIT_CHUNK_ELEMENTS = chunk
        agent.model.zero_grad()
        widest[0] = 0
        lp = logprobs.sequence_logprobs(agent.model, rollout, rows, 1.0)  # [n, C]
        (lp * rollout.completion_mask).sum().backward()
        grads = torch.cat([p.grad.full_tensor().flatten() for p in agent.model.parameters() if p.grad is not None])
        return lp.detach(), grads, widest[0]

    default = logprobs.LOGIT_CHUNK_ELEMENTS
    try:
        lp1, g1, w1 = scored(1)
        lp2, g2, w2 = scored(2**40)
    finally:
        logprobs.LOGIT_CHUNK_ELEMENTS = default
    m = rollout.completion_mask.bool()
    err, gerr = float((lp1 - lp2)[m].abs().max()), float((g1 - g2).abs().max() / g2.abs().max().clamp_min(1e-30))
    ok = w1 == 1 and w2 > 1 and err < 1e-4 and gerr < 1e-4
    emit(
        ok, "F1 chunked head under FSDP2", f"head positions {w1} (unchunked {w2}); |log-prob diff| {err:.1e}, grad rel {gerr:.1e}"
    )


def check_vllm(s: Setup) -> None:
    import torch

    why = vllm_reason(s.device)
    if why:
        emit(True, "F2/F3 vLLM", f"SKIPPED: {why}")
        return
    cuda = s.device.type == "cuda"
    agent = s.agent("vllm", rollout={"sleep_mode": True})
    engine = agent.engine
    if cuda:
        torch.cuda.synchronize()
    free_awake = torch.cuda.mem_get_info()[0] if cuda else 0
    rollout, sampled = s.gathers.during(lambda: agent.sample(s.problems(), 4, s.params()))  # ends asleep (sleep_mode)
    freed = (torch.cuda.mem_get_info()[0] - free_awake) if cuda else 0
    ok = sampled == {"unshard": 0, "full_tensor": 0} and rollout.input_ids.shape[0] == 4 * len(PROMPTS)
    emit(ok, "F2 vLLM samples without unsharding the FSDP2 policy", f"gathers while sampling: {sampled}")

    stats = agent.update(rollout, torch.randn(len(PROMPTS), 4), s.params())
    asleep_in_update = set(engine._asleep)
    _, synced = s.gathers.during(lambda: agent.after_update(stats, stepped=stats.optimizer_steps > 0))
    tensors = len(agent.model.state_dict())
    ok = synced["unshard"] == 0 and synced["full_tensor"] == tensors and stats.optimizer_steps > 0
    emit(ok, "F2 the sync gathers one tensor at a time, each once", f"{synced} for {tensors} tensors, {stats.sync.bytes:,} bytes")
    again = agent.sample(s.problems(), 2, s.params())
    if not cuda:
        emit(
            True,
            "F3 vLLM sleep mode during the update",
            f"SKIPPED on CPU (vLLM's CPU build has no sleep mode); {engine.sleep_mode=}",
        )
        agent.close()
        return
    budget = MEMORY * torch.cuda.mem_get_info()[1]
    ok = asleep_in_update == {"weights", "kv_cache"} and freed > 0.5 * budget and again.input_ids.shape[0] == 2 * len(PROMPTS)
    emit(
        ok,
        "F3 vLLM sleep mode during the update",
        f"freed {freed / 2**30:.2f} GiB of a {budget / 2**30:.2f} GiB share by sleeping; asleep through the update: "
        f"{sorted(asleep_in_update)}; sampled again after the sync",
    )
    agent.close()


def check_reference(s: Setup) -> None:
    import torch
    from torch.distributed.tensor import DTensor

    bf16 = s.device.type == "cuda"
    agent = s.agent(grpo={"beta": 0.04}, compute={"bf16": bf16})
    rollout = agent.sample(s.problems(), 4, s.params())
    stats = agent.update(rollout, torch.randn(len(PROMPTS), 4), s.params())
    sharded = all(isinstance(p, DTensor) for p in agent.reference.parameters())
    dtypes = sorted({str(p.dtype) for p in agent.reference.parameters()})
    ok = sharded and stats.kl == 0.0 and stats.optimizer_steps == 1
    emit(ok, "F4 sharded KL reference, KL 0 at step 0", f"KL {stats.kl!r} (bf16 {bf16}); DTensor {sharded}, {dtypes}")


def check_packing(s: Setup) -> None:
    import torch

    padded, packed = s.agent(), s.agent(grpo={"max_tokens_per_microbatch": 64})
    for agent in (padded, packed):  # SGD, lr 1: the step is the gradient (AdamW's first step is ~lr x sign(g))
        agent.optimizer = torch.optim.SGD([p for p in agent.model.parameters() if p.requires_grad], lr=1.0)
    before = [p.full_tensor().detach().clone() for p in padded.model.parameters()]
    rollout = padded.sample(s.problems(), 4, s.params(32))
    rewards = torch.randn(len(PROMPTS), 4)
    a = padded.update(rollout, rewards, s.params(32))
    b = packed.update(rollout, rewards, s.params(32))
    steps = [
        (p.full_tensor() - w, q.full_tensor() - w)
        for p, q, w in zip(padded.model.parameters(), packed.model.parameters(), before, strict=True)
    ]
    diff = max(float((x - y).abs().max()) for x, y in steps)
    size = max(float(x.abs().max()) for x, _ in steps)
    ok = size > 0 and diff <= 1e-4 * size and abs(a.loss - b.loss) < 1e-5
    emit(
        ok,
        "F5 token-budget packing == padded update",
        f"max |step diff| {diff:.1e} of a {size:.1e} step, loss {a.loss:.6f} / {b.loss:.6f}",
    )


CHECKS = (check_chunked_head, check_vllm, check_reference, check_packing)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    setup = Setup(args.out, args.device)
    for check in CHECKS:
        try:
            check(setup)
        except Exception:  # noqa: BLE001 - one broken check must not hide the others
            emit(False, f"{check.__name__} crashed", traceback.format_exc()[-1500:].replace("\n", " / "))
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
