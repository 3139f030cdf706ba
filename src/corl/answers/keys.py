"""Vote keys: one canonical string per answer, from string rewrites and exact rationals only.

math-verify has no canonical form (only a pairwise verdict at 40-130 ms a parse); votes over
K samples need a key that is fast, deterministic and total.
"""

from __future__ import annotations

import functools
import re

from corl.answers.hedges import false_chain
from corl.answers.normalize import blank, clean
from corl.answers.numbers import Number, number
from corl.answers.structure import Struct, element_structure, structure

MAX_ANSWER_CHARS = 2000  # longer answers are keyed by their stripped text

_CHOICE = re.compile(r"^\(?([A-Z])\)?$|^\(([a-e])\)$")
WORDS = re.compile(r"^[A-Za-z]{2,}(?: [A-Za-z]+)*$")
_BRACED_ONE = re.compile(r"([\^_])\{(\w)\}")


def choice(s: str) -> str | None:
    """The letter of a multiple-choice answer (``(B)``, ``B``), or None."""
    m = _CHOICE.match(s.replace(" ", ""))
    return (m.group(1) or m.group(2).upper()) if m else None


def _number_key(n: Number) -> str:
    v = n.value
    return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"


def scalar_key(s: str) -> str:
    """Key of one scalar: a letter, an exact number, lower-cased text, or compacted LaTeX."""
    compact = s.replace(" ", "")
    letter = choice(compact)
    if letter:
        return letter
    n = number(compact)
    if n is not None:
        return _number_key(n)  # why: 10\% and 10 are one vote (percent of what is unsaid)
    if s.startswith("\\text{") or WORDS.match(s):  # text: case, spaces, final period aside
        return (s[6:-1] if s.startswith("\\text{") else s).lower().replace(" ", "").rstrip(".")
    return _BRACED_ONE.sub(r"\1\2", compact).replace("\\times", "\\cdot").replace("\\dfrac", "\\frac")


def struct_key(st: Struct) -> str:
    """Key of a structure: ordered parts in order, unordered ones sorted and without repeats."""
    if st.kind == "scalar":
        return scalar_key(st.items[0])
    if st.kind == "seq":
        return st.ends[0] + ",".join(element_key(x) for x in st.items) + st.ends[1]
    if st.kind in ("set", "list"):  # a list of solutions is the set of them
        if st.names:
            return "\\{" + ",".join(sorted(f"{n}={element_key(x)}" for n, x in zip(st.names, st.items))) + "\\}"
        return "\\{" + ",".join(sorted({element_key(x) for x in st.items})) + "\\}"
    if st.kind == "union":
        return "\\cup".join(sorted(element_key(x) for x in st.items))
    return "\\matrix[" + ";".join(",".join(element_key(x) for x in row) for row in st.items) + "]"


def element_key(s: str) -> str:
    """Key of one element of a structure."""
    return struct_key(element_structure(s))


@functools.lru_cache(maxsize=1 << 16)
def analyze(answer: str) -> tuple[str, Struct, str]:
    """(cleaned answer, its structure, its key)."""
    cleaned = clean(answer)
    raw = clean(answer, False) if "=" in answer else cleaned
    if raw != cleaned and false_chain(raw):  # "7 = 8" keys as itself, never as 8 (see hedges)
        cleaned = raw
    st = structure(cleaned)
    return cleaned, st, struct_key(st)


def answer_key(answer: str | None) -> str:
    """Canonical vote key: equivalent spellings of one answer share it.

    Pure string rewrites and exact rationals (no sympy): fast, deterministic, never
    raises. Equal non-empty keys imply `is_equivalent`; different keys may still be
    equivalent. "" is the key of no answer: None or a blank one (`normalize.blank`).
    """
    if answer is None:
        return ""
    try:
        text = str(answer)
        if len(text) > MAX_ANSWER_CHARS:
            return " ".join(text.split())
        return "" if blank(text) else analyze(text)[2]
    except Exception:  # a key must never take a training step down
        return " ".join(str(answer).split())
