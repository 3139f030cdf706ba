"""Wall-clock speed-up of a 2-agent Co-RL cohort on 2 CPU cores: one process vs two.

Usage:
    python benchmarks/distributed_speedup.py                       # both cohorts, 10 steps each
    python benchmarks/distributed_speedup.py --pairs same --steps 20 --workdir /tmp/bench

Each cohort runs three ways; the figures and their ratios are printed:
    1 process,   2 intra-op threads  (the agents in turn, each op spread over both cores)
    2 processes, 1 thread each       (torchrun: one agent per process, side by side)
    1 process,   1 thread            (reference: one core, agents in turn)
The headline ratio compares the first two: both use the same 2 cores, which is the
question a user asks ("is torchrun worth it on my machine?"). torchrun itself gives each
process one thread when it starts several; two threads each would oversubscribe the
cores. Tiny models spread poorly over threads inside one op, so two processes win.

Cohorts: "mixed" is the embedded default's kind of pair (Llama-style with a character
tokenizer + Qwen2-style with BPE, whose shorter sequences make it the lighter agent: the
two processes then wait for the heavier one at every exchange, which caps the speed-up
at (t_a + t_b) / max(t_a, t_b)); "same" is two Llama-style agents (a seed-only cohort),
equal work per process. The models are built here (~1-3 min), at the embedded default's
size (hidden 128, 4 layers), briefly taught the synthetic task's solutions so that
completions have realistic lengths and varied answers.

Times: "loop" is the training loop after the first step (start-up, the warm-up step and
the final checkpoint excluded), measured on the main process; "total" is the whole
command. Other work on the machine skews every figure: the load average is printed.
Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import yaml

HERE = Path(__file__).resolve()


def build_models(root: Path, sft_steps: int = 40) -> tuple[dict[str, Path], Path]:
    """Two tiny families and a training file, built in `root` (reused when already there)."""
    import random

    import torch

    from corl.studies.tiny.families import build_random_model
    from corl.studies.tiny.task import make_split, write_jsonl
    from corl.studies.tiny.tokenizers import bpe_tokenizer, char_tokenizer

    rows = make_split("train", 512, seed=0)
    train = write_jsonl(rows, root / "train.jsonl")
    texts = [r["problem"] + "\n" + r["solution"] for r in rows]
    models = {}
    for i, (name, arch, tok) in enumerate(
        (("llama-char", "llama", char_tokenizer()), ("qwen2-bpe", "qwen2", bpe_tokenizer(texts, vocab_size=300)))
    ):
        models[name] = root / name
        if (root / name / "config.json").is_file():
            continue
        model = build_random_model(arch, tok, hidden=128, layers=4, heads=4, ffn=512, seed=i)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
        rng = random.Random(i)
        for _ in range(sft_steps):
            enc = tok(
                [t + tok.eos_token for t in rng.sample(texts, 16)], return_tensors="pt", padding=True, add_special_tokens=False
            )
            loss = model(**enc, labels=enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
    return models, train


def config(models: dict[str, Path], train: Path, steps: int, prompts: int, k: int, max_new_tokens: int) -> dict:
    return {
        "output_dir": "runs/bench",
        "device": "cpu",
        "agents": [{"name": name, "model": str(path), "lr": 2.0e-4} for name, path in models.items()],
        "data": {"train": str(train), "template": "{problem}\n", "instruction": ""},
        "cohort": {"steps": steps, "prompts_per_step": prompts, "samples_per_prompt": k, "max_new_tokens": max_new_tokens},
        "logging": {"tensorboard": False, "progress": False},
    }


def worker(config_path: Path, run_dir: Path, clock_file: Path) -> None:
    """One rank (or the single process): train, and on the main rank record when each step ends."""
    from corl.config import load_config
    from corl.launch.run import launch

    ends: list[float] = []

    @contextmanager
    def clock(trainer):  # a progress_factory: only the main rank gets one
        try:
            yield lambda step, metrics: ends.append(time.perf_counter())
        finally:
            clock_file.write_text(json.dumps(ends))

    launch(load_config(config_path), run_dir, progress_factory=clock)


def run(label: str, cfg_path: Path, root: Path, nproc: int, threads: int) -> dict:
    slug = label.replace(" ", "")
    run_dir, clock = root / slug, root / f"{slug}.clock.json"
    shutil.rmtree(run_dir, ignore_errors=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}
    entry = [str(HERE), "--worker", str(cfg_path), str(run_dir), str(clock)]
    if nproc == 1:
        cmd = [sys.executable, *entry]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), *entry]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    total = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{label} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    ends = json.loads(clock.read_text())
    loop = ends[-1] - ends[0]  # steps 1 .. S-1: the first step warms up
    return {"label": label, "total_s": total, "loop_s": loop, "per_step_s": loop / max(len(ends) - 1, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--prompts", type=int, default=16, help="prompts per step")
    parser.add_argument("--k", type=int, default=8, help="samples per prompt")
    parser.add_argument("--max-new-tokens", type=int, default=56)
    parser.add_argument("--pairs", default="mixed,same", help="mixed (Llama-char + Qwen2-BPE), same (two Llama-char), or both")
    parser.add_argument("--no-one-thread", action="store_true", help="skip the 1-process, 1-thread reference")
    parser.add_argument("--workdir", type=Path, help="keep models and runs here (models are reused); default: a temporary folder")
    parser.add_argument("--worker", nargs=3, metavar=("CONFIG", "RUN_DIR", "CLOCK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*map(Path, args.worker))
        return

    with tempfile.TemporaryDirectory() as tmp:
        root = args.workdir or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        models, train = build_models(root)
        print(f"tiny models ready in {time.perf_counter() - t0:.0f} s")
        load_before = os.getloadavg()[0]
        print(f"CPU cores: {os.cpu_count()}; load average before: {load_before:.2f}")
        cohorts = {"mixed": models, "same": {"llama-a": models["llama-char"], "llama-b": models["llama-char"]}}
        rows = []
        for pair in args.pairs.split(","):
            cfg_path = root / f"{pair}.yaml"
            cfg_path.write_text(
                yaml.safe_dump(config(cohorts[pair], train, args.steps, args.prompts, args.k, args.max_new_tokens))
            )
            ways = [("1 process x 2 threads", 1, 2), ("2 processes x 1 thread", 2, 1)]
            ways += [] if args.no_one_thread else [("1 process x 1 thread", 1, 1)]
            rows += [{"pair": pair, **run(f"{pair} {label}", cfg_path, root, n, t)} for label, n, t in ways]
    print(f"\n2 agents, {args.steps} steps of {args.prompts} prompts x {args.k} samples, <= {args.max_new_tokens} new tokens")
    print("pair mixed: Llama-style (char tokenizer) + Qwen2-style (BPE; shorter sequences, so the lighter agent)")
    print("pair same:  two Llama-style agents (a seed-only cohort): equal work per process")
    print(f"{'run':<32}{'loop s':>9}{'s/step':>9}{'total s':>9}")
    for r in rows:
        print(f"{r['label']:<32}{r['loop_s']:>9.1f}{r['per_step_s']:>9.2f}{r['total_s']:>9.1f}")
    print()
    for pair in dict.fromkeys(r["pair"] for r in rows):
        one, two, *rest = [r for r in rows if r["pair"] == pair]
        line = (
            f"{pair}: 2 processes vs 1 process on the same 2 cores: {one['loop_s'] / two['loop_s']:.2f}x training loop, "
            f"{one['total_s'] / two['total_s']:.2f}x whole command"
        )
        if rest:
            line += f" (vs 1 process x 1 thread: {rest[0]['loop_s'] / two['loop_s']:.2f}x loop)"
        print(line)
    print(f"load average after: {os.getloadavg()[0]:.2f} (other work on the machine skews every figure)")
    if max(load_before, os.getloadavg()[0]) > 0.5:
        print(
            "warning: the machine was busy. A process with 2 threads suffers most from that (its threads wait for\n"
            "each other at every op while another program holds a core): rerun on a quiet machine for the headline."
        )


if __name__ == "__main__":
    main()
