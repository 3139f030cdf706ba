"""Can the code vote be won by parroting the prompt? The docstring parrot's behaviour key against the canonical one.

    .venv/bin/python benchmarks/code_parroting.py [--data ../shared/data] [--workers 2] [--limit 164]

One fixed completion (PARROT) continues every HumanEval prompt: at run time it reads its
own function's docstring, parses the examples written there (`>>> f(x)` then the answer
line, or `f(x) ➞ y`, `f(x) == y`, `f(x) => y` ...) and returns the stated answer for a shown
input (the first stated answer otherwise). Its hidden-test pass@1 is ~0; if the behaviour
inputs were the shown examples, its key would equal the canonical solution's wherever the
examples are right. Printed: how many problems the canonical solution forms a key on (target
>= 85%), and on how many the parrot's key equals the canonical one (target <= 5%); then
the same with the shown examples alone as inputs (the key before corl.tasks.code.inputs).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from corl.sandbox import SandboxPool
from corl.tasks.code.execute import code_answers
from corl.tasks.code.programs import shown_calls
from corl.tasks.code.prompts import load_humaneval
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    rows = load_humaneval(Path(args.data) / "humaneval" / "test.jsonl")[: args.limit]
    views = [public_view(prepare_row(r)) for r in rows]
    shown = [{**v, "public_inputs": shown_calls(r)} for r, v in zip(rows, views)]
    with SandboxPool(workers=args.workers) as pool:
        for label, problems in (("mutated inputs + shown", views), ("shown examples alone", shown)):
            measure(label, rows, problems, pool)


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
