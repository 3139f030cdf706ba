"""A step's logged metrics: the answers table's diagnostics, rewards, and every agent's
update statistics averaged over its data-parallel ranks."""

from __future__ import annotations

import torch

from corl.answers import unknown_checks
from corl.tracking.diagnostics import step_diagnostics
from corl.trainer.table import AgentShard, assemble


def gather_metrics(run, step: int, table, labels, rewards, rollouts, updates, positions: list[int]) -> dict[str, float]:
    """Every process's rewards, lengths and update statistics, gathered; the step's metrics
    (the same on every process) with the collapse monitor's."""
    k = run.cfg.cohort.samples_per_prompt
    report = {
        n: AgentShard(positions, list(zip(rewards[n].tolist(), rollouts[n].completion_lengths.view(-1, k).tolist())))
        for n in run.agents
    }
    # the lr an update used wins over the optimizer's now, which the scheduler has moved on to the next step's
    stats = {n: _learning_rate(run.agents[n]) | updates[n].as_dict() for n in run.agents}
    gathered = run.exchange.all_gather((report, stats, unknown_checks()))
    per_prompt = assemble([g[0] for g in gathered], len(run.cfg.agents), len(table.prompt_ids), "rewards")
    metrics = step_metrics(run, table, labels, per_prompt, [g[1] for g in gathered])
    # answer checks with no verdict (the grader's last wall guard passed): they earned nothing and
    # were not counted as wrong; every process's rewards, then this process's diagnostics
    metrics["grading/unknown"] = float(sum(g[2] for g in gathered) + unknown_checks())
    metrics.update(run.monitor(step + 1, metrics, labels))  # messages count steps from 1
    # every agent's generated tokens of the trained samples; the loop divides by the step's time
    metrics["time/completion_tokens"] = float(sum(sum(sum(ls) for _, ls in rows) for rows in per_prompt))
    return metrics


def _learning_rate(agent) -> dict[str, float]:
    """{"lr": the optimizer's learning rate now} ({} for a frozen agent: it has no optimizer)."""
    optimizer = getattr(agent, "optimizer", None)
    return {"lr": float(optimizer.param_groups[0]["lr"])} if optimizer is not None else {}


def step_metrics(run, table, labels, per_prompt, stats_by_process) -> dict[str, float]:
    """per_prompt: [N][B] rows of (rewards [K], lengths [K]); stats_by_process: each process's
    {agent: UpdateStats.as_dict()}. `run.loop_state` keeps each agent's first reward std."""
    names = run.names
    rewards = [torch.tensor([r for r, _ in agent_rows]) for agent_rows in per_prompt]  # N x [B, K]
    lengths = [torch.tensor([length for _, length in agent_rows]).flatten() for agent_rows in per_prompt]
    gold = run.train_data.gold or None
    metrics = step_diagnostics(names, table, labels, rewards, lengths, run.task.equivalent, gold=gold)
    if not run.reward.binary:
        for name, r in zip(names, rewards):  # binary-reward statistics do not describe these
            metrics[f"{name}/reward_mean"] = float(r.mean())
            metrics[f"{name}/reward_std"] = float(r.std(unbiased=False))
    first = run.loop_state["first_reward_std"]
    for name in names:
        first.setdefault(name, metrics[f"{name}/reward_std"])
        base = first[name]
        metrics[f"{name}/reward_std_normalized"] = metrics[f"{name}/reward_std"] / base if base > 0 else float("nan")
    # update statistics: averaged over the data-parallel ranks of each agent
    merged: dict[str, list[float]] = {}
    for stats in stats_by_process:
        for n, values in stats.items():
            for key, value in values.items():
                merged.setdefault(f"{names[n]}/{key}", []).append(value)
    metrics.update({key: sum(v) / len(v) for key, v in merged.items()})
    return metrics
