"""The sections of a run configuration about where and how it runs rather than what it
trains: compute, distribution, health checks, logging, the memory plan, the final suite."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from corl.config.sections import _Strict


class LoRAConfig(_Strict):
    """Low-rank adapters (Hu et al. 2021, arXiv:2106.09685) through `peft`: only the adapters train."""

    r: int = Field(16, ge=1, description="Adapter rank.")
    alpha: float = Field(32.0, gt=0, description="The adapter update is scaled by alpha / r.")
    dropout: float = Field(0.0, ge=0, lt=1, description="Dropout on the adapters' input (peft's lora_dropout).")
    target_modules: list[str] | str = Field(
        "all-linear", description="Names of the modules to adapt, or 'all-linear' (every linear layer but the output head)."
    )


class ComputeConfig(_Strict):
    """How each agent's model is computed and held in memory. Defaults suit the tiny CPU cohort."""

    bf16: bool = Field(
        False, description="Compute in bfloat16 with float32 master weights (autocast; under FSDP its mixed-precision policy)."
    )
    gradient_checkpointing: bool = Field(
        False, description="Recompute activations during the backward pass: less memory, about a third more compute."
    )
    lora: LoRAConfig | None = Field(
        None, description="Train low-rank adapters instead of every weight (needs `pip install peft`)."
    )


class DistributedConfig(_Strict):
    """Runs under torchrun: one group of ranks per agent (see `corl.parallel` and `corl.launch.run`)."""

    timeout_s: float = Field(
        600.0,
        gt=0,
        description="Seconds a rank waits for the others at any collective before the run fails, naming the ranks "
        "(and agents) that did not answer. Must exceed the longest legitimate wait: one agent's step, validation or "
        "checkpoint while the others are done.",
    )
    placement: Literal["contiguous", "round_robin"] = Field(
        "contiguous",
        description="With fewer processes than agents, each process hosts several whole agents: contiguous blocks "
        "(0,1 | 2) or dealt round robin (0,2 | 1).",
    )
    fsdp: bool = Field(
        False,
        description="Shard each agent's model over its own data-parallel ranks with FSDP2 (needs torchrun; NCCL on GPUs, "
        "gloo on CPU). Checkpoints then hold each rank's shards (torch.distributed.checkpoint) beside the plain HF folder.",
    )
    sampling: Literal["sharded", "replicated"] = Field(
        "sharded",
        description="How an agent's data-parallel ranks sample: each its share of the prompts (sharded), or every rank the "
        "whole batch from one seed, keeping its share (replicated: the draws of a single process whatever the number of "
        "ranks, so runs and resumes on different rank counts can be compared; costs the ranks-per-agent times the sampling).",
    )
    preempt_grace_s: float = Field(
        25.0,
        gt=0,
        description="On SIGTERM (SLURM, Kubernetes, torchrun's parent) every rank finishes its step, the run saves a "
        "checkpoint and exits with status 143; if that takes longer than this, it exits without one (status 1). "
        "Keep it under the launcher's kill timeout (torchrun and SLURM: 30 s). Ctrl-C has no deadline (a second "
        "Ctrl-C stops at once), and a signal while the run starts (models loading) stops it at once.",
    )


class HealthConfig(_Strict):
    """Checks run every step (see `corl.tracking.health`)."""

    on_nonfinite: Literal["stop", "skip"] = Field(
        "stop",
        description="A NaN/inf reward, loss or gradient: stop the run naming the agent and step, or skip that "
        "optimizer step and go on. Non-finite weights always stop the run.",
    )
    max_weight_norm_ratio: float | None = Field(
        1.5,
        gt=1,
        description="Stop the run when one update multiplies the norm of all of an agent's weights by more than "
        "this (a diverging update, e.g. a far too high lr; logged every step as <agent>/weight_norm_ratio, which "
        "normal runs keep within 1% of 1); null = never.",
    )
    collapse_steps: int = Field(
        5,
        ge=1,
        description="Warn when an agent's rewards are all 0 (or all 1), it gives no answer, or every label is the "
        "same string for this many consecutive steps (health/... metrics and the console).",
    )


class WandbConfig(_Strict):
    """The Weights & Biases run of a training run (logging.report_to: [..., wandb]; pip install 'corl[wandb]')."""

    project: str = Field("corl", min_length=1, description="W&B project.")
    entity: str | None = Field(None, description="W&B team or user; None = your default entity.")
    name: str | None = Field(None, description="Run name shown in W&B; None = the run folder's name.")
    group: str | None = Field(None, description="W&B group (e.g. one per method of a comparison).")
    tags: list[str] = Field(default_factory=list, description="W&B tags.")
    mode: Literal["online", "offline", "disabled"] | None = Field(
        None,
        description="online, offline (files only; `wandb sync RUN/wandb/offline-run-*` later) or disabled; None = WANDB_MODE.",
    )


class LoggingConfig(_Strict):
    """What a run records and when: metrics sinks, validation and checkpoint cadence, best-checkpoint selection."""

    report_to: list[Literal["jsonl", "tensorboard", "wandb"]] | None = Field(
        None,
        description="Where metrics go besides metrics.jsonl (always written): tensorboard, wandb (see logging.wandb). "
        "None = jsonl, plus tensorboard when logging.tensorboard is true.",
    )
    wandb: WandbConfig = Field(WandbConfig(), description="The W&B run, when report_to names wandb.")
    eval_every: int = Field(0, ge=0, description="Validate every N steps (0 = only at the end, if data.val is set).")
    eval_on_start: bool = Field(
        False, description="Also validate before the first step (logged at step -1): curves start at the base model."
    )
    checkpoint_every: int = Field(0, ge=0, description="Checkpoint every N steps (0 = only at the end).")
    select: Literal["last", "label_free", "truth"] = Field(
        "last",
        description="Which validation point's checkpoint RUN/best/ holds: label_free = the best label-free score "
        "(agreement of the agents' greedy answers beyond chance; one agent: of its samples with its greedy answer; a "
        "collapsed point, cohort.stop.collapse_share, is never chosen; never reads an answer), truth = "
        "the best validation accuracy (a diagnostic: needs answers), last = no best/ folder. Ties go to the later "
        "step; every point's scores are in RUN/selection.json (corl.trainer.selection).",
    )
    select_also: list[Literal["label_free", "truth"]] = Field(
        default_factory=list,
        description="Also keep RUN/best-<rule>/ for these rules (e.g. [truth] beside select: label_free, to compare).",
    )
    select_samples: int = Field(
        4,
        ge=2,
        description="Completions sampled per validation prompt and agent (at cohort.temperature) for the majority "
        "share, when label-free scores are computed (select, select_also or cohort.stop set): val_size x this many "
        "sequences per agent and point.",
    )
    log_completions: bool = Field(
        False,
        description="Write every completion a step trains on to RUN/completions/step_NNNNNN.jsonl, one row each: "
        "step, agent, id, sample, prompt, completion, extracted_answer, label, label_agreement, reward, advantage, "
        "truncated, and gold where the data has answers (a diagnostic; no reward reads it). With W&B on, the same "
        "rows as a W&B table 'completions' (TRL's log_completions). Each file is prompts_per_step x "
        "samples_per_prompt x agents rows: set log_completions_every on long runs.",
    )
    log_completions_every: int = Field(1, ge=1, description="With log_completions: every N steps.")
    tensorboard: bool = Field(True, description="Write TensorBoard events (when report_to is not given).")
    progress: bool = Field(True, description="A live step counter on a terminal (never in a log file).")
    print_every: int = Field(
        1,
        ge=0,
        description="Print a line with the step's numbers every N steps, on a terminal and in a log file "
        "(0 = none; validation lines and the final summary are always printed).",
    )

    def reports_to(self, sink: str) -> bool:
        """Whether metrics go to `sink` (jsonl, tensorboard or wandb)."""
        if sink == "jsonl":
            return True
        if self.report_to is None:
            return sink == "tensorboard" and self.tensorboard
        return sink in self.report_to


class PlanConfig(_Strict):
    """The memory plan: what `corl plan` prints and `corl train` checks before any weight loads (see `corl.plan`)."""

    check: Literal["stop", "warn", "off"] = Field(
        "stop",
        description="corl train when the plan does not fit the device: stop before loading any weights (exit 2), "
        "warn and go on, or skip the plan.",
    )
    device_memory: str | None = Field(
        None,
        description="Memory of one rank's device, e.g. 80GiB or 24GB (None: the GPU's total memory; on CPU the "
        "system RAM, shared by the ranks on the machine).",
    )
    headroom: float = Field(
        0.1,
        ge=0,
        lt=1,
        description="Share of the device memory the plan keeps free for what it does not count: the CUDA context, "
        "NCCL buffers, the allocator's fragmentation.",
    )
    prompt_tokens: int | None = Field(
        None,
        ge=1,
        description="Longest prompt in tokens (None: measured on the training data with each agent's tokenizer, or "
        "estimated from its characters where the tokenizer is not at hand).",
    )

    @field_validator("device_memory")
    @classmethod
    def _a_size(cls, text: str | None) -> str | None:
        import re

        if text is not None and not re.fullmatch(r"\s*\d+(\.\d+)?\s*([KMGT]i?B|B)?\s*", text, re.IGNORECASE):
            raise ValueError("must be a size such as 80GiB, 24GB or 512MiB")
        return text


class SuiteConfig(_Strict):
    """A benchmark suite run on every agent of the final checkpoint when training ends: what
    `corl suite` does, in a process of its own (see `corl.cli.train`)."""

    name: str | None = Field(
        None,
        description="paper-text, math, code, or benchmark names joined by commas; None = no suite. Results in "
        "RUN_DIR/suite (results.md, results.json; the checkpoint's model cards gain the figures).",
    )
    engine: Literal["auto", "hf", "vllm"] = Field("auto", description="auto (vLLM when installed, else hf), hf or vllm.")
    data: dict[str, str] = Field(default_factory=dict, description="Another file for a benchmark: {NAME: PATH}.")
    data_root: str | None = Field(
        None, description="Folder of the default benchmark files (None: ./data as corl data writes it, else ../shared/data)."
    )
    limit: int | None = Field(None, ge=1, description="First N problems per benchmark (smoke runs only).")
    max_tokens: int | None = Field(None, ge=1, description="Token budget for every benchmark (smoke runs only).")
    bootstrap: int = Field(1000, ge=0, description="Bootstrap resamples per figure (0 = no intervals).")
