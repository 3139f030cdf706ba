"""Properties of corl.answers over generated inputs: reflexive, symmetric, total, on time.

The fuzz draws 10,000 inputs from the pieces completions and golds are made of (boxes,
fractions, sets, text, broken braces) and asks extraction, keys and equivalence about each:
no call may raise or run past its deadline.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corl.answers import POOL, answer_key, extract_answer, is_equivalent
from corl.answers.normalize import clean

SLACK_S = 0.5  # scheduling noise on a loaded 2-core machine, on top of a call's deadline

PIECES = (
    list("0123456789.,-+/^_{}()[]$%=<> xyab")
    + ["\\frac", "\\sqrt", "\\text{", "\\boxed{", "\\pm", "\\{", "\\}", "\\cup", "\\infty", "\\pi", "\\left(", "\\right)"]
    + ["\\quad", "\\approx", " or ", " and ", ";", "\\log_2", "!", "\\begin{pmatrix}", "\\\\", "&", "\\end{pmatrix}"]
    + ["The answer is ", "Answer: ", "#### ", "\n", "sqrt(", "**", "pct", "\\dfrac", "\\%", "^\\circ", "cm"]
)
junk = st.lists(st.sampled_from(PIECES), max_size=25).map("".join)

_num = st.one_of(
    st.integers(-50, 50).map(str),
    st.tuples(st.integers(1, 20), st.integers(1, 9)).map(lambda t: f"\\frac{{{t[0]}}}{{{t[1]}}}"),
    st.integers(1, 30).map(lambda n: f"\\sqrt{{{n}}}"),
    st.sampled_from(["0.5", "1.25", "x", "2x+1", "\\pi", "3\\sqrt{2}", "10\\%", "x^2-1"]),
)
answers = st.one_of(
    _num,
    st.lists(_num, min_size=2, max_size=3).map(lambda xs: "(" + ", ".join(xs) + ")"),
    st.lists(_num, min_size=1, max_size=3).map(lambda xs: "\\{" + ", ".join(xs) + "\\}"),
    st.lists(_num, min_size=2, max_size=3).map(", ".join),
)


@settings(max_examples=200, deadline=None)
@given(junk)
def test_equivalence_is_reflexive(a):
    assert is_equivalent(a, a) == bool(clean(a).strip(", "))


@settings(max_examples=200, deadline=None)
@given(answers, answers)
def test_equivalence_is_symmetric_on_math_answers(a, b):
    assert is_equivalent(a, b) == is_equivalent(b, a)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60), st.text(max_size=60))
def test_nothing_raises_on_arbitrary_text(a, b):
    assert isinstance(is_equivalent(a, b), bool)
    assert isinstance(answer_key(a), str)
    got = extract_answer(a)
    assert got is None or isinstance(got, str)


@pytest.fixture(scope="module")
def warm_pool():
    is_equivalent("\\log_{2} 8", "3")  # the pool's one-time start is not part of any deadline


@settings(max_examples=60, deadline=None)
@given(junk, junk)
def test_every_call_returns_within_its_deadline(warm_pool, a, b):
    start = time.monotonic()
    is_equivalent(a, b, timeout=0.2)
    assert time.monotonic() - start < 0.2 + SLACK_S


def test_a_hung_worker_is_killed_and_replaced(warm_pool):
    """A check that never ends costs its deadline, off the main thread too, and the pool goes on."""
    pool = POOL._ready_pool()
    result = {}

    def hang():
        start = time.monotonic()
        future = pool.schedule(time.sleep, (60,), timeout=0.3)
        try:
            future.result(timeout=5)
        except FutureTimeout:
            result["killed_after"] = time.monotonic() - start

    worker = threading.Thread(target=hang)
    worker.start()
    worker.join(timeout=10)
    assert result["killed_after"] < 0.3 + SLACK_S + 1.0  # pebble's watchdog polls, then kills
    assert is_equivalent("\\log_{2} 16", "4", timeout=30)  # a replacement worker answers


def _fuzz_input(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 30)))


def test_fuzz_10000_inputs_no_crash_no_hang(warm_pool):
    rng = random.Random(0)
    texts = [_fuzz_input(rng) for _ in range(10_000)]
    worst = 0.0
    started = time.monotonic()
    for i, text in enumerate(texts):
        t = time.monotonic()
        for mode in ("strict", "flexible"):
            got = extract_answer(text, mode=mode)
            assert got is None or isinstance(got, str)
        assert isinstance(answer_key(text), str)
        assert isinstance(is_equivalent(text, texts[i - 1], timeout=0.3), bool)
        worst = max(worst, time.monotonic() - t)
    assert worst < 0.3 + SLACK_S
    assert time.monotonic() - started < 50
