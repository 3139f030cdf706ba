"""MBPP+ style hidden tests: calls the prompt does not show, answered by the row's reference code.

MBPP's prompt (lm-eval's format, corl.evaluation.code_eval) shows `test_list[:3]`, and the hidden tests
are that same list: a completion that turns the shown asserts into a lookup table passes
them without solving anything (pass@1 0.996, the `tests` reward 1.0). As EvalPlus does for
MBPP+, the hidden tests are extended here with calls on inputs the prompt does not show:

- the inputs are the vote's type-preserving mutants of the shown calls (corl.tasks.code.inputs.mutants:
  so every input the vote asks, but for those the reference cannot answer, is checked), then
  N_DOMAIN inputs across the input domain (corl.tasks.code.domain: a walk of type-aware
  steps within a contract inferred from the shown calls), both deterministic per row;
- the expected values come from the row's reference `code`, run through the same sandbox
  and judge as any candidate (corl.tasks.code.execute), twice: an input is kept only when both
  runs return the same value, the value is a Python literal (ast.literal_eval of its
  canonical text: no nan, inf, objects or cut texts) and neither run errored or timed out;
- each kept input becomes one assert: `assert f(x) == value` (a float value: within 1e-6,
  relative), run after the row's `test_list` (the row's `plus_tests`).

Computed once per row and process (cached by the row's id, reference code and tests).
Rows without `test_list` (HumanEval: its hidden tests already go beyond the docstring) or
without a reference `code` get no extra tests.
"""

from __future__ import annotations

import ast
import hashlib
import json
import threading
import warnings
from collections.abc import Mapping, Sequence

from corl.sandbox import SandboxPool
from corl.tasks.code import stub
from corl.tasks.code.domain import domain_inputs
from corl.tasks.code.execute import _judged, behaviour_job, behaviour_limits
from corl.tasks.code.inputs import mutants
from corl.tasks.code.programs import entry_point, shown_calls

N_DOMAIN = 24  # inputs across the domain per row, past the vote's mutants
_CACHE: dict[str, list[tuple[str, str]]] = {}  # row key -> (call, assert) of each kept input
_LOCK = threading.Lock()


def _key(row: Mapping) -> str:
    parts = [str(row.get("task_id")), row.get("code") or "", list(row.get("test_list") or ()), row.get("test_setup_code") or ""]
    return hashlib.sha256(json.dumps(parts).encode("utf-8", "backslashreplace")).hexdigest()


def plus_calls(row: Mapping) -> list[str]:
    """The unshown calls of an MBPP row: the vote's mutants of its shown calls, then inputs across the domain; []
    for other rows."""
    if not row.get("test_list") or not row.get("code") or entry_point(row) is None:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))
        shown = shown_calls(row)
        near = mutants(shown)
        return near + domain_inputs(shown, N_DOMAIN, exclude=near)


def _assert(call: str, text: str) -> str | None:
    """The assert that `call` returns the value whose canonical text is `text`; None when that is no literal."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if type(value) is float:
        return f"assert abs({call} - {text}) <= 1e-6 * max(1.0, abs({text}))"
    return f"assert {call} == {text}"


def plus_tests(rows: Sequence[Mapping], pool: SandboxPool | None = None) -> list[list[str]]:
    """The extra asserts of each row (module docstring); computed for rows not yet cached, two reference runs each."""
    return [[line for _, line in cases] for cases in plus_cases(rows, pool)]


def plus_cases(rows: Sequence[Mapping], pool: SandboxPool | None = None) -> list[list[tuple[str, str]]]:
    """(call, assert) of each row's extra tests, in order: what `plus_tests` asserts, with the call it makes."""
    rows = [{**r, "test_setup_code": r.get("test_setup_code") or "\n".join(r.get("test_imports") or ())} for r in rows]
    keys = [_key(r) for r in rows]
    with _LOCK:
        todo = {k: r for k, r in zip(keys, rows) if k not in _CACHE}
    calls = {k: plus_calls(r) for k, r in todo.items()}
    runs, owners = [], []
    for k, r in todo.items():
        if calls[k]:
            job = (stub.program(r["code"] + "\n"), behaviour_job(calls[k], r), behaviour_limits(len(calls[k])))
            runs += [job, job]
            owners.append(k)
    judged = _judged(pool, runs) if runs else []
    found = {k: [] for k in todo}
    for i, k in enumerate(owners):
        first, second = (judged[2 * i][0].get("outcome"), judged[2 * i + 1][0].get("outcome"))
        if not (isinstance(first, list) and isinstance(second, list) and len(first) == len(second) == len(calls[k])):
            continue
        for call, (tag, text), again in zip(calls[k], first, second):
            line = _assert(call, text) if tag == "ok" and type(text) is str and again == [tag, text] else None
            if line is not None:
                found[k].append((call, line))
    with _LOCK:
        _CACHE.update(found)
        return [list(_CACHE[k]) for k in keys]


def with_plus_tests(rows: Sequence[Mapping], pool: SandboxPool | None = None) -> list[dict]:
    """The rows with their extra asserts as `plus_tests`, which the hidden tests run after `test_list`
    (corl.tasks.code.programs.hidden_tests); `test_list`, and so the shown calls, stay the dataset's."""
    extra = plus_tests(rows, pool)
    return [{**r, "plus_tests": e} if e else dict(r) for r, e in zip(rows, extra)]
