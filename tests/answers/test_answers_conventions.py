"""The deliberate rules of corl.answers.conventions, one test each (both sides of every rule)."""

from __future__ import annotations

from fractions import Fraction

from corl.answers import conventions, is_equivalent


def test_tuples_are_ordered_sets_and_solution_lists_are_not():
    assert not is_equivalent("(2, 5)", "(5, 2)")
    assert is_equivalent("\\{2, 5\\}", "\\{5, 2\\}")
    assert is_equivalent("x = 5 \\text{ or } x = 2", "2, 5")
    assert is_equivalent("2, 5", "(2, 5)") and not is_equivalent("5, 2", "(2, 5)")  # a list read as a tuple keeps its order


def test_repeated_elements_count_once():
    assert is_equivalent("\\{3, 3, 4\\}", "\\{3, 4\\}")
    assert not is_equivalent("\\{3, 3, 4\\}", "\\{3, 4, 5\\}")


def test_rounded_decimal_needs_enough_digits():
    assert conventions.APPROX_DIGITS == 4
    assert is_equivalent("3.1416", "\\pi") and not is_equivalent("3.14", "\\pi")
    assert is_equivalent("0.6667", "\\frac{2}{3}") and not is_equivalent("0.67", "\\frac{2}{3}")
    assert not is_equivalent("3.1415", "\\pi")  # truncated, not rounded


def test_float_repr_may_be_one_ulp_off():
    assert conventions.rounding_slack(16, 17) == (Fraction(1, 2 * 10**16) * (1 + Fraction(1, 10**9)), conventions.FLOAT_REPR_ULPS)
    assert conventions.rounding_slack(2, 3) is None
    assert is_equivalent("2.6457513110645907", "\\sqrt{7}")
    assert not is_equivalent("2.6457513110645", "\\sqrt{7}")  # 14 digits: must be correctly rounded


def test_percent_reads_both_ways():
    assert is_equivalent("40", "40\\%") and is_equivalent("0.4", "40\\%")
    assert not is_equivalent("4", "40\\%")


def test_missing_unit_is_not_penalised():
    assert is_equivalent("12", "12 \\text{ cm}^2") and is_equivalent("12 \\text{ meters}", "12")
    assert not is_equivalent("13", "12 \\text{ cm}")


def test_named_values_and_chains():
    assert conventions.named_value(["(p,q)", "(3,2)"]) == "(3,2)"
    assert conventions.named_value(["5", "y"]) == "5"
    assert conventions.named_value(["2+3", "5"]) == "5"
    assert conventions.named_value(["a", "b", "c"]) == "c"
    assert conventions.named_value(["x+y", "5"]) is None  # an equation, not a named value
    assert conventions.is_name("\\frac{AB}{CD}") and conventions.is_name("V_{1}:V_{2}") and conventions.is_name("|AB|")
    assert not conventions.is_name("2x") and not conventions.is_name("a+b")


def test_approximation_is_both_its_members():
    assert is_equivalent("\\frac{22}{7} \\approx 3.142857", "\\frac{22}{7}")
    assert is_equivalent("\\frac{22}{7} \\approx 3.142857", "3.142857")
    assert not is_equivalent("\\frac{22}{7} \\approx 3.142857", "\\pi")


def test_approximation_reading_needs_two_significant_digits():
    assert conventions.APPROX_READING_DIGITS == 2
    assert is_equivalent("\\frac{2}{7} \\approx 0.29", "0.29")  # two digits: a reading of its own
    assert not is_equivalent("\\frac{2}{7} \\approx 0.3", "0.3")  # one digit: consistent, answers 2/7 alone
    assert is_equivalent("\\frac{2}{7} \\approx 0.3", "\\frac{2}{7}")
    assert is_equivalent("\\frac{2}{7} \\approx 0.2", "\\frac{2}{7}")  # its digits cut: consistent
    assert not is_equivalent("\\frac{2}{7} \\approx 0.4", "\\frac{2}{7}")  # neither rounded nor cut: a hedge
