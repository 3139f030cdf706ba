"""The Co-RL training loop (the paper's Algorithm 1), written once for every method.

    for each step:
        1. draw one batch of unlabeled prompts (same ids for every agent)
        2. every agent samples K completions; extract each final answer
        3. exchange the answers table: the step's one frozen snapshot
        4. labels from that snapshot alone (peer ring / self / truth / ema)
        5. rewards: 1 if the answer is equivalent to the label, else 0
           (or an intrinsic reward: RENT's entropy, Intuitor's self-certainty)
        6. each agent does its own GRPO update

Co-RL, TTRL, GT-Reward, Co-rewarding-II, RENT and Intuitor differ only in steps 4-5.
No parameter, gradient or optimizer state crosses agents; only the answers table does.

What differs is looked up by name in registries and read from specs, never branched on:
the label source (`corl.labels`), the reward (`corl.rewards`), the task kind that turns
completions into answers (`corl.tasks`) and the rollout engine (`corl.rollout`).

A process hosts the agents its `Placement` names (all of them in a single process) and
samples its share of the prompts; `Exchange.all_gather` makes every process see the
whole table (see `corl.parallel`).
"""

from __future__ import annotations

import hashlib
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from corl.agent import Agent
from corl.checkpoint import (
    KEEP_LAST,
    CheckpointError,
    check_free_space,
    checkpoint_bytes,
    checkpoint_step,
    latest_checkpoint,
    load_loop_state,
    save_checkpoint,
    set_rng_state,
    verify_checkpoint,
)
from corl.checkpoint_sharded import agreed_checkpoint
from corl.config import ConfigError, RunConfig, dump_config
from corl.data import AnswerKey, Problem, PromptTemplate, attach_wording, batch_indices, build_problems, load_rows
from corl.diagnostics import step_diagnostics
from corl.evaluate import greedy_completions
from corl.health import CollapseMonitor, HealthError, check_weight_growth, check_weights, nonfinite, stop_or_warn
from corl.labels import AnswersTable, build_label_source, label_source_spec
from corl.models import ADAPTER_FOLDER, check_model_source, load_adapter, load_agent_policy, prepare_frozen, resolve_device
from corl.parallel import DataParallel, Exchange, LocalExchange, Placement
from corl.rewards import reward_spec
from corl.rollout import Rollout, SamplingParams
from corl.run_folder import RunEntry, check_writable, enter_run_folder, write_record
from corl.tasks import task_spec
from corl.tracking import MetricsLog
from corl.tracking_wandb import check_wandb_installed, wandb_mirrors

# -- what one process contributes to a step ------------------------------------------------------


@dataclass(frozen=True)
class PromptAnswers:
    """One agent's K answers for one prompt (and its EMA teacher's, when it has one)."""

    answers: tuple[str | None, ...]  # [K] as written; None = no answer
    keys: tuple[str | None, ...]  # [K] canonical vote keys
    teacher_answers: tuple[str | None, ...] | None = None
    teacher_keys: tuple[str | None, ...] | None = None


@dataclass(frozen=True)
class AgentShard:
    """What this process sampled for one agent: batch positions and one row per position."""

    positions: list[int]
    rows: list


def assemble(shards: list[dict[int, AgentShard]], num_agents: int, batch_size: int, name: str) -> list[list]:
    """Merge per-process {agent: AgentShard} into [N][B] rows."""
    out: list[list] = [[None] * batch_size for _ in range(num_agents)]
    for shard in shards:
        for agent, part in shard.items():
            for pos, row in zip(part.positions, part.rows, strict=True):
                out[agent][pos] = row
    missing = [(n, b) for n in range(num_agents) for b in range(batch_size) if out[n][b] is None]
    if missing:
        raise RuntimeError(f"{name}: no process reported agent {missing[0][0]} prompt {missing[0][1]}; check the placement")
    return out


def answers_table(prompt_ids: tuple[str, ...], rows: list[list[PromptAnswers]], with_teacher: bool) -> AnswersTable:
    """[N][B] per-prompt answers -> the step's answers table."""

    def grid(field: str) -> tuple:
        return tuple(tuple(getattr(r, field) for r in agent_rows) for agent_rows in rows)

    return AnswersTable(
        prompt_ids=prompt_ids,
        answers=grid("answers"),
        keys=grid("keys"),
        teacher_answers=grid("teacher_answers") if with_teacher else None,
        teacher_keys=grid("teacher_keys") if with_teacher else None,
    )


def sampling_seed(seed: int, step: int, agent: int, dp_rank: int = 0) -> int:
    """A per-(run seed, step, agent, dp rank) sampling seed: an agent's samples do not
    depend on which process hosts it or on what ran before, so a resumed run, and a
    multi-process run with one rank per agent (or distributed.sampling: replicated), draw
    exactly what the uninterrupted single-process run draws."""
    digest = hashlib.sha256(f"{seed}/{step}/{agent}/{dp_rank}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF


# -- data and agents --------------------------------------------------------------------------------


@dataclass
class Dataset:
    problems: list[Problem]
    gold: AnswerKey  # empty when the data has no answer column
    rows: list[dict] = field(default_factory=list)

    def row(self, problem_id: str) -> dict:
        """The whole dataset row of a problem (with its hidden tests): for gold rewards only."""
        if not hasattr(self, "_by_id"):
            self._by_id = dict(zip((p.id for p in self.problems), self.rows, strict=True))
        return self._by_id[problem_id]


def load_train_data(cfg: RunConfig) -> Dataset:
    """Training problems with every agent's wording (its field, or its own aligned file)."""
    rows = load_rows(cfg.data.train, cfg.data.split)[: cfg.data.max_rows]
    fields = sorted({cfg.prompt_field(a) for a in cfg.agents if not a.data} or {cfg.data.prompt_field})
    inputs = task_spec(cfg.data.task).input_fields
    problems, gold = build_problems(
        rows, cfg.data.train, fields, cfg.data.id_field, cfg.data.answer_field, inputs, cfg.data.image_field
    )
    for agent in cfg.agents:
        if agent.data:
            own = load_rows(agent.data, cfg.data.split)
            problems = attach_wording(problems, own, agent.data, cfg.prompt_field(agent), cfg.text_key(agent), cfg.data.id_field)
    return Dataset(problems, gold, rows)


def load_eval_data(cfg: RunConfig) -> Dataset | None:
    """Validation problems, in the benchmark's own wording (data.prompt_field) for every agent."""
    if not cfg.data.val:
        return None
    task = task_spec(cfg.data.task)
    if task.grade is None:
        raise ConfigError(f"data.val: task kind {task.name!r} has no grader to validate with; remove data.val")
    rows = load_rows(cfg.data.val, cfg.data.val_split)[: cfg.data.val_size]
    inputs = task.input_fields
    problems, gold = build_problems(
        rows, cfg.data.val, [cfg.data.prompt_field], cfg.data.id_field, cfg.data.answer_field, inputs, cfg.data.image_field
    )
    if task.grades_answers and not gold:
        raise ValueError("data.val needs an answer column (data.answer_field) to measure accuracy")
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
        agent.reference = prepare_frozen(reference, cfg.compute)
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
    check_wandb_installed(cfg)
    for i, agent in enumerate(cfg.agents):
        check_model_source(agent.model, f"agents.{i}.model (agent {agent.name!r})")
        if agent.tokenizer:
            check_model_source(agent.tokenizer, f"agents.{i}.tokenizer (agent {agent.name!r})")


class Preempted(Exception):
    """The run was asked to stop (SIGTERM) and saved a checkpoint after `steps_done` steps."""

    exit_code = 143  # 128 + SIGTERM, as a process stopped by it; documented in docs/failures.md

    def __init__(self, steps_done: int, checkpoint: Path):
        super().__init__(
            f"preempted (SIGTERM) after step {steps_done - 1}: checkpoint {checkpoint} written; "
            f"continue with corl train --resume {checkpoint.parent.parent} (or resume: auto)"
        )
        self.steps_done = steps_done
        self.checkpoint = checkpoint


# -- the trainer --------------------------------------------------------------------------------------


class CohortTrainer:
    """Owns a run: its (local) agents, data, label source, logs and checkpoints."""

    def __init__(
        self,
        cfg: RunConfig,
        run_dir: str | Path | None = None,
        resume: bool = False,
        placement: Placement | None = None,
        exchange: Exchange | None = None,
        device: torch.device | None = None,
        data_parallel: DataParallel | None = None,
        entry: RunEntry | None = None,
    ):
        """`resume`: continue the run in `run_dir` from its last checkpoint (--resume); `entry`:
        how to enter the run folder, when the caller decided it (`corl.run_folder`)."""
        self.cfg = cfg
        self.run_dir = Path(run_dir or cfg.output_dir)
        self.placement = placement or Placement.single(len(cfg.agents))
        self.exchange = exchange or LocalExchange()
        torch.set_flush_denormal(True)  # denormals once made a CPU update 14x slower
        torch.manual_seed(cfg.cohort.seed)
        self.device = device or resolve_device(cfg.device)

        self.train_data = load_train_data(cfg)
        self.val_data = load_eval_data(cfg)
        preflight(cfg, self.run_dir, len(self.train_data.problems))  # before any model loads

        self.start_step = 0
        self.loop_state: dict = {"first_reward_std": {}}
        # a collective: every process continues from the same step, also on nodes without a shared disk
        agreed = agreed_checkpoint(self.run_dir, self.exchange)
        self.entry = entry or enter_run_folder(cfg, self.run_dir, resume=resume)
        checkpoint = agreed if self.entry.checkpoint is not None else None
        if checkpoint is not None:
            verify_checkpoint(checkpoint, [cfg.agents[n].name for n in self.placement.agents])
        self.agents: dict[int, Agent] = {
            n: build_agent(cfg, n, self.device, checkpoint / cfg.agents[n].name if checkpoint else None, data_parallel)
            for n in self.placement.agents
        }
        self._check_disk(checkpoint)
        if checkpoint is not None:
            state = load_loop_state(checkpoint)
            self.start_step = state["step"]
            self.loop_state = state["loop"]
            set_rng_state(state["rng"])
            for agent in self.agents.values():
                agent.load(checkpoint / agent.name)

        # Only a source that declares reads_gold (GT-Reward) is handed the answer column.
        self.label_spec = label_source_spec(cfg.cohort.label_source)
        self.reward = reward_spec(cfg.cohort.reward)
        self.task = task_spec(cfg.data.task)
        self.label_source = build_label_source(
            cfg.cohort.label_source,
            min_agreement=cfg.cohort.min_agreement,
            gold=self.train_data.gold if self.label_spec.reads_gold else None,
            key=self.task.key,
        )
        self.params = SamplingParams(cfg.cohort.temperature, cfg.cohort.top_p, cfg.cohort.max_new_tokens)
        self.names = [a.name for a in cfg.agents]
        self.monitor = CollapseMonitor(self.names, cfg.health.collapse_steps, self.reward.binary, console=self.placement.is_main)
        self.monitor.load_state_dict(self.loop_state.get("health", {}))
        self.log = None
        if self.placement.is_main:
            self._open_run_folder()

    def _open_run_folder(self) -> None:
        """A new run writes its record (and config.yaml, for people); a resumed one keeps
        both. Rows at and after the first step this run (re)does are dropped: -1, the
        validation before step 0, when a run without a checkpoint starts again."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.entry.checkpoint is None:
            write_record(self.run_dir, self.entry.record)
            dump_config(self.cfg, self.run_dir / "config.yaml")
        first = self.start_step if self.entry.checkpoint is not None else (-1 if self.entry.redo else None)
        # a redone run continues its W&B run too: the steps it already sent are not sent again
        continuing = self.entry.checkpoint is not None or self.entry.redo
        mirrors = wandb_mirrors(self.cfg, self.run_dir, resumed=continuing)
        self.log = MetricsLog(self.run_dir, self.cfg.logging.reports_to("tensorboard"), resume_step=first, mirrors=mirrors)

    def _check_disk(self, checkpoint: Path | None) -> None:
        """Refuse a run whose checkpoints will not fit, before its first step. Every process
        adds up the same whole-cohort estimate, so all of them stop together."""
        cfg = self.cfg
        first = checkpoint_step(checkpoint) if checkpoint is not None else 0
        every = cfg.logging.checkpoint_every
        saves = len({s for s in range(first + 1, cfg.cohort.steps) if every and s % every == 0} | {cfg.cohort.steps})
        existing = len(list((self.run_dir / "checkpoints").glob("step_*")))
        # the newest KEEP_LAST stay; while one more is written they all exist at once
        at_once = max(1, min(saves, KEEP_LAST + 1) - min(existing, KEEP_LAST))
        needed = sum(self.exchange.all_gather(checkpoint_bytes(self.agents.values()))) * at_once
        check_free_space(self.run_dir, needed, f"{at_once} checkpoint{'s' * (at_once > 1)} of every agent")

    def _seed(self, step: int, n: int, dp_rank: int | None = None) -> int:
        base = self.cfg.agents[n].seed if self.cfg.agents[n].seed is not None else self.cfg.cohort.seed
        return sampling_seed(base, step, n, self.placement.dp_rank if dp_rank is None else dp_rank)

    def _sample_share(self, step: int, n: int, agent: Agent, batch: list[Problem], positions: list[int], k: int) -> Rollout:
        """Agent n's samples of this process's prompts. distributed.sampling: replicated draws
        the whole batch from dp rank 0's seed, as a single process does, and keeps the share."""
        if self.cfg.distributed.sampling == "replicated" and self.placement.dp_size > 1:
            torch.manual_seed(self._seed(step, n, dp_rank=0))
            return self._sample(step, agent, batch, k).select_prompts(positions)
        torch.manual_seed(self._seed(step, n))
        return self._sample(step, agent, [batch[i] for i in positions], k)

    # -- Algorithm 1 -------------------------------------------------------------------
    def step(self, step: int) -> dict[str, float]:
        cfg = self.cfg.cohort
        k = cfg.samples_per_prompt
        n_agents = len(self.cfg.agents)
        t0 = time.perf_counter()
        # 1. one batch of unlabeled prompts, the same ids for every agent
        order = batch_indices(step, len(self.train_data.problems), cfg.prompts_per_step, cfg.seed)
        batch = [self.train_data.problems[i] for i in order]
        positions = self.placement.prompt_positions(len(batch))
        mine = [batch[i] for i in positions]

        # 2. every agent samples K completions per prompt (its own wording) and extracts answers
        rollouts: dict[int, Rollout] = {}
        shard: dict[int, AgentShard] = {}
        for n, agent in self.agents.items():
            rollouts[n] = self._sample_share(step, n, agent, batch, positions, k)
            shard[n] = AgentShard(positions, self._answers(agent, rollouts[n], mine, k))
        t_sample = time.perf_counter()

        # 3. the answers table: one frozen snapshot of every agent, gathered from every process
        rows = assemble(self.exchange.all_gather(shard), n_agents, len(batch), "answers table")
        table = answers_table(tuple(p.id for p in batch), rows, self.label_spec.needs_teacher)

        # 4. labels from the snapshot alone: no agent has updated yet
        labels = self.label_source(table)

        # 5. rewards of this process's completions
        rewards: dict[int, torch.Tensor] = {}
        for n, agent in self.agents.items():
            if self.reward.binary:
                own = [table.answers[n][p] for p in positions], [table.keys[n][p] for p in positions]
                rewards[n] = self.reward.from_labels(*own, [labels[n][p] for p in positions], self.task.equivalent)
            elif self.reward.reads_gold:
                rewards[n] = self.reward.from_gold(rollouts[n].texts, [self.train_data.row(p.id) for p in mine], k)
            else:
                rewards[n] = agent.logit_rewards(rollouts[n], self.reward.from_logits, cfg.temperature)

        stop = self.cfg.health.on_nonfinite == "stop"
        for n, r in rewards.items():
            if nonfinite(r):  # skip: the update sees a NaN advantage and skips its own step
                bad = int((~torch.isfinite(r)).sum())
                stop_or_warn(
                    f"step {step}: agent {self.names[n]!r}: {bad} of {r.numel()} rewards are NaN/inf (cohort.reward {cfg.reward!r})",
                    stop,
                )

        # 6. only now does any agent update, each on its own
        updates = {
            n: agent.update(rollouts[n], rewards[n], self.params, exclude=self._loss_excluded(rollouts[n]))
            for n, agent in self.agents.items()
        }
        t_update = time.perf_counter()
        for n, agent in self.agents.items():
            if updates[n].skipped_nonfinite and not nonfinite(rewards[n]):
                stop_or_warn(f"step {step}: agent {self.names[n]!r}: the loss or gradient norm was NaN/inf", stop)
            check_weights(agent.model, f"step {step}: agent {self.names[n]!r} after its update")
            where = f"step {step}: agent {self.names[n]!r} (agents.{n}.lr {self.cfg.agents[n].lr:g})"
            check_weight_growth(
                updates[n].weight_norm, updates[n].weight_norm_ratio, self.cfg.health.max_weight_norm_ratio, where
            )

        report = {
            n: AgentShard(positions, list(zip(rewards[n].tolist(), rollouts[n].completion_lengths.view(-1, k).tolist())))
            for n in self.agents
        }
        stats = {n: updates[n].as_dict() for n in self.agents}
        gathered = self.exchange.all_gather((report, stats))
        per_prompt = assemble([g[0] for g in gathered], n_agents, len(batch), "rewards")
        metrics = self._diagnostics(table, labels, per_prompt, [g[1] for g in gathered])
        metrics.update(self.monitor(step, metrics, labels))
        metrics["time/sample_s"] = t_sample - t0
        metrics["time/update_s"] = t_update - t_sample
        return metrics

    def _sample(self, step: int, agent: Agent, problems: list[Problem], k: int) -> Rollout:
        try:
            return agent.sample(problems, k, self.params)
        except RuntimeError as err:  # torch.multinomial on NaN/inf probabilities: name who and when
            if "inf" not in str(err) and "nan" not in str(err):
                raise
            check_weights(agent.model, f"step {step}: agent {agent.name!r}")
            raise HealthError(
                f"step {step}: agent {agent.name!r}: sampling failed on NaN/inf probabilities ({err}); its weights are finite "
                "but too large (diverged: lower its lr). Resume from an earlier checkpoint"
            ) from err

    def _answers(self, agent: Agent, rollout: Rollout, problems: list[Problem], k: int) -> list[PromptAnswers]:
        """The task kind's answers for an agent's rollout (and for its EMA teacher's samples)."""
        answers, keys = self._drop_truncated(rollout, *self.task.answers(rollout.texts, problems, k))
        if agent.teacher is None:
            return [PromptAnswers(a, key) for a, key in zip(answers, keys, strict=True)]
        teacher = agent.sample_teacher(problems, k, self.params)
        t_answers, t_keys = self._drop_truncated(teacher, *self.task.answers(teacher.texts, problems, k))
        return [PromptAnswers(*row) for row in zip(answers, keys, t_answers, t_keys, strict=True)]

    def _loss_excluded(self, rollout: Rollout) -> torch.Tensor | None:
        """cohort.truncated_answers drop: the truncated completions ([N] bool), left out of the
        loss as TRL's mask_truncated_completions leaves them (their reward still counts in their
        group's advantages); keep: None."""
        return rollout.truncated if self.cfg.cohort.truncated_answers == "drop" else None

    def _drop_truncated(self, rollout: Rollout, answers: list, keys: list) -> tuple[list, list]:
        """cohort.truncated_answers drop: a completion cut at the budget has no answer (a
        \\boxed{} it closed early may be a draft it would have revised), so it cannot vote or earn."""
        if self.cfg.cohort.truncated_answers == "keep":
            return answers, keys
        cut = rollout.truncated.view(len(answers), -1).tolist()  # [B, K]
        answers = [
            tuple(None if c else a for a, c in zip(row, cuts, strict=True)) for row, cuts in zip(answers, cut, strict=True)
        ]
        keys = [tuple(None if c else key for key, c in zip(row, cuts, strict=True)) for row, cuts in zip(keys, cut, strict=True)]
        return answers, keys

    def _diagnostics(self, table, labels, per_prompt, stats_by_process) -> dict[str, float]:
        rewards = [torch.tensor([r for r, _ in agent_rows]) for agent_rows in per_prompt]  # N x [B, K]
        lengths = [torch.tensor([length for _, length in agent_rows]).flatten() for agent_rows in per_prompt]
        gold = self.train_data.gold or None
        metrics = step_diagnostics(self.names, table, labels, rewards, lengths, self.task.equivalent, gold=gold)
        if not self.reward.binary:
            for name, r in zip(self.names, rewards):  # binary-reward statistics do not describe these
                metrics[f"{name}/reward_mean"] = float(r.mean())
                metrics[f"{name}/reward_std"] = float(r.std(unbiased=False))
        first = self.loop_state["first_reward_std"]
        for name in self.names:
            first.setdefault(name, metrics[f"{name}/reward_std"])
            base = first[name]
            metrics[f"{name}/reward_std_normalized"] = metrics[f"{name}/reward_std"] / base if base > 0 else float("nan")
        # update statistics: averaged over the data-parallel ranks of each agent
        merged: dict[str, list[float]] = {}
        for stats in stats_by_process:
            for n, values in stats.items():
                for key, value in values.items():
                    merged.setdefault(f"{self.names[n]}/{key}", []).append(value)
        metrics.update({key: sum(v) / len(v) for key, v in merged.items()})
        return metrics

    def validate(self) -> dict[str, float]:
        """Greedy accuracy of every agent on the held-out split (benchmark wording), graded
        by the run's task kind (math: the final answer; code: the hidden tests)."""
        if self.val_data is None:
            return {}
        # the dp ranks of an agent split the problems (strided, as in training) and add up
        problems = [self.val_data.problems[i] for i in self.placement.prompt_positions(len(self.val_data.problems))]
        rows = [self.val_data.row(p.id) for p in problems]
        gold = [self.val_data.gold.get(p.id) for p in problems]
        mine = {}
        for agent in self.agents.values():
            with agent.generating():  # every dp rank enters, also one without problems (FSDP)
                prompts = agent.prompts(problems, self.cfg.data.prompt_field)
                texts = greedy_completions(agent.engine, prompts, self.cfg.cohort.max_new_tokens) if problems else []
            correct = self.task.grade(texts, problems, rows, gold) if problems else []
            mine[agent.name] = (sum(correct), len(problems))  # (correct, evaluated)
        totals: dict[str, list[int]] = {}
        for part in self.exchange.all_gather(mine):
            for name, (correct, count) in part.items():
                total = totals.setdefault(name, [0, 0])
                total[0] += correct
                total[1] += count
        out = {f"{name}/val_accuracy": correct / count for name, (correct, count) in totals.items()}
        out["cohort/val_accuracy"] = sum(out.values()) / len(out)
        return out

    def checkpoint(self, steps_done: int) -> Path | None:
        """Every agent's dp-rank 0 writes its agent's folder (all its ranks take part: a sharded
        model is gathered, and each rank writes its shards); the rank that commits checkpoints
        on each disk (the main process on a shared one) writes the loop state."""
        self.loop_state["health"] = self.monitor.state_dict()
        return save_checkpoint(
            self.run_dir,
            steps_done,
            list(self.agents.values()),
            self.loop_state,
            write_state=self.placement.commits_checkpoints,
            barrier=self.exchange.barrier,
            record=self.entry.record,
        )

    def train(
        self, on_step: Callable[[int, dict], None] | None = None, should_stop: Callable[[], bool] | None = None
    ) -> dict[str, float]:
        """Run from the current step to cfg.cohort.steps; returns the last metrics.

        `should_stop` is asked after every step (by every process: it must agree across them);
        True saves a checkpoint and raises `Preempted`."""
        cfg = self.cfg
        last: dict[str, float] = {}
        try:
            if cfg.logging.eval_on_start and self.start_step == 0:
                self._log(-1, self.validate(), kind="val")
            for step in range(self.start_step, cfg.cohort.steps):
                last = self.step(step)
                self._log(step, last)
                done = step + 1
                if cfg.logging.eval_every and done % cfg.logging.eval_every == 0 and done < cfg.cohort.steps:
                    self._log(step, self.validate(), kind="val")
                if cfg.logging.checkpoint_every and done % cfg.logging.checkpoint_every == 0 and done < cfg.cohort.steps:
                    self.checkpoint(done)
                if on_step is not None:
                    on_step(step, last)
                if should_stop is not None and done < cfg.cohort.steps and should_stop():
                    saved = latest_checkpoint(self.run_dir)
                    if saved is None or checkpoint_step(saved) != done:
                        saved = self.checkpoint(done)
                    raise Preempted(done, saved)
            if self.start_step < cfg.cohort.steps or latest_checkpoint(self.run_dir) is None:
                final_val = self.validate()
                if final_val:
                    self._log(cfg.cohort.steps - 1, final_val, kind="val")
                    last.update(final_val)
                self.checkpoint(cfg.cohort.steps)
        finally:
            if self.log is not None:
                self.log.close()
            for agent in self.agents.values():
                agent.close()
        return last

    def _log(self, step: int, metrics: dict, kind: str = "train") -> None:
        if self.log is not None and metrics:
            self.log.log(step, metrics, kind)
