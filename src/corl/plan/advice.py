"""Which option to change first when a plan does not fit: re-plan the config with one change
at a time, cheapest for the run first (room for a vLLM engine that cannot hold a sequence:
its share, the minibatch, tensor parallel; then the batch split finer, recomputation,
sleeping engines), then the ones that change how it trains (FSDP, LoRA, bf16), and say the
first that fits, or the set that does together."""

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


SHARE = "rollout.gpu_memory_utilization"
MIN_MODEL_LEN = 16  # rollout.max_model_len's least value
SHARES = tuple(round(0.05 * i, 2) for i in range(1, 19))  # 0.05 ... 0.9


@dataclass(frozen=True)
class Share:
    """vLLM's share of the device raised: the largest that fits (the most KV cache, so the
    fastest sampling), else the smallest at which every engine holds a sequence (for other
    changes to make room)."""

    key: str = SHARE

    def change(self, cfg: RunConfig, replan: Replan) -> list[str] | None:
        from corl.rollout.vllm import GPU_MEMORY_UTILIZATION

        current = cfg.rollout.gpu_memory_utilization or GPU_MEMORY_UTILIZATION
        higher = [share for share in SHARES if share > current]
        plans = {share: replan(with_overrides(cfg, [f"{self.key}={share}"])) for share in higher}
        fitting = [share for share in higher if plans[share].fits]
        if fitting:
            return [f"{self.key}={fitting[-1]}"]
        holding = [share for share in higher if not plans[share].short_engines]
        return [f"{self.key}={holding[0]}"] if holding else None


@dataclass(frozen=True)
class TensorParallel:
    """vLLM's engine sharded over `size` of the agent's ranks (1/size of its weights and KV cache
    on each), with the larger share of the device it may then need to hold a sequence."""

    size: int
    key: str = "rollout.tensor_parallel_size"

    def change(self, cfg: RunConfig, replan: Replan) -> list[str] | None:
        sharded = [f"{self.key}={self.size}"]
        if not replan(with_overrides(cfg, sharded)).short_engines:
            return sharded
        return sharded + (Share().change(with_overrides(cfg, sharded), replan) or [])


Searched = Search | Share | TensorParallel
Candidate = list[str] | Searched


def engine_candidates(cfg: RunConfig, plan: RunPlan) -> list[Candidate]:
    """For a vLLM engine that cannot hold one full sequence, before anything that changes the
    training: a max_model_len no longer than a sequence, the engine asleep through the update,
    a larger share of the device, a smaller update minibatch (room for that share while the
    engine is awake), the engine sharded over more of the agent's ranks (tensor parallel)."""
    short = plan.short_engines
    out: list[Candidate] = []
    needed = max(MIN_MODEL_LEN, *(ag.prompt.tokens + ag.completion for ag in short))
    if max(ag.engine_max_len for ag in short) > needed:
        out.append([f"rollout.max_model_len={needed}"])
    if not cfg.rollout.sleep_mode:
        out.append(["rollout.sleep_mode=true"])
    out.append(Share())
    trained = [ag for ag in short if ag.trains and ag.minibatch > 1]
    if trained:
        out.append(Search("grpo.minibatch_size", max(ag.minibatch for ag in trained)))
    ranks = min(ag.dp for ag in short)
    for tp in (2, 4, 8):
        if cfg.rollout.tensor_parallel_size < tp <= ranks and ranks % tp == 0:
            out.append(TensorParallel(tp))
    return out


def candidates(cfg: RunConfig, plan: RunPlan) -> list[Candidate]:
    """One change each, in the order to try them: what makes every vLLM engine hold a sequence,
    then what lowers the phase where the worst rank peaks, then what changes the training."""
    worst = plan.worst
    phase = worst.peak_phase
    agent = max(worst.agents, key=lambda ag: sum(x.bytes for x in ag.phases.get(phase, [])))
    out: list[Candidate] = engine_candidates(cfg, plan) if plan.short_engines else []
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
            if lower < share and not plan.short_engines:  # a smaller share cannot help an engine already short
                out.append([f"{SHARE}={lower}"])
    if not cfg.distributed.fsdp and plan.machine.on_gpu and agent.dp > 1:
        out.append(["distributed.fsdp=true"])
    if not cfg.compute.bf16 and plan.machine.on_gpu:
        out.append(["compute.bf16=true"])
    if cfg.compute.lora is None:
        out.append(["compute.lora={r: 16}"])
    return _unique(out)


def _unique(changes: list[Candidate]) -> list[Candidate]:
    """Each option once, at its first (cheapest) place."""
    seen, out = set(), []
    for change in changes:
        key = (change.key, getattr(change, "size", None)) if isinstance(change, Searched) else tuple(change)
        if key not in seen:
            seen.add(key)
            out.append(change)
    return out


def _key(option: str) -> str:
    return option.split("=")[0]


def badness(plan: RunPlan) -> tuple[int, int]:
    """What a change must lower to be kept: engines without room for a sequence, then the peak."""
    return len(plan.short_engines), plan.worst.peak


def _peaks(plan: RunPlan, after: RunPlan) -> str:
    return f"peak {size(plan.worst.peak)} -> {size(after.worst.peak)} of {size(plan.usable)}"


def together(cfg: RunConfig, plan: RunPlan, replan: Replan, tried: list[Candidate]) -> tuple[list[str], RunPlan]:
    """The changes in their order, each kept where it lowers `badness` (a searched one searched on
    the config the earlier ones leave); once they fit, each searched one again on the final
    config, so that a size chosen before a later switch is not smaller than the switch allows."""
    applied: list[str] = []
    current = plan
    searches: list[Searched] = []
    for candidate in tried:
        searched = isinstance(candidate, Searched)
        change = candidate.change(with_overrides(cfg, applied), replan) if searched else candidate
        if not change or (not searched and set(change) <= set(applied)):
            continue
        after = replan(with_overrides(cfg, _replace(applied, change)))
        if badness(after) < badness(current):
            applied, current = _replace(applied, change), after
            searches += [candidate] if searched else []
        if current.fits:
            break
    if current.fits:
        for search in searches:
            others = [x for x in applied if _key(x) != search.key]
            change = search.change(with_overrides(cfg, others), replan)
            after = replan(with_overrides(cfg, _replace(applied, change or [])))
            if change and after.fits:
                applied, current = _replace(applied, change), after
    return applied, current


def _replace(applied: list[str], change: list[str]) -> list[str]:
    """`applied` with `change`'s options set: an option already there changes in place, a new one is added."""
    values = {_key(x): x for x in change}
    out = [values.pop(_key(x), x) for x in applied]
    return out + [x for x in change if _key(x) in values]


def advise(cfg: RunConfig, plan: RunPlan, replan: Replan) -> list[str]:
    """Lines of advice for a plan that does not fit (nothing when it fits or cannot be judged)."""
    if plan.fits is not False:
        return []
    tried = candidates(cfg, plan)
    for candidate in tried:
        change = candidate.change(cfg, replan) if isinstance(candidate, Searched) else candidate
        if not change:
            continue
        after = replan(with_overrides(cfg, change))
        if after.fits:
            return [f"change first: {set_options(change)} ({_peaks(plan, after)})"]
    applied, current = together(cfg, plan, replan, tried)
    if current.fits:
        return [f"no single option fits; together: {set_options(applied)} ({_peaks(plan, current)})"]
    engines = "; vLLM still cannot hold one sequence" if current.short_engines else ""
    return [
        f"nothing in this config fits {size(plan.usable)} per rank (even with {', '.join(applied) or 'no change'}: "
        f"{size(current.worst.peak)}{engines}): more ranks per agent with distributed.fsdp, a smaller model, or "
        "shorter completions (cohort.max_new_tokens)"
    ]
