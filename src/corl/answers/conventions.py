"""The deliberate rules where graders' conventions disagree: one place, each with its reason.

Every rule below is a choice between two published conventions (MATH / Minerva, Qwen2.5-Math,
PRM800K, math-verify, lm-eval). The other modules ask these functions instead of deciding
themselves, and `tests/answers/test_answers_conventions.py` pins each one.

* ORDER: a tuple, a point, an interval or a vector is ordered: ``(1,2)`` is not ``(2,1)``.
  A set ``\\{...\\}``, a list of solutions ``1, 2`` / ``1 or 2`` / one box per solution, and a
  union are unordered. A list compared with a tuple is read in order (``1, 2`` for ``(1, 2)``).
  A set of one element is that element against what is no set (``\\{(1, 2)\\}`` is the
  solution ``(1, 2)``, ``\\{5\\}`` is 5): a list of one solution is its solution.
* DUPLICATES: an element written twice in a set or a list of solutions counts once
  (``\\{1, 1, 2\\}`` is ``\\{1, 2\\}``): a set has no multiplicity, and graders that compare
  as sets accept the repeat.
* ROUNDING: a decimal stands for an irrational or repeating value only when it is that value
  correctly rounded at its own number of places and gives `APPROX_DIGITS` significant digits
  (``0.3333`` is 1/3, ``3.1416`` is pi; ``0.33`` and ``3.14`` are not). A float repr
  (`FLOAT_REPR_DIGITS`+ significant digits, e.g. ``1.4142135623730951``) may be off by one
  unit of double precision, since repr prints the shortest round-trip string, not the
  correct rounding. math-verify instead rounds both sides to 6 places, which merges
  ``.0000672`` and ``.0000673``.
* PERCENT: ``12.5\\%`` equals both 12.5 (what MATH expects) and 0.125 (its value).
* UNITS: a unit is notation, not value: ``5 cm`` equals ``5``, and a missing unit is never
  penalised (nor is a different one: the graders compared here all drop units). Compound units
  (``7\\,\\mathrm{m/s}``, ``9.8\\,\\mathrm{m}/\\mathrm{s}^2``, ``\\frac{\\text{m}}{\\text{s}}``) and currency
  signs (``\\$ £ € ¥ ₹``, ``\\pounds``, ``\\euro``), in an equation chain too, are units; ``\\mathrm{e}`` and
  ``\\mathrm{i}`` are the constants, never a unit. A degree sign is a unit at the top of an
  answer (``90^\\circ`` is 90) but the factor pi/180 on a function's argument
  (``\\cos 15^\\circ`` is cos(pi/12)): there it changes the value.
* NAMED VALUES: ``name = value`` is the value when the left side only names it (``x``,
  ``(p,q)``, ``|AB|``, ``V_1:V_2``, ``\\frac{NO}{BO}``, ``f(x)``); ``2 = x`` is 2. A chain
  ``a = b = c`` (or a computation ``1 + 0.5 = 1.5``) answers its last member. An equation
  whose sides are both expressions in variables stays an equation; two equations are equal
  when one is a nonzero multiple of the other (the same line or plane). Named values whose
  names come again are several solutions, one tuple each in the first one's name order
  (``x = 1, y = 2 or x = 3, y = 4`` is ``(1, 2), (3, 4)``); distinct names are one solution,
  read in the order written against a tuple.
* CHOICES: a lettered choice with its value (``\\textbf{(B) } 7``, ``B. 7``) is one answer: it
  equals its letter and its value; two letters must agree, and two stated values too
  (``(B) 7`` is not ``(C) 7`` nor ``(B) 8``). A bare letter states no value (``B`` is not 7).
* APPROXIMATIONS: ``A \\approx B`` answers A, and also B when B is a decimal that rounds A at
  B's own places and has `APPROX_READING_DIGITS` significant digits (``\\frac{1}{3} \\approx 0.33``
  is 1/3 and 0.33): both sides are one value, written at two precisions. A one-digit decimal
  (``\\frac{1}{3} \\approx 0.3``: 0.3 rounds 2/7 and 3/10 alike) or one that is A's digits cut at
  its places (``\\frac{2}{3} \\approx 0.666``) is consistent but no reading of its own: it answers A. When B is further from A than its own
  precision (``7 \\approx 8``, ``\\frac{20}{3} \\approx 6.5``) the sides differ: a hedge, answering
  nothing. An integer B states no precision, and A a finite decimal is its own value: neither
  adds a second reading (``\\frac{23}{3} \\approx 8`` is 23/3, ``7.4 \\approx 7`` is 7.4). See `hedges`
  for the rest of the family (``7 \\to 8``, ``\\neg 7``).
"""

from __future__ import annotations

import re
from fractions import Fraction

APPROX_DIGITS = 4  # significant digits a rounded decimal needs to stand for an exact value
APPROX_READING_DIGITS = 2  # significant digits the B of "A \approx B" needs to be an answer of its own
FLOAT_REPR_DIGITS = 15  # significant digits from which a decimal may be a float repr
FLOAT_REPR_ULPS = Fraction(1, 2**52)  # relative slack of a float repr: one unit of double precision


def percent_readings(value: Fraction, percent: bool, other_is_percent: bool) -> set[Fraction]:
    """The values a number may stand for: 12.5% is 12.5 and 0.125 (unless both sides say %)."""
    return {value, value / 100} if percent and not other_is_percent else {value}


def rounding_slack(places: int | None, digits: int) -> tuple[Fraction, Fraction] | None:
    """(absolute, relative) distance at which a decimal literal still stands for an exact value, or None.

    places: digits after the point; digits: significant digits. A decimal within the absolute
    slack is that value correctly rounded; one within relative * |value| is its float repr.
    """
    if places is None or digits < APPROX_DIGITS:
        return None
    absolute = Fraction(1, 2 * 10**places) * (1 + Fraction(1, 10**9))
    return absolute, (FLOAT_REPR_ULPS if digits >= FLOAT_REPR_DIGITS else Fraction(0))


_SUBSCRIPT = re.compile(r"_\{[^{}]*\}|_\w|'")
_CALL = re.compile(r"(?<=[A-Za-z])\([^()]*\)")  # f(x), P(2): a function's value is a named value
_NOT_NAME = re.compile(r"[\d+\-*^=<>!.]")
_DECOR = re.compile(
    r"\\(?:angle|measuredangle|overline|overrightarrow|vec|triangle|bar|hat|widehat|mathrm|mathbf|mathit|text|operatorname)"
    r"(?![a-zA-Z])|\\frac|[\s{}|(),:/\[\]]"
)
_GREEK = re.compile(
    r"\\(?:alpha|beta|gamma|delta|epsilon|theta|lambda|mu|phi|varphi|psi|omega|rho|sigma|tau|Delta|Omega)(?![a-zA-Z])"
)


def is_name(s: str) -> bool:
    """s only names a quantity (``x``, ``(p,q)``, ``|AB|``, ``V_1:V_2``, ``\\frac{NO}{BO}``)."""
    s = _CALL.sub("", _SUBSCRIPT.sub("", s.strip()))
    if not s or _NOT_NAME.search(s):
        return False
    rest = _DECOR.sub("", _GREEK.sub("a", s))
    return rest.isascii() and rest.isalpha()


_COMMAND = re.compile(r"\\[a-zA-Z]+")


def has_variable(s: str) -> bool:
    """s has a letter that is not part of a TeX command (pi and sqrt are constants)."""
    return re.search(r"[A-Za-z]", _COMMAND.sub("", s)) is not None


def named_value(sides: list[str]) -> str | None:
    """The answer of ``a = b (= c ...)`` split at its top-level '=', or None if it is an equation."""
    if len(sides) < 2 or not all(sides):
        return None
    if len(sides) > 2:
        return sides[-1]  # a chain: the last member is what it arrives at
    lhs, rhs = sides
    if is_name(lhs):
        return rhs
    if not has_variable(lhs) and (is_name(rhs) or not has_variable(rhs)):
        return lhs if is_name(rhs) else rhs  # "2 = x" is 2; "1 + 0.5 = 1.5" is 1.5
    return None
