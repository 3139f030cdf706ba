"""The plan as text: per agent its model and shapes, per rank what it holds and each phase's
peak, then the verdict and what to change first."""

from __future__ import annotations

from corl.plan.arithmetic import size
from corl.plan.planner import PHASES, AgentPlan, RankPlan, RunPlan


def _ranks(ranks: tuple[int, ...]) -> str:
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    contiguous = ranks == tuple(range(ranks[0], ranks[-1] + 1))
    return f"ranks {ranks[0]}-{ranks[-1]}" if contiguous else "ranks " + ", ".join(map(str, ranks))


PRECISION = {"fp32": "float32", "autocast": "bf16 autocast", "fsdp_bf16": "bf16 (FSDP2 mixed precision)"}


def _agent_lines(ag: AgentPlan) -> list[str]:
    f = ag.facts
    s = f.shape
    trained = f"{ag.sequences:,} trained (update minibatch {ag.minibatch:,})" if ag.trains else "frozen: none trained"
    lines = [
        f"agent {ag.name}: {f.architecture} ({f.source}), {f.params:,} parameters ({f.trainable:,} trainable), "
        f"computed in {PRECISION[ag.precision]}",
        f"  {s.layers} layers, hidden {s.hidden}, {s.heads} heads ({s.kv_heads} KV), MLP {s.intermediate}, "
        f"vocabulary {s.vocab:,}, {s.attention} attention" + (", q/k norms" if s.qk_norm_width else ""),
        f"  prompt {ag.prompt.tokens:,} tokens ({ag.prompt.how}), completion {ag.completion:,}",
        f"  per rank: {ag.sampled:,} sequences sampled a step ({ag.sampled_at_once:,} at once), {trained}",
    ]
    return lines + [f"  note: {n}" for n in ag.notes]


def _rank_lines(rank: RankPlan) -> list[str]:
    names = ", ".join(ag.name for ag in rank.agents)
    lines = [f"{_ranks(rank.ranks)} ({names}), each:", "  held all the time"]
    several = len(rank.agents) > 1
    for ag in rank.agents:
        prefix = f"{ag.name} " if several else ""
        for item in ag.states:
            lines.append(f"    {prefix + item.what:<38} {size(item.bytes):>12}   {item.note}")
        if ag.engine is not None:
            when = "while sampling (sleep_mode)" if ag.engine_sleeps else "all the time"
            lines.append(f"    {prefix + 'vLLM engine':<38} {size(ag.engine.bytes):>12}   {when}: {ag.engine.note}")
    lines.append("  phase peaks: the states, plus what the phase adds (of the agent that adds the most)")
    for phase in PHASES:
        share = max(rank.agents, key=lambda ag: sum(x.bytes for x in ag.phases.get(phase, [])))
        items = [x for x in share.phases.get(phase, []) if x.bytes]
        lines.append(f"    {phase:<38} {size(rank.totals[phase]):>12}")
        prefix = f"{share.name} " if several else ""
        for x in items:
            lines.append(f"      + {prefix + x.what:<34} {size(x.bytes):>12}   {x.note}")
    return lines


def verdict(plan: RunPlan) -> str:
    worst = plan.worst
    where = f"{_ranks(worst.ranks)}, {worst.peak_phase}"
    if plan.fits is None:
        return f"peak {size(worst.peak)} per rank ({where}); device memory unknown: {plan.machine.described}"
    word = "fits" if plan.fits else "does not fit"
    line = f"{word}: peak {size(worst.peak)} per rank ({where}) of {size(plan.usable)} usable"
    short = plan.short_engines
    if short:
        names = ", ".join(ag.name for ag in short)
        line += f"; vLLM cannot hold one sequence for {names} ({short[0].engine_needs}), and would not start"
    return line


def render(plan: RunPlan, source: str, headroom: float) -> str:
    m = plan.machine
    memory = size(m.memory) if m.memory is not None else "unknown memory"
    usable = f", usable {size(plan.usable)} (plan.headroom {headroom:g})" if plan.usable is not None else ""
    hosted = len(plan.ranks[0].agents)
    split = f"{hosted} agents on each" if hosted > 1 else f"{plan.ranks[0].agents[0].dp} per agent"
    lines = [
        f"memory plan of {source}: {m.ranks} {m.device} rank{'s' * (m.ranks != 1)} ({split}), "
        f"{memory} each ({m.described}){usable}",
        "",
    ]
    seen = set()
    for rank in plan.ranks:
        for ag in rank.agents:
            if ag.index not in seen:
                seen.add(ag.index)
                lines += _agent_lines(ag)
    for rank in plan.ranks:
        lines += ["", *_rank_lines(rank)]
    lines += ["", verdict(plan), *plan.advice]
    return "\n".join(lines)


def summary(plan: RunPlan) -> str:
    """One line for `corl train`: the verdict and, when it does not fit, the first change."""
    return "memory plan: " + verdict(plan) + ("; " + plan.advice[0] if plan.advice else "")
