"""How long corl.answers takes on hostile inputs, and whether its verdicts hold on a loaded machine.

Usage:
    python benchmarks/answers_deadlines.py            # the tests' 10,000 fuzz inputs, 4 busy processes
    python benchmarks/answers_deadlines.py --fuzz 2000 --busy 8 --load-pairs 300

The timing half of tests/answers/test_answers_properties.py and tests/answers/test_answers.py (the tests
assert what the calls answer; how fast belongs here, where a loaded machine makes numbers
noisy rather than a test red). On the same inputs as the tests:

1. baseline: `answer_key` of a plain integer (the cheapest path), seconds per call;
2. fuzz: per input, extraction (both modes), key and a verdict against the previous input
   under the default guard: mean, p99 and worst per input, the total, the mean as a multiple
   of the baseline, and how many verdicts were unknown (the guard passed);
3. load: the costliest checks the tests know (`SLOW_CHECKS`, heavier symbolic identities, and the
   first `--load-pairs` fuzz pairs) asked on this machine as it is, then again (the verdict cache
   cleared; the workers' sympy caches stay warm) with `--busy` CPU-bound processes running: the
   unknown rate of each, the loaded time as a multiple of the idle one, and how many verdicts
   differ (issue 41: a verdict must be a function of its inputs; it must be 0). The test
   (test_verdicts_are_the_same_on_an_idle_and_a_loaded_machine) asks the loaded run first, with
   cold caches, the harshest order;
4. a hung worker (a task that sleeps an hour, 0.3 s pool timeout): when the pool ended it, on
   an idle pool and right after the fuzz;
5. the pathological inputs of tests/answers/test_answers.py: seconds each, and x baseline;
6. the work budget: a check that needs more than `MAX_SYMBOLIC_CALLS` (a true identity sympy needs
   ~7.5 M calls for), asked in a fresh pool as the machine is and with `--busy` CPU-bound
   processes: seconds until the budget cut it (its verdict must be False, never unknown) as a
   share of the wall guard `GUARD_S`; the CPU seconds the whole budget costs (the part of the
   wall time no load changes), and the machine's load average, which the wall times depend on
   (`--budget-only`: this part alone).

Ratios are against figures measured in the same run: compare those across machines.
Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import wait
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "answers"))  # the tests' inputs, exactly

from test_answers import PATHOLOGICAL  # noqa: E402
from test_answers_properties import SLOW_CHECKS, fuzz_inputs  # noqa: E402

from corl.answers import GUARD_S, MAX_SYMBOLIC_CALLS, POOL, answer_key, extract_answer, is_equivalent, verdict  # noqa: E402
from corl.answers.equivalence import _verdict_cached  # noqa: E402
from corl.answers.symbolic import CheckBudget, Timeout, budgeted_equiv  # noqa: E402

# symbolic identities that cost sympy the most calls in a fresh worker (~0.6-1.4 M, within the
# budget: see symbolic); \\log_b identities no longer reach sympy (the fast reader reads them)
HEAVY = [
    ("\\sum_{k=1}^{n} k^{60}", "\\sum_{j=0}^{n} j^{60}"),
    ("\\binom{x+2}{4}", "\\frac{(x+2)(x+1)x(x-1)}{24}"),
    ("\\sum_{k=1}^{n} k^2", "\\frac{n(n+1)(2n+1)}{6}"),
    ("\\sum_{k=1}^{n} k^3", "\\frac{n^2(n+1)^2}{4}"),
    ("\\sum_{k=1}^{n} k^{40}", "\\sum_{j=0}^{n} j^{40}"),
    ("\\int_0^{\\pi} \\sin^4 x dx", "\\frac{3\\pi}{8}"),
]


def baseline_per_call(n: int = 5000) -> float:
    """Seconds per `answer_key` of a fresh plain integer (fresh: keys are cached)."""
    start = time.perf_counter()
    for i in range(n):
        answer_key(str(10**9 + i))
    return (time.perf_counter() - start) / n


def fuzz(texts: list[str]) -> tuple[list[float], int]:
    """(seconds per fuzz input, unknown verdicts): what tests/answers/test_answers_properties.py's fuzz asks of each."""
    out, unknown = [], 0
    for i, text in enumerate(texts):
        t = time.perf_counter()
        extract_answer(text, mode="strict")
        extract_answer(text, mode="flexible")
        answer_key(text)
        unknown += verdict(text, texts[i - 1]) is None
        out.append(time.perf_counter() - t)
    return out, unknown


def ask(pairs: list[tuple[str, str]]) -> tuple[list, float]:
    """(verdicts, seconds) of pairs asked afresh (the parent's verdict cache cleared)."""
    _verdict_cached.cache_clear()
    start = time.perf_counter()
    got = [verdict(p, g) for p, g in pairs]
    return got, time.perf_counter() - start


@contextlib.contextmanager
def busy_processes(busy: int):
    """`busy` CPU-bound processes running for the duration of the block."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def under_load(pairs: list[tuple[str, str]], busy: int) -> tuple[list, float]:
    """`ask` while `busy` CPU-bound processes run."""
    with busy_processes(busy):
        return ask(pairs)


OVER_BUDGET = ("\\sum_{k=1}^{n} k^{200}", "\\sum_{j=0}^{n} j^{200}")  # true; ~7.5 M calls in a fresh worker


WARM_SUMS = ("\\sum_{k=1}^{n} k^{20}", "\\sum_{j=0}^{n} j^{20}")  # ~1.4 M calls: long enough that each worker takes one
PREVIOUS_BUDGET = 5_000_000  # the calls of the round before (issue 52: 21 s of the 30 s guard under load)


def budget_cuts(n: int, calls: int) -> list[tuple[float, bool | None]]:
    """(seconds, verdict) of the symbolic layer on `OVER_BUDGET` under a budget of `calls`, asked n
    times, each in a fresh pool (a worker's sympy cache keeps the partial work of a cut check)
    whose workers have imported what sums need; the pool's start is not timed. None: the wall
    guard passed first."""
    out = []
    for _ in range(n):
        POOL.close()
        pool = POOL._ready_pool()
        # each worker imports what sums need (one-time, uncounted work: a long-lived worker has it)
        wait([pool.schedule(budgeted_equiv, (*WARM_SUMS, MAX_SYMBOLIC_CALLS)) for _ in range(POOL.size)], timeout=600)
        start = time.perf_counter()
        try:
            got = POOL.check(*OVER_BUDGET, CheckBudget(GUARD_S, calls=calls))
        except Timeout:
            got = None
        out.append((time.perf_counter() - start, got))
    return out


def cpu_per_counted_call() -> float:
    """CPU seconds of one counted call, in this process: an over-budget check spent in full."""
    start = time.process_time()
    _, calls = budgeted_equiv(*OVER_BUDGET, MAX_SYMBOLIC_CALLS)
    return (time.process_time() - start) / calls


def report_budget(busy: int, n: int = 2) -> None:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    cpu = cpu_per_counted_call()
    print(f"| budget: machine: {os.cpu_count()} CPUs, load average at the start | {load} | |")
    print(f"| budget: CPU per counted call (this process) | {1e6 * cpu:.2f} us | |")
    for calls in (MAX_SYMBOLIC_CALLS, PREVIOUS_BUDGET):
        share = cpu * calls / GUARD_S
        print(
            f"| budget: CPU of a check that spends {calls:,} calls | {cpu * calls:.2f} s | {share:.0%} of the {GUARD_S:.0f} s guard |"
        )
    for name, procs in (("as the machine is", 0), (f"with {busy} busy processes", busy)):
        worst = {}
        with busy_processes(procs):
            for calls in (MAX_SYMBOLIC_CALLS, PREVIOUS_BUDGET):
                cut = budget_cuts(n, calls)
                worst[calls] = max(t for t, _ in cut)
                verdicts = ", ".join(sorted({str(v) for _, v in cut}))
                print(
                    f"| budget: {calls:,} calls, {name}: worst seconds until cut (verdicts; None: the guard) "
                    f"| {worst[calls]:.1f} s ({verdicts}) | {worst[calls] / GUARD_S:.0%} of the guard |"
                )
        print(
            f"| budget: {name}: this budget's cut / the previous one's | {worst[MAX_SYMBOLIC_CALLS] / worst[PREVIOUS_BUDGET]:.2f} | |"
        )


def hung_worker_ended_after(timeout: float = 0.3) -> float:
    """Seconds until the pool ended a task that sleeps an hour (queued tasks ahead of it count)."""
    pool = POOL._ready_pool()
    start = time.perf_counter()
    future = pool.schedule(time.sleep, (3600,), timeout=timeout)
    wait([future], timeout=600)
    took = time.perf_counter() - start
    is_equivalent("\\sum_{k=1}^{4} k", "10", timeout=120)  # a replacement is up before anything exits
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fuzz", type=int, default=10_000, help="fuzz inputs (the test's 10,000)")
    parser.add_argument("--busy", type=int, default=4, help="CPU-bound processes started for the load part")
    parser.add_argument("--load-pairs", type=int, default=500, help="fuzz pairs asked idle and under load")
    parser.add_argument("--budget-only", action="store_true", help="only the work budget's part (6.)")
    args = parser.parse_args()

    is_equivalent("\\sum_{k=1}^{3} k", "6")  # the pool's one-time start is no call's cost
    if args.budget_only:
        print("| measure | value | share |")
        print("|---|---|---|")
        report_budget(args.busy)
        return
    base = baseline_per_call()
    hung_fresh = hung_worker_ended_after()
    texts = fuzz_inputs(args.fuzz)
    times, fuzz_unknown = fuzz(texts)
    p99 = statistics.quantiles(times, n=100)[98] if len(times) >= 100 else max(times)
    print(f"baseline: answer_key of a plain integer, {1e6 * base:.1f} us a call")
    print()
    print("| measure | value | x baseline |")
    print("|---|---|---|")
    mean = statistics.fmean(times)
    print(f"| fuzz: mean per input ({len(times)} inputs) | {1e3 * mean:.2f} ms | {mean / base:.0f} |")
    print(f"| fuzz: p99 per input | {1e3 * p99:.2f} ms | {p99 / base:.0f} |")
    print(f"| fuzz: worst per input | {max(times):.3f} s | {max(times) / base:.0f} |")
    print(f"| fuzz: total | {sum(times):.1f} s | |")
    print(f"| fuzz: unknown verdicts | {fuzz_unknown} of {len(times)} | |")

    pairs = list(SLOW_CHECKS) + HEAVY + [(texts[i], texts[i - 1]) for i in range(1, args.load_pairs + 1)]
    idle, t_idle = ask(pairs)  # first: the idle baseline (its time includes the workers' cold caches)
    loaded, t_loaded = under_load(pairs, args.busy)
    differ = sum(a is not None and b is not None and a != b for a, b in zip(idle, loaded))
    print(f"| load: {len(pairs)} costly checks, as the machine is: unknown rate | {idle.count(None) / len(pairs):.4f} | |")
    print(f"| load: the same with {args.busy} busy processes: unknown rate | {loaded.count(None) / len(pairs):.4f} | |")
    print(f"| load: time loaded / as is | {t_loaded / t_idle:.2f} ({t_loaded:.1f} s / {t_idle:.1f} s) | |")
    print(f"| load: verdicts that differ (must be 0) | {differ} | |")

    print(f"| hung worker (pool timeout 0.3 s), idle pool: ended after | {hung_fresh:.2f} s | |")
    print(f"| hung worker (pool timeout 0.3 s), right after the load: ended after | {hung_worker_ended_after():.2f} s | |")
    _verdict_cached.cache_clear()
    for pred, gold, _ in PATHOLOGICAL:
        t = time.perf_counter()
        is_equivalent(pred, gold)
        answer_key(pred)
        took = time.perf_counter() - t
        print(f"| pathological {pred[:24]!r}... ({len(pred)} chars) | {1e3 * took:.2f} ms | {took / base:.0f} |")
    report_budget(args.busy)


if __name__ == "__main__":
    main()
