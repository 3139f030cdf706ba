"""The inputs no prompt shows: the vote's mutants (corl.tasks.code.inputs) and the extra tests' walk across the domain
(corl.tasks.code.domain). Each property is checked on hand-written shown calls."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import corl
from corl.tasks.code.domain import domain_inputs, infer, relations
from corl.tasks.code.inputs import mutants

_SRC = os.path.dirname(os.path.dirname(os.path.abspath(corl.__file__)))


def _args(call: str) -> list:
    return [ast.literal_eval(a) for a in ast.parse(call, mode="eval").body.args]


def test_a_mutant_equal_to_a_shown_call_is_dropped():
    """Flipping a bool of f(True) gives f(False), which the prompt shows with its answer; flipping twice, f(True)."""
    assert mutants(["f(True)", "f(False)"]) == []
    assert domain_inputs(["f(True)", "f(False)"], 10) == []


def test_the_domain_walk_never_repeats_a_shown_or_excluded_call():
    shown = ["f(1, 'ab')", "f(2, 'ba')"]
    near = mutants(shown)
    found = domain_inputs(shown, 30, exclude=near)
    assert len(found) == 30 == len(set(found)) and not set(found) & (set(shown) | set(near))


# The two modules alone (standard library only), without the corl package's heavy imports.
_SAME_IN_EVERY_PROCESS = """import sys, types
for name in ("corl", "corl.tasks", "corl.tasks.code"):
    sys.modules[name] = module = types.ModuleType(name)
    module.__path__ = [sys.argv[1] + "/" + name.replace(".", "/")]
from corl.tasks.code.inputs import mutants
from corl.tasks.code.domain import domain_inputs
shown = ['f([3, 1, 2], "abc")', 'f([5], "zz")']
print(mutants(shown), domain_inputs(shown, 12))
"""


def test_inputs_are_the_same_in_every_process():
    """Ranks vote on the inputs each computes: a seed from hash() (randomised per process for str) would give each
    rank its own inputs, and its own keys."""
    outputs = set()
    for seed in ("1", "2", "random"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", _SAME_IN_EVERY_PROCESS, _SRC], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr
        outputs.add(done.stdout)
    assert len(outputs) == 1 and "f(" in outputs.pop()


def test_the_walk_reaches_past_the_mutants_neighbourhood():
    """A mutant moves a shown int by at most 3; most of the walk's inputs lie further from every shown value, within
    the inferred range (never below the smallest shown sign, never past 4x the largest magnitude)."""
    shown = ["g(5)", "g(7)", "g(9)"]
    values = [_args(c)[0] for c in domain_inputs(shown, 24)]
    far = [v for v in values if min(abs(v - s) for s in (5, 7, 9)) > 3]
    assert len(values) == 24 and len(far) >= 12
    assert all(1 <= v <= 36 for v in values)  # all shown >= 1; 4 x 9 = 36


def test_what_every_shown_value_has_every_generated_one_keeps():
    shown = ["h([1, 4, 9], 'abc')", "h([2, 3, 7, 11], 'xyz')", "h([0, 5, 6], 'hello')"]
    for call in domain_inputs(shown, 30):
        xs, s = _args(call)
        assert xs == sorted(xs) and len(set(xs)) == len(xs) and xs and all(x >= 0 for x in xs), call
        assert s and set(s) <= set("abcdefghijklmnopqrstuvwxyz"), call  # lowercase shown: lowercase kept


def test_a_shared_string_format_is_kept():
    shown = ["d('2021-01-02')", "d('1999-12-31')", "d('2000-07-04')"]
    for call in domain_inputs(shown, 20):
        assert re.fullmatch(r"\d{4,9}-\d{2,5}-\d{2,5}", _args(call)[0]), call


def test_relations_between_arguments_are_inferred_and_kept():
    shown = ["k([4, 2, 9], 3, 1)", "k([1, 2, 3, 4, 5], 5, 4)", "k([7, 7], 2, 0)"]
    calls = [(_args(c), {}) for c in shown]
    assert ("len", 1, 0) in relations(calls) and ("index", 2, 0) in relations(calls)
    for call in domain_inputs(shown, 30):
        xs, n, i = _args(call)
        assert n == len(xs) and 0 <= i < len(xs), call
    assert relations([([1, 5], {}), ([2, 9], {})]) == [("le", 0, 1)]  # l <= r in every shown call


def test_shapes_by_hand():
    ints = infer([6, 10, 18])
    assert (ints.kind, ints.lo, ints.hi) == (int, 1, 72)
    signed = infer([-3, 4])
    assert (signed.lo, signed.hi) == (-20, 20)
    record = infer([("a", 1), ("b", 2)])
    assert record.fixed_len == 2 and [s.kind for s in record.items] == [str, int]
    sequence = infer([(1, 2, 3), (4, 5, 6)])
    assert sequence.fixed_len is None and sequence.items[0].kind is int  # three ints alike: a sequence, not a record
    assert infer([1, "a"]) is None  # no shared type: no contract, the value is left as shown


def test_a_shown_argument_written_as_arithmetic_is_a_literal_too():
    """MBPP 486 shows `binomial_probability(10, 5, 1.0/3)`: not a literal, so no input past the shown ones existed
    and the row had no extra assert (its lookup table passed pass@1+)."""
    from corl.tasks.code.inputs import _literal_args
    from corl.tasks.code.plus import N_DOMAIN, plus_calls

    assert _literal_args("f(1.0/3, 2*3, 7-9, -4)") == ("f", [1 / 3, 6, -2, -4], {})
    assert _literal_args("f(2**3)") is None  # no power: a value stays as small as its literals
    row = {
        "task_id": 486,
        "code": "def binomial_probability(n, k, p):\n    return 0.0",
        "test_list": ["assert binomial_probability(10, 5, 1.0/3) == 0.13656454808718185"],
    }
    shown = ["binomial_probability(10, 5, 1.0/3)"]
    near = mutants(shown)
    far = domain_inputs(shown, N_DOMAIN, exclude=near)
    assert near and len(far) == N_DOMAIN and plus_calls(row) == near + far
    assert all(0 <= _args(c)[2] <= 1 for c in far)  # every shown float in [0, 1]: a probability stays one
