"""Peak memory of one GRPO update at a 151k-token vocabulary: does it grow with N * C, or with V?

Usage:
    python benchmarks/memory_vocab.py                        # the default grid (~15 minutes on 2 cores)
    python benchmarks/memory_vocab.py --configs 128x128,128x512 --vocab 151936

A tiny Llama-style model (hidden 64, 2 layers, 4 heads, ffn 128, sdpa attention) with
Qwen2.5's vocabulary size, V = 151,936: the output projection is 9.7M of its ~9.9M
parameters, so the logits are what a step could blow up on. No tokenizer: prompts and
completions are random token ids (P = 16 prompt tokens, C completion tokens, every
sequence full length, rewards 1/0 alternating inside each group of K = 8 so that every
sequence carries gradient: the worst case for the update).

Measurement: each configuration runs in a fresh subprocess. It builds the agent, runs a
warm-up update on a tiny batch (so that AdamW's states and the gradients exist), then
reads its resident set size (RSS, /proc/self/statm): the baseline "model + optimizer
states". It then runs one full `Agent.update` on N x C and reads the process's peak RSS
(`resource.getrusage(RUSAGE_SELF).ru_maxrss`). Printed: peak - baseline. torch's CPU
allocator returns large blocks to the OS, so the peak RSS is the step's real peak.
(tracemalloc does not see torch's allocations, hence RSS.)

Modes:
    chunked     the update as it is: the head applied to completion positions only, in
                chunks of corl.trainer.logprobs.LOGIT_CHUNK_ELEMENTS logits, checkpointed
    unchunked   the same update forced through the plain forward (logits of every
                completion position at once, [N, C, V]); what the update held before
                issue 19, less the prompt positions. Run at small N only: [128, 128, V]
                would be 10 GB of float32 logits, several times over.
    sampling    the rollout side: the HF engine's sampler (corl.rollout.compact) drawing
                N sequences of C tokens from N / K random prompts (every sequence runs to
                C: EOS is one id in 151k); its KV cache and one [N, V] row of logits per step.
                Slow on CPU (~0.8 s a token at N = 128): torch.multinomial over 151k ids
                is 0.6 s of it, as in transformers' generate

Sdpa attention: eager attention keeps [N, heads, S, S] weights per layer for the backward
(O(N * S^2), 1.6 GB per layer at 128 x 528) which has nothing to do with the vocabulary.
Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import time
from types import SimpleNamespace

P, K = 16, 8


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(n: int, c: int, vocab: int, mode: str) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    import corl.trainer.logprobs as agent_module
    from corl.config import AgentConfig, GRPOConfig
    from corl.data.rows import PromptTemplate
    from corl.rollout import Rollout, SamplingParams
    from corl.trainer import Agent

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=1024, tie_word_embeddings=True,
        bos_token_id=0, eos_token_id=1, pad_token_id=2,
    )  # fmt: skip
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    params = SamplingParams(temperature=1.0, max_new_tokens=c)
    if mode == "sampling":
        return sampling_peak(model, n, c, vocab, params)
    tokenizer = SimpleNamespace(eos_token_id=1, pad_token_id=2)  # the HF engine's constructor reads only these
    agent = Agent(
        AgentConfig(name="a", model="random", lr=1e-4),
        model,
        tokenizer,
        PromptTemplate("{problem}", ""),
        "problem",
        GRPOConfig(),
    )
    if mode == "unchunked":
        agent_module.PLAIN_HEAD_MODEL_TYPES = frozenset()

    def rollout(n: int, c: int) -> tuple[Rollout, torch.Tensor]:
        ids = torch.randint(3, vocab, (n, P + c))
        mask = torch.ones(n, c, dtype=torch.long)
        r = Rollout(
            input_ids=ids,
            attention_mask=torch.ones(n, P + c, dtype=torch.long),
            completion_mask=mask,
            sampling_logprobs=torch.zeros(n, c),
            texts=[""] * n,
            prompt_length=P,
            num_samples=K,
            eos_ids=(1,),
        )
        rewards = (torch.arange(n) % 2).float().view(-1, K)  # [B, K]: 1/0 alternating, all active
        return r, rewards

    warm, warm_rewards = rollout(K, 4)
    agent.update(warm, warm_rewards, params)  # AdamW states and gradients now exist
    big, rewards = rollout(n, c)
    baseline = rss_bytes()
    t0 = time.perf_counter()
    stats = agent.update(big, rewards, params)
    return result(model, n, c, vocab, mode, baseline, time.perf_counter() - t0, stats.active_sequences)


def sampling_peak(model, n: int, c: int, vocab: int, params) -> dict:
    """Peak RSS of the HF engine's sampler drawing n sequences of c tokens (n / K prompts)."""
    import torch

    from corl.rollout.compact import sample_compacting

    model.eval()
    prompts = torch.randint(3, vocab, (n // K, P))
    prompt_of = torch.arange(n) // K
    ones = torch.ones(n // K, P, dtype=torch.long)
    sample_compacting(model, prompts[:1], ones[:1], prompt_of[:K], dataclasses.replace(params, max_new_tokens=4), [1], 2)
    baseline = rss_bytes()
    t0 = time.perf_counter()
    tokens, _ = sample_compacting(model, prompts, ones, prompt_of, params, [1], 2)
    return result(model, n, c, vocab, "sampling", baseline, time.perf_counter() - t0, int(tokens.shape[1]))


def result(model, n: int, c: int, vocab: int, mode: str, baseline: int, seconds: float, active: int) -> dict:
    """One configuration's figures; the peak is the process's, read now."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "n": n,
        "c": c,
        "vocab": vocab,
        "mode": mode,
        "params": sum(p.numel() for p in model.parameters()),
        "baseline_gb": baseline / 1e9,
        "peak_above_gb": (peak - baseline) / 1e9,
        "seconds": seconds,
        "active": active,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="128x128,128x512", help="chunked mode: NxC,...")
    ap.add_argument("--unchunked", default="8x128,16x128", help="unchunked mode: NxC,... ('' to skip)")
    ap.add_argument("--sampling", default="128x128,128x512", help="the HF engine's sampler: NxC,... ('' to skip)")
    ap.add_argument("--vocab", type=int, default=151_936)
    ap.add_argument("--child", nargs=4, metavar=("N", "C", "VOCAB", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        n, c, vocab, mode = args.child
        print(json.dumps(child(int(n), int(c), int(vocab), mode)))
        return

    runs = (
        [(cfg, "chunked") for cfg in args.configs.split(",") if cfg]
        + [(cfg, "unchunked") for cfg in args.unchunked.split(",") if cfg]
        + [(cfg, "sampling") for cfg in args.sampling.split(",") if cfg]
    )
    print(f"load average {os.getloadavg()[0]:.1f}; V = {args.vocab}; peak RSS above the post-warm-up baseline")
    print(f"{'mode':>10} {'N x C':>9} {'baseline GB':>12} {'peak above GB':>14} {'GB per 1k tokens':>17} {'step s':>8}")
    results = []
    for cfg, mode in runs:
        n, c = (int(x) for x in cfg.split("x"))
        cmd = [sys.executable, __file__, "--child", str(n), str(c), str(args.vocab), mode]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            print(f"{mode:>10} {cfg:>9}  failed (rc {out.returncode}): {out.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        results.append(r)
        per_k = r["peak_above_gb"] / (n * c / 1000)
        print(f"{mode:>10} {cfg:>9} {r['baseline_gb']:12.3f} {r['peak_above_gb']:14.3f} {per_k:17.4f} {r['seconds']:8.1f}")
    for mode in ("chunked", "sampling"):
        same = [r for r in results if r["mode"] == mode]
        if len(same) >= 2:
            a, b = same[0], same[-1]
            tokens = (b["n"] * b["c"]) / (a["n"] * a["c"])
            growth = b["peak_above_gb"] / a["peak_above_gb"]
            verdict = "<=" if growth <= tokens else ">"
            print(f"{mode}: N*C grew {tokens:.2f}x, peak above baseline grew {growth:.2f}x ({verdict} N*C)")


if __name__ == "__main__":
    main()
