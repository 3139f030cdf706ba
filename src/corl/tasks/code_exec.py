"""Running completions' programs in the sandbox: behaviour keys for votes, hidden tests for the gold reward."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from corl.sandbox import Limits, Result, SandboxPool, Status, close_default_pool, default_pool
from corl.tasks.code import public_inputs, solution_program, tests_source

_SENTINEL = "\x1eCORL-BEHAVIOUR "
LOAD_S = 5.0  # defining the solution (imports, module-level code)
PER_INPUT_S = 2.0  # one public input; a loop on one input costs only that input
TEST_LIMITS = Limits(wall_s=15.0, cpu_s=15)

_HARNESS = r"""
import hashlib as _h, json as _j, os as _o, re as _re, signal as _s, sys as _y
_SOL, _SETUP, _CALLS, _LOAD, _PER = {sol!r}, {setup!r}, {calls!r}, {load!r}, {per!r}
def _alarm(*_):
    raise TimeoutError("per-input time limit")
_s.signal(_s.SIGALRM, _alarm)
_out = _y.stdout
_y.stdout = open(_o.devnull, "w")
def _emit(i, tag, value):
    _out.write({sentinel!r} + _j.dumps([i, tag, value]) + "\n")
    _out.flush()
def _canon(v):
    r = _re.sub(r" at 0x[0-9a-fA-F]+", " at 0x", repr(v))
    return r if len(r) <= 4000 else r[:4000] + "...sha1:" + _h.sha1(r.encode()).hexdigest()
_ns = {{"__name__": "solution"}}
try:
    _s.setitimer(_s.ITIMER_REAL, _LOAD)
    exec(compile(_SOL, "solution.py", "exec"), _ns)
    if _SETUP:
        exec(compile(_SETUP, "setup.py", "exec"), _ns)
    _s.setitimer(_s.ITIMER_REAL, 0)
except BaseException as _e:
    _s.setitimer(_s.ITIMER_REAL, 0)
    _emit(-1, "err", type(_e).__name__)
    raise SystemExit(0)
for _i, _c in enumerate(_CALLS):
    try:
        _s.setitimer(_s.ITIMER_REAL, _PER)
        _r = _canon(eval(_c, _ns))
        _s.setitimer(_s.ITIMER_REAL, 0)
        _emit(_i, "ok", _r)
    except BaseException as _e:
        _s.setitimer(_s.ITIMER_REAL, 0)
        _emit(_i, "err", type(_e).__name__)
"""

_TESTS = r"""
_ns = {{"__name__": "solution"}}
exec(compile({sol!r}, "solution.py", "exec"), _ns)
exec(compile({tests!r}, "tests.py", "exec"), _ns)
"""


def behaviour_program(solution: str, calls: Sequence[str], setup: str = "") -> str:
    """A program that defines `solution` then prints one sentinel line per call: its repr or its error kind."""
    return _HARNESS.format(sol=solution, setup=setup, calls=list(calls), load=LOAD_S, per=PER_INPUT_S, sentinel=_SENTINEL)


def behaviour_limits(n_inputs: int) -> Limits:
    budget = LOAD_S + PER_INPUT_S * n_inputs + 2.0
    return Limits(wall_s=budget, cpu_s=int(budget) + 1)


def behaviour_key(stdout: str, n_inputs: int, all_errors_count: bool = False) -> str | None:
    """The vote key from a harness run's stdout; None when no input produced a value (unless all_errors_count).

    Inputs the run never reached (it was killed) read as TimeoutError. The last line per
    input wins, so a solution that prints fake sentinel lines cannot overwrite the harness.
    """
    seen: dict[int, list] = {}
    for line in stdout.split("\n"):  # not splitlines(): it also splits at the \x1e that starts the sentinel
        if line.startswith(_SENTINEL):
            try:
                i, tag, value = json.loads(line[len(_SENTINEL) :])
            except (ValueError, TypeError):
                continue
            seen[i] = [tag, value]
    if -1 in seen:
        outcome = [["err", seen[-1][1]]] * n_inputs
    else:
        outcome = [seen.get(i, ["err", "TimeoutError"]) for i in range(n_inputs)]
    if n_inputs == 0 or (not all_errors_count and all(tag == "err" for tag, _ in outcome)):
        return None
    return json.dumps(outcome, ensure_ascii=False)


def _pool(pool: SandboxPool | None) -> SandboxPool:
    return pool if pool is not None else default_pool()


def code_answers(
    texts: Sequence[str | None],
    problems: Sequence[Mapping] | Mapping,
    pool: SandboxPool | None = None,
    opened_fence: bool = False,
    all_errors_count: bool = False,
) -> tuple[list[str | None], list[str | None]]:
    """(answers, keys) per completion: answer = the program as run, key = its behaviour key; None = no answer.

    `problems` is one row per text, or a single row shared by all texts. A program that only
    errors has no answer by default: crashing alike is not a consensus worth rewarding.
    """
    rows = [problems] * len(texts) if isinstance(problems, Mapping) else list(problems)
    programs = [solution_program(t, p, opened_fence) for t, p in zip(texts, rows, strict=True)]
    calls = [public_inputs(p) for p in rows]
    jobs = [
        (i, behaviour_program(prog, c, p.get("test_setup_code") or ""), behaviour_limits(len(c)))
        for i, (prog, c, p) in enumerate(zip(programs, calls, rows))
        if prog is not None and c
    ]
    futures = [(i, _pool(pool).submit(src, None, lim)) for i, src, lim in jobs]
    keys: list[str | None] = [None] * len(texts)
    for i, fut in futures:
        keys[i] = behaviour_key(fut.result().stdout, len(calls[i]), all_errors_count)
    answers = [prog if key is not None else None for prog, key in zip(programs, keys)]
    return answers, keys


def code_answers_grouped(
    texts: Sequence[str | None], problems: Sequence[Mapping], k: int, pool: SandboxPool | None = None, opened_fence: bool = False
) -> tuple[list[tuple], list[tuple]]:
    """The task-registry form: [B*K] texts grouped by prompt, B problems -> ([B][K] answers, [B][K] keys)."""
    rows = [p for p in problems for _ in range(k)]
    answers, keys = code_answers(texts, rows, pool, opened_fence)
    return (
        [tuple(answers[b * k : (b + 1) * k]) for b in range(len(problems))],
        [tuple(keys[b * k : (b + 1) * k]) for b in range(len(problems))],
    )


def test_program(solution: str, problem: Mapping) -> str:
    """A program that defines `solution` and runs the hidden tests; it exits 0 exactly when they pass."""
    return _TESTS.format(sol=solution, tests=tests_source(problem))


def run_tests(
    programs: Sequence[str | None], problems: Sequence[Mapping], pool: SandboxPool | None = None, limits: Limits | None = None
) -> list[Result | None]:
    """Hidden-test results of already-built solution programs (None in, None out)."""
    futures = [
        _pool(pool).submit(test_program(prog, p), None, limits or TEST_LIMITS) if prog is not None else None
        for prog, p in zip(programs, problems, strict=True)
    ]
    return [f.result() if f is not None else None for f in futures]


def passes_tests_batch(
    texts: Sequence[str | None],
    problems: Sequence[Mapping] | Mapping,
    pool: SandboxPool | None = None,
    opened_fence: bool = False,
) -> list[bool]:
    """Gold reward per completion: its program passes the problem's hidden tests."""
    rows = [problems] * len(texts) if isinstance(problems, Mapping) else list(problems)
    programs = [solution_program(t, p, opened_fence) for t, p in zip(texts, rows, strict=True)]
    return [r is not None and r.status is Status.OK for r in run_tests(programs, rows, pool)]


def passes_tests(text: str | None, problem: Mapping, pool: SandboxPool | None = None, opened_fence: bool = False) -> bool:
    """Gold reward of one completion (or bare code)."""
    return passes_tests_batch([text], [problem], pool, opened_fence)[0]


def behaviours_equal(a: str | None, b: str | None) -> bool:
    """Two answers agree when their behaviour keys are equal (keys are already canonical)."""
    return a is not None and a == b


def close() -> None:
    """Shut the lazily created sandbox pool down (it is recreated on next use)."""
    close_default_pool()
