"""The datasets' own solutions through the code judge: HumanEval 164/164, MBPP 500/500 (and 500/500 on MBPP+), and what judging costs.

    .venv/bin/python benchmarks/code_reference.py [--data ../shared/data] [--wall 60] [--workers 2] [--no-plus]

Every canonical HumanEval solution and every MBPP test reference program runs through
`corl.evaluation.code_eval.evaluate`'s path (the program sandboxed, the vote's calls then the
tests in the judge process of corl.tasks.code.judge, as `corl eval --task code` grades),
then, in the same run, the same programs as a bare sandboxed script (solution, then tests,
in one namespace and one process: no judge) for the time ratio. MBPP's references also run
their rows' extra tests (corl.tasks.code.plus, the `tests` reward's and pass@1+'s), which
their own answers made. The tests' wall is raised from the graders' 15 s so that a loaded
machine does not turn MBPP's slowest reference (task 123, ~5 s idle) into a timeout; the
pass counts are the point, timings are noisy.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from corl.evaluation.code_eval import evaluate
from corl.sandbox import Limits, SandboxPool, Status
from corl.tasks.code.execute import run_tests
from corl.tasks.code.plus import with_plus_tests
from corl.tasks.code.programs import hidden_tests
from corl.tasks.code.prompts import load_humaneval, load_mbpp, program_for, reference_solution


def judged_pass(rows, style: str, pool: SandboxPool, wall_s: float) -> tuple[int, list, float]:
    """(passed, failed records, seconds) of the references through the judge."""
    suffix = "\n[DONE]" if style == "mbpp" else ""
    programs = [program_for(r, reference_solution(r) + suffix, style) for r in rows]
    start = time.perf_counter()
    runs = run_tests(programs, rows, pool, wall_s)
    elapsed = time.perf_counter() - start
    report = evaluate(rows[:1], [[reference_solution(rows[0]) + suffix]], style, pool=pool)  # the eval path itself
    assert report.records[0].passed, report.records[0]
    failed = [(r["task_id"], run.status, run.error) for r, run in zip(rows, runs) if not run.passed]
    return len(rows) - len(failed), failed, elapsed


def bare_pass(rows, style: str, pool: SandboxPool, limits: Limits) -> tuple[int, float]:
    """(programs that exited 0, seconds): solution and tests exec'd in one namespace, no judge."""
    suffix = "\n[DONE]" if style == "mbpp" else ""
    sources = []
    for r in rows:
        setup, tests = hidden_tests(r)
        solution = program_for(r, reference_solution(r) + suffix, style)
        sources.append(f"_ns = {{'__name__': 'solution'}}\nexec({solution!r}, _ns)\nexec({setup + chr(10) + tests!r}, _ns)\n")
    start = time.perf_counter()
    results = pool.map(sources, limits=limits)
    return sum(r.status is Status.OK for r in results), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser.add_argument("--wall", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-plus", action="store_true", help="skip MBPP's extra tests (two reference runs a row)")
    args = parser.parse_args()
    limits = Limits(wall_s=args.wall, cpu_s=int(args.wall))
    suites = (
        ("HumanEval", load_humaneval(Path(args.data) / "humaneval" / "test.jsonl"), "humaneval"),
        ("MBPP", load_mbpp(Path(args.data) / "mbpp" / "test.jsonl"), "mbpp"),
    )
    with SandboxPool(workers=args.workers) as pool:
        for name, rows, style in suites:
            passed, failed, judged_s = judged_pass(rows, style, pool, args.wall)
            bare_ok, bare_s = bare_pass(rows, style, pool, limits)
            print(
                f"{name}: judged {passed}/{len(rows)} in {judged_s:.1f} s; bare {bare_ok}/{len(rows)} in {bare_s:.1f} s; "
                f"judged/bare time x{judged_s / bare_s:.2f}"
            )
            for f in failed:
                print("  failed:", f)
            if style == "mbpp" and not args.no_plus:
                plus_rows = with_plus_tests(rows, pool)
                extra = sum(len(r.get("plus_tests", ())) for r in plus_rows)
                passed, failed, judged_s = judged_pass(plus_rows, style, pool, args.wall)
                print(f"{name}+: judged {passed}/{len(rows)} on {extra} extra asserts in {judged_s:.1f} s")
                for f in failed:
                    print("  failed:", f)


if __name__ == "__main__":
    main()
