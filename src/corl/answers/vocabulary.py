"""The notation a value may be written in: a whitelist, so that no unknown token is read as a value.

math-verify reads a command it does not know by dropping it: ``7 \\star 8``, ``7 \\top 8``,
``7 \\enspace 8``, ``\\color{red}{7} 8`` and ``7 • 8`` were each graded equal to 8. A list of the
tokens that hedge can never be complete; this module lists instead what a value may hold, and
`unknown_token` names anything else. A scalar that holds one is no answer (`hedges.is_hedge`):
it equals only its own spelling (its vote key), never the value a layer would read by dropping it.

Known (derived from the golds of MATH, MATH-500, GSM8K, Minerva, OlympiadBench, AIME, AMC and
the classes of benchmarks/answers_accuracy.py):

* numbers, letters, ``+ - * / ^ _ = ( ) [ ] { } , . ' ! |`` and the relations the hedge rules
  judge themselves (``< > \\le \\equiv \\in ...``: see `hedges`);
* the commands in `VALUE_COMMANDS`: fractions and roots, constants and Greek letters, the
  operators ``\\cdot \\times \\div \\pm \\mp``, named functions, big operators, delimiters and their
  sizes, fonts and ``\\text``, accents, environments;
* a few commands only where they are a modifier, not a value: ``^\\circ`` (degrees), ``^\\top``
  (transpose), ``^\\prime``, ``_\\odot`` (solar units);
* the escaped characters ``\\{ \\} \\% \\$ \\| \\\\ \\&`` and the spaces ``\\, \\; \\: \\! \\ `` (which
  normalize strips or reads as separators);
* outside ASCII: letters, digits and number forms (``½ ²``), combining marks, spaces, and the
  value symbols ``∅ ∞ √ ∑ ∏ ∫ ∂ ∇ ° ′ ″`` (normalize maps ``· × − π ≤ ≥ ≈ ∪ ±`` to TeX before,
  drops currency signs, ``£ € ¥ ₹ \\pounds \\euro``, as units the way it drops ``\\$``, and joins
  digit groups parted by ``\\thinspace`` or a braced space, so none of them reaches this list).

Commands a layer misreads are left out on purpose even where they are notation: ``\\bmod`` and
``\\mod`` (``7 \\bmod 8`` was read as 8), ``\\ast`` and ``\\star`` between values, ``\\circ`` as a
composition. An answer written with them equals only its own spelling.
"""

from __future__ import annotations

import re
import unicodedata

_GREEK = (
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa varkappa lambda mu nu xi omicron pi "
    "varpi rho varrho sigma varsigma tau upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Upsilon "
    "Phi Psi Omega"
)
_FUNCTIONS = (
    "sin cos tan cot sec csc arcsin arccos arctan arccot arcsec arccsc sinh cosh tanh coth sech csch log ln lg exp "
    "max min gcd lcm det lim sum prod int iint iiint oint partial nabla operatorname"
)
_STRUCTURE = (
    "frac dfrac tfrac cfrac sqrt binom dbinom tbinom choose cdot times div pm mp infty hbar ell emptyset varnothing "
    "imath jmath angle degree textdegree left right big Big bigg Bigg bigl bigr Bigl Bigr biggl biggr lfloor rfloor "
    "lceil rceil langle rangle lvert rvert lVert rVert vert Vert begin end"
)
_FONTS = (
    "mathrm mathbf mathit mathsf mathtt mathbb mathcal mathfrak mathscr boldsymbol bm pmb text textbf textit textrm "
    "textsf texttt textnormal mbox displaystyle textstyle scriptstyle hat bar vec overline underline tilde widetilde "
    "widehat dot ddot overrightarrow overleftrightarrow"
)
# relations and connectives the hedge rules judge by their own rules (a condition x < 3, a residue)
_JUDGED = (
    "approx le ge leq geq lt gt leqslant geqslant ne neq equiv sim simeq cong approxeq doteq propto ll gg lessgtr "
    "gtrless nless ngtr nleq ngeq triangleq coloneqq eqqcolon cap cup setminus in notin ni subset subseteq supset "
    "supseteq prec succ preceq succeq asymp pmod"
)
VALUE_COMMANDS = frozenset(" ".join((_GREEK, _FUNCTIONS, _STRUCTURE, _FONTS, _JUDGED)).split())
_ESCAPES = frozenset("{}%$|\\&,;:! ")
# commands that are a modifier in one place only: degrees, transpose, prime, solar units
_MODIFIER = re.compile(r"\^\s*(?:\{\s*)?\\(?:circ|top|prime)(?![a-zA-Z])(?:\s*\})?|_\s*(?:\{\s*)?\\odot(?![a-zA-Z])(?:\s*\})?")
_COMMAND = re.compile(r"\\([A-Za-z]+|.?)", re.DOTALL)
_ASCII_UNKNOWN = re.compile(r"[#@`~\"]")
_VALUE_SYMBOLS = frozenset("∅∞√∑∏∫∂∇°′″")


def unknown_token(s: str) -> str | None:
    """The first token of s (a cleaned scalar) that is no known notation for a value, or None."""
    s = _MODIFIER.sub(" ", s)
    for m in _COMMAND.finditer(s):
        name = m.group(1)
        if name not in VALUE_COMMANDS and name not in _ESCAPES:
            return m.group(0)
    m = _ASCII_UNKNOWN.search(_COMMAND.sub(" ", s))
    if m:
        return m.group(0)
    for c in s:
        if ord(c) > 127 and c not in _VALUE_SYMBOLS and unicodedata.category(c)[0] not in "LNMZ":
            return c
    return None
