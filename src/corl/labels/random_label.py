"""`random`: the random-label control. Agent n's label is ONE of its ring teacher's answers,
drawn uniformly, not voted.

Why it is the control: the label still comes from the same teacher (agent n-1) on the same
prompts, so it keeps that teacher's answer distribution (an answer given by c of the
teacher's answered samples is drawn with probability c / answered), but the majority vote is
gone. Co-RL (`peer`) minus `random` is what the vote itself buys.

How it draws, exactly:
- the prompts it labels are the ones `peer` labels: the teacher's majority must pass
  cohort.min_agreement, else the prompt is unlabeled (same coverage; only the choice differs);
- the candidates are the teacher's samples that have an answer (vote key not None), in sample
  order; one is chosen by `random.Random(s).randrange(len(candidates))`, where s is the first
  8 bytes of sha256 of "corl-random-label|<cohort.seed>|<step>|<n>|<prompt id>" (big-endian).
  The draw depends on nothing else (no global RNG, no string hashing, no call order), so every
  process of a distributed run and a resumed run draw the same label;
- the label is the drawn sample's answer as written, with its key's count among the teacher's K
  (`count / total` is its vote share) and the teacher's whole vote in `shares`.

With one agent the ring teacher (n-1 mod 1) is the agent itself: a self random control (TTRL
without the vote), which is allowed. Its spec says so: teachers(0, 1) == (0,).
"""

from __future__ import annotations

import hashlib
import random

from corl.labels.registry import LabelSourceSpec, register_label_source
from corl.labels.sources import thresholded
from corl.labels.vote import AnswersTable, Labels, Vote, majority_vote


def random_teacher(agent: int, num_agents: int) -> int:
    """Agent n-1 on the ring; with one agent, itself."""
    return (agent - 1) % num_agents


def draw_seed(seed: int, step: int, agent: int, prompt_id: str) -> int:
    """A stable 64-bit seed of (cohort.seed, step, agent, prompt id): the same on every run and process."""
    text = f"corl-random-label|{seed}|{step}|{agent}|{prompt_id}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def random_label(keys, answers, min_agreement: float, seed: int) -> Vote | None:
    """One teacher's [K] keys and answers -> a uniformly drawn answered sample as the label."""
    vote = thresholded(majority_vote(keys, answers), min_agreement)
    if vote is None:
        return None
    candidates = [i for i, key in enumerate(keys) if key is not None]
    i = candidates[random.Random(seed).randrange(len(candidates))]
    count = sum(key == keys[i] for key in keys)
    written = answers[i] if answers[i] is not None else keys[i]
    return Vote(key=keys[i], answer=written, count=count, total=len(keys), shares=vote.shares)


def random_labels(table: AnswersTable, min_agreement: float = 0.0, seed: int = 0) -> Labels:
    """labels[n][b]: a uniform draw from agent n-1's answered samples of prompt b."""
    labels: Labels = []
    for n in range(table.num_agents):
        t = random_teacher(n, table.num_agents)
        labels.append(
            [
                random_label(table.keys[t][b], table.answers[t][b], min_agreement, draw_seed(seed, table.step, n, pid))
                for b, pid in enumerate(table.prompt_ids)
            ]
        )
    return labels


register_label_source(
    LabelSourceSpec(
        "random",
        lambda ctx: lambda table: random_labels(table, ctx.min_agreement, ctx.seed),
        "random-label control: agent n's label is one of agent n-1's answers drawn uniformly, not voted "
        "(with one agent, one of its own)",
        teachers=lambda n, size: (random_teacher(n, size),),
        rule="answer drawn uniformly from its samples (not voted)",
    )
)
