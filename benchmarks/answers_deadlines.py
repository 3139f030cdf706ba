"""How long corl.answers takes on hostile inputs, and whether every call kept its deadline.

Usage:
    python benchmarks/answers_deadlines.py            # the tests' 10,000 fuzz inputs
    python benchmarks/answers_deadlines.py --fuzz 2000 --draws 30

The timing half of tests/test_answers_properties.py and tests/test_answers.py (the tests
assert what the calls answer; how fast belongs here, where a loaded machine makes numbers
noisy rather than a test red). On the same inputs as the tests:

1. baseline: `answer_key` of a plain integer (the cheapest path), seconds per call;
2. fuzz: per input, extraction (both modes), key and a check against the previous input
   with a 0.3 s deadline: mean, p99 and worst per input, the total, and the mean as a
   multiple of the baseline;
3. deadlines: random pairs checked with a 0.2 s deadline: the worst time past it;
4. a hung worker (a task that sleeps an hour, 0.3 s deadline): when the pool ended it, on an
   idle pool and right after the fuzz (tasks its timed-out checks left queued come first);
5. the pathological inputs of tests/test_answers.py: seconds each, and x baseline.

Ratios are against the baseline measured in the same run: compare those across machines.
Prints figures; not a test.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from concurrent.futures import wait
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tests' inputs, exactly

from corl.answers import POOL, answer_key, extract_answer, is_equivalent  # noqa: E402
from test_answers import PATHOLOGICAL  # noqa: E402
from test_answers_properties import _fuzz_input, fuzz_inputs  # noqa: E402


def baseline_per_call(n: int = 5000) -> float:
    """Seconds per `answer_key` of a fresh plain integer (fresh: keys are cached)."""
    start = time.perf_counter()
    for i in range(n):
        answer_key(str(10**9 + i))
    return (time.perf_counter() - start) / n


def fuzz(texts: list[str]) -> list[float]:
    """Seconds per fuzz input: what tests/test_answers_properties.py's fuzz asks of each."""
    out = []
    for i, text in enumerate(texts):
        t = time.perf_counter()
        extract_answer(text, mode="strict")
        extract_answer(text, mode="flexible")
        answer_key(text)
        is_equivalent(text, texts[i - 1], timeout=0.3)
        out.append(time.perf_counter() - t)
    return out


def worst_overshoot(draws: int, deadline: float = 0.2) -> float:
    """The longest time a check with `deadline` ran past it, over random pairs (<= 0: kept)."""
    rng = random.Random(1)
    worst = -deadline
    for _ in range(draws):
        a, b = _fuzz_input(rng), _fuzz_input(rng)
        t = time.perf_counter()
        is_equivalent(a, b, timeout=deadline)
        worst = max(worst, time.perf_counter() - t - deadline)
    return worst


def hung_worker_ended_after(deadline: float = 0.3) -> float:
    """Seconds until the pool ended a task that sleeps an hour (queued tasks ahead of it count)."""
    pool = POOL._ready_pool()
    start = time.perf_counter()
    future = pool.schedule(time.sleep, (3600,), timeout=deadline)
    wait([future], timeout=600)
    took = time.perf_counter() - start
    is_equivalent("\\log_{2} 16", "4", timeout=120)  # a replacement is up before anything exits
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fuzz", type=int, default=10_000, help="fuzz inputs (the test's 10,000)")
    parser.add_argument("--draws", type=int, default=60, help="random pairs for the deadline check")
    args = parser.parse_args()

    is_equivalent("\\log_{2} 8", "3")  # the pool's one-time start is no call's cost
    base = baseline_per_call()
    hung_fresh = hung_worker_ended_after()
    times = fuzz(fuzz_inputs(args.fuzz))
    p99 = statistics.quantiles(times, n=100)[98] if len(times) >= 100 else max(times)
    print(f"baseline: answer_key of a plain integer, {1e6 * base:.1f} us a call")
    print()
    print("| measure | value | x baseline |")
    print("|---|---|---|")
    mean = statistics.fmean(times)
    print(f"| fuzz: mean per input ({len(times)} inputs) | {1e3 * mean:.2f} ms | {mean / base:.0f} |")
    print(f"| fuzz: p99 per input | {1e3 * p99:.2f} ms | {p99 / base:.0f} |")
    print(f"| fuzz: worst per input (deadline 0.3 s) | {max(times):.3f} s | {max(times) / base:.0f} |")
    print(f"| fuzz: total | {sum(times):.1f} s | |")
    print(f"| deadline 0.2 s: worst time past it ({args.draws} pairs) | {worst_overshoot(args.draws):+.3f} s | |")
    print(f"| hung worker (deadline 0.3 s), idle pool: ended after | {hung_fresh:.2f} s | |")
    print(f"| hung worker (deadline 0.3 s), right after the fuzz: ended after | {hung_worker_ended_after():.2f} s | |")
    for pred, gold, _ in PATHOLOGICAL:
        t = time.perf_counter()
        is_equivalent(pred, gold)
        answer_key(pred)
        took = time.perf_counter() - t
        print(f"| pathological {pred[:24]!r}... ({len(pred)} chars) | {1e3 * took:.2f} ms | {took / base:.0f} |")


if __name__ == "__main__":
    main()
