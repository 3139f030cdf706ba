"""Exact number literals: integers, decimals, repeating decimals, fractions, mixed numbers,
percentages, bases; and integer powers inside exponents folded to their value."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from fractions import Fraction

from corl.answers.conventions import percent_readings, rounding_slack

_DEC = r"(\d+(?:\.\d*)?|\.\d+)"
_NUM_PATTERNS = [
    ("dec", re.compile(_DEC + r"$")),
    ("frac", re.compile(r"\\frac\{([-+]?)" + _DEC + r"\}\{([-+]?)" + _DEC + r"\}$")),
    ("slash", re.compile(_DEC + r"/" + _DEC + r"$")),
    ("mixed", re.compile(r"(\d+)\\frac\{(\d+)\}\{(\d+)\}$")),
    ("sci", re.compile(_DEC + r"(?:\\times|\\cdot)10\^\{?([-+]?\d{1,3})\}?$")),
    ("sci", re.compile(_DEC + r"[eE]([-+]?\d{1,3})$")),
    ("base", re.compile(r"\(?([0-9A-Z]+)\)?_\{?\(?(\d{1,2})\)?\}?$")),
    # 0.\overline{3}, 0.1\bar{6}, 0.\dot{1}4285\dot{7}: a repeating decimal is the fraction it denotes
    ("repeat", re.compile(r"(\d*)\.(\d*)\\(?:overline|bar)\{?(\d+)\}?$")),
    ("repeat", re.compile(r"(\d*)\.(\d*)\\dot\{?(\d)\}?$")),
    ("dots", re.compile(r"(\d*)\.(\d*)\\dot\{?(\d)\}?(\d*)\\dot\{?(\d)\}?$")),
]
MAX_FOLDED_EXPONENT = 10**7  # x^{2^{2^{2^2}}} is x^{65536}; 10^{10^{10}} stays a tower (the guards refuse it)
_INNER_POWER = re.compile(r"\^\s*\{\s*(\d{1,7})\s*\^\s*(?:\{\s*(\d{1,7})\s*\}|(\d))\s*\}")


@dataclass(frozen=True)
class Number:
    """A literal's exact value, and how it was written (a decimal's places, a percent sign)."""

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


def _value(kind: str, g: tuple) -> tuple[Fraction, int | None, int] | None:
    """The value of one matched literal pattern (None: not a number, e.g. a zero denominator)."""
    if kind == "dec":
        return _decimal(g[0])
    if kind == "frac":
        den = Fraction(g[3]) * (-1 if g[2] == "-" else 1)
        return (Fraction(g[1]) * (-1 if g[0] == "-" else 1) / den, None, 0) if den else None
    if kind == "slash":
        return (Fraction(g[0]) / Fraction(g[1]), None, 0) if Fraction(g[1]) else None
    if kind == "mixed":
        whole, num, den = (int(x) for x in g)
        return (whole + Fraction(num, den), None, 0) if 0 < num < den else None  # "2\frac32" is a product
    if kind in ("repeat", "dots"):
        return _repeating(*g), None, 0
    if kind == "sci":
        return Fraction(g[0]) * Fraction(10) ** int(g[1]), None, 0
    base = int(g[1])  # why: math-verify drops a subscript (40_8 == 40_9); MATH writes N in base b as N_b
    if not 2 <= base <= 36:
        return None
    try:
        return Fraction(int(g[0], base)), None, 0
    except ValueError:  # a digit the base does not have, e.g. 29_8
        return None


def _repeating(whole: str, fixed: str, *cycle: str) -> Fraction:
    """whole.fixed(cycle repeating): the exact value (cycle given in pieces for the dotted form)."""
    rep = "".join(cycle)
    tail = (Fraction(int(fixed or "0")) + Fraction(int(rep), 10 ** len(rep) - 1)) / 10 ** len(fixed)
    return int(whole or "0") + tail


def fold_exponents(s: str) -> str:
    """Integer powers inside an exponent replaced by their value while it stays small
    (``x^{2^{2^{2^2}}}`` -> ``x^{65536}``): a power tower of literals is that one number, and
    spelling it folded lets keys and the readers compare it; a larger one is left as written."""
    while "^" in s:
        m = next((m for m in _INNER_POWER.finditer(s) if _small_power(m)), None)
        if m is None:
            return s
        base, exp = int(m.group(1)), int(m.group(2) or m.group(3))
        s = s[: m.start()] + "^{" + str(base**exp) + "}" + s[m.end() :]
    return s


def _small_power(m: re.Match) -> bool:
    base, exp = int(m.group(1)), int(m.group(2) or m.group(3))
    return base <= 1 or exp * (base.bit_length() - 1) < MAX_FOLDED_EXPONENT.bit_length() and base**exp <= MAX_FOLDED_EXPONENT


@functools.lru_cache(maxsize=1 << 16)
def number(s: str) -> Number | None:
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
    for kind, pattern in _NUM_PATTERNS:
        m = pattern.match(s)
        if m:
            got = _value(kind, m.groups())
            return None if got is None else Number(sign * got[0], got[1], got[2], percent)
    return None


def numbers_equal(a: Number, b: Number) -> bool:
    """Two literals are one answer: equal (either reading of a percent), or one rounds the other."""
    if percent_readings(a.value, a.percent, b.percent) & percent_readings(b.value, b.percent, a.percent):
        return True
    return rounds_to(a, b) or rounds_to(b, a)


def rounds_to(lit: Number, other: Number) -> bool:
    """lit is a decimal that rounds `other` (exact, not itself a decimal) at lit's places."""
    slack = rounding_slack(lit.places, lit.digits) if other.places is None else None
    if slack is None:
        return False
    diff = abs(lit.value - other.value)
    return diff <= slack[0] or diff <= slack[1] * abs(other.value)
