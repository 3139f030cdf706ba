"""Cleaning: the notation that never changes an answer's value, removed before keys and checks.

math-verify normalises LaTeX too, but inside its 40-130 ms parse and without the MATH
conventions below (bases, text answers, one box per solution); this runs in microseconds.
"""

from __future__ import annotations

import functools
import re

from corl.answers.conventions import named_value
from corl.answers.numbers import fold_exponents

BOX = re.compile(r"\\(?:boxed|fbox)(?![a-zA-Z])")


def closing_brace(s: str, start: int) -> int:
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


def strip_tex(s: str) -> str:
    """s without surrounding whitespace, except the space of a trailing ``\\ `` (a TeX space:
    stripped, it would leave a lone backslash that no rule reads as a space); a stray trailing
    backslash (``5\\``, nothing after it to escape) is dropped: it escapes nothing."""
    out = s.strip()
    escaped = (len(out) - len(out.rstrip("\\"))) % 2
    if not escaped:
        return out
    return out + " " if len(out) < len(s.lstrip()) else out[:-1].rstrip()


def balanced(s: str) -> bool:
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


def split_top(s: str, sep: str | re.Pattern) -> list[str]:
    """s split at `sep` (a string, or a pattern's non-empty matches) outside any bracket
    (``\\{``, ``\\}`` count as brackets)."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        end = _separator_end(s, i, sep) if depth == 0 else None
        if end is not None:
            parts.append(s[start:i])
            start = i = end
            continue
        c = s[i]
        if c == "\\" and i + 1 < len(s) and not s[i + 1].isalpha():
            c = s[i + 1] if s[i + 1] in "{}" else "\0"
            i += 1  # an escaped character: "\\{" still nests, "\\," never splits
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        i += 1
    parts.append(s[start:])
    return [p.strip() for p in parts]


def _separator_end(s: str, i: int, sep: str | re.Pattern) -> int | None:
    """Where a separator that starts at s[i] ends, or None when none starts there."""
    if isinstance(sep, str):
        return i + len(sep) if s.startswith(sep, i) else None
    m = sep.match(s, i)
    return m.end() if m and m.end() > i else None


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
    "±": "\\pm ",
    "∓": "\\mp ",
    "∈": "\\in ",
    "≠": "\\ne ",
    "÷": "\\div ",
    "≈": "\\approx ",
    "\u00a0": " ",
}
_ADJACENT_BOXES = re.compile(r"\}\s*(?=\\(?:boxed|fbox)\s*\{)")  # \boxed{1}\boxed{2} is 1, 2
_DELIMS = re.compile(r"\\\$|\$|(?<!\\)\\[()\[\]]")
_STYLE = re.compile(r"\\(?:displaystyle|textstyle|scriptstyle|limits)(?![a-zA-Z])")
_SIZING = re.compile(r"\\(?:left|right|bigg?|Bigg?)[lr]?(?![a-zA-Z])\.?")
_THOUSANDS = re.compile(r"(?<=\d)\s*(?:,\s*\\!|\{\s*,\s*\}|\\,|\\!|,\\ )\s*(?=\d{3}(?!\d))")
# digits grouped by threes with a space between groups (SI style): a TeX space, a braced space
# (``1{\,}000``, ``1{ }000``), ``\thinspace`` or a plain space; the first group of 1-3 digits
# starts the number (after ``^`` or ``_`` it is an exponent or an index, not a number)
_SPACE_SEP = r"(?:\s*(?:\\[,;:! ]|~|\\thinspace(?![a-zA-Z])|\\hspace\*?\{[^{}]*\}|\{\s*(?:\\[,;:! ]|~)?\s*\})\s*|\s+)"
_SPACED_GROUPS = re.compile(r"(?<![\w.^\\])\d{1,3}(?:" + _SPACE_SEP + r"\d{3})+(?![\d])")
_SPACE_SEP_RE = re.compile(_SPACE_SEP)
# a currency sign is a unit, as \$ is (dropped with the math delimiters)
_CURRENCY = re.compile(r"\\(?:euro|texteuro|pounds|textsterling|textdollar|yen|textyen)(?![a-zA-Z])(?:\s*\{\s*\})?|[€£¥₹]")
# a \quad parts two answers, except before a unit ("0.25 \quad \text{cm}")
_QUAD = re.compile(r"\\q?quad(?![a-zA-Z])(?!\s*\\(?:text|mbox|mathrm)\s*\{\s*(?!(?:and|or)\s*\})[A-Za-z])")
_SEP = "\ue000"  # a \quad between two answers, until the separators are read
_SPACING = re.compile(r"(?<!\\)\\[,;:! ]|\\q?quad(?![a-zA-Z])|~|\\hspace\{[^{}]*\}")
_FRACS = re.compile(r"\\[dtc]frac(?![a-zA-Z])")
_TOKEN = r"(\d|[a-zA-Z]|\\[a-zA-Z]+)"
_FRAC_SHORT = [
    (re.compile(r"\\frac\s*" + _TOKEN + r"\s*" + _TOKEN), r"\\frac{\1}{\2}"),
    (re.compile(r"\\frac\s*" + _TOKEN + r"\s*\{"), r"\\frac{\1}{"),
    (re.compile(r"\\frac\s*(\{[^{}]*\})\s*" + _TOKEN), r"\\frac\1{\2}"),
    (re.compile(r"\\sqrt\s*" + _TOKEN), r"\\sqrt{\1}"),
]
_PERCENT = re.compile(r"\s*(?:\\?%|\\text\{\s*(?:percent(?:age)?|pct)\s*\}|\s*(?<![A-Za-z])(?:percent(?:age)?|pct)(?![A-Za-z]))")
_DEGREES = re.compile(
    r"\s*(?:\^\s*\{?\s*\\circ\s*\}?|\\degree\b|\^\s*\{\s*\\text\{\s*o\s*\}\s*\}|(?<=\d)\^\s*\{?o\}?(?![A-Za-z]))"
)
_TEXT_CMD = r"\\(?:text|textbf|textit|textrm|textsf|texttt|textnormal|mbox|mathrm|mathbf|mathit|mathsf|operatorname)\s*"
# a unit in a text command: words, compound (``m/s``, ``kg m^2``, ``m s^{-1}``), with a power, after
# a value or after another unit and "/" or "\cdot" (``\mathrm{m}/\mathrm{s}^2``); never the
# constants ``\mathrm{e}`` and ``\mathrm{i}``
_POWER = r"(?:\^\s*\{?\s*-?\d\s*\}?)"
_UNIT_BODY = (
    r"(?!\s*[ei]\s*\})\s*[A-Za-z][A-Za-z\s.]*(?:(?:/|\\cdot|" + _POWER + r"|\s)+[A-Za-z][A-Za-z\s.]*)*" + _POWER + r"?\s*"
)
_UNIT = _TEXT_CMD + r"\{" + _UNIT_BODY + r"\}\s*" + _POWER + "?"
_UNIT_TEXT = re.compile(
    r"^(.*?[\w})\]])\s*(?:(?:/|\\cdot)\s*)?(?:" + _UNIT + r"|\\frac\s*\{\s*" + _UNIT + r"\s*\}\s*\{\s*" + _UNIT + r"\s*\})$"
)
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
# several solutions: "1 or 2", "6 and 8", "(11,7)or(7,11)", "-12;-11", "1 \quad 2", ", and"
_SEPARATORS = re.compile(
    r"\s*(?:(?:,|;|"
    + _SEP
    + r")\s*)*(?:(?<=\s)(?:or|and)(?=\s)|(?<=[\d)\]}])(?:or|and)(?=[\w(\[{\\-]))(?:\s*(?:,|"
    + _SEP
    + r"))*\s*"
    r"|\s*(?:,\s*)*(?:;|" + _SEP + r")(?:\s*(?:,|;|" + _SEP + r"))*\s*"
)
_VAR = r"(?:[a-zA-Z]|\\(?:alpha|beta|gamma|delta|theta|phi|varphi|lambda|mu|omega|rho|sigma|tau|psi))(?:_\{?\w+\}?)?"
# x \in [a, b]; (x, y) \in \{(1, 2)\}
_VAR_PREFIX = re.compile(
    r"^(?:" + _VAR + r"|\(\s*" + _VAR + r"(?:\s*,\s*" + _VAR + r")+\s*\))(?:\([a-z, ]*\))?\s*\\in(?![a-zA-Z])\s*(?=\S)"
)
# "A and C", "(A), (C)", "2 or 3" in one text command: a list of letters or numbers, not prose
_TEXT_ITEM = r"(?:\(?[A-Z]\)?|\([a-z]\)|[-+]?\d+(?:\.\d+)?)"
_TEXT_LIST = re.compile(r"^" + _TEXT_ITEM + r"(?:\s*(?:[,;]\s*(?:(?:and|or)\s+)?|\s+(?:and|or)\s+)" + _TEXT_ITEM + r")+$")
# a degree sign on a function's argument is the factor pi/180: cos 15 degrees is cos(pi/12)
_ARGUMENT_DEGREES = re.compile(
    r"(\\(?:sin|cos|tan|cot|sec|csc)(?![a-zA-Z])(?:\s*\^\s*(?:\{[^{}]*\}|\d))?\s*\(?\s*)(\d+(?:\.\d+)?)(?:"
    + _DEGREES.pattern
    + r"|\s*(?:"
    + _TEXT_CMD
    + r"\{\s*deg(?:ree)?s?\s*\}|deg(?:ree)?s?(?![A-Za-z])))"
)
_GROUPED_ARG = re.compile(r"(?<=\{)\d{1,3}(?:,\d{3})+(?=\})")
_GROUPED = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?:\\%)?$")
_RELATION = re.compile(r"[<>!]=|==|=[<>]|\\neq?(?![a-zA-Z])")
# plain-text math as models and Python print it: sqrt(2), 2**(1/4), 3*pi
_PLAIN_FUNC = re.compile(r"(?<![\\A-Za-z])(sqrt|sin|cos|tan|cot|sec|csc|arcsin|arccos|arctan|ln|log|exp)(?=\s*\()")
_PLAIN_PI = re.compile(r"(?<![\\A-Za-z])pi(?![A-Za-z])")


# a connective that lists alternatives, as "or" does
_LISTING = re.compile(r"\s*(?:\\(?:lor|vee|land|wedge)(?![a-zA-Z])|\\&)\s*")
_LINE_BREAK = re.compile(r"\s*(?:\\\\|(?<!\\)&|\\newline(?![a-zA-Z])|\\cr(?![a-zA-Z]))\s*")
_CASES = re.compile(r"^\\begin\{cases\}(.*)\\end\{cases\}$", re.S)


def connectives_as_separators(s: str) -> str:
    """``7 \\lor 8``, ``7 \\\\ 8``, ``\\begin{cases}7\\\\8\\end{cases}`` -> ``7 or 8``: a list of answers.

    Left alone: a matrix or array (its ``&`` and ``\\\\`` are cells and rows) and a ``cases``
    block with conditions (a piecewise function, compared by its spelling only)."""
    m = _CASES.match(s.strip())
    if m and "&" not in m.group(1).replace("\\&", ""):
        s = m.group(1)
    ends = _LISTING.match(s.strip()), _LISTING.search(s.strip())
    if ends[0] or (ends[1] and ends[1].end() == len(s.strip())):
        return s  # "7 \\vee", "\\vee 7": a connective with a side missing is a hedge, not a list
    s = _LISTING.sub(" or ", s)
    if "\\begin" not in s:
        s = _LINE_BREAK.sub(" or ", s)
    return s


def unbox(s: str) -> str:
    """Every \\boxed{x} / \\fbox{x} replaced by x: a box is emphasis, not math."""
    while True:
        m = BOX.search(s)
        j = m.end() if m else -1
        while m and j < len(s) and s[j] == " ":
            j += 1
        end = closing_brace(s, j) if m and j < len(s) and s[j] == "{" else -1
        if end < 0:
            return s
        s = s[: m.start()] + s[j + 1 : end] + s[end + 1 :]


def _plain_math(s: str) -> str:
    """``sqrt(2)`` -> ``\\sqrt{2}``, ``**`` -> ``^``, ``pi`` -> ``\\pi``: the LaTeX the rest reads."""
    s = s.replace("**", "^")
    s = _PLAIN_FUNC.sub(r"\\\1", s)
    s = _PLAIN_PI.sub(r"\\pi ", s)
    start = s.find("\\sqrt(")
    while start >= 0:  # \sqrt(...) -> \sqrt{...}: a root takes a brace group
        depth, i = 0, start + 5
        for i in range(start + 5, len(s)):
            depth += {"(": 1, ")": -1}.get(s[i], 0)
            if depth == 0:
                break
        if depth:
            return s
        s = s[: start + 5] + "{" + s[start + 6 : i] + "}" + s[i + 1 :]
        start = s.find("\\sqrt(", start + 1)
    return s


def _notation(s: str) -> str:
    """The first pass: characters, delimiters, sizes, spaces, fractions, percent."""
    for a, b in _UNICODE.items():
        if a in s:
            s = s.replace(a, b)
    s = _DELIMS.sub(" ", unbox(_ADJACENT_BOXES.sub("}, ", s)))
    s = _CURRENCY.sub(" ", _SIZING.sub("", _STYLE.sub("", s)))
    s = _SPACED_GROUPS.sub(lambda m: _SPACE_SEP_RE.sub("", m.group(0)), s)
    s = _THOUSANDS.sub(",", s)
    s = _GROUPED_ARG.sub(lambda m: m.group(0).replace(",", ""), s)  # \frac{12}{5,525}
    s = _SPACING.sub(" ", _QUAD.sub(_SEP, s))
    if any(c in s for c in "*(") or "pi" in s:
        s = _plain_math(s)
    s = _FRACS.sub(r"\\frac", s)
    if "\\frac" in s or "\\sqrt" in s:
        for pattern, repl in _FRAC_SHORT:
            s = pattern.sub(repl, s)
    return _PERCENT.sub(r"\\%", s)


def _strip_units(s: str) -> str:
    for _ in range(3):  # "5 \text{ cm}^2", "18.90 dollars", "\text{ sq } \text{ units}"
        m = _UNIT_TEXT.match(s) or _UNIT_WORDS.match(s)
        if not m:
            break
        s = m.group(1).strip()
    return s


@functools.lru_cache(maxsize=1 << 16)
def clean(s: str, strip_var: bool = True) -> str:
    """Drop notation that never changes an answer's value; keep spaces that TeX needs.

    strip_var: also reduce a named value to the value (``x = 5`` -> ``5``, see conventions).
    """
    s = fold_exponents(_notation(strip_tex(s)))
    s = _ARGUMENT_DEGREES.sub(lambda m: m.group(1) + "\\frac{" + m.group(2) + "\\pi}{180}", s)
    degrees = _DEGREES.search(s) is not None  # "45^\circ,135^\circ" is a list, not 45135
    s = _DEGREES.sub("", s)
    s = _strip_units(s.strip().strip(_SEP).strip().rstrip(".").strip())
    m = _WHOLE_TEXT.match(s)
    if m and re.search(r"[A-Za-z][A-Za-z.]", m.group(1)) and not _TEXT_LIST.match(m.group(1)):
        # why: a text answer ("\text{4:30 p.m.}", "\text{Evelyn}") is compared as text:
        # sympy would read its letters as symbols and call different words equal
        return "\\text{" + " ".join(m.group(1).split()) + "}"
    s = " ".join(_TEXT_WRAP.sub(lambda m: m.group(1), s).split())
    s = connectives_as_separators(s)  # "7 \\lor 8" is "7 or 8" (see hedges)
    s = _SEPARATORS.sub(", ", s).strip(", ").replace(_SEP, " ")
    s = _ungroup(s)
    if strip_var:
        s = value_part(s)
    if s.startswith("+"):
        s = s[1:].lstrip()
    if _GROUPED.match(s) and not degrees:
        s = s.replace(",", "")
    return s


def _ungroup(s: str) -> str:
    """s without braces around the whole of it: a TeX group prints nothing (``{1000}`` is 1000).
    A braced list (``{1,3}``, rendered 1,3) keeps them: `structure` reads it as a list."""
    while s.startswith("{") and closing_brace(s, 0) == len(s) - 1 and len(split_top(s[1:-1], ",")) == 1:
        s = s[1:-1].strip()
    return s


# What prints no value of its own: spacing, escaped punctuation, dots, placeholders, phantoms
_NO_VALUE = re.compile(r"\\[hv]?phantom\s*\{[^{}]*\}|\\(?:[lcv]?dots|ddots|cdot|square|Box|blacksquare)(?![a-zA-Z])|\\[^a-zA-Z]")
_EMPTY_SET = re.compile(r"^(?:\\\{\\\}|\u2205)$")  # \{\} and ∅ are a value: the empty set
_VALUE_CHAR = re.compile(r"[^\W_]")  # a letter or a digit, in any script


def blank(answer: str) -> bool:
    """True when an answer states no value: nothing, spaces, punctuation or empty groups only
    (``\\boxed{}``, ``{\\ }``, ``{{}}``, ``{-}``, ``{.}``, ``{\\quad}``, ``{\\ldots}``, ``{?}``).

    why: such a box is no commitment; as an answer it would vote and could earn a reward
    (two blanks agree on the key). A value has a letter or a digit (``x``, ``\\infty``, ``7``).
    """
    s = clean(answer)
    return not _EMPTY_SET.match(s.replace(" ", "")) and not _VALUE_CHAR.search(_NO_VALUE.sub("", s))


def value_part(s: str) -> str:
    """A named value's value (``x = 5``, ``(p,q) = (3,2)``, ``x \\in [0,1]``), else s."""
    m = _VAR_PREFIX.match(s)
    if m:
        return s[m.end() :]
    if "=" not in s or _RELATION.search(s) or len(split_top(s, ",")) > 1:
        return s  # a relation, or a list whose elements are read one by one
    value = named_value(split_top(s, "="))
    return s if value is None else value
