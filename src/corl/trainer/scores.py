"""Label-free scores of a validation point: what `logging.select: label_free` and `cohort.stop`
read. Every function here takes vote keys of the agents' own answers, never an answer key.

keys[n][b] is agent n's vote key for validation prompt b (None: no final answer); the prompts
are in the same order for every agent and at every point. samples[n][b] holds agent n's M
sampled vote keys for prompt b.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence

Keys = Sequence[Sequence[str | None]]  # [N agents][B prompts]
Samples = Sequence[Sequence[Sequence[str | None]]]  # [N agents][B prompts][M samples]


def greedy_agreement(keys: Keys) -> float | None:
    """Share of prompts on which every agent's greedy answer has the same vote key (a prompt
    where an agent gave no answer does not agree); None with one agent."""
    if len(keys) < 2 or not keys[0]:
        return None
    agree = sum(row[0] is not None and all(k == row[0] for k in row) for row in zip(*keys, strict=True))
    return agree / len(keys[0])


def answer_shares(keys: Sequence[str | None]) -> dict[str, float]:
    """[B] vote keys -> each key's share of the B entries (an entry without an answer counts in B
    and as no key: the shares sum to the answered share, not to 1)."""
    counts = Counter(k for k in keys if k is not None)
    return {key: count / len(keys) for key, count in counts.items()} if keys else {}


def chance_agreement(keys: Keys) -> float | None:
    """The greedy agreement that agents answering independently of the prompt would reach:
    sum over keys a of prod_n p_n(a), p_n(a) = the share of prompts agent n answers with a
    (Cohen's / Fleiss' chance agreement). None with one agent.

    Near 1 when every agent gives one answer whatever the prompt (a collapse: it then agrees
    everywhere "by chance"); near 0 when the answers are spread over many keys. The answers
    of a healthy cohort on a math set depend on the prompt, so this stays small there."""
    if len(keys) < 2 or not keys[0]:
        return None
    shares = [answer_shares(agent) for agent in keys]
    return sum(math.prod(s.get(a, 0.0) for s in shares[1:]) * p for a, p in shares[0].items())


def answer_variety(keys: Sequence[str | None]) -> float:
    """[B] one agent's greedy vote keys -> the effective number of distinct answers, exp(entropy)
    of the answered keys' distribution (B different answers: B; one answer everywhere: 1; no
    answer: 0). Unlike the chance level (a collision probability, dominated by the commonest
    answers), it falls as soon as the answers start to pile onto fewer values."""
    counts = Counter(k for k in keys if k is not None)
    total = sum(counts.values())
    return math.exp(-sum(c / total * math.log(c / total) for c in counts.values())) if total else 0.0


def variety_kept(variety: Sequence[float], reference: Sequence[float] | None) -> float:
    """The smallest share, over agents, of the cohort's variety bar that an agent kept: variety[n]
    over the bar (capped at 1), where the bar is the smallest of the agents' references (each
    agent's largest variety at this or any earlier point; agents that never answered are left
    out). One agent: its variety over its own largest. 1.0 without a reference.

    Why the smallest agent's, not each agent's own: an agent's wrong answers can be more varied
    than the right ones (a slip that scatters each prompt onto its own wrong value), so its
    variety falls as it learns, down to its peers'. Answers piling onto fewer values than every
    agent gave at its most varied is what a collapse does and learning does not. The price: a
    cohort whose least varied agent starts with few answers sets a low bar; the chance term and
    the collapse flag (`top_answer_share`) still hold against a cohort piling onto one answer."""
    bar = min((r for r in reference or () if r > 0), default=0.0)
    if bar <= 0:
        return 1.0
    return min(min(v / bar, 1.0) for v, r in zip(variety, reference, strict=True) if r > 0)


def shared_alternatives(keys: Keys, samples: Samples) -> float | None:
    """Share of prompts on which two agents or more give the same two answers or more (greedy or
    sampled): there the agents' errors coincide with each other, and their agreement cannot say
    which of the answers they share is the right one. None with one agent.

    Co-RL's premise (error decoupling) is that two agents rarely give the same wrong answer; on a
    math set their wrong answers scatter, so a prompt's answers shared by both agents are one: the
    right one. A small answer space (multiple choice, yes/no) or a wrong answer both agents favour
    puts a second shared answer on the prompt."""
    if len(keys) < 2 or not keys[0]:
        return None
    tied = 0
    for b in range(len(keys[0])):
        holders: Counter[str] = Counter()
        for n in range(len(keys)):
            holders.update({keys[n][b], *(samples[n][b] if samples else ())} - {None})
        tied += sum(count >= 2 for count in holders.values()) >= 2
    return tied / len(keys[0])


def confirmed_answers(keys: Keys, samples: Samples) -> list[str]:
    """The answers a point most likely has right, read from the answers alone: with several agents
    the greedy key of every prompt on which all of them give it; with one, its greedy keys that at
    least half of its samples for that prompt repeat."""
    if len(keys) > 1:
        return [row[0] for row in zip(*keys, strict=True) if row[0] is not None and all(k == row[0] for k in row)]
    return [
        greedy
        for greedy, group in zip(keys[0], samples[0] if samples else [[]] * len(keys[0]), strict=True)
        if greedy is not None and group and 2 * sum(k == greedy for k in group) >= len(group)
    ]


def repeat_variety(answers: Sequence[str], least: int = 20) -> float | None:
    """The effective number of values `answers` are drawn from, read from how often two of them are
    equal: n(n-1) / sum_k c_k(c_k - 1), the inverse of the unbiased estimate of the chance that two
    draws are equal (Simpson's index). None from fewer than `least` answers (too few to see a
    repeat) or where no two are equal (no repeat seen: as many values as answers, or more).

    Unlike `answer_variety` over the same answers, it does not grow with the number of prompts
    when the values repeat: 40 right answers of a task whose answers take 10 values read as about
    10, whatever else the agents answered."""
    counts = Counter(answers)
    n, pairs = len(answers), sum(c * (c - 1) for c in counts.values())
    if n < least or not pairs:
        return None
    return n * (n - 1) / pairs


def self_agreement(keys: Keys, samples: Samples) -> float | None:
    """Mean over agents and prompts of the share of the M samples whose key is the agent's
    greedy key for that prompt (0 where the greedy answer has none): how often an agent's own
    samples confirm the answer it is graded on (TTRL's vote confidence, for the greedy answer)."""
    shares = [
        sum(k == greedy for k in group) / len(group) if greedy is not None and group else 0.0
        for agent_keys, agent_samples in zip(keys, samples, strict=True)
        for greedy, group in zip(agent_keys, agent_samples, strict=True)
    ]
    return sum(shares) / len(shares) if shares else None


def self_chance_agreement(keys: Keys, samples: Samples) -> float | None:
    """`self_agreement` if the samples were drawn independently of the prompt: mean over agents
    of sum_a g(a) s(a), g(a) = the share of prompts whose greedy key is a, s(a) = the share of
    all the agent's samples (every prompt's) with key a."""
    values = []
    for agent_keys, agent_samples in zip(keys, samples, strict=True):
        pooled = answer_shares([k for group in agent_samples for k in group])
        values.append(sum(g * pooled.get(a, 0.0) for a, g in answer_shares(agent_keys).items()))
    return sum(values) / len(values) if values else None


def majority_share(samples: Samples) -> float | None:
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
    that agent says the same thing whatever the question (a collapse; unanswered prompts count
    as no answer, not as one answer). The worst agent, not the cohort's pooled answers: one
    collapsed agent among healthy peers would be diluted in a pooled share, and its labels
    carry the collapse to the agents it teaches."""
    shares = [max(answer_shares(agent).values(), default=0.0) for agent in keys if agent]
    return max(shares, default=0.0)


def mean_reward_std(steps: Sequence[Mapping[str, float]], names: Sequence[str]) -> float | None:
    """Mean of every agent's `<name>/reward_std` over the given training steps' metrics."""
    values = [m[f"{name}/reward_std"] for m in steps for name in names if f"{name}/reward_std" in m]
    return sum(values) / len(values) if values else None


def label_free_score(scores: Mapping[str, float | None]) -> float:
    """The label_free rule's number: agreement beyond chance, times the answer variety kept.
    With several agents, their greedy `agreement` minus its `chance_agreement`; with one agent
    (TTRL), its `self_agreement` (its samples confirming its greedy answer) minus that one's
    chance level. Then times `variety_kept` (1 where not recorded).

    Why agreement (Co-RL, error decoupling): P(both right) = a1 * a2 grows with accuracy while,
    when the agents' errors are decoupled, P(same wrong answer) stays small, so agreement on
    held-out prompts tracks the cohort's accuracy.

    Why minus chance: agreement alone is highest for a cohort that collapsed onto one answer
    (it agrees on every prompt, right or not). The chance level is the agreement of agents
    whose answers do not depend on the prompt at all, drawn from the answer shares they show
    across the prompts; subtracting it scores only the agreement that the prompt explains. A
    collapse onto one answer on a share c of the prompts has chance >= c^2, so its score is at
    most 1 - c^2 (95% one answer: <= 0.0975 even at agreement 1), while a healthy cohort on a
    math set, whose answers spread over many values, loses a few hundredths. This is the
    numerator of Cohen's kappa, not kappa itself: kappa divides by 1 - chance and gives a
    collapse with agreement 1.00 the score 1.

    Why times the variety kept: a collapse under way maps ever more prompts onto a few answers
    long before one answer dominates, and a confident collapse raises the agreement faster than
    the chance level (a collision probability) grows. The validation prompts' answers do not
    change with training, so the variety of the right answers does not either: the effective
    number of distinct answers (`answer_variety`) is compared with a bar, the smallest of the
    agents' largest varieties so far (the base models', with logging.eval_on_start), and the
    score is scaled by the share of the bar kept by the agent that kept least (`variety_kept`:
    why not each agent's own largest). Measured (TTRL, qwen2-bpe, lr 3e-4): the variety fell
    17.9 -> 8.3 while the self agreement rose 0.73 -> 0.84 and validation accuracy fell 48% ->
    11%. Growing variety past the bar earns nothing (the share is at most 1).

    The keys are canonical answers (corl.answers.answer_key: "7", "7.0", "07", "14/2",
    "\\frac{14}{2}" and "x=7" are one key), so spelling one answer differently from prompt to
    prompt does not spread it over keys; and a cohort that did spread would have to agree on
    the same spelling on each prompt, or lose the agreement term instead."""
    agreement = scores.get("agreement")
    if agreement is None:
        agreement = scores.get("self_agreement")
    if agreement is None:  # one agent and no samples
        return 0.0
    kept = scores.get("variety_kept")
    return (float(agreement) - float(scores.get("chance_agreement") or 0.0)) * (1.0 if kept is None else float(kept))
