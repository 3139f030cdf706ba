"""corl.answers: extraction, vote keys and equivalence, one case per variation.

The dev-set numbers come from benchmarks/answers_accuracy.py; these are the hand-picked
cases that pin each convention down (and the ones math-verify alone gets wrong).
"""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corl.answers import answer_key, extract_answer, grade, is_equivalent

# --------------------------------------------------------------------------- extraction

EXTRACTION = [
    ("so $\\boxed{\\frac{1}{2}}$.", "\\frac{1}{2}"),  # nested braces
    ("\\boxed{\\{1\\pm\\sqrt{5},-2\\}}", "\\{1\\pm\\sqrt{5},-2\\}"),  # escaped braces inside
    ("\\boxed{\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"),
    ("Final: \\fbox{x^{2}+1}", "x^{2}+1"),
    ("we get $\\boxed {12}$", "12"),  # space after \boxed
    ("we get $\\boxed 5$.", "5"),  # \boxed without braces
    ("\\boxed 5. Done.", "5"),
    ("first \\boxed{3}, then on reflection \\boxed{4}", "4"),  # last box wins
    ("\\[\n\\boxed{ \\text{(B)} }\n\\]", "\\text{(B)}"),
    ("Natalia sold 48 + 24 = 72 clips.\n#### 72", "72"),
    ("so in total\n#### 1,000", "1,000"),
    ("The final answer is $\\frac{3}{4}$. I hope it is correct.", "\\frac{3}{4}"),
    ("Final Answer: The final answer is $x^2$. I hope it is correct.", "x^2"),
    ("Thus the answer is 3.5.", "3.5"),
    ("The answer is therefore \\$18.90.", "\\$18.90"),
    ("The answer is $\\$18.90$.", "\\$18.90"),
    ("answer: **42**", "42"),
    ("The answer is \\(7\\) apples", "7"),
]

NO_ANSWER = [
    "",
    "   \n",
    "so the answer is $\\boxed{\\frac{1}{2}",  # unclosed box: cut mid-answer
    "maybe \\boxed{3}? No, it is \\boxed{4",  # the last box is unclosed
    "\\boxed{}",
    "We have 3 apples and 4 pears, so 7 fruits, and then",  # numbers, but no final answer
    "The answer is $\\frac{1",  # cut inside the math
    "The answer is",
    "The answer is not obvious. Let us compute 3 + 4 = 7",
    "####",
]


@pytest.mark.parametrize("text, expected", EXTRACTION)
def test_extract_answer_as_written(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize("text", NO_ANSWER)
def test_extract_answer_none_without_explicit_answer(text):
    assert extract_answer(text) is None


def test_extract_answer_none_input():
    assert extract_answer(None) is None


# -------------------------------------------------------------------------- equivalence

POSITIVES = {
    "fraction vs decimal": [
        ("0.5", "\\frac{1}{2}"),
        ("-0.375", "-\\frac{3}{8}"),
        ("\\frac{-3}{8}", "-\\frac38"),
        (".35625", "0.35625"),
        ("3.210", "3.21"),
        ("5.0", "5"),
    ],
    "dfrac, shorthand, slash": [
        ("\\dfrac{1}{2}", "\\frac12"),
        ("\\tfrac{9}{19}", "\\frac9{19}"),
        ("1/2", "\\frac{1}{2}"),
        ("\\frac{270}{7}", "\\frac{270}7"),
    ],
    "mixed numbers": [("1.8", "1\\frac{4}{5}"), ("\\frac{275}{2}", "137 \\frac{1}{2}")],
    "radicals": [
        ("2\\sqrt{5}", "2 \\sqrt 5"),
        ("\\sqrt{20}", "2\\sqrt{5}"),
        ("\\frac{\\sqrt{3}}{3}", "\\frac{1}{\\sqrt3}"),
        ("\\sqrt{21}/5", "\\frac{\\sqrt{21}}{5}"),
    ],
    "expressions": [
        ("3x + x^3 - 6", "x^3+3x-6"),
        ("-q + p", "p - q"),
        ("(b+2)(a+5)", "(a+5)(b+2)"),
        ("2(k+1)", "2k+2"),
        ("2i + 1", "1+2i"),
        ("\\frac{\\cos x}{\\sin x}", "\\cot x"),
    ],
    "equations": [("y=3+2x", "y = 2x + 3"), ("-10x + 14y - 22z - 8 = 0", "5x - 7y + 11z + 4 = 0")],
    "x = 5 vs 5": [("x = 5", "5"), ("5", "x=5"), ("2x+3", "y = 2x + 3"), ("[-2,7]", "x \\in [-2,7]")],
    "intervals": [
        ("\\left(-\\infty, 0\\right]", "(-\\infty,0]"),
        ("x \\le 0", "(-\\infty, 0]"),
        ("\\frac{3}{5} < x \\le \\frac{8}{3}", "\\left(\\frac{3}{5},\\frac{8}{3}\\right]"),
        ("(-\\infty,2)\\cup(3,\\infty)", "(-\\infty, 2) \\cup (3, \\infty)"),
    ],
    "tuples": [
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3,\\frac\\pi2)"),
        ("(1.5, -13)", "\\left( \\frac{3}{2}, -13 \\right)"),
        ("(-1/3, 2/3, 5/3)", "\\begin{pmatrix} -1/3 \\\\ 2/3 \\\\ 5/3 \\end{pmatrix}"),
    ],
    "sets and solution lists": [
        ("\\{2,1\\}", "\\{1,2\\}"),
        ("1,-2", "-2,1"),
        ("x = 1 \\text{ or } x = -2", "-2, 1"),
        ("3+2\\sqrt2, 3-2\\sqrt2", "3 \\pm 2 \\sqrt{2}"),
        ("-2, 1+\\sqrt5, 1-\\sqrt5", "\\{1\\pm\\sqrt{5},-2\\}"),
    ],
    "matrices": [("\\begin{bmatrix} -1 & 0 \\\\ 0 & -1 \\end{bmatrix}", "\\begin{pmatrix} -1 & 0 \\\\ 0 & -1 \\end{pmatrix}")],
    "units and text": [
        ("864", "864 \\mbox{ inches}^2"),
        ("5.4", "5.4 \\text{ cents}"),
        ("15 cm^2", "15\\mbox{ cm}^2"),
        ("78\\pi \\text{ units}", "78\\pi"),
        ("18.90", "\\$18.90"),
        ("\\$32,\\!348", "32348"),
    ],
    "degrees": [
        ("90", "90^\\circ"),
        ("90^{\\circ}", "90^\\circ"),
        ("90°", "90"),
        ("\\frac{270}{7}", "\\frac{270}7\\text{ degrees}"),
    ],
    "percent": [("12.5", "12.5\\%"), ("0.125", "12.5\\%"), ("10\\%", "10"), ("50 percent", "0.5")],
    "choice letters": [("B", "\\text{(B)}"), ("(B)", "\\text{(B)}"), ("\\textbf{(B)}", "B"), ("\\text{(B) } 12", "\\text{(B)}")],
    "words": [("Evelyn", "\\text{Evelyn}"), ("East", "\\text{east}"), ("\\textbf{even}", "\\text{even}")],
    "thousands": [("1,000", "1000"), ("10080", "10,\\!080"), ("11111111100", "11,\\! 111,\\! 111,\\! 100"), ("1{,}000", "1000")],
    "bases": [("4210_5", "4210_{5}"), ("(4210)_{5}", "4210_5"), ("32", "40_8")],  # 40_8 is the number 32
    "delimiters": [("$\\frac{1}{2}$", "0.5"), ("\\boxed{7}", "7"), ("\\(7\\)", "7")],
    "approximations": [("0.3333", "\\frac13"), ("37.699", "12\\pi")],  # correctly rounded, 4+ digits
}

NEGATIVES = {
    "numbers off by one": [("0.16", "0.15"), ("43", "42"), ("\\frac{3}{57}", "\\frac{3}{56}"), ("1,001", "1,000")],
    "decimals math-verify merges": [("0.0000673", ".0000672")],  # it rounds to 6 places
    "dropped sign": [("\\frac{24}{25}", "-\\frac{24}{25}"), ("5", "-5"), ("1-2i", "1+2i")],
    "reciprocal": [("\\frac{8}{3}", "\\frac{3}{8}")],
    "radicals": [("2\\sqrt{6}", "2\\sqrt{5}"), ("5\\sqrt{2}", "2\\sqrt{5}"), ("12", "12\\pi")],
    "expressions": [("x^3+3x+6", "x^3+3x-6"), ("p+q", "p-q"), ("2n+2", "2k+2"), ("(a+5)(b+3)", "(a+5)(b+2)")],
    "equations": [("5x - 7y + 11z + 4 = 1", "5x - 7y + 11z + 4 = 0"), ("y = 2x + 4", "y = 2x + 3")],
    "interval brackets": [("[3,4]", "(3,4]"), ("(3,4)", "(3,4]"), ("(-\\infty, 0)", "(-\\infty, 0]"), ("x < 0", "(-\\infty, 0]")],
    "tuples": [("(1,-16,-4,44)", "(1,-16,-4,43)"), ("(1,2)", "(2,1)"), ("(6,31)", "(6,31,-1)")],
    "sets and solution lists": [("\\{1,2\\}", "\\{1,2,3\\}"), ("3+2\\sqrt2", "3 \\pm 2\\sqrt{2}"), ("1, 2", "1, -2")],
    "matrices": [("\\begin{pmatrix} -1 & 0 \\\\ 0 & 1 \\end{pmatrix}", "\\begin{pmatrix} -1 & 0 \\\\ 0 & -1 \\end{pmatrix}")],
    "bases": [("40_8", "40_9"), ("2516", "2516_8"), ("2517_8", "2516_8"), ("40", "40_8")],
    "percent": [("125", "12.5\\%"), ("11\\%", "10\\%")],
    "degrees": [("89^\\circ", "90^\\circ")],
    "choice letters": [("C", "\\text{(B)}"), ("\\text{(C)}", "\\text{(B)}"), ("2", "\\text{(B)}")],
    "words": [("Navin", "\\text{Evelyn}"), ("\\text{odd}", "\\text{even}"), ("\\text{4:40 p.m.}", "\\text{4:30 p.m.}")],
    "approximations": [("0.33", "\\frac13"), ("3.14", "\\pi"), ("0.3", "\\frac13")],
}


def _cases(table):
    return [pytest.param(p, g, id=f"{kind}: {p} | {g}") for kind, pairs in table.items() for p, g in pairs]


@pytest.mark.parametrize("pred, gold", _cases(POSITIVES))
def test_equivalent_spellings(pred, gold):
    assert is_equivalent(pred, gold)


@pytest.mark.parametrize("pred, gold", _cases(NEGATIVES))
def test_different_answers(pred, gold):
    assert not is_equivalent(pred, gold)


@pytest.mark.parametrize("pred, gold", [(None, "1"), ("1", None), ("", "1"), ("1", "  "), (7, "7"), ("}{", "{}")])
def test_equivalence_odd_inputs_never_raise(pred, gold):
    assert is_equivalent(pred, gold) == (str(pred).strip() == "7")


def test_grade():
    assert grade("so $\\boxed{\\dfrac12}$", "0.5")
    assert not grade("so $\\boxed{\\dfrac12}$", "0.6")
    assert not grade("so it is 0.5 I think", "0.5")  # no explicit answer: no reward


# --------------------------------------------------------------------------------- keys

SAME_KEY = [
    ["\\frac{1}{2}", "1/2", "0.5", "\\dfrac12", "\\tfrac{1}{2}", "$\\frac 12$", ".5"],
    ["\\text{(B)}", "B", "(B)", "\\textbf{(B)}", "\\text{B}"],
    ["x=5", "5", "x = 5", "5.0", "\\boxed{5}"],
    ["1,000", "1000", "1{,}000", "1,\\!000"],
    ["10\\%", "10", "10%"],
    ["90^\\circ", "90", "90^{\\circ}", "90°"],
    ["\\{1,2\\}", "\\{2, 1\\}", "2,1", "x = 1 \\text{ or } x = 2"],
    ["(3, \\frac{\\pi}{2})", "\\left( 3, \\frac\\pi2 \\right)"],
    ["\\text{Evelyn}", "Evelyn", "evelyn"],
    ["40_8", "40_{8}", "32"],
]
DIFFERENT_KEYS = ["\\frac{1}{2}", "\\frac{1}{3}", "B", "C", "40_9", "(3,4]", "(3,4)", "[3,4]", "-5", "1001", "x^2", "2\\sqrt{3}"]


@pytest.mark.parametrize("spellings", SAME_KEY, ids=lambda s: s[0])
def test_answer_key_merges_spellings(spellings):
    keys = {answer_key(s) for s in spellings}
    assert len(keys) == 1, keys


def test_answer_key_separates_answers():
    keys = [answer_key(a) for a in DIFFERENT_KEYS]
    assert len(set(keys)) == len(keys), keys


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(list("0123456789.,-+/^_{}()[]\\$%x =") + ["\\frac", "\\sqrt", "\\text{", "\\boxed{", "\\pm"]), max_size=30
    ).map("".join)
)
def test_answer_key_is_total_and_deterministic(text):
    key = answer_key(text)
    assert isinstance(key, str) and key == answer_key(text)
    if key == answer_key("7"):
        assert is_equivalent(text, "7")  # equal keys imply equivalence


def test_equal_keys_imply_equivalence():
    for spellings in SAME_KEY:
        for s in spellings[1:]:
            assert is_equivalent(s, spellings[0])


# ------------------------------------------------------------------------- time limits


PATHOLOGICAL = [
    ("10^{10^{10^{10}}}", "1", False),  # would never finish in sympy
    ("(10^{10^{10}})!", "1", False),
    ("9" * 20000, "9" * 20000 + "1", False),  # huge answer
    ("(" * 3000 + "1" + ")" * 3000, "1", None),  # deep nesting: any verdict, as long as there is one
    ("\\frac{" * 500 + "1" + "}{2}" * 500, "0", False),
]


@pytest.mark.parametrize("pred, gold, want", PATHOLOGICAL)
def test_pathological_inputs_are_answered(pred, gold, want):
    # how fast: benchmarks/answers_deadlines.py (a test asserts the answer, not the speed)
    got = is_equivalent(pred, gold)
    assert got is want if want is not None else isinstance(got, bool)
    assert isinstance(answer_key(pred), str)


def test_symbolic_check_meets_its_guard_off_the_main_thread():
    """The sympy fallback (here \\sum, which the fast reader does not know) answers in a worker
    thread, where math-verify's signal.alarm would raise, and keeps its wall guard there."""
    from corl.answers import verdict

    is_equivalent("\\sum_{k=1}^{3} k", "6")  # start the worker outside the timed part
    results = {}

    def check():
        results["ok"] = verdict("\\sum_{k=1}^{4} k", "10")  # the default guard: a loaded machine is slow, not wrong
        results["late"] = verdict("\\sum_{k=1}^{5} k", "15", timeout=1e-4)  # cannot make it

    worker = threading.Thread(target=check)
    worker.start()
    worker.join(timeout=60)
    assert results["ok"] is True
    assert results["late"] is None  # true, but not within its guard: unknown (not False), and not raised


HEDGES = [
    r"The answer is \boxed{7 or 8}",  # two answers in one box
    r"\boxed{7}\boxed{8}",  # one box per candidate
    r"\boxed{7, 8}",
    r"\boxed{\{1,2,3,4,5,6,7,8,9\}}",  # a set that holds the answer
    r"\boxed{[0, 100]}",  # an interval that holds it
    r"\boxed{6 \le x \le 8}",
    r"\boxed{\pm 7}",
    r"\boxed{7=8}",
    r"\boxed{x}",  # a free symbol, equal to nothing
    r"\boxed{}",
    # two values joined by a relation or a connective, a negation, a strike-out (issue 41)
    r"\boxed{7 \approx 8}",
    r"\boxed{\neg 7}",
    r"\boxed{\lnot 7}",
    r"\boxed{\sim 7}",
    r"\boxed{7 \vee 8}",
    r"\boxed{7 \lor 8}",
    r"\boxed{7 \mid 8}",
    r"\boxed{7 \\ 8}",
    r"\boxed{\begin{cases}7\\8\end{cases}}",
    r"\boxed{7 \& 8}",
    r"\boxed{7 & 8}",
    r"\boxed{7 \land 8}",
    r"\boxed{7 \wedge 8}",
    r"\boxed{7 \to 8}",
    r"\boxed{7 \Rightarrow 8}",
    r"\boxed{7 \implies 8}",
    r"\boxed{7 \iff 8}",
    r"\boxed{7 \leftrightarrow 8}",
    r"\boxed{7 \mapsto 8}",
    r"\boxed{7 \sim 8}",
    r"\boxed{7 \simeq 8}",
    r"\boxed{7 \cong 8}",
    r"\boxed{7 \equiv 8}",
    r"\boxed{7 \equiv 8 \pmod{9}}",
    r"\boxed{7 \ne 8}",
    r"\boxed{7 \neq 8}",
    r"\boxed{7 \leq 8}",
    r"\boxed{7 \geq 8}",
    r"\boxed{7 < 8}",
    r"\boxed{7 > 8}",
    r"\boxed{7 \lessgtr 8}",
    r"\boxed{7 \ll 8}",
    r"\boxed{7 \propto 8}",
    r"\boxed{7 \approxeq 8}",
    r"\boxed{7 \doteq 8}",
    r"\boxed{7 | 8}",
    r"\boxed{7 \vert 8}",
    r"\boxed{7 \parallel 8}",
    r"\boxed{7 \perp 8}",
    r"\boxed{7 \oplus 8}",
    r"\boxed{7 \cap 8}",
    r"\boxed{7 \setminus 8}",
    r"\boxed{7 \cup 8}",
    r"\boxed{7 \in 8}",
    r"\boxed{7 := 8}",
    r"\boxed{7 \coloneqq 8}",
    r"\boxed{7 \vee}",
    r"\boxed{\vee 7}",
    r"\boxed{7 \vee 8 \vee 9}",
    r"\boxed{\{7\} \vee \{8\}}",
    r"\boxed{7 \text{ and } 8}",
    r"\boxed{7 \text{or} 8}",
    r"\boxed{\text{7 \lor 8}}",
    r"\boxed{7 \dots 8}",
    r"\boxed{7 \cdot\cdot 8}",
    r"\boxed{\substack{7\\8}}",
    r"\boxed{\cancel{7} 8}",
    r"\boxed{\not{7} 8}",
    r"\boxed{7 \text{ (approx. } 8)}",
    r"\boxed{8 \approx 7}",
    r"\boxed{7.4 \approx 8}",
    r"\boxed{\frac{23}{3} \approx 8}",  # 23/3 rounds to 8, but 8 is a second candidate, not a precision
    r"\boxed{7 \text{ and/or } 8}",
    r"\boxed{7 \text{ (8?)}}",
    r"\boxed{7 \overset{?}{=} 8}",
    r"\boxed{7 \Vert 8}",
    r"\boxed{7 \nparallel 8}",  # these two equalled 8 (math-verify read the right side)
    r"\boxed{7 \lhd 8}",
    r"\boxed{7 \vartriangleright 8}",  # equal to neither before too; kept as a member of the family
    "\\boxed{7 \u2228 8}",  # 7 ∨ 8, and the other Unicode relations and connectives
    "\\boxed{7 \u2192 8}",
    "\\boxed{\u00ac 7}",
    "\\boxed{7 \u2261 8}",
    # a token outside the notation of values (answers/vocabulary.py): these equalled 8 before the whitelist
    r"\boxed{7 \star 8}",
    r"\boxed{7 \circ 8}",
    r"\boxed{7 \top 8}",
    r"\boxed{7 \bot 8}",
    r"\boxed{7 \enspace 8}",
    r"\boxed{\color{red}{7} 8}",
    r"\boxed{\textcolor{red}{7} 8}",
    r"\boxed{7 \bullet 8}",
    r"\boxed{7 \diamond 8}",
    r"\boxed{7 \ast 8}",
    r"\boxed{7 \dagger 8}",
    r"\boxed{7 \# 8}",
    r"\boxed{7 \S 8}",
    r"\boxed{7 \P 8}",
    r"\boxed{7 \foo 8}",  # an unknown macro
    r"\boxed{7 \wr 8}",
    r"\boxed{7 \amalg 8}",
    r"\boxed{7 \sqcup 8}",
    r"\boxed{7 \uplus 8}",
    r"\boxed{7 \between 8}",
    r"\boxed{7 \smile 8}",
    r"\boxed{x \lhd 8}",
    r"\boxed{7 \odot 8}",
    r"\boxed{7 \checkmark 8}",
    r"\boxed{7 \colon 8}",
    r"\boxed{7 \bmod 8}",
    r"\boxed{7 \_ 8}",
    r"\boxed{7 \^ 8}",
    r"\boxed{7 # 8}",
    r"\boxed{7 @ 8}",
    "\\boxed{7 \u2022 8}",  # 7 • 8
    "\\boxed{7 \u2605 8}",  # 7 ★ 8
    "\\boxed{7 \u2020 8}",  # 7 † 8
    "\\boxed{7 \u00a7 8}",  # 7 § 8
    # known commands out of place, and broken text: the symbolic layer picked the last number out of them
    r"\boxed{\sum 7 8}",
    r"\boxed{\overline 7 8}",
    r"\boxed{7 \partial 8}",
    r"\boxed{\times 7 8}",
    r"\boxed{7 \text 8}",
    r"\boxed{7 \rfloor 8}",
    r"\boxed{(7 8}",
    r"\boxed{7 8+}",
    r"\boxed{!7 8}",
]


@pytest.mark.parametrize("completion", HEDGES)
def test_a_hedged_answer_earns_nothing_from_gold_or_a_peers_label(completion):
    """What a policy would try instead of solving: several answers at once, a range, a blank.
    None equals the gold answer 7, nor the peer's majority answer 7 by its vote key."""
    from corl.answers import answer_key, extract_answer, is_equivalent

    answer = extract_answer(completion)
    for gold in ("7", "8"):  # neither side of a hedge earns
        assert answer is None or not is_equivalent(answer, gold)
        assert answer is None or answer_key(answer) != answer_key(gold)


@pytest.mark.parametrize(
    "pred, gold",
    [
        ("\\frac{20}{3} \\approx 6.67", "\\frac{20}{3}"),  # one value at two precisions: both readings stand
        ("\\frac{20}{3} \\approx 6.67", "6.67"),
        ("x \\approx 3.16", "3.16"),
        ("7.4 \\approx 7", "7.4"),  # a finite decimal is its own value; its rounding is not a second answer
        ("x = 7 \\lor x = 8", "7, 8"),  # alternatives joined by a connective: a list of solutions
        ("7 \\vee 8", "\\{7, 8\\}"),
        ("\\begin{cases}7\\\\8\\end{cases}", "7, 8"),
        ("x > 3", "(3, \\infty)"),  # a relation with a variable is an answer
        ("x = 7", "7"),
        ("1 + 0.5 = 1.5", "1.5"),  # a computation answers its result
        ("x := 5", "5"),
        ("0.1 = 10\\%", "10\\%"),  # a percent that is the other side's value: a computation
    ],
)
def test_legitimate_relations_and_connectives_still_earn(pred, gold):
    assert is_equivalent(pred, gold)


@pytest.mark.parametrize(
    "pred, gold",
    [
        ("1\\,000", "1000"),  # spaces inside a number: stripped, not a token between two values
        ("1{,}000", "1000"),
        ("1\\ 000", "1000"),
        ("30^\\circ", "30"),  # \\circ as degrees, after a number only
        ("30^{\\circ}", "30"),
        ("5\\text{ cm}", "5"),
        ("7\\,\\text{m}", "7"),
        ("M_\\odot", "M_{\\odot}"),  # a solar unit (Minerva)
        ("\\frac{\\sqrt{3}}{2}", "\\frac{1}{2}\\sqrt 3"),
        ("\\left(1,2\\right)", "(1,2)"),
        ("\\lfloor 2.5\\rfloor", "2"),
        ("84\\div 2", "42"),
        ("6\\times 7", "42"),
        ("\\binom{5}{2}", "10"),
        ("\\alpha+1", "1+\\alpha"),
        ("\\log_2 8", "3"),
        ("\\tfrac{3}{4}", "0.75"),
        ("\\$5", "5"),
        ("50\\%", "0.5"),
        ("\u00bd", "\u00bd"),  # ½: a number form, its own spelling
    ],
)
def test_the_notation_of_values_is_not_read_as_a_hedge(pred, gold):
    """The whitelist of answers/vocabulary.py keeps what values are written with."""
    assert is_equivalent(pred, gold)


@pytest.mark.parametrize("text", ["7 \\star 8", "7 \\enspace 8", "\\sum 7 8", "\\times 7 8", "7 @ 8", "(7 8", "7 8+"])
def test_the_symbolic_layer_reads_no_number_out_of_text_it_cannot_parse(text):
    """math-verify's plain-expression reader took the last number of any text it could not read as
    TeX (each of these was 8); the symbolic layer alone, without the whitelist before it, now
    reads them as nothing. Plain expressions it still reads."""
    from corl.answers.symbolic import sympy_equiv

    assert not sympy_equiv(text, "8") and not sympy_equiv(text, "7")
    assert sympy_equiv("2^3", "8") and sympy_equiv("sqrt(4)", "2")


@pytest.mark.parametrize(
    "pred, gold",
    [
        ("7.4 \\approx 7", "7"),
        ("7 \\vee 8", "8"),
        ("\\frac{20}{3} \\approx 6.5", "6.5"),
        ("7 = 8", "8"),
        ("7 := 8", "8"),
        ("0 = 10\\%", "10\\%"),  # a percent in a chain: 10 and 0.1 both differ from 0 (hypothesis found it)
    ],
)
def test_a_hedge_that_looks_like_an_approximation_or_a_chain_does_not_earn(pred, gold):
    assert not is_equivalent(pred, gold)


def test_an_approximate_hedge_earns_less_than_the_honest_majority_under_vote_share():
    """Issue 41: against a teacher vote 7 x4 / 8 x3 / 3 x1, "7 \\approx 8" earned 7/8 (either side
    accepted) while the honest "7" earned 4/8."""
    from corl.answers import extract_answer
    from corl.labels.vote import majority_vote
    from corl.rewards.registry import RewardInputs
    from corl.rewards.vote_share import vote_share_rewards

    teacher = ["7"] * 4 + ["8"] * 3 + ["3"]
    label = majority_vote([answer_key(a) for a in teacher], teacher)
    completions = [r"\boxed{7 \approx 8}", r"\boxed{7}", r"\boxed{7 \vee 8}", r"\boxed{\neg 7}"]
    answers = [extract_answer(c) for c in completions]
    inputs = RewardInputs(completions, [answers], [[answer_key(a) for a in answers]], [label], [], is_equivalent, len(answers))
    hedge, honest, vee, neg = vote_share_rewards(inputs)[0].tolist()
    assert honest == 0.5  # 4 of the teacher's 8 samples say 7
    assert hedge < honest and vee < honest and neg < honest
    assert hedge == vee == neg == 0.0
