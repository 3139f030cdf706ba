"""A small LaTeX reader evaluated with mpmath at fixed points: the fast numeric check.

why not math-verify here: its ANTLR parser costs 40-130 ms per new expression; the answers
of math problems are mostly polynomials, radicals, fractions and trig values, which this
reader turns into a function in ~0.1 ms. Evaluating both sides at a few fixed points with
40 digits proves a difference, and agreement everywhere settles an identity
(Schwartz-Zippel). Whatever the reader does not know goes to math-verify.
"""

from __future__ import annotations

import functools
import operator
import re
import zlib
from fractions import Fraction

from corl.answers.conventions import percent_readings, rounding_slack
from corl.answers.normalize import split_top
from corl.answers.numbers import Number

MAX_SYMBOLIC_CHARS = 300  # longer scalars are compared by key only

_FUNCS = {
    "sin",
    "cos",
    "tan",
    "cot",
    "sec",
    "csc",
    "arcsin",
    "arccos",
    "arctan",
    "sinh",
    "cosh",
    "tanh",
    "ln",
    "log",
    "lg",
    "exp",
}
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
TOWER = re.compile(r"\^\s*\{?\s*[\d.]+\s*\}?\s*\^|\^\s*\{?\s*\(?\s*\d{5,}|\d{4,}\s*!|!\s*!\s*!")  # 10^{10^{10}}, 9999!
_LEX = re.compile(r"\s*(\d+\.?\d*|\.\d+|\\[a-zA-Z]+|\\[{}|]|\S)")
_ATOM_START = re.compile(r"^(\d|\.\d|[a-zA-Z(\[{]|\\(frac|sqrt|pi|lfloor|lceil|binom|" + "|".join(_FUNCS | _GREEK) + r")$)")


class Unreadable(Exception):
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
            raise Unreadable(f"expected {want!r}, got {tok!r}")
        self.i += 1
        return tok

    def read(self):
        node = self.sum()
        if self.peek():
            raise Unreadable(f"unexpected {self.peek()!r}")
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
            raise Unreadable(tok)
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
        """\\sin x, \\sin(x), \\sin^2 x, \\sin 2x (the implicit product that follows), \\log_2 x."""
        mp = _mp()
        fn = {"arcsin": mp.asin, "arccos": mp.acos, "arctan": mp.atan, "log": mp.ln, "lg": mp.log10}.get(name) or getattr(
            mp, name
        )
        if name == "log" and self.peek() == "_":  # why: log_b x is ln x / ln b (log_2 3 log_3 4 is 2)
            self.take()
            base = self.group() if self.peek() == "{" else self.atom()
            return _apply(lambda b, x: mp.ln(x) / mp.ln(b), base, self._argument())
        exp = None
        if self.peek() == "^":
            self.take()
            exp = self.group() if self.peek() == "{" else self.postfix()
        node = _apply(fn, self._argument())
        return node if exp is None else _apply(mp.power, node, exp)

    def _argument(self):
        """A function's argument: a group, else the implicit product that follows (\\sin 2x)."""
        if self.peek() in ("(", "{"):
            return self.group(self.peek())
        arg = self.power()
        while self.peek() and _ATOM_START.match(self.peek()) and self.peek()[1:] not in _FUNCS:
            arg = _apply(operator.mul, arg, self.power())
        return arg


def _small(x) -> int:
    """An integer argument of a factorial or binomial, refused when it is not a small one."""
    if abs(x.imag) > 0 or x.real != int(x.real) or abs(x.real) > 10**5:
        raise Unreadable("not a small integer")
    return int(x.real)


@functools.lru_cache(maxsize=1 << 14)
def formula(s: str):
    """(function of an env, its variable names, is-an-equation) for a scalar, or None."""
    if len(s) > MAX_SYMBOLIC_CHARS or TOWER.search(s) or "\\infty" in s:
        return None
    sides = split_top(s, "=")
    if len(sides) > 2 or not all(sides):
        return None
    try:
        readers = [_Reader(side) for side in sides]
        fns = [r.read() for r in readers]
    except (Unreadable, ValueError, ZeroDivisionError, RecursionError):
        return None
    names = frozenset().union(*(r.names for r in readers))
    if len(fns) == 2:
        return _apply(operator.sub, *fns), names, True
    return fns[0], names, False


def _point(names, k: int) -> dict:
    """Fixed, name-dependent values: x and y differ, and x is the same in both answers."""
    mp = _mp()
    return {n: mp.mpf(1) + mp.mpf(zlib.crc32(f"{n}/{k}".encode()) % 100003) / 65537 for n in names}


def numeric_verdict(p: str, g: str, lit_p: Number | None, lit_g: Number | None) -> bool | None:
    """Equal / different by evaluation, or None when the reader cannot tell.

    lit_p / lit_g: the exact value of a side that is a number literal (at most one is).
    """
    if lit_p is not None or lit_g is not None:  # a number against an expression
        lit, f = (lit_p, formula(g)) if lit_p is not None else (lit_g, formula(p))
        if f is None:
            return None
        if f[2]:  # a number is not an equation
            return False
        try:  # an expression in x equals a number only if it is that constant everywhere
            values = [f[0](_point(f[1], k)) for k in range(3 if f[1] else 1)]
        except ZeroDivisionError:  # the expression has no value
            return False
        except (ValueError, OverflowError, Unreadable, TypeError):
            return None
        return all(_mp().isfinite(v) and _literal_matches(lit, v, exact_only=bool(f[1])) for v in values)
    fp, fg = formula(p), formula(g)
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
    except (ValueError, OverflowError, Unreadable, TypeError):
        return None
    return True  # each name has the same values in both answers, so x vs y still differs


def _literal_matches(lit: Number, value, exact_only: bool = False) -> bool:
    """A number as written against an exact value: equal, or its correct rounding."""
    mp = _mp()
    if abs(value.imag) > mp.mpf(10) ** -30:
        return False
    for v in percent_readings(lit.value, lit.percent, False):
        if abs(mp.mpf(v.numerator) / v.denominator - value.real) <= mp.mpf(10) ** -25 * max(1, abs(value)):
            return True
    slack = None if exact_only else rounding_slack(lit.places, lit.digits)
    if slack is None:
        return False
    diff = abs(mp.mpf(lit.value.numerator) / lit.value.denominator - value.real)
    return diff <= _mpf(slack[0]) or diff <= _mpf(slack[1]) * abs(value.real)


def _mpf(q: Fraction):
    return _mp().mpf(q.numerator) / q.denominator
