"""The work budget of the symbolic layer (corl.answers.symbolic): a check that needs more calls
than `MAX_SYMBOLIC_CALLS` is cut by the budget, not by the wall guard, and answered False.

How soon the budget binds (seconds, idle and under load, against the guard) is measured in
benchmarks/answers_deadlines.py; a test asserts what the cut answers, not how fast.
"""

from __future__ import annotations

import gc
import sys

import pytest

from corl.answers import MAX_SYMBOLIC_CALLS, unknown_checks, verdict
from corl.answers.symbolic import _quiet_over_budget, budgeted_equiv, counted

# A true identity sympy proves in ~7.5 M calls in a fresh process (sums of k^200 from 1 and from 0):
# far past the budget. Its small sibling (k^3) costs ~0.3 M and is proved within it.
OVER_BUDGET = ("\\sum_{k=1}^{n} k^{200}", "\\sum_{j=0}^{n} j^{200}")
WITHIN_BUDGET = ("\\sum_{k=1}^{n} k^{3}", "\\sum_{j=0}^{n} j^{3}")


def test_counted_stops_at_the_budget_and_reports_the_calls():
    def one(n):
        return abs(n)  # a builtin inside: not a Python call

    def calls(n):
        for i in range(n):
            one(i)

    gc.collect()  # why: a collection during the count runs other objects' finalizers, counted too
    gc.disable()
    try:
        _, spent = counted(calls, 100, 50)
    finally:
        gc.enable()
    assert spent == 51  # calls itself, and one() 50 times
    try:
        counted(calls, 100, 500)
    except BaseException as e:  # OverBudget is a BaseException: sympy's `except Exception` cannot swallow it
        assert type(e).__name__ == "OverBudget" and not isinstance(e, Exception)
    else:
        raise AssertionError("no stop past the budget")


def test_an_interruption_dropped_in_a_finalizer_does_not_end_the_count():
    """Issue 52: the hook's OverBudget, raised in a generator's finalizer, was printed and dropped,
    and CPython unsets a trace function that raises: the check then ran uncounted to its end
    (a check past the budget answered True in a fresh worker). Now the hook comes back at the
    next event, and a check that spent its calls is over budget even if it returned."""
    progress = []

    def f(x):
        return x

    def gen():
        try:
            yield
        finally:  # runs when the generator is collected, where an exception cannot propagate
            for i in range(20):
                f(i)

    def work(n):
        for i in range(n):
            g = gen()
            next(g)
            del g
            progress.append(i)

    hooks = sys.gettrace(), sys.getprofile()
    with pytest.raises(BaseException) as stop:
        counted(work, 1000, 10_000)
    assert type(stop.value).__name__ == "OverBudget"
    assert len(progress) < 100  # stopped near the budget (~45 rounds), not after all 10,000
    assert (sys.gettrace(), sys.getprofile()) == hooks  # the caller's hooks back, nothing of ours left


def test_a_check_whose_last_calls_were_past_the_budget_is_over_it_though_it_returned():
    def f(x):
        return x

    def gen():
        try:
            yield
        finally:
            f(0)

    def ends_in_a_finalizer():
        g = gen()
        next(g)
        del g  # the check's last call (f) runs here, where its interruption is dropped

    _, total = counted(ends_in_a_finalizer, 10**6)
    with pytest.raises(BaseException) as stop:
        counted(ends_in_a_finalizer, total - 1)
    assert type(stop.value).__name__ == "OverBudget"


def test_a_check_past_the_work_budget_is_cut_by_it_and_answered_false(monkeypatch):
    """In-process: the whole budget is spent and the verdict is False (not the identity's True).
    With the worker's unraisablehook, as the pool runs it: pytest's own formats an OverBudget dropped
    in a finalizer with Python calls the still-armed count interrupts ("Failed to process unraisable
    exception", seen once in a full run)."""
    monkeypatch.setattr(sys, "unraisablehook", _quiet_over_budget)
    assert budgeted_equiv(*OVER_BUDGET, MAX_SYMBOLIC_CALLS) == (False, MAX_SYMBOLIC_CALLS)
    got, spent = budgeted_equiv(*WITHIN_BUDGET, MAX_SYMBOLIC_CALLS)
    assert got is True and spent < MAX_SYMBOLIC_CALLS  # the same family, decided within the budget


def test_through_the_pool_the_budget_binds_before_the_wall_guard():
    """The verdict a caller gets under the default guard: False, and no unknown counted (an unknown
    would mean the wall guard, not the budget, ended the check)."""
    unknown_checks()
    assert verdict(*OVER_BUDGET) is False
    assert verdict(*WITHIN_BUDGET) is True
    assert unknown_checks() == 0
