"""The whitelist of notation (corl.answers.vocabulary), asked directly: each kind of token it
admits, each kind it refuses, and that it names the first unknown token.

The symbolic layer's tests (test_answers.py) see the whitelist only through `is_hedge`; a
token admitted or refused by mistake shows here, at the rule that decides it.
"""

from __future__ import annotations

import pytest

from corl.answers.vocabulary import VALUE_COMMANDS, unknown_token

KNOWN = {
    "numbers, letters and ASCII operators": ["12.5", "x^2+3x-1", "f'(x)", "(1,2]", "|x-1|", "5!", "a_{n+1}", "x=3"],
    "fractions and roots": ["\\frac{1}{2}", "\\dfrac{3}{4}", "\\sqrt[3]{2}", "\\binom{5}{2}"],
    "constants and Greek letters": ["\\pi", "\\infty", "2\\alpha+\\Omega", "\\varepsilon", "\\emptyset", "\\hbar"],
    "operators": ["6\\times 7", "8\\div 2", "3\\cdot 4", "3\\pm\\sqrt{2}", "1\\mp x"],
    "named functions and big operators": [
        "\\sin x",
        "\\log_2 8",
        "\\ln 3",
        "\\sum_{k=1}^{n} k",
        "\\int_0^1 x",
        "\\lim",
        "\\gcd(4,6)",
    ],
    "delimiters and sizes": ["\\left( 1 \\right)", "\\lfloor x \\rfloor", "\\langle 1, 2 \\rangle", "\\bigl( x \\bigr)"],
    "fonts, text and accents": [
        "\\mathbb{R}",
        "\\text{cm}",
        "\\mathrm{m/s}",
        "\\vec{v}",
        "\\overline{AB}",
        "0.\\overline{3}",
        "\\hat{x}",
    ],
    "environments": ["\\begin{pmatrix} 1 & 2 \\end{pmatrix}"],
    "relations the hedge rules judge": [
        "x \\le 3",
        "x \\in [0, 1]",
        "a \\equiv 1 \\pmod{3}",
        "A \\cup B",
        "\\approx",
        "x \\ne 0",
    ],
    "modifiers in their place": ["30^\\circ", "30^{\\circ}", "A^\\top", "f^{\\prime}", "M_\\odot", "M_{\\odot}"],
    "escaped characters and TeX spaces": ["\\{1, 2\\}", "50\\%", "\\$5", "1\\,000", "a\\;b", "x\\!y", "5\\ "],
    "non-ASCII letters, digits, number forms, marks, spaces": ["\u00bd", "x\u00b2", "\u00e9", "\u00e0", "7\u00a0m", "x\u0302"],
    "non-ASCII value symbols": ["\u221e", "\u221a2", "\u2205", "\u2211", "90\u00b0", "f\u2032"],
}

UNKNOWN = {
    "commands outside the list": [
        ("7 \\star 8", "\\star"),
        ("7 \\foo 8", "\\foo"),
        ("7 \\enspace 8", "\\enspace"),
        ("\\color{red}{7}", "\\color"),
    ],
    "commands a layer misreads": [("7 \\bmod 8", "\\bmod"), ("7 \\ast 8", "\\ast"), ("7 \\mod 8", "\\mod")],
    "modifiers out of their place": [
        ("7 \\circ 8", "\\circ"),
        ("7 \\top 8", "\\top"),
        ("7 \\odot 8", "\\odot"),
        ("\\prime 7", "\\prime"),
    ],
    "escapes that are no value": [("7 \\# 8", "\\#"), ("7 \\_ 8", "\\_"), ("7 \\^ 8", "\\^")],
    "ASCII punctuation that no value holds": [("7 # 8", "#"), ("7 @ 8", "@"), ('"7"', '"'), ("7`", "`")],
    "non-ASCII symbols": [("7 \u2022 8", "\u2022"), ("7 \u2605 8", "\u2605"), ("7 \u2020 8", "\u2020"), ("7 \u00a7 8", "\u00a7")],
}


@pytest.mark.parametrize("kind, s", [pytest.param(k, s, id=f"{k}: {s}") for k, xs in KNOWN.items() for s in xs])
def test_the_notation_of_values_is_known(kind, s):
    assert unknown_token(s) is None


@pytest.mark.parametrize("kind, s, token", [pytest.param(k, s, t, id=f"{k}: {s}") for k, xs in UNKNOWN.items() for s, t in xs])
def test_anything_else_is_named(kind, s, token):
    assert unknown_token(s) == token


def test_the_first_unknown_token_is_named():
    assert unknown_token("\\frac{1}{2} \\star 3 \\foo 4") == "\\star"
    assert unknown_token("7 @ 8 \\star 9") == "\\star"  # commands first, then ASCII, then other characters
    assert unknown_token("7 \u2022 8 # 9") == "#"


def test_a_modifier_is_known_only_where_it_modifies():
    assert unknown_token("30^\\circ") is None and unknown_token("30 \\circ") == "\\circ"
    assert unknown_token("A^{\\top}") is None and unknown_token("\\top A") == "\\top"
    assert unknown_token("M_{\\odot}") is None and unknown_token("M \\odot") == "\\odot"


def test_the_list_leaves_out_what_a_layer_misreads():
    """Notation left out on purpose (vocabulary's docstring): a layer read ``7 \\bmod 8`` as 8."""
    assert {"bmod", "mod", "ast", "star", "circ", "top", "odot", "prime"}.isdisjoint(VALUE_COMMANDS)
