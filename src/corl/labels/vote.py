"""Majority votes and the answers table: the one snapshot of a step that label sources read."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Vote:
    """The winner of a majority vote over canonical answer keys."""

    key: str  # canonical key of the winning answer
    answer: str  # the winning answer as first written by a voter
    count: int  # votes for the winner
    total: int  # voters, parseable or not (K)
    # the whole vote: (key, answer as first written, votes) of every key, in first-seen order;
    # () where a source does not say (a reward then knows only the winner's count)
    shares: tuple[tuple[str, str, int], ...] = ()

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

    def spelled(key: str) -> str:
        written = answers[first[key]] if answers is not None else None
        return written if written is not None else key

    shares = tuple((key, spelled(key), counts[key]) for key in counts)  # dicts keep first-seen order
    return Vote(key=winner, answer=spelled(winner), count=counts[winner], total=len(keys), shares=shares)


@dataclass(frozen=True)
class SampleInfo:
    """What the table records of one sample besides its answer: what a label source or a reward
    may weigh votes by (confidence, length, truncation, how many of its agent's K agree)."""

    logprob: float  # sum of its tokens' log-probs under the sampler (nan when the engine reports none)
    length: int  # completion tokens
    truncated: bool  # cut at cohort.max_new_tokens before it ended
    vote_share: float  # share of its agent's K samples whose vote key equals its own (0.0 without an answer)


def vote_shares(keys: Sequence[str | None]) -> tuple[float, ...]:
    """[K] vote keys -> [K] each key's share of the K votes (0.0 for a sample without an answer)."""
    counts: dict[str, int] = {}
    for key in keys:
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    return tuple(counts[key] / len(keys) if key is not None else 0.0 for key in keys)


@dataclass(frozen=True)
class AnswersTable:
    """Every agent's answers for one step's prompts: the only thing agents exchange.

    answers[n][b][k] is agent n's k-th answer (as written, None when absent) for prompt
    prompt_ids[b]; keys has the same shape and holds canonical vote keys. The teacher_*
    fields hold the samples of each agent's EMA teacher (Co-rewarding-II) when it has one;
    samples[n][b][k] what else is known of the sample (`SampleInfo`), for sources that weigh votes.
    """

    prompt_ids: tuple[str, ...]
    answers: tuple[tuple[tuple[str | None, ...], ...], ...]  # [N][B][K]
    keys: tuple[tuple[tuple[str | None, ...], ...], ...]  # [N][B][K]
    teacher_answers: tuple[tuple[tuple[str | None, ...], ...], ...] | None = None  # [N][B][K]
    teacher_keys: tuple[tuple[tuple[str | None, ...], ...], ...] | None = None  # [N][B][K]
    samples: tuple[tuple[tuple[SampleInfo, ...], ...], ...] | None = None  # [N][B][K]; None where not recorded
    step: int = 0  # the loop's step: a source that draws (`random`) seeds from it, so a resumed run redraws the same

    @property
    def num_agents(self) -> int:
        return len(self.answers)

    def majority(self, agent: int, prompt: int) -> Vote | None:
        return majority_vote(self.keys[agent][prompt], self.answers[agent][prompt])

    def pooled_majority(self, voters: Sequence[int], prompt: int) -> Vote | None:
        """One vote over the K answers of each of `voters` for `prompt`, pooled in that order (a tie
        goes to the answer the first of them wrote first: `majority_vote`'s first-seen rule)."""
        keys = [key for m in voters for key in self.keys[m][prompt]]
        answers = [answer for m in voters for answer in self.answers[m][prompt]]
        return majority_vote(keys, answers)


# labels[n][b]: the label of agent n for prompt b, or None (unlabeled: reward 0 for all K).
Labels = list[list[Vote | None]]
LabelSource = Callable[[AnswersTable], Labels]
