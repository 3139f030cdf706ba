"""`ring2`: agent n is taught by the pooled majority of agents n-1 and n-2.

A generalization of Co-RL's ring: with three or more agents, each agent's label comes
from its two predecessors' 2K votes together, so one confidently wrong teacher can be
outvoted by the other. The agent's own answers never enter its label.
"""

from __future__ import annotations

from corl.labels.registry import LabelSourceSpec, register_label_source
from corl.labels.sources import thresholded
from corl.labels.vote import AnswersTable, Labels


def ring2_teachers(agent: int, num_agents: int) -> tuple[int, int]:
    """Agents n-1 and n-2 on the directed ring (agent 0 is taught by N-1 and N-2)."""
    if num_agents < 3:
        raise ValueError("label source 'ring2' needs at least 3 agents (with 2, both predecessors would include the agent)")
    return (agent - 1) % num_agents, (agent - 2) % num_agents


def ring2_labels(table: AnswersTable, min_agreement: float = 0.0) -> Labels:
    """Agent n's label for prompt b: the majority of the 2K answers of agents n-1 then n-2.

    Votes are pooled in that order (n-1's K samples first), so a tie goes to the answer
    agent n-1 wrote first, by `majority_vote`'s first-seen rule.
    """
    return [
        [
            thresholded(table.pooled_majority(ring2_teachers(n, table.num_agents), b), min_agreement)
            for b in range(len(table.prompt_ids))
        ]
        for n in range(table.num_agents)
    ]


register_label_source(
    LabelSourceSpec(
        "ring2",
        lambda ctx: lambda table: ring2_labels(table, ctx.min_agreement),
        "agent n is taught by the pooled majority of agents n-1 and n-2",
        min_agents=3,
        teachers=ring2_teachers,
    )
)
