"""Which option to change first when a plan does not fit: re-plan the config with one change
at a time, cheapest for the run first (the batch split finer, recomputation, sleeping
engines), then the ones that change how it trains (FSDP, LoRA, bf16), and say the first
that fits, or the set that does together."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from corl.config import RunConfig, apply_overrides, validate_config
from corl.plan.arithmetic import size
from corl.plan.planner import RunPlan

Replan = Callable[[RunConfig], RunPlan]


def set_options(overrides: list[str]) -> str:
    """`--set key=value ...` as a shell reads it: each value quoted where it needs to be ({r: 16})."""
    return " ".join(f"--set {shlex.quote(override)}" for override in overrides)


def with_overrides(cfg: RunConfig, overrides: list[str]) -> RunConfig:
    return validate_config(apply_overrides(cfg.model_dump(mode="json"), overrides), "plan")


def largest_that_fits(cfg: RunConfig, replan: Replan, key: str, upper: int) -> list[str] | None:
    """`key=m` with the largest m in [1, upper) that fits (binary search: memory grows with m),
    or `key=1` when none does (it still lowers the peak); None when upper <= 1."""
    if upper <= 1:
        return None
    lo, hi = 1, upper - 1
    if not replan(with_overrides(cfg, [f"{key}={lo}"])).fits:
        return [f"{key}=1"]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if replan(with_overrides(cfg, [f"{key}={mid}"])).fits:
            lo = mid
        else:
            hi = mid - 1
    return [f"{key}={lo}"]


@dataclass(frozen=True)
class Search:
    """A size to lower (a minibatch, a sampling batch): its largest value that fits."""

    key: str
    upper: int

    def change(self, cfg: RunConfig, replan: Replan) -> list[str] | None:
        return largest_that_fits(cfg, replan, self.key, self.upper)


def candidates(cfg: RunConfig, plan: RunPlan) -> list[list[str] | Search]:
    """One change each, in the order to try them, for where the worst rank peaks."""
    worst = plan.worst
    phase = worst.peak_phase
    agent = max(worst.agents, key=lambda ag: sum(x.bytes for x in ag.phases.get(phase, [])))
    out: list[list[str] | Search] = []
    if phase == "update" and agent.minibatch > 1:
        out.append(Search("grpo.minibatch_size", agent.minibatch))
        if not cfg.compute.gradient_checkpointing:
            out.append(["compute.gradient_checkpointing=true"])
    if phase == "sample" and cfg.rollout.engine == "hf" and agent.sampled_at_once > 1:
        out.append(Search("rollout.batch_size", agent.sampled_at_once))
    if cfg.rollout.engine == "vllm" and plan.machine.on_gpu:
        if not cfg.rollout.sleep_mode:
            out.append(["rollout.sleep_mode=true"])
        share = cfg.rollout.gpu_memory_utilization or 0.45
        for lower in (0.4, 0.35, 0.3, 0.25, 0.2):
            if lower < share:
                out.append([f"rollout.gpu_memory_utilization={lower}"])
    if not cfg.distributed.fsdp and plan.machine.on_gpu and agent.dp > 1:
        out.append(["distributed.fsdp=true"])
    if not cfg.compute.bf16 and plan.machine.on_gpu:
        out.append(["compute.bf16=true"])
    if cfg.compute.lora is None:
        out.append(["compute.lora={r: 16}"])
    return out


def advise(cfg: RunConfig, plan: RunPlan, replan: Replan) -> list[str]:
    """Lines of advice for a plan that does not fit (nothing when it fits or cannot be judged)."""
    if plan.fits is not False:
        return []
    tried = candidates(cfg, plan)
    for candidate in tried:
        change = candidate.change(cfg, replan) if isinstance(candidate, Search) else candidate
        after = replan(with_overrides(cfg, change))
        if after.fits:
            return [
                f"change first: {set_options(change)} (peak {size(plan.worst.peak)} -> "
                f"{size(after.worst.peak)} of {size(plan.usable)})"
            ]
    # Together: the switches first, then each size searched on the config they leave.
    applied: list[str] = []
    current = plan
    for candidate in sorted(tried, key=lambda c: isinstance(c, Search)):
        if isinstance(candidate, Search):
            change = candidate.change(with_overrides(cfg, applied), replan)
        elif candidate[0].split("=")[0] in {x.split("=")[0] for x in applied}:
            continue
        else:
            change = candidate
        after = replan(with_overrides(cfg, applied + change))
        if after.worst.peak < current.worst.peak:
            applied, current = applied + change, after
        if current.fits:
            return [
                f"no single option fits; together: {set_options(applied)} "
                f"(peak {size(plan.worst.peak)} -> {size(current.worst.peak)} of {size(plan.usable)})"
            ]
    return [
        f"nothing in this config fits {size(plan.usable)} per rank (even with {', '.join(applied) or 'no change'}: "
        f"{size(current.worst.peak)}): more ranks per agent with distributed.fsdp, a smaller model, or "
        "shorter completions (cohort.max_new_tokens)"
    ]
