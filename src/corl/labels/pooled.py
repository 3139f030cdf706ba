"""`pooled`: agent n is taught by one majority vote over every other agent's answers.

A topology for three or more agents beyond the ring: the (N-1) K answers of the other agents
are pooled in agent order (agent 0's K samples first, skipping n) and voted once, so a tie
goes to the answer the lowest-numbered other agent wrote first (`majority_vote`'s first-seen
rule). The agent's own answers never enter its label. With two agents it would be `peer`.
"""

from __future__ import annotations

from corl.labels.registry import LabelSourceSpec, register_label_source
from corl.labels.sources import thresholded
from corl.labels.vote import AnswersTable, Labels


def pooled_teachers(agent: int, num_agents: int) -> tuple[int, ...]:
    """Every agent but `agent`, in agent order."""
    if num_agents < 3:
        raise ValueError("label source 'pooled' needs at least 3 agents (with 2 it is 'peer')")
    return tuple(m for m in range(num_agents) if m != agent)


def pooled_labels(table: AnswersTable, min_agreement: float = 0.0) -> Labels:
    """labels[n][b]: the majority of the pooled answers of every agent but n."""
    return [
        [
            thresholded(table.pooled_majority(pooled_teachers(n, table.num_agents), b), min_agreement)
            for b in range(len(table.prompt_ids))
        ]
        for n in range(table.num_agents)
    ]


register_label_source(
    LabelSourceSpec(
        "pooled",
        lambda ctx: lambda table: pooled_labels(table, ctx.min_agreement),
        "pooled peers: agent n is taught by one majority vote over every other agent's answers",
        min_agents=3,
        teachers=pooled_teachers,
    )
)
