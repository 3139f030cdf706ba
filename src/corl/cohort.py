"""The Co-RL training loop (the paper's Algorithm 1), written once for every label source.

    for each step:
        1. draw one batch of unlabeled prompts (same ids for every agent)
        2. every agent samples K completions; extract each final answer
        3. exchange the answers table: the step's one frozen snapshot
        4. labels from that snapshot alone (peer ring / self / truth)
        5. rewards: 1 if the answer is equivalent to the label, else 0
        6. each agent does its own GRPO update

Co-RL, TTRL and GT-Reward differ only in step 4. No parameter, gradient or optimizer
state crosses agents; only the answers table does.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from corl.agent import Agent
from corl.answers import answer_key, extract_answer, is_equivalent
from corl.checkpoint import latest_checkpoint, load_loop_state, save_checkpoint, set_rng_state
from corl.config import RunConfig, dump_config
from corl.data import AnswerKey, Problem, PromptTemplate, batch_indices, build_problems, load_rows
from corl.diagnostics import step_diagnostics
from corl.evaluate import greedy_accuracy
from corl.labels import AnswersTable, build_label_source
from corl.models import load_policy, resolve_device
from corl.rewards import agreement_rewards
from corl.rollout import Rollout, SamplingParams
from corl.tracking import MetricsLog

Exchange = Callable[[AnswersTable], AnswersTable]


def answers_table(prompt_ids: list[str], texts_per_agent: list[list[str]], k: int) -> AnswersTable:
    """Extract every completion's final answer and its vote key: [N][B][K]."""
    answers, keys = [], []
    for texts in texts_per_agent:
        extracted = [extract_answer(t) for t in texts]
        answers.append(tuple(tuple(extracted[b * k : (b + 1) * k]) for b in range(len(prompt_ids))))
        keys.append(tuple(tuple(answer_key(a) if a is not None else None for a in group) for group in answers[-1]))
    return AnswersTable(prompt_ids=tuple(prompt_ids), answers=tuple(answers), keys=tuple(keys))


def sampling_seed(seed: int, step: int, agent: int) -> int:
    """A per-(run seed, step, agent) sampling seed: an agent's samples do not depend on
    how many agents share its process or on what ran before, so a resumed run and a
    multi-process run draw exactly what the uninterrupted single-process run draws."""
    digest = hashlib.sha256(f"{seed}/{step}/{agent}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF


@dataclass
class Dataset:
    problems: list[Problem]
    gold: AnswerKey  # empty when the data has no answer column
    rows: list[dict] = field(default_factory=list)


def load_dataset(cfg: RunConfig, source: str, split: str, max_rows: int | None = None) -> Dataset:
    rows = load_rows(source, split)
    if max_rows:
        rows = rows[:max_rows]
    fields = sorted({cfg.prompt_field(a) for a in cfg.agents})
    problems, gold = build_problems(rows, source, fields, cfg.data.id_field, cfg.data.answer_field)
    return Dataset(problems, gold, rows)


def build_agents(cfg: RunConfig, device: torch.device, weights: dict[str, Path] | None = None) -> list[Agent]:
    """Load each agent's own model; `weights` (agent -> checkpoint dir) overrides on resume."""
    agents = []
    for agent_cfg in cfg.agents:
        source = str(weights[agent_cfg.name]) if weights else agent_cfg.model
        model, tokenizer = load_policy(source, None if weights else agent_cfg.tokenizer, device)
        template = PromptTemplate(cfg.data.template, cfg.data.instruction, agent_cfg.chat_template)
        agent = Agent(agent_cfg, model, tokenizer, template, cfg.prompt_field(agent_cfg), cfg.grpo, cfg.cohort.generation_batch_size)
        if weights and agent.reference is not None:
            # The KL anchor is the *initial* policy, not the resumed weights.
            agent.reference = load_policy(agent_cfg.model, agent_cfg.tokenizer, device)[0].eval().requires_grad_(False)
        agents.append(agent)
    return agents


class CohortTrainer:
    """Owns a run: its agents, data, label source, logs and checkpoints."""

    def __init__(self, cfg: RunConfig, run_dir: str | Path | None = None, resume: bool = False, exchange: Exchange | None = None,
                 console=None):
        self.cfg = cfg
        self.run_dir = Path(run_dir or cfg.output_dir)
        self.exchange = exchange or (lambda table: table)
        self.console = console
        torch.set_flush_denormal(True)  # denormals once made a CPU update 14x slower
        torch.manual_seed(cfg.cohort.seed)
        self.device = resolve_device(cfg.device)

        self.train_data = load_dataset(cfg, cfg.data.train, cfg.data.split, cfg.data.max_rows)
        self.val_data = load_dataset(cfg, cfg.data.val, cfg.data.val_split, cfg.data.val_size) if cfg.data.val else None
        if self.val_data is not None and not self.val_data.gold:
            raise ValueError("data.val needs an answer column (data.answer_field) to measure accuracy")

        self.start_step = 0
        self.loop_state: dict = {"first_reward_std": {}}
        checkpoint = latest_checkpoint(self.run_dir) if resume else None
        if resume and checkpoint is None:
            raise FileNotFoundError(f"no checkpoint to resume in {self.run_dir}/checkpoints")
        weights = {a.name: checkpoint / a.name for a in cfg.agents} if checkpoint else None
        self.agents = build_agents(cfg, self.device, weights)
        if checkpoint is not None:
            state = load_loop_state(checkpoint)
            self.start_step = state["step"]
            self.loop_state = state["loop"]
            set_rng_state(state["rng"])
            for agent in self.agents:
                agent.load_state_dict(torch.load(checkpoint / agent.name / "trainer.pt", weights_only=False))

        # Only GT-Reward is handed the answer column; peer and self never see it.
        gold_for_labels = self.train_data.gold if cfg.cohort.label_source == "truth" else None
        self.label_source = build_label_source(
            cfg.cohort.label_source, min_agreement=cfg.cohort.min_agreement, gold=gold_for_labels, key=answer_key
        )
        self.params = SamplingParams(cfg.cohort.temperature, cfg.cohort.top_p, cfg.cohort.max_new_tokens)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        dump_config(cfg, self.run_dir / "config.yaml")
        self.log = MetricsLog(self.run_dir, cfg.logging.tensorboard, resume_step=self.start_step if checkpoint else None)

    # -- Algorithm 1 -------------------------------------------------------------------
    def step(self, step: int) -> dict[str, float]:
        cfg = self.cfg.cohort
        k = cfg.samples_per_prompt
        t0 = time.perf_counter()
        # 1. one batch of unlabeled prompts, the same ids for every agent
        batch = [self.train_data.problems[i] for i in batch_indices(step, len(self.train_data.problems), cfg.prompts_per_step, cfg.seed)]

        # 2. every agent samples K completions per prompt (its own wording of the prompt)
        rollouts: list[Rollout] = []
        for n, agent in enumerate(self.agents):
            torch.manual_seed(sampling_seed(cfg.seed, step, n))
            rollouts.append(agent.sample(batch, k, self.params))
        t_sample = time.perf_counter()

        # 3. the answers table: the step's frozen snapshot, exchanged across processes
        table = self.exchange(answers_table([p.id for p in batch], [r.texts for r in rollouts], k))

        # 4. labels from the snapshot alone (peer ring / self / truth)
        labels = self.label_source(table)

        # 5. rewards: agreement with the label
        rewards = [agreement_rewards(table.answers[n], table.keys[n], labels[n], is_equivalent) for n in range(len(self.agents))]

        # 6. only now does any agent update, each on its own
        updates = [agent.update(rollouts[n], rewards[n], cfg.temperature) for n, agent in enumerate(self.agents)]
        t_update = time.perf_counter()

        metrics = step_diagnostics(
            [a.name for a in self.agents], table, labels, rewards, [r.completion_lengths for r in rollouts], is_equivalent,
            gold=self.train_data.gold or None,
        )
        first = self.loop_state["first_reward_std"]
        for agent, upd in zip(self.agents, updates):
            first.setdefault(agent.name, metrics[f"{agent.name}/reward_std"])
            base = first[agent.name]
            metrics[f"{agent.name}/reward_std_normalized"] = metrics[f"{agent.name}/reward_std"] / base if base > 0 else float("nan")
            metrics.update({f"{agent.name}/{key}": value for key, value in upd.as_dict().items()})
        metrics["time/sample_s"] = t_sample - t0
        metrics["time/update_s"] = t_update - t_sample
        return metrics

    def validate(self) -> dict[str, float]:
        """Greedy accuracy of every agent on the held-out split."""
        if self.val_data is None:
            return {}
        out = {}
        for agent in self.agents:
            prompts = agent.prompts(self.val_data.problems)
            gold = [self.val_data.gold[p.id] for p in self.val_data.problems]
            out[f"{agent.name}/val_accuracy"] = greedy_accuracy(agent.engine, prompts, gold, self.cfg.cohort.max_new_tokens)
        out["cohort/val_accuracy"] = sum(out.values()) / len(out)
        return out

    def checkpoint(self, steps_done: int) -> Path:
        return save_checkpoint(self.run_dir, steps_done, self.agents, self.loop_state)

    def train(self, on_step: Callable[[int, dict], None] | None = None) -> dict[str, float]:
        """Run from the current step to cfg.cohort.steps; returns the last metrics."""
        cfg = self.cfg
        last: dict[str, float] = {}
        try:
            for step in range(self.start_step, cfg.cohort.steps):
                last = self.step(step)
                self.log.log(step, last)
                done = step + 1
                if cfg.logging.eval_every and done % cfg.logging.eval_every == 0 and done < cfg.cohort.steps:
                    self.log.log(step, self.validate(), kind="val")
                if cfg.logging.checkpoint_every and done % cfg.logging.checkpoint_every == 0 and done < cfg.cohort.steps:
                    self.checkpoint(done)
                if on_step is not None:
                    on_step(step, last)
            if self.start_step < cfg.cohort.steps or not (self.run_dir / "checkpoints").exists():
                final_val = self.validate()
                if final_val:
                    self.log.log(cfg.cohort.steps - 1, final_val, kind="val")
                    last.update(final_val)
                self.checkpoint(cfg.cohort.steps)
        finally:
            self.log.close()
        return last
