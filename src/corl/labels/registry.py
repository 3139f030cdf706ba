"""Label sources by name, each with a spec of what it needs (the loop reads the spec,
never the name).

A label source is a function of the step's answers table alone. What else it may be
handed is declared here: only a source registered with `reads_gold=True` (GT-Reward)
is ever given the dataset's answer column, so keeping ground truth out of a label-free
reward is a matter of structure, not of care.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from corl.labels.vote import LabelSource
from corl.registry import LABEL_SOURCES


@dataclass(frozen=True)
class LabelContext:
    """What a label source is built with."""

    min_agreement: float = 0.0  # a label needs this share of its voters' K votes
    gold: Mapping[str, str | None] | None = None  # prompt id -> answer; only for reads_gold sources
    key: Callable[[str], str] | None = None  # canonical vote key of an answer
    seed: int = 0  # cohort.seed: a source that draws (`random`) seeds from it
    teacher: int = 0  # cohort.teacher: the agent that teaches the others (`star`)


@dataclass(frozen=True)
class LabelSourceSpec:
    name: str
    build: Callable[[LabelContext], LabelSource]
    description: str
    reads_gold: bool = False  # handed the dataset's answer column (GT-Reward)
    needs_teacher: bool = False  # each agent keeps an EMA copy whose samples fill table.teacher_*
    min_agents: int = 1
    # whose answers label agent n in a cohort of N: teachers(n, N) -> agent indices (n itself for
    # its own majority or EMA copy; () when no agent does, as with gold answers); None = not declared.
    # A topology set by the config (`star`'s cohort.teacher) declares teachers_read_context and
    # takes teachers(n, N, context); callers ask `teachers_of`, which handles both.
    teachers: Callable[..., tuple[int, ...]] | None = None
    teachers_read_context: bool = False
    rule: str = "majority answer"  # what of the teachers' answers is the label, in words (model cards)

    def teachers_of(self, agent: int, num_agents: int, context: LabelContext | None = None) -> tuple[int, ...] | None:
        """Agent indices whose answers label `agent` (None when the source does not declare them)."""
        if self.teachers is None:
            return None
        if self.teachers_read_context:
            return self.teachers(agent, num_agents, context or LabelContext())
        return self.teachers(agent, num_agents)


def register_label_source(spec: LabelSourceSpec) -> LabelSourceSpec:
    return LABEL_SOURCES.register(spec.name, spec)


def label_source_spec(name: str) -> LabelSourceSpec:
    return LABEL_SOURCES.get(name)


def build_label_source(
    name: str,
    *,
    min_agreement: float = 0.0,
    gold: Mapping[str, str | None] | None = None,
    key: Callable[[str], str] | None = None,
    seed: int = 0,
    teacher: int = 0,
) -> LabelSource:
    """Select a label source by name; only a `reads_gold` source is ever given the ground truth."""
    spec = label_source_spec(name)
    if spec.reads_gold and (gold is None or key is None):
        raise ValueError(f"label source {name!r} needs the dataset's answer column (set data.answer_field)")
    return spec.build(LabelContext(min_agreement, gold if spec.reads_gold else None, key, seed, teacher))
