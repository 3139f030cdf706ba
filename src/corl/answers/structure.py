"""The shape of a cleaned answer: scalar, tuple / interval, set, list of solutions, union, matrix."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from corl.answers.conventions import is_name
from corl.answers.normalize import clean, split_top, value_part

_MATRIX = re.compile(r"^\\begin\{([pbBvV]?matrix|array)\}(?:\{[^{}]*\})?(.*)\\end\{\1\}$", re.S)
_PM = re.compile(r"\\(?:pm|mp)(?![a-zA-Z])")
_NAMED = re.compile(r"^([^=<>]+?)\s*=\s*(?=\S)")


@dataclass(frozen=True)
class Struct:
    """kind: "scalar" | "seq" (tuple, interval, vector) | "set" | "list" | "union" | "matrix"."""

    kind: str
    items: tuple  # str scalars, or tuples of str for matrix rows
    ends: str = ""  # bracket pair of a seq, e.g. "(]"
    names: tuple = ()  # a list of named values ("x = 1, y = 2"): the name of each item


def enclosed(s: str) -> bool:
    """s is one bracket group: its first bracket closes at its last character."""
    depth = 0
    for i, c in enumerate(s):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i == len(s) - 1
    return False


def _expand_pm(items: list[str]) -> list[str]:
    # why: "3 \pm 2\sqrt{2}" is the two answers 3+2\sqrt{2} and 3-2\sqrt{2}
    out = []
    for item in items:
        if len(_PM.findall(item)) == 1:
            out += [_PM.sub(op, item) for op in ("+", "-")]
        else:
            out.append(item)
    return out


def _named_items(items: list[str]) -> tuple[list[str], tuple]:
    """Values of a list's elements, and their names when every element names a distinct one.

    "x = 1, x = 2" -> (1, 2) unnamed (the solutions of one unknown); "a = 4, b = 5" -> (4, 5)
    named a, b; "(x,y) = (5,8), (8,5)" -> ((5,8), (8,5)); "x = 1, y = 2 or x = 3, y = 4" ->
    ((1,2), (3,4)): a name that comes again starts the next solution (`_solutions`).
    """
    names, values = [], []
    for item in items:
        m = _NAMED.match(item)
        named = m is not None and is_name(m.group(1)) and "=" not in item[m.end() :]
        names.append(re.sub(r"[\s{}]", "", m.group(1)) if named else None)
        values.append(clean(item[m.end() :], False) if named else value_part(item))
    if not all(names) or len(set(names)) == len(names):
        return values, tuple(names) if all(names) else ()
    return _solutions(names, values), ()


def _solutions(names: list[str], values: list[str]) -> list[str]:
    """Named values whose names repeat, as one tuple per solution in the first solution's name
    order; a name that comes again closes a solution. The values as they are when the solutions
    do not all name the same unknowns (then they stay a list of values)."""
    groups: list[dict] = [{}]
    for name, value in zip(names, values):
        if name in groups[-1]:
            groups.append({})
        groups[-1][name] = value
    order = list(groups[0])
    if len(order) < 2 or any(g.keys() != groups[0].keys() for g in groups):
        return values
    return ["(" + ", ".join(g[n] for n in order) + ")" for g in groups]


_LESS = {"<": "<", "\\lt": "<", "\\le": "<=", "\\leq": "<=", "\\leqslant": "<="}
_LESS.update({">": ">", "\\gt": ">", "\\ge": ">=", "\\geq": ">=", "\\geqslant": ">="})
_VAR = r"(?:[a-zA-Z]|\\(?:alpha|beta|gamma|delta|theta|phi|varphi|lambda|mu|omega|rho|sigma|tau|psi))(?:_\{?\w+\}?)?"
_CMP = r"\s*(<|>|\\(?:lt|gt|leqslant|geqslant|leq|geq|le|ge)(?![a-zA-Z]))\s*"
_VAR_CALL = _VAR + r"(?:\([^()<>=]*\))?"  # x, f(x)
_ONE_SIDED = re.compile(r"^(" + _VAR_CALL + r")" + _CMP + r"([^<>=]+)$")
_ONE_SIDED_FLIPPED = re.compile(r"^([^<>=]+?)" + _CMP + r"(" + _VAR_CALL + r")$")  # 5 \ge x
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}
_TWO_SIDED = re.compile(r"^([^<>=]+?)" + _CMP + r"(" + _VAR_CALL + r")" + _CMP + r"([^<>=]+)$")


def _inequality_interval(s: str) -> Struct | None:
    """ "3 < x \\le 4" -> (3, 4]; "x \\ge 6" -> [6, \\infty): an inequality in one variable as an interval."""
    m = _TWO_SIDED.match(s)
    if m:
        lo, op1, _, op2, hi = m.groups()
        op1, op2 = _LESS[op1], _LESS[op2]
        if op1[0] != op2[0]:
            return None
        if op1[0] == ">":
            lo, hi, op1, op2 = hi, lo, op2.replace(">", "<"), op1.replace(">", "<")
        return Struct("seq", (clean(lo, False), clean(hi, False)), ("[" if "=" in op1 else "(") + ("]" if "=" in op2 else ")"))
    m = _ONE_SIDED.match(s)
    flipped = _ONE_SIDED_FLIPPED.match(s) if not m else None
    if m or flipped:
        bound, op = (m.group(3), _LESS[m.group(2)]) if m else (flipped.group(1), _FLIP[_LESS[flipped.group(2)]])
        bound = clean(bound, False)
        if op[0] == "<":
            return Struct("seq", ("-\\infty", bound), "(" + ("]" if "=" in op else ")"))
        return Struct("seq", (bound, "\\infty"), ("[" if "=" in op else "(") + ")")
    return None


def _matrix(body: str) -> Struct | None:
    rows = tuple(tuple(clean(e, False) for e in r.split("&")) for r in re.split(r"\\\\", body) if r.strip())
    if not rows or len({len(r) for r in rows}) != 1:
        return None
    if len(rows) > 1 and len(rows[0]) == 1:  # why: a column vector may be written as a tuple
        return Struct("seq", tuple(r[0] for r in rows), "()")
    if len(rows) == 1 and len(rows[0]) > 1:
        return Struct("seq", rows[0], "()")
    return Struct("matrix", rows)


def _collection(kind: str, items: list[str]) -> Struct:
    values, names = _named_items([clean(x, False) for x in items])
    if names:
        return Struct(kind, tuple(values), names=names)
    return Struct(kind, tuple(_expand_pm(values)))


@functools.lru_cache(maxsize=1 << 16)
def structure(s: str) -> Struct:
    """The shape of a cleaned answer."""
    m = _MATRIX.match(s)
    if m and _matrix(m.group(2)):
        return _matrix(m.group(2))
    if s.startswith("\\{") and s.endswith("\\}") and enclosed(s[1:]):
        return _collection("set", split_top(s[2:-2], ",") if s[2:-2].strip() else [])
    if s.startswith("{") and s.endswith("}") and enclosed(s) and len(split_top(s[1:-1], ",")) > 1:
        return _collection("list", split_top(s[1:-1], ","))  # why: "{1,3}" renders as the list 1,3
    parts = split_top(s, "\\cup")
    if len(parts) > 1:
        return Struct("union", tuple(parts))
    if len(s) > 1 and s[0] in "([" and s[-1] in ")]" and enclosed(s):
        inner = split_top(s[1:-1], ",")
        if len(inner) > 1:
            return Struct("seq", tuple(clean(x, False) for x in inner), s[0] + s[-1])
    interval = _inequality_interval(s)
    if interval is not None:
        return interval
    items = split_top(s, ",")
    if len(items) > 1 or len(_expand_pm(items)) > 1:
        return _collection("list", items)
    return Struct("scalar", (s,))


def element_structure(s: str) -> Struct:
    """The shape of one element of a structure (cleaned again: it may hold its own notation)."""
    return structure(clean(s, False))
