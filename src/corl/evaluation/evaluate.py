"""Evaluation on problems with answers: greedy accuracy, avg@k, maj@k, pass@k, pooled maj@k.

avg@k: mean correctness of k samples. maj@k: the majority answer of k samples is
correct. pass@k: at least one of k samples is correct. Pooled maj@k: one vote over the
k samples of *every* model (a cohort used as an ensemble).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import torch

from corl.answers import answer_key, extract_answer, is_equivalent
from corl.labels import majority_vote
from corl.rollout import RolloutEngine, SamplingParams

Answers = list[list[str | None]]  # [B][K]


def sample_completions(
    engine: RolloutEngine, prompts: Sequence[str], k: int, params: SamplingParams, batch_prompts: int = 64, progress=None
) -> tuple[list[list[str]], list[float]]:
    """k completions per prompt ([B][K] texts) and each prompt's mean completion length."""
    texts: list[list[str]] = []
    lengths: list[float] = []
    for start in range(0, len(prompts), batch_prompts):
        chunk = list(prompts[start : start + batch_prompts])
        rollout = engine.generate(chunk, k, params)
        texts.extend(list(rollout.texts[i * k : (i + 1) * k]) for i in range(len(chunk)))
        lengths.extend(rollout.completion_lengths.view(len(chunk), k).float().mean(1).tolist())
        if progress is not None:
            progress(len(chunk))
    return texts, lengths


def extract_all(texts: Sequence[Sequence[str]], mode: str = "strict", options: Sequence | None = None) -> Answers:
    """[B][K] completions -> [B][K] final answers; mode as `corl.answers.extract_answer` (strict: the reward policy).
    options: [B] each problem's options (None for free-form): a multiple-choice answer is the picked letter."""
    if options is None or not any(options):
        return [[extract_answer(t, mode) for t in group] for group in texts]
    from corl.answers.choice import choice_letter_or_answer

    return [[choice_letter_or_answer(t, opts, mode) for t in group] for group, opts in zip(texts, options, strict=True)]


def sample_answers(
    engine: RolloutEngine,
    prompts: Sequence[str],
    k: int,
    params: SamplingParams,
    batch_prompts: int = 64,
    progress=None,
    mode: str = "strict",
) -> tuple[Answers, list[float]]:
    """k extracted answers per prompt ([B][K]) and each prompt's mean completion length."""
    texts, lengths = sample_completions(engine, prompts, k, params, batch_prompts, progress)
    return extract_all(texts, mode), lengths


def grade(answers: Answers, gold: Sequence[str]) -> list[list[bool]]:
    """[B][K] answers vs [B] gold answers -> [B][K] correctness."""
    cache: dict[tuple[str, str], bool] = {}

    def ok(a: str | None, g: str) -> bool:
        if a is None:
            return False
        if (a, g) not in cache:
            cache[(a, g)] = is_equivalent(a, g)
        return cache[(a, g)]

    return [[ok(a, g) for a in group] for group, g in zip(answers, gold, strict=True)]


def majority_correct(answers: Answers, gold: Sequence[str]) -> list[bool]:
    """[B] whether each prompt's majority answer (corl's vote and tie-break) is correct."""
    out = []
    for group, g in zip(answers, gold, strict=True):
        vote = majority_vote([answer_key(a) if a is not None else None for a in group], group)
        out.append(vote is not None and is_equivalent(vote.answer, g))
    return out


@dataclass
class Scores:
    accuracy: float  # avg@k (greedy accuracy when k = 1 at temperature 0)
    maj: float  # maj@k
    passk: float  # pass@k
    k: int
    n: int

    def as_dict(self, prefix: str = "") -> dict[str, float]:
        return {f"{prefix}avg@{self.k}": self.accuracy, f"{prefix}maj@{self.k}": self.maj, f"{prefix}pass@{self.k}": self.passk}


def score(answers: Answers, gold: Sequence[str]) -> Scores:
    correct = grade(answers, gold)
    k = len(answers[0]) if answers else 0
    n = len(answers)
    return Scores(
        accuracy=sum(sum(c) for c in correct) / max(n * k, 1),
        maj=sum(majority_correct(answers, gold)) / max(n, 1),
        passk=sum(any(c) for c in correct) / max(n, 1),
        k=k,
        n=n,
    )


def pooled(answer_sets: Sequence[Answers]) -> Answers:
    """Concatenate several models' samples per prompt, for a pooled vote."""
    return [sum((list(s[b]) for s in answer_sets), []) for b in range(len(answer_sets[0]))]


# -- uncertainty: every accuracy is a mean over problems, reported with its standard error and 95% interval ----------

Z95 = NormalDist().inv_cdf(0.975)  # 1.95996...
INTERVALS = (
    "se: the sample SD (n - 1) of the per-problem scores / sqrt(n), a problem's k samples one cluster "
    "(lm-eval's stderr when k = 1); ci95: value -/+ 1.96 se, clipped to [0, 1]"
)


def standard_error(scores: Sequence[float]) -> float | None:
    """The standard error of a mean over problems, from [n] per-problem scores (None below two problems).

    A problem's score is the mean of its k samples (0/1 for maj@k and pass@k): the samples of one
    problem are correlated, so they count as one observation, which is the clustered standard error
    with problems as clusters (E. Miller, "Adding Error Bars to Evals", 2024). With k = 1 it is
    lm-evaluation-harness's `mean_stderr`: sqrt(sum((x - mean)^2) / (n - 1)) / sqrt(n)."""
    n = len(scores)
    if n < 2:
        return None
    mean = math.fsum(scores) / n
    return math.sqrt(math.fsum((x - mean) ** 2 for x in scores) / (n - 1) / n)


def interval95(value: float, se: float | None) -> list[float] | None:
    """The normal 95% interval value -/+ 1.96 se, clipped to [0, 1] (every figure here is a share)."""
    if se is None:
        return None
    return [max(0.0, value - Z95 * se), min(1.0, value + Z95 * se)]


def problem_scores(correct: Sequence[Sequence[bool]], majority: Sequence[bool]) -> dict[str, list[float]]:
    """[B][K] verdicts and [B] majority verdicts -> each problem's avg@k, maj@k and pass@k, keyed as `Scores.as_dict`."""
    k = len(correct[0]) if correct else 0
    return {
        f"avg@{k}": [sum(c) / k for c in correct],
        f"maj@{k}": [float(m) for m in majority],
        f"pass@{k}": [float(any(c)) for c in correct],
    }


def spread(figures: Mapping[str, float], per_problem: Mapping[str, Sequence[float]]) -> dict[str, dict]:
    """{"se": {name: se}, "ci95": {name: [lo, hi]}} of each figure from its [n] per-problem scores."""
    se = {name: standard_error(per_problem[name]) for name in figures}
    return {"se": se, "ci95": {name: interval95(value, se[name]) for name, value in figures.items()}}


def accuracy_by_group(correct: Sequence[float], groups: Sequence[str]) -> dict[str, float]:
    """Mean correctness per group label (e.g. problem type or MATH level); a score may be a
    fraction (a problem's share of correct samples)."""
    totals: dict[str, list[float]] = {}
    for c, g in zip(correct, groups, strict=True):
        t = totals.setdefault(g, [0.0, 0])
        t[0] += float(c)
        t[1] += 1
    return {g: hit / n for g, (hit, n) in sorted(totals.items())}


@torch.no_grad()
def greedy_completions(
    engine: RolloutEngine, prompts: Sequence, max_new_tokens: int, batch_prompts: int = 64, stop: tuple[str, ...] = ()
) -> list[str]:
    """One greedy completion per prompt ([B] texts), ended at a stop string; the task kind grades them (`TaskSpec.grade`)."""
    params = SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens, stop=stop)
    texts, _ = sample_completions(engine, prompts, 1, params, batch_prompts)
    return [group[0] for group in texts]
