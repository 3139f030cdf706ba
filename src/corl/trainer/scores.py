"""Label-free scores of a validation point: what `logging.select: label_free` and `cohort.stop`
read. Every function here takes vote keys of the agents' own answers, never an answer key.

keys[n][b] is agent n's vote key for validation prompt b (None: no final answer); the prompts
are in the same order for every agent and at every point.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

Keys = Sequence[Sequence[str | None]]  # [N agents][B prompts]


def greedy_agreement(keys: Keys) -> float | None:
    """Share of prompts on which every agent's greedy answer has the same vote key (a prompt
    where an agent gave no answer does not agree); None with one agent."""
    if len(keys) < 2 or not keys[0]:
        return None
    agree = sum(row[0] is not None and all(k == row[0] for k in row) for row in zip(*keys, strict=True))
    return agree / len(keys[0])


def majority_share(samples: Sequence[Sequence[Sequence[str | None]]]) -> float | None:
    """samples[n][b]: agent n's M sampled vote keys for prompt b. The mean over agents and prompts
    of the share of the M samples that vote for the prompt's majority (0 where none answered):
    the confidence of a TTRL-style vote."""
    shares = []
    for agent in samples:
        for group in agent:
            votes = Counter(k for k in group if k is not None)
            shares.append(max(votes.values()) / len(group) if votes else 0.0)
    return sum(shares) / len(shares) if shares else None


def stability(previous: Keys | None, keys: Keys) -> float | None:
    """Share of (agent, prompt) whose greedy vote key is the same non-None key as at the previous
    point; None at the first point."""
    if previous is None:
        return None
    pairs = [(a, b) for old, new in zip(previous, keys, strict=True) for a, b in zip(old, new, strict=True)]
    return sum(a is not None and a == b for a, b in pairs) / len(pairs) if pairs else None


def top_answer_share(keys: Keys) -> float:
    """The largest share of the prompts that one agent answers with one and the same key: near 1,
    the agent says the same thing whatever the question (a collapse; unanswered prompts count
    as no answer, not as one answer)."""
    shares = [max(Counter(k for k in agent if k is not None).values(), default=0) / len(agent) for agent in keys if agent]
    return max(shares, default=0.0)


def mean_reward_std(steps: Sequence[Mapping[str, float]], names: Sequence[str]) -> float | None:
    """Mean of every agent's `<name>/reward_std` over the given training steps' metrics."""
    values = [m[f"{name}/reward_std"] for m in steps for name in names if f"{name}/reward_std" in m]
    return sum(values) / len(values) if values else None


def label_free_score(scores: Mapping[str, float | None]) -> float:
    """The label_free rule's number: the agents' greedy agreement; with one agent (TTRL), the
    majority share of its samples.

    Why agreement (Co-RL, error decoupling): P(both right) = a1 * a2 grows with accuracy while,
    when the agents' errors are decoupled, P(same wrong answer) stays small, so agreement on
    held-out prompts tracks the cohort's accuracy. A single agent has no peer; its vote's
    confidence is the TTRL analogue (collapse also raises it: that is what cohort.stop catches)."""
    agreement = scores.get("agreement")
    if agreement is not None:
        return float(agreement)
    share = scores.get("majority_share")
    return float(share) if share is not None else 0.0
