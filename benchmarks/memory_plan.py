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
starts before the first weight is allocated, so the total is everything the step holds).
It is the quantity the plan predicts and the CPU counterpart of
`torch.cuda.max_memory_allocated`. RSS would add the interpreter, the libraries and the
allocator's slack, and the profiler's own buffers. Prints a table; not a test.
"""

from __future__ import annotations

import argparse
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
}


def family_folder(family: str, root: Path) -> Path:
    """A Hugging Face folder with the family's architecture (random weights) and tokenizer."""
    folder = root / family
    if not (folder / "config.json").is_file() and family in vision_families():
        from corl.studies.tiny_vl.families import build_vl_family, save_vl

        save_vl(*build_vl_family(family), folder)
    if not (folder / "config.json").is_file():
        from corl.studies.tiny.families import build_random_model, get_family
        from corl.studies.tiny.pretrain import build_tokenizer

        spec = get_family(family)
        tokenizer = build_tokenizer(spec)
        model = build_random_model(spec.arch, tokenizer, hidden=spec.hidden, layers=spec.layers, heads=spec.heads, ffn=spec.ffn)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return folder


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


def child(shape: str, root: Path) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from corl.data.rows import build_problems, load_rows
    from corl.plan import Machine, Planner
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
    measured = peaks(prof)
    planned = run_config(shape, [family_folder(f, root) for f in families], prompt_tokens)
    plan = Planner(planned, Machine(1, system_ram(), "cpu", "this machine")).plan(planned)
    totals = plan.ranks[0].totals
    return {
        "shape": shape,
        "measured": measured,
        "predicted": {
            "all": plan.worst.peak,
            "sample": totals["sample"],
            "update": max(totals["update"], totals["optimizer step"]),
        },
        "sequences": len(problems) * k,
        "prompt_tokens": prompt_tokens,
        "completion": cfg.cohort.max_new_tokens,
    }


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
    mib = 2**20
    print(f"{'shape':<18} {'what':<72} {'phase':<7} {'predicted':>10} {'measured':>10} {'ratio':>6}")
    with tempfile.TemporaryDirectory(prefix="corl-memory-plan-") as root:
        for shape in args.shapes.split(","):
            out = subprocess.run(
                [sys.executable, __file__, "--child", shape, "--root", root], capture_output=True, text=True, check=False
            )
            if out.returncode:
                print(f"{shape}: failed\n{out.stderr[-3000:]}", file=sys.stderr)
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            what = describe(shape) + f", P={r['prompt_tokens']}"
            for phase in ("sample", "update", "all"):
                p, m = r["predicted"][phase], r["measured"][phase]
                print(f"{shape:<18} {what:<72} {phase:<7} {p / mib:>8.1f}Mi {m / mib:>8.1f}Mi {p / m:>6.2f}", flush=True)
                shape, what = "", ""


if __name__ == "__main__":
    main()
