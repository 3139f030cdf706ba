"""Can the code vote or the `tests` reward be won by parroting the prompt?

    .venv/bin/python benchmarks/code_parroting.py [--data ../shared/data] [--workers 2] [--limit N] [--part vote|tests|all]

Part `vote` (HumanEval): one fixed completion (PARROT) continues every HumanEval prompt: at
run time it reads its own function's docstring, parses the examples written there
(`>>> f(x)` then the answer line, or `f(x) ➞ y`, `f(x) == y`, `f(x) => y` ...) and returns the
stated answer for a shown input (the first stated answer otherwise). Its hidden-test pass@1
is ~0; if the behaviour inputs were the shown examples, its key would equal the canonical
solution's wherever the examples are right. Printed: how many problems the canonical solution
forms a key on (target >= 85%), and on how many the parrot's key equals the canonical one
(target <= 5%); then the same with the shown examples alone as inputs (the key before
corl.tasks.code.inputs).

Part `tests` (MBPP, the `tests` reward and pass@1+): two policies that solve nothing, as
programs built from each row's three shown asserts (`assert f(args) == answer`, `assert
f(args)`, `assert not f(args)`): TABLE+NEAREST answers a shown call with its shown answer and
any other call like the nearest shown one (numbers by distance, strings by edit distance,
sequences item by item); TABLE+COMMON answers any other call with the most common shown answer.
Their pass@1+ is measured in one run on the row's tests plus the extra asserts on the vote's
mutants only (corl.tasks.code.plus before issue 52: one or two small edits of a shown call)
and on those plus the inputs across the domain (corl.tasks.code.domain): before / after.
"""

from __future__ import annotations

import argparse
import ast
import json
import time
from pathlib import Path

from corl.sandbox import SandboxPool
from corl.tasks.code.execute import code_answers, run_tests
from corl.tasks.code.inputs import mutants
from corl.tasks.code.plus import plus_cases
from corl.tasks.code.programs import entry_point, shown_calls
from corl.tasks.code.prompts import load_humaneval, load_mbpp
from corl.tasks.code.task import prepare_row, public_view

PARROT = """    import sys as _sys
    return _parrot(_sys._getframe(0))


def _parrot(frame):
    import ast
    import re
    code = frame.f_code
    name = code.co_name
    given = tuple(frame.f_locals[v] for v in code.co_varnames[: code.co_argcount])
    lines = (globals()[name].__doc__ or "").splitlines()
    table = []
    for i, line in enumerate(lines):
        for m in re.finditer(re.escape(name) + r"\\(", line):
            for end in range(m.end(), len(line) + 1):
                try:
                    call = ast.parse(line[m.start() : end].strip(), mode="eval").body
                    args = tuple(ast.literal_eval(a) for a in call.args)
                except Exception:
                    continue
                rest = line[end:].strip()
                for sep in ("==>", "➞", "==", "=>", "->", "→", "should return", "returns", "="):
                    if rest.startswith(sep):
                        rest = rest[len(sep) :].strip()
                        break
                if not rest and i + 1 < len(lines):
                    rest = lines[i + 1].strip()
                try:
                    table.append((args, ast.literal_eval(rest.rstrip(".,"))))
                except Exception:
                    pass
                break
    for args, answer in table:
        if args == given:
            return answer
    return table[0][1] if table else None
"""


POLICY = """
import copy
_SHOWN = {shown}
def _d(x, y):
    if isinstance(x, bool) or isinstance(y, bool) or x is None or y is None:
        return 0 if x == y else 1
    if isinstance(x, (int, float)) and isinstance(y, (int, float)):
        return abs(x - y)
    if isinstance(x, str) and isinstance(y, str):
        row = list(range(len(y) + 1))
        for i, a in enumerate(x, 1):
            prev, row[0] = row[0], i
            for j, b in enumerate(y, 1):
                prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (a != b))
        return row[-1]
    if isinstance(x, (list, tuple, set, frozenset)) and isinstance(y, (list, tuple, set, frozenset)):
        x, y = list(x), list(y)
        return abs(len(x) - len(y)) + sum(_d(a, b) for a, b in zip(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return _d(sorted(x.items(), key=repr), sorted(y.items(), key=repr))
    return 0 if x == y else 1e9
def {name}(*args, **kwargs):
    exact = [answer for a, k, answer in _SHOWN if a == args and k == kwargs]
    if exact:
        return copy.deepcopy(exact[0])
    return copy.deepcopy({fallback})
"""
NEAREST = "min(_SHOWN, key=lambda s: _d(list(s[0]) + sorted(s[1].items()), list(args) + sorted(kwargs.items())))[2]"
COMMON = "max(_SHOWN, key=lambda s: sum(repr(t[2]) == repr(s[2]) for t in _SHOWN))[2]"


def shown_answers(row: dict) -> list[tuple[tuple, dict, object]]:
    """(args, kwargs, answer) of each shown assert the policies can read; others are left out."""
    name, found = entry_point(row), []
    for test in row["test_list"][:3]:
        try:
            check = ast.parse(test).body[0].test
        except (SyntaxError, IndexError, AttributeError):
            continue
        call, answer = _call_and_answer(check, name)
        if call is None:
            continue
        try:
            found.append(
                (tuple(ast.literal_eval(a) for a in call.args), {k.arg: ast.literal_eval(k.value) for k in call.keywords}, answer)
            )
        except (ValueError, SyntaxError, TypeError):
            continue
    return found


def _call_and_answer(check, name):
    def is_call(node):
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name

    if is_call(check):
        return check, True
    if isinstance(check, ast.UnaryOp) and isinstance(check.op, ast.Not) and is_call(check.operand):
        return check.operand, False
    if isinstance(check, ast.Compare) and len(check.ops) == 1 and isinstance(check.ops[0], ast.Eq):
        for call, other in ((check.left, check.comparators[0]), (check.comparators[0], check.left)):
            if is_call(call):
                try:
                    return call, ast.literal_eval(other)
                except (ValueError, SyntaxError, TypeError):
                    return None, None
    return None, None


def policy_program(row: dict, fallback: str) -> str | None:
    shown = shown_answers(row)
    return POLICY.format(shown=repr(shown), name=entry_point(row), fallback=fallback) if shown else None


def measure_tests(rows: list, pool: SandboxPool) -> None:
    """pass@1+ of the two policies before (extra asserts on the vote's mutants only) and after (and the domain's)."""
    start = time.perf_counter()
    cases = plus_cases(rows, pool)
    near = [set(mutants(shown_calls(r))) for r in rows]
    before = [{**r, "plus_tests": [line for call, line in c if call in m]} for r, c, m in zip(rows, cases, near)]
    after = [{**r, "plus_tests": [line for _, line in c]} for r, c in zip(rows, cases)]
    n_before, n_after = sum(len(r["plus_tests"]) for r in before), sum(len(r["plus_tests"]) for r in after)
    print(
        f"MBPP ({len(rows)} rows): extra asserts {n_before} (mutants) -> {n_after} (and the domain's) [{time.perf_counter() - start:.0f} s]"
    )
    for label, fallback in (("TABLE+NEAREST", NEAREST), ("TABLE+COMMON", COMMON)):
        programs = [policy_program(r, fallback) for r in rows]
        plain = run_tests(programs, rows, pool)
        for when, plus_rows in (("before", before), ("after", after)):
            runs = run_tests([p if r is not None and r.passed else None for p, r in zip(programs, plain)], plus_rows, pool)
            passed = [row["task_id"] for row, r in zip(rows, runs) if r is not None and r.passed]
            print(
                f"  {label}: pass@1 {sum(r is not None and r.passed for r in plain) / len(rows):.3f}; pass@1+ {when}: "
                f"{len(passed) / len(rows):.3f} ({len(passed)}/{len(rows)}) {json.dumps(passed)}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--part", choices=("vote", "tests", "all"), default="all")
    args = parser.parse_args()
    with SandboxPool(workers=args.workers) as pool:
        if args.part in ("vote", "all"):
            rows = load_humaneval(Path(args.data) / "humaneval" / "test.jsonl")[: args.limit]
            views = [public_view(prepare_row(r)) for r in rows]
            shown = [{**v, "public_inputs": shown_calls(r)} for r, v in zip(rows, views)]
            for label, problems in (("mutated inputs + shown", views), ("shown examples alone", shown)):
                measure(label, rows, problems, pool)
        if args.part in ("tests", "all"):
            measure_tests(load_mbpp(Path(args.data) / "mbpp" / "test.jsonl")[: args.limit], pool)


def measure(label: str, rows: list, problems: list, pool: SandboxPool) -> None:
    texts = [t for row in rows for t in (row["canonical_solution"], PARROT)]
    start = time.perf_counter()
    _, keys = code_answers(texts, [p for p in problems for _ in range(2)], pool)
    canonical, parrot = keys[0::2], keys[1::2]
    formed = sum(k is not None for k in canonical)
    matched = [r["task_id"] for r, c, p in zip(rows, canonical, parrot) if c is not None and c == p]
    n = len(rows)
    print(
        f"HumanEval, {label}: canonical forms a key on {formed}/{n} ({formed / n:.1%}); the docstring parrot "
        f"matches it on {len(matched)}/{n} ({len(matched) / n:.1%}) [{time.perf_counter() - start:.0f} s]"
    )
    if matched:
        print("  parrot matched:", ", ".join(matched))


if __name__ == "__main__":
    main()
