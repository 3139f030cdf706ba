"""The step's one frozen snapshot: every agent's answers for every prompt of the batch.

Each process samples its share (`AgentShard`s of `PromptAnswers`); the exchange gathers them
and `assemble` + `answers_table` turn them into the `AnswersTable` the label source reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from corl.labels import AnswersTable, SampleInfo, vote_shares
from corl.rollout import Rollout


@dataclass(frozen=True)
class PromptAnswers:
    """One agent's V answers for one prompt (and its EMA teacher's, when it has one): every
    sample it drew (cohort.votes_per_prompt), of which the first K are the trained ones."""

    answers: tuple[str | None, ...]  # [V] as written; None = no answer
    keys: tuple[str | None, ...]  # [V] canonical vote keys
    teacher_answers: tuple[str | None, ...] | None = None
    teacher_keys: tuple[str | None, ...] | None = None
    samples: tuple[SampleInfo, ...] = ()  # [V] what else is known of each sample


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


def answers_table(
    prompt_ids: tuple[str, ...], rows: list[list[PromptAnswers]], with_teacher: bool, step: int = 0
) -> AnswersTable:
    """[N][B] per-prompt answers of step `step` -> the step's answers table."""

    def grid(field: str) -> tuple:
        return tuple(tuple(getattr(r, field) for r in agent_rows) for agent_rows in rows)

    return AnswersTable(
        prompt_ids=prompt_ids,
        answers=grid("answers"),
        keys=grid("keys"),
        teacher_answers=grid("teacher_answers") if with_teacher else None,
        teacher_keys=grid("teacher_keys") if with_teacher else None,
        samples=grid("samples"),
        step=step,
    )


def sample_infos(rollout: Rollout, keys: list[tuple]) -> list[tuple[SampleInfo, ...]]:
    """[B][V] per-sample records of a rollout whose vote keys are `keys` ([B][V]); a vote share
    is the share of all V samples of the prompt."""
    k = rollout.num_samples
    if rollout.sampling_logprobs is None:
        logprobs = [float("nan")] * rollout.completion_lengths.numel()
    else:  # [N, C] (zero past each completion's end)
        logprobs = (rollout.sampling_logprobs.float() * rollout.completion_mask).sum(-1).tolist()
    lengths = rollout.completion_lengths.tolist()
    truncated = rollout.truncated.tolist()
    out = []
    for b, group in enumerate(keys):
        shares = vote_shares(group)
        rows = range(b * k, (b + 1) * k)
        out.append(tuple(SampleInfo(logprobs[i], int(lengths[i]), bool(truncated[i]), share) for i, share in zip(rows, shares)))
    return out
