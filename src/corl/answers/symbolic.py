"""math-verify on two scalars, in a pebble process pool, under a work budget and a last wall guard.

A verdict is a function of its inputs, not of how busy the machine is. The work a check may
do is counted, not timed: each is_equivalent call has `MAX_SYMBOLIC_CALLS` Python function
calls to spend in sympy and math-verify (counted by a trace hook in the worker, parse included).
A check that runs out of calls is answered False: the same answer on an idle machine and on a
loaded one. sympy's cache makes a check cheaper the second time a worker sees it (the costliest
symbolic checks of the tests and benchmarks, ``\\sum_{k=1}^{n} k^3`` against
``\\frac{n^2(n+1)^2}{4}``: ~0.9 M calls in a fresh worker, 0.05 M warm), so the budget is ~2x
the cold cost of those: only a check well beyond them could be answered differently by a warm
and a cold worker.

The budget binds long before the wall guard: a counted call costs ~0.8 us of CPU (the hook
included: counting costs ~2-3x in time, on the few checks that reach sympy), so a check that
spends all 2 M calls takes ~1.5 s of CPU, 5% of the guard's 30 s. On a two-CPU machine such a
check was cut after 1.3 s, and after 6.9 s with four CPU-bound processes beside it (23% of the
guard); the 5 M calls of the round before took 3.3 s and 17.4 s there (21 s in issue 52). A
fresh worker's first use of a sympy module (its import: uncounted) adds ~1.5 s once. Past a
load that stretches 1.5 s of CPU beyond 30 s, no budget counted in work can bind first; the
guard then answers unknown (counted, never False). benchmarks/answers_deadlines.py
--budget-only measures all of it.

why a pool still: math-verify's own timeouts use ``signal.alarm``, which raises off the main
thread, and neither a trace hook nor an alarm can stop a long C call (``10^{10^{10}}``; those the
input guards refuse first). Each check runs in a worker process (spawned, never forked: no copy
of a CUDA parent); `GUARD_S` (wall clock, per is_equivalent call) is the last guard only: a
check that passes it raises `Timeout`, which `equivalence.verdict` answers as unknown (None), never
False. pebble kills a worker that overruns and starts another. A task still queued when its
caller gave up returns at once when a worker takes it. Only the pool's one-time start (importing
sympy, ~1-3 s, `WORKER_STARTUP_S` at most) is not counted. If no worker can start, checks run
in-process under the same call budget (without a wall guard) and a warning says so.
``CORL_ANSWER_WORKERS`` (default 2) sets the workers per process.

What math-verify may read: TeX through its LaTeX reader; its plain-expression reader only for a
string with no TeX command that is one expression as a whole (`_one_expression`), since that
reader takes the last number out of any text (``7 \\star 8``, ``\\sum 7 8``, ``(7 8`` were 8).
"""

from __future__ import annotations

import ast
import atexit
import functools
import logging
import multiprocessing
import multiprocessing.util
import os
import re
import sys
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout

from corl.answers.conventions import rounding_slack
from corl.answers.numbers import number

logger = logging.getLogger(__name__)

GUARD_S = 30.0  # the last wall guard of one is_equivalent call (its symbolic checks together): past it, unknown
DEFAULT_TIMEOUT_S = GUARD_S  # the name callers pass as `timeout`
MAX_SYMBOLIC_CALLS = 2_000_000  # Python calls one is_equivalent call may spend in sympy (all its symbolic checks)
WORKER_STARTUP_S = 60.0  # importing sympy on a loaded machine can take a while


class Timeout(Exception):
    """The last wall guard of one is_equivalent call passed: its verdict is unknown."""


class OverBudget(BaseException):
    """A symbolic check spent its calls (a BaseException: math-verify and sympy catch Exception)."""


class CheckBudget:
    """The limits of one is_equivalent call: the work left (element comparisons `scalars`, set by
    `equivalence`, and symbolic `calls`) and the last wall guard (`left`)."""

    def __init__(self, seconds: float, calls: int = MAX_SYMBOLIC_CALLS, scalars: int = 0) -> None:
        self.at = time.monotonic() + seconds
        self.calls = calls
        self.scalars = scalars

    def left(self) -> float:
        """Seconds left; raises Timeout when none are."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise Timeout
        return left


def counted(fn, max_calls: int, *args) -> tuple[object, int]:
    """(fn(*args), Python calls it made); raises OverBudget once it made more than max_calls.

    The count is sys.settrace's "call" events (no line tracing: the hook returns None), so it
    measures work, the same on an idle and a loaded machine.

    why the re-arming: CPython unsets a trace function that raises, and an exception raised
    where it cannot propagate (a generator's finalizer, a ``__del__``) is printed and dropped;
    the rest of the check then ran uncounted, to its end or to the wall guard (issue 52: a check
    past the budget answered True in one of three fresh workers, after 18 s). So the hook, before
    it raises, sets a profile function that never raises and puts the hook back at the next
    event, and a check that made more than max_calls calls is over budget even if it returned."""
    calls = 0

    def hook(frame, event, arg):
        nonlocal calls
        calls += 1
        if calls > max_calls:
            sys.setprofile(rearm)
            raise OverBudget
        return None

    def rearm(frame, event, arg):
        if sys.gettrace() is None:
            sys.settrace(hook)

    previous, previous_profile = sys.gettrace(), sys.getprofile()
    sys.settrace(hook)
    try:
        result = fn(*args)
    finally:
        sys.setprofile(previous_profile)  # first: `rearm` would put the hook back as the trace is reset
        sys.settrace(previous)
    if calls > max_calls:  # an interruption was dropped on the way: the calls were spent all the same
        raise OverBudget
    return result, calls


def _quiet_over_budget(unraisable) -> None:
    """sys.unraisablehook of a worker: an OverBudget dropped in a finalizer is expected (`counted`
    interrupts again), anything else is reported as Python would."""
    if not isinstance(unraisable.exc_value, OverBudget):
        sys.__unraisablehook__(unraisable)


@functools.lru_cache(maxsize=4096)
def _parse(latex: str) -> tuple:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    # why: timeouts off: signal.alarm fails off the main thread; the pool's wall guard rules
    got = parse(f"${latex}$", [LatexExtractionConfig()], fallback_mode="no_fallback", parsing_timeout=None)
    if got or "\\" in latex:
        return tuple(got)
    # why: the plain-expression reader picks the last number out of any text ("7 \\star 8",
    # "\\sum 7 8" and "(7 8" were read as 8): it reads only what holds no TeX command and is
    # one expression as a whole
    if not _one_expression(latex):
        return ()
    return tuple(parse(f"${latex}$", [ExprExtractionConfig()], fallback_mode="no_fallback", parsing_timeout=None))


_PLAIN = re.compile(r"[0-9A-Za-z+\-*/^().,\s]*")  # no "@" (a product of matrices to Python), no "!"


def _one_expression(s: str) -> bool:
    """s, as a whole, is one plain expression: Python's grammar, parsed and never evaluated
    (``7 8``, ``(7 8`` and ``!7 8`` are not)."""
    if not _PLAIN.fullmatch(s):
        return False
    try:
        ast.parse(s.replace("^", "**").strip(), mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


def sympy_equiv(pred: str, gold: str) -> bool:
    """math-verify's verdict on two cleaned scalars (constants compared exactly first)."""
    from math_verify import verify

    try:
        ps, gs = _parse(pred), _parse(gold)
        if not ps or not gs:
            return False
        numeric = _constants_equal(ps[0], gs[0], pred, gold)
        if numeric is not None:
            return numeric
        return bool(verify(list(gs), list(ps), timeout_seconds=None, allow_set_relation_comp=True))
    except Exception:
        return False


def budgeted_equiv(pred: str, gold: str, max_calls: int) -> tuple[bool, int]:
    """(`sympy_equiv`'s verdict, calls spent) within max_calls; (False, max_calls) past them."""
    try:
        return counted(sympy_equiv, max_calls, pred, gold)
    except (OverBudget, RecursionError):
        return False, max_calls


def _verdict_before(expires: float, pred: str, gold: str, max_calls: int) -> tuple[bool, int] | None:
    """In a worker: `budgeted_equiv`, or None at once when the caller's guard (wall clock: the
    same on both sides of the pool) passed while the task waited in the queue."""
    if time.time() >= expires:
        return None
    return budgeted_equiv(pred, gold, max_calls)


def _constants_equal(p, g, pred: str, gold: str) -> bool | None:
    """Equality of two constant expressions at 30 digits, or None when not both constants.

    why: math-verify rounds to 6 decimal places; a literal decimal instead counts only
    as the correct rounding of the exact value (see `conventions.rounding_slack`).
    """
    import sympy

    lits = [number(pred.replace(" ", "")), number(gold.replace(" ", ""))]
    vals = []
    for expr, lit in zip((p, g), lits):
        if lit is not None:
            vals.append(sympy.Rational(lit.value.numerator, lit.value.denominator))
        elif isinstance(expr, sympy.Expr) and expr.is_number:
            vals.append(sympy.N(expr, 30))
        else:
            return None
    diff = abs(sympy.N(vals[0] - vals[1], 30))
    if not diff.is_number or diff.has(sympy.nan, sympy.zoo, sympy.oo):
        return None
    scale = max(1, abs(sympy.N(vals[1], 30)))
    if bool(diff <= sympy.Float("1e-20", 30) * scale):
        return True
    for lit in lits:
        slack = rounding_slack(lit.places, lit.digits) if lit is not None else None
        if slack and bool(diff <= sympy.Rational(slack[0].numerator, slack[0].denominator)):
            return True
    return False


def _init_worker() -> None:
    """A worker's start: quiet, deaf to Ctrl-C (the parent's to handle), parser warmed."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.unraisablehook = _quiet_over_budget
    for name in ("math_verify", "latex2sympy2_extended"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    budgeted_equiv("x+1", "1+x", MAX_SYMBOLIC_CALLS)  # imports and lazy imports: not in any check's count


class SymbolicPool:
    """One pebble ProcessPool per process, shared by its threads, started on first use."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.lock = threading.Lock()
        self.pool = None
        self.pid = None
        self.broken = False
        atexit.register(self.close)
        # A multiprocessing worker (a study's job, corl.studies.jobs) runs no atexit hooks: it ends
        # by joining its children, pebble's workers included, which would wait forever unless
        # stopped first. Finalizers with an exit priority run before that join.
        multiprocessing.util.Finalize(self, self.close, exitpriority=10)

    def _ready_pool(self):
        """The pool, started and warmed (its start is not counted against any wall guard)."""
        from pebble import ProcessPool

        with self.lock:
            if self.pool is not None and self.pid == os.getpid() and self.pool.active:
                return self.pool
            # why: spawn, not fork: a forked CUDA parent is unsafe; a forked child owns no workers
            pool = ProcessPool(max_workers=self.size, initializer=_init_worker, context=multiprocessing.get_context("spawn"))
            pool.schedule(budgeted_equiv, ("1", "1", MAX_SYMBOLIC_CALLS)).result(timeout=WORKER_STARTUP_S)
            self.pool, self.pid = pool, os.getpid()
            return pool

    def check(self, pred: str, gold: str, budget: CheckBudget) -> bool:
        """math-verify's verdict within the calls left to `budget` (False past them, and they are
        spent); raises Timeout when the last guard passes first."""
        if budget.calls <= 0:
            return False
        if not self.broken:
            try:
                pool = self._ready_pool()
            except Exception:
                self.broken = True
                logger.warning(
                    "corl.answers: no answer-check worker could start; checking in-process "
                    "(under the same call budget, but without a wall guard)"
                )
            else:
                left = budget.left()
                future = pool.schedule(_verdict_before, (time.time() + left, pred, gold, budget.calls), timeout=left)
                try:
                    got = future.result(timeout=budget.left())
                except (FutureTimeout, Timeout) as e:  # pebble kills a worker that overruns
                    # why no future.cancel(): pebble answers a cancelled task that a worker has
                    # taken by killing and respawning that worker (seconds: sympy's import), so a
                    # burst of timeouts queued that many respawns and every later check timed out
                    # for minutes; a task left alone costs nothing once stale (`_verdict_before`).
                    raise Timeout from e
                except Exception as e:  # a worker that died: the pool replaces it
                    raise Timeout from e
                if got is None:
                    raise Timeout
                verdict, calls = got
                budget.calls -= calls
                return verdict
        verdict, calls = budgeted_equiv(pred, gold, budget.calls)
        budget.calls -= calls
        return verdict

    def close(self) -> None:
        """Stop the workers (at exit; a forked child leaves its parent's alone)."""
        pool, self.pool = self.pool, None
        if pool is not None and self.pid == os.getpid():
            pool.stop()
            pool.join(timeout=5)


POOL = SymbolicPool(size=int(os.environ.get("CORL_ANSWER_WORKERS", "2")))
