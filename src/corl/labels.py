"""Where a prompt's label comes from: majority votes, the peer ring, and label sources.

The answers table is the one snapshot of a step: every agent's extracted answers for
every prompt, taken before any agent updates. Label sources are functions of that table
alone. The label-free sources (`peer`, `self`) are built without any access to the
dataset's answer column: `build_label_source` hands the ground truth only to `truth`,
so keeping it out of a Co-RL reward is a matter of structure, not of care.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

LABEL_SOURCES = ("peer", "self", "truth", "ema")


@dataclass(frozen=True)
class Vote:
    """The winner of a majority vote over canonical answer keys."""

    key: str  # canonical key of the winning answer
    answer: str  # the winning answer as first written by a voter
    count: int  # votes for the winner
    total: int  # voters, parseable or not (K)

    @property
    def agreement(self) -> float:
        """Share of all K samples that voted for the winner."""
        return self.count / self.total if self.total else 0.0


def majority_vote(keys: Sequence[str | None], answers: Sequence[str | None] | None = None) -> Vote | None:
    """Most common non-None key; None when no sample has a parseable answer.

    Tie-break (deterministic, documented): among keys with the top count, the one whose
    first occurrence comes earliest in sample order wins. Sample order is the order the
    rollout engine returned, so the rule is reproducible under a fixed seed and does not
    depend on string hashing; it also favours neither answer systematically (unlike
    "lexicographically smallest"), which keeps the even-K theory unbiased.

    Args:
        keys: [K] canonical answer keys (None = no final answer).
        answers: [K] answers as written, to report the winner's spelling (defaults to keys).
    """
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key is None:
            continue
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, i)
    if not counts:
        return None
    winner = max(counts, key=lambda k: (counts[k], -first[k]))
    spelled = answers[first[winner]] if answers is not None else winner
    return Vote(key=winner, answer=spelled if spelled is not None else winner, count=counts[winner], total=len(keys))


@dataclass(frozen=True)
class AnswersTable:
    """Every agent's answers for one step's prompts: the only thing agents exchange.

    answers[n][b][k] is agent n's k-th answer (as written, None when absent) for prompt
    prompt_ids[b]; keys has the same shape and holds canonical vote keys. The teacher_*
    fields hold the samples of each agent's EMA teacher (Co-rewarding-II) when it has one.
    """

    prompt_ids: tuple[str, ...]
    answers: tuple[tuple[tuple[str | None, ...], ...], ...]  # [N][B][K]
    keys: tuple[tuple[tuple[str | None, ...], ...], ...]  # [N][B][K]
    teacher_answers: tuple[tuple[tuple[str | None, ...], ...], ...] | None = None  # [N][B][K]
    teacher_keys: tuple[tuple[tuple[str | None, ...], ...], ...] | None = None  # [N][B][K]

    @property
    def num_agents(self) -> int:
        return len(self.answers)

    def majority(self, agent: int, prompt: int) -> Vote | None:
        return majority_vote(self.keys[agent][prompt], self.answers[agent][prompt])


# labels[n][b]: the label of agent n for prompt b, or None (unlabeled: reward 0 for all K).
Labels = list[list[Vote | None]]
LabelSource = Callable[[AnswersTable], Labels]


def ring_teacher(agent: int, num_agents: int) -> int:
    """The peer that teaches `agent` on a directed ring: agent n-1, and agent 0 by N-1."""
    if num_agents < 2:
        raise ValueError("the peer ring needs at least 2 agents; use label source 'self' for one")
    return (agent - 1) % num_agents


def _thresholded(vote: Vote | None, min_agreement: float) -> Vote | None:
    if vote is None or vote.agreement < min_agreement:
        return None
    return vote


def peer_labels(table: AnswersTable, min_agreement: float = 0.0) -> Labels:
    """Co-RL: agent n's label is the majority answer of its ring teacher, agent n-1."""
    n_agents = table.num_agents
    return [
        [_thresholded(table.majority(ring_teacher(n, n_agents), b), min_agreement) for b in range(len(table.prompt_ids))]
        for n in range(n_agents)
    ]


def self_labels(table: AnswersTable, min_agreement: float = 0.0) -> Labels:
    """TTRL (Zuo et al. 2025, arXiv:2504.16084): the label is the agent's own majority."""
    return [
        [_thresholded(table.majority(n, b), min_agreement) for b in range(len(table.prompt_ids))] for n in range(table.num_agents)
    ]


def ema_labels(table: AnswersTable, min_agreement: float = 0.0) -> Labels:
    """Co-rewarding-II: the label is the majority of the agent's own EMA teacher's samples."""
    if table.teacher_keys is None or table.teacher_answers is None:
        raise ValueError("label source 'ema' needs the EMA teachers' answers in the table")
    return [
        [
            _thresholded(majority_vote(table.teacher_keys[n][b], table.teacher_answers[n][b]), min_agreement)
            for b in range(len(table.prompt_ids))
        ]
        for n in range(table.num_agents)
    ]


def truth_labels(table: AnswersTable, gold: Mapping[str, str | None], key: Callable[[str], str]) -> Labels:
    """GT-Reward: the dataset's answer for each prompt id, the same for every agent."""
    votes: list[Vote | None] = []
    for pid in table.prompt_ids:
        answer = gold.get(pid)
        votes.append(None if answer is None or answer == "" else Vote(key=key(answer), answer=answer, count=1, total=1))
    return [list(votes) for _ in range(table.num_agents)]


def build_label_source(
    name: str,
    *,
    min_agreement: float = 0.0,
    gold: Mapping[str, str | None] | None = None,
    key: Callable[[str], str] | None = None,
) -> LabelSource:
    """Select a label source by name; only `truth` is ever given the ground truth."""
    if name == "peer":
        return lambda table: peer_labels(table, min_agreement)
    if name == "self":
        return lambda table: self_labels(table, min_agreement)
    if name == "ema":
        return lambda table: ema_labels(table, min_agreement)
    if name == "truth":
        if gold is None or key is None:
            raise ValueError("label source 'truth' needs the dataset's answer column (set data.answer_field)")
        return lambda table: truth_labels(table, gold, key)
    raise ValueError(f"unknown label source {name!r}; choose one of {LABEL_SOURCES}")
