"""Evaluation on problems with answers: greedy accuracy, avg@k, maj@k, pass@k, pooled maj@k.

avg@k: mean correctness of k samples. maj@k: the majority answer of k samples is
correct. pass@k: at least one of k samples is correct. Pooled maj@k: one vote over the
k samples of *every* model (a cohort used as an ensemble).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
def greedy_completions(engine: RolloutEngine, prompts: Sequence, max_new_tokens: int, batch_prompts: int = 64) -> list[str]:
    """One greedy completion per prompt ([B] texts); the task kind grades them (`TaskSpec.grade`)."""
    params = SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens)
    texts, _ = sample_completions(engine, prompts, 1, params, batch_prompts)
    return [group[0] for group in texts]
