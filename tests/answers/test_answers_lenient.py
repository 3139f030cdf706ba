"""Issue 52: what the field's graders rightly accept and corl refused, one class per test.

Each class holds hand-written pairs that are one value (checked in both directions) and near
misses that must stay unequal (both directions too): a rule that accepts a class must not
accept its neighbours. The accuracy of every class against math-verify alone is measured in
benchmarks/answers_accuracy.py.
"""

from __future__ import annotations

import pytest

from corl.answers import answer_key, grade, is_equivalent


def _both_ways(pairs):
    return [pytest.param(p, g, id=f"{p} | {g}") for p, g in pairs] + [pytest.param(g, p, id=f"{g} | {p}") for p, g in pairs]


CLASSES = {
    # digits grouped by threes with a space between groups, the space braced or not
    "spaced thousands": (
        [
            ("1{\\,}000", "1000"),
            ("1{ }000", "1000"),
            ("{1 000}", "1000"),
            ("\\boxed{1\\,000\\,000}", "1000000"),
            ("1\\thinspace 000", "1000"),
            ("12\\;345.5", "12345.5"),
            ("1{, }234", "1234"),
            ("\\$1{\\,}500", "1500"),
        ],
        [("1{\\,}001", "1000"), ("{1 000}", "100"), ("1{\\,}000", "1"), ("{1 000}", "0"), ("7 \\thinspace 8", "8")],
    ),
    # a currency sign is a unit wherever it stands, inside an equation chain too
    "currency in a chain": (
        [
            ("£5 + £3 = £8", "8"),
            ("€12", "12"),
            ("\\euro 12", "12"),
            ("3 \\times ¥4 = ¥12", "12"),
            ("\\pounds 5 \\cdot 2 = \\pounds 10", "10"),
            ("\\textdollar 8", "8"),
            ("\\$5 + \\$3 = \\$8", "\\$8"),
        ],
        [("£5 + £3 = £8", "5"), ("€12", "13"), ("£5 + £3 = £9", "9"), ("£5 + £3 = £9", "8")],
    ),
    # letters or numbers joined by "and" / "or" inside one text command: a list, as outside it
    "A and B": (
        [
            ("\\text{A and C}", "A, C"),
            ("\\textbf{(A) and (C)}", "A, C"),
            ("\\text{2 or 3}", "2, 3"),
            ("\\text{B, D}", "\\{B, D\\}"),
            ("\\text{A, B, and D}", "A, B, D"),
        ],
        [("\\text{A and C}", "A"), ("\\text{A and C}", "A, B"), ("\\text{Alice and Bob}", "A, B"), ("\\text{A and C}", "AC")],
    ),
    # an exact value and its decimal at the decimal's own precision are one answer
    "exact value and its decimal": (
        [
            ("\\frac{1}{3} \\approx 0.33", "0.33"),
            ("\\frac{1}{3} \\approx 0.33", "\\frac{1}{3}"),
            ("\\sqrt{3} \\approx 1.7", "1.7"),
            ("\\frac{2}{3} \\approx 0.666", "\\frac{2}{3}"),  # digits cut, not rounded: still one value
            ("\\frac{1}{3} \\approx 0.3", "\\frac{1}{3}"),
            ("\\pi \\approx 3.14", "3.14"),
            ("\\log_2 3 \\approx 1.585", "1.585"),
        ],
        [
            ("\\frac{1}{3} \\approx 0.33", "0.3"),
            ("\\frac{1}{3} \\approx 0.3", "0.3"),  # one digit rounds 2/7 and 3/10 alike: no reading of its own
            ("\\frac{2}{3} \\approx 0.666", "0.666"),  # a cut decimal is no reading of its own
            ("\\frac{20}{3} \\approx 6.5", "6.5"),  # sides that differ: a hedge, equal to neither
            ("\\frac{20}{3} \\approx 6.5", "\\frac{20}{3}"),
            ("\\frac{23}{3} \\approx 8", "8"),  # an integer states no precision: no second answer
            ("\\sqrt{3} \\approx 1.8", "\\sqrt{3}"),
            ("\\sqrt{3} \\approx 1.8", "1.8"),
        ],
    ),
    # solutions written as named assignments: a name that comes again starts the next solution
    "named solutions": (
        [
            ("\\{(1,2),(3,4)\\}", "x=1, y=2 \\text{ or } x=3, y=4"),
            ("(1,2),(3,4)", "x=1,y=2;x=3,y=4"),
            ("\\{(1,2),(3,4)\\}", "x=3,y=4 \\text{ and } y=2, x=1"),
            ("\\{(1, 2)\\}", "x = 1, y = 2"),
            ("\\{(2,-1)\\}", "(x, y) = (2, -1)"),
            ("\\{(1,2),(3,4)\\}", "(x,y) \\in \\{(3,4),(1,2)\\}"),
            ("\\{5\\}", "5"),
        ],
        [
            ("\\{(1,2),(3,4)\\}", "x=1, y=2 \\text{ or } x=4, y=3"),
            ("\\{(1,2)\\}", "x=2, y=1"),
            ("\\{(1,2),(3,4)\\}", "x=1, y=2"),
            ("(1,2),(3,4)", "x=1, y=2, x=3"),
            ("\\{5\\}", "6"),
            ("\\{5\\}", "\\pm 5"),
        ],
    ),
    "stray trailing backslash": (
        [("5\\", "5"), ("\\frac{1}{2}\\", "0.5"), ("(1, 2)\\", "(1,2)")],
        [("5\\", "6"), ("\\frac{1}{2}\\", "2")],
    ),
    # a degree sign on a function's argument is pi/180; log_b x is ln x / ln b; a tower of
    # integer powers in an exponent is its value
    "trig, log and power identities": (
        [
            ("\\cos 15^\\circ", "\\frac{\\sqrt6+\\sqrt2}{4}"),
            ("\\cos 15°", "\\frac{\\sqrt{6}+\\sqrt{2}}{4}"),
            ("\\cos 58\\text{ degrees}", "\\cos 58^\\circ"),  # the degree as a word, on the argument too
            ("\\sin 30^\\circ", "\\frac12"),
            ("\\tan(45^{\\circ})", "1"),
            ("\\log_2 3 \\cdot \\log_3 4", "2"),
            ("\\log_4 2", "\\frac12"),
            ("x^{2^{2^{2^2}}}", "x^{65536}"),
            ("2^{2^{2^2}}", "65536"),
        ],
        [
            ("\\cos 15^\\circ", "\\frac{\\sqrt6-\\sqrt2}{4}"),
            ("\\cos 15", "\\frac{\\sqrt6+\\sqrt2}{4}"),  # 15 radians
            ("\\sin 30", "\\frac12"),
            ("\\log_2 3 \\cdot \\log_3 4", "3"),
            ("\\log_2 3 + \\log_3 4", "2"),
            ("x^{2^{2^{2^2}}}", "x^{65535}"),
            ("x^{2^{2^{2^2}}}", "x^{256}"),
            ("2^{2^{2^2}}", "65537"),
            ("10^{10^{10}}", "1"),  # a tower past the folding bound stays refused
        ],
    ),
    "repeating decimals": (
        [
            ("0.\\overline{3}", "\\frac13"),
            ("0.1\\overline{6}", "\\frac16"),
            ("0.\\overline{142857}", "\\frac{1}{7}"),
            ("2.\\overline{36}", "\\frac{26}{11}"),
            ("0.\\dot{3}", "\\frac{1}{3}"),
            ("0.\\bar{6}", "\\frac23"),
        ],
        [
            ("0.\\overline{3}", "0.3"),
            ("0.\\overline{3}", "0.333"),
            ("0.1\\overline{6}", "\\frac{1}{3}"),
            ("0.\\overline{3}", "\\frac{3}{10}"),
        ],
    ),
    # a unit is notation (conventions.UNITS), compound ones too; the constants e and i are no unit
    "units": (
        [
            ("7\\,\\mathrm{m/s}", "7"),
            ("9.8\\,\\mathrm{m}/\\mathrm{s}^2", "9.8"),
            ("3 \\text{ km/h}", "3"),
            ("5\\,\\mathrm{m\\,s^{-1}}", "5"),
            ("12 \\frac{\\text{m}}{\\text{s}}", "12"),
            ("4\\,\\mathrm{kg\\cdot m^2}", "4"),
        ],
        [("7\\,\\mathrm{m/s}", "8"), ("1 + 2\\mathrm{i}", "3"), ("2\\mathrm{e}", "2"), ("9.8\\,\\mathrm{m}/\\mathrm{s}^2", "9")],
    ),
    # a lettered choice with its value is one answer: its letter, its value, itself
    "lettered choice with its value": (
        [
            ("\\textbf{(B) } 7", "7"),
            ("\\textbf{(B) } 7", "B"),
            ("\\textbf{(B) } 7", "\\text{(B)}"),
            ("(B) 7", "\\textbf{(B)}~7"),
            ("B. 7", "7"),
            ("\\text{(C) } \\frac{1}{2}", "0.5"),
        ],
        [
            ("\\textbf{(B) } 7", "8"),
            ("\\textbf{(B) } 7", "C"),
            ("\\textbf{(B) } 7", "(C) 7"),  # another letter: another pick, though its value agrees
            ("\\textbf{(B) } 7", "(B) 8"),  # two values for one letter: a contradiction
            ("B", "7"),  # a bare letter states no value
        ],
    ),
}


@pytest.mark.parametrize(
    "kind, pred, gold",
    [pytest.param(k, *p.values, id=f"{k}: {p.id}") for k, (eq, _) in CLASSES.items() for p in _both_ways(eq)],
)
def test_one_value_in_two_spellings_is_equal(kind, pred, gold):
    assert is_equivalent(pred, gold)


@pytest.mark.parametrize(
    "kind, pred, gold",
    [pytest.param(k, *p.values, id=f"{k}: {p.id}") for k, (_, ne) in CLASSES.items() for p in _both_ways(ne)],
)
def test_near_misses_stay_unequal(kind, pred, gold):
    assert not is_equivalent(pred, gold)


@pytest.mark.parametrize(
    "spellings",
    [
        ["1{\\,}000", "1{ }000", "{1 000}", "1000", "1\\thinspace 000"],
        ["€12", "\\euro 12", "12"],
        ["\\text{A and C}", "A, C", "\\textbf{(A) and (C)}"],
        ["0.\\overline{3}", "0.\\dot{3}", "\\frac{1}{3}"],
        ["x^{2^{2^{2^2}}}", "x^{65536}", "x^{2^{16}}"],
        ["7\\,\\mathrm{m/s}", "7 \\text{ m/s}", "7"],
        ["5\\", "5"],
    ],
    ids=lambda s: s[0],
)
def test_spellings_of_one_value_vote_together(spellings):
    """Where the rule is a rewrite (not a check), the spellings share one vote key."""
    assert len({answer_key(s) for s in spellings}) == 1


@pytest.mark.parametrize(
    "completion, gold, want",
    [
        ("So the answer is $\\boxed{\\textbf{(B) } 7}$.", "7", True),
        ("So the answer is $\\boxed{\\textbf{(B) } 7}$.", "8", False),
        ("Total: $\\boxed{£5 + £3 = £8}$", "8", True),
        ("Hence $\\boxed{\\cos 15^\\circ = \\frac{\\sqrt6+\\sqrt2}{4}}$", "\\frac{\\sqrt{6}+\\sqrt{2}}{4}", True),
        ("The speed is $\\boxed{7\\,\\mathrm{m/s}}$.", "7", True),
        ("The answer is $\\boxed{0.\\overline{3}}$", "\\frac{1}{3}", True),
    ],
)
def test_whole_completions_of_the_classes(completion, gold, want):
    assert grade(completion, gold) is want
