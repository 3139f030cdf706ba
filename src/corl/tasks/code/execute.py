"""Judging completions' programs: behaviour keys for votes, hidden tests for the gold reward.

Every run is two processes (docs/architecture.md, "Code judging"): the program, sandboxed
(corl.sandbox.session), runs the solution under a stub that answers calls with plain data
(corl.tasks.code.stub); the judge, a trusted process of our own (corl.tasks.code.judge),
runs the vote's calls (and, for the tests, the hidden tests after them) and reaches the
program only through two pipes. The verdict is the judge's one line on its own stdout,
which only this process reads: the program holds no secret and has no way to write there,
so nothing it does (exit, crash, loop, fork, print, read its own memory) can produce a pass.

A vote run and a tests run of one problem look the same to the program until the vote's
last call has been answered: the same program limits (`program_limits`: only the host's
wall, which the program cannot read, is longer for the tests), the same job up to the
tests, the same requests. The tests run goes on from there.
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from corl.sandbox import Limits, Result, SandboxPool, Status, close_default_pool, default_pool
from corl.sandbox.result import clean_text
from corl.sandbox.session import STOPPED, Session
from corl.tasks.code import stub
from corl.tasks.code.programs import entry_point, hidden_tests, public_inputs, solution_program, trusted_prompt

LOAD_S = 5.0  # defining the solution (imports, module-level code)
PER_INPUT_S = 2.0  # one public input; a loop on one input costs only that input's time
START_S = 2.0  # the program's start (sandbox, interpreter) on a loaded machine
TEST_WALL_S = 15.0  # the hidden tests, after the vote's calls
TESTS_CPU_S = 60  # the program's RLIMIT_CPU past the vote's budget, in every run (the program can read it)
JUDGE = str(Path(__file__).resolve().parent / "judge.py")
JUDGE_SLACK_S = 5.0  # the judge keeps its own deadlines; past them plus this, the host kills it
MAX_VERDICT = 1 << 20
JUDGE_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
# How the program ended, when the judge saw it end: refines the judge's "exit".
_ENDED = {Status.TIMEOUT: "timeout", Status.MEMORY: "memory", Status.OUTPUT_LIMIT: "output_limit", Status.KILLED: "killed"}


@dataclass(frozen=True)
class TestRun:
    """One program's hidden-test outcome."""

    __test__ = False  # not a pytest class

    passed: bool
    status: str  # ok (passed), error, timeout, exit, malformed, memory, killed, output_limit, judge (the judge's docstring)
    error: str | None
    wall_s: float


def judge(program: str, job: Mapping, limits: Limits, pool: SandboxPool) -> tuple[dict, Result]:
    """Run `program` sandboxed and the judge on `job` against it; (the judge's verdict, how the program ended)."""
    request_r, request_w = os.pipe()
    reply_r, reply_w = os.pipe()
    try:
        session = Session(program, request_r, reply_w, limits, pool.backend, pool.require_isolation)
    except BaseException:
        os.close(request_w)
        os.close(reply_r)
        raise
    finally:
        os.close(request_r)  # the program holds its ends now
        os.close(reply_w)
    verdict = {"status": "judge", "error": "the judge did not start"}
    try:
        verdict = _run_judge(job, request_w, reply_r, limits.wall_s + JUDGE_SLACK_S)
    finally:
        result = session.close(grace_s=0.5 if verdict.get("status") == "exit" else 0.0)
    return verdict, result


def _run_judge(job: Mapping, request_w: int, reply_r: int, timeout: float) -> dict:
    """The judge's verdict line; the judge holds the two pipe ends, this process closes its copies."""
    argv = [sys.executable, "-I", "-S", "-B", JUDGE, str(request_w), str(reply_r)]
    try:  # a judge that cannot start is a failed run, not an exception out of the batch
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(request_w, reply_r),
            env=JUDGE_ENV,  # nothing of the host's environment: the judge needs none of it
        )
    except OSError as e:
        return {"status": "judge", "error": f"the judge did not start: {e}"}
    finally:
        os.close(request_w)  # the program sees EOF once the judge ends
        os.close(reply_r)
    try:
        out, err = proc.communicate(json.dumps(job).encode(), timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"status": "timeout", "error": "the judge ran past its deadline"}
    lines = out[:MAX_VERDICT].decode("utf-8", "replace").strip().splitlines()
    try:  # exactly the one line the judge writes
        verdict = json.loads(lines[0]) if len(lines) == 1 else None
    except ValueError:
        verdict = None
    if not isinstance(verdict, dict):
        tail = err.decode("utf-8", "replace").strip()[-300:]
        return {"status": "judge", "error": f"the judge gave no verdict (exit {proc.returncode}): {tail}"}
    return verdict


def _free_names(*sources: str | None) -> tuple[set[str], set[str]]:
    """(names the sources read but never bind, other than builtins; those of them read as `name.attr`)."""
    read, bound, bases = set(), set(), set()
    for source in sources:
        for node in ast.walk(ast.parse(source or "")):
            if isinstance(node, ast.Name):
                (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                bases.add(node.value.id)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bound.add(node.name)
            elif isinstance(node, ast.alias):
                bound.add((node.asname or node.name).partition(".")[0])
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
    free = read - bound - set(dir(builtins))
    return free, free & bases


def module_names(*sources: str | None) -> list[str]:
    """Standard-library modules the sources read as `module.attr` without importing them: MBPP's tests found them
    in the solution's namespace (task 596's `sys.getsizeof`); the judge imports its own, trusted, copies."""
    free, bases = _free_names(*sources)
    return sorted(bases & set(sys.stdlib_module_names))


def program_names(*sources: str | None) -> list[str]:
    """Names the tests, setup or calls read but never bind, other than builtins and `module_names`: what they
    expect of the program."""
    return sorted(_free_names(*sources)[0] - set(module_names(*sources)))


def _names(*sources: str | None) -> list[str]:
    try:
        return program_names(*sources)
    except SyntaxError:
        return []  # the judge reports the tests' own syntax error


def _modules(*sources: str | None) -> list[str]:
    try:
        return module_names(*sources)
    except SyntaxError:
        return []


def _job(mode: str, problem: Mapping, calls: Sequence[str], setup: str, **fields) -> dict:
    """The vote's part of every job (the same in both modes), then the tests' fields."""
    with warnings.catch_warnings():  # MBPP's reference code holds "\\d" in plain strings: parsing it warns
        warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))
        prompt = trusted_prompt(problem)
        job = {"mode": mode, "entry_point": entry_point(problem), "prompt": prompt, "setup": setup, "calls": list(calls)}
        job.update(load_s=LOAD_S, per_s=PER_INPUT_S, start_s=START_S, call_names=[] if prompt else _names(setup, *calls))
        job["call_modules"] = _modules(setup, *calls)
        if "tests" in fields:
            job["program_names"] = [] if prompt else _names(setup, fields["tests"])
            job["modules"] = _modules(setup, fields["tests"])
    return {**job, **fields}


def behaviour_job(calls: Sequence[str], problem: Mapping) -> dict:
    """The judge's job for the public calls of `problem`."""
    return _job("calls", problem, calls, problem.get("test_setup_code") or "")


def tests_job(problem: Mapping, wall_s: float) -> dict:
    """The judge's job for the hidden tests of `problem`: the vote's calls first, as the vote makes them."""
    setup, tests = hidden_tests(problem)
    return _job("tests", problem, public_inputs(problem), setup, tests=tests, wall_s=wall_s)


def calls_budget_s(n_inputs: int) -> float:
    """The vote's calls at most: the start, the load, each input's limit and the judge's margin."""
    return LOAD_S + (PER_INPUT_S + 1.0) * n_inputs + START_S


def program_limits(n_inputs: int, tests_wall_s: float = 0.0) -> Limits:
    """The program's limits for a run with `n_inputs` vote calls: the same rlimits in both modes; the host's wall
    (which the program cannot read) runs `tests_wall_s` longer for the tests."""
    budget = calls_budget_s(n_inputs)
    return Limits(wall_s=budget + tests_wall_s, cpu_s=int(budget) + 1 + TESTS_CPU_S)


def behaviour_limits(n_inputs: int) -> Limits:
    return program_limits(n_inputs)


def behaviour_key(verdict: Mapping, n_inputs: int, all_errors_count: bool = False) -> str | None:
    """The vote key from the judge's outcome: JSON of [tag, text] per input; None when no input made a value, or when
    one did not answer in time (a TimeoutError: the tests ask that call again, so the key could not be held to it)."""
    outcome = verdict.get("outcome")
    if not isinstance(outcome, list) or len(outcome) != n_inputs:  # the host's guard on the judge stopped it: a timeout
        outcome = [["err", "TimeoutError" if verdict.get("status") == "timeout" else "Judge"]] * n_inputs
    if n_inputs == 0 or (not all_errors_count and all(tag == "err" for tag, _ in outcome)):
        return None
    if ["err", "TimeoutError"] in outcome:
        return None
    return json.dumps(outcome, ensure_ascii=False)


def test_outcome(verdict: Mapping, result: Result) -> TestRun:
    """Passed only on the judge's "ok"; an "exit" is named by how the program ended where the sandbox saw more."""
    status, error = verdict.get("status", "judge"), verdict.get("error")
    if status == "ok":
        return TestRun(True, "ok", None, result.wall_s)
    if status == "exit" and result.status in _ENDED and result.error_message != STOPPED:
        status = _ENDED[result.status]
        error = f"{error} ({': '.join(str(x) for x in (result.error_kind, result.error_message) if x)})"
    return TestRun(False, clean_text(status, 40), None if error is None else clean_text(error), result.wall_s)


def _pool(pool: SandboxPool | None) -> SandboxPool:
    return pool if pool is not None else default_pool()


def _judged(pool: SandboxPool | None, runs: Sequence[tuple[str, dict, Limits] | None]) -> list[tuple[dict, Result] | None]:
    """judge() of every run, at most the pool's `workers` at a time (None in, None out)."""
    pool = _pool(pool)
    with ThreadPoolExecutor(max_workers=pool.workers, thread_name_prefix="corl-judge") as ex:
        futures: list[Future | None] = [ex.submit(judge, *run, pool) if run is not None else None for run in runs]
        return [f.result() if f is not None else None for f in futures]


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
    runs = [
        (stub.program(prog), behaviour_job(c, p), behaviour_limits(len(c))) if prog is not None and c else None
        for prog, c, p in zip(programs, calls, rows)
    ]
    judged = _judged(pool, runs)
    keys = [behaviour_key(j[0], len(c), all_errors_count) if j is not None else None for j, c in zip(judged, calls)]
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


def run_tests(
    programs: Sequence[str | None], problems: Sequence[Mapping], pool: SandboxPool | None = None, wall_s: float | None = None
) -> list[TestRun | None]:
    """Hidden-test outcomes of already-built solution programs (None in, None out); `wall_s` bounds the tests
    themselves (default TEST_WALL_S), after the vote's calls."""
    wall_s = TEST_WALL_S if wall_s is None else wall_s
    runs = []
    for prog, p in zip(programs, problems, strict=True):
        job = tests_job(p, wall_s) if prog is not None else None
        runs.append((stub.program(prog), job, program_limits(len(job["calls"]), wall_s)) if job is not None else None)
    return [test_outcome(*j) if j is not None else None for j in _judged(pool, runs)]


def passes_tests_batch(
    texts: Sequence[str | None],
    problems: Sequence[Mapping] | Mapping,
    pool: SandboxPool | None = None,
    opened_fence: bool = False,
) -> list[bool]:
    """Gold reward per completion: its program passes the problem's hidden tests."""
    rows = [problems] * len(texts) if isinstance(problems, Mapping) else list(problems)
    programs = [solution_program(t, p, opened_fence) for t, p in zip(texts, rows, strict=True)]
    return [r is not None and r.passed for r in run_tests(programs, rows, pool)]


def passes_tests(text: str | None, problem: Mapping, pool: SandboxPool | None = None, opened_fence: bool = False) -> bool:
    """Gold reward of one completion (or bare code)."""
    return passes_tests_batch([text], [problem], pool, opened_fence)[0]


def behaviours_equal(a: str | None, b: str | None) -> bool:
    """Two answers agree when their behaviour keys are equal (keys are already canonical)."""
    return a is not None and a == b


def close() -> None:
    """Shut the lazily created sandbox pool down (it is recreated on next use)."""
    close_default_pool()
