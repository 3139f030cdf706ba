"""The run configuration: one YAML file in, validated typed objects out.

    cfg = load_config("configs/tiny.yaml", overrides=["grpo.beta=0.01", "agents.1.lr=3e-4"])

Every value is checked when the file is read; a bad value raises `ConfigError` naming
the key, what was given and what is allowed, before any model is loaded.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

MAX_LR = 1.0  # agents[].lr: see AgentConfig._a_usable_lr
DEFAULT_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


class ConfigError(ValueError):
    """A configuration value is missing or not allowed; the message says which and why."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def _registered(registry_module: str, registry: str, name: str) -> str:
    """`name` if the registry has it; the registry is the one list of allowed names."""
    import importlib

    table = getattr(importlib.import_module(registry_module), registry)
    if name not in table:
        raise ValueError(f"{table.kind} {name!r} is not registered; choose one of: {', '.join(table.names())}")
    return name


class AgentConfig(_Strict):
    """One member of the cohort: its own model, tokenizer, optimizer and prompt wording."""

    name: str = Field(min_length=1, description="Unique name; used in metrics and checkpoint folders.")
    model: str = Field(
        min_length=1,
        description="Hugging Face model id, local path, `tiny:<family>` (embedded default) or `tiny-vl:<family>` (vision-language). "
        "A vision-language model (its config has a vision tower) is loaded with its processor and sees the rows' images.",
    )
    tokenizer: str | None = Field(None, description="Tokenizer id or path; defaults to the model's.")
    chat_template: bool = Field(False, description="Wrap prompts in the tokenizer's chat template.")
    lr: float = Field(1e-6, description="AdamW learning rate of this agent (0 < lr <= 1).")
    weight_decay: float = Field(0.0, ge=0)
    prompt_field: str | None = Field(
        None,
        description="Dataset field this agent reads its prompt from (data decoupling, 'Different family+'); defaults to data.prompt_field.",
    )
    data: str | None = Field(
        None,
        description="This agent's own file of wordings (rows aligned with data.train by id); defaults to data.train.",
    )
    seed: int | None = Field(None, description="Sampling seed of this agent (seed-only cohorts); defaults to its index.")
    freeze_vision: bool = Field(
        False,
        description="Vision-language models: train the language model only (the vision encoder and its projector stay as loaded).",
    )

    @field_validator("lr")
    @classmethod
    def _a_usable_lr(cls, lr: float) -> float:
        # AdamW moves every weight by about lr on each step whatever the gradient's size, so an
        # lr above 1 destroys any model in one step (and from ~3e37 on, AdamW's float32 step
        # size overflows with a traceback).
        if not math.isfinite(lr) or lr <= 0 or lr > MAX_LR:
            raise ValueError(
                f"must be a number with 0 < lr <= {MAX_LR:g}: AdamW moves every weight by about lr per step "
                "(typical values: 1e-6 to 1e-4 for pretrained models, 1e-3 for the tiny ones)"
            )
        return lr


class DataConfig(_Strict):
    """Where prompts come from. Ground-truth answers are optional and never reach a label-free reward."""

    train: str = Field(min_length=1, description="Local JSONL/Parquet/CSV file or Hugging Face dataset name.")
    split: str = Field("train", description="Split name for Hugging Face datasets.")
    val: str | None = Field(None, description="Held-out file or dataset for periodic validation (needs answers).")
    val_split: str = "test"
    val_size: int = Field(64, ge=1, description="Validation problems evaluated each time (first N rows).")
    max_rows: int | None = Field(None, ge=1, description="Use only the first N training rows.")
    id_field: str = "id"
    prompt_field: str = "problem"
    answer_field: str | None = Field("answer", description="Ground-truth column, for diagnostics and label source 'truth' only.")
    image_field: str | None = Field(
        "images",
        description="Column of a row's image(s) (paths relative to the file, PIL images, {bytes, path}): "
        "vision-language agents see them before the text; text-only agents read the text alone.",
    )
    template: str = Field("{problem}\n{instruction}", description="Prompt text; placeholders {problem} and {instruction}.")
    instruction: str = DEFAULT_INSTRUCTION
    task: str = Field(
        "math", description="A registered task kind (corl.tasks): what a completion's answer is and how answers agree."
    )

    @model_validator(mode="after")
    def _template_has_problem(self) -> DataConfig:
        if "{problem}" not in self.template:
            raise ValueError("data.template must contain the placeholder {problem}")
        return self

    @field_validator("task")
    @classmethod
    def _known_task(cls, name: str) -> str:
        return _registered("corl.tasks", "TASKS", name)


class CohortConfig(_Strict):
    """Algorithm 1's knobs: who labels whom, how much is sampled, for how long."""

    label_source: str = Field(
        "peer",
        description="A registered label source (corl.labels): peer = Co-RL ring (agent n taught by n-1); self = TTRL; "
        "truth = GT-Reward; ema = Co-rewarding-II (majority of an EMA copy of the agent).",
    )
    reward: str = Field(
        "agreement",
        description="A registered reward (corl.rewards): agreement = 1 if the answer matches the label; entropy = RENT "
        "(minus mean token entropy, arXiv:2505.22660); self_certainty = Intuitor (mean KL(U || p), arXiv:2505.19590). "
        "The intrinsic rewards ignore labels (still computed for the diagnostics).",
    )

    @field_validator("label_source")
    @classmethod
    def _known_label_source(cls, name: str) -> str:
        return _registered("corl.labels", "LABEL_SOURCES", name)

    @field_validator("reward")
    @classmethod
    def _known_reward(cls, name: str) -> str:
        return _registered("corl.rewards", "REWARDS", name)

    ema_momentum: float = Field(0.99, gt=0, lt=1, description="EMA teacher momentum for label_source 'ema'.")
    samples_per_prompt: int = Field(8, ge=1, description="K completions per prompt and agent (at least 2).")

    @field_validator("samples_per_prompt")
    @classmethod
    def _a_group(cls, k: int) -> int:
        # Every method updates with GRPO, whose advantage is a reward minus the mean of its
        # prompt's K rewards: with K = 1 it is 0 for every completion, so nothing would train.
        if k < 2:
            raise ValueError(
                "must be at least 2: GRPO's advantage compares the K samples of a prompt with each other, "
                "so with K = 1 every advantage is 0 and no agent ever updates (a majority vote also needs several samples)"
            )
        return k

    prompts_per_step: int = Field(16, ge=1)
    steps: int = Field(100, ge=1)
    seed: int = 0
    temperature: float = Field(1.0, gt=0, description="Sampling temperature of the rollouts.")
    top_p: float = Field(1.0, gt=0, le=1)
    max_new_tokens: int = Field(
        512, ge=1, description="Completion budget; a truncated completion has no answer (see truncated_answers)."
    )
    truncated_answers: Literal["drop", "keep"] = Field(
        "drop",
        description="A completion that hit max_new_tokens without EOS: drop = it has no answer, so it neither votes nor "
        "earns a reward (as TRL's mask_truncated_completions); keep = an answer it closed before the cut still counts.",
    )
    min_agreement: float = Field(
        0.0, ge=0, le=1, description="A label needs at least this share of the teacher's K votes, else the prompt is unlabeled."
    )


class RolloutConfig(_Strict):
    """Who samples the rollouts: the engine and its options (see `corl.rollout`)."""

    engine: str = Field("hf", description="Rollout engine: hf (Hugging Face generate, any device) or vllm (colocated vLLM).")
    batch_size: int | None = Field(None, ge=1, description="hf: sequences per generate call (memory cap); None = all.")
    kv_cache: Literal["auto", "dynamic", "static"] = Field(
        "auto",
        description="hf, where it samples through generate (decode: generate, vision-language models): generate's KV "
        "cache. static preallocates prompt + max_new_tokens and writes in place (on CPU ~16% less sampling time for "
        "small text models: no per-token concatenation); dynamic grows it; auto = static on CPU for text models, "
        "dynamic elsewhere. The compact loop always grows its cache (it drops rows).",
    )
    decode: Literal["auto", "compact", "generate"] = Field(
        "auto",
        description="hf: the sampling loop. compact drops each sequence from the batch when it ends (corl.rollout."
        "compact; text decoder-only models); generate is transformers' generate, which keeps every sequence until "
        "the last one ends; auto = compact where it applies.",
    )
    gpu_memory_utilization: float | None = Field(
        None,
        gt=0,
        le=1,
        description="vllm: share of accelerator memory (on CPU: of system RAM, for the KV cache) each agent's engine "
        "may take; None = 0.45 on GPUs (as the paper's colocated runs), on CPU a share that fits every agent's engine.",
    )
    max_model_len: int | None = Field(
        None,
        ge=16,
        description="vllm: longest prompt + completion the engine takes; None = the model's context length "
        "(max_position_embeddings), at most 8192. A prompt plus cohort.max_new_tokens must fit in it.",
    )
    enforce_eager: bool = Field(True, description="vllm: no CUDA graphs / compilation (faster start-up; needed on CPU).")
    sleep_mode: bool = Field(False, description="vllm on GPUs: free the engine's memory while the agent trains.")
    tensor_parallel_size: int = Field(1, ge=1, description="vllm: shard each agent's engine over this many of its ranks.")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="vllm: weight dtype of the engine; auto = float32 on CPU, bfloat16 "
        "on GPUs that support it (the usual rollout precision; the update's importance weights correct the difference), "
        "else the trained weights' dtype. float32 gives log-prob parity with the trainer.",
    )
    max_images_per_prompt: int = Field(
        4, ge=1, description="vllm, vision-language models: images one prompt may hold (vLLM reserves memory for them)."
    )

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, name: str) -> str:
        return _registered("corl.rollout", "ENGINES", name)


class GRPOConfig(_Strict):
    """The policy update (DeepSeekMath GRPO; defaults follow TRL and the reference runs)."""

    epsilon_low: float = Field(0.2, ge=0, description="Lower clip: ratio >= 1 - epsilon_low.")
    epsilon_high: float = Field(0.2, ge=0, description="Upper clip; > epsilon_low is DAPO's clip-higher.")
    beta: float = Field(0.0, ge=0, description="k3 KL to a frozen reference; 0 loads no reference model.")
    loss_aggregation: Literal["grpo", "dapo", "dr_grpo", "bnpo"] = Field(
        "grpo",
        description="How per-token losses become the batch loss, as TRL's loss_type: grpo = mean over sequences of "
        "each sequence's token mean; dapo = sum over every token / the batch's token count (DAPO); dr_grpo = sum "
        "over tokens / (sequences x max_new_tokens) (Dr. GRPO). bnpo is read as dapo (corl's earlier name for it; "
        "TRL's bnpo divides by each micro-batch's tokens, the same when the batch is one micro-batch).",
    )

    @field_validator("loss_aggregation")
    @classmethod
    def _dapo_by_its_name(cls, name: str) -> str:
        from corl.grpo import LOSS_AGGREGATION_ALIASES

        return LOSS_AGGREGATION_ALIASES.get(name, name)

    scale_rewards: Literal["group", "none"] = Field(
        "group", description="Divide advantages by the group std (GRPO) or not (Dr. GRPO)."
    )
    num_passes: int = Field(1, ge=1, description="Optimization passes over each step's rollouts (PPO epochs).")
    minibatch_size: int | None = Field(
        None, ge=1, description="Sequences per forward/backward (gradient accumulation, bounds memory); None = all at once."
    )
    max_grad_norm: float | None = Field(1.0, gt=0)
    importance_sampling: Literal["token_truncate", "token_mask", "sequence_mask", "off"] = Field(
        "token_truncate",
        description="Correction for a sampler with its own copy of the weights (vLLM): weight each token by "
        "pi_train_old / pi_rollout, truncated at importance_sampling_cap (token_truncate), or drop tokens "
        "(token_mask) or sequences (sequence_mask) above it. Not applied to the hf engine, which samples from "
        "the trained weights. As TRL (vllm_importance_sampling_correction) and Yao et al. 2025 (truncated IS).",
    )
    importance_sampling_cap: float = Field(3.0, ge=1.0, description="Truncation cap of the importance weights.")


class LoRAConfig(_Strict):
    """Low-rank adapters (Hu et al. 2021, arXiv:2106.09685) through `peft`: only the adapters train."""

    r: int = Field(16, ge=1, description="Adapter rank.")
    alpha: float = Field(32.0, gt=0, description="The adapter update is scaled by alpha / r.")
    dropout: float = Field(0.0, ge=0, lt=1)
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
    """Runs under torchrun: one group of ranks per agent (see `corl.parallel` and `corl.launch`)."""

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
        "Keep it under the launcher's kill timeout (torchrun and SLURM: 30 s).",
    )


class HealthConfig(_Strict):
    """Checks run every step (see `corl.health`)."""

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
    report_to: list[Literal["jsonl", "tensorboard", "wandb"]] | None = Field(
        None,
        description="Where metrics go besides metrics.jsonl (always written): tensorboard, wandb (see logging.wandb). "
        "None = jsonl, plus tensorboard when logging.tensorboard is true.",
    )
    wandb: WandbConfig = WandbConfig()
    eval_every: int = Field(0, ge=0, description="Validate every N steps (0 = only at the end, if data.val is set).")
    eval_on_start: bool = Field(
        False, description="Also validate before the first step (logged at step -1): curves start at the base model."
    )
    checkpoint_every: int = Field(0, ge=0, description="Checkpoint every N steps (0 = only at the end).")
    tensorboard: bool = Field(True, description="Write TensorBoard events (when report_to is not given).")
    progress: bool = True

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
    data_root: str | None = Field(None, description="Folder of the default benchmark files (None: ../shared/data).")
    limit: int | None = Field(None, ge=1, description="First N problems per benchmark (smoke runs only).")
    max_tokens: int | None = Field(None, ge=1, description="Token budget for every benchmark (smoke runs only).")
    bootstrap: int = Field(1000, ge=0, description="Bootstrap resamples per figure (0 = no intervals).")

    @field_validator("name")
    @classmethod
    def _known(cls, name: str | None) -> str | None:
        # a typo must stop the run before training, not after its last step
        if name is not None:
            from corl.suite import resolve_suite

            try:
                resolve_suite(name)
            except ValueError as err:
                raise ValueError(str(err).removeprefix(f"--suite {name!r}: ")) from None
        return name


class RunConfig(_Strict):
    """A whole run: the cohort, its data, the update rule, and where results go."""

    @model_validator(mode="before")
    @classmethod
    def _import_plugins(cls, raw: Any) -> Any:
        import importlib

        for module in (raw.get("plugins") or []) if isinstance(raw, dict) else []:
            try:
                importlib.import_module(module)
            except ImportError as err:
                raise ValueError(f"plugins: cannot import {module!r}: {err}") from None
        return raw

    plugins: list[str] = Field(
        default_factory=list,
        description="Modules imported before anything is looked up by name: your own rollout engines, label sources, "
        "rewards or task kinds, registered when their module is imported.",
    )
    output_dir: str = "runs/corl"
    resume: Literal["never", "auto"] = Field(
        "never",
        description="auto: continue from the run directory's last checkpoint when it has one (torchrun --max-restarts "
        "and requeued jobs then resume by themselves); never: start afresh.",
    )
    device: str = Field("auto", description="auto, cpu, cuda or cuda:N.")
    agents: list[AgentConfig] = Field(min_length=1)
    data: DataConfig
    cohort: CohortConfig = CohortConfig()
    rollout: RolloutConfig = RolloutConfig()
    grpo: GRPOConfig = GRPOConfig()
    logging: LoggingConfig = LoggingConfig()
    compute: ComputeConfig = ComputeConfig()
    distributed: DistributedConfig = DistributedConfig()
    health: HealthConfig = HealthConfig()
    plan: PlanConfig = PlanConfig()
    suite: SuiteConfig = SuiteConfig()

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        names = [a.name for a in self.agents]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"agent names must be unique; repeated: {', '.join(dupes)}")
        from corl.labels import label_source_spec

        spec = label_source_spec(self.cohort.label_source)
        if len(self.agents) < spec.min_agents:
            raise ValueError(
                f"cohort.label_source {spec.name!r} needs at least {spec.min_agents} agents (use 'self' for a single agent)"
            )
        if spec.reads_gold and self.data.task == "code":
            # a program has no final answer to compare with a gold one: its ground truth is its tests
            raise ValueError(
                f"cohort.label_source {spec.name!r} compares answers with a gold answer, which a code task does not have; "
                "GT-Reward for code is cohort.reward: tests (with a label-free label_source such as 'self')"
            )
        if spec.reads_gold and not self.data.answer_field:
            raise ValueError(f"cohort.label_source {spec.name!r} needs data.answer_field")
        if spec.needs_teacher and (self.compute.lora is not None or self.distributed.fsdp):
            # the EMA teacher is a plain copy updated parameter by parameter from the policy
            raise ValueError(f"cohort.label_source {spec.name!r} does not work with compute.lora or distributed.fsdp yet")
        return self

    def prompt_field(self, agent: AgentConfig) -> str:
        return agent.prompt_field or self.data.prompt_field

    def text_key(self, agent: AgentConfig) -> str:
        """Key of this agent's wording in `Problem.texts`: its field, qualified by its own file if any."""
        field = self.prompt_field(agent)
        return f"{agent.data}#{field}" if agent.data else field


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `a.b.c=value` overrides (value parsed as YAML; list items by index: agents.0.lr)."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like key.path=value")
        path, text = item.split("=", 1)
        value = yaml.safe_load(text) if text.strip() else ""
        node: Any = raw
        parts = path.strip().split(".")
        for i, part in enumerate(parts[:-1]):
            node = _child(node, part, ".".join(parts[: i + 1]), create=True)
        last = parts[-1]
        if isinstance(node, list):
            index = _index(node, last, path)
            node[index] = value
        elif isinstance(node, dict):
            node[last] = value
        else:
            raise ConfigError(f"override {path}: {'.'.join(parts[:-1])} is a value, not a section")
    return raw


def _index(node: list, part: str, path: str) -> int:
    if not part.isdigit() or int(part) >= len(node):
        raise ConfigError(f"override {path}: {part!r} is not an index of a list of {len(node)}")
    return int(part)


def _child(node: Any, part: str, where: str, create: bool) -> Any:
    if isinstance(node, list):
        return node[_index(node, part, where)]
    if not isinstance(node, dict):
        raise ConfigError(f"override {where}: parent is a value, not a section")
    if part not in node or node[part] is None:
        if not create:
            raise ConfigError(f"unknown key {where}")
        node[part] = {}
    return node[part]


def _format_validation_error(err: ValidationError, source: str) -> str:
    lines = [f"{source}: invalid configuration"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key (check its spelling and section)"
        given = e.get("input")
        shown = "" if e["type"] in ("missing", "extra_forbidden") or isinstance(given, dict) else f" (got {given!r})"
        lines.append(f"  {key}: {msg}{shown}")
    return "\n".join(lines)


def validate_config(raw: dict[str, Any], source: str = "config") -> RunConfig:
    try:
        return RunConfig.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, source)) from None


def load_config(path: str | Path, overrides: list[str] | None = None) -> RunConfig:
    """Read a YAML run config, apply `key=value` overrides and validate."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} not found")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    return validate_config(apply_overrides(raw, overrides or []), str(path))


# What may change when a run is resumed: how long it runs, what it logs and when it
# validates or checkpoints, where it writes, how long ranks wait. Anything else (models,
# data, the update rule) would silently make the resumed run another experiment.
RESUME_MAY_CHANGE = (
    "cohort.steps",
    "logging.",
    "suite.",
    "output_dir",
    "resume",
    "health.",
    "distributed.timeout_s",
    "distributed.preempt_grace_s",
    "plan.",
)


def flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """{"agents.0.lr": 1e-6, ...}: a nested config as dotted keys."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        items = ((str(i), v) for i, v in enumerate(value))
    else:
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, child in items:
        out.update(flat(child, f"{prefix}.{key}" if prefix else str(key)))
    return out


def check_resume_config(started: RunConfig, now: RunConfig, source: str) -> None:
    """Refuse to resume with a configuration that differs from the one the run started with
    in anything but RESUME_MAY_CHANGE; the message names every changed key."""
    a, b = flat(started.model_dump(mode="json")), flat(now.model_dump(mode="json"))
    changed = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k) and not k.startswith(RESUME_MAY_CHANGE))
    if changed:
        lines = "\n".join(f"  {k}: {a.get(k)!r} -> {b.get(k)!r}" for k in changed)
        raise ConfigError(
            f"cannot resume: the configuration differs from the one the run started with ({source}):\n{lines}\n"
            f"only {', '.join(k.rstrip('.') + ('.*' if k.endswith('.') else '') for k in RESUME_MAY_CHANGE)} may change; "
            "start a new run (another output_dir) to change the rest"
        )


def dump_config(cfg: RunConfig, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
