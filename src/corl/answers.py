"""Final answers of math completions: extract them, key them for votes, grade them.

Three questions, three budgets:

* `extract_answer(text)`: what did the completion commit to? The last ``\\boxed{...}``
  or ``\\fbox{...}``, else the last ``#### x``, else the last "The (final) answer is x",
  returned as written. None when there is no explicit final answer (empty text, an
  unclosed box, a sentence cut inside its formula): a reward must never come from a
  guess such as the last number of an unfinished derivation.
* `answer_key(answer)`: which vote does it count for? A canonical string made by string
  rewrites and exact rational arithmetic only: tens of microseconds, deterministic,
  never raises. It merges spellings that differ in notation only (``\\dfrac12``,
  ``1/2``, ``0.5``; ``\\text{(B)}``, ``B``; ``x=5``, ``5``; ``1,000``, ``1000``;
  ``10\\%``, ``10``; ``90^\\circ``, ``90``; a set in any order) and never merges two
  answers that `is_equivalent` tells apart. It need not merge every equal pair
  (``\\sqrt{8}`` and ``2\\sqrt{2}`` keep two keys): votes count by key, and a reward
  asks the careful check whenever the keys differ.
* `is_equivalent(pred, gold)`: does the prediction earn the reward? In four layers,
  each asked only when the one before cannot decide:
  1. equal keys;
  2. structure: tuples and intervals, sets and unordered lists of solutions, unions,
     matrices, compared part by part with the MATH conventions below;
  3. exact numbers (fractions, decimals, mixed numbers, percentages, numerals in a
     base) compared as rationals, and other expressions read by a small LaTeX reader
     and evaluated with mpmath (40 digits) at fixed points: a difference at one point
     proves two answers differ, agreement at all of them settles an identity of
     polynomials, radicals and the usual functions;
  4. math-verify (`parse` + `verify`), for the notation the reader does not know
     (``\\log_2``, primes, ...): about 0.1% of the dev-set pairs.

Fixes over math-verify alone (each is a "why" in the code below):

* Bases: math-verify drops a subscript, so ``40_8 == 40_9``. MATH golds write a number
  in base b as ``N_b``; we read it as that number (``40_8`` is 32) and never hand a base
  numeral to sympy. A numeral without subscript is decimal: ``2516`` is not ``2516_8``.
* Percent: math-verify reads ``12.5\\%`` as 0.125 and so rejects ``12.5``, the number
  MATH expects when the gold is ``12.5\\%``. Either reading is accepted.
* Decimals: math-verify rounds floats to 6 places, so ``.0000672 == .0000673``. Number
  literals are exact rationals here; a decimal stands for a value it does not equal
  only when it is that value correctly rounded with 4+ significant digits (``0.3333``
  for ``\\frac13``, ``1.4142`` for ``\\sqrt2``; not ``0.33`` nor ``3.14`` for ``\\pi``).
* Structures: bracket types, order and counts follow MATH, not sympy's coercions:
  ``(3,4]`` is not ``(3,4)``; a tuple is ordered; a set or a list of solutions is not;
  ``a \\pm b`` is the list ``a+b, a-b``; ``3 < x \\le 4`` is ``(3, 4]``; a column
  vector may be written as a tuple.
* Choice letters: a letter equals only the same letter in any dress (``(B)``, ``B``,
  ``\\text{(B)}``, ``\\textbf{(B)} 12``); sympy would read it as a symbol.
* Text: an answer wrapped in ``\\text{}`` (``\\text{4:30 p.m.}``, ``\\text{Evelyn}``) is
  compared as text, case aside; sympy would read its letters as symbols.
* Speed: math-verify's ANTLR parser costs 40-130 ms per new expression; layers 1-3
  answer 99.9% of the dev set in tens of microseconds (mean ~0.1-0.2 ms per call).
* Time limits that hold in any thread: math-verify's timeouts use ``signal.alarm``,
  which raises outside the main thread and cannot stop a long C call
  (``10^{10^{10}}``). Layer 4 therefore runs in worker processes (plain ``python -c``
  children talking JSON lines: no fork of a CUDA process, no re-import of the caller's
  ``__main__``), each call with a deadline (`DEFAULT_TIMEOUT_S`); a worker that misses
  it is killed and replaced, and the call returns False. A worker's one-time start
  (~1-3 s, importing sympy) is not counted against the deadline. Layers 1-3 are pure
  Python bounded by the input: answers longer than `MAX_ANSWER_CHARS` are compared by
  key, scalars longer than `MAX_SYMBOLIC_CHARS`, towers of numeric powers and huge
  factorials are refused. If no worker can start, layer 4 runs in-process (guarded,
  without a hard deadline) and a warning says so. ``CORL_ANSWER_WORKERS`` (default 2)
  caps the workers per process.
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import operator
import os
import queue
import re
import subprocess
import sys
import threading
import time
import zlib
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 2.0  # deadline of one is_equivalent call (all its symbolic checks)
MAX_SYMBOLIC_CHARS = 300  # longer scalars are compared by key only
MAX_ANSWER_CHARS = 2000  # longer answers are keyed by their stripped text
WORKER_STARTUP_S = 60.0  # importing sympy on a loaded machine can take a while
_APPROX_DIGITS = 4  # significant digits a decimal needs to stand for an irrational value
_MAX_UNMATCHED = 16  # elements of a set left after key matching that are compared pairwise

# ----------------------------------------------------------------------------------
# Extraction
# ----------------------------------------------------------------------------------

_BOX = re.compile(r"\\(?:boxed|fbox)(?![a-zA-Z])")
_ANSWER_IS = re.compile(r"(?i)\banswer\s*(?:is\b|:)[\s:]*")
_SENTENCE_END = re.compile(r"\.(?=\s|$)|\n")
_FILLER = re.compile(r"^(?:therefore|thus|then|hence|so|simply|clearly|just|indeed|exactly|equal to|given by)\b[\s,:]*", re.I)


def _closing_brace(s: str, start: int) -> int:
    """Index of the brace closing s[start] == '{' (TeX escapes skipped), or -1."""
    depth, i, n = 0, start, len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _balanced(s: str) -> bool:
    """True when every unescaped brace of s is matched."""
    depth, i = 0, 0
    while i < len(s):
        if s[i] == "\\":
            i += 2
            continue
        depth += {"{": 1, "}": -1}.get(s[i], 0)
        if depth < 0:
            return False
        i += 1
    return depth == 0


def _inline(rest: str) -> str | None:
    """The answer that opens `rest`: a whole $...$ / \\(...\\) span, else the sentence."""
    rest = _FILLER.sub("", rest.lstrip(" *\t"), count=1).lstrip(" *\t")
    for open_, close in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if rest.startswith(open_):
            end = rest.find(close, len(open_))
            while end > 0 and rest[end - 1] == "\\" and close == "$":  # "\$" is a dollar sign
                end = rest.find(close, end + 1)
            # why: an unclosed $ means the completion was cut inside the answer
            return rest[len(open_) : end].strip() or None if end >= 0 else None
    end = _SENTENCE_END.search(rest)
    text = (rest[: end.start()] if end else rest).strip().rstrip(" .,;:!*").strip()
    if not text or text.startswith(("not ", "that ", "to ")) or len(text.split()) > 8:
        return None  # "the answer is not obvious", a sentence rather than an answer
    return text


def extract_answer(text: str | None) -> str | None:
    """The completion's final answer as written, or None when it commits to none.

    Order: the last ``\\boxed``/``\\fbox`` (nested braces, ``\\boxed {x}``, ``\\boxed x``);
    else the last ``#### x`` line; else the last "answer is x" / "answer: x". An unclosed
    last box, an empty box or an answer cut mid-formula gives None.
    """
    if not text:
        return None
    boxes = list(_BOX.finditer(text))
    if boxes:
        i = boxes[-1].end()
        j = i
        while j < len(text) and text[j].isspace():
            j += 1
        if j < len(text) and text[j] == "{":
            end = _closing_brace(text, j)
            return (text[j + 1 : end].strip() or None) if end >= 0 else None
        if j == i:  # e.g. "\boxed" at the very end, or "\boxed$"
            return None
        answer = _inline(text[j:].split("$")[0])
        return answer if answer and _balanced(answer) else None
    hashes = text.rfind("####")
    if hashes >= 0:
        line = text[hashes + 4 :].split("\n")[0].strip()
        line = line[1:-1].strip() if len(line) > 1 and line[0] == line[-1] == "$" else line
        return line.rstrip(".").strip() or None
    said = None
    for said in _ANSWER_IS.finditer(text):  # noqa: B007 -- the last statement counts
        pass
    if said is not None:
        answer = _inline(text[said.end() :])
        return answer if answer and _balanced(answer) else None
    return None


# ----------------------------------------------------------------------------------
# Cleaning: notation that never changes the value
# ----------------------------------------------------------------------------------

_UNICODE = {
    "−": "-",
    "–": "-",
    "π": "\\pi ",
    "∞": "\\infty ",
    "°": "^\\circ",
    "×": "\\times ",
    "·": "\\cdot ",
    "≤": "\\le ",
    "≥": "\\ge ",
    "∪": "\\cup ",
    "√": "\\sqrt",
    "\u00a0": " ",
}
_DELIMS = re.compile(r"\\\$|\$|(?<!\\)\\[()\[\]]")
_STYLE = re.compile(r"\\(?:displaystyle|textstyle|scriptstyle|limits)(?![a-zA-Z])")
_SIZING = re.compile(r"\\(?:left|right|bigg?|Bigg?)[lr]?(?![a-zA-Z])\.?")
_THOUSANDS = re.compile(r"(?<=\d)\s*(?:,\s*\\!|\{,\}|\\,|\\!|,\\ )\s*(?=\d{3}(?!\d))")
_SPACING = re.compile(r"(?<!\\)\\[,;:! ]|\\q?quad(?![a-zA-Z])|~|\\hspace\{[^{}]*\}")
_FRACS = re.compile(r"\\[dtc]frac(?![a-zA-Z])")
_TOKEN = r"(\d|[a-zA-Z]|\\[a-zA-Z]+)"
_FRAC_SHORT = [
    (re.compile(r"\\frac\s*" + _TOKEN + r"\s*" + _TOKEN), r"\\frac{\1}{\2}"),
    (re.compile(r"\\frac\s*" + _TOKEN + r"\s*\{"), r"\\frac{\1}{"),
    (re.compile(r"\\frac\s*(\{[^{}]*\})\s*" + _TOKEN), r"\\frac\1{\2}"),
    (re.compile(r"\\sqrt\s*" + _TOKEN), r"\\sqrt{\1}"),
]
_PERCENT = re.compile(r"\s*(?:\\?%|\\text\{\s*percent\s*\}|\s+percent\b)")
_DEGREES = re.compile(
    r"\s*(?:\^\s*\{?\s*\\circ\s*\}?|\\degree\b|\^\s*\{\s*\\text\{\s*o\s*\}\s*\}|(?<=\d)\^\s*\{?o\}?(?![A-Za-z]))"
)
_TEXT_CMD = r"\\(?:text|textbf|textit|textrm|textsf|texttt|mbox|mathrm|mathbf|mathit|mathsf|operatorname)\s*"
_UNIT_TEXT = re.compile(r"^(.*?[\w})\]])\s*" + _TEXT_CMD + r"\{\s*[A-Za-z][A-Za-z\s.]*\}\s*(?:\^\s*\{?[23]\}?)?$")
_UNITS = (
    r"(?:cm|mm|km|ft|in|inch(?:es)?|feet|foot|yd|yards?|mi|miles?|kg|mg|lbs?|pounds?|oz|ounces?|hrs?|hours?|"
    r"min(?:utes?)?|sec(?:onds?)?|days?|weeks?|years?|degrees?|units?|cents?|dollars?|meters?|ml|mL|mph|sq)"
)
# why: only after a number or a closed group ("5 cm", "2\pi units"), so "Evelyn Navin" stays
_UNIT_WORDS = re.compile(
    r"^(.*?(?:[\d})\]]|\\[a-zA-Z]+))(?:\s+[A-Za-z]{3,}(?:\s+[A-Za-z]{2,})*|\s*"
    + _UNITS
    + r"(?![A-Za-z])(?:\s+[A-Za-z]{2,})*)(?:\s*\^\s*\{?[23]\}?)?$"
)
_TEXT_WRAP = re.compile(_TEXT_CMD + r"\{([^{}]*)\}")
_WHOLE_TEXT = re.compile(_TEXT_CMD + r"\{\s*([^{}]*?)\s*\}$")
_OR_AND = re.compile(r"\s+(?:or|and)\s+")
_VAR = r"(?:[a-zA-Z]|\\(?:alpha|beta|gamma|delta|theta|phi|varphi|lambda|mu|omega|rho|sigma|tau|psi))(?:_\{?\w+\}?)?"
_VAR_PREFIX = re.compile(r"^" + _VAR + r"(?:\([a-z, ]*\))?\s*(?:=|\\in(?![a-zA-Z]))\s*(?=\S)")  # x =, f(x) =
_GROUPED_ARG = re.compile(r"(?<=\{)\d{1,3}(?:,\d{3})+(?=\})")
_GROUPED = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?:\\%)?$")


def _unbox(s: str) -> str:
    """Every \\boxed{x} / \\fbox{x} replaced by x: a box is emphasis, not math."""
    while True:
        m = _BOX.search(s)
        j = m.end() if m else -1
        while m and j < len(s) and s[j] == " ":
            j += 1
        end = _closing_brace(s, j) if m and j < len(s) and s[j] == "{" else -1
        if end < 0:
            return s
        s = s[: m.start()] + s[j + 1 : end] + s[end + 1 :]


@functools.lru_cache(maxsize=1 << 16)
def _clean(s: str, strip_var: bool = True) -> str:
    """Drop notation that never changes an answer's value; keep spaces that TeX needs."""
    s = s.strip()
    for a, b in _UNICODE.items():
        if a in s:
            s = s.replace(a, b)
    s = _unbox(s)
    s = _DELIMS.sub(" ", s)
    s = _STYLE.sub("", s)
    s = _SIZING.sub("", s)
    s = _THOUSANDS.sub(",", s)
    s = _GROUPED_ARG.sub(lambda m: m.group(0).replace(",", ""), s)  # \frac{12}{5,525}
    s = _SPACING.sub(" ", s)
    s = _FRACS.sub(r"\\frac", s)
    if "\\frac" in s or "\\sqrt" in s:
        for pattern, repl in _FRAC_SHORT:
            s = pattern.sub(repl, s)
    s = _PERCENT.sub(r"\\%", s)
    degrees = _DEGREES.search(s) is not None  # "45^\circ,135^\circ" is a list, not 45135
    s = _DEGREES.sub("", s)
    s = s.strip().rstrip(".").strip()
    for _ in range(3):  # units: "5 \text{ cm}^2", "18.90 dollars", "\text{ sq } \text{ units}"
        m = _UNIT_TEXT.match(s) or _UNIT_WORDS.match(s)
        if not m:
            break
        s = m.group(1).strip()
    m = _WHOLE_TEXT.match(s)
    if m and re.search(r"[A-Za-z][A-Za-z.]", m.group(1)):
        # why: a text answer ("\text{4:30 p.m.}", "\text{Evelyn}") is compared as text:
        # sympy would read its letters as symbols and call different words equal
        return "\\text{" + " ".join(m.group(1).split()) + "}"
    s = _TEXT_WRAP.sub(lambda m: m.group(1), s)
    s = " ".join(s.split())
    if "," not in s:  # "2 or 3", "x = 1 and x = 2": a list of solutions
        s = _OR_AND.sub(", ", s)
    if strip_var:
        m = _VAR_PREFIX.match(s)
        if m and "=" not in s[m.end() :]:
            s = s[m.end() :]
    if s.startswith("+"):
        s = s[1:].lstrip()
    if _GROUPED.match(s) and not degrees:
        s = s.replace(",", "")
    return s


# ----------------------------------------------------------------------------------
# Exact numbers
# ----------------------------------------------------------------------------------

_DEC = r"(\d+(?:\.\d*)?|\.\d+)"
_NUM_PATTERNS = [
    ("dec", re.compile(_DEC + r"$")),
    ("frac", re.compile(r"\\frac\{([-+]?)" + _DEC + r"\}\{([-+]?)" + _DEC + r"\}$")),
    ("slash", re.compile(_DEC + r"/" + _DEC + r"$")),
    ("mixed", re.compile(r"(\d+)\\frac\{(\d+)\}\{(\d+)\}$")),
    ("sci", re.compile(_DEC + r"(?:\\times|\\cdot)10\^\{?([-+]?\d{1,3})\}?$")),
    ("sci", re.compile(_DEC + r"[eE]([-+]?\d{1,3})$")),
    ("base", re.compile(r"\(?([0-9A-Z]+)\)?_\{?\(?(\d{1,2})\)?\}?$")),
]


@dataclass(frozen=True)
class _Number:
    value: Fraction
    places: int | None = None  # digits after the point of a decimal literal, else None
    digits: int = 0  # significant digits of a decimal literal
    percent: bool = False


def _decimal(text: str) -> tuple[Fraction, int | None, int]:
    if "." not in text:
        return Fraction(int(text)), None, 0
    whole, frac = text.split(".")
    digits = len((whole + frac).lstrip("0"))
    return Fraction(text), len(frac), digits


@functools.lru_cache(maxsize=1 << 16)
def _number(s: str) -> _Number | None:
    """The exact value of a number literal (no spaces), or None for anything else."""
    if len(s) > 200:
        return None
    percent = s.endswith("\\%")
    if percent:
        s = s[:-2]
    while len(s) > 2 and s[0] == "(" and s[-1] == ")" and "," not in s:
        s = s[1:-1]
    sign = 1
    while s[:1] in ("-", "+"):
        sign, s = (-sign if s[0] == "-" else sign), s[1:]
    places, digits = None, 0
    for kind, pattern in _NUM_PATTERNS:
        m = pattern.match(s)
        if not m:
            continue
        g = m.groups()
        if kind == "dec":
            value, places, digits = _decimal(g[0])
        elif kind == "frac":
            den = Fraction(g[3]) * (-1 if g[2] == "-" else 1)
            if den == 0:
                return None
            value = Fraction(g[1]) * (-1 if g[0] == "-" else 1) / den
        elif kind == "slash":
            if Fraction(g[1]) == 0:
                return None
            value = Fraction(g[0]) / Fraction(g[1])
        elif kind == "mixed":
            whole, num, den = (int(x) for x in g)
            if not 0 < num < den:  # "2\frac{3}{2}" is not a mixed number
                return None
            value = whole + Fraction(num, den)
        elif kind == "sci":
            value = Fraction(g[0]) * Fraction(10) ** int(g[1])
        else:  # why: MATH writes N in base b as N_b; 40_8 is 32, never 40_9
            base = int(g[1])
            if not 2 <= base <= 36:
                return None
            try:
                value = Fraction(int(g[0], base))
            except ValueError:  # a digit the base does not have, e.g. 29_8
                return None
        return _Number(sign * value, places, digits, percent)
    return None


def _numbers_equal(a: _Number, b: _Number) -> bool:
    # why: "12.5\%" means 12.5 to a MATH grader and 0.125 to sympy; accept both.
    va = {a.value, a.value / 100} if a.percent and not b.percent else {a.value}
    vb = {b.value, b.value / 100} if b.percent and not a.percent else {b.value}
    if va & vb:
        return True
    return any(_rounds_to(x, y) or _rounds_to(y, x) for x in (a, b) for y in (a, b) if x is not y)


def _rounds_to(lit: _Number, other: _Number) -> bool:
    """lit is a decimal that rounds other (exact, not itself a decimal) at lit's places."""
    if lit.places is None or other.places is not None or lit.digits < _APPROX_DIGITS:
        return False
    return _close(lit.value, other.value, lit.places)


def _close(decimal: Fraction, exact, places: int) -> bool:
    return abs(decimal - exact) <= Fraction(1, 2 * 10**places) * (1 + Fraction(1, 10**9))


# ----------------------------------------------------------------------------------
# Structure: scalars, tuples / intervals, sets / lists, unions, matrices
# ----------------------------------------------------------------------------------

_OPEN, _CLOSE = "([{", ")]}"
_MATRIX = re.compile(r"^\\begin\{([pbBvV]?matrix|array)\}(?:\{[^{}]*\})?(.*)\\end\{\1\}$", re.S)


@dataclass(frozen=True)
class _Struct:
    kind: str  # "scalar" | "seq" (tuple, interval, vector) | "set" | "list" | "union" | "matrix"
    items: tuple  # str scalars, or tuples of str for matrix rows
    ends: str = ""  # bracket pair of a seq, e.g. "(]"


def _split_top(s: str, sep: str) -> list[str]:
    """s split at `sep` outside any bracket (``\\{``, ``\\}`` count as brackets)."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        if depth == 0 and s.startswith(sep, i):
            parts.append(s[start:i])
            start = i = i + len(sep)
            continue
        c = s[i]
        if c == "\\" and i + 1 < len(s) and not s[i + 1].isalpha():
            c = s[i + 1] if s[i + 1] in "{}" else "\0"
            i += 1  # an escaped character: "\\{" still nests, "\\," never splits
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        i += 1
    parts.append(s[start:])
    return [p.strip() for p in parts]


def _enclosed(s: str) -> bool:
    """s is one bracket group: its first bracket closes at its last character."""
    depth = 0
    for i, c in enumerate(s):
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
            if depth == 0:
                return i == len(s) - 1
    return False


def _expand_pm(items: list[str]) -> list[str]:
    # why: "3 \pm 2\sqrt{2}" is the two answers 3+2\sqrt{2} and 3-2\sqrt{2}
    out = []
    for item in items:
        marks = re.findall(r"\\(?:pm|mp)(?![a-zA-Z])", item)
        if len(marks) == 1:
            out += [re.sub(r"\\(?:pm|mp)(?![a-zA-Z])", op, item) for op in ("+", "-")]
        else:
            out.append(item)
    return out


def _strip_common_var(items: list[str]) -> list[str]:
    """ "x = 1, x = 2" -> "1, 2"; "x = 1, y = 2" keeps its names (it is a point)."""
    names = [re.match(r"^(" + _VAR + r")\s*=", it) for it in items]
    if all(names) and len({m.group(1) for m in names}) == 1:
        return [it[m.end() :].strip() for it, m in zip(items, names)]
    return items


_LESS = {
    "<": "<",
    "\\lt": "<",
    "\\le": "<=",
    "\\leq": "<=",
    "\\leqslant": "<=",
    ">": ">",
    "\\gt": ">",
    "\\ge": ">=",
    "\\geq": ">=",
    "\\geqslant": ">=",
}
_CMP = r"\s*(<|>|\\(?:lt|gt|leqslant|geqslant|leq|geq|le|ge)(?![a-zA-Z]))\s*"
_ONE_SIDED = re.compile(r"^(" + _VAR + r")" + _CMP + r"([^<>=]+)$")
_TWO_SIDED = re.compile(r"^([^<>=]+?)" + _CMP + r"(" + _VAR + r")" + _CMP + r"([^<>=]+)$")


def _inequality_interval(s: str) -> _Struct | None:
    """ "3 < x \\le 4" -> (3, 4]; "x \\ge 6" -> [6, \\infty): an inequality in one variable as an interval."""
    m = _TWO_SIDED.match(s)
    if m:
        lo, op1, _, op2, hi = m.groups()
        op1, op2 = _LESS[op1], _LESS[op2]
        if op1[0] != op2[0]:
            return None
        if op1[0] == ">":
            lo, hi, op1, op2 = hi, lo, op2.replace(">", "<"), op1.replace(">", "<")
        return _Struct("seq", (_clean(lo, False), _clean(hi, False)), ("[" if "=" in op1 else "(") + ("]" if "=" in op2 else ")"))
    m = _ONE_SIDED.match(s)
    if m:
        _, op, bound = m.groups()
        op, bound = _LESS[op], _clean(bound, False)
        if op[0] == "<":
            return _Struct("seq", ("-\\infty", bound), "(" + ("]" if "=" in op else ")"))
        return _Struct("seq", (bound, "\\infty"), ("[" if "=" in op else "(") + ")")
    return None


@functools.lru_cache(maxsize=1 << 16)
def _structure(s: str) -> _Struct:
    """The shape of a cleaned answer."""
    m = _MATRIX.match(s)
    if m:
        rows = tuple(tuple(_clean(e, False) for e in r.split("&")) for r in re.split(r"\\\\", m.group(2)) if r.strip())
        if rows and len({len(r) for r in rows}) == 1:
            if len(rows) > 1 and len(rows[0]) == 1:  # why: a column vector may be written as a tuple
                return _Struct("seq", tuple(r[0] for r in rows), "()")
            if len(rows) == 1 and len(rows[0]) > 1:
                return _Struct("seq", rows[0], "()")
            return _Struct("matrix", rows)
    if s.startswith("\\{") and s.endswith("\\}") and _enclosed(s[1:]):
        inner = _split_top(s[2:-2], ",") if s[2:-2].strip() else []
        return _Struct("set", tuple(_expand_pm(_strip_common_var([_clean(x, False) for x in inner]))))
    parts = _split_top(s, "\\cup")
    if len(parts) > 1:
        return _Struct("union", tuple(parts))
    if len(s) > 1 and s[0] in "([" and s[-1] in ")]" and _enclosed(s):
        inner = _split_top(s[1:-1], ",")
        if len(inner) > 1:
            return _Struct("seq", tuple(_clean(x, False) for x in inner), s[0] + s[-1])
    interval = _inequality_interval(s)
    if interval is not None:
        return interval
    items = _split_top(s, ",")
    if len(items) > 1 or len(_expand_pm(items)) > 1:
        return _Struct("list", tuple(_expand_pm(_strip_common_var([_clean(x, False) for x in items]))))
    return _Struct("scalar", (s,))


# ----------------------------------------------------------------------------------
# Keys
# ----------------------------------------------------------------------------------

_CHOICE = re.compile(r"^\(?([A-Z])\)?$|^\(([a-e])\)$")
_CHOICE_WITH_TEXT = re.compile(r"^\(([A-Z])\)\s*\S")
_WORDS = re.compile(r"^[A-Za-z]{2,}(?: [A-Za-z]+)*$")
_BRACED_ONE = re.compile(r"([\^_])\{(\w)\}")


def _choice(s: str) -> str | None:
    m = _CHOICE.match(s.replace(" ", ""))
    return (m.group(1) or m.group(2).upper()) if m else None


def _number_key(n: _Number) -> str:
    v = n.value
    return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"


def _scalar_key(s: str) -> str:
    compact = s.replace(" ", "")
    letter = _choice(compact)
    if letter:
        return letter
    n = _number(compact)
    if n is not None:
        return _number_key(n)  # why: 10\% and 10 are one vote (percent of what is unsaid)
    if s.startswith("\\text{") or _WORDS.match(s):  # text: case, spaces, final period aside
        return (s[6:-1] if s.startswith("\\text{") else s).lower().replace(" ", "").rstrip(".")
    compact = _BRACED_ONE.sub(r"\1\2", compact).replace("\\times", "\\cdot").replace("\\dfrac", "\\frac")
    return compact


def _struct_key(st: _Struct) -> str:
    if st.kind == "scalar":
        return _scalar_key(st.items[0])
    if st.kind == "seq":
        return st.ends[0] + ",".join(_element_key(x) for x in st.items) + st.ends[1]
    if st.kind in ("set", "list"):  # a list of solutions is the set of them
        return "\\{" + ",".join(sorted(_element_key(x) for x in st.items)) + "\\}"
    if st.kind == "union":
        return "\\cup".join(sorted(_element_key(x) for x in st.items))
    return "\\matrix[" + ";".join(",".join(_element_key(x) for x in row) for row in st.items) + "]"


def _element_key(s: str) -> str:
    return _struct_key(_structure(_clean(s, False)))


@functools.lru_cache(maxsize=1 << 16)
def _analyze(answer: str) -> tuple[str, _Struct, str]:
    """(cleaned answer, its structure, its key)."""
    cleaned = _clean(answer)
    st = _structure(cleaned)
    return cleaned, st, _struct_key(st)


def answer_key(answer: str | None) -> str:
    """Canonical vote key: equivalent spellings of one answer share it.

    Pure string rewrites and exact rationals (no sympy): fast, deterministic, never
    raises. Equal keys imply `is_equivalent`; different keys may still be equivalent.
    """
    if answer is None:
        return ""
    try:
        text = str(answer)
        if len(text) > MAX_ANSWER_CHARS:
            return " ".join(text.split())
        return _analyze(text)[2]
    except Exception:  # a key must never take a training step down
        return " ".join(str(answer).split())


# ----------------------------------------------------------------------------------
# Fast numeric check: a small LaTeX reader evaluated with mpmath at fixed points
# ----------------------------------------------------------------------------------
# why: math-verify's ANTLR parser costs 40-130 ms per new expression; the answers of
# math problems are mostly polynomials, radicals, fractions and trig values, which a
# 100-line reader turns into a function in ~0.1 ms. Evaluating both sides at a few
# fixed points with 40 digits proves a difference, and agreement everywhere settles an
# identity (Schwartz-Zippel). Whatever the reader does not know goes to math-verify.

_FUNCS = {"sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "ln", "log", "exp"}
_GREEK = {
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "varepsilon",
    "zeta",
    "eta",
    "theta",
    "vartheta",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "rho",
    "sigma",
    "tau",
    "phi",
    "varphi",
    "chi",
    "psi",
    "omega",
    "Gamma",
    "Delta",
    "Theta",
    "Lambda",
    "Sigma",
    "Phi",
    "Psi",
    "Omega",
}
_TOWER = re.compile(r"\^\s*\{?\s*[\d.]+\s*\}?\s*\^|\^\s*\{?\s*\(?\s*\d{5,}|\d{4,}\s*!|!\s*!\s*!")  # 10^{10^{10}}, 9999!
_LEX = re.compile(r"\s*(\d+\.?\d*|\.\d+|\\[a-zA-Z]+|\\[{}|]|\S)")
_ATOM_START = re.compile(r"^(\d|\.\d|[a-zA-Z(\[{]|\\(frac|sqrt|pi|lfloor|lceil|binom|" + "|".join(_FUNCS | _GREEK) + r")$)")


class _Unreadable(Exception):
    """The fast reader does not know this notation (math-verify will be asked)."""


@functools.lru_cache(maxsize=1)
def _mp():
    import mpmath

    ctx = mpmath.MPContext()  # why: a private context; mpmath.mp's precision is process-global
    ctx.dps = 40
    return ctx


def _apply(fn, *args):
    """A reader node: fn of the values of the argument nodes (each a function of env)."""
    return lambda env: fn(*(a(env) for a in args))


def _const(value):
    return lambda env: value


class _Reader:
    """Recursive descent over one LaTeX expression into a node: env -> mpmath number.

    sum := term (+|- term)*;  term := signed (\\cdot|\\times|/|implicit signed)*;
    signed := -signed | power;  power := postfix (^ group|postfix)?;  postfix := atom !*
    """

    def __init__(self, text: str) -> None:
        self.toks = _LEX.findall(text)
        self.i = 0
        self.names: set[str] = set()

    def peek(self) -> str:
        return self.toks[self.i] if self.i < len(self.toks) else ""

    def take(self, want: str | None = None) -> str:
        tok = self.peek()
        if not tok or (want is not None and tok != want):
            raise _Unreadable(f"expected {want!r}, got {tok!r}")
        self.i += 1
        return tok

    def read(self):
        node = self.sum()
        if self.peek():
            raise _Unreadable(f"unexpected {self.peek()!r}")
        return node

    def sum(self):
        node = self.term()
        while self.peek() in ("+", "-"):
            op = operator.add if self.take() == "+" else operator.sub
            node = _apply(op, node, self.term())
        return node

    def term(self):
        node = self.signed()
        while True:
            tok = self.peek()
            if tok in ("\\cdot", "\\times", "*", "/", "\\div"):
                op = operator.truediv if self.take() in ("/", "\\div") else operator.mul
                node = _apply(op, node, self.signed())
            elif tok and _ATOM_START.match(tok):  # implicit product: 2x, 3\sqrt{2}, (a+1)(b+2)
                node = _apply(operator.mul, node, self.power())
            else:
                return node

    def signed(self):
        if self.peek() in ("-", "+"):
            return _apply(operator.neg, self.signed()) if self.take() == "-" else self.signed()
        return self.power()

    def power(self):
        base = self.postfix()
        if self.peek() != "^":
            return base
        self.take()
        exp = self.group() if self.peek() == "{" else self.signed() if self.peek() == "-" else self.postfix()
        return _apply(_mp().power, base, exp)

    def postfix(self):
        node = self.atom()
        while self.peek() == "!":
            self.take()
            node = _apply(lambda x: _mp().factorial(_small(x)), node)
        return node

    def group(self, open_: str = "{"):
        close = {"{": "}", "(": ")", "[": "]"}[open_]
        self.take(open_)
        node = self.sum()
        self.take(close)
        return node

    def atom(self):
        mp, tok = _mp(), self.peek()
        if tok in ("(", "[", "{"):
            return self.group(tok)
        self.take()
        if tok[0].isdigit() or tok[0] == ".":
            value = Fraction(tok)
            return _const(mp.mpf(value.numerator) / value.denominator)
        if tok == "|":
            node = _apply(abs, self.sum())
            self.take("|")
            return node
        if tok in ("\\lfloor", "\\lceil"):
            node = _apply(lambda x: (mp.floor if tok == "\\lfloor" else mp.ceil)(x.real), self.sum())
            self.take("\\rfloor" if tok == "\\lfloor" else "\\rceil")
            return node
        if tok == "\\frac":
            return _apply(operator.truediv, self.group(), self.group())
        if tok == "\\binom":
            return _apply(lambda n, k: mp.binomial(_small(n), _small(k)), self.group(), self.group())
        if tok == "\\sqrt":
            if self.peek() == "[":
                index = self.group("[")
                return _apply(lambda n, x: mp.root(x, _small(n)), index, self.group())
            return _apply(mp.sqrt, self.group())
        if tok == "\\pi":
            return _const(mp.pi)
        if tok[1:] in _FUNCS and tok[0] == "\\":
            return self.function(tok[1:])
        return self.variable(tok)

    def variable(self, tok: str):
        """x, x_1, a_{n}, \\theta; e and i are the constants (as math-verify reads them)."""
        name = tok[1:] if tok[0] == "\\" and tok[1:] in _GREEK else tok if tok.isalpha() and len(tok) == 1 else None
        if name is None:
            raise _Unreadable(tok)
        if self.peek() == "_":
            self.take()
            sub = self.take()
            if sub == "{":
                sub = ""
                while self.peek() not in ("}", ""):
                    sub += self.take()
                self.take("}")
            name = f"{name}_{sub}"
        elif name in ("e", "i"):
            return _const(_mp().e if name == "e" else _mp().mpc(0, 1))
        self.names.add(name)
        return lambda env: env[name]

    def function(self, name: str):
        """\\sin x, \\sin(x), \\sin^2 x, \\sin 2x (the implicit product that follows)."""
        mp = _mp()
        fn = {"arcsin": mp.asin, "arccos": mp.acos, "arctan": mp.atan, "log": mp.ln}.get(name) or getattr(mp, name)
        exp = None
        if self.peek() == "^":
            self.take()
            exp = self.group() if self.peek() == "{" else self.postfix()
        if self.peek() in ("(", "{"):
            arg = self.group(self.peek())
        else:
            arg = self.power()
            while self.peek() and _ATOM_START.match(self.peek()) and self.peek()[1:] not in _FUNCS:
                arg = _apply(operator.mul, arg, self.power())
        node = _apply(fn, arg)
        return node if exp is None else _apply(mp.power, node, exp)


def _small(x) -> int:
    """An integer argument of a factorial or binomial, refused when it is not a small one."""
    if abs(x.imag) > 0 or x.real != int(x.real) or abs(x.real) > 10**5:
        raise _Unreadable("not a small integer")
    return int(x.real)


@functools.lru_cache(maxsize=1 << 14)
def _formula(s: str):
    """(function of an env, its variable names, is-an-equation) for a scalar, or None."""
    if len(s) > MAX_SYMBOLIC_CHARS or _TOWER.search(s) or "\\infty" in s:
        return None
    sides = _split_top(s, "=")
    if len(sides) > 2 or not all(sides):
        return None
    try:
        readers = [_Reader(side) for side in sides]
        fns = [r.read() for r in readers]
    except (_Unreadable, ValueError, ZeroDivisionError, RecursionError):
        return None
    names = frozenset().union(*(r.names for r in readers))
    if len(fns) == 2:
        return _apply(operator.sub, *fns), names, True
    return fns[0], names, False


def _point(names, k: int) -> dict:
    """Fixed, name-dependent values: x and y differ, and x is the same in both answers."""
    mp = _mp()
    return {n: mp.mpf(1) + mp.mpf(zlib.crc32(f"{n}/{k}".encode()) % 100003) / 65537 for n in names}


def _numeric_verdict(p: str, g: str, lit_p: _Number | None, lit_g: _Number | None) -> bool | None:
    """Equal / different by evaluation, or None when the reader cannot tell.

    lit_p / lit_g: the exact value of a side that is a number literal (at most one is).
    """
    if lit_p is not None or lit_g is not None:  # a number against an expression
        lit, f = (lit_p, _formula(g)) if lit_p is not None else (lit_g, _formula(p))
        if f is None:
            return None
        if f[2]:  # a number is not an equation
            return False
        try:  # an expression in x equals a number only if it is that constant everywhere
            values = [f[0](_point(f[1], k)) for k in range(3 if f[1] else 1)]
        except ZeroDivisionError:  # the expression has no value
            return False
        except (ValueError, OverflowError, _Unreadable, TypeError):
            return None
        return all(_mp().isfinite(v) and _literal_matches(lit, v, exact_only=bool(f[1])) for v in values)
    fp, fg = _formula(p), _formula(g)
    if fp is None or fg is None:
        return None
    if fp[2] != fg[2]:  # an equation is not a value ("x = 5" lost its "x =" in _clean)
        return False
    names = fp[1] | fg[1]
    mp = _mp()
    try:
        ratio = None
        for k in range(3 if names else 1):
            env = _point(names, k)
            a, b = fp[0](env), fg[0](env)
            if not (mp.isfinite(a) and mp.isfinite(b)):  # log 0, tan(pi/2): nothing to compare
                return None
            if fp[2]:  # equations: equal up to a constant factor
                if abs(b) < mp.mpf(10) ** -30:
                    return None
                a, b = a / b, (ratio if ratio is not None else a / b)
                ratio = b
            if abs(a - b) > mp.mpf(10) ** -25 * max(1, abs(a), abs(b)):
                return False
    except ZeroDivisionError:
        return False if not names else None
    except (ValueError, OverflowError, _Unreadable, TypeError):
        return None
    return True  # each name has the same values in both answers, so x vs y still differs


def _literal_matches(lit: _Number, value, exact_only: bool = False) -> bool:
    """A number as written against an exact value: equal, or its correct rounding."""
    mp = _mp()
    if abs(value.imag) > mp.mpf(10) ** -30:
        return False
    for v in (lit.value, lit.value / 100) if lit.percent else (lit.value,):
        if abs(mp.mpf(v.numerator) / v.denominator - value.real) <= mp.mpf(10) ** -25 * max(1, abs(value)):
            return True
    if exact_only or lit.places is None or lit.digits < _APPROX_DIGITS:
        return False
    exact = mp.mpf(lit.value.numerator) / lit.value.denominator
    return abs(exact - value.real) <= (mp.mpf(1) / (2 * 10**lit.places)) * (1 + mp.mpf(10) ** -9)


# ----------------------------------------------------------------------------------
# Equivalence
# ----------------------------------------------------------------------------------

_BASE_NUMERAL = re.compile(r"[0-9A-Z)]_\{?\(?\d")
_INFINITY = re.compile(r"^[-+]?\\infty$")
_RELATION = re.compile(r"<|>|\\[lg]eq?(?![a-zA-Z])|\\[lg]t(?![a-zA-Z])")


class _Timeout(Exception):
    """The deadline of one is_equivalent call passed."""


class _Deadline:
    """When one is_equivalent call must be answered by (a worker's start is not counted)."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise _Timeout
        return left


def _scalar_equiv(p: str, g: str, deadline: _Deadline) -> bool:
    pc, gc = p.replace(" ", ""), g.replace(" ", "")
    if _scalar_key(p) == _scalar_key(g):
        return True
    if not pc or not gc or not _balanced(pc) or not _balanced(gc):  # an empty or broken element
        return False
    gl, pl = _choice(gc), _choice(pc)
    if gl or pl:  # why: a choice letter is not a symbol to be simplified
        m = _CHOICE_WITH_TEXT.match(p)
        return gl is not None and (gl == pl or (m is not None and m.group(1) == gl))
    pn, gn = _number(pc), _number(gc)
    if pn is not None and gn is not None:
        return _numbers_equal(pn, gn)
    if (pn is None and _BASE_NUMERAL.search(pc)) or (gn is None and _BASE_NUMERAL.search(gc)):
        return False  # why: sympy drops the base of a numeral; "29_8" is no number at all
    if _INFINITY.match(pc) or _INFINITY.match(gc):
        return False  # their keys differ: -\infty and \infty, or \infty and a number
    if p.startswith("\\text{") or g.startswith("\\text{") or (_WORDS.match(p) and _WORDS.match(g)):
        return False  # text answers: their keys (case aside) had to be equal
    p, g = _drop_percent(p, pn), _drop_percent(g, gn)
    verdict = _numeric_verdict(p, g, pn, gn)
    if verdict is not None:
        return verdict
    return _symbolic(p, g, deadline)


def _drop_percent(s: str, n: _Number | None) -> str:
    return s[:-2].strip() if s.endswith("\\%") and n is None else s


def _symbolic(p: str, g: str, deadline: _Deadline) -> bool:
    """math-verify on two scalars, in a worker, refusing what can only be pathological."""
    for s in (p, g):
        if len(s) > MAX_SYMBOLIC_CHARS or _TOWER.search(s):
            return False
    return _POOL.check(p, g, deadline)


def _match_unordered(ps: tuple, gs: tuple, deadline: _Deadline) -> bool:
    """Each element of ps equals a distinct element of gs (a multiset match)."""
    if len(ps) != len(gs):
        return False
    keys = Counter(_element_key(g) for g in gs)
    rest_p = []
    for p in ps:  # equal keys first: linear, and the usual case
        k = _element_key(p)
        if keys[k]:
            keys[k] -= 1
        else:
            rest_p.append(p)
    rest_g = []
    for g in gs:  # the elements of gs no p took by key
        k = _element_key(g)
        if keys[k]:
            keys[k] -= 1
            rest_g.append(g)
    if len(rest_p) > _MAX_UNMATCHED:  # pairwise checks would be quadratic
        return False
    for p in rest_p:
        hit = next((i for i, g in enumerate(rest_g) if _equiv_clean(p, g, deadline)), None)
        if hit is None:
            return False
        rest_g.pop(hit)
    return True


def _equiv_clean(p: str, g: str, deadline: _Deadline) -> bool:
    deadline.left()
    return _struct_equiv(_structure(_clean(p, False)), _structure(_clean(g, False)), p, g, deadline)


def _struct_equiv(a: _Struct, b: _Struct, p: str, g: str, deadline: _Deadline) -> bool:
    if _struct_key(a) == _struct_key(b):
        return True
    kinds = {a.kind, b.kind}
    if kinds == {"scalar"}:
        return _scalar_equiv(a.items[0], b.items[0], deadline)
    if kinds == {"seq"}:  # why: (3,4] is not (3,4); a tuple is ordered
        return (
            a.ends == b.ends
            and len(a.items) == len(b.items)
            and all(_equiv_clean(x, y, deadline) for x, y in zip(a.items, b.items))
        )
    if kinds <= {"set", "list"} or kinds in ({"union"}, {"union", "list"}):
        # solutions, set elements, union parts are unordered ("x < 3 or x > 5" is a union)
        return _match_unordered(a.items, b.items, deadline)
    if kinds == {"seq", "list"}:  # "1, 2" for the point (1, 2): same elements in order
        seq = a if a.kind == "seq" else b
        return (
            seq.ends == "()"
            and len(a.items) == len(b.items)
            and all(_equiv_clean(x, y, deadline) for x, y in zip(a.items, b.items))
        )
    if kinds == {"matrix"}:
        return (
            len(a.items) == len(b.items)
            and all(len(r) == len(s) for r, s in zip(a.items, b.items))
            and all(_equiv_clean(x, y, deadline) for r, s in zip(a.items, b.items) for x, y in zip(r, s))
        )
    if "scalar" in kinds and kinds & {"seq", "union"}:  # "x > 3" for (3, \infty)
        scalar = a if a.kind == "scalar" else b
        if _RELATION.search(scalar.items[0]):
            return _symbolic(p, g, deadline)
    return False


@functools.lru_cache(maxsize=1 << 16)
def _equivalent_cached(pred: str, gold: str, timeout: float) -> bool:
    deadline = _Deadline(timeout)
    p, ps, pk = _analyze(pred)
    g, gs, gk = _analyze(gold)
    if pk == gk:
        return True
    return _struct_equiv(ps, gs, p, g, deadline)


def is_equivalent(pred: str | None, gold: str | None, timeout: float = DEFAULT_TIMEOUT_S) -> bool:
    """Whether answer `pred` is mathematically the answer `gold`, as MATH/GSM8K graders judge.

    Never raises and never runs past `timeout` seconds (plus a worker's one-time
    start); a check that would is answered False.
    """
    if pred is None or gold is None:
        return False
    pred, gold = str(pred).strip(), str(gold).strip()
    if not pred or not gold:
        return False
    if len(pred) > MAX_ANSWER_CHARS or len(gold) > MAX_ANSWER_CHARS:
        return answer_key(pred) == answer_key(gold)
    try:
        return _equivalent_cached(pred, gold, timeout)
    except _Timeout:  # not cached: the next call may have the time
        return False
    except Exception:
        logger.debug("answer check failed for %r vs %r", pred[:80], gold[:80], exc_info=True)
        return False


def grade(completion_text: str | None, gold: str, timeout: float = DEFAULT_TIMEOUT_S) -> bool:
    """Reward of a completion: its extracted final answer is equivalent to `gold`."""
    answer = extract_answer(completion_text)
    return answer is not None and is_equivalent(answer, gold, timeout)


# ----------------------------------------------------------------------------------
# Symbolic check (math-verify), run in worker processes
# ----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def _parse(latex: str) -> tuple:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    config = [LatexExtractionConfig(), ExprExtractionConfig()]
    # why: timeouts off: signal.alarm fails off the main thread; the caller's deadline rules
    return tuple(parse(f"${latex}$", config, fallback_mode="no_fallback", parsing_timeout=None))


def _sympy_equiv(pred: str, gold: str) -> bool:
    """math-verify's verdict on two cleaned scalars (constants compared exactly first)."""
    from math_verify import verify

    ps, gs = _parse(pred), _parse(gold)
    if not ps or not gs:
        return False
    numeric = _constants_equal(ps[0], gs[0], pred, gold)
    if numeric is not None:
        return numeric
    return bool(verify(list(gs), list(ps), timeout_seconds=None, allow_set_relation_comp=True))


def _constants_equal(p, g, pred: str, gold: str) -> bool | None:
    """Equality of two constant expressions at 30 digits, or None when not both constants.

    why: math-verify rounds to 6 decimal places; a literal decimal instead counts only
    as the correct rounding of the exact value (see `_rounds_to`).
    """
    import sympy

    lits = [_number(pred.replace(" ", "")), _number(gold.replace(" ", ""))]
    vals = []
    for expr, lit in zip((p, g), lits):
        if lit is not None:
            vals.append(sympy.Rational(lit.value.numerator, lit.value.denominator))
        elif isinstance(expr, sympy.Expr) and expr.is_number:
            vals.append(sympy.N(expr, 30))
        else:
            return None
    diff = abs(sympy.N(vals[0] - vals[1], 30))
    if not diff.is_number or diff.has(sympy.nan, sympy.zoo, sympy.oo):
        return None
    scale = max(1, abs(sympy.N(vals[1], 30)))
    if bool(diff <= sympy.Float("1e-20", 30) * scale):
        return True
    for lit in lits:
        if (
            lit is not None
            and lit.places is not None
            and lit.digits >= _APPROX_DIGITS
            and bool(diff <= sympy.Rational(1, 2 * 10**lit.places) * (1 + sympy.Rational(1, 10**9)))
        ):
            return True
    return False


def _serve() -> None:
    """Worker main loop: JSON [pred, gold] per stdin line -> "1"/"0" per stdout line."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints of libraries must not corrupt the protocol
    for name in ("math_verify", "latex2sympy2_extended"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    _sympy_equiv("x+1", "1+x")  # warm the parser before saying ready
    out.write("ready\n")
    for line in sys.stdin:
        try:
            pred, gold = json.loads(line)
            ok = _sympy_equiv(pred, gold)
        except Exception:
            ok = False
        out.write("1\n" if ok else "0\n")


class _Worker:
    """One `python -c` child running `_serve`; a reader thread turns its lines into a queue."""

    def __init__(self) -> None:
        src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from corl.answers import _serve; _serve()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=env,
        )
        self.lines: queue.Queue = queue.Queue()
        self.ready = False
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put(None)

    def wait_ready(self, timeout: float) -> bool:
        if not self.ready:
            try:
                self.ready = self.lines.get(timeout=timeout) == "ready"
            except queue.Empty:
                return False
        return self.ready

    def ask(self, pred: str, gold: str, timeout: float) -> bool:
        """The worker's verdict; raises queue.Empty after `timeout` s, OSError if it died."""
        self.proc.stdin.write(json.dumps([pred, gold]) + "\n")
        self.proc.stdin.flush()
        line = self.lines.get(timeout=timeout)
        if line is None:
            raise OSError("answer worker exited")
        return line == "1"

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except Exception:
            pass


class _WorkerPool:
    """Workers shared by all threads of a process; one call holds one worker."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._reset()
        atexit.register(self.close)

    def _reset(self) -> None:
        self.pid = os.getpid()  # why: a forked child must not talk to its parent's pipes
        self.idle: list[_Worker] = []
        self.count = 0
        self.broken = False
        self.cond = threading.Condition()

    def _take(self, deadline: _Deadline) -> _Worker:
        with self.cond:
            if self.pid != os.getpid():
                self._reset()
            while not self.idle and self.count >= self.size:
                if not self.cond.wait(timeout=deadline.left()):
                    raise _Timeout
            if self.idle:
                return self.idle.pop()
            self.count += 1
        try:
            return _Worker()
        except Exception:
            with self.cond:
                self.count -= 1
            raise

    def _give(self, worker: _Worker | None) -> None:
        with self.cond:
            if worker is None:
                self.count -= 1
            else:
                self.idle.append(worker)
            self.cond.notify()

    def check(self, pred: str, gold: str, deadline: _Deadline) -> bool:
        if not self.broken:
            try:
                worker = self._take(deadline)
            except OSError:
                worker = None
            started = time.monotonic()
            if worker is not None and worker.wait_ready(WORKER_STARTUP_S):
                deadline.at += time.monotonic() - started
                try:
                    ok = worker.ask(pred, gold, deadline.left())
                except (queue.Empty, _Timeout, OSError) as e:
                    worker.kill()  # why: the only way to stop sympy mid-computation
                    self._give(self._spawn())  # the replacement starts while we return
                    raise _Timeout from e
                self._give(worker)
                return ok
            if worker is not None:
                worker.kill()
                self._give(None)
            self.broken = True
            logger.warning(
                "corl.answers: no answer-check worker could start; checking in-process "
                "(guarded against pathological inputs, but without a hard deadline)"
            )
        return _sympy_equiv(pred, gold)

    @staticmethod
    def _spawn() -> _Worker | None:
        try:
            return _Worker()
        except OSError:
            return None

    def close(self) -> None:
        if self.pid != os.getpid():  # a forked child: the workers are its parent's
            return
        with self.cond:
            workers, self.idle = self.idle, []
        for worker in workers:
            worker.kill()


_POOL = _WorkerPool(size=int(os.environ.get("CORL_ANSWER_WORKERS", "2")))
