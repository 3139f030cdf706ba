"""The Co-RL training loop (the paper's Algorithm 1), written once for every method.

    for each step:
        1. draw one batch of unlabeled prompts (same ids for every agent)
        2. every agent samples V completions; extract each final answer
        3. exchange the answers table (all V): the step's one frozen snapshot
        4. labels from that snapshot alone (peer ring / self / truth / ema)
        5. rewards of the first K of each prompt's V: 1 if the answer is equivalent to
           the label, else 0 (or an intrinsic reward: RENT's entropy, Intuitor's self-certainty)
        6. each agent that trains does its own GRPO update on those K

V = cohort.votes_per_prompt, K = cohort.samples_per_prompt (V = K unless set).

Co-RL, TTRL, GT-Reward, Co-rewarding-II, RENT and Intuitor differ only in steps 4-5.
No parameter, gradient or optimizer state crosses agents; only the answers table does.

What differs is looked up by name in registries and read from specs, never branched on:
the label source (`corl.labels`), the reward (`corl.rewards`), the task kind that turns
completions into answers (`corl.tasks`) and the rollout engine (`corl.rollout`).
Everything around the step (setup, resume, validation, checkpoints) is `corl.trainer.run`.

A process hosts the agents its `Placement` names (all of them in a single process) and
samples its share of the prompts; `Exchange.all_gather` makes every process see the
whole table (see `corl.parallel`).
"""

from __future__ import annotations

import time

import torch

from corl.data.rows import Problem
from corl.rewards import RewardInputs
from corl.rollout import Rollout
from corl.tracking.completions import CompletionsLog, agent_rows, gather_rows
from corl.trainer.agent import Agent
from corl.trainer.metrics import gather_metrics
from corl.trainer.run import Run
from corl.trainer.table import AgentShard, PromptAnswers, answers_table, assemble, sample_infos


class CohortTrainer(Run):
    """Algorithm 1 over the run that `Run` sets up: `step` is one iteration of it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        log = self.cfg.logging
        self.completions = None  # logging.log_completions: the main process writes them
        if log.log_completions and self.placement.is_main:
            first = self.start_step + 1  # steps count from 1: a resumed run redoes the steps after its checkpoint
            self.completions = CompletionsLog(self.run_dir, log.log_completions_every, first, log.reports_to("wandb"))

    def step(self, step: int) -> dict[str, float]:
        cfg = self.cfg.cohort
        k, v = cfg.samples_per_prompt, cfg.votes
        n_agents = len(self.cfg.agents)
        t0 = time.perf_counter()
        # 1. one batch of unlabeled prompts, the same ids for every agent
        order = self.train_data.batch(step, cfg.prompts_per_step, cfg.seed)  # data.train's files by their weights
        batch = [self.train_data.problems[i] for i in order]
        positions = self.placement.prompt_positions(len(batch))
        mine = [batch[i] for i in positions]

        # 2. every agent samples V completions per prompt (its own wording) and extracts answers
        sampled: dict[int, Rollout] = {}
        shard: dict[int, AgentShard] = {}
        for n, agent in self.agents.items():
            sampled[n] = self._sample_share(step, n, agent, batch, positions, v)
            shard[n] = AgentShard(positions, self._answers(agent, sampled[n], mine, v))
        t_sample = time.perf_counter()

        # 3. the answers table (all V): one frozen snapshot of every agent, gathered from every process
        rows = assemble(self.exchange.all_gather(shard), n_agents, len(batch), "answers table")
        table = answers_table(tuple(p.id for p in batch), rows, self.label_spec.needs_teacher, step=step)

        # 4. labels from the snapshot alone: no agent has updated yet
        labels = self.label_source(table)

        # 5. rewards of this process's trained completions: the first K of each prompt's V
        rollouts = {n: sampled[n].first_samples(k) for n in self.agents}
        rewards = {n: self._rewards(n, agent, rollouts[n], table, labels, positions, mine) for n, agent in self.agents.items()}
        self._check_rewards(step, rewards)

        # 6. only now does any agent update, each on its own (a frozen one, agents[].train: false, does not)
        updates = {
            n: agent.update(rollouts[n], rewards[n], self.params, exclude=self._loss_excluded(rollouts[n]))
            for n, agent in self.agents.items()
        }
        t_update = time.perf_counter()
        self._check_updates(step, rewards, updates)
        if self.cfg.logging.log_completions and (step + 1) % self.cfg.logging.log_completions_every == 0:
            self._log_completions(step, mine, positions, table, labels, rollouts, rewards)

        metrics = gather_metrics(self, step, table, labels, rewards, rollouts, updates, positions)
        metrics["time/sample_s"] = t_sample - t0
        metrics["time/update_s"] = t_update - t_sample
        metrics["time/tokens_per_s"] = metrics["time/completion_tokens"] / max(t_update - t0, 1e-9)
        return metrics

    def _sample_share(self, step: int, n: int, agent: Agent, batch: list[Problem], positions: list[int], k: int) -> Rollout:
        """Agent n's samples of this process's prompts. distributed.sampling: replicated draws
        the whole batch from dp rank 0's seed, as a single process does, and keeps the share."""
        if self.cfg.distributed.sampling == "replicated" and self.placement.dp_size > 1:
            torch.manual_seed(self._seed(step, n, dp_rank=0))
            return self._sample(step, agent, batch, k).select_prompts(positions)
        torch.manual_seed(self._seed(step, n))
        return self._sample(step, agent, [batch[i] for i in positions], k)

    def _answers(self, agent: Agent, rollout: Rollout, problems: list[Problem], v: int) -> list[PromptAnswers]:
        """The task kind's answers for an agent's V samples per prompt (and for its EMA teacher's
        V), with what the table records of each sample (`SampleInfo`)."""
        answers, keys = self._drop_truncated(rollout, *self.task.answers(rollout.texts, problems, v))
        samples = sample_infos(rollout, keys)
        if agent.teacher is None:
            return [PromptAnswers(a, key, samples=info) for a, key, info in zip(answers, keys, samples, strict=True)]
        teacher = agent.sample_teacher(problems, v, self.params)
        t_answers, t_keys = self._drop_truncated(teacher, *self.task.answers(teacher.texts, problems, v))
        rows = zip(answers, keys, t_answers, t_keys, samples, strict=True)
        return [PromptAnswers(a, key, t_a, t_key, samples=info) for a, key, t_a, t_key, info in rows]

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

    def _rewards(self, n: int, agent: Agent, rollout: Rollout, table, labels, positions: list[int], mine: list[Problem]):
        """Agent n's rewards for this process's prompts: [B, K], the weighted sum of cohort.rewards,
        of its trained samples (`rollout`: the first K of each prompt's V in the table)."""
        k = rollout.num_samples
        inputs = RewardInputs(
            texts=rollout.texts,
            answers=[table.answers[n][p][:k] for p in positions],
            keys=[table.keys[n][p][:k] for p in positions],
            labels=[labels[n][p] for p in positions],
            samples=[table.samples[n][p][:k] for p in positions],
            equivalent=self.task.equivalent,
            k=k,
        )
        gold_rows = lambda: [self.train_data.row(p.id) for p in mine]  # noqa: E731  (only a from_gold reward calls it)
        return self.reward(inputs, gold_rows, lambda fn: agent.logit_rewards(rollout, fn, self.cfg.cohort.temperature))

    def _log_completions(self, step: int, mine: list[Problem], positions: list[int], table, labels, rollouts, rewards) -> None:
        """logging.log_completions: the step's trained completions with their answers, labels, rewards and
        advantages (`corl.tracking.completions`), from every process (a collective), written by the main one."""
        k = self.cfg.cohort.samples_per_prompt
        rows = {
            n: agent_rows(
                step + 1,
                agent.name,
                mine,
                agent.prompts(mine),
                rollouts[n].texts,
                [table.answers[n][p][:k] for p in positions],
                [labels[n][p] for p in positions],
                rewards[n],
                self.cfg.grpo.scale_rewards,
                rollouts[n].truncated.tolist(),
                self.train_data.gold,
            )
            for n, agent in self.agents.items()
        }
        everyone = gather_rows(self.exchange, rows, positions, k)
        if self.completions is not None:
            self.completions.write(step + 1, everyone)

    def _loss_excluded(self, rollout: Rollout) -> torch.Tensor | None:
        """cohort.truncated_answers drop: the truncated completions ([N] bool), left out of the
        loss as TRL's mask_truncated_completions leaves them (their reward still counts in their
        group's advantages); keep: None."""
        return rollout.truncated if self.cfg.cohort.truncated_answers == "drop" else None
