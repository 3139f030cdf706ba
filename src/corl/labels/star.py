"""`star`: one teacher for the whole cohort.

Agent t = cohort.teacher (default 0) labels every other agent with its own majority answer.
The teacher itself is labelled by the pooled majority of all the others (`AnswersTable.pooled_majority`, in
agent order): it must not label itself (that would be TTRL for the teacher, its own errors
reinforced), and the pooled students are the only label left that is not its own.
"""

from __future__ import annotations

from corl.labels.registry import LabelContext, LabelSourceSpec, register_label_source
from corl.labels.sources import thresholded
from corl.labels.vote import AnswersTable, Labels


def star_teachers(agent: int, num_agents: int, teacher: int = 0) -> tuple[int, ...]:
    """The teacher for every student; every other agent, in order, for the teacher."""
    if num_agents < 3:
        raise ValueError("label source 'star' needs at least 3 agents (with 2 it is 'peer')")
    if not 0 <= teacher < num_agents:
        raise ValueError(f"cohort.teacher {teacher} is not an agent of a {num_agents}-agent cohort (0..{num_agents - 1})")
    if agent != teacher:
        return (teacher,)
    return tuple(m for m in range(num_agents) if m != teacher)


def star_labels(table: AnswersTable, min_agreement: float = 0.0, teacher: int = 0) -> Labels:
    """labels[n][b]: agent `teacher`'s majority for a student; the students' pooled majority for the teacher."""
    n_agents = table.num_agents
    return [
        [
            thresholded(table.pooled_majority(star_teachers(n, n_agents, teacher), b), min_agreement)
            for b in range(len(table.prompt_ids))
        ]
        for n in range(n_agents)
    ]


def _teachers(agent: int, num_agents: int, context: LabelContext) -> tuple[int, ...]:
    return star_teachers(agent, num_agents, context.teacher)


register_label_source(
    LabelSourceSpec(
        "star",
        lambda ctx: lambda table: star_labels(table, ctx.min_agreement, ctx.teacher),
        "star: agent cohort.teacher is taught by the others' pooled majority, every other agent by its majority",
        min_agents=3,
        teachers=_teachers,
        teachers_read_context=True,
    )
)
