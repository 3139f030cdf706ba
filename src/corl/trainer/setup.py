"""Everything a run needs before its first step: data, agents (fresh or resumed), preflight
checks and the disk estimate. `corl.trainer.run.Run.__init__` calls these in order."""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch

from corl.checkpoints.checkpoint import KEEP_LAST, CheckpointError, check_free_space, checkpoint_bytes, checkpoint_step
from corl.checkpoints.run_folder import check_writable
from corl.checkpoints.sharded import SHARDED_FOLDER
from corl.config import ConfigError, RunConfig
from corl.data.mix import Mix, TrainPart, join_files
from corl.data.rows import AnswerKey, Problem, PromptTemplate, attach_wording, batch_indices, build_problems, load_rows
from corl.labels import label_source_spec
from corl.models import ADAPTER_FOLDER, check_model_source, load_adapter, load_agent_policy, prepare_reference
from corl.parallel import DataParallel, Exchange
from corl.tasks import task_spec
from corl.tracking.health import check_weights
from corl.tracking.wandb_run import check_wandb_ready
from corl.trainer.agent import Agent
from corl.trainer.prompt_limit import keep_short_prompts


def sampling_seed(seed: int, step: int, agent: int, dp_rank: int = 0) -> int:
    """A per-(run seed, step, agent, dp rank) sampling seed: an agent's samples do not
    depend on which process hosts it or on what ran before, so a resumed run, and a
    multi-process run with one rank per agent (or distributed.sampling: replicated), draw
    exactly what the uninterrupted single-process run draws."""
    digest = hashlib.sha256(f"{seed}/{step}/{agent}/{dp_rank}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF


@dataclass
class Dataset:
    problems: list[Problem]
    gold: AnswerKey  # empty when the data has no answer column
    rows: list[dict] = field(default_factory=list)
    mix: Mix | None = None  # training data: the files the problems come from, and their weights

    def batch(self, step: int, size: int, seed: int) -> list[int]:
        """Positions in `problems` of step `step`'s batch: a pure function of the step, also for a mix of files."""
        if self.mix is None or len(self.mix.sizes) == 1:
            return batch_indices(step, len(self.problems), size, seed)
        return self.mix.batch(step, size, seed)

    def row(self, problem_id: str) -> dict:
        """The whole dataset row of a problem (with its hidden tests): for gold rewards only."""
        if not hasattr(self, "_by_id"):
            self._by_id = dict(zip((p.id for p in self.problems), self.rows, strict=True))
        return self._by_id[problem_id]


def load_train_data(cfg: RunConfig) -> Dataset:
    """Training problems with every agent's wording (its field, or its own aligned file); several
    files (data.train as a list) one after the other, drawn from by their weights (`corl.data.mix`);
    prompts longer than data.max_prompt_tokens dropped (`corl.trainer.prompt_limit`)."""
    fields = sorted({cfg.prompt_field(a) for a in cfg.agents if not a.data} or {cfg.data.prompt_field})
    inputs = task_spec(cfg.data.task).input_fields
    # an unlabeled train file is the normal case of label-free training: only a column the user named must exist
    optional = "answer_field" not in cfg.data.model_fields_set and not label_source_spec(cfg.cohort.label_source).reads_gold
    files, parts = cfg.data.train_files(), []
    for file in files:
        rows = load_rows(file.path, file.split or cfg.data.split)[: cfg.data.max_rows]
        problems, gold = build_problems(
            rows, file.path, fields, cfg.data.id_field, cfg.data.answer_field, inputs, cfg.data.image_field, optional
        )
        parts.append(TrainPart(file.path, problems, gold, rows))
    problems, gold, rows = join_files(parts, cfg.data.id_field)
    for agent in cfg.agents:
        if agent.data:
            own = load_rows(agent.data, cfg.data.split)
            problems = attach_wording(problems, own, agent.data, cfg.prompt_field(agent), cfg.text_key(agent), cfg.data.id_field)
    kept = keep_short_prompts(cfg, problems)
    file_of = [k for k, part in enumerate(parts) for _ in part.problems]
    sizes = [sum(1 for i in kept if file_of[i] == k) for k in range(len(parts))]
    empty = [files[k].path for k, n in enumerate(sizes) if n == 0]
    if empty:
        raise ConfigError(f"data.max_prompt_tokens {cfg.data.max_prompt_tokens}: no prompt of {empty[0]!r} is short enough")
    problems, rows = [problems[i] for i in kept], [rows[i] for i in kept]
    gold = {p.id: gold[p.id] for p in problems if p.id in gold}
    return Dataset(problems, gold, rows, mix=Mix(sizes, [f.weight for f in files]))


def answers_as_found(cfg: RunConfig, data: Dataset) -> RunConfig:
    """`cfg` as the run records it: data.answer_field null when the training rows have no answer
    column (the default one was looked for, load_train_data). Unlabeled is a property of the data:
    config.yaml and the run's record say so, and a resume (which reads them) needs no setting."""
    if cfg.data.answer_field is None or data.gold:
        return cfg
    return cfg.model_copy(update={"data": cfg.data.model_copy(update={"answer_field": None})})


def load_eval_data(cfg: RunConfig) -> Dataset | None:
    """Validation problems, in the benchmark's own wording (data.prompt_field) for every agent."""
    if not cfg.data.val:
        return None
    task = task_spec(cfg.data.task)
    if task.grade is None:
        raise ConfigError(f"data.val: task kind {task.name!r} has no grader to validate with; remove data.val")
    rows = load_rows(cfg.data.val, cfg.data.val_split)[: cfg.data.val_size]
    inputs = task.input_fields
    # label-free selection and stopping read the prompts only: there, no answers means no accuracy
    rules = (cfg.logging.select, *cfg.logging.select_also)
    label_free = "label_free" in rules or cfg.cohort.stop.rule != "none"
    wanted = answers = cfg.data.val_answer_field or cfg.data.answer_field or "answer"
    if label_free and any(row.get(answers) is None for row in rows):
        answers = None
    prompt_field = cfg.data.val_prompt_field or cfg.data.prompt_field
    problems, gold = build_problems(
        rows,
        cfg.data.val,
        [prompt_field],
        cfg.data.id_field,
        answers if task.grades_answers else None,
        inputs,
        cfg.data.image_field,
        answers_optional=True,  # no column at all: the check below says what to set
    )
    if task.grades_answers and not gold and ("truth" in rules or not label_free):
        raise ConfigError(
            f"data.val {cfg.data.val!r} has no answer column {wanted!r} to measure accuracy: "
            "set data.val_answer_field, or validate for logging.select: label_free or cohort.stop only (no truth rule)"
        )
    return Dataset(problems, gold, rows)


def build_agent(
    cfg: RunConfig, index: int, device: torch.device, weights: Path | None = None, dp: DataParallel | None = None
) -> Agent:
    """Load agent `index`'s own model; `weights` (a checkpoint folder) overrides on resume.
    `dp`: the ranks that share this agent's model (multi-process runs, see corl.parallel).

    With compute.lora a checkpoint's model folder holds the adapters merged in; resuming on it
    would put fresh adapters on different weights. So a LoRA resume loads the run's original
    base model, and its adapters, built as at the start (same order for the optimizer state),
    take the checkpoint's unmerged ones (weights/adapter/)."""
    agent_cfg = cfg.agents[index]
    if weights is not None and not (weights / "config.json").is_file() and (weights / SHARDED_FOLDER).is_dir():
        weights = None  # a sharded-only checkpoint (FSDP2): the run's own model, then Agent.load reads the shards
    adapters = weights / ADAPTER_FOLDER if weights is not None and cfg.compute.lora is not None else None
    if adapters is not None:
        weights_source, tokenizer_source = agent_cfg.model, agent_cfg.tokenizer
    else:
        weights_source = str(weights) if weights else agent_cfg.model
        tokenizer_source = None if weights else agent_cfg.tokenizer
    try:
        model, tokenizer, processor = load_agent_policy(weights_source, tokenizer_source, device)
    except (OSError, ValueError) as err:  # hub errors, unreadable files: say which agent
        raise ConfigError(f"agents.{index}.model (agent {agent_cfg.name!r}): cannot load {str(weights_source)!r}: {err}") from err
    # an inf weight would otherwise surface deep inside generate ("probability tensor contains inf")
    check_weights(model, f"agents.{index}.model (agent {agent_cfg.name!r}) loaded from {str(weights_source)!r}")
    template = PromptTemplate(cfg.data.template, cfg.data.instruction, agent_cfg.chat_template)
    ema = cfg.cohort.ema_momentum if label_source_spec(cfg.cohort.label_source).needs_teacher else None
    # An agent's random initial state (LoRA's adapters) must not depend on which agents its
    # process built before it (all of them in one process, one under torchrun): its own seed.
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(sampling_seed(agent_cfg.seed if agent_cfg.seed is not None else cfg.cohort.seed, -1, index))
        agent = Agent(
            agent_cfg,
            model,
            tokenizer,
            template,
            cfg.text_key(agent_cfg),
            cfg.grpo,
            cfg.rollout,
            ema,
            dp=dp,
            compute=cfg.compute,
            processor=processor,
            total_steps=cfg.cohort.steps,
        )
    if adapters is not None:
        try:
            load_adapter(agent.model, adapters)
        except (OSError, ValueError) as err:
            raise CheckpointError(f"agent {agent_cfg.name!r}: cannot resume its LoRA adapters: {err}") from err
        check_weights(agent.model, f"agent {agent_cfg.name!r}: adapters loaded from {str(adapters)!r}")
        agent.engine.sync_weights(agent.model)  # a vLLM engine was built before: from the base with fresh adapters
    if weights and adapters is None and agent.reference is not None:
        # The KL anchor is the *initial* policy, not the resumed weights.
        reference = load_agent_policy(agent_cfg.model, agent_cfg.tokenizer, device)[0].eval().requires_grad_(False)
        agent.reference = prepare_reference(reference, cfg.compute, agent.dp)
    return agent


def preflight(cfg: RunConfig, run_dir: Path, num_rows: int) -> None:
    """What can be checked before any model loads: the run directory can be created, every
    model and tokenizer can be found, and the data has enough rows for a batch."""
    batch = cfg.cohort.prompts_per_step
    if num_rows < batch:
        message = (
            f"data.train has {num_rows} row{'s' * (num_rows != 1)} but cohort.prompts_per_step is {batch}: every batch "
            f"repeats rows (a prompt up to {-(-batch // num_rows)} times, its votes and rewards counted as often); "
            f"lower cohort.prompts_per_step to at most {num_rows} or add rows"
        )
        warnings.warn(message, UserWarning, stacklevel=3)
    check_writable(run_dir)
    check_wandb_ready(cfg)
    check_models(cfg)


def check_models(cfg: RunConfig) -> None:
    """Every agent's model and tokenizer can be found (a folder here, a cached or reachable hub
    id, a registered source), else a ConfigError naming the option, in seconds."""
    for i, agent in enumerate(cfg.agents):
        check_model_source(agent.model, f"agents.{i}.model (agent {agent.name!r})")
        if agent.tokenizer:
            check_model_source(agent.tokenizer, f"agents.{i}.tokenizer (agent {agent.name!r})")


def check_disk(cfg: RunConfig, run_dir: Path, exchange: Exchange, agents: list[Agent], checkpoint: Path | None) -> None:
    """Refuse a run whose checkpoints will not fit, before its first step. Every process
    adds up the same whole-cohort estimate, so all of them stop together."""
    first = checkpoint_step(checkpoint) if checkpoint is not None else 0
    every = cfg.logging.checkpoint_every
    saves = len({s for s in range(first + 1, cfg.cohort.steps) if every and s % every == 0} | {cfg.cohort.steps})
    existing = len(list((run_dir / "checkpoints").glob("step_*")))
    # the newest KEEP_LAST stay; while one more is written they all exist at once
    at_once = max(1, min(saves, KEEP_LAST + 1) - min(existing, KEEP_LAST))
    needed = sum(exchange.all_gather(checkpoint_bytes(agents))) * at_once
    check_free_space(run_dir, needed, f"{at_once} checkpoint{'s' * (at_once > 1)} of every agent")
