"""Multiple-choice answers: letters in every written form, option values, votes and grades (hand-computed)."""

from __future__ import annotations

import pytest

from corl.answers import choice_key, extract_choice, grade_choice, option_letter
from corl.answers.choice import option_texts

OPTIONS = ["3", "5", "12", "7"]  # A, B, C, D


@pytest.mark.parametrize(
    "answer, letter",
    [
        ("C", "C"), ("(C)", "C"), ("(c)", "C"), ("C.", "C"), ("C)", "C"), ("option C", "C"), ("Choice (C)", "C"),
        ("C. 12", "C"), ("(C) 12", "C"), ("\\text{(C)}", "C"), ("12", "C"), ("12.0", "C"), ("\\frac{24}{2}", "C"),
        ("c", None),  # a lowercase bare letter is a variable
        ("E", None),  # beyond the four options
        ("C. 5", None),  # the label says C, the text is option B's: no single pick
        ("9", None), (None, None), ("", None),
    ],
)  # fmt: skip
def test_option_letter(answer, letter):
    assert option_letter(answer, OPTIONS) == letter


def test_option_letter_without_options_knows_letters_only():
    assert option_letter("(E)") == "E"
    assert option_letter("E. 9") == "E"
    assert option_letter("12") is None


def test_option_texts_drop_only_their_own_labels():
    assert option_texts(["A. 3", "(B) 5", "C: 12", "D 7"]) == ["3", "5", "12", "D 7"]
    assert option_texts(["B. 3"]) == ["B. 3"]  # a label naming another position is part of the text


@pytest.mark.parametrize(
    "text, letter",
    [
        ("so the answer is \\boxed{C}", "C"),
        ("so the answer is \\boxed{12}", "C"),  # the option's value
        ("The answer is (C).", "C"),
        ("the answer is C because 12 > 7", "C"),
        ("Hence option C is right.", "C"),
        ("Answer: (D)", "D"),
        ("We compare the areas.\nC.", "C"),
        ("Options (A) and (C) are wrong. So \\boxed{B}", "B"),  # the box is the commitment
        ("First option A, then option D fits.", "D"),  # the last statement counts
        ("I think the answer is A rectangle", None),  # an article, not option A
        ("(A) is 3 and (C) is 12", None),  # options mentioned, none chosen
        ("the answer is \\boxed{9}", None),  # a value that is no option
        ("", None),
        (None, None),
    ],
)
def test_extract_choice(text, letter):
    assert extract_choice(text, OPTIONS) == letter


def test_choice_key_puts_a_letter_and_its_value_in_one_vote():
    keys = {choice_key(a, OPTIONS) for a in ("C", "(C)", "12", "C. 12", "option C")}
    assert keys == {"C"}
    assert choice_key("5", OPTIONS) == "B"
    # Values that are no option still vote by value: 9 and 9.0 together, apart from any letter.
    assert choice_key("9", OPTIONS) == choice_key("9.0", OPTIONS) == "9"


def test_grade_choice():
    assert grade_choice("\\boxed{12}", "C", OPTIONS)
    assert grade_choice("The answer is (C).", "(C)", OPTIONS)
    assert grade_choice("\\boxed{C}", "12", OPTIONS)  # gold given as the option's text
    assert not grade_choice("\\boxed{B}", "C", OPTIONS)
    assert not grade_choice("no idea", "C", OPTIONS)
    with pytest.raises(ValueError, match="names no option"):
        grade_choice("\\boxed{C}", "F", OPTIONS)
