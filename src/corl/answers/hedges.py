"""Hedges: two values joined by a relation or a connective are no answer, and equal nothing.

A policy that cannot solve a problem may write both candidates and let the grader pick:
``7 \\approx 8``, ``7 \\to 8``, ``7 \\mid 8``, ``7 < 8``, ``\\neg 7``, ``\\cancel{7} 8``.
math-verify reads most of these as one of their sides (``7 \\vee 8`` is 8, ``\\neg 7`` is 7),
so each would earn against one gold or the other, and under `vote_share` against both at
once. Here:

* a connective that lists alternatives (``\\lor``, ``\\vee``, ``\\land``, ``\\wedge``, ``\\&``,
  a bare ``&`` or a line break ``\\\\`` outside an environment, a ``cases`` block without
  conditions) is read as a separator, like "or" and ";": the answer is a list of solutions,
  which equals a list with the same elements and never one of them (`normalize.connectives_as_separators`);
* a scalar that holds a logical, arrow, divisibility, strike-out or negation token anywhere
  at its top level, or an order / similarity relation between two constants (``7 < 8``,
  ``7 \\equiv 8``, ``7 \\ne 8``), or a relation with an empty side (``\\sim 7``, ``7 <``), is a
  hedge (`is_hedge`): only an identical spelling (its vote key) equals it;
* ``A \\approx B`` is one answer at two precisions when B is A rounded at B's own places
  (``\\frac{20}{3} \\approx 6.67``, ``\\frac{1}{3} \\approx 0.33``): then both readings stand (B only
  when it is a decimal of two significant digits or more: ``\\frac{23}{3} \\approx 8`` and
  ``\\frac{1}{3} \\approx 0.3`` answer A alone, since an integer states no precision and one digit
  rounds too many values alike); A's digits cut (``\\frac{2}{3} \\approx 0.666``) answer A; sides
  further apart than B's precision (``7 \\approx 8``, ``\\frac{20}{3} \\approx 6.5``) are a hedge
  (`approximation_readings`);
* a scalar that holds a token outside the notation of values (``7 \\star 8``, ``7 \\enspace 8``,
  ``\\color{red}{7} 8``, ``7 • 8``, an unknown macro) is a hedge too: the whitelist in `vocabulary`
  closes the class that the token lists above only enumerate;
* a chain of constants ``a = b`` whose members differ (``7 = 8``) is a hedge (`false_chain`);
  ``1 + 0.5 = 1.5`` is a computation and answers 1.5.

Relations with a variable stay answers: ``x > 3`` is an interval, ``y = 2x + 1`` an equation,
``x \\equiv 3 \\pmod 7`` a residue, ``\\mathbb{R} \\setminus \\{0\\}`` a set.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from fractions import Fraction

from corl.answers.conventions import APPROX_READING_DIGITS, has_variable, is_name
from corl.answers.normalize import split_top
from corl.answers.numbers import number
from corl.answers.vocabulary import unknown_token

# tokens that never belong to a value: logic, arrows, divisibility, geometry relations, strike-outs
_ALWAYS = (
    r"neg|lnot|not|cancel|bcancel|xcancel|sout|st|to|rightarrow|longrightarrow|Rightarrow|Longrightarrow|implies|"
    r"impliedby|Leftarrow|Longleftarrow|leftarrow|longleftarrow|gets|iff|Leftrightarrow|Longleftrightarrow|"
    r"leftrightarrow|longleftrightarrow|mapsto|mid|nmid|divides|parallel|perp|oplus|otimes|vdash|models|therefore|"
    r"because|xor|veebar|barwedge|lor|vee|land|wedge|cr|newline|dots|ldots|cdots|vdots|ddots|substack|atop|overset|underset|stackrel"
)
# words of a hedge inside a formula ("7 (approx. 8)", "7 or maybe 8")
_WORDS = r"or|and|vs|versus|approx|approximately|about|around|roughly|nearly|circa|maybe|perhaps|possibly|probably|either|neither|nor|xor|not|else|otherwise|except|but|if|then|iff|implies"
_ALWAYS_TOKEN = re.compile(
    r"\\(?:" + _ALWAYS + r")(?![a-zA-Z])|\\begin\{cases\}|\\cdot\s*\\cdot|\?|(?<![\\A-Za-z])(?:" + _WORDS + r")(?![A-Za-z])"
)
# relations that join two values: a hedge between constants, a condition or an equation with a variable
_BETWEEN = (
    r"le|ge|leq|geq|lt|gt|leqslant|geqslant|ne|neq|equiv|sim|simeq|cong|approxeq|doteq|propto|ll|gg|lessgtr|"
    r"gtrless|nless|ngtr|nleq|ngeq|triangleq|coloneqq|eqqcolon|cap|setminus|in|notin|ni|subset|subseteq|supset|"
    r"supseteq|prec|succ|preceq|succeq|asymp|bowtie|nparallel|lhd|rhd|unlhd|unrhd|triangleleft|triangleright|"
    r"vartriangleleft|vartriangleright|ntriangleleft|ntriangleright|trianglelefteq|trianglerighteq"
)
_BETWEEN_TOKEN = re.compile(r"\\(?:" + _BETWEEN + r")(?![a-zA-Z])|<|>")
_BARE_BAR = re.compile(r"(?<!\\)\||\\vert(?![a-zA-Z])")
_NORM_BAR = re.compile(r"\\\||\\Vert(?![a-zA-Z])")  # "7 \\| 8"; \\|v\\| is a pair
_VALUE_SYMBOLS = "∅∞√∑∏∫∂∇′"  # math symbols that are (part of) a value
_APPROX = re.compile(r"\\approx(?![a-zA-Z])")


@functools.lru_cache(maxsize=1 << 14)
def is_hedge(s: str) -> bool:
    """s (a cleaned scalar) joins values by a relation or a connective, or negates / strikes one out."""
    if _ALWAYS_TOKEN.search(s) or unknown_token(s) is not None:  # a token no value is written with (vocabulary)
        return True
    if len(_BARE_BAR.findall(s)) % 2 or len(_NORM_BAR.findall(s)) % 2:  # "7 | 8"; |x| is a pair
        return True
    if any(
        ord(c) > 127 and unicodedata.category(c) == "Sm" and c not in _VALUE_SYMBOLS for c in s
    ):  # 7 ∨ 8, ¬7, 7 → 8 (normalize maps ≤ ≥ ≈ ∪ ±)
        return True
    sides = split_top(s, _BETWEEN_TOKEN)
    if len(sides) < 2:
        return False
    if not all(sides):
        return True  # "\sim 7", "7 <": a relation with a side missing
    return sum(not has_variable(x) for x in sides) >= 2


def _value(s: str):
    """The value of a constant (an mpmath number), or None when the fast reader cannot tell."""
    from corl.answers.reader import formula

    f = formula(s)
    if f is None or f[1] or f[2]:
        return None
    try:
        v = f[0]({})
    except (ArithmeticError, ValueError, TypeError):
        return None
    return v if abs(v.imag) == 0 else None


def _places_slack(s: str, integers_round: bool) -> Fraction:
    """Half a unit in the last place of a literal (0 for an exact form or, unless integers_round, an integer)."""
    n = number(s.replace(" ", ""))
    if n is None:
        return Fraction(0)
    if n.places is None:
        return Fraction(1, 2) if integers_round and n.value.denominator == 1 else Fraction(0)
    return Fraction(1, 2 * 10**n.places)


def _agree(exact: str, other: str, integers_round: bool, either_way: bool = False) -> bool | None:
    """other is exact (or exact rounded at other's own places; either_way: or the other way round);
    None when either has no known value."""
    a, b = _value(exact), _value(other)
    if a is None or b is None:
        return None
    slack = _places_slack(other, integers_round)
    if either_way:
        slack = max(slack, _places_slack(exact, integers_round))
    tol = float(slack) * (1 + 1e-9) + 1e-25 * max(1.0, float(abs(a.real)))
    return float(abs(a.real - b.real)) <= tol


def _terminating(s: str) -> bool:
    """s is a number literal whose exact value is a finite decimal (7, 7.4, \\frac{15}{2})."""
    n = number(s.replace(" ", ""))
    if n is None:
        return False
    d = n.value.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    return d == 1


def approximation_readings(s: str) -> list[str] | None:
    """The readings of ``A \\approx B``: [A, B] when B is a decimal that is A rounded at B's places
    and A is an exact form; [A] when B is an integer or only A's digits cut at B's places
    (``\\frac{2}{3} \\approx 0.666``), when A is itself a finite decimal (``7.4 \\approx 7`` is 7.4) or
    its value is unknown to the fast reader; None for a hedge, whose sides differ beyond B's
    precision (``7 \\approx 8``, ``\\frac{20}{3} \\approx 6.5``) or lack one. [s] without ``\\approx``."""
    parts = split_top(s, _APPROX)
    if len(parts) < 2:
        return [s]
    if parts[0] and len(parts) > 2 and is_name(parts[0]):
        parts = parts[1:]  # "x \approx 3.16"
    elif len(parts) == 2 and parts[0] and is_name(parts[0]):
        return [parts[1]] if parts[1] else None
    if not all(parts):
        return None
    exact, rest = parts[0], parts[1:]
    verdicts = [_approximation(exact, x) for x in rest]
    if "differs" in verdicts:
        return None
    if None in verdicts or _terminating(exact):
        return [exact]
    return [exact, *(x for x, v in zip(rest, verdicts) if v == "rounds" and _reading_of_its_own(x))]


def _has_places(x: str) -> bool:
    """x is a decimal with digits after the point: a written precision."""
    n = number(x.replace(" ", ""))
    return n is not None and bool(n.places)


def _reading_of_its_own(x: str) -> bool:
    """x, a rounding of the exact side, is also an answer: a decimal with places and at least
    `APPROX_READING_DIGITS` significant digits. why: an integer (``\\frac{23}{3} \\approx 8``) states
    no precision, and a one-digit decimal rounds too many values alike (``0.3``: 1/3, 2/7, 3/10);
    read as a second answer, either would let two different candidates both earn."""
    n = number(x.replace(" ", ""))
    return n is not None and bool(n.places) and n.digits >= APPROX_READING_DIGITS


def _approximation(exact: str, x: str) -> str | None:
    """How x stands to exact at x's written precision: "rounds" (within half a unit of x's last
    place: exact correctly rounded), "cuts" (a decimal that is exact's digits cut there, less than
    one unit below it in size), "differs" (another value), or None when either has no known value."""
    if _agree(exact, x, integers_round=True):
        return "rounds"
    a, b = _value(exact), _value(x)
    if a is None or b is None:
        return None
    unit = float(2 * _places_slack(x, False))
    cut = 0 <= (abs(a.real) - abs(b.real)) * (1 if a.real * b.real >= 0 else -1) < unit
    return "cuts" if _has_places(x) and cut else "differs"


def false_chain(s: str) -> bool:
    """``7 = 8``: a chain whose constant members (after a leading name) disagree."""
    sides = split_top(s, "=")
    if len(sides) < 2 or not all(sides) or any(x[-1:] in "<>!" for x in sides[:-1]):
        return False
    sides = [x[:-1].strip() if x.endswith(":") else x for x in sides]  # "7 := 8"
    if is_name(sides[0]):
        sides = sides[1:]
    consts = [x for x in sides if not has_variable(x)]
    return any(_disagree(a, b) for a, b in zip(consts, consts[1:]))


def _disagree(a: str, b: str) -> bool:
    """Two constants of a chain differ under every reading (None for an unknown value: not a difference)."""
    return all(_agree(x, y, integers_round=False, either_way=True) is False for x in _readings(a) for y in _readings(b))


def _readings(x: str) -> list[str]:
    """A percent is its number and its fraction (``10\\%`` is 10 and 0.1, as `conventions` grades it)."""
    if x.endswith("\\%"):
        number_part = x[:-2].strip()
        return [number_part, f"({number_part})/100"]
    return [x]
