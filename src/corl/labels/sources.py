"""The built-in label sources: Co-RL's peer ring, TTRL, GT-Reward and Co-rewarding-II."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from corl.labels.registry import LabelSourceSpec, register_label_source
from corl.labels.vote import AnswersTable, Labels, Vote, majority_vote


def ring_teacher(agent: int, num_agents: int) -> int:
    """The peer that teaches `agent` on a directed ring: agent n-1, and agent 0 by N-1."""
    if num_agents < 2:
        raise ValueError("the peer ring needs at least 2 agents; use label source 'self' for one")
    return (agent - 1) % num_agents


def thresholded(vote: Vote | None, min_agreement: float) -> Vote | None:
    """The vote, or None (unlabeled) when too few of its voters agree."""
    if vote is None or vote.agreement < min_agreement:
        return None
    return vote


def peer_labels(table: AnswersTable, min_agreement: float = 0.0) -> Labels:
    """Co-RL: agent n's label is the majority answer of its ring teacher, agent n-1."""
    n_agents = table.num_agents
    return [
        [thresholded(table.majority(ring_teacher(n, n_agents), b), min_agreement) for b in range(len(table.prompt_ids))]
        for n in range(n_agents)
    ]


def self_labels(table: AnswersTable, min_agreement: float = 0.0) -> Labels:
    """TTRL (Zuo et al. 2025, arXiv:2504.16084): the label is the agent's own majority."""
    return [
        [thresholded(table.majority(n, b), min_agreement) for b in range(len(table.prompt_ids))] for n in range(table.num_agents)
    ]


def ema_labels(table: AnswersTable, min_agreement: float = 0.0) -> Labels:
    """Co-rewarding-II: the label is the majority of the agent's own EMA teacher's samples."""
    if table.teacher_keys is None or table.teacher_answers is None:
        raise ValueError("label source 'ema' needs the EMA teachers' answers in the table")
    return [
        [
            thresholded(majority_vote(table.teacher_keys[n][b], table.teacher_answers[n][b]), min_agreement)
            for b in range(len(table.prompt_ids))
        ]
        for n in range(table.num_agents)
    ]


def truth_labels(table: AnswersTable, gold: Mapping[str, str | None], key: Callable[[str], str]) -> Labels:
    """GT-Reward: the dataset's answer for each prompt id, the same for every agent."""
    votes: list[Vote | None] = []
    for pid in table.prompt_ids:
        answer = gold.get(pid)
        if answer is None or answer == "":
            votes.append(None)
        else:  # one voter, the dataset: its whole vote is the answer (a vote_share reward is then agreement)
            votes.append(Vote(key=key(answer), answer=answer, count=1, total=1, shares=((key(answer), answer, 1),)))
    return [list(votes) for _ in range(table.num_agents)]


register_label_source(
    LabelSourceSpec(
        "peer",
        lambda ctx: lambda table: peer_labels(table, ctx.min_agreement),
        "Co-RL ring: agent n is taught by the majority of agent n-1",
        min_agents=2,
        teachers=lambda n, size: (ring_teacher(n, size),),
    )
)
register_label_source(
    LabelSourceSpec(
        "self",
        lambda ctx: lambda table: self_labels(table, ctx.min_agreement),
        "TTRL: the agent's own majority",
        teachers=lambda n, size: (n,),
    )
)
register_label_source(
    LabelSourceSpec(
        "truth",
        lambda ctx: lambda table: truth_labels(table, ctx.gold, ctx.key),
        "GT-Reward: the dataset's answer column",
        reads_gold=True,
        teachers=lambda n, size: (),
    )
)
register_label_source(
    LabelSourceSpec(
        "ema",
        lambda ctx: lambda table: ema_labels(table, ctx.min_agreement),
        "Co-rewarding-II: the majority of an EMA copy of the agent",
        needs_teacher=True,
        teachers=lambda n, size: (n,),
    )
)
