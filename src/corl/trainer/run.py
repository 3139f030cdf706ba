"""A training run around the loop: setup, then validation, checkpoints and preemption at
their cadence around `step` (the loop itself, Algorithm 1, is `corl.trainer.loop`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import torch

from corl.answers import unknown_checks
from corl.checkpoints.checkpoint import (
    checkpoint_step,
    latest_checkpoint,
    load_loop_state,
    save_checkpoint,
    set_rng_state,
    verify_checkpoint,
)
from corl.checkpoints.run_folder import RunEntry, enter_run_folder, how_to_continue, run_record, write_record
from corl.checkpoints.sharded import agreed_checkpoint
from corl.config import RunConfig, dump_config
from corl.data.rows import Problem
from corl.labels import build_label_source, label_source_spec
from corl.models import resolve_device
from corl.parallel import DataParallel, Exchange, LocalExchange, Placement
from corl.rewards import weighted_reward
from corl.rollout import Rollout, SamplingParams
from corl.tasks import task_spec
from corl.tracking.health import (
    AFTER_DIVERGENCE,
    CollapseMonitor,
    HealthError,
    check_weight_growth,
    check_weights,
    nonfinite,
    stop_or_warn,
)
from corl.tracking.metrics import MetricsLog
from corl.tracking.step_numbering import renumber_old_run
from corl.tracking.wandb_run import wandb_mirrors
from corl.trainer.agent import Agent
from corl.trainer.best_folders import finish_publishing
from corl.trainer.selection import Selector, publish, write_selection
from corl.trainer.setup import (
    answers_as_found,
    build_agent,
    check_disk,
    load_eval_data,
    load_train_data,
    preflight,
    sampling_seed,
)
from corl.trainer.update import UpdateStats
from corl.trainer.validation import validate, validation_point


class Preempted(Exception):
    """The run was asked to stop (SIGTERM, Ctrl-C) after `steps_done` steps: with `saved`, the
    checkpoint of that step was written for it; else the run stopped before its next step began
    (while it was starting) and `checkpoint` is the one it had, if any."""

    def __init__(self, steps_done: int, checkpoint: Path | None, run_dir: Path, saved: bool = True):
        super().__init__(steps_done, checkpoint)
        self.steps_done, self.checkpoint, self.run_dir, self.saved = steps_done, checkpoint, Path(run_dir), saved
        self.signal_name = "SIGTERM"
        self.exit_code = 143  # 128 + the signal's number, as a process it stopped; 130 after Ctrl-C (docs/runs.md)

    def __str__(self) -> str:
        # read when said, not when raised: a run stopped while starting has removed what it wrote by then
        verb = "preempted" if self.signal_name == "SIGTERM" else "stopped"
        if self.saved:
            auto = " (or resume: auto)" if self.signal_name == "SIGTERM" else ""
            return (
                f"{verb} ({self.signal_name}) after step {self.steps_done}: checkpoint {self.checkpoint} written; "
                f"continue with corl train --resume {self.run_dir}{auto}"
            )
        return (
            f"{verb} ({self.signal_name}) before step {self.steps_done + 1}, nothing new trained; {how_to_continue(self.run_dir)}"
        )


class Run:
    """Owns a run: its (local) agents, data, label source, logs and checkpoints. Subclasses
    define `step(step) -> metrics` (`corl.trainer.CohortTrainer`: Algorithm 1)."""

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
        how to enter the run folder, when the caller decided it (`corl.checkpoints.run_folder`)."""
        self.cfg = cfg
        self.run_dir = Path(run_dir or cfg.output_dir)
        self.placement = placement or Placement.single(len(cfg.agents))
        self.exchange = exchange or LocalExchange()
        torch.set_flush_denormal(True)  # denormals once made a CPU update 14x slower
        torch.manual_seed(cfg.cohort.seed)
        self.device = device or resolve_device(cfg.device)

        self.train_data = load_train_data(cfg)
        self.cfg = cfg = answers_as_found(cfg, self.train_data)  # unlabeled data is recorded so: a resume reads it so
        self.val_data = load_eval_data(cfg)
        preflight(cfg, self.run_dir, len(self.train_data.problems))  # before any model loads

        self.start_step = 0
        self.loop_state: dict = {"first_reward_std": {}}
        # a collective: every process continues from the same step, also on nodes without a shared disk
        agreed = agreed_checkpoint(self.run_dir, self.exchange)
        self.entry = entry or enter_run_folder(cfg, self.run_dir, resume=resume)
        # what the run records and every checkpoint carries: a new run's is its configuration as resolved here
        self.record = self.entry.record if self.entry.checkpoint is not None else run_record(cfg)
        self.agents: dict[int, Agent] = {}
        self.log = None
        try:
            self._build(agreed if self.entry.checkpoint is not None else None, data_parallel)
        except BaseException:  # refused (the disk estimate), failed or stopped by a signal while starting
            self._leave_unstarted()
            raise

    def _build(self, checkpoint: Path | None, data_parallel: DataParallel | None) -> None:
        """The agents (fresh, or from `checkpoint`), the disk estimate, the loop's parts and state,
        and the run folder's files."""
        cfg = self.cfg
        if checkpoint is not None:
            verify_checkpoint(checkpoint, [cfg.agents[n].name for n in self.placement.agents])
        for n in self.placement.agents:  # one by one: a failure closes the ones built before it
            self.agents[n] = build_agent(
                cfg, n, self.device, checkpoint / cfg.agents[n].name if checkpoint else None, data_parallel
            )
        check_disk(cfg, self.run_dir, self.exchange, list(self.agents.values()), checkpoint)
        if checkpoint is not None:
            state = load_loop_state(checkpoint)
            self.start_step = state["step"]
            self.loop_state = state["loop"]
            set_rng_state(state["rng"])
            for agent in self.agents.values():
                agent.load(checkpoint / agent.name)

        # Only a source that declares reads_gold (GT-Reward) is handed the answer column.
        self.label_spec = label_source_spec(cfg.cohort.label_source)
        self.reward = weighted_reward(cfg.cohort.reward_terms())
        self.task = task_spec(cfg.data.task)
        self.label_source = build_label_source(
            cfg.cohort.label_source,
            min_agreement=cfg.cohort.min_agreement,
            gold=self.train_data.gold if self.label_spec.reads_gold else None,
            key=self.task.key,
            seed=cfg.cohort.seed,
            teacher=cfg.cohort.teacher,
        )
        self.params = SamplingParams(
            cfg.cohort.temperature, cfg.cohort.top_p, cfg.cohort.max_new_tokens, tuple(cfg.cohort.stop_strings)
        )
        self.names = [a.name for a in cfg.agents]
        self.monitor = CollapseMonitor(self.names, cfg.health.collapse_steps, self.reward.binary, console=self.placement.is_main)
        self.monitor.load_state_dict(self.loop_state.get("health", {}))
        self.selector = Selector(cfg, self.names, self.loop_state)
        if checkpoint is not None and self.selector.active and self.placement.commits_checkpoints:
            finish_publishing(self.run_dir, self.selector.record())  # a kill while RUN/best/ was published
        if self.placement.is_main:
            self._open_run_folder()

    def _leave_unstarted(self) -> None:
        """A run that never reached its first step leaves the folder as it found it (corl.checkpoints.run_folder)."""
        for agent in self.agents.values():
            with contextlib.suppress(Exception):
                agent.close()
        if self.log is not None:
            self.log.close()
        self.entry.leave()

    def _open_run_folder(self) -> None:
        """A new run writes its record (and config.yaml, for people); a resumed one keeps
        both. Rows after the checkpoint's step are dropped (all of them, the validation before
        training at step 0 too, when a run without a checkpoint starts again)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.entry.checkpoint is None:
            write_record(self.run_dir, self.record, exclusive=self.entry.fresh)
            dump_config(self.cfg, self.run_dir / "config.yaml")
        renumber_old_run(self.run_dir)  # a run logged from step 0 before the one numbering (corl.tracking.step_numbering)
        # rows are numbered from 1 (steps done); the validation before training is 0
        first = self.start_step + 1 if self.entry.checkpoint is not None else (0 if self.entry.redo else None)
        # a redone run continues its W&B run too: the steps it already sent are not sent again
        continuing = self.entry.checkpoint is not None or self.entry.redo
        mirrors = wandb_mirrors(self.cfg, self.run_dir, resumed=continuing)
        self.log = MetricsLog(self.run_dir, self.cfg.logging.reports_to("tensorboard"), resume_step=first, mirrors=mirrors)

    def step(self, step: int) -> dict[str, float]:
        raise NotImplementedError

    def _seed(self, step: int, n: int, dp_rank: int | None = None) -> int:
        base = self.cfg.agents[n].seed if self.cfg.agents[n].seed is not None else self.cfg.cohort.seed
        return sampling_seed(base, step, n, self.placement.dp_rank if dp_rank is None else dp_rank)

    def _sample(self, step: int, agent: Agent, problems: list[Problem], k: int) -> Rollout:
        try:
            return agent.sample(problems, k, self.params)
        except RuntimeError as err:  # torch.multinomial on NaN/inf probabilities: name who and when
            if "inf" not in str(err) and "nan" not in str(err):
                raise
            check_weights(agent.model, f"step {step + 1}: agent {agent.name!r}")
            raise HealthError(
                f"step {step + 1}: agent {agent.name!r}: sampling failed on NaN/inf probabilities ({err}); its weights are finite "
                f"but too large (diverged). Lower its lr: {AFTER_DIVERGENCE}"
            ) from err

    def _check_rewards(self, step: int, rewards: dict[int, torch.Tensor]) -> None:
        """A NaN/inf reward: skip (the update sees a NaN advantage and skips its own step) or stop."""
        stop = self.cfg.health.on_nonfinite == "stop"
        for n, r in rewards.items():
            if nonfinite(r):
                bad = int((~torch.isfinite(r)).sum())
                stop_or_warn(
                    f"step {step + 1}: agent {self.names[n]!r}: {bad} of {r.numel()} rewards are NaN/inf (cohort.reward {self.reward.name!r})",
                    stop,
                )

    def _check_updates(self, step: int, rewards: dict[int, torch.Tensor], updates: dict[int, UpdateStats]) -> None:
        """After the updates: a NaN/inf loss, non-finite weights, or weights that grew too fast."""
        stop = self.cfg.health.on_nonfinite == "stop"
        for n, agent in self.agents.items():
            if updates[n].skipped_nonfinite and not nonfinite(rewards[n]):
                stop_or_warn(f"step {step + 1}: agent {self.names[n]!r}: the loss or gradient norm was NaN/inf", stop)
            check_weights(agent.model, f"step {step + 1}: agent {self.names[n]!r} after its update")
            where = f"step {step + 1}: agent {self.names[n]!r} (agents.{n}.lr {self.cfg.agents[n].lr:g})"
            check_weight_growth(
                updates[n].weight_norm, updates[n].weight_norm_ratio, self.cfg.health.max_weight_norm_ratio, where
            )

    def validate(self) -> dict[str, float]:
        """Greedy accuracy of every agent on the held-out split, graded by the run's task kind
        (`corl.trainer.validation`)."""
        return validate(self)

    def checkpoint(self, steps_done: int, gathered: bool = False) -> Path | None:
        """Every agent's dp-rank 0 writes its agent's folder (all its ranks take part: a sharded
        model is gathered, and each rank writes its shards); the rank that commits checkpoints
        on each disk (the main process on a shared one) writes the loop state. Under FSDP2 the
        whole model is gathered into a Hugging Face folder only when `gathered` (the final step,
        a step best/ publishes); the other steps hold the shards (`corl export` gathers them)."""
        self.loop_state["health"] = self.monitor.state_dict()
        return save_checkpoint(
            self.run_dir,
            steps_done,
            list(self.agents.values()),
            self.loop_state,
            write_state=self.placement.commits_checkpoints,
            exchange=self.exchange,
            record=self.record,
            gathered=gathered,
        )

    def train(
        self, on_step: Callable[[int, dict], None] | None = None, should_stop: Callable[[], bool] | None = None
    ) -> dict[str, float]:
        """Run from the current step to cfg.cohort.steps; returns the last metrics.

        `should_stop` is asked before the first step and after every step (by every process: it
        must agree across them); True raises `Preempted`, after a checkpoint of the steps done."""
        cfg = self.cfg
        last: dict[str, float] = {}
        try:
            if self.selector.state["stopped"] and self.placement.is_main:
                print(f"corl: the run stopped early before ({self.selector.state['stopped']['reason']}); nothing to resume")
            if self.selector.state["stopped"]:
                return last
            if cfg.logging.eval_on_start and self.start_step == 0:
                self._validation_point(-1)
            if should_stop is not None and self.start_step < cfg.cohort.steps and should_stop():
                raise Preempted(self.start_step, self.entry.checkpoint, self.run_dir, saved=False)  # asked while starting
            for step in range(self.start_step, cfg.cohort.steps):
                unknown_checks()  # a step's grading/unknown counts its own checks, not validation's or earlier code's
                last = self.step(step)
                self._log(step, last)
                self.selector.record_step(last)
                done, stopped = step + 1, False
                if cfg.logging.eval_every and done % cfg.logging.eval_every == 0 and done < cfg.cohort.steps:
                    self._validation_point(step)
                    stopped = self._after_point(done, final=False)
                if cfg.logging.checkpoint_every and done % cfg.logging.checkpoint_every == 0 and done < cfg.cohort.steps:
                    self._checkpoint_once(done)
                if on_step is not None:
                    on_step(step, last)
                if stopped:
                    return last
                if should_stop is not None and done < cfg.cohort.steps and should_stop():
                    raise Preempted(done, self._checkpoint_once(done), self.run_dir)
            if self.start_step < cfg.cohort.steps or latest_checkpoint(self.run_dir) is None:
                last.update(self._validation_point(cfg.cohort.steps - 1))
                self._after_point(cfg.cohort.steps, final=True)
        finally:
            if self.log is not None:
                self.log.close()
            for agent in self.agents.values():
                agent.close()
            self.entry.leave()  # the run has ended: its folder lock goes (with an unstarted run's files, corl.checkpoints.run_folder)
        return last

    def _checkpoint_once(self, done: int, gathered: bool = False) -> Path:
        """The checkpoint `done` steps in: the one written already (a validation point's), else a new one."""
        saved = latest_checkpoint(self.run_dir)
        return saved if saved is not None and checkpoint_step(saved) == done else self.checkpoint(done, gathered)

    def _validation_point(self, step: int) -> dict[str, float]:
        """Validate after `step` (-1: before training), record the point's label-free scores
        (`corl.trainer.selection`) and log both; the metrics."""
        point = validation_point(self, self.selector.active, self.selector.samples, seed=self.cfg.cohort.seed + step + 1)
        metrics = point.metrics | self.selector.observe(step, point.keys, point.samples, point.accuracy)
        # a point between the first step and the last may stop the run (cohort.stop): the stop is part of
        # the point's row (one row per step and kind), and `_after_point` acts on it
        self._stop_reason = self.selector.stop_reason() if 0 <= step < self.cfg.cohort.steps - 1 else None
        if self._stop_reason is not None:
            metrics |= {"stop/early": 1.0, "stop/checkpoint_step": float(step + 1)}
        self._log(step, metrics, kind="val")
        return metrics

    def _after_point(self, done: int, final: bool) -> bool:
        """After a validation point: stop early if cohort.stop says so, and (re)write the best
        folders whose rule chose this point; the final point (or the stop) writes the final
        checkpoint. True when the run stops here."""
        reason = None if final else self._stop_reason  # decided (and logged) with the point's row
        if reason is not None:
            self.selector.state["stopped"] = {"step": done, "checkpoint_step": done, "reason": reason}
            if self.placement.is_main:
                print(f"corl: stopped early after step {done} (cohort.stop.rule {self.cfg.cohort.stop.rule}): {reason}")
        folders = self.selector.folders_at(done)
        if not (final or reason or folders):
            return False
        saved = self.checkpoint(done, gathered=True) if final else self._checkpoint_once(done, gathered=True)
        if self.selector.active and self.placement.commits_checkpoints:
            record = self.selector.record()
            for name in folders:
                publish(self.run_dir, saved, name, record)
            write_selection(self.run_dir, record, list(record["folders"]))
        for note in self.selector.notes() if self.placement.is_main else ():
            print(f"corl: {note}")
        return reason is not None

    def _log(self, step: int, metrics: dict, kind: str = "train") -> None:
        """Log the row of the loop's 0-based `step` (-1: before training) as step `step + 1`:
        rows count steps done, as checkpoints and messages do (corl.tracking.step_numbering)."""
        if self.log is not None and metrics:
            self.log.log(step + 1, metrics, kind)
