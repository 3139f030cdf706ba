"""Running completions' programs in the sandbox: behaviour keys for votes, hidden tests for the gold reward.

Every program runs inside the harness of `corl.tasks.code_harness` (what it guarantees is
written there), with its job and a fresh random nonce on stdin; only output lines that
carry the nonce count. A test run passes only on the harness's one "pass" verdict with the
run's second secret, its pass token: a program that exits early, in any way, leaves none
and fails.
"""

from __future__ import annotations

import json
import secrets
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from corl.sandbox import Limits, Result, SandboxPool, Status, close_default_pool, default_pool
from corl.tasks import code_harness
from corl.tasks.code import entry_point, hidden_tests, public_inputs, solution_program, trusted_prompt

LOAD_S = 5.0  # defining the solution (imports, module-level code)
PER_INPUT_S = 2.0  # one public input; a loop on one input costs only that input
START_S = 2.0  # the harness's own start (interpreter, module copies) on a loaded machine
TEST_LIMITS = Limits(wall_s=15.0, cpu_s=15)
PROGRAM = code_harness.program()  # the same main.py for every run: the job comes on stdin
# Inputs without a line from the harness: what ended the run before it reached them.
_MISSING = {
    Status.TIMEOUT: "TimeoutError",
    Status.MEMORY: "MemoryError",
    Status.OUTPUT_LIMIT: "OutputLimit",
    Status.KILLED: "Killed",
}


@dataclass(frozen=True)
class TestRun:
    """One program's hidden-test outcome."""

    __test__ = False  # not a pytest class

    passed: bool
    status: str  # ok (passed), error (a test or the solution raised), memory, exit (no verdict), or the sandbox's timeout/output_limit/killed
    error: str | None
    wall_s: float


def new_nonce() -> str:
    return secrets.token_hex(16)


def harness_lines(stdout: str, nonce: str) -> list[str]:
    """The payloads of the lines the harness wrote in this run (those that carry its nonce)."""
    prefix = code_harness.MARK + nonce + " "
    return [line[len(prefix) :] for line in stdout.split("\n") if line.startswith(prefix)]  # not splitlines(): \x1e splits it


def _job(mode: str, nonce: str, solution: str, problem: Mapping, **fields) -> str:
    with warnings.catch_warnings():  # MBPP's reference code holds "\\d" in plain strings: parsing it warns
        warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))
        entry = entry_point(problem)
    job = {"mode": mode, "nonce": nonce, "solution": solution, "entry_point": entry, "prompt": trusted_prompt(problem)}
    return json.dumps({**job, **fields})


def behaviour_job(solution: str, calls: Sequence[str], problem: Mapping, nonce: str) -> str:
    """The harness's stdin for the public calls of `problem` on `solution`."""
    setup = problem.get("test_setup_code") or ""
    return _job("behaviour", nonce, solution, problem, setup=setup, calls=list(calls), load_s=LOAD_S, per_s=PER_INPUT_S)


def tests_job(solution: str, problem: Mapping, nonce: str, pass_token: str) -> str:
    """The harness's stdin for the hidden tests of `problem` on `solution`."""
    setup, tests = hidden_tests(problem)
    return _job("tests", nonce, solution, problem, setup=setup, tests=tests, pass_token=pass_token)


def behaviour_limits(n_inputs: int) -> Limits:
    budget = LOAD_S + PER_INPUT_S * n_inputs + START_S
    return Limits(wall_s=budget, cpu_s=int(budget) + 1)


def behaviour_key(
    stdout: str, nonce: str, n_inputs: int, status: Status = Status.OK, all_errors_count: bool = False
) -> str | None:
    """The vote key from a harness run: JSON of [tag, text] per input; None when no input made a value (unless all_errors_count).

    Inputs the harness never reported read as the way the run ended (TimeoutError, MemoryError,
    OutputLimit, Killed, else EarlyExit): a program that exits cannot leave a forged value behind.
    """
    seen: dict[int, list[str]] = {}
    for payload in harness_lines(stdout, nonce):
        index, _, rest = payload.partition(" ")
        tag, _, text = rest.partition(" ")
        if tag in ("ok", "err") and index.lstrip("-").isdigit():
            seen.setdefault(int(index), [tag, text])
    if -1 in seen:
        outcome = [["err", seen[-1][1]]] * n_inputs
    else:
        outcome = [seen.get(i, ["err", _MISSING.get(status, "EarlyExit")]) for i in range(n_inputs)]
    if n_inputs == 0 or (not all_errors_count and all(tag == "err" for tag, _ in outcome)):
        return None
    return json.dumps(outcome, ensure_ascii=False)


def test_outcome(result: Result, nonce: str, pass_token: str) -> TestRun:
    """Passed only on the harness's one verdict "pass <token>"; no verdict is a failure named by how the run ended."""
    verdicts = [p for p in harness_lines(result.stdout, nonce) if p.startswith(("pass", "fail "))]
    wall = result.wall_s
    if verdicts == ["pass " + pass_token]:
        return TestRun(True, "ok", None, wall)
    if len(verdicts) > 1 or (verdicts and not verdicts[0].startswith("fail ")):
        return TestRun(False, "error", f"forged: {len(verdicts)} verdicts, or a pass without this run's token", wall)
    if verdicts:
        error = verdicts[0][len("fail ") :]
        return TestRun(False, "memory" if error.startswith("MemoryError") else "error", error, wall)
    if result.status not in (Status.OK, Status.ERROR):
        return TestRun(
            False, result.status.value, ": ".join(str(x) for x in (result.error_kind, result.error_message) if x), wall
        )
    why = f" ({result.error_kind}: {result.error_message})" if result.error_kind else ""
    return TestRun(False, "exit", f"exit: the program ended before its tests did, exit code {result.returncode}{why}", wall)


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
    futures = []
    for i, (prog, c, p) in enumerate(zip(programs, calls, rows)):
        if prog is not None and c:
            nonce = new_nonce()
            futures.append((i, nonce, _pool(pool).submit(PROGRAM, behaviour_job(prog, c, p, nonce), behaviour_limits(len(c)))))
    keys: list[str | None] = [None] * len(texts)
    for i, nonce, fut in futures:
        result = fut.result()
        keys[i] = behaviour_key(result.stdout, nonce, len(calls[i]), result.status, all_errors_count)
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
    programs: Sequence[str | None], problems: Sequence[Mapping], pool: SandboxPool | None = None, limits: Limits | None = None
) -> list[TestRun | None]:
    """Hidden-test outcomes of already-built solution programs (None in, None out)."""
    run_secrets = [(new_nonce(), new_nonce()) for _ in programs]  # (nonce, pass token) per run
    futures = [
        _pool(pool).submit(PROGRAM, tests_job(prog, p, *secret), limits or TEST_LIMITS) if prog is not None else None
        for prog, p, secret in zip(programs, problems, run_secrets, strict=True)
    ]
    return [test_outcome(f.result(), *secret) if f is not None else None for f, secret in zip(futures, run_secrets)]


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
