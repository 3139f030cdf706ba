"""Did a rewrite keep the answer? A text check (numbers dropped) and a model check (majority answers)."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

# "1,234.5" (thousands groups of exactly three digits), "42", "3.14", ".5"; "1,2,3" is three numbers.
_NUMBER = re.compile(r"(?<!\d)(?:\d{1,3}(?:,\d{3})+(?!\d|,\d)|\d+)(?:\.\d+)?|(?<![\d.])\.\d+")
_UNIT_WORDS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS_WORDS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SCALE_WORDS = {"dozen": 12, "hundred": 100, "thousand": 1000, "million": 1_000_000}
_WORD_NUMBER = re.compile(
    r"\b(?:(?P<tens>" + "|".join(_TENS_WORDS) + r")(?:[-\s]+(?P<unit_after>" + "|".join(_UNIT_WORDS[1:10]) + r"))?"
    r"|(?P<unit>" + "|".join(_UNIT_WORDS) + r")|(?P<scale>" + "|".join(_SCALE_WORDS) + r"))\b",
    re.IGNORECASE,
)


def _canonical_number(token: str) -> str:
    """'1,000' -> '1000', '3.50' -> '3.5', '007' -> '7', '.5' -> '0.5'."""
    try:
        return format(Decimal(token.replace(",", "")).normalize(), "f")
    except InvalidOperation:  # pragma: no cover - the regex only matches decimal numerals
        return token


def numbers_in(text: str) -> list[str]:
    """Distinct numbers written with digits in `text`, canonical, in order of first appearance."""
    return list(dict.fromkeys(_canonical_number(m.group()) for m in _NUMBER.finditer(text)))


def spelled_numbers(text: str) -> set[str]:
    """Numbers written as English words ("three", "twenty-five", "a dozen"), canonical."""
    found: set[str] = set()
    for m in _WORD_NUMBER.finditer(text):
        if m.group("tens"):
            value = 20 + 10 * _TENS_WORDS.index(m.group("tens").lower())
            if m.group("unit_after"):
                value += _UNIT_WORDS.index(m.group("unit_after").lower())
        elif m.group("unit"):
            value = _UNIT_WORDS.index(m.group("unit").lower())
        else:
            value = _SCALE_WORDS[m.group("scale").lower()]
        found.add(str(value))
    return found


def dropped_numbers(original: str, rewrite: str) -> list[str]:
    """Numbers in the original problem that the rewrite no longer contains.

    Pure text check: a number counts as kept when the rewrite has it in digits (any
    thousands separators or trailing zeros) or spelled out in English ("three",
    "twenty-five", "dozen"). Signs are ignored. "1/2" rewritten as "half" is flagged: the
    check is a pointer for review, not a verdict.
    """
    kept = set(numbers_in(rewrite)) | spelled_numbers(rewrite)
    return [n for n in numbers_in(original) if n not in kept]


@dataclass(frozen=True)
class AgreementRow:
    """One row of the answer-preservation check: majority answers of both wordings."""

    id: str
    original_answer: str | None  # majority answer over K samples of the original wording
    rephrased_answer: str | None
    original_share: float  # share of the K samples behind that majority
    rephrased_share: float
    agree: bool


def majority_answer(completions: Sequence[str]):
    """corl.labels.Vote of the answers extracted from completions, or None if none has one."""
    from corl.answers import answer_key, extract_answer
    from corl.labels import majority_vote

    answers = [extract_answer(t) for t in completions]
    keys = [answer_key(a) if a is not None else None for a in answers]
    return majority_vote(keys, answers)


def answer_agreement(
    engine,
    prompts_a: Sequence[str],
    prompts_b: Sequence[str],
    ids: Sequence[str],
    samples: int,
    params,
    batch_size: int = 4,
    on_batch: Callable[[int], None] | None = None,
) -> list[AgreementRow]:
    """Solve both wordings K times each with `engine` and compare the majority answers.

    Both wordings of a row share one generate call (prompts [a_1, b_1, a_2, b_2, ...]),
    so the two sides of a comparison always see the same model and sampling settings.

    Args:
        engine: a corl.rollout engine; texts come back grouped by prompt ([2B*K]).
        on_batch: called with the number of rows finished after each generate call.
    """
    from corl.answers import is_equivalent

    result: list[AgreementRow] = []
    for start in range(0, len(ids), batch_size):
        stop = min(start + batch_size, len(ids))
        prompts = [p for i in range(start, stop) for p in (prompts_a[i], prompts_b[i])]
        texts = engine.generate(prompts, samples, params).texts  # [2B*K], grouped by prompt
        for j, i in enumerate(range(start, stop)):
            va = majority_answer(texts[(2 * j) * samples : (2 * j + 1) * samples])
            vb = majority_answer(texts[(2 * j + 1) * samples : (2 * j + 2) * samples])
            agree = (
                va is not None
                and vb is not None
                and (va.key == vb.key or is_equivalent(va.answer, vb.answer) or is_equivalent(vb.answer, va.answer))
            )  # is_equivalent reads (prediction, gold); neither wording is the gold here
            result.append(
                AgreementRow(
                    id=ids[i],
                    original_answer=va.answer if va else None,
                    rephrased_answer=vb.answer if vb else None,
                    original_share=va.agreement if va else 0.0,
                    rephrased_share=vb.agreement if vb else 0.0,
                    agree=agree,
                )
            )
        if on_batch:
            on_batch(stop - start)
    return result


def sample_indices(num_rows: int, limit: int | None, seed: int = 0) -> list[int]:
    """All row indices, or a seeded random sample of `limit` of them in row order."""
    if not limit or limit >= num_rows:
        return list(range(num_rows))
    return sorted(random.Random(seed).sample(range(num_rows), limit))
