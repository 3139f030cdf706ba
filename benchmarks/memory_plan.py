"""The memory plan against measurement: predicted vs measured peak of corl's real step.

Usage:
    python benchmarks/memory_plan.py                     # every shape (a few minutes on 2 cores)
    python benchmarks/memory_plan.py --shapes llama-gc   # some of them

Each shape runs in a fresh subprocess: corl's own loader and preparation (corl.trainer.build_agent:
from_pretrained, gradient checkpointing, bf16 autocast, the HF rollout engine, AdamW) build
the agents of a config from folders holding a tiny family's architecture and tokenizer
(random weights: memory does not depend on them), then two steps of the real
`Agent.sample` and `Agent.update` run (the second is the steady state: gradients and AdamW
moments already exist). The engine's EOS is set to an id that cannot be drawn, so every
completion runs to max_new_tokens, and the rewards are random normal, so every sequence
carries gradient: the worst case the plan assumes. The plan is `corl.plan.Planner` on the
same config, given the prompt length of the batch that was sampled.

Measured: the peak of live CPU tensor bytes, from torch's profiler with profile_memory
(every CPU allocation and free of c10's allocator, with a running total; the profiler
starts before the first weight is allocated, so the total is everything the step holds),
plus the parameters from_pretrained leaves in the safetensors file's memory map, which
the allocator never sees (`mapped_parameter_bytes`: 36.5 MiB for llama-wide, under 1 MiB
for the tiny families).
It is the quantity the plan predicts and the CPU counterpart of
`torch.cuda.max_memory_allocated`. RSS would add the interpreter, the libraries and the
allocator's slack, and the profiler's own buffers. Prints a table; not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

# name -> (families, prompts per step, K, max_new_tokens, minibatch_size, gradient_checkpointing, bf16)
SHAPES = {
    "llama-full": (("llama-char",), 16, 8, 64, None, False, False),
    "qwen2-minibatch": (("qwen2-bpe",), 32, 8, 96, 64, False, False),
    "llama-gc": (("llama-char",), 16, 8, 128, None, True, False),
    "qwen2-bf16": (("qwen2-bpe",), 8, 8, 192, 32, False, True),
    "tiny.yaml": (("llama-char", "qwen2-bpe"), 32, 8, 56, None, False, False),
    "qwen2vl-vision": (("qwen2vl-bpe",), 16, 8, 32, None, False, False),
    "qwen3-full": (("qwen3-bpe",), 16, 8, 64, None, False, False),
    "qwen3-gc": (("qwen3-bpe",), 16, 8, 128, None, True, False),
    "qwen3-bf16": (("qwen3-bpe",), 8, 8, 192, 32, False, True),
    "llama-wide": (("llama-wide",), 2, 4, 32, None, True, False),
}

# Architectures no tiny family has: (the family whose tokenizer it takes, model_type, config
# fields). qwen3-bpe is qwen2-bpe's shape with Qwen3's q/k norms (head_dim 16, 2 KV heads);
# llama-wide's head and embedding (untied, vocabulary 16,384 x hidden 256) outweigh its layers,
# so that FSDP2's unsharded root gradient is a visible part of a step (memory_plan_fsdp.py).
VARIANTS = {
    "qwen3-bpe": ("qwen2-bpe", "qwen3", {"hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
                                         "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 256}),
    "llama-wide": ("llama-char", "llama", {"hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
                                           "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 16384,
                                           "tie_word_embeddings": False}),
}  # fmt: skip


def family_folder(family: str, root: Path) -> Path:
    """A Hugging Face folder with the family's architecture (random weights) and tokenizer."""
    folder = root / family
    if not (folder / "config.json").is_file() and family in vision_families():
        from corl.studies.tiny_vl.families import build_vl_family, save_vl

        save_vl(*build_vl_family(family), folder)
    if not (folder / "config.json").is_file() and family in VARIANTS:
        variant_folder(family, folder)
    if not (folder / "config.json").is_file():
        from corl.studies.tiny.families import build_random_model, get_family
        from corl.studies.tiny.pretrain import build_tokenizer

        spec = get_family(family)
        tokenizer = build_tokenizer(spec)
        model = build_random_model(spec.arch, tokenizer, hidden=spec.hidden, layers=spec.layers, heads=spec.heads, ffn=spec.ffn)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return folder


def variant_folder(name: str, folder: Path) -> None:
    """A VARIANTS model (random weights, as a family's are here) with its family's tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from corl.studies.tiny.families import get_family
    from corl.studies.tiny.pretrain import build_tokenizer

    family, model_type, fields = VARIANTS[name]
    tokenizer = build_tokenizer(get_family(family))
    ids = {"bos_token_id": tokenizer.eos_token_id, "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id}
    config = AutoConfig.for_model(model_type, **{"vocab_size": len(tokenizer), "max_position_embeddings": 1024, **ids, **fields})
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def vision_families() -> set[str]:
    from corl.studies.tiny_vl.families import VL_FAMILIES

    return set(VL_FAMILIES)


def run_config(shape: str, folders: list[Path], prompt_tokens: int | None = None):
    from corl.config import validate_config

    families, prompts, k, tokens, minibatch, gc, bf16 = SHAPES[shape]
    raw = {
        "device": "cpu",
        "agents": [{"name": f, "model": str(folder), "lr": 3e-5} for f, folder in zip(families, folders)],
        "data": (
            {"train": "vtiny:train:256", "template": "{problem}", "instruction": ""}
            if set(families) <= vision_families()
            else {"train": "tiny:train:256", "template": "{problem}\n", "instruction": ""}
        ),
        "cohort": {
            "label_source": "peer" if len(families) > 1 else "self",
            "samples_per_prompt": k,
            "prompts_per_step": prompts,
            "max_new_tokens": tokens,
        },
        "grpo": {"minibatch_size": minibatch},
        "compute": {"gradient_checkpointing": gc, "bf16": bf16},
        "plan": {"prompt_tokens": prompt_tokens},
    }
    return validate_config(raw, shape)


def peaks(prof) -> dict[str, int]:
    """Peak running total of CPU allocations, overall and inside each `phase:` range."""
    from torch._C._profiler import _EventType

    out: dict[str, int] = {}

    def walk(event, phase: str) -> None:
        if event.name.startswith("phase:"):
            phase = event.name.removeprefix("phase:")
        if event.tag == _EventType.Allocation and event.extra_fields.device.type == "cpu":
            total = event.extra_fields.total_allocated
            out[phase] = max(out.get(phase, 0), total)
            out["all"] = max(out.get("all", 0), total)
        for child in event.children:
            walk(child, phase)

    for event in prof.profiler.kineto_results.experimental_event_tree():
        walk(event, "load")
    return out


def mapped_parameter_bytes(prof, models) -> int:
    """Bytes of parameters whose storage the allocator never handed out: from_pretrained on CPU
    leaves them in the safetensors file's memory map (written pages become the process's own),
    so the profiler's running total misses them. They live through the whole step."""
    from torch._C._profiler import _EventType

    allocated = set()
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        if event.tag == _EventType.Allocation and event.extra_fields.alloc_size > 0:
            allocated.add(event.extra_fields.ptr)
        stack.extend(event.children)
    local = [p.to_local() if hasattr(p, "to_local") else p for m in models for p in m.parameters()]  # FSDP2: the shard
    storages = {p.untyped_storage().data_ptr(): p.untyped_storage().nbytes() for p in local}
    return sum(size for ptr, size in storages.items() if ptr not in allocated)


def with_mapped(measured: dict[str, int], mapped: int) -> dict[str, int]:
    return {phase: total + mapped for phase, total in measured.items()}


def child(shape: str, root: Path) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from corl.data.rows import build_problems, load_rows
    from corl.plan import Machine
    from corl.plan.machine import system_ram
    from corl.rollout import SamplingParams
    from corl.trainer import build_agent

    families = SHAPES[shape][0]
    cfg = run_config(shape, [family_folder(f, root) for f in families])
    rows = load_rows(cfg.data.train)[: cfg.cohort.prompts_per_step]
    problems, _ = build_problems(
        rows, cfg.data.train, [cfg.data.prompt_field], answer_field=None, image_field=cfg.data.image_field
    )
    params = SamplingParams(temperature=1.0, max_new_tokens=cfg.cohort.max_new_tokens)
    k = cfg.cohort.samples_per_prompt
    prompt_tokens = 0
    torch.manual_seed(0)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        agents = [build_agent(cfg, i, torch.device("cpu")) for i in range(len(cfg.agents))]
        for agent in agents:
            agent.engine.eos_ids = [len(agent.tokenizer) + 7]  # never drawn: every completion is full length
        for _ in range(2):
            rollouts = []
            with record_function("phase:sample"):
                for agent in agents:
                    rollouts.append(agent.sample(problems, k, params))
            with record_function("phase:update"):
                for agent, rollout in zip(agents, rollouts):
                    agent.update(rollout, torch.randn(len(problems), k), params)
            prompt_tokens = max(r.prompt_length for r in rollouts)
    measured = with_mapped(peaks(prof), mapped_parameter_bytes(prof, [a.model for a in agents]))
    planned = run_config(shape, [family_folder(f, root) for f in families], prompt_tokens)
    machine = Machine(1, system_ram(), "cpu", "this machine")
    return {
        "shape": shape,
        "measured": measured,
        "predicted": predicted_peaks(planned, machine),
        "without": predicted_peaks(planned, machine, without=TERMS),
        "sequences": len(problems) * k,
        "prompt_tokens": prompt_tokens,
        "completion": cfg.cohort.max_new_tokens,
    }


# Terms of the plan whose share each shape also prints by leaving them out (the plan without them).
TERMS = ("qk_norm_bytes_per_token", "root_gradient_bytes")


def predicted_peaks(cfg, machine, without: tuple[str, ...] = ()) -> dict[str, int]:
    """The plan's peaks of the step, its sampling and its update; `without`: with those
    functions of corl.plan.arithmetic counting 0 bytes."""
    from unittest import mock

    from corl.plan import Planner
    from corl.plan import arithmetic as a

    with contextlib.ExitStack() as stack:
        for name in without:
            stack.enter_context(mock.patch.object(a, name, lambda *args, **kwargs: 0))
        plan = Planner(cfg, machine).plan(cfg)
    totals = plan.ranks[0].totals
    return {"all": plan.worst.peak, "sample": totals["sample"], "update": max(totals["update"], totals["optimizer step"])}


def table_rows(shape: str, what: str, r: dict, width: int) -> list[str]:
    """predicted / measured per phase, and the step's peak without TERMS where they count."""
    mib = 2**20
    rows = []
    for phase in ("sample", "update", "all"):
        p, m = r["predicted"][phase], r["measured"][phase]
        rows.append(f"{shape:<{width}} {what:<84} {phase:<7} {p / mib:>8.1f}Mi {m / mib:>8.1f}Mi {p / m:>6.2f}")
        shape, what = "", ""
    p, m = r["without"]["all"], r["measured"]["all"]
    if p != r["predicted"]["all"]:
        label = "without " + ", ".join(TERMS)
        rows.append(f"{'':<{width}} {label:<84} {'all':<7} {p / mib:>8.1f}Mi {m / mib:>8.1f}Mi {p / m:>6.2f}")
    return rows


def describe(shape: str) -> str:
    families, prompts, k, tokens, minibatch, gc, bf16 = SHAPES[shape]
    parts = [" + ".join(families), f"{prompts}x{k} seqs", f"{tokens} tok", f"minibatch {minibatch or prompts * k}"]
    parts += ["checkpointing"] * gc + ["bf16 autocast"] * bf16
    return ", ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated names: " + ", ".join(SHAPES))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, Path(args.root))))
        return
    print(f"{'shape':<18} {'what':<84} {'phase':<7} {'predicted':>10} {'measured':>10} {'ratio':>6}")
    with tempfile.TemporaryDirectory(prefix="corl-memory-plan-") as root:
        for shape in args.shapes.split(","):
            out = subprocess.run(
                [sys.executable, __file__, "--child", shape, "--root", root], capture_output=True, text=True, check=False
            )
            if out.returncode:
                print(f"{shape}: failed\n{out.stderr[-3000:]}", file=sys.stderr)
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            print("\n".join(table_rows(shape, describe(shape) + f", P={r['prompt_tokens']}", r, 18)), flush=True)


if __name__ == "__main__":
    main()
