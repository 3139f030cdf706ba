"""corl vs TRL's GRPOTrainer on the same job: per-step time (alternating pairs) and peak memory.

Usage (needs TRL, an optional benchmark dependency: pip install trl==1.16.0):
    python benchmarks/vs_trl.py                     # 2 warm-up + 6 measured steps each, alternating
    python benchmarks/vs_trl.py --pairs 8 --workdir /tmp/vs-trl
    python benchmarks/vs_trl.py --model ~/.cache/corl/gguf/files/SmolLM2-135M-Instruct.Q4_1.gguf --prompts 4 --pairs 2 --warmup 1 --full-length
                                                    # a real pretrained model (a GGUF file or HF folder)

With --model, the model is a real one (SmolLM2-135M-Instruct: python -m corl.studies.real.weights
fetches it), prompted through its own chat template on both sides (TRL: conversational prompts;
corl: chat_template: true), with an instruction to answer briefly; the rest of the job is the same.

The job: one tiny Llama-style model (hidden 128, 4 layers, 4 heads, ffn 512, per-character
tokenizer), taught the synthetic task's worked solutions for a few seconds so that its
completions have realistic lengths and end with EOS; ground-truth reward (1 if the
completion's final answer equals the gold one: corl's own grader on both sides); 16
prompts x K = 8 completions per step, <= 56 new tokens, temperature 1, beta 0 (no
reference model), one optimizer step per batch (TRL: num_iterations 1, one generation per
step), AdamW at the same constant lr, grad-norm clip 1.0, loss "grpo" (per-sequence mean)
on both. TRL's defaults that would make it slower on CPU are switched off: gradient
checkpointing and bf16.

Each trainer runs in a process of its own (so that its peak memory is its own), started
once; the parent then asks them for one step at a time, alternating which goes first in
each pair, and prints TRL/corl per pair and the median. A step is everything between
two optimizer steps: generation, reward, update (TRL: on_step_begin .. on_step_end;
corl: CohortTrainer.step). Peak memory: each process's peak RSS (ru_maxrss), in total and
above its RSS when ready (model loaded, before the first step). The mean completion
length of each side is printed too: the two sample independently, and a step's cost
grows with it. Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

# --prompts reaches the children through the environment (they are this file, started again)
PROMPTS, K, MAX_NEW, LR = int(os.environ.get("VS_TRL_PROMPTS", "16")), 8, 56, 2e-4
# --full-length: every completion runs to MAX_NEW on both sides (corl: an EOS that is never drawn;
# TRL: min_new_tokens), so the step times compare the same work whatever each side's model learns
FULL_LENGTH = os.environ.get("VS_TRL_FULL_LENGTH") == "1"


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def build_model(folder: Path, steps: int, arch: str = "llama", seed: int = 0) -> None:
    """A tiny `arch` model at the embedded default's size, taught the worked solutions for `steps` SFT steps."""
    import torch

    from corl.studies.tiny.families import build_random_model
    from corl.studies.tiny.task import make_split, prompt_text
    from corl.studies.tiny.tokenizers import char_tokenizer

    tok = char_tokenizer()
    model = build_random_model(arch, tok, hidden=128, layers=4, heads=4, ffn=512, seed=seed)
    rows = make_split("train", 2000, seed=0)
    rng = random.Random(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        texts = [prompt_text(r["problem"]) + r["solution"] + tok.eos_token for r in rng.sample(rows, 16)]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        loss = model(**enc, labels=enc["input_ids"].masked_fill(enc["attention_mask"] == 0, -100)).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.save_pretrained(folder)
    tok.save_pretrained(folder)


def say(obj) -> None:
    print(json.dumps(obj), flush=True)


REAL_INSTRUCTION = "Answer with the number only."  # a real model's prompt: its chat template around problem + this


def corl_config(
    out: Path, models: list[Path], data: Path, label_source: str, names: list[str] | None = None, chat: bool = False
) -> dict:
    """The `corl train` config of the benchmarks' job: agents `names` (default m0, m1, ...) on `data`,
    K samples of PROMPTS prompts, beta 0, every other setting corl's default (grpo loss, grad norm 1).
    chat: a real model, prompted through its chat template."""
    names = names or [f"m{i}" for i in range(len(models))]
    prompt = (
        {"template": "{problem}\n{instruction}", "instruction": REAL_INSTRUCTION}
        if chat
        else {"template": "{problem}\n", "instruction": ""}
    )
    return {
        "output_dir": str(out),
        "agents": [{"name": n, "model": str(m), "lr": LR, "chat_template": chat} for n, m in zip(names, models)],
        "data": {"train": str(data), **prompt},
        "cohort": {
            "label_source": label_source,
            "reward": "agreement",
            "samples_per_prompt": K,
            "prompts_per_step": PROMPTS,
            "steps": 10_000,
            "max_new_tokens": MAX_NEW,
            "temperature": 1.0,
            "seed": 0,
        },
        "grpo": {"beta": 0.0},
        "logging": {"tensorboard": False, "progress": False},
    }


def _has_chat_template(folder: Path) -> bool:
    from transformers import AutoTokenizer

    return bool(AutoTokenizer.from_pretrained(folder).chat_template)


def corl_child(folder: Path, data: Path, workdir: Path) -> None:
    import torch

    from corl.config import validate_config
    from corl.trainer import CohortTrainer

    torch.set_flush_denormal(True)
    raw = corl_config(workdir / "corl-run", [folder], data, "truth", names=["a"], chat=_has_chat_template(folder))
    trainer = CohortTrainer(validate_config(raw), workdir / "corl-run")
    agent = trainer.agents[0]
    if FULL_LENGTH:
        agent.engine.eos_ids = [len(agent.tokenizer) + 7]  # never drawn: every completion is full length
    lengths: list[float] = []
    sample = agent.sample

    def recording(*args, **kwargs):
        r = sample(*args, **kwargs)
        lengths.append(float(r.completion_lengths.float().mean()))
        return r

    agent.sample = recording
    say({"ready_rss": rss_bytes()})
    for step, line in enumerate(sys.stdin):
        if line.strip() == "quit":
            break
        t0 = time.perf_counter()
        trainer.step(step)
        say({"seconds": time.perf_counter() - t0, "length": lengths[-1]})
    say({"peak": peak_bytes()})


def trl_child(folder: Path, data: Path, workdir: Path) -> None:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from corl.answers import grade
    from corl.studies.tiny.task import prompt_text

    torch.set_flush_denormal(True)
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    if _has_chat_template(folder):  # conversational prompts: TRL applies the chat template, as corl does
        prompts = [[{"role": "user", "content": f"{r['problem']}\n{REAL_INSTRUCTION}"}] for r in rows]
    else:
        prompts = [prompt_text(r["problem"]) for r in rows]
    dataset = Dataset.from_list([{"prompt": p, "answer": r["answer"]} for p, r in zip(prompts, rows, strict=True)])
    lengths: list[float] = []

    def gt_reward(completions, answer, completion_ids, **_):
        lengths.append(sum(len(c) for c in completion_ids) / len(completion_ids))
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]  # conversational: the reply
        return [float(grade(c, a)) for c, a in zip(texts, answer, strict=True)]

    class Stepper(TrainerCallback):
        """Holds every step until the parent asks for it, then reports its time."""

        def on_step_begin(self, args, state, control, **kwargs):
            if sys.stdin.readline().strip() == "quit":
                say({"peak": peak_bytes()})
                os._exit(0)
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            say({"seconds": time.perf_counter() - self.t0, "length": lengths[-1]})

    config = GRPOConfig(
        output_dir=str(workdir / "trl-run"),
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        learning_rate=LR,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=1.0,
        per_device_train_batch_size=PROMPTS * K,
        gradient_accumulation_steps=1,
        num_generations=K,
        max_completion_length=MAX_NEW,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        beta=0.0,
        num_iterations=1,
        loss_type="grpo",
        scale_rewards="group",
        epsilon=0.2,
        max_steps=10_000,
        logging_steps=10_000,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,  # its progress bar would interleave with the table (and costs TRL a little)
        seed=0,
        dataloader_num_workers=0,
        generation_kwargs={"min_new_tokens": MAX_NEW} if FULL_LENGTH else None,
    )
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager")  # as corl loads it
    tokenizer = AutoTokenizer.from_pretrained(folder)
    trainer = GRPOTrainer(model=model, reward_funcs=gt_reward, args=config, train_dataset=dataset, processing_class=tokenizer)
    trainer.add_callback(Stepper())
    say({"ready_rss": rss_bytes()})
    trainer.train()


def real_rows(n: int) -> list[dict]:
    """Sums of two numbers below 20: a real model answers some and misses some (mixed rewards)."""
    rng = random.Random(0)
    pairs = [(rng.randint(2, 19), rng.randint(2, 19)) for _ in range(n)]
    return [{"id": str(i), "problem": f"What is {a} + {b}?", "answer": str(a + b)} for i, (a, b) in enumerate(pairs)]


class Child:
    def __init__(self, kind: str, folder: Path, data: Path, workdir: Path):
        cmd = [sys.executable, __file__, "--child", kind, str(folder), str(data), str(workdir)]
        self.kind = kind
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.ready_rss = self.read()["ready_rss"]

    def read(self) -> dict:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.kind} child exited (rc {self.proc.wait()})")
            if line.startswith("{"):
                return json.loads(line)

    def step(self) -> dict:
        self.proc.stdin.write("step\n")
        return self.read()

    def quit(self) -> int:
        self.proc.stdin.write("quit\n")
        peak = self.read()["peak"]
        self.proc.wait()
        return peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--pretrain-steps", type=int, default=300)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/corl-vs-trl"))
    ap.add_argument("--model", help="a real model (GGUF file, HF folder or id) instead of the tiny Llama")
    ap.add_argument(
        "--prompts",
        type=int,
        help="prompts per step (default 16); SmolLM2 at 16 x 8: TRL's step held 14 GiB and was OOM-killed here",
    )
    ap.add_argument("--full-length", action="store_true", help="every completion runs to the token limit on both sides")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.full_length:
        os.environ["VS_TRL_FULL_LENGTH"] = "1"
    if args.prompts:
        os.environ["VS_TRL_PROMPTS"] = str(args.prompts)
        globals()["PROMPTS"] = args.prompts
    if args.child:
        kind, folder, data, workdir = args.child
        (corl_child if kind == "corl" else trl_child)(Path(folder), Path(data), Path(workdir))
        return

    from corl.studies.tiny.task import make_split, write_jsonl

    args.workdir.mkdir(parents=True, exist_ok=True)
    folder, data = args.workdir / "model", args.workdir / "train.jsonl"
    if args.model:
        from corl.models import resolve_model_path

        folder = Path(resolve_model_path(args.model))  # a GGUF file: its converted folder, as corl trains it
        write_jsonl(real_rows(2000), data)
    else:
        if not (folder / "config.json").exists():
            build_model(folder, args.pretrain_steps)
        write_jsonl(make_split("train", 2000, seed=0), data)
    print(f"load average {os.getloadavg()[0]:.1f}; {folder.name}: {PROMPTS} prompts x K={K}, <= {MAX_NEW} new tokens, beta 0")
    children = {"corl": Child("corl", folder, data, args.workdir), "trl": Child("trl", folder, data, args.workdir)}
    for _ in range(args.warmup):
        for c in children.values():
            c.step()
    ratios = []
    print(f"{'pair':>4} {'first':>5} {'corl s':>8} {'trl s':>8} {'trl/corl':>9} {'corl len':>9} {'trl len':>8}")
    for i in range(args.pairs):
        order = ("corl", "trl") if i % 2 == 0 else ("trl", "corl")
        res = {name: children[name].step() for name in order}
        ratio = res["trl"]["seconds"] / res["corl"]["seconds"]
        ratios.append(ratio)
        print(
            f"{i:>4} {order[0]:>5} {res['corl']['seconds']:8.2f} {res['trl']['seconds']:8.2f} {ratio:9.2f} "
            f"{res['corl']['length']:9.1f} {res['trl']['length']:8.1f}"
        )
    print(f"median TRL/corl step time: {statistics.median(ratios):.2f}x over {len(ratios)} pairs")
    for name, c in children.items():
        peak = c.quit()
        print(
            f"{name:>5} peak RSS {peak / 1e9:.2f} GB (above ready {(peak - c.ready_rss) / 1e9:.2f} GB; ready {c.ready_rss / 1e9:.2f} GB)"
        )


if __name__ == "__main__":
    main()
