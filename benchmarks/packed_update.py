"""The GRPO update on a batch of mixed lengths: padded micro-batches against token-budget packed ones.

Usage:
    python benchmarks/packed_update.py                      # 32 sequences, completions of 16-512 tokens
    python benchmarks/packed_update.py --sequences 64 --budget 8192 --repeats 5
    python benchmarks/packed_update.py --threads 1          # on a shared, oversubscribed machine
    python benchmarks/packed_update.py --checkpointing      # all three with compute.gradient_checkpointing

A Llama-style model built from its config (hidden 128, 4 layers, 4 heads with 2 KV heads, MLP
512, vocabulary 2,000, sdpa attention (corl_sdpa once prepared), float32, CPU), no tokenizer: 4 prompts of 8-24 random
tokens (left-padded to 24), K = 8 completions each whose lengths are spread evenly over
16-512 tokens, in shuffled order, rewards alternating 1/0 in each group so that every
sequence carries gradient. Three updates of the same batch, run in turn in one process
(median of --repeats each, after one warm-up round):

    padded        grpo.minibatch_size unset: one forward/backward of every sequence padded to
                  the longest (what corl does by default)
    padded-bucket grpo.minibatch_size = budget // (24 + 512) sequences: the same memory bound as
                  the token budget, rows sorted into length buckets, each trimmed to its longest
    packed        grpo.max_tokens_per_microbatch = budget: each micro-batch one packed row,
                  positions restarting per sequence, causal SDPA per sequence (no padding)

Printed: wall seconds per update (and the process's CPU seconds) and the ratios padded / packed.
All three compute the same loss and gradient (tests/trainer/test_update_passes.py). On a machine whose
cores other jobs keep busy, torch's OpenMP threads wait on each other and the wall times say more
about the neighbours than about the update: measure with --threads 1 there.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from transformers import AutoModelForCausalLM, LlamaConfig

from corl.config import AgentConfig, ComputeConfig, GRPOConfig
from corl.data.rows import PromptTemplate
from corl.rollout import Rollout, SamplingParams
from corl.trainer import Agent

PROMPT, LONGEST, SHORTEST, K = 24, 512, 16, 8


def batch(sequences: int, seed: int = 0) -> Rollout:
    """`sequences` rows: left-padded prompts of 8-24 tokens, completions of 16-512 tokens (EOS last)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, 2000, (sequences, PROMPT + LONGEST), generator=g)
    mask = torch.zeros_like(ids)
    completion = torch.zeros(sequences, LONGEST, dtype=torch.long)
    lengths = torch.linspace(SHORTEST, LONGEST, sequences).round().long()[torch.randperm(sequences, generator=g)]
    for row, length in enumerate(lengths.tolist()):
        prompt = int(torch.randint(8, PROMPT + 1, (1,), generator=g))
        mask[row, PROMPT - prompt : PROMPT + length] = 1
        completion[row, :length] = 1
        ids[row, PROMPT + length :] = 2  # pad
        ids[row, : PROMPT - prompt] = 2
    return Rollout(ids, mask, completion, None, [""] * sequences, PROMPT, K)


def agent_for(grpo: GRPOConfig, compute: ComputeConfig | None = None) -> Agent:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=2000,
        hidden_size=128,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
    )
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    tokenizer = type("Tok", (), {"eos_token_id": 1, "pad_token_id": 2})()
    return Agent(AgentConfig(name="a", model="m", lr=1e-5), model, tokenizer, PromptTemplate(), "problem", grpo, compute=compute)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=32)
    parser.add_argument("--budget", type=int, default=4096, help="grpo.max_tokens_per_microbatch of the packed update")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice)")
    parser.add_argument("--checkpointing", action="store_true", help="compute.gradient_checkpointing in all three")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rollout = batch(args.sequences)
    rewards = torch.tensor([[1.0, 0.0] * (K // 2)] * (args.sequences // K))
    params = SamplingParams(max_new_tokens=LONGEST)
    rows = max(1, args.budget // (PROMPT + LONGEST))
    compute = ComputeConfig(gradient_checkpointing=args.checkpointing)
    modes = {
        "padded": agent_for(GRPOConfig(), compute),
        "padded-bucket": agent_for(GRPOConfig(minibatch_size=rows), compute),
        "packed": agent_for(GRPOConfig(max_tokens_per_microbatch=args.budget), compute),
    }
    times: dict[str, list[float]] = {name: [] for name in modes}
    cpu: dict[str, list[float]] = {name: [] for name in modes}
    for round_index in range(args.repeats + 1):  # the first round warms up (allocator, AdamW states)
        for name, agent in modes.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            agent.update(rollout, rewards, params)
            if round_index:
                times[name].append(time.perf_counter() - start)
                cpu[name].append(time.process_time() - start_cpu)
    real = int(rollout.attention_mask.sum())
    print(
        f"{args.sequences} sequences, completions {SHORTEST}-{LONGEST} tokens, {real} real tokens of "
        f"{rollout.attention_mask.numel()} padded; budget {args.budget} tokens ({rows} padded rows); "
        f"{torch.get_num_threads()} threads" + (", gradient checkpointing" if args.checkpointing else "")
    )
    median = {name: statistics.median(t) for name, t in times.items()}
    for name, seconds in median.items():
        runs = ", ".join(f"{t:.2f}" for t in times[name])
        print(f"  {name:14s} {seconds:7.2f} s per update, {statistics.median(cpu[name]):7.2f} CPU-s  (runs: {runs})")
    print(f"packed vs padded:        {median['padded'] / median['packed']:.2f}x faster")
    print(f"packed vs padded-bucket: {median['padded-bucket'] / median['packed']:.2f}x faster")


if __name__ == "__main__":
    main()
