"""Equivalence of two answers, in four layers, each asked only when the one before cannot decide.

1. equal keys; 2. structure (tuples and intervals, sets and lists of solutions, unions,
matrices) compared part by part under `conventions`; 3. exact numbers as rationals, other
expressions by the fast reader at fixed points (`reader`); 4. math-verify in the pool
(`symbolic`) for the notation the reader does not know (``\\log_2``, primes, ...).

Fixes over math-verify alone, each measured in benchmarks/answers_accuracy.py: bases
(``40_8`` is 32, never ``40_9``), percent (``12.5\\%`` is 12.5 too), exact and repeating
decimals (no 6-place rounding; ``0.\\overline{3}`` is 1/3), bracket types and order, choice
letters (with their values: ``(B) 7``) and text answers compared as such, named values, named
solutions and chains, one box per solution, spaced thousands, units and currency signs,
``\\log_b``, degrees on a function's argument, bounded power towers, and the wall guard in
any thread.

A verdict is a function of its inputs: every layer is bounded in work (answer length, the
elements compared pairwise, the scalar checks of one call, the calls sympy may spend:
`symbolic.MAX_SYMBOLIC_CALLS`), never in seconds. Only the symbolic layer keeps a wall guard,
as a last resort against a C call that cannot be interrupted; a call that passes it has no
verdict: `verdict` answers None (unknown), `is_equivalent` False, and `unknown_checks` counts it
(the trainer logs the count as ``grading/unknown``). Hedges (``7 \\approx 8``, ``7 \\to 8``,
``\\neg 7``) equal nothing but their own spelling (`hedges`).
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections import Counter

from corl.answers.hedges import approximation_readings, false_chain, is_hedge
from corl.answers.keys import MAX_ANSWER_CHARS, WORDS, analyze, choice, element_key, scalar_key, struct_key
from corl.answers.normalize import BOX, balanced, blank, clean, split_top
from corl.answers.numbers import Number, number, numbers_equal
from corl.answers.reader import MAX_SYMBOLIC_CHARS, TOWER, numeric_verdict
from corl.answers.structure import Struct, element_structure
from corl.answers.symbolic import DEFAULT_TIMEOUT_S, POOL, CheckBudget, Timeout

logger = logging.getLogger(__name__)

_MAX_UNMATCHED = 16  # elements of a set left after key matching that are compared pairwise
MAX_SCALAR_CHECKS = 2048  # element comparisons one call may make (nested structures): past them, False
_CHOICE_WITH_VALUE = re.compile(r"^(?:\(\s*([A-Z])\s*\)|([A-Z])[.:])\s*(\S.*)$")  # "(B) 7", "B. 7"
_BASE_NUMERAL = re.compile(r"[0-9A-Z)]_\{?\(?\d")
_INFINITY = re.compile(r"^[-+]?\\infty$")
_RELATION = re.compile(r"<|>|\\[lg]eq?(?![a-zA-Z])|\\[lg]t(?![a-zA-Z])")
_PROSE = re.compile(r"[A-Za-z]{3,}\s+[A-Za-z]{3,}")


def _scalar_equiv(p: str, g: str, budget: CheckBudget) -> bool:
    ps, gs = approximation_readings(p), approximation_readings(g)
    if ps is None or gs is None:  # "7 \\approx 8": a hedge (equal keys were asked before)
        return False
    if len(ps) > 1 or len(gs) > 1 or ps != [p] or gs != [g]:
        return any(_equiv_clean(a, b, budget) for a in ps for b in gs)
    return _one_scalar_equiv(p, g, budget)


def _one_scalar_equiv(p: str, g: str, budget: CheckBudget) -> bool:
    pc, gc = p.replace(" ", ""), g.replace(" ", "")
    if scalar_key(p) == scalar_key(g):
        return True
    if not pc or not gc or not balanced(pc) or not balanced(gc):  # an empty or broken element
        return False
    if is_hedge(p) or is_hedge(g):  # two values joined by a relation, a negation: no answer (see hedges)
        return False
    pl, gl = _lettered(p), _lettered(g)
    if pl or gl:  # why: a choice letter is not a symbol to be simplified
        return _choices_equal(pl, gl, p, g, budget)
    pn, gn = number(pc), number(gc)
    if pn is not None and gn is not None:
        return numbers_equal(pn, gn)
    if (pn is None and _BASE_NUMERAL.search(pc)) or (gn is None and _BASE_NUMERAL.search(gc)):
        return False  # why: sympy drops the base of a numeral; "29_8" is no number at all
    if _INFINITY.match(pc) or _INFINITY.match(gc):
        return False  # their keys differ: -\infty and \infty, or \infty and a number
    if p.startswith("\\text{") or g.startswith("\\text{") or (WORDS.match(p) and WORDS.match(g)):
        return False  # text answers: their keys (case aside) had to be equal
    p, g = _drop_percent(p, pn), _drop_percent(g, gn)
    verdict = numeric_verdict(p, g, pn, gn)
    if verdict is not None:
        return verdict
    return _symbolic(p, g, budget)


def _lettered(s: str) -> tuple[str, str | None] | None:
    """(letter, its value or None) of a lettered choice: ``B``, ``(B)``, ``(B) 7``, ``B. 7``."""
    letter = choice(s.replace(" ", ""))
    if letter:
        return letter, None
    m = _CHOICE_WITH_VALUE.match(s)
    return (m.group(1) or m.group(2), m.group(3).strip()) if m else None


def _choices_equal(pl, gl, p: str, g: str, budget: CheckBudget) -> bool:
    """A lettered choice with its value (``(B) 7``) is one answer: it equals its letter, its value,
    and itself; two letters must agree, and two stated values too. A bare letter is no value."""
    if pl and gl:
        if pl[0] != gl[0]:
            return False
        return pl[1] is None or gl[1] is None or _equiv_clean(pl[1], gl[1], budget)
    lettered, other = (pl, g) if pl else (gl, p)
    return lettered[1] is not None and _equiv_clean(lettered[1], other, budget)


def _drop_percent(s: str, n: Number | None) -> str:
    return s[:-2].strip() if s.endswith("\\%") and n is None else s


def _symbolic(p: str, g: str, budget: CheckBudget) -> bool:
    """math-verify on two scalars, in the pool, refusing what can only be pathological."""
    for s in (p, g):
        if len(s) > MAX_SYMBOLIC_CHARS or TOWER.search(s):
            return False
    return POOL.check(p, g, budget)


def _distinct(items: tuple) -> list:
    """The items without repeats (by key): an unordered collection counts each element once."""
    seen, out = set(), []
    for x in items:
        k = element_key(x)
        if k not in seen:
            seen.add(k)
            out.append(x)
    return out


def _match_unordered(ps: tuple, gs: tuple, budget: CheckBudget) -> bool:
    """Each distinct element of ps equals a distinct element of gs, and none is left over."""
    ps, gs = _distinct(ps), _distinct(gs)
    if len(ps) != len(gs):
        return False
    keys = Counter(element_key(g) for g in gs)
    rest_p = []
    for p in ps:  # equal keys first: linear, and the usual case
        k = element_key(p)
        if keys[k]:
            keys[k] -= 1
        else:
            rest_p.append(p)
    rest_g = [g for g in gs if keys[element_key(g)]]  # the elements of gs no p took by key
    if len(rest_p) > _MAX_UNMATCHED:  # pairwise checks would be quadratic
        return False
    for p in rest_p:
        hit = next((i for i, g in enumerate(rest_g) if _equiv_clean(p, g, budget)), None)
        if hit is None:
            return False
        rest_g.pop(hit)
    return True


def _in_order(a: tuple, b: tuple, budget: CheckBudget) -> bool:
    return len(a) == len(b) and all(_equiv_clean(x, y, budget) for x, y in zip(a, b))


def _equiv_clean(p: str, g: str, budget: CheckBudget) -> bool:
    budget.scalars -= 1
    if budget.scalars < 0:  # a work budget, not a clock: the same verdict on any machine
        return False
    return _struct_equiv(element_structure(p), element_structure(g), p, g, budget)


def _named_equiv(a: Struct, b: Struct, budget: CheckBudget) -> bool:
    """Two lists of named values: the same names with equal values, in any order."""
    da, db = dict(zip(a.names, a.items)), dict(zip(b.names, b.items))
    return da.keys() == db.keys() and all(_equiv_clean(da[n], db[n], budget) for n in da)


def _one_solution(st: Struct, other: Struct) -> Struct:
    """A set of one element against what is no set: that element (``\\{(1, 2)\\}`` is the solution
    (1, 2), and so is ``x = 1, y = 2``, named values of one solution; a set against a set or a
    list of solutions is compared as sets)."""
    if st.kind == "set" and len(st.items) == 1 and (other.kind not in ("set", "list") or other.names):
        return element_structure(st.items[0])
    return st


def _struct_equiv(a: Struct, b: Struct, p: str, g: str, budget: CheckBudget) -> bool:
    if struct_key(a) == struct_key(b):
        return True
    a, b = _one_solution(a, b), _one_solution(b, a)
    kinds = {a.kind, b.kind}
    if kinds == {"scalar"}:
        return _scalar_equiv(a.items[0], b.items[0], budget)
    if kinds == {"seq"}:  # why: (3,4] is not (3,4); a tuple is ordered
        return a.ends == b.ends and _in_order(a.items, b.items, budget)
    if a.names and b.names:
        return _named_equiv(a, b, budget)
    if kinds <= {"set", "list"} or kinds in ({"union"}, {"union", "list"}):
        # solutions, set elements, union parts are unordered ("x < 3 or x > 5" is a union)
        return _match_unordered(a.items, b.items, budget)
    if kinds == {"seq", "list"}:  # "1, 2" for the point (1, 2): same elements in order
        seq = a if a.kind == "seq" else b
        return seq.ends == "()" and _in_order(a.items, b.items, budget)
    if kinds == {"matrix"}:
        return (
            len(a.items) == len(b.items)
            and all(len(r) == len(s) for r, s in zip(a.items, b.items))
            and all(_equiv_clean(x, y, budget) for r, s in zip(a.items, b.items) for x, y in zip(r, s))
        )
    if "scalar" in kinds and kinds & {"seq", "union"}:  # "x > 3" for (3, \infty)
        scalar = a if a.kind == "scalar" else b
        if _RELATION.search(scalar.items[0]) and not is_hedge(scalar.items[0]):
            return _symbolic(p, g, budget)
    return False


def _as_equations(pred: str, gold: str, budget: CheckBudget) -> bool:
    """``y = -x/2 + 3/4`` against ``2x + 4y - 3 = 0``: compared as equations once one side is one."""
    rp, rg = clean(pred, False), clean(gold, False)
    sides = [len(split_top(s, "=")) == 2 for s in (rp, rg)]
    if not all(sides) or (rp, rg) == (clean(pred), clean(gold)):
        return False
    return _one_scalar_equiv(rp, rg, budget)


@functools.lru_cache(maxsize=1 << 16)
def _verdict_cached(pred: str, gold: str, timeout: float) -> bool | None:
    """True / False, or None when the symbolic layer's last wall guard passed (cached too: a
    check that hung once would hang again, and an unknown is not a False)."""
    budget = CheckBudget(timeout, scalars=MAX_SCALAR_CHECKS)
    try:
        return _equivalent(pred, gold, budget)
    except Timeout:
        return None


def _equivalent(pred: str, gold: str, budget: CheckBudget) -> bool:
    p, ps, pk = analyze(pred)
    g, gs, gk = analyze(gold)
    if blank(pred) or blank(gold):  # a blank answer (\\text{}, \\quad, -, {}) is no answer
        return False
    if pk == gk:
        return True
    if any(false_chain(clean(s, False)) for s in (pred, gold)):  # "7 = 8" reads as neither
        return False
    if _struct_equiv(ps, gs, p, g, budget):
        return True
    return "=" in pred and "=" in gold and _as_equations(pred, gold, budget)


class _Unknowns:
    """How many checks had no verdict (the symbolic layer's wall guard passed), thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0

    def add(self) -> None:
        with self.lock:
            self.count += 1

    def take(self) -> int:
        """The count since the last take (the trainer's step metric ``grading/unknown``)."""
        with self.lock:
            count, self.count = self.count, 0
            return count


UNKNOWNS = _Unknowns()


def unknown_checks() -> int:
    """Checks answered unknown in this process since the last call (and the count restarts)."""
    return UNKNOWNS.take()


def answer_part(s: str) -> str:
    """The answer in s: its final boxed answer when s is a solution with prose around boxes."""
    if BOX.search(s) and _PROSE.search(BOX.sub("", s)):
        from corl.answers.extract import extract_answer

        return extract_answer(s) or s
    return s


def verdict(pred: str | None, gold: str | None, timeout: float = DEFAULT_TIMEOUT_S) -> bool | None:
    """Whether answer `pred` is mathematically the answer `gold`, as MATH/GSM8K graders judge:
    True / False, a function of the two answers alone, or None (unknown) in the rare case that
    the symbolic layer's last wall guard (`timeout` seconds, plus the pool's one-time start)
    passed; each unknown is counted (`unknown_checks`). Never raises."""
    if pred is None or gold is None:
        return False
    pred, gold = answer_part(str(pred).strip()), answer_part(str(gold).strip())
    if not pred or not gold:
        return False
    if len(pred) > MAX_ANSWER_CHARS or len(gold) > MAX_ANSWER_CHARS:
        return analyze_key(pred) == analyze_key(gold)
    try:
        got = _verdict_cached(pred, gold, timeout)
    except Exception:
        logger.debug("answer check failed for %r vs %r", pred[:80], gold[:80], exc_info=True)
        return False
    if got is None:
        UNKNOWNS.add()
        logger.warning(
            "corl.answers: no verdict within the %.0f s guard for %r vs %r: unknown (not correct)", timeout, pred[:80], gold[:80]
        )
    return got


def is_equivalent(pred: str | None, gold: str | None, timeout: float = DEFAULT_TIMEOUT_S) -> bool:
    """`verdict` is True. An unknown verdict is not True (it earns nothing) and is counted by
    `unknown_checks`, so a caller that must tell it from False asks `verdict`."""
    return verdict(pred, gold, timeout) is True


def analyze_key(s: str) -> str:
    """The key of an answer too long to analyse: its text, whitespace aside."""
    return " ".join(s.split())
