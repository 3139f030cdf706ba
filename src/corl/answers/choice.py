"""Multiple-choice answers: which option did a completion pick, and which vote does it count for?

Benchmarks such as MathVista, MathVerse and MathVision ask some questions with lettered
options. A completion may commit to the letter ("\\boxed{C}", "(C)", "option C", "C.",
"the answer is C") or to the option's value ("\\boxed{12}" when option C is "12"); both
are the same pick, so `choice_key` maps them to one vote key and `grade_choice` rewards
both against a gold letter.

* `option_letter(answer, options)`: the letter an answer string denotes, or None.
* `extract_choice(text, options)`: the letter a completion commits to, or None (strict:
  a bare letter somewhere in the reasoning is no commitment).
* `choice_key(answer, options)`: vote key; the letter, or `answer_key` for values that
  are no option (they still vote together with equal values).
* `grade_choice(text, gold, options)`: the reward of one completion.

Options are given in order (option A first); a label the dataset left in front of an
option's text ("A. 12", "(A) 12", "A: 12") is ignored (`option_texts`).
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

from corl.answers.extract import extract_answer
from corl.answers.keys import answer_key

LETTERS = string.ascii_uppercase

# A letter form, whole: "C", "(C)", "(c)", "C.", "C)", "C:", "option C", "choice (C)", "C. 12", "(C) 12".
_LETTER_FORM = re.compile(
    r"^\s*(?:(?:option|choice)\s*)?(?:\(\s*(?P<p>[A-Za-z])\s*\)|(?P<u>[A-Z])(?![A-Za-z']))[.):]?(?P<rest>.*)$",
    re.IGNORECASE | re.DOTALL,
)
# Statements in running text; the last one in the text counts.
_STATEMENT = re.compile(
    r"(?i:\b(?:final\s+)?answer\s*(?:is|:)\s*(?:option\s*|choice\s*)?|\b(?:option|choice)\s+)"
    r"(?:\(\s*(?P<p>[A-Za-z])\s*\)|(?P<u>[A-Z])(?![A-Za-z']))"
)
# "the answer is A rectangle", "... is I think": an article or pronoun, not option A / I.
_ARTICLE = re.compile(r"\s+[a-z]")
_LABEL = re.compile(r"^\s*\(?([A-Z])\s*[.):]\s*")


def option_texts(options: Sequence[str]) -> list[str]:
    """Options without a leading label that names their own position ("B. 7" as option B -> "7")."""
    out = []
    for i, option in enumerate(options):
        text = str(option)
        m = _LABEL.match(text)
        out.append(text[m.end() :].strip() if m and m.group(1) == LETTERS[i] else text.strip())
    return out


def _in_range(letter: str, options: Sequence[str] | None) -> str | None:
    letter = letter.upper()
    return letter if options is None or LETTERS.index(letter) < len(options) else None


def option_letter(answer: str | None, options: Sequence[str] | None = None) -> str | None:
    """The option an answer string names: its letter form, else (with options) the option whose value it equals.

    "C", "(C)", "(c)", "C.", "option C", "C. 12" (when option C is 12, or options are unknown)
    -> "C"; "12" -> "C" when option C's text keys as 12. A lowercase bare "c" is a
    variable, not a letter. None when the answer names no option (or one beyond the options).
    """
    if answer is None:
        return None
    text = str(answer).strip()
    if text.startswith("\\text{") and text.endswith("}"):
        text = text[6:-1].strip()
    m = _LETTER_FORM.match(text)
    if m:
        letter = m.group("p") or m.group("u")
        rest = m.group("rest").strip()
        # "C. 12": the label and the option's text; a text that contradicts option C is no pick of C.
        if rest and options is not None and _in_range(letter, options):
            value = option_texts(options)[LETTERS.index(letter.upper())]
            if answer_key(rest) != answer_key(value):
                return None
        if not rest or options is None or _in_range(letter, options):
            return _in_range(letter, options) if (m.group("p") or letter.isupper()) else None
    if options is not None:
        key = answer_key(text)
        matches = [LETTERS[i] for i, value in enumerate(option_texts(options)) if key and answer_key(value) == key]
        if len(matches) == 1:  # two options with one value: the value names no single option
            return matches[0]
    return None


def extract_choice(text: str | None, options: Sequence[str] | None = None) -> str | None:
    """The letter a completion commits to: its final answer (a box or "the answer is ..."), else the
    last "option C" / "answer: (C)" statement, else a last line that is a letter form alone."""
    if not text:
        return None
    letter = option_letter(extract_answer(text), options)
    if letter:
        return letter
    statements = [m for m in _STATEMENT.finditer(text) if not (m.group("u") in ("A", "I") and _ARTICLE.match(text, m.end()))]
    if statements:
        m = statements[-1]
        return _in_range(m.group("p") or m.group("u"), options)
    last_line = text.strip().splitlines()[-1] if text.strip() else ""
    m = _LETTER_FORM.match(last_line)
    if m and not m.group("rest").strip():
        letter = m.group("p") or m.group("u")
        return _in_range(letter, options) if (m.group("p") or letter.isupper()) else None
    return None


def choice_key(answer: str | None, options: Sequence[str] | None = None) -> str:
    """Vote key of an answer to a multiple-choice question: "C", "(C)" and option C's text share one."""
    letter = option_letter(answer, options)
    return letter if letter else answer_key(answer)


def grade_choice(completion_text: str | None, gold: str, options: Sequence[str] | None = None) -> bool:
    """Reward of a completion against a gold option (a letter, "(C)", or the option's text)."""
    want = option_letter(gold, options)
    if want is None:
        raise ValueError(f"gold {gold!r} names no option of {list(options) if options is not None else 'A-Z'}")
    return extract_choice(completion_text, options) == want


def choice_letter_or_answer(text: str | None, options: Sequence[str] | None, mode: str = "strict") -> str | None:
    """A completion's answer to a question with options: the picked letter, else (a value that is
    no option) its stated answer; without options simply its stated answer."""
    if options:
        letter = extract_choice(text, options)
        if letter:
            return letter
    return extract_answer(text, mode) if text else None
